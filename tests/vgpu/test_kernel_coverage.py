"""Every kernel the planner can choose runs on the virtual gfx950, from the
shipped code objects.

The set of kernels is asked of the planner (vgpu_support.planner_kernels: the
registry's rungs and dtypes x every vector width plan.plan() returns), not
typed in. Each kernel is reached through the public relu() with views whose
offsets or size make the real planner pick its width, each with a partial last
block, special values and sentinel guards, under every check the suite makes
(bits, written once, guards, input unchanged, exact grid, no access outside
the allocations, every access naturally aligned). The terminal summary's
`kernels executed: N/M` line is computed from the emulator's own launch record.
"""

import pytest

import vgpu_support as S

pytestmark = pytest.mark.vgpu

KERNELS = S.planner_kernels()


def _relu():
    import relu_flydsl

    return relu_flydsl.relu


def test_planner_set_is_the_ladder():
    """The planner's choices: v1 one element; every other rung 1..max_vec in
    powers of two (3 widths for float32, 4 for 16-bit types, 5 for int8)."""
    from relu_flydsl.flash_relu_rocm import registry

    for rung in registry.RUNGS.values():
        for dtype in registry.DTYPES:
            vecs = sorted(v for r, d, v in KERNELS if (r, d) == (rung.name, dtype))
            assert vecs[-1] == rung.max_vec(dtype) and vecs == [1 << k for k in range(len(vecs))], (rung, dtype, vecs)
    assert len(KERNELS) == 68  # 68 today: change it with the registry, on purpose


@pytest.mark.parametrize("kernel", KERNELS, ids=[f"{r}-{d}-x{v}" for r, d, v in KERNELS])
def test_kernel_runs_exactly(vgpu, kernel):
    relu = _relu()
    failures = {}
    for case in S.kernel_cases(*kernel):
        problems = S.run_case(vgpu, relu, case)
        if problems:
            failures[case.id] = problems
    assert not failures, failures
    assert S.executed_kernels().get(kernel, 0) >= 3


def test_every_planner_kernel_executed(vgpu):
    """The emulator's record, not the test list: every kernel the planner can
    choose completed a launch in this process. Kernels the per-kernel tests
    above have not run yet (random order, or this test alone) run their cases
    here first, so the answer does not depend on the order."""
    relu = _relu()
    for kernel in [k for k in KERNELS if k not in S.executed_kernels()]:
        for case in S.kernel_cases(*kernel):
            S.run_case(vgpu, relu, case)  # problems are test_kernel_runs_exactly's to report
    ran = S.executed_kernels()
    missing = [k for k in KERNELS if k not in ran]
    assert not missing, f"{len(missing)} planner kernel(s) never executed on the virtual gfx950: {missing}"


@pytest.mark.parametrize("rung", ["v2", "v5"])
def test_planner_checking_one_pointer_is_caught(vgpu, monkeypatch, rung):
    """With x aligned and out 4 bytes past a 16-byte boundary the real
    planner takes one element per thread; a planner that checks only x's
    alignment takes the 128-bit width, and the emulator's alignment check fails
    the call (values, guards and bounds alone would not notice)."""
    import relu_flydsl._dispatch as dispatch
    from relu_flydsl.flash_relu_rocm import plan

    relu = _relu()
    case = S.Case(rung, "float32", 1, "y-offset", "mixed")  # out at +1 element, numel a multiple of 4
    dispatch.STATE.reset()  # plans are cached per size and alignment
    assert S.run_case(vgpu, relu, case, seed=5) == []

    real = plan.pick_vec
    monkeypatch.setattr(plan, "pick_vec", lambda numel, dtype, max_vec, *addrs: real(numel, dtype, max_vec, *addrs[:1]))
    dispatch.STATE.reset()
    try:
        problems = S.run_case(vgpu, relu, case, seed=5)
    finally:
        dispatch.STATE.reset()
    assert any("launched [\"('%s', 'float32', 4)\"]" % rung in p for p in problems), problems
    misaligned = [p for p in problems if "misaligned" in p]
    assert misaligned and "needs 16-byte alignment" in misaligned[0], problems
    vgpu.reset()
