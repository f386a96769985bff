"""The ladder harness's gpu mode (benchmarks/ladder/gpu.py) on the virtual gfx950, with the real
rungs of the real relu_flydsl: its correctness step (check_all: the bit rule, guards, input,
and that the check's own calls took flydsl/<rung>/<dtype>) for every rung and served dtype, and
one timing window's dispatch-path count (time_case, with a timer that only makes the calls:
the emulator has no clock). The only thing between the harness and the package is
_OnVirtualDevice, which registers each call's tensors as gfx950 memory (the vgpu fixture's
checker refuses accesses to unregistered memory), as a device allocator would."""

import argparse

import pytest

from benchmarks.ladder import checks, gpu, report, timing
from benchmarks.ladder.cases import Case
from flash_relu_rocm.dtypes import DTYPES
from flash_relu_rocm.registry import RUNGS

pytestmark = pytest.mark.vgpu

SIZES = checks.CHECK_SIZES  # the gpu mode's own sizes, 1 .. 2^20: ~20 s of emulation for all 20 pairs
IMPLS = list(RUNGS) + [report.TORCH]


class _OnVirtualDevice:
    """relu_flydsl as the gpu mode calls it, with x and out registered on the virtual device
    for the length of each call (x read-only: a write to the input is a violation). `calls`:
    (rung, dtype, numel, kernels launched by that call). The launches are told apart by
    identity, not position: the canary's hook moves records out of dev.launches by address,
    and freed CPU memory is reused, so an older call's record can leave the list too."""

    def __init__(self, dev, package):
        self.dev, self.package = dev, package
        self.calls = []

    def relu(self, x, out=None, rung=None):
        mem = self.dev.memory
        regions = [self.dev.register(x, name="x", writable=False), self.dev.register(out, name="out")]
        seen = {id(r) for r in self.dev.launches}
        try:
            return self.package.relu(x, out=out, rung=rung)
        finally:
            for r in regions:
                mem.remove(r)
            new = [r.kernel for r in self.dev.launches if id(r) not in seen]
            self.calls.append((rung, str(x.dtype).removeprefix("torch."), x.numel(), new))

    def dispatch_stats(self):
        return self.package.dispatch_stats()


@pytest.fixture
def on_vgpu(vgpu, monkeypatch):
    import relu_flydsl

    monkeypatch.setattr(gpu, "DEVICE", "cpu")  # the virtual device's memory is CPU memory
    return _OnVirtualDevice(vgpu, relu_flydsl)


def test_check_step_passes_every_rung_and_dtype_on_the_real_kernels(on_vgpu, vgpu, capsys):
    failed, _ = gpu.check_all(on_vgpu, IMPLS, DTYPES)  # as run_gpu calls it
    out = capsys.readouterr().out
    assert failed == {}, out
    for rung in RUNGS:
        for dtype in DTYPES:
            assert f"check {rung:5s} {dtype:8s} ok [bit rule; guards; input; kernel path]" in out
    stats = on_vgpu.dispatch_stats()
    assert all(stats.get(f"flydsl/{r}/{d}", 0) >= len(SIZES) for r in RUNGS for d in DTYPES), stats
    # every checked call launched exactly one kernel, the asked rung's for its dtype
    assert len(on_vgpu.calls) == len(RUNGS) * len(DTYPES) * len(SIZES)
    for rung, dtype, n, kernels in on_vgpu.calls:
        assert len(kernels) == 1 and kernels[0].startswith(f"relu_{RUNGS[rung].module}_{dtype}_"), (rung, dtype, n, kernels)


def test_check_step_refuses_calls_that_fell_back(on_vgpu, vgpu, monkeypatch, capsys):
    """The dispatch-path check reads the package's own counts: with the kernel path switched
    off every rung is refused although its values are right (the fallback follows the rule)."""
    from relu_flydsl._state import ENV_DISABLE, STATE

    monkeypatch.setenv(ENV_DISABLE, "1")
    STATE.reset()
    failed, _ = gpu.check_all(on_vgpu, ["v5"], ["float32", "int8"], sizes=(1000,))
    assert set(failed) == {("v5", "float32"), ("v5", "int8")}, capsys.readouterr().out
    assert all("calls took other paths" in why and "disabled by" in why for why in failed.values())
    assert on_vgpu.calls and all(kernels == [] for *_, kernels in on_vgpu.calls)


@pytest.mark.parametrize("dtype", DTYPES)
def test_timing_window_counts_every_rungs_calls(on_vgpu, vgpu, monkeypatch, dtype):
    """time_case on one small case: each rung's timed calls all counted on its own path (the
    window's exact count), the timed buffers re-checked; the timer only makes the calls."""
    failed, _ = gpu.check_all(on_vgpu, IMPLS, [dtype], sizes=(1000,))  # first uses (canaries) happen here
    assert failed == {}
    monkeypatch.setattr(timing, "time_launches",
                        lambda fn, iters, warmup, host=False: [fn() for _ in range(iters + warmup)]
                        and timing.Timing(1e-5, 2e-5 if host else None))
    monkeypatch.setattr(timing, "crosscheck", lambda fn, s, traffic: {"available": False, "reason": "no clock"})
    args = argparse.Namespace(rounds=2, iters=2, warmup=1)
    n0 = len(on_vgpu.calls)
    rows = gpu.time_case(Case((4, 1024), dtype, ("shapes",)), on_vgpu, IMPLS, {}, args, None, lambda n: None)
    by = {r["impl"]: r for r in rows}
    assert set(by) == set(IMPLS)
    assert all(r["status"] == "ok" and r["gbps"] for r in rows), [r["status"] for r in rows]
    timed = on_vgpu.calls[n0:]
    assert len(timed) == len(RUNGS) * 2 * (2 + 1)
    assert all(len(k) == 1 and k[0].startswith(f"relu_{RUNGS[r].module}_{dtype}_") for r, _, _, k in timed)


def test_check_step_on_a_built_variant_loaded_by_kernels(variant_build, vgpu, monkeypatch, capsys):
    """--variant: the module gpu.load_relu gets from kernels.get_local_kernel (the built
    relu-build/build/torch-rocm, its own copy of the package and code objects) passes the
    same check step on the virtual gfx950, its calls counted on its own dispatch_stats()."""
    pytest.importorskip("kernels", reason="kernels not installed: --variant loads the variant through it")
    from vgpu.serve import serve

    variant = gpu.load_relu(str(variant_build / "build" / "torch-rocm"))
    assert variant.__name__ != "relu_flydsl"  # the variant's package, not the source tree's
    serve(vgpu, variant, monkeypatch.setattr)
    monkeypatch.setattr(gpu, "DEVICE", "cpu")
    on_vgpu = _OnVirtualDevice(vgpu, variant)
    failed, _ = gpu.check_all(on_vgpu, IMPLS, DTYPES, sizes=(1, 7, 1000, 4257))
    assert failed == {}, capsys.readouterr().out
    assert all(len(k) == 1 and k[0].startswith(f"relu_{RUNGS[r].module}_{d}_") for r, d, _, k in on_vgpu.calls)
    assert len(on_vgpu.calls) == len(RUNGS) * len(DTYPES) * 4
