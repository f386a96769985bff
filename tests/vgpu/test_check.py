"""The hardware check shipped in the variant (`python FOLDER check`, relu_flydsl.check(),
_check.py), run from the BUILT variant in a child process that cannot import this checkout's
packages: on the virtual gfx950 it passes; a kernel whose canary fails, or one that writes out
of bounds with the canary off, makes it exit 1 naming the cases; on the CPU (no HIP runtime)
it exits 5 with the reason. The health check's verdict (`python FOLDER`) too; a copy with a
changed, missing or added file fails both (exit 1). Exit statuses are pytest's: 0 passed, 1 a
failure, 4 a usage error, 5 nothing tested.

The emulator is slow: the virtual-device runs check a few kernels (--kernels); on hardware
the check runs every shipped kernel."""

import importlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from relu_flydsl import __main__ as cli  # imported here: tests/mutants_check.py mutates it before a test runs

ROOT = Path(__file__).resolve().parents[2]
# the kernels the virtual-device runs check: the default rung's widest bf16 kernel (also the
# sweep's), the one-element rung in float32 (the mutant's), and int8's 16-wide vector
PASS_KERNELS = "v5/bfloat16/x8,v1/float32/x1,v4/int8/x16"
MUTANT_KERNEL = ("v1", "float32", 1)

def declare_new_outputs(dev, relu, name="check's new output"):
    """relu() that tells the virtual device about the output relu(x) allocates (the check cannot
    see it first): declared for the call's launch, forgotten after (the allocator reuses it)."""

    def declared(x, out=None, **kwargs):
        if out is None:
            dev.fresh_output(x.numel() * x.element_size(), name=name)
        try:
            return relu(x, out=out, **kwargs)
        finally:
            dev._fresh = None
            for memory in dev.memories:
                for region in [r for r in memory.regions if r.name == name]:
                    memory.remove(region)

    return declared


# Runs in the child: the variant alone (the checkout's folders leave sys.path, and its packages
# must not be found), loaded as `python FOLDER` loads it; on the virtual gfx950 the device hooks
# (tools/vgpu/serve.py) go in before the command runs.
CHILD = r'''
import importlib, importlib.util, json, os, runpy, sys, time
spec = json.loads(sys.argv[1])
root, folder = spec["root"], spec["folder"]


def inside(p):  # the checkout's own folders (its virtual environment, torch's home, stays)
    p = os.path.abspath(p or os.curdir)
    venv = os.path.join(root, ".venv")
    return (p == root or p.startswith(root + os.sep)) and not (p == venv or p.startswith(venv + os.sep))


if spec["vgpu"]:
    sys.path.insert(0, os.path.join(root, "tools"))
    import toolchain
    import vgpu
    from vgpu.serve import serve

    toolchain.apply()
    dev = vgpu.device()
    dev.straddle, dev.stream = "dword", 0
sys.path[:] = [p for p in sys.path if not inside(p)]
importlib.invalidate_caches()
for name in ("relu_flydsl", "flash_relu_rocm", "benchmarks"):
    assert name not in sys.modules and importlib.util.find_spec(name) is None, f"{name} is importable"
if spec["vgpu"]:
    cli = runpy.run_path(os.path.join(folder, "__main__.py"), run_name="_relu_check_loader")["_load_folder"]()
    pkg = sys.modules[cli.__package__]
    assert os.path.dirname(os.path.abspath(pkg.__file__)) == folder, pkg.__file__
    serve(dev, pkg)
    exec(spec["helper"])
    pkg.relu = declare_new_outputs(dev, pkg.relu)
    if spec["sweep"]:  # CPU tensors have no device events: a wall-clock stand-in, tiny shapes
        pkg._check.SWEEP_SHAPES = tuple(tuple(s) for s in spec["sweep"])
        pkg._check.SWEEP_ITERS, pkg._check.SWEEP_WARMUP, pkg._check.SWEEP_ROUNDS = 2, 1, 2

        def time_launches(fn, iters, warmup, host=False):
            for _ in range(warmup):
                fn()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            return pkg._timing.Timing((time.perf_counter() - t0) / iters)

        pkg._timing.time_launches = time_launches
found = {}
if spec.get("kernels"):  # as kernels loads it (the commands below then find it loaded)
    import pathlib

    import kernels

    result = kernels.get_local_kernel(pathlib.Path(folder)).check(bandwidth=False, progress=False)
    found["get_kernel"] = [result.exit_code, result.ok, result.tested, result.failed, str(result)]
codes = []
for argv in spec["argv"]:  # each as `python FOLDER *argv` runs it
    sys.argv = [folder] + argv
    print(f"CHILD-COMMAND {argv}", flush=True)
    try:
        runpy.run_path(folder, run_name="__main__")
        codes.append(0)
    except SystemExit as e:
        codes.append(e.code)
found["codes"] = codes
if spec["vgpu"]:
    found["violations"] = [str(v) for v in dev.violations]
    found["errors"] = [f"{type(e).__name__}: {e}" for e in dev.errors]
print("CHILD-RESULT " + json.dumps(found), flush=True)
'''


def run_variant(folder, commands, cwd, vgpu=False, sweep=None, env=(), via_kernels=False):
    """`python FOLDER *argv` for each argv of `commands`, in one child process that cannot import
    the checkout's packages; (exit codes, what the child found, each command's stdout, stderr)."""
    import inspect

    child = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_") and k != "PYTHONPATH"}
    child.update(env)
    spec = {"root": str(ROOT), "folder": str(folder), "argv": [list(a) for a in commands], "vgpu": vgpu,
            "sweep": sweep, "helper": inspect.getsource(declare_new_outputs), "kernels": via_kernels}
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], cwd=cwd, env=child, capture_output=True,
                       text=True, timeout=600)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("CHILD-RESULT ")), None)
    assert line and r.returncode == 0, f"the child failed (exit {r.returncode})" + shown(r)
    found = json.loads(line.split(" ", 1)[1])
    outs = [part.split("\n", 1)[1] if "\n" in part else "" for part in
            r.stdout.replace(line + "\n", "").split("CHILD-COMMAND ")[1:]]
    return found["codes"], found, outs, r.stderr


def shown(r):
    return f"\n--- stdout (tail)\n{r.stdout[-6000:]}\n--- stderr (tail)\n{r.stderr[-4000:]}"


def said(out, err):
    return f"\n--- stdout (tail)\n{out[-6000:]}\n--- stderr (tail)\n{err[-3000:]}"


@pytest.fixture(scope="module")
def variant(variant_build):
    import build_variant

    return variant_build / "build" / build_variant.VARIANT


# ---- on the CPU: nothing to test, and it says why -------------------------------------------
def test_the_checks_from_the_folder_on_the_cpu_say_nothing_was_tested_and_why(variant, tmp_path):
    """`python FOLDER check` exits 5 naming the reason and writes its report in the current
    folder; `python FOLDER` (the health check) says what it found, and no OK; with
    --require-gfx950 it exits 5. A usage error exits 4. The variant loaded by kernels: its
    check() says the same. Each --help names a command that runs: `python FOLDER ...`."""
    commands = [["check"], [], ["--require-gfx950"], ["check", "--kernels", "v9"], ["--json", "--bogus"], ["--help"],
                ["check", "--help"]]
    codes, found, (out, health, required, _, _, helped, check_help), err = run_variant(variant, commands, tmp_path,
                                                                                      via_kernels=True)
    assert codes == [5, 0, 5, 4, 4, 0, 0], said(out + health, err)
    err, helped, check_help = (" ".join(t.split()) for t in (err, helped, check_help))  # argparse wraps lines
    typed = f"{shlex.quote(sys.executable)} {variant}"  # the interpreter as the child was started: it runs
    assert f"usage: {typed} check [-h]" in err and "check: error: check(): no shipped kernel matches 'v9'" in err
    assert f"usage: {typed} [-h]" in err and f"{variant}: error: unrecognized arguments: --bogus" in err
    assert helped.startswith(f"usage: {typed} [-h]") and check_help.startswith(f"usage: {typed} check")
    assert "exit status: 0 OK, or no gfx950 served (without --require-gfx950); 1 a PROBLEM, such as a shipped file " \
           "failing its sha256; 4 a usage error; 5 no gfx950 served, with --require-gfx950" in helped
    assert "exit status: 0 every case passed; 1 a failure, named (a case, or a shipped file failing its sha256); " \
           "4 a usage error; 5 nothing was tested" in check_help
    shown_command = shlex.split(helped.split("usage: ", 1)[1].split(" [-h]")[0])  # the command --help names, run
    r = subprocess.run([*shown_command, "check", "--kernels", "v9"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert shown_command[0] == sys.executable and r.returncode == 4 and "no shipped kernel matches 'v9'" in r.stderr, shown(r)
    code, ok, tested, failed, verdict = found["get_kernel"]  # kernels.get_local_kernel(FOLDER).check()
    assert (code, ok, tested, failed) == (5, False, 0, []) and verdict.startswith("relu_flydsl check NOT TESTED")
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("relu_flydsl check NOT TESTED: nothing was tested: "), said(out, err)
    assert "no HIP runtime (libamdhip64) is loaded" in verdict and "is a CPU-only build, not ROCm" in verdict
    report = json.loads((tmp_path / "relu_flydsl_check.json").read_text())  # the default: in the current folder
    assert f"report: {tmp_path / 'relu_flydsl_check.json'}" in out
    assert report["exit_code"] == 5 and report["tested"] == 0 and report["verdict"] == verdict
    meta = json.loads((variant / "metadata.json").read_text())
    assert report["package"]["name"] == meta["id"] and report["package"]["folder"] == str(variant)
    assert report["package"]["digest"].startswith("verified") and report["package"]["fingerprint"].startswith("sha256:")
    for text in (health, required):
        lines = text.strip().splitlines()
        assert not [ln for ln in lines if ln.startswith("OK")], text
        assert lines[-1].startswith("NO GFX950 SERVED: no HIP runtime (libamdhip64) is loaded"), text


# ---- a broken download: both gates fail ----------------------------------------------------
TAMPERINGS = ("a changed byte", "a missing file", "an added file")
BROKEN = "PROBLEM: a shipped file fails its sha256 (above): the download is broken or was changed"


def tamper(folder, how) -> str:
    """The variant at `folder` with a code object changed (a byte appended) or missing, or a file
    added; what the digest check says about it."""
    obj = sorted((folder / "code_objects").glob("*.co"))[0]
    name = obj.relative_to(folder).as_posix()
    if how == "a changed byte":
        obj.write_bytes(obj.read_bytes() + b"\0")
        return f"File hash mismatch for {name}"
    if how == "a missing file":
        obj.unlink()
        return f"Missing file: {name}"
    (folder / "notes.txt").write_text("added\n")
    return "Unknown file: notes.txt"


@pytest.mark.parametrize("how", TAMPERINGS)
def test_a_broken_download_fails_both_gates_from_the_folder(variant, tmp_path, how):
    """A copy of the variant with a changed, missing or added file, no gfx950 here: `python FOLDER`
    (the health check, no flags) and `python FOLDER check` exit 1; the health check says so once."""
    copy = tmp_path / "torch-rocm"
    shutil.copytree(variant, copy)
    digest_says = tamper(copy, how)
    codes, _, (health, out), err = run_variant(copy, [[], ["check", "--no-progress"]], tmp_path)
    assert codes == [1, 1], said(health + out, err)
    lines = health.strip().splitlines()
    assert [ln for ln in lines if ln.startswith(("PROBLEM", "OK", "NO GFX950"))] == [BROKEN], health
    (files,) = [ln for ln in lines if ln.startswith("files:")]
    assert files.startswith("files:          FAILED: ") and digest_says in files and health.count(digest_says) == 1
    objects = [ln for ln in lines if "does not match its sha256" in ln or "unreadable" in ln]
    assert len(objects) == (how != "an added file"), health  # the code objects' own check, one line
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("relu_flydsl check FAILED: 1 failed (0 cases run); first: variant digest: "), verdict
    assert digest_says in verdict


def test_a_broken_download_fails_both_gates_in_this_process(variant_build, tmp_path, monkeypatch, capsys):
    """This process's package on tampered copies (the kill test of tests/mutants_check.py's gate
    mutants). Its code objects with a changed byte, no digest to check (the checkout has no
    metadata.json): the health check exits 1. The variant's files with one added: check() fails,
    exit 1, naming "variant digest"; the health check exits 1."""
    import relu_flydsl
    from relu_flydsl import _check, _objects
    from relu_flydsl._state import STATE

    built = variant_build / "build" / "torch-rocm"
    objects, added = tmp_path / "objects", tmp_path / "added"
    for copy in (objects, added):
        shutil.copytree(built, copy)
    tamper(objects, "a changed byte")
    digest_says = tamper(added, "an added file")
    try:
        _fresh()
        shipped = _objects.OBJECTS_DIR
        monkeypatch.setattr(_objects, "OBJECTS_DIR", objects / "code_objects")
        assert cli.main([]) == 1
        text = capsys.readouterr().out
        assert text.strip().splitlines()[-1] == BROKEN and "files:          not checked: not a built variant" in text
        monkeypatch.setattr(_objects, "OBJECTS_DIR", shipped)  # (not undo(): a mutant may be set through it)
        _fresh()
        real = _check._package_info
        monkeypatch.setattr(_check, "_package_info", lambda folder=None: real(folder or str(added)))
        r = relu_flydsl.check(bandwidth=False, progress=False)
        assert (r.exit_code, r.failed, r.tested) == (1, ["variant digest"], 0), r.text
        assert str(r).startswith("relu_flydsl check FAILED: 1 failed (0 cases run); first: variant digest: ")
        assert digest_says in r.report["evidence"]["variant digest"] and r.report["package"]["digest"].startswith("FAILED")
        assert cli.main([]) == 1 and capsys.readouterr().out.strip().splitlines()[-1] == BROKEN
    finally:
        STATE.reset()


def test_exit_statuses_and_help_of_the_installed_package(capsys, monkeypatch):
    """`python -m relu_flydsl`: a usage error exits 4, never argparse's 2; --help names the
    interpreter as it was typed (`python3 -m relu_flydsl` on Debian, which has no `python`), and
    that command runs."""
    _fresh()
    monkeypatch.setattr(cli, "_PYTHON", "python3")  # as sys.orig_argv gives it there (a child below: as typed)
    for argv in (["check", "--kernels", "v9"], ["--bogus"], ["check", "--no-such-flag"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 4, argv
    assert "python3 -m relu_flydsl check: error: check(): no shipped kernel matches 'v9'" in capsys.readouterr().err
    for argv, usage in (([], "usage: python3 -m relu_flydsl [-h]"), (["check"], "usage: python3 -m relu_flydsl check")):
        with pytest.raises(SystemExit) as e:
            cli.main(argv + ["--help"])
        assert e.value.code == 0 and capsys.readouterr().out.startswith(usage)
    r = subprocess.run([sys.executable, "-m", "relu_flydsl", "check", "--kernels", "v9"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 4 and f"usage: {shlex.quote(sys.executable)} -m relu_flydsl check" in r.stderr, shown(r)


# ---- on the virtual gfx950 ----------------------------------------------------------------
@pytest.mark.vgpu
def test_check_passes_on_the_virtual_gfx950(variant, vgpu_device, tmp_path):
    report = tmp_path / "r.json"
    (code,), found, (out,), err = run_variant(variant, [["check", "--kernels", PASS_KERNELS, "-o", str(report)]],
                                              tmp_path, vgpu=True, sweep=[(64, 64)])
    assert code == 0, said(out, err)
    assert found["violations"] == [] and found["errors"] == [], found
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 0 and doc["failed"] == [] and doc["tested"] == len(doc["cases"]) > 0
    assert out.strip().splitlines()[-1] == doc["verdict"] and doc["verdict"].startswith("relu_flydsl check PASSED")
    assert {c["kernel"] for c in doc["cases"]} == set(PASS_KERNELS.split(","))
    assert all(c["result"] == "passed" and c["evidence"] is None for c in doc["cases"])
    seen = {(c["layout"], c["out"]) for c in doc["cases"]}
    assert {("contiguous", "out="), ("contiguous", "out=x"), ("contiguous", "a new output"), ("transposed", "out="),
            ("transposed", "a new output"), ("channels_last", "out="), ("channels_last", "out=x"),
            ("permuted", "out=")} <= seen
    assert any(c["offsets"] != [0, 0] for c in doc["cases"])
    sizes = {c["numel"] for c in doc["cases"] if c["kernel"] == "v1/float32/x1" and c["layout"] == "contiguous"}
    assert {1, 7, 1023, 4257, 100000} <= sizes
    # the sweep: each timed rung on its kernel path, the timed buffers judged; a table
    rows = doc["bandwidth"]["rows"]
    assert {r["impl"] for r in rows} == {"v5", "torch"} and all(r["result"] == "passed" and r["gbps"] for r in rows)
    table = [[c.strip() for c in ln.strip("|").split("|")] for ln in out.splitlines() if ln.startswith("| ")]
    assert table[0] == ["shape (bfloat16)", "v5", "torch", "best / torch"], said(out, err)
    assert table[1][0] == "64 x 64" and table[1][3].endswith("x") and float(table[1][3][:-1]) >= 0, table
    assert "relu_flydsl check: bandwidth" in err and "relu_flydsl check: cases" in err  # the progress bars


def mutant_variant(variant, root, name):
    """A copy of the built variant whose v1/float32/x1 code object is rebuilt from the
    mutant's patched v1 source (tests/mutation_support.py), stamped as a build stamps it."""
    import build_variant
    import mutation_support as M
    from flash_relu_rocm import build

    mutant = M.BY_NAME[name]
    dst = root / name / build_variant.VARIANT
    shutil.copytree(variant, dst)
    for patch in mutant.patches:
        M.apply_patch(dst / patch[0], patch)
    package = f"_relu_check_mutant_{name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(package, dst / "flash_relu_rocm" / "__init__.py",
                                                  submodule_search_locations=[str(dst / "flash_relu_rocm")])
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    rung_name, dtype, vec = MUTANT_KERNEL
    rung = importlib.import_module(f"{package}.registry").RUNGS[rung_name]
    objects = dst / "code_objects"
    manifest = json.loads((objects / build.MANIFEST).read_text())
    toolchain, codeobj = build._load_tool("toolchain"), build._load_tool("vgpu/codeobj")
    with build._BuildEnv(toolchain.compile_env()):
        data = build.compile_kernel(rung, dtype, vec)
    entry = build.describe(data, rung, dtype, vec, codeobj, toolchain.find_tool("llvm-objdump"))
    key = build.kernel_key(rung_name, dtype, vec)
    assert entry["sha256"] != manifest["kernels"][key]["sha256"], "the mutant built the shipped kernel"
    (objects / entry["file"]).write_bytes(data)
    manifest["kernels"][key] = entry
    (objects / build.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    unique_id = build_variant.source_id(dst)
    build_variant.stamp_ops(dst, unique_id)
    build_variant.write_metadata(dst, build_variant.read_build_toml(), unique_id)
    return dst


@pytest.fixture(scope="module")
def off_by_one(variant, vgpu_device, tmp_path_factory):
    """v1's in-bounds test `<` -> `<=`: every launch of a size that is no multiple of the block
    writes (and reads) one element past the end."""
    return mutant_variant(variant, tmp_path_factory.mktemp("check-mutants"), "off-by-one")


# (canary, what names the failure): with the canary on, it fails first and the kernel is never
# used, so the check's cases took torch's fallback; with it off the kernel runs, and the check's
# own guard regions (and, for a new output, the device's memory checks) catch it
MUTANT_RUNS = {"on": "the kernel path did not run: took fallback/canary failed v1/float32/x1 on device 0; "
                     "its canary on device 0: guard after the output written at byte 0 past the output's end",
               "off": "guard after the output written at byte 0 past the output's end"}


@pytest.mark.vgpu
@pytest.mark.parametrize("canary", sorted(MUTANT_RUNS))
def test_check_fails_on_a_mutant_kernel_naming_the_cases(off_by_one, tmp_path, canary):
    report = tmp_path / "r.json"
    env = {} if canary == "on" else {"RELU_FLYDSL_CANARY": "0"}
    (code,), found, (out,), err = run_variant(off_by_one, [["check", "--kernels", "v1/float32/x1,v5/bfloat16/x8",
                                                            "--no-bandwidth", "-o", str(report)]], tmp_path,
                                              vgpu=True, env=env)
    assert code == 1, said(out, err)
    doc = json.loads(report.read_text())
    failed = [c for c in doc["cases"] if c["result"] == "failed"]
    assert failed and {c["kernel"] for c in failed} == {"v1/float32/x1"}, said(out, err)
    assert all(c["result"] == "passed" for c in doc["cases"] if c["kernel"] == "v5/bfloat16/x8")
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith(f"relu_flydsl check FAILED: {len(failed)} failed ({len(doc['cases'])} cases run); "
                              "first: v1/float32/x1 "), verdict
    given = [c for c in failed if c["out"] == "out=" and c["layout"] == "contiguous" and c["offsets"] == [0, 0]]
    assert given and all(c["evidence"].startswith(MUTANT_RUNS[canary]) for c in given), given[:2]
    for c in failed:
        assert f"FAILED {c['case']} on device 0: {c['evidence']}" in out or len(failed) > 20
    if canary == "off":  # the new output has no guard here: the device stopped the write past its end
        new = [c for c in failed if c["out"] == "a new output"]
        assert new and all(c["evidence"].startswith("relu() raised RuntimeError") for c in new), new
        assert found["violations"], "the write past a new output was not seen by the device"


# ---- in this process: the checkout's package (the kill tests of tests/mutants_check.py) ------
# (no fixtures beyond pytest's own and tests/conftest.py's: tests/test_mutations.py runs them)
def _fresh():
    """The dispatch state of a fresh process: status() lists a device that earlier tests ran kernels on."""
    from relu_flydsl._state import STATE

    STATE.reset()


def test_check_on_the_cpu_tests_nothing_and_says_why():
    import relu_flydsl

    _fresh()

    r = relu_flydsl.check(bandwidth=False, progress=False)
    assert (r.exit_code, r.ok, r.tested, r.failed) == (5, False, 0, []), r.text
    assert str(r).startswith("relu_flydsl check NOT TESTED: nothing was tested: ") and "CPU-only build" in str(r)
    assert r.report["reason"] in str(r) and r.report["exit_code"] == 5 and r.text.endswith(str(r))
    with pytest.raises(ValueError, match="no shipped kernel matches 'v9'"):
        relu_flydsl.check(bandwidth=False, kernels="v9", progress=False)


def test_the_health_check_says_ok_only_where_a_gfx950_is_served(monkeypatch, capsys):
    from relu_flydsl import _dispatch, _hip

    _fresh()

    monkeypatch.setattr(_dispatch, "device_archs", lambda: {0: "gfx942"})
    assert cli.main([]) == 0 and cli.main(["--require-gfx950"]) == 5
    lines = capsys.readouterr().out.splitlines()
    assert not [ln for ln in lines if ln.startswith("OK")]
    assert lines[-1] == "NO GFX950 SERVED: no gfx950 among the devices (device 0: gfx942); every call takes torch's kernel"
    monkeypatch.setattr(_dispatch, "device_archs", lambda: {0: "gfx950"})
    monkeypatch.setattr(_hip, "unavailable", lambda: None)
    monkeypatch.setattr(_hip, "runtime_path", lambda: "/opt/rocm/lib/libamdhip64.so.7")
    assert cli.main(["--require-gfx950"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: the kernels serve device 0 (gfx950)")


@pytest.mark.vgpu
def test_check_catches_a_write_past_the_output(vgpu, monkeypatch):
    """A relu() that writes one byte past the first out= output it is given: the check fails
    that case, and only it, with the guard's evidence."""
    import torch

    import relu_flydsl

    served = declare_new_outputs(vgpu, relu_flydsl.relu)
    hit = []

    def relu(x, out=None, **kwargs):
        y = served(x, out=out, **kwargs)
        if out is not None and out is not x and not hit:
            raw = torch.empty(0, dtype=torch.uint8).set_(out.untyped_storage())
            raw[(out.storage_offset() + out.numel()) * out.element_size()] = 0
            hit.append(True)
        return y

    monkeypatch.setattr(relu_flydsl, "relu", relu)
    r = relu_flydsl.check(bandwidth=False, kernels="v5/bfloat16/x8", progress=False)
    assert r.exit_code == 1 and len(r.failed) == 1 and r.tested > 1, r.text
    assert r.report["evidence"][r.failed[0]] == "guard after the output written at byte 0 past the output's end " \
                                                "(0xA5 -> 0x00)", r.text
    assert str(r).startswith(f"relu_flydsl check FAILED: 1 failed ({r.tested} cases run); first: v5/bfloat16/x8 ")


@pytest.mark.vgpu
def test_check_fails_every_case_its_kernel_did_not_serve(vgpu, monkeypatch):
    """A kernel whose first-use canary fails is never used: every case of it fails, saying
    the call took torch's fallback and why, though torch's bits would pass many."""
    import relu_flydsl
    from relu_flydsl import _canary

    judge = _canary.Canary.judge

    def canary_fails(self, *args, **kwargs):
        return "a wrong kernel (simulated)" if self.out == _canary.GIVEN else judge(self, *args, **kwargs)

    monkeypatch.setattr(_canary.Canary, "judge", canary_fails)
    monkeypatch.setattr(relu_flydsl, "relu", declare_new_outputs(vgpu, relu_flydsl.relu))
    with pytest.warns(RuntimeWarning, match="canary failed v5/bfloat16/x8 on device 0: a wrong kernel"):
        r = relu_flydsl.check(bandwidth=False, kernels="v5/bfloat16/x8", progress=False)
    assert r.exit_code == 1 and len(r.failed) == r.tested > 1, r.text
    for case in r.report["cases"]:
        assert case["evidence"] == ("the kernel path did not run: took fallback/canary failed v5/bfloat16/x8 on "
                                    "device 0; its canary on device 0: a wrong kernel (simulated)"), case


def test_each_reason_nothing_can_be_tested(monkeypatch):
    """No HIP runtime, a CPU or CUDA torch, no device visible, no gfx950: each named; the kill switch too."""
    import torch

    import relu_flydsl
    from relu_flydsl import _check, _dispatch, _hip

    _fresh()
    monkeypatch.setattr(_hip, "unavailable", lambda: _hip.MISSING)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert _check.nothing_to_test({}) == f"{_hip.MISSING}; torch {torch.__version__} is a CUDA 13.0 build, not ROCm"
    monkeypatch.setattr(torch.version, "cuda", None)
    assert _check.nothing_to_test({}).endswith("is a CPU-only build, not ROCm")
    monkeypatch.setattr(_hip, "unavailable", lambda: None)
    monkeypatch.setattr(torch.version, "hip", "7.0.0")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    assert _check.nothing_to_test({}) == (f"no ROCm device is visible to torch {torch.__version__} (ROCm 7.0.0); "
                                          "HIP_VISIBLE_DEVICES=''")
    assert _check.nothing_to_test({0: "gfx942", 1: "gfx90a"}) == \
        "no gfx950 among the devices (device 0: gfx942, device 1: gfx90a)"
    assert _check.nothing_to_test({0: "gfx942", 1: "gfx950"}) is None
    monkeypatch.setattr(_dispatch, "device_archs", lambda: {0: "gfx950"})
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    r = relu_flydsl.check(progress=False)
    assert r.exit_code == 5 and r.tested == 0 and "RELU_FLYDSL_DISABLE is on" in str(r), r.text
