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
    """A module holding a kernel named like the shipped v4 float32 x4 but not its
    code (no v_cndmask), first in the device's module table, as when another
    test loaded its own build of that kernel before any test loaded the shipped one."""
    shipped = S.shipped_kernel(vgpu, "v4", "float32", 4)
    lines = [ln for ln in shipped.lines if not ln.mnemonic.startswith("v_cndmask")]
    assert len(lines) < len(shipped.lines)
    decoy = types.SimpleNamespace(data=b"not a shipped object",
                                  kernels={shipped.name: dataclasses.replace(shipped, lines=lines)})
    assert 0 not in vgpu.modules  # module ids start at 1
    loaded = dict(vgpu.modules)
    vgpu.modules.clear()  # in place: what FlyDSL loads meanwhile stays registered
    vgpu.modules[0] = decoy
    vgpu.modules.update(loaded)
    yield decoy
    del vgpu.modules[0]


def test_unimplemented_instruction_runs_the_shipped_kernel_whatever_loaded_first(vgpu, decoy_first):
    import test_vgpu_checker

    test_vgpu_checker.test_unimplemented_instruction_stops_the_run(vgpu)
    test_vgpu_checker.test_scoreboard_catches_a_missing_waitcnt(vgpu)


def test_checker_passes_after_the_mutant_that_broke_it(repo_root, vgpu_device):
    """The order a random run once took: the max-size-default mutant, then the
    unimplemented-instruction check, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                        POLLUTER, VICTIM], cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert "2 passed" in r.stdout, tail
