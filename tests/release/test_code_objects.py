"""The prebuilt gfx950 code objects (flash_relu_rocm/build.py): the manifest's
schema, every kernel the planner can choose present, each sha256 right, the
variant shipping the source tree's bytes, stale objects detected, the pinned
FlyDSL enforced, and the bytes reproducible from the sources."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from flash_relu_rocm import build, plan
from flash_relu_rocm.dtypes import ELEMENT_BYTES
from flash_relu_rocm.registry import DTYPES, RUNGS, VECTOR_BYTES

OBJECTS = build.OBJECTS_DIR
ENTRY_KEYS = {"rung", "dtype", "vec", "block", "file", "symbol", "kernarg_size", "args", "sha256"}
# X pointer, X numel (i32), Y pointer, Y numel (i32): what the runtime packs.
LADDER_ARGS = [{"offset": 0, "size": 8, "kind": "global_buffer"}, {"offset": 8, "size": 4, "kind": "by_value"},
               {"offset": 16, "size": 8, "kind": "global_buffer"}, {"offset": 24, "size": 4, "kind": "by_value"}]
# A few kernels for the rebuild checks: each rung once, each dtype, narrow and wide vectors.
SAMPLE = ["v1/float16/x1", "v2/float32/x4", "v3/bfloat16/x2", "v4/float16/x8", "v5/bfloat16/x8"]


@pytest.fixture(scope="module")
def manifest():
    reason = build.stale(OBJECTS)
    assert reason is None, f"the source tree's code objects are stale ({reason}): run `bash test.sh` or " \
                           "`.venv/bin/python -m flash_relu_rocm.build`"
    return build.read_manifest(OBJECTS)


def planner_choices():
    """Every (rung, dtype, vec) that plan.plan() picks over sizes and pointer
    alignments (computed from the planner, not from the build's own list)."""
    seen = set()
    for rung in RUNGS.values():
        for dtype in DTYPES:
            esize = ELEMENT_BYTES[dtype]
            for numel in range(1, 65):
                for offset in range(0, VECTOR_BYTES // esize + 1):
                    p = plan.plan(rung, dtype, numel, 4096 + offset * esize, 8192)
                    seen.add((rung.name, dtype, p.vec))
    return seen


def test_source_tree_objects_are_current(manifest):
    """test.sh rebuilds stale objects before pytest; no test may run on stale ones."""
    assert build.stale(OBJECTS) is None


def test_manifest_schema(manifest):
    assert manifest["format"] == 1 and manifest["arch"] == "gfx950"
    assert set(manifest) == {"format", "arch", "toolchain", "source_sha256", "kernels", "entry"}
    entry = manifest["entry"]  # the compiled entry (flash_relu_rocm/build.py build_entry)
    assert set(entry) == {"file", "abi", "toolchain", "source_sha256", "sha256"}
    assert entry["file"] == build.ENTRY_FILE and entry["abi"] == build.ENTRY_ABI == "cp310-abi3"
    assert entry["source_sha256"] == build.entry_source_sha256(entry["toolchain"])
    assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])
    assert manifest["toolchain"]["flydsl"] == build.PINNED_FLYDSL == "0.5.0"
    assert re.fullmatch(r".*LLD \d+\.\d+\.\d+.*", manifest["toolchain"]["llvm"]), manifest["toolchain"]
    assert set(manifest["toolchain"]) == {"flydsl", "llvm"}
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["source_sha256"])
    assert manifest["source_sha256"] == build.source_sha256(manifest["toolchain"])
    for key, entry in manifest["kernels"].items():
        assert set(entry) == ENTRY_KEYS, key
        assert key == f"{entry['rung']}/{entry['dtype']}/x{entry['vec']}"
        assert entry["block"] == RUNGS[entry["rung"]].block
        assert entry["file"] == entry["symbol"] + ".co"
        assert entry["symbol"].startswith(f"relu_{RUNGS[entry['rung']].module}_{entry['dtype']}_x{entry['vec']}_b{entry['block']}")
        assert entry["kernarg_size"] == 28 and entry["args"] == LADDER_ARGS, key
        assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])


def test_every_planner_kernel_is_built(manifest):
    choices = planner_choices()
    assert len(choices) == 68  # 5 rungs x 4 dtypes; vec 1..16 bytes / element size for the vectorized ones
    assert {(e["rung"], e["dtype"], e["vec"]) for e in manifest["kernels"].values()} == choices
    assert {(r.name, d, v) for r, d, v in build.kernel_specs()} == choices


def test_each_file_matches_its_sha256_and_nothing_else_is_there(manifest):
    files = {e["file"] for e in manifest["kernels"].values()}
    assert sorted(p.name for p in OBJECTS.iterdir()) == sorted(files | {"manifest.json", manifest["entry"]["file"]})
    entry = (OBJECTS / manifest["entry"]["file"]).read_bytes()
    assert hashlib.sha256(entry).hexdigest() == manifest["entry"]["sha256"] and entry[:4] == b"\x7fELF"
    for key, entry in manifest["kernels"].items():
        data = (OBJECTS / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], key
        assert data[:4] == b"\x7fELF"


def test_manifest_describes_each_code_object_from_its_own_metadata(manifest):
    """Symbol, block, arguments and kernarg size as the ELF's AMDGPU metadata note states them."""
    import toolchain
    from vgpu import codeobj

    objdump = toolchain.find_tool("llvm-objdump")
    for key, entry in manifest["kernels"].items():
        co = codeobj.CodeObject((OBJECTS / entry["file"]).read_bytes(), objdump, "gfx950")
        assert list(co.kernels) == [entry["symbol"]], key
        kernel = co.kernels[entry["symbol"]]
        assert kernel.meta[".reqd_workgroup_size"][0] == entry["block"]
        assert kernel.kernarg_size == entry["kernarg_size"]
        assert [{"offset": a[".offset"], "size": a[".size"], "kind": a[".value_kind"]} for a in kernel.args] == entry["args"]
        assert co.meta["amdhsa.target"].endswith("gfx950")


def test_the_variant_ships_the_source_trees_bytes(manifest, tmp_path):
    import build_variant

    out = tmp_path / "relu-build"
    metadata = build_variant.build(out)
    shipped = out / "build" / "torch-rocm" / "code_objects"
    assert sorted(p.name for p in shipped.iterdir()) == sorted(p.name for p in OBJECTS.iterdir())
    for path in OBJECTS.iterdir():
        assert (shipped / path.name).read_bytes() == path.read_bytes(), path.name
        assert f"code_objects/{path.name}" in metadata["digest"]["files"], path.name


# ---- staleness ---------------------------------------------------------------
@pytest.fixture
def copies(manifest, tmp_path):
    """A copy of the sources and of the objects, to doctor."""
    sources = tmp_path / "flash_relu_rocm"
    shutil.copytree(build.SOURCE_DIR, sources, ignore=shutil.ignore_patterns("__pycache__"))
    objects = tmp_path / "code_objects"
    shutil.copytree(OBJECTS, objects)
    assert build.stale(objects, sources) is None
    return sources, objects


def test_a_changed_rung_makes_the_objects_stale(copies):
    sources, objects = copies
    rung = sources / "v5_nontemporal.py"
    rung.write_text(rung.read_text() + "\n# an edit\n")
    assert "flash_relu_rocm/*.py changed" in build.stale(objects, sources)


def test_a_new_source_file_makes_the_objects_stale(copies):
    sources, objects = copies
    (sources / "_helpers.py").write_text("")
    assert "changed" in build.stale(objects, sources)


def test_another_toolchain_makes_the_objects_stale(copies, manifest):
    sources, objects = copies
    for tools in ({**manifest["toolchain"], "flydsl": "0.4.2"}, {**manifest["toolchain"], "llvm": "LLD 23.0.0"}):
        assert "toolchain changed" in build.stale(objects, sources, tools)


def test_the_manifest_holds_no_python_patch_version_and_no_build_path(manifest, monkeypatch):
    """The manifest is in the release digest, so it records only what changes the shipped bytes:
    the entry's headers as major.minor (the limited-API entry is the same from any patch
    release: Debian 12's 3.11.2 and a pyenv 3.11.7 give one digest), and no path."""
    import collections
    import platform

    minor = "%d.%d" % sys.version_info[:2]
    assert manifest["entry"]["toolchain"]["python_headers"] == minor
    text = (OBJECTS / build.MANIFEST).read_text()
    assert not re.search(rf"\b{re.escape(minor)}\.\d", text), "a Python patch version in the manifest"
    for path in (ROOT, OBJECTS, Path.home(), Path(sys.prefix), Path(sys.base_prefix)):
        assert str(path) not in text, f"{path} in the manifest"
    # another patch release of this interpreter: the same toolchain record, the same entry inputs
    tools = build.entry_toolchain()
    info = collections.namedtuple("version_info", "major minor micro releaselevel serial")(*sys.version_info[:2], 99,
                                                                                            "final", 0)
    monkeypatch.setattr(sys, "version_info", info)
    monkeypatch.setattr(sys, "version", f"{minor}.99 (main) [GCC]")
    monkeypatch.setattr(platform, "python_version", lambda: f"{minor}.99")
    assert build.entry_toolchain() == tools == manifest["entry"]["toolchain"]
    assert build.entry_stale(OBJECTS) is None


@pytest.mark.parametrize("damage", ["flip", "delete", "manifest", "kernel"])
def test_damaged_objects_are_stale(copies, manifest, damage):
    sources, objects = copies
    entry = manifest["kernels"]["v3/bfloat16/x2"]
    path = objects / entry["file"]
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1
        path.write_bytes(bytes(data))
        assert f"{entry['file']} does not match its sha256" in build.stale(objects, sources)
    elif damage == "delete":
        path.unlink()
        assert f"{entry['file']} is missing" in build.stale(objects, sources)
    elif damage == "manifest":
        (objects / "manifest.json").unlink()
        assert "no manifest.json" in build.stale(objects, sources)
    else:
        data = json.loads((objects / "manifest.json").read_text())
        del data["kernels"]["v3/bfloat16/x2"]
        (objects / "manifest.json").write_text(json.dumps(data))
        assert "missing ['v3/bfloat16/x2']" in build.stale(objects, sources)


# ---- the pinned FlyDSL ---------------------------------------------------------
@pytest.mark.parametrize("installed", ["0.3.2", None])
def test_another_flydsl_is_refused_by_name(monkeypatch, tmp_path, installed):
    monkeypatch.setattr(build, "flydsl_version", lambda: installed)
    with pytest.raises(build.BuildError) as e:
        build.build_objects(tmp_path / "objects")
    message = str(e.value)
    assert "FlyDSL 0.5.0" in message and "flydsl==0.5.0" in message
    assert ("FlyDSL 0.3.2 is installed" if installed else "FlyDSL is not installed") in message
    assert not (tmp_path / "objects").exists()


# ---- reproducible bytes --------------------------------------------------------
def _fresh_build(out: Path, home: Path, checkout: Path = ROOT):
    """The sample kernels built in a new process from `checkout`: its own HOME
    and FlyDSL cache folder, the disk cache off, so nothing is read from an
    earlier compile."""
    home.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "FLYDSL_RUNTIME_CACHE_DIR": str(home / "flydsl-cache"),
           "FLYDSL_RUNTIME_ENABLE_CACHE": "0"}
    r = subprocess.run([sys.executable, "-m", "flash_relu_rocm.build", "--out", str(out), "--kernels", ",".join(SAMPLE)],
                       cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (home / "flydsl-cache").exists() or not any((home / "flydsl-cache").rglob("*"))
    return build.read_manifest(out)


def test_two_builds_give_identical_bytes_and_match_the_shipped_objects(manifest, tmp_path):
    """The second build runs from a copy of the checkout at another path: the
    bytes depend on neither the process nor where the sources lie."""
    first = _fresh_build(tmp_path / "a", tmp_path / "home-a")
    elsewhere = tmp_path / "another" / "checkout"
    for part in ("flash_relu_rocm", "tools"):
        shutil.copytree(ROOT / part, elsewhere / part, ignore=shutil.ignore_patterns("__pycache__", "build"))
    (elsewhere / build.ENTRY_SOURCE.relative_to(ROOT)).parent.mkdir(parents=True)
    shutil.copy2(build.ENTRY_SOURCE, elsewhere / build.ENTRY_SOURCE.relative_to(ROOT))
    second = _fresh_build(tmp_path / "b", tmp_path / "home-b", elsewhere)
    # the compiled entry: the same bytes from both, and the shipped ones
    name = build.ENTRY_FILE
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes() == (OBJECTS / name).read_bytes()
    assert first["entry"] == second["entry"] == manifest["entry"]
    assert sorted(first["kernels"]) == sorted(SAMPLE)
    for key in SAMPLE:
        name = manifest["kernels"][key]["file"]
        a, b = (tmp_path / "a" / name).read_bytes(), (tmp_path / "b" / name).read_bytes()
        assert a == b, f"{key}: two builds differ"
        assert a == (OBJECTS / name).read_bytes(), f"{key}: a fresh build differs from the shipped object"
        assert first["kernels"][key] == second["kernels"][key] == manifest["kernels"][key]
    assert first["source_sha256"] == second["source_sha256"] == manifest["source_sha256"]
