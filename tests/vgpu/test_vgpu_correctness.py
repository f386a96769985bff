"""The ladder on the virtual gfx950, through the public relu().

Every case checks: bit-exact against the bit rule, every output element written
exactly once, sentinel guards intact, the input unchanged, and no access outside
the registered allocations (the device records any; the fixture fails the test).
"""

import pytest
import torch

import vgpu_support as S
from flash_relu_rocm.registry import RUNGS
from reference import SERVED as DTYPES  # the served dtypes (flash_relu_rocm/dtypes.py)

pytestmark = pytest.mark.vgpu

RUNG_NAMES = tuple(RUNGS)
BUFFER_RUNGS = tuple(name for name, r in RUNGS.items() if r.buffer)
SMALL = (1, 7, 8, 1023, 1024, 4257)
BIG = (65536, 100000, 1048576, 1048583)
MODELS = ("dword", "whole", "start")


def _cases():
    for rung in RUNG_NAMES:
        # the straddle model only matters where the hardware range check runs
        for model in (MODELS if rung in BUFFER_RUNGS else ("dword",)):
            for dtype in DTYPES:
                for n in SMALL:
                    for values in ("random", "special"):
                        yield rung, model, dtype, n, values
                for n in BIG:  # emulation cost: big sizes with the mixed value set only
                    yield rung, model, dtype, n, "mixed"


def _id(case):
    rung, model, dtype, n, values = case
    return f"{rung}-{model}-{str(dtype)[6:]}-{n}-{values}"


def _relu():
    import relu_flydsl

    return relu_flydsl.relu


def _run_checked(dev, rung, dtype, xbits, x, xbuf, out, obuf):
    before = len(dev.launches)
    y = _relu()(x, out=out, rung=rung)
    dev.check()
    launched = dev.launches[before:]
    assert launched, "relu() did not launch on the virtual device (fallback taken?)"
    assert all(r.error is None for r in launched)
    assert y is out
    S.assert_bits(y, S.relu_bits(xbits, dtype))
    S.assert_written_once(dev, y)
    S.assert_guards(obuf, out)
    if xbuf is not obuf:
        S.assert_guards(xbuf, x)
        assert (S.tensor_bits(x) == xbits).all(), "input modified"
    return launched


@pytest.mark.parametrize("case", list(_cases()), ids=_id)
def test_relu_bits(vgpu, case):
    rung, model, dtype, n, values = case
    vgpu.straddle = model
    xbits = S.make_bits(values, n, dtype, seed=n * 7 + len(values))
    x, xbuf = S.guarded_input(vgpu, xbits, dtype)
    out, obuf = vgpu.guarded((n,), dtype, name="out")
    launched = _run_checked(vgpu, rung, dtype, xbits, x, xbuf, out, obuf)
    assert all(r.kernel.startswith(f"relu_{rung}_") for r in launched)


@pytest.mark.parametrize("rung", RUNG_NAMES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
class TestLayouts:
    def test_out_view_in_larger_buffer(self, vgpu, rung, dtype):
        # out starts 3 elements into a sentinel buffer: misaligned for 128-bit vectors
        n = 4100
        xbits = S.make_bits("mixed", n, dtype, seed=1)
        x, xbuf = S.guarded_input(vgpu, xbits, dtype)
        out, obuf = vgpu.guarded((n,), dtype, offset_elems=3, name="out")
        _run_checked(vgpu, rung, dtype, xbits, x, xbuf, out, obuf)

    def test_x_view_at_odd_offset(self, vgpu, rung, dtype):
        n = 3001
        xbits = S.make_bits("mixed", n, dtype, seed=2)
        x, xbuf = S.guarded_input(vgpu, xbits, dtype, offset_elems=5)
        out, obuf = vgpu.guarded((n,), dtype, name="out")
        _run_checked(vgpu, rung, dtype, xbits, x, xbuf, out, obuf)

    def test_in_place(self, vgpu, rung, dtype):
        n = 5000
        xbits = S.make_bits("mixed", n, dtype, seed=3)
        x, xbuf = S.guarded_input(vgpu, xbits, dtype)
        _run_checked(vgpu, rung, dtype, xbits, x, xbuf, x, xbuf)

    def test_out_none_2d(self, vgpu, rung, dtype):
        xbits = S.make_bits("mixed", 37 * 64, dtype, seed=4)
        x, xbuf = S.guarded_input(vgpu, xbits, dtype)
        x2 = x.view(37, 64)
        vgpu.fresh_output(x.numel() * x.element_size())
        y = _relu()(x2, rung=rung)
        vgpu.check()
        assert vgpu.launches and y.shape == x2.shape and y.dtype == dtype
        assert vgpu.memory.find(y.data_ptr()).name == "fresh-output"
        S.assert_bits(y.view(-1), S.relu_bits(xbits, dtype))
        S.assert_written_once(vgpu, y.view(-1))
        S.assert_guards(xbuf, x)

    def test_chunked_launches(self, vgpu, monkeypatch, rung, dtype):
        from relu_flydsl._state import STATE
        from relu_flydsl.flash_relu_rocm import plan

        # the dispatcher's own planner module. Plans are cached per size:
        # STATE.reset() drops the cache, before and after the lowered limits.
        monkeypatch.setattr(plan, "LIMITS", plan.LaunchLimits(max_index=9000, max_buffer_bytes=12000))
        STATE.reset()
        try:
            n = 30011 if dtype == torch.float32 else 30016  # odd: vec 1; even: vec 8 or 4
            xbits = S.make_bits("mixed", n, dtype, seed=5)
            x, xbuf = S.guarded_input(vgpu, xbits, dtype)
            out, obuf = vgpu.guarded((n,), dtype, name="out")
            launched = _run_checked(vgpu, rung, dtype, xbits, x, xbuf, out, obuf)
        finally:
            STATE.reset()
        assert len(launched) > 2, f"expected a split launch, got {len(launched)}"
        # every chunk's numel argument stays within the lowered limits
        assert all(r.args[1] <= 9000 for r in launched)
