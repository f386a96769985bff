"""benchmarks/compare_host.py runs end to end: the previous release's package extracted
from git and this checkout's, loaded in one process on the no-op HIP library, both
serving every timed relu(x, out=y) on their kernel paths. Nothing here judges a time:
a few rounds of a few calls, only what the tool produced is checked."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "benchmarks" / "compare_host.py"
ROUNDS, CALLS = 3, 40

pytestmark = pytest.mark.compile  # the old release JIT-compiles its kernel (FlyDSL, lld-22)


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
