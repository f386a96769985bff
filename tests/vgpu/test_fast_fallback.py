"""relu()'s fast path beyond the launch (tests/vgpu/test_hot_path.py covers that): the
torch fallback it serves off gfx950, and relu(x) without out= on a ready entry.

Off gfx950 (device_info says "not a ROCm device", or names another arch) the fast
path serves plain tensors with torch's kernel and counts the call with the general
path's reason, the kill switch first; every other input, and every bad one, it
leaves to the general path: the same results, errors, messages and counts as
there, nothing written on error. Each scenario is a function of test_hot_path's
Ctx, so tests/test_mutations.py runs them against mutated copies of the package
(mutation_support.DISPATCH_MUTANTS names them).
"""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import test_hot_path as H
import vgpu_support as S
from vgpu.serve import present_cpu

pytestmark = pytest.mark.vgpu
F32 = torch.float32
NO_DEVICE = "fallback/not a ROCm device"
DISABLED = "fallback/disabled by RELU_FLYDSL_DISABLE"
GFX942 = "fallback/arch gfx942 (kernels are built for gfx950)"


def _off_device(c, arch=None):
    """Every tensor on no ROCm device (a CPU or CUDA torch), or on a ROCm device of `arch`
    (device 0, whose current stream the compiled entry also sees)."""
    if arch is None:
        c.mp.setattr(c.d, "device_info", lambda t: None)
        c.entry.present_cpu(False)  # CPU tensors are host memory to the compiled entry too
    else:
        c.mp.setattr(c.d, "device_info", lambda t: c.d.DeviceInfo(arch, c.stream))
        present_cpu(c.dev, c.entry)  # device 0 of the virtual device, as device_info says


def _stats(c):
    return c.pkg.dispatch_stats()


def _bits(t):
    """Values as same-width integers (so -0.0 != 0.0 and NaN payloads count)."""
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[t.element_size()]).numpy() if t.dtype.is_floating_point else t.numpy()


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(_bits(a), _bits(b))


class _Seen(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _Sub(torch.Tensor):
    """A __torch_function__ subclass (torch serves it)."""


# ---- the scenarios -------------------------------------------------------
def fallback_served_by_the_fast_path(c):
    """Plain tensors off gfx950: torch's results for all three forms, counted as
    "not a ROCm device", the general path (its validation) never entered."""
    _off_device(c)
    for dtype in (F32, torch.bfloat16, torch.float64, torch.int8):
        x = (torch.randn(33) * 100).to(dtype)
        want = torch.relu(x)
        before, general = _stats(c), c.general
        y = torch.full_like(x, 7)
        assert c.relu(x, out=y) is y
        _same(y, want)
        _same(c.relu(x), want)
        z = x.clone()
        assert c.relu(z, out=z) is z
        _same(z, want)
        assert c.general == general, "the fast path serves plain tensors off gfx950"
        assert _stats(c).get(NO_DEVICE, 0) == before.get(NO_DEVICE, 0) + 3, _stats(c)
    assert set(_stats(c)) == {NO_DEVICE}, _stats(c)
    assert c.dev.launches == []


def fallback_kill_switch(c):
    """RELU_FLYDSL_DISABLE flipped in a running process: off gfx950 the fast path
    counts its reason first (as fallback_reason does), on no ROCm device and on another
    arch; unset, the devices' own reasons come back."""
    x = torch.randn(64)
    y = torch.empty_like(x)
    for arch, reason in ((None, NO_DEVICE), ("gfx942", GFX942)):
        _off_device(c, arch)
        c.pkg.reset_dispatch_stats()
        c.relu(x, out=y)
        c.relu(x)
        assert _stats(c) == {reason: 2}, _stats(c)
        c.mp.setenv("RELU_FLYDSL_DISABLE", "1")
        c.relu(x, out=y)
        c.relu(x)
        assert _stats(c) == {reason: 2, DISABLED: 2}, _stats(c)
        c.mp.delenv("RELU_FLYDSL_DISABLE")
        c.relu(x)
        assert _stats(c) == {reason: 3, DISABLED: 2}, _stats(c)
        _same(y, torch.relu(x))
    assert c.dev.launches == []


def _torch_kinds():
    """(name, make x, make out or None, the general path's reason): inputs only torch
    serves, each a plain torch.Tensor or a type the fast path must not take."""
    d = torch.tensor([[-1.5, 2.0, 0.0, -0.0], [3.0, -4.0, 0.25, 1.0]])
    q = lambda: torch.quantize_per_tensor(d, 0.25, 0, torch.qint8)  # noqa: E731
    return (
        ("subclass", lambda: d.clone().as_subclass(_Sub), None, "tensor subclass _Sub"),
        ("subclass out", lambda: d.clone(), lambda: torch.empty(2, 4).as_subclass(_Sub), "tensor subclass _Sub"),
        ("sparse_coo", lambda: d.to_sparse(), None, "sparse_coo layout"),
        ("sparse_csr", lambda: d.to_sparse_csr(), None, "sparse_csr layout"),
        ("mkldnn", lambda: d.to_mkldnn(), None, "_mkldnn layout"),
        ("mkldnn in place", lambda: d.to_mkldnn(), "x", "_mkldnn layout"),
        ("nested", lambda: torch.nested.nested_tensor([d[0], d[1, :2]]), None, "nested tensor"),
        ("nested in place", lambda: torch.nested.nested_tensor([d[0], d[1, :2]]), "x", "nested tensor"),
        ("quantized", q, None, "quantized tensor"),
        ("quantized in place", q, "x", "quantized tensor"),
    )


def fallback_leaves_torch_inputs_to_the_general_path(c):
    """Subclasses, sparse, mkldnn, nested and quantized tensors, a dispatch mode, a
    torch.func transform: off gfx950 each is counted with the general path's reason
    (torch serves it there), never as "not a ROCm device"."""
    import warnings

    _off_device(c)
    warnings.filterwarnings("ignore", message=".*(sparse|nested|quantiz).*")
    for name, make_x, make_out, reason in _torch_kinds():
        x = make_x()
        out = None if make_out is None else x if make_out == "x" else make_out()
        c.pkg.reset_dispatch_stats()
        try:
            c.relu(x, out=out)
        except (RuntimeError, TypeError, ValueError):
            pass  # torch's own answer may be an error: only the count is asked here
        assert _stats(c) == {f"fallback/{reason}": 1}, (name, _stats(c))
    x = torch.randn(8)
    y = torch.empty_like(x)
    for form in (lambda: c.relu(x), lambda: c.relu(x, out=y)):
        c.pkg.reset_dispatch_stats()
        with _Seen():
            form()
        assert _stats(c) == {"fallback/torch dispatch mode": 1}, _stats(c)
        c.pkg.reset_dispatch_stats()
        torch.func.vmap(lambda t: t + form())(torch.ones(2, 8))  # x captured from outside the transform
        assert _stats(c) == {"fallback/torch.func transform": 1}, _stats(c)


def fallback_bad_input(c):
    """Off gfx950, every bad input gets relu()'s documented error, out untouched, and
    the general path's count (none, but for the inference tensor torch is left to
    refuse): what torch refuses (autograd, a partial overlap) as well as what it
    would accept (another dtype or shape, an inference tensor it writes before
    raising)."""
    _off_device(c)
    x = torch.randn(16)
    with torch.inference_mode():
        inference = torch.full((16,), 7.0)
    buf = torch.arange(-8.0, 8.0)
    cases = (
        ("bool", lambda: (torch.tensor([True, False]), None), {}, TypeError, "not supported"),
        ("complex", lambda: (torch.tensor([1 + 1j]), None), {}, TypeError, "not supported"),
        ("unknown rung", lambda: (x, None), {"rung": "v9"}, ValueError, "unknown rung"),
        ("unknown rung, out", lambda: (x, torch.full((16,), 7.0)), {"rung": "v9"}, ValueError, "unknown rung"),
        ("list rung", lambda: (x, torch.full((16,), 7.0)), {"rung": ["v5"]}, TypeError, "rung must be"),
        ("dtype", lambda: (x, torch.full((16,), 7.0, dtype=torch.float64)), {}, TypeError, "dtype"),
        ("shape", lambda: (x, torch.full((4, 4), 7.0)), {}, ValueError, "shape"),
        ("not dense", lambda: (x, torch.full((16, 2), 7.0)[:, 0]), {}, ValueError, "dense"),
        ("device", lambda: (x, torch.empty(16, device="meta")), {}, ValueError, "device"),
        ("x grad", lambda: (torch.randn(16, requires_grad=True), torch.full((16,), 7.0)), {}, RuntimeError,
         r"relu\(\): out= does not support automatic differentiation"),
        ("out grad", lambda: (x, torch.full((16,), 7.0, requires_grad=True)), {}, RuntimeError,
         r"relu\(\): out= does not support automatic differentiation"),
        ("overlap", lambda: (buf[0:10], buf[4:14]), {}, ValueError, "overlaps"),
        ("inference out", lambda: (x, inference), {}, RuntimeError, r"relu\(\): out is an inference tensor"),
    )
    for name, make, kwargs, exc, match in cases:
        t, out = make()
        seen = None if out is None or out.is_meta else (buf if name == "overlap" else out).detach().clone()
        c.pkg.reset_dispatch_stats()
        with pytest.raises(exc, match=match):
            c.relu(t, out=out, **kwargs)
        if seen is not None:
            _same((buf if name == "overlap" else out).detach(), seen)
        counted = {"fallback/inference tensor written outside inference mode": 1} if name == "inference out" else {}
        assert _stats(c) == counted, (name, _stats(c))


def new_out_on_the_hot_path(c):
    """relu(x) without out= on a gfx950, the entry for its size and alignment cached:
    the fast path allocates out and launches (the general path not entered); inputs
    it must not take (autograd, a strided or neg-bit view) still get torch's results
    through the general path, without a launch."""
    n = 1024
    c.warm(n)
    xbits = S.make_bits("mixed", n, F32, seed=31)
    x, _ = S.guarded_input(c.dev, xbits, F32)
    kept = []  # outputs stay alive: their memory stays registered, never handed out again
    for _ in range(2):
        general, launches, calls = c.general, len(c.dev.launches), c.flydsl_calls()
        c.dev.fresh_output(n * 4)
        y = c.relu(x)
        c.dev.check()
        assert c.general == general, "relu(x) on a cached entry takes the fast path"
        assert len(c.dev.launches) == launches + 1 and c.flydsl_calls() == calls + 1
        S.assert_bits(y, S.relu_bits(xbits, F32))
        kept.append(y)
    # autograd: the op (torch.library), which records the backward
    g, _ = S.guarded_input(c.dev, xbits, F32, name="x grad")
    g.requires_grad_()
    c.dev.fresh_output(n * 4)
    y = c.relu(g)
    kept.append(y)
    assert y.requires_grad, "relu(x) of a tensor requiring grad must be differentiable"
    y.sum().backward()
    want = g.detach().clone().requires_grad_()
    torch.relu(want).sum().backward()
    _same(g.grad, want.grad)
    # x[::2] of the cached size and alignment: no plain span; a neg-bit view: its memory holds -x
    base, _ = S.guarded_input(c.dev, S.make_bits("mixed", 2 * n, F32, seed=32), F32, name="base")
    for view in (base[::2], torch._neg_view(x)):
        launches, general = len(c.dev.launches), c.general
        c.dev.fresh_output(n * 4)  # were it launched, the kernel's out would be memory of the device
        y = c.relu(view)
        assert c.general == general + 1, "the general path decides"
        assert c.dev.launches[launches:] == [], "no kernel reads this view's raw memory"
        _same(y, torch.relu(view))


def _layout(t):
    """What a caller can see of a new tensor besides its values."""
    return (type(t), t.dtype, t.shape, t.stride(), t.storage_offset(), t.device, t.requires_grad, t.is_inference(),
            t.untyped_storage().nbytes())


def new_out_like_the_general_path(c):
    """relu(x) served by the compiled entry returns the tensor the general path returns
    (torch.empty_like(x)'s: sizes, strides, a size-1 dimension's odd stride included, dtype,
    device, no autograd; an inference tensor under inference mode), bit-exact, whether it
    allocates through torch's C shim or with torch.empty_like (_compiled_entry.use_shim)."""
    assert c.entry.status()["allocation"] == "torch's C shim", c.entry.status()  # torch 2.13 has it
    n = 1024
    layouts = (((n,), None), ((4, n // 4), None), ((1, n), (1, 1)), ((n, 1), (1, 7)))
    kept = []  # outputs stay alive: their memory stays registered, never handed out again
    try:
        for shim in (True, False):
            assert c.entry.use_shim(shim) == ("torch's C shim" if shim else "torch.empty_like: switched off (use_shim)")
            for dtype in (F32, torch.bfloat16, torch.float16, torch.int8):
                xbits = S.make_bits("mixed", n, dtype, seed=34)
                base, _ = S.guarded_input(c.dev, xbits, dtype)
                for shape, strides in layouts:
                    for inference in (False, True):
                        x = base.view(shape) if strides is None else base.as_strided(shape, strides)
                        got = []
                        for hot in (False, True):  # a first call (the general path adds the entry), then its replay
                            general, launches = c.general, len(c.dev.launches)
                            c.dev.fresh_output(n * x.element_size())
                            with torch.inference_mode(inference):
                                y = c.relu(x)
                            c.dev.check()
                            assert (c.general == general) == hot, (dtype, shape, strides, hot)
                            assert len(c.dev.launches) == launches + 1, "a launch per call"
                            S.assert_bits(y.reshape(-1), S.relu_bits(xbits, dtype))
                            got.append(_layout(y))
                            kept.append(y)
                        assert got[1] == got[0], (shim, dtype, shape, strides, inference, got)
                        c.state.reset()  # the next case's first call is a first use again
    finally:
        c.entry.use_shim(True)


def other_arch_general_path(c):
    """On a gfx942, inputs the fast path leaves to the general path (a dense transposed x
    with out of its strides, autograd) are torch's too: no launch, the arch's reason."""
    a, b = 24, 40
    c.warm(a * b)
    _off_device(c, "gfx942")
    x, _ = H._transposed(c, a, b, name="x")
    x.copy_(torch.randn(a, b))
    out, _ = H._transposed(c, a, b, name="out")
    g, _ = S.guarded_input(c.dev, S.make_bits("random", a * b, F32, seed=33), F32, name="g")
    g.requires_grad_()
    c.pkg.reset_dispatch_stats()
    launches, general = len(c.dev.launches), c.general
    assert c.relu(x, out=out) is out
    _same(out, torch.relu(x))
    y = c.relu(g)
    assert y.requires_grad
    _same(y.detach(), torch.relu(g.detach()))
    assert c.general == general + 2, "both take the general path"
    assert c.dev.launches[launches:] == [], "a gfx950 kernel launched on a gfx942"
    assert _stats(c) == {GFX942: 2}, _stats(c)


SCENARIOS = {f.__name__: f for f in (
    fallback_served_by_the_fast_path, fallback_kill_switch, fallback_leaves_torch_inputs_to_the_general_path,
    fallback_bad_input, new_out_on_the_hot_path, new_out_like_the_general_path, other_arch_general_path,
)}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fast_fallback(vgpu, monkeypatch, name):
    import relu_flydsl

    monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    monkeypatch.delenv("RELU_FLYDSL_RUNG", raising=False)
    try:
        SCENARIOS[name](H.Ctx(relu_flydsl, vgpu, monkeypatch))
    finally:
        relu_flydsl._state.STATE.reset()
