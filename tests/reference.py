"""The reference every kernel result is compared with, on the bits.

    y = +0.0 if x < 0 else x

NaN keeps its exact bits (payload, sign, signalling), -0.0 stays -0.0, +-inf
and denormals pass. This is what torch.relu returns on ROCm GPUs; CPU
torch.relu rewrites some NaN payloads (FACTS section 8), so kernel results are
compared with this rule, never with CPU torch.relu bit for bit.
"""

import torch

INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
SIGN_BIT = {torch.float32: -(2**31), torch.float16: -(2**15), torch.bfloat16: -(2**15)}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(INT_VIEW[t.dtype])


def relu_bits(x: torch.Tensor) -> torch.Tensor:
    """The reference result's bit pattern, computed on integers only."""
    b = bits(x).to(torch.int64)
    dt = x.dtype
    width = 32 if dt == torch.float32 else 16
    b = b & ((1 << width) - 1)  # unsigned view
    sign = (b >> (width - 1)) & 1
    exp_mant = b & ((1 << (width - 1)) - 1)
    exp_bits = {torch.float32: 8, torch.float16: 5, torch.bfloat16: 8}[dt]
    mant_bits = width - 1 - exp_bits
    is_nan = ((exp_mant >> mant_bits) == (1 << exp_bits) - 1) & ((exp_mant & ((1 << mant_bits) - 1)) != 0)
    negative = (sign == 1) & (exp_mant != 0) & ~is_nan  # x < 0: not -0.0, not NaN
    out = torch.where(negative, torch.zeros_like(b), b)
    out = torch.where(out >= (1 << (width - 1)), out - (1 << width), out)  # back to signed
    return out.to(INT_VIEW[dt])


def special_values(dtype: torch.dtype) -> torch.Tensor:
    """NaNs with payloads (quiet and signalling, both signs), +-inf, +-0.0,
    denormals, the largest and smallest finite, and ordinary numbers."""
    if dtype == torch.float32:
        raw = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0x7FA00001, 0xFFBFFFFF,
               0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
               0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000]
    else:
        # float16: exponent 5 bits; bfloat16: the top half of float32
        raw = ([0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7E55, 0x7D00, 0xFDFF, 0x7C00, 0xFC00, 0x0000, 0x8000,
                0x0001, 0x8001, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x3C00, 0xBC00]
               if dtype == torch.float16 else
               [0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FC5, 0x7FA1, 0xFFBF, 0x7F80, 0xFF80, 0x0000, 0x8000,
                0x0001, 0x8001, 0x007F, 0x807F, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x3F80, 0xBF80])
    width = 32 if dtype == torch.float32 else 16
    signed = [r - (1 << width) if r >= 1 << (width - 1) else r for r in raw]
    return torch.tensor(signed, dtype=INT_VIEW[dtype]).view(dtype)


def assert_relu_bits(y: torch.Tensor, x: torch.Tensor):
    expect, got = relu_bits(x), bits(y)
    bad = (expect != got).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{bad.numel()} of {x.numel()} elements differ from the bit rule; first at {bad[:5].tolist()}: "
        f"x bits {bits(x)[bad[:5]].tolist()} expected {expect[bad[:5]].tolist()} got {got[bad[:5]].tolist()}"
    )
