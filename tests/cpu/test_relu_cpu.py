"""relu() on CPU tensors: the torch fallback path and input validation.

CPU torch.relu rewrites NaN payloads in its vectorized bf16/f16 paths (large
bf16 tensors give 0xFFFF, f16 signalling NaNs are quieted), so the fallback is
compared with torch.relu by value, sign and NaN position; bit-exactness of the
kernels is the virtual device's suite.
"""

import pytest
import torch

import relu_flydsl
from reference import SERVED as DTYPES  # the served dtypes (flash_relu_rocm/dtypes.py)
from reference import bits, special_values

SIZES = [1, 7, 1023, 4257, 100000]


def same_as_torch(y, x):
    ref = torch.relu(x)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    finite = ~torch.isnan(ref)
    assert torch.equal(y[finite], ref[finite])
    assert torch.equal(torch.signbit(y[finite]), torch.signbit(ref[finite])), "-0.0 must stay -0.0"


def values(n, dtype):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g).to(dtype)
    sv = special_values(dtype)
    k = min(n, sv.numel())
    x[:k] = sv[:k]
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_fallback_matches_torch_relu(dtype, n):
    x = values(n, dtype)
    before = bits(x).clone()
    same_as_torch(relu_flydsl.relu(x), x)
    assert torch.equal(bits(x), before), "x must not be modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_is_written_and_returned(dtype):
    x = values(4257, dtype)
    out = torch.full_like(x, 7.0)
    assert relu_flydsl.relu(x, out=out) is out
    same_as_torch(out, x)


def test_out_from_empty_like_of_a_view_is_accepted():
    x = values(8 * 6, torch.float32).view(8, 6).t()  # dense, not contiguous
    out = torch.empty_like(x)
    assert relu_flydsl.relu(x, out=out) is out
    same_as_torch(out, x)


def test_in_place():
    x = values(1023, torch.float32)
    ref = torch.relu(x.clone())
    assert relu_flydsl.relu(x, out=x) is x
    assert torch.equal(bits(x), bits(ref))


@pytest.mark.parametrize("make", [
    lambda t: t.t(),                       # transposed
    lambda t: t[:, ::2],                   # strided
    lambda t: t[1:, 3:],                   # offset view
])
def test_views_fall_back_with_identical_results(make):
    base = values(64 * 48, torch.bfloat16).view(64, 48)
    x = make(base)
    same_as_torch(relu_flydsl.relu(x), x)


@pytest.mark.parametrize("x", [torch.tensor([-3, 0, 5]), torch.tensor([-1.5, 2.0], dtype=torch.float64),
                               torch.tensor(-2.0), torch.empty(0, 3)])
def test_other_dtypes_and_shapes_fall_back(x):
    y = relu_flydsl.relu(x)
    assert torch.equal(y, torch.relu(x)) and y.dtype == x.dtype and y.shape == x.shape


def test_meta_tensors_fall_back():
    y = relu_flydsl.relu(torch.empty(5, 3, device="meta"))
    assert y.device.type == "meta" and y.shape == (5, 3)


def _rejected(x, out, exc, match):
    before = out.clone()
    with pytest.raises(exc, match=match):
        relu_flydsl.relu(x, out=out)
    assert torch.equal(bits(out), bits(before)), "out must be left untouched on error"


@pytest.mark.parametrize("out_factory,exc,match", [
    (lambda x: torch.empty(x.shape[0] + 1), ValueError, "shape"),
    (lambda x: torch.empty_like(x, dtype=torch.float16), TypeError, "dtype"),
    (lambda x: torch.empty(x.shape[0], 2)[:, 0], ValueError, "dense"),
])
def test_bad_out_is_rejected_and_untouched(out_factory, exc, match):
    x = values(16, torch.float32)
    out = out_factory(x)
    out.fill_(3.0)
    _rejected(x, out, exc, match)


def test_partial_overlap_is_rejected():
    buf = torch.arange(-8, 8, dtype=torch.float32)
    before = buf.clone()
    with pytest.raises(ValueError, match="overlaps"):
        relu_flydsl.relu(buf[0:10], out=buf[4:14])
    assert torch.equal(buf, before)


@pytest.mark.parametrize("bad,exc", [([1.0, -1.0], TypeError), (3.0, TypeError), (None, TypeError)])
def test_non_tensor_x(bad, exc):
    with pytest.raises(exc, match="torch.Tensor"):
        relu_flydsl.relu(bad)


def test_non_tensor_out():
    with pytest.raises(TypeError, match="out must be"):
        relu_flydsl.relu(torch.ones(3), out=[0.0, 0.0, 0.0])


@pytest.mark.parametrize("x", [torch.tensor([True, False]), torch.tensor([1 + 1j])])
def test_bool_and_complex_are_rejected_like_torch(x):
    with pytest.raises(TypeError, match="not supported"):
        relu_flydsl.relu(x)
    with pytest.raises(RuntimeError):
        torch.relu(x)


def test_unknown_rung():
    with pytest.raises(ValueError, match="unknown rung"):
        relu_flydsl.relu(torch.ones(3), rung="v9")


def test_out_with_requires_grad_is_rejected():
    x = torch.randn(4, requires_grad=True)
    out = torch.zeros(4)
    _rejected(x, out, RuntimeError, "automatic differentiation")


def test_cpu_calls_are_recorded_as_fallback():
    relu_flydsl.reset_dispatch_stats()
    relu_flydsl.relu(torch.ones(3))
    relu_flydsl.relu(torch.ones(3), out=torch.empty(3))
    assert relu_flydsl.dispatch_stats() == {"fallback/not a ROCm device": 2}


def test_in_place_on_a_strided_view():
    base = values(64, torch.float32)
    before = base.clone()
    v = base[::2]
    assert relu_flydsl.relu(v, out=v) is v
    assert torch.equal(bits(base[::2]), bits(torch.relu(before[::2])))
    assert torch.equal(bits(base[1::2]), bits(before[1::2])), "elements between the view's must not change"


@pytest.mark.parametrize("bad,exc,match", [
    (("uint8",), ValueError, "unsupported dtype 'uint8'"),
    (torch.int32, ValueError, "unsupported dtype"),
])
def test_warmup_rejects_unknown_dtypes(bad, exc, match):
    with pytest.raises(exc, match=match):
        relu_flydsl.warmup(bad)


def test_warmup_rejects_unknown_rungs():
    with pytest.raises(ValueError, match="unknown rung"):
        relu_flydsl.warmup("bfloat16", rungs="v9")
