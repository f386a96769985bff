"""benchmarks/compare_host.py runs end to end: the previous release's package extracted
from git and this checkout's, loaded in one process on the no-op HIP library, both
serving every timed relu(x, out=y) on their kernel paths. Nothing here judges a time:
a few rounds of a few calls, only what the tool produced is checked. And its extraction
of the old release keeps every member inside the folder, on any Python 3.11."""

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "benchmarks" / "compare_host.py"
ROUNDS, CALLS = 3, 40



def _unavailable():
    from vgpu.build import find_cc

    if find_cc() is None:
        return "no C compiler (gcc/cc/clang): cannot build the no-op libamdhip64.so.7"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return "not a git checkout: the old release is extracted with git archive"
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "849434f^{commit}"], capture_output=True)
    if known.returncode:
        return "revision 849434f is not in this clone (a shallow clone?)"
    try:
        import toolchain

        toolchain.find_tool("ld.lld")
    except FileNotFoundError as e:
        return f"LLVM 22 tools missing ({e})"
    return None


@pytest.mark.compile  # the old release JIT-compiles its kernel (FlyDSL, lld-22)
@pytest.mark.parametrize("stream, ex", [(0, True), (0x5EED0, False)], ids=["null-stream", "other-stream"])
def test_compare_host_pairs_both_kernel_paths(tmp_path, stream, ex):
    why = _unavailable()
    if why:
        pytest.skip(why)
    out = tmp_path / "compare.json"
    r = subprocess.run([sys.executable, str(TOOL), "--rounds", str(ROUNDS), "--calls", str(CALLS),
                        "--stream", hex(stream), "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "new / old" in r.stdout and "compare_host: timing" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["against"] == "849434f" and doc["stream"] == stream
    timed = ROUNDS * CALLS
    # both packages took the kernel path for every timed call, per their dispatch_stats()
    assert doc["path"].startswith("flydsl/") and doc["path"].endswith("/float32"), doc["path"]
    assert doc["dispatch_stats"] == {"new": {doc["path"]: timed}, "old": {doc["path"]: timed}}
    assert doc["launches"] == 2 * timed
    # the new fast path launches with hipDrvLaunchKernelEx on the null stream only
    assert doc["ex_launches"] == (timed if ex else 0)
    ratio = doc["paired"]["new / old"]
    assert isinstance(ratio, float) and ratio > 0
    assert len(doc["per_round_new_over_old"]) == ROUNDS
    assert set(doc["rows"]) == {"new relu(x, out=y)", "old relu(x, out=y)", "torch.clamp_min(x, 0, out=y)"}


# ---- extracting the old release: tarfile's "data" filter where it exists (3.11.4+), else checked members
FILTERS = [pytest.param(False, id="checked-members")] + (
    [pytest.param(True, id="data-filter")] if hasattr(tarfile, "data_filter") else [])


def _tar(path, *members):
    """A tar of (name, kind, payload): kind "file" (payload: bytes), "dir", "link" (payload: target), "hard"."""
    with tarfile.open(path, "w") as t:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size, info.mode = len(payload), 0o6777
                t.addfile(info, io.BytesIO(payload))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "link": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind]
            info.linkname = payload or ""
            t.addfile(info)
    return path


def _extract(tmp_path, filtered, *members):
    from benchmarks.compare_host import extract_all

    dest = tmp_path / "dest"
    dest.mkdir()
    with tarfile.open(_tar(tmp_path / "t.tar", *members)) as t:
        extract_all(t, dest, filtered)
    return dest


@pytest.mark.parametrize("filtered", FILTERS)
def test_the_release_layout_extracts_with_its_link(tmp_path, filtered):
    """What git archive gives for the package: folders, files and the flash_relu_rocm link."""
    dest = _extract(tmp_path, filtered, ("flash_relu_rocm", "dir", None), ("flash_relu_rocm/plan.py", "file", b"p"),
                    ("torch-ext/relu_flydsl/_ops.py", "file", b"o"),
                    ("torch-ext/relu_flydsl/flash_relu_rocm", "link", "../../flash_relu_rocm"))
    assert (dest / "torch-ext" / "relu_flydsl" / "flash_relu_rocm" / "plan.py").read_bytes() == b"p"
    mode = (dest / "flash_relu_rocm" / "plan.py").stat().st_mode & 0o7777
    assert mode & 0o7022 == 0, oct(mode)  # no setuid/setgid/sticky, no group or other write


ESCAPES = {
    "dotdot-name": [("a/../../evil", "file", b"x")],
    "absolute-link": [("l", "link", "{tmp}")],
    "link-above": [("a/l", "link", "../../evil")],
    "file-through-link": [("l", "link", "."), ("l/../evil", "file", b"x")],
    "hard-link": [("h", "hard", "{tmp}/t.tar")],
    "link-through-link": [("l", "link", "."), ("m", "link", "l/../evil")],
}
# The checked members refuse these; the "data" filter keeps them inside the folder
STRICTER = {
    "absolute-name": [("{tmp}/evil", "file", b"x")],
    "name-through-link": [("d", "dir", None), ("l", "link", "d"), ("l/f", "file", b"x")],
}


def _members(case, tmp_path):
    """ESCAPES[case] or STRICTER[case], absolute names pointing into tmp_path: where one escaped,
    it is seen there and lands nowhere else."""
    return [tuple(v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for v in m)
            for m in {**ESCAPES, **STRICTER}[case]]


@pytest.mark.parametrize("filtered", FILTERS)
@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_no_member_lands_outside_the_folder(tmp_path, filtered, case):
    with pytest.raises(tarfile.TarError):
        _extract(tmp_path, filtered, ("ok", "file", b"ok"), *_members(case, tmp_path))
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("filtered", FILTERS)
@pytest.mark.parametrize("case", sorted(STRICTER))
def test_an_absolute_name_or_a_path_through_a_link_stays_inside(tmp_path, filtered, case):
    if filtered:
        _extract(tmp_path, True, *_members(case, tmp_path))
    else:
        with pytest.raises(tarfile.TarError, match="through|outside"):
            _extract(tmp_path, False, *_members(case, tmp_path))
        assert not (tmp_path / "dest" / "d").exists(), "a member was written before the check ended"
    assert not (tmp_path / "evil").exists()
