"""Tests that once depended on which test ran before them, run after the test
that broke them, in that order, in one process.

The virtual device keeps every module loaded in the process (a mutated copy's
rebuilt kernels, an unshipped compile), under the kernel names the shipped
objects have: a test that wants "the loaded v4 float32 x4" asks for the shipped
object (vgpu_support.shipped_kernel), not for the first module with that name."""

import dataclasses
import os
import subprocess
import sys
import types

import pytest

import vgpu_support as S

pytestmark = pytest.mark.vgpu

VICTIM = "tests/vgpu/test_vgpu_checker.py::test_unimplemented_instruction_stops_the_run"
# rebuilds v4 with num_records 0xFFFFFFFF and loads it before any shipped v4: the victim's
# kernel, taken by name, then failed its descriptor check before reaching v_sin
POLLUTER = "tests/test_mutations.py::test_mutant_is_caught[max-size-default]"


@pytest.fixture
def decoy_first(vgpu):
    """decoy_first(kernel, **changes): a module holding a copy of `kernel` with
    `changes` (dataclasses.replace), first in the device's module table, as when
    another test loaded its own build of a kernel before any test loaded the
    shipped one. Returns the copy."""
    assert 0 not in vgpu.modules  # module ids start at 1

    def put(kernel, **changes):
        decoy = dataclasses.replace(kernel, **changes)
        loaded = dict(vgpu.modules)
        vgpu.modules.clear()  # in place: what FlyDSL loads meanwhile stays registered
        vgpu.modules[0] = types.SimpleNamespace(data=b"not a shipped object", kernels={decoy.name: decoy})
        vgpu.modules.update(loaded)
        return decoy

    yield put
    vgpu.modules.pop(0, None)


def test_unimplemented_instruction_runs_the_shipped_kernel_whatever_loaded_first(vgpu, decoy_first):
    """A v4 float32 x4 of another build (here: without v_cndmask) loaded first."""
    import test_vgpu_checker

    shipped = S.shipped_kernel(vgpu, "v4", "float32", 4)
    decoy_first(shipped, lines=[ln for ln in shipped.lines if not ln.mnemonic.startswith("v_cndmask")])
    test_vgpu_checker.test_unimplemented_instruction_stops_the_run(vgpu)
    test_vgpu_checker.test_scoreboard_catches_a_missing_waitcnt(vgpu)


@pytest.mark.parametrize("vec", [1, 16])
def test_int8_rung_kernel_is_the_shipped_one_whatever_loaded_first(vgpu, decoy_first, vec):
    """v3 int8 at unroll 4 (test_reliability's unshipped compile, named like the
    shipped kernel plus _u4) loaded first: the int8 checks still take the shipped kernel."""
    import int8_candidates as C
    from relu_flydsl import _objects

    shipped = S.shipped_kernel(vgpu, "v3", "int8", vec)
    decoy = decoy_first(shipped, name=shipped.name + "_u4")
    symbol = _objects.read_manifest()["kernels"][f"v3/int8/x{vec}"]["symbol"]
    got = C.loaded(vgpu, ("rung", "v3"), vec)
    assert got.name == symbol and got is not decoy, got.name


def test_checker_passes_after_the_mutant_that_broke_it(repo_root, vgpu_device, tmp_path):
    """The order a random run once took: the max-size-default mutant, then the
    unimplemented-instruction check, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
           f"--basetemp={tmp_path / 'child'}", POLLUTER, VICTIM]
    r = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert "2 passed" in r.stdout, tail
