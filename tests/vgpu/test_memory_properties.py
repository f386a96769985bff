"""Every tensor property that changes how memory is read, on the virtual
gfx950 through public relu(): each either runs the kernel and is bit-exact
(guards intact), or takes torch's path and returns torch's result without a
launch. Each property is called twice with the same size and alignment, so
the second call meets the fast path's cached entry.

The kernel reads raw memory as a flat array of the dtype from data_ptr(): a
property that changes what those bytes mean (a lazy negation, a layout, a
quantization, a wrapper) must never reach it.
"""

import numpy as np
import pytest
import torch

import vgpu_support as S
from test_torch_compat import WrapperSubclass

pytestmark = pytest.mark.vgpu
N = 1024
F32 = torch.float32


def _x(dev, n=N, name="x", offset=0):
    xbits = S.make_bits("mixed", n, F32, seed=n + offset)
    x, xbuf = S.guarded_input(dev, xbits, F32, offset_elems=offset, name=name)
    return xbits, x, xbuf


class Plain(torch.Tensor):
    """A __torch_function__ subclass (as_subclass): torch's own methods, another type."""


class Wrapper(WrapperSubclass):
    """test_torch_compat's __torch_dispatch__ wrapper, handing torch's results back unwrapped:
    here only the memory relu() reads counts."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.elem if isinstance(t, Wrapper) else t  # noqa: E731
        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


def _same_bits(a, b) -> bool:
    """Bit-equal results (NaN payloads included) of any layout torch returns."""
    if a.is_nested:
        return all(_same_bits(p, q) for p, q in zip(a.unbind(), b.unbind()))
    if a.is_quantized:
        return torch.equal(a.int_repr(), b.int_repr()) and a.q_scale() == b.q_scale()
    if a.layout != torch.strided:
        a, b = a.to_dense(), b.to_dense()
    a, b = torch.as_tensor(a).resolve_neg().contiguous(), torch.as_tensor(b).resolve_neg().contiguous()
    return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def _kernel(dev, relu, make, want_vec=None):
    """Two calls of relu(x, out=) on tensors `make` builds: the kernel ran and is exact."""
    import relu_flydsl

    for _ in range(2):
        xbits, x, xbuf, out, obuf = make()
        before = len(dev.launches)
        assert relu(x, out=out) is out
        dev.check()
        launched = dev.launches[before:]
        assert launched, f"expected the kernel, got {relu_flydsl.dispatch_stats()}"
        S.assert_bits(out, S.relu_bits(xbits, F32))
        S.assert_guards(obuf, out)
        S.assert_guards(xbuf, x)
        if want_vec:
            assert all(r.kernel.split("_x")[1].startswith(f"{want_vec}_") for r in launched), launched[0].kernel


def _torch(dev, relu, make, reason):
    """Two calls: no launch, torch's result, the fallback reason recorded."""
    import relu_flydsl

    relu_flydsl.reset_dispatch_stats()
    for _ in range(2):
        x, out, expected = make()
        before = len(dev.launches)
        y = relu(x, out=out) if out is not None else relu(x)
        assert dev.launches[before:] == [], "a kernel launched on memory whose meaning it cannot read"
        assert _same_bits(y, expected), "not torch's result"
    stats = relu_flydsl.dispatch_stats()
    assert stats == {f"fallback/{reason}": 2}, stats


def test_storage_offset_runs_the_kernel_at_the_view(vgpu):
    """A view 1, 2 or 4 elements into its storage: data_ptr() includes the
    offset, the planner narrows the vector to the alignment."""
    import relu_flydsl

    for offset, vec in ((1, 1), (2, 2), (4, 4)):
        def make():
            xbits, x, xbuf = _x(vgpu, offset=offset)
            out, obuf = vgpu.guarded((N,), F32, offset_elems=offset, name="out")
            assert x.storage_offset() > 0 and x.data_ptr() % 16 == offset * 4 % 16  # a view into its buffer
            return xbits, x, xbuf, out, obuf
        _kernel(vgpu, relu_flydsl.relu, make, want_vec=vec)


def test_strides_with_gaps_take_torch(vgpu):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu, 2 * N)
        x = x[::2]
        out = torch.empty(N)
        return x, out, torch.relu(x)
    _torch(vgpu, relu_flydsl.relu, make, "non-contiguous")


def test_stride_zero_broadcast_takes_torch(vgpu):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu, 32)
        x = x.expand(32, 32)
        return x, torch.empty(32, 32), torch.relu(x)
    _torch(vgpu, relu_flydsl.relu, make, "non-contiguous")


def test_neg_bit_views_take_torch(vgpu):
    import relu_flydsl

    def make_x():
        _, x, _ = _x(vgpu)
        v = torch._neg_view(x)
        assert v.is_neg()
        return v, torch.empty(N), torch.relu(v.resolve_neg())

    def make_out():
        _, x, _ = _x(vgpu)
        out, _ = vgpu.guarded((N,), F32, name="out")
        return x, torch._neg_view(out), torch.relu(x)
    _torch(vgpu, relu_flydsl.relu, make_x, "neg/conj-bit view")
    _torch(vgpu, relu_flydsl.relu, make_out, "neg/conj-bit view")


def test_conj_of_a_real_tensor_is_the_tensor_itself(vgpu):
    """conj() of a real tensor sets no bit (complex dtypes are refused as torch.relu refuses them)."""
    import relu_flydsl

    def make():
        xbits, x, xbuf = _x(vgpu)
        x = x.conj()
        assert not x.is_conj()
        out, obuf = vgpu.guarded((N,), F32, name="out")
        return xbits, x, xbuf, out, obuf
    _kernel(vgpu, relu_flydsl.relu, make)
    with pytest.raises(TypeError, match="complex"):
        relu_flydsl.relu(torch.randn(4, dtype=torch.complex64).conj())


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_sparse_layouts_take_torch(vgpu, layout):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu)
        s = x.view(32, 32).to_sparse() if layout == "sparse_coo" else x.view(32, 32).to_sparse_csr()
        return s, None, torch.relu(s)
    _torch(vgpu, relu_flydsl.relu, make, f"{layout} layout")


def test_quantized_takes_torch(vgpu):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu)
        q = torch.quantize_per_tensor(x.nan_to_num(0.0, 1e3, -1e3), 0.1, 10, torch.quint8)
        return q, None, torch.relu(q)
    _torch(vgpu, relu_flydsl.relu, make, "quantized tensor")


def test_nested_takes_torch(vgpu):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu)
        nt = torch.nested.nested_tensor([x[:100], x[100:300]])
        return nt, None, torch.relu(nt)
    _torch(vgpu, relu_flydsl.relu, make, "nested tensor")


@pytest.mark.parametrize("kind", ["torch_function", "torch_dispatch"])
def test_subclasses_and_wrappers_take_torch(vgpu, kind):
    import relu_flydsl

    def make():
        _, x, _ = _x(vgpu)
        out, _ = vgpu.guarded((N,), F32, name="out")
        if kind == "torch_function":
            return x.as_subclass(Plain), out.as_subclass(Plain), torch.relu(x)
        return Wrapper(x), Wrapper(out), torch.relu(x)
    name = "Plain" if kind == "torch_function" else "Wrapper"
    _torch(vgpu, relu_flydsl.relu, make, f"tensor subclass {name}")


def test_vmap_batched_tensors_take_torch(vgpu):
    """Under torch.func.vmap the tensors relu() sees are batched wrappers, and
    even a plain captured out= would be read by the kernel outside the
    transform: torch serves every call."""
    import relu_flydsl

    relu_flydsl.reset_dispatch_stats()
    _, x, _ = _x(vgpu)
    before = len(vgpu.launches)
    y = torch.func.vmap(relu_flydsl.relu)(x.view(32, 32))
    assert vgpu.launches[before:] == [] and _same_bits(y, torch.relu(x.view(32, 32)))
    warm, _ = vgpu.guarded((N,), F32, name="out")
    relu_flydsl.relu(x, out=warm)  # a cached fast-path entry for this size and alignment
    relu_flydsl.relu(x, out=warm)
    out, _ = vgpu.guarded((N,), F32, name="out2")
    before = len(vgpu.launches)
    torch.func.vmap(lambda row: relu_flydsl.relu(x, out=out).sum() + row.sum())(torch.ones(3, 2))
    assert vgpu.launches[before:] == [], "the fast path served a call inside a torch.func transform"
    assert np.array_equal(S.tensor_bits(out), S.tensor_bits(torch.relu(x)))


def test_inference_tensor_x_runs_the_kernel(vgpu):
    import relu_flydsl

    def make():
        xbits = S.make_bits("mixed", N, F32, seed=5)
        with torch.inference_mode():
            x, xbuf = S.guarded_input(vgpu, xbits, F32)
        assert x.is_inference()
        out, obuf = vgpu.guarded((N,), F32, name="out")
        return xbits, x, xbuf, out, obuf
    _kernel(vgpu, relu_flydsl.relu, make)


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "permuted-3d"])
def test_dense_layouts_with_x_strides_run_the_kernel(vgpu, layout):
    """x dense in another dimension order, out with exactly x's strides (as
    torch.empty_like(x) gives): the kernel runs over the storage span,
    bit-exact in the logical layout, guards intact; out with other strides
    (contiguous) takes torch."""
    import relu_flydsl

    shapes = {"transposed": ((24, 40), (1, 0)), "channels_last": ((2, 8, 6, 5), (0, 2, 3, 1)),
              "permuted-3d": ((6, 7, 8), (2, 0, 1))}
    shape, perm = shapes[layout]
    n = int(np.prod(shape))

    def view(flat):  # a dense, non-contiguous view of a flat buffer
        stored = tuple(shape[p] for p in perm)
        inverse = [perm.index(i) for i in range(len(perm))]
        return flat.view(stored).permute(*inverse)

    def make():
        xbits, xf, xbuf = _x(vgpu, n)
        of, obuf = vgpu.guarded((n,), F32, name="out")
        x, out = view(xf), view(of)
        assert not x.is_contiguous() and out.stride() == x.stride() == torch.empty_like(x).stride()
        return xbits, x, xbuf, out, obuf

    for _ in range(2):
        xbits, x, xbuf, out, obuf = make()
        before = len(vgpu.launches)
        assert relu_flydsl.relu(x, out=out) is out
        vgpu.check()
        assert vgpu.launches[before:], f"expected the kernel: {relu_flydsl.dispatch_stats()}"
        flat_out = out.as_strided((n,), (1,))
        S.assert_bits(flat_out, S.relu_bits(xbits, F32))  # the span, element by element
        S.assert_guards(obuf, flat_out)
        expected = S.to_tensor(S.relu_bits(xbits, F32), F32)
        assert _same_bits(out.contiguous(), view(expected).contiguous())  # the logical layout
    xbits, x, _, _, _ = make()
    out, _ = vgpu.guarded(tuple(shape), F32, name="contiguous-out")
    before = len(vgpu.launches)
    relu_flydsl.relu(x, out=out)
    assert vgpu.launches[before:] == [], "mixed strides must keep the fallback"
    assert _same_bits(out, torch.relu(x))
