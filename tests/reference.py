"""The reference every kernel result is compared with, on the bits.

    y = 0 if x < 0 else x      (+0.0 for floats)

NaN keeps its exact bits (payload, sign, signalling), -0.0 stays -0.0, +-inf
and denormals pass; for int8 every negative value becomes 0. torch.relu is not
this rule everywhere: on CPU it keeps -0.0 but its vectorized path rewrites
some NaN payloads (bf16 NaN -> 0xFFFF for large tensors, f16 signalling NaNs
quieted); torch 2.11 on an NVIDIA H200 turns -0.0 into +0.0; on MI350X the
reference post, "Beating torch.relu with FlyDSL: A Hands-On Guide to
Bandwidth-Bound Kernels", reports -0.0 kept (not verified here;
tests/hardware/test_hardware.py records it). So kernel results are compared with this rule, never with
torch.relu bit for bit.

The dtype facts (width, integer view, NaN boundary, special values) come from
flash_relu_rocm/dtypes.py, served and pending dtypes alike.
"""

import numpy as np
import torch

from flash_relu_rocm import dtypes as _dtypes

_TORCH = {getattr(torch, name): d for name, d in _dtypes.ALL.items()}

INT_VIEW = {t: getattr(torch, d.int_view) for t, d in _TORCH.items()}
UINT = {t: np.dtype(f"uint{d.width}").type for t, d in _TORCH.items()}
# NaNs with payloads (quiet and signalling, both signs), +-inf, +-0.0,
# denormals, largest and smallest finite (normal and subnormal), +-1; for
# int8 -128, -1, 0, 1, 127.
SPECIAL = {t: list(d.special) for t, d in _TORCH.items()}
# What relu() serves (dtypes.DTYPES) as torch dtypes, and its floating ones (NaN, -0.0).
SERVED = tuple(getattr(torch, name) for name in _dtypes.DTYPES)
SERVED_FLOATS = tuple(t for t in SERVED if _TORCH[t].floating)


def _facts(dtype) -> "_dtypes.DType":
    try:
        return _TORCH[dtype]
    except KeyError:
        raise ValueError(f"no bit rule for {dtype}; dtypes.py knows {', '.join(_dtypes.ALL)}") from None


def relu_bits_u(u, dtype):
    """The bit rule on unsigned bit patterns (numpy), integers only. Written
    here on purpose, apart from the kernels and _canary.expected_bits."""
    u = np.asarray(u)
    d = _facts(dtype)
    sign = (u >> (d.width - 1)) & 1
    if not d.floating:  # two's complement: x < 0 is the sign bit
        return np.where(sign == 1, 0, u).astype(u.dtype)
    mag = u & ((1 << (d.width - 1)) - 1)
    is_nan = mag > d.exp_all_ones  # exponent all ones and a nonzero mantissa
    negative = (sign == 1) & (mag != 0) & ~is_nan  # x < 0: not -0.0, not NaN
    return np.where(negative, 0, u).astype(u.dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(INT_VIEW[t.dtype])


def relu_bits(x: torch.Tensor) -> torch.Tensor:
    """The reference result's bit pattern (as torch signed integers)."""
    u = bits(x.cpu()).numpy().view(UINT[x.dtype])
    signed = np.dtype(f"int{u.itemsize * 8}")
    return torch.from_numpy(relu_bits_u(u, x.dtype).view(signed).copy())


def special_values(dtype: torch.dtype) -> torch.Tensor:
    u = np.array(SPECIAL[dtype], dtype=UINT[dtype])
    return torch.from_numpy(u.view(np.dtype(f"int{u.itemsize * 8}"))).view(dtype)


def assert_relu_bits(y: torch.Tensor, x: torch.Tensor):
    expect, got = relu_bits(x), bits(y.cpu())
    bad = (expect != got).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{bad.numel()} of {x.numel()} elements differ from the bit rule; first at {bad[:5].tolist()}: "
        f"x bits {bits(x.cpu())[bad[:5]].tolist()} expected {expect[bad[:5]].tolist()} got {got[bad[:5]].tolist()}"
    )
