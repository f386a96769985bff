"""tests/hardware/test_hardware.py, the suite a gfx950 user runs first, run as pytest
runs it, with RELU_FLYDSL_HARDWARE_TARGET=vgpu (tests/hardware_vgpu.py): its own test
functions, fixtures and assertions against the built variant (tools/build_variant.py)
on the virtual gfx950. It must pass there, every test the real-hardware run collects
either passing or skipped for the emulator's size cap; and it must fail for mutant
plans, each failure in a test of a mutated rung only."""

import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

import hardware_vgpu
import mutation_support as M
import vgpu_support

pytestmark = pytest.mark.vgpu
SUITE = M.ROOT / "tests" / "hardware" / "test_hardware.py"
# the mutants' runs: test_bit_exact_and_guard_region on random inputs up to 4257 elements (a few seconds)
MUTANT_MAX_ELEMENTS = 4257


def run_suite(variant, junit, max_elements=None, env=(), args=()):
    """pytest on the hardware suite in a child process, on the virtual gfx950 running
    `variant`. Returns (completed process, {test name: (outcome, message)}, seconds)."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    child.update({hardware_vgpu.ENV_TARGET: "vgpu", hardware_vgpu.ENV_VARIANT: str(variant),
                  hardware_vgpu.ENV_RESULTS: str(junit.parent)})
    child.update(env)
    if max_elements is not None:
        child[hardware_vgpu.ENV_MAX_ELEMENTS] = str(max_elements)
    cmd = [sys.executable, "-m", "pytest", "-m", "hardware", "-ra", "-q", "-p", "no:cacheprovider",
           f"--junitxml={junit}", str(SUITE), *args]
    start = time.monotonic()
    r = subprocess.run(cmd, cwd=M.ROOT, env=child, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    outcomes = {}
    if junit.exists():
        for case in ET.parse(junit).iter("testcase"):
            outcome, message = "passed", ""
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    outcome, message = {"failure": "failed"}.get(tag, tag), el.get("message", "")
                    if tag == "failure":
                        message = failed_at(el.text or "") + ": " + message
            outcomes[case.get("name")] = (outcome, message)
    return r, outcomes, took


def hardware_tests():
    """The test names the real-hardware command collects (`-m hardware`, no target set)."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "hardware", "--collect-only", "-q", "-p",
                        "no:cacheprovider", str(SUITE)], cwd=M.ROOT, env=child, capture_output=True, text=True,
                       timeout=300)
    names = [line.split("::", 1)[1] for line in r.stdout.splitlines() if "::" in line]
    assert r.returncode == 0 and names, r.stdout[-2000:] + r.stderr[-2000:]
    return names


def failed_at(traceback):
    """The statement of the test function that failed: the first `>` line of pytest's traceback."""
    lines = [line[1:].strip() for line in traceback.splitlines() if line.startswith(">")]
    return lines[0] if lines else "?"


def size_of(name):
    """n of a test_bit_exact_and_guard_region id ([kind-n-dtype-rung]), else None."""
    m = re.fullmatch(r"test_bit_exact_and_guard_region\[\w+-(\d+)-torch\.\w+-v\d\]", name)
    return int(m[1]) if m else None


def rung_of(name):
    return re.search(r"\b(v\d)\b", name)[1]


def mutant_variant(variant, mutant, root):
    """A copy of the built variant with `mutant`'s patches (tests/mutation_support.py),
    stamped as tools/build_variant.py stamps a variant (its own op namespace, digest)."""
    import build_variant

    dst = root / mutant.name / build_variant.VARIANT
    shutil.copytree(variant, dst)
    assert not mutant.rebuild, "a kernel-source mutant needs its code objects rebuilt: not done here"
    for patch in mutant.patches:
        M.apply_patch(dst / patch[0], patch)
    unique_id = build_variant.source_id(dst)
    build_variant.stamp_ops(dst, unique_id)
    build_variant.write_metadata(dst, build_variant.read_build_toml(), unique_id)
    return dst


def shown(r):
    return f"\n--- stdout (tail)\n{r.stdout[-6000:]}\n--- stderr (tail)\n{r.stderr[-3000:]}"


@pytest.fixture(scope="module")
def variant(variant_build, vgpu_device):
    """The built variant; vgpu_device skips (with the reason) where the virtual device cannot run."""
    import build_variant

    return variant_build / "build" / build_variant.VARIANT


def test_the_hardware_suite_passes_on_the_virtual_gfx950(variant, tmp_path):
    r, outcomes, took = run_suite(variant, tmp_path / "junit.xml")
    assert r.returncode == 0, f"the hardware suite failed on the virtual gfx950 (exit {r.returncode})" + shown(r)
    want = hardware_tests()
    assert sorted(outcomes) == sorted(want), "the virtual-device run did not run the tests the hardware run collects"
    capped = {n for n in want if (size_of(n) or 0) > hardware_vgpu.MAX_ELEMENTS}
    assert capped, "the size cap skipped nothing: the emulator would run 8192*8192 elements"
    wrong = {n: o for n, o in outcomes.items() if o != (("skipped", hardware_vgpu.CAP_REASON) if n in capped
                                                        else ("passed", ""))}
    assert not wrong, f"{len(wrong)} tests not as expected (passed, or skipped for the cap); first: " \
                      f"{next(iter(wrong.items()))}" + shown(r)
    calls = re.search(r"relu\(\) calls (\d+), FlyDSL path (\d+), torch fallback (\d+)", r.stdout)
    assert calls, "no relu() call report" + shown(r)
    assert int(calls[1]) > 0 and int(calls[1]) == int(calls[2]) and calls[3] == "0", \
        f"not every relu() call ran a FlyDSL kernel: {calls[0]}" + shown(r)
    sizes = sorted({size_of(n) for n in outcomes if size_of(n)} - {size_of(n) for n in capped})
    vgpu_support.SUMMARY_LINES.append(
        f"hardware suite on the virtual gfx950 (built variant): {len(outcomes) - len(capped)} passed, "
        f"{len(capped)} skipped ({hardware_vgpu.CAP_REASON}), in {took:.0f} s; sizes run {sizes}; {calls[0]}")


# (mutant, canary): with the package's canary on (the default), its first-use check refuses the
# mutated plan and the suite sees the torch fallback; with it off, the mutated launches run
MUTANT_RUNS = [("straddling-predicate", "on"), ("buffer-straddle", "on"), ("straddling-predicate", "off")]


@pytest.mark.parametrize("mutant,canary", MUTANT_RUNS, ids=[f"{m}-canary-{c}" for m, c in MUTANT_RUNS])
def test_the_hardware_suite_fails_on_a_mutant(variant, tmp_path, mutant, canary):
    m = M.BY_NAME[mutant]
    path = mutant_variant(variant, m, tmp_path)
    env = {} if canary == "on" else {"RELU_FLYDSL_CANARY": "0"}
    r, outcomes, took = run_suite(path, tmp_path / "junit.xml", MUTANT_MAX_ELEMENTS, env,
                                  ("-k", "test_bit_exact_and_guard_region and random"))
    assert r.returncode == 1, f"the hardware suite did not fail (exit {r.returncode}) for mutant {mutant}" + shown(r)
    failed = {n: msg for n, (o, msg) in outcomes.items() if o == "failed"}
    assert not [n for n, (o, _) in outcomes.items() if o == "error"], "errors, not test failures" + shown(r)
    mutated = M.BUFFER_RUNGS if "buffer" in mutant else tuple(x for x in M.RUNGS if x not in M.BUFFER_RUNGS)
    assert failed and {rung_of(n) for n in failed} <= set(mutated), (
        f"failures outside the mutated rungs {mutated}: {sorted(failed)[:5]}" + shown(r))
    others = [n for n, (o, _) in outcomes.items() if rung_of(n) not in mutated and o != "passed"
              and (size_of(n) or 0) <= MUTANT_MAX_ELEMENTS]
    assert not others, f"unmutated rungs did not pass: {others[:5]}" + shown(r)
    by = {}
    for msg in failed.values():
        at = msg.split(": ", 1)[0]
        by[at] = by.get(at, 0) + 1
    vgpu_support.SUMMARY_LINES.append(
        f"hardware suite on mutant {mutant} (canary {canary}): {len(failed)} of {len(outcomes)} tests failed "
        f"in {took:.0f} s, at: " + "; ".join(f"`{at}` {k}" for at, k in sorted(by.items(), key=lambda kv: -kv[1])))


RUN_SH = M.ROOT / "tests" / "hardware" / "run.sh"


def run_sh(args, env=()):
    child = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    child.update(env)
    return subprocess.run(["bash", str(RUN_SH), *args], cwd=M.ROOT, env=child, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("given", ["release folder", "variant folder"])
def test_run_sh_tests_the_variant_it_is_given(variant, tmp_path, given):
    """`bash tests/hardware/run.sh --variant PATH`, the post-upgrade check: the suite imports the
    files at PATH (a copy laid out as `hf download --local-dir` lays out a release), not this
    checkout's, and runs on them."""
    import json

    pinned = tmp_path / "relu-flydsl-pinned"
    shutil.copytree(variant.parents[1], pinned)  # relu-build/: README.md, build/torch-rocm/, benchmarks/
    module = json.loads((pinned / "build" / "torch-rocm" / "metadata.json").read_text())["id"]
    path = pinned if given == "release folder" else pinned / "build" / "torch-rocm"
    r = run_sh(["--variant", str(path), "-k", "test_the_package_under_test or (test_in_place and v5)"],
               {hardware_vgpu.ENV_TARGET: "vgpu"})
    assert r.returncode == 0, shown(r)
    assert f"relu_flydsl under test: {module} version " in r.stdout, shown(r)
    assert f"from {pinned / 'build' / 'torch-rocm'}\n" in r.stdout, shown(r)
    assert "2 passed" in r.stdout and "FlyDSL path 1, torch fallback 0" in r.stdout, shown(r)


def test_run_sh_refuses_a_folder_that_is_no_variant(tmp_path):
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "absent"):
        r = run_sh(["--variant", str(folder)])
        assert r.returncode == 4 and "run.sh: --variant" in r.stderr, shown(r)


def test_run_sh_fails_when_no_hardware_test_ran(tmp_path):
    """Without a gfx950 every test is skipped: run.sh says nothing was checked and exits 5,
    unless --allow-no-gpu says that is expected. Without --variant it tests the checkout,
    whatever RELU_FLYDSL_HARDWARE_VARIANT said before."""
    r = run_sh(["-k", "test_the_package_under_test"], {hardware_vgpu.ENV_VARIANT: str(tmp_path)})
    assert r.returncode == hardware_vgpu.NOTHING_RAN, shown(r)
    assert "testing this checkout's package" in r.stdout and re.search(r"SKIPPED \[1\] .*needs a gfx950 GPU", r.stdout)
    assert "run.sh: FAILED: no hardware test ran" in r.stderr, shown(r)
    r = run_sh(["--allow-no-gpu", "-k", "test_the_package_under_test"])
    assert r.returncode == 0 and "no hardware test ran (every one was skipped; --allow-no-gpu" in r.stdout, shown(r)


def test_run_sh_without_variant_drops_a_stale_one(tmp_path):
    """A RELU_FLYDSL_HARDWARE_VARIANT left in the environment is not what run.sh tests without
    --variant: on the virtual gfx950 the suite runs a build of this checkout, says so, and passes."""
    stale = tmp_path / "stale-variant"
    r = run_sh(["-k", "test_the_package_under_test"], {hardware_vgpu.ENV_TARGET: "vgpu",
                                                       hardware_vgpu.ENV_VARIANT: str(stale)})
    assert r.returncode == 0 and "1 passed" in r.stdout and "run.sh: 1 hardware tests ran" in r.stdout, shown(r)
    under_test = re.search(r"relu_flydsl under test: .* from (\S+)", r.stdout)
    assert under_test and "relu-hardware-vgpu-" in under_test[1] and str(stale) not in r.stdout, shown(r)


def test_run_sh_environment_and_gate(tmp_path):
    """run.sh's pytest environment (hardware_vgpu.suite_env) and its gate, as functions."""
    ran = tmp_path / "ran"
    env = hardware_vgpu.suite_env({hardware_vgpu.ENV_VARIANT: "/stale", "HOME": "/h"}, None, ran)
    assert hardware_vgpu.ENV_VARIANT not in env and env["HOME"] == "/h" and env[hardware_vgpu.ENV_RAN] == str(ran)
    env = hardware_vgpu.suite_env({hardware_vgpu.ENV_VARIANT: "/stale"}, "/asked", ran)
    assert env[hardware_vgpu.ENV_VARIANT] == "/asked"
    assert hardware_vgpu.gate(ran, False)[0] == hardware_vgpu.NOTHING_RAN  # no file: nothing ran
    assert hardware_vgpu.gate(ran, True)[0] == 0
    ran.write_text("")
    assert hardware_vgpu.gate(ran, False)[0] == hardware_vgpu.NOTHING_RAN
    ran.write_text("tests/hardware/test_hardware.py::test_in_place[v5]\n")
    assert hardware_vgpu.gate(ran, False) == (0, "run.sh: 1 hardware tests ran")
