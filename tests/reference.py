"""The reference every kernel result is compared with, on the bits.

    y = +0.0 if x < 0 else x

NaN keeps its exact bits (payload, sign, signalling), -0.0 stays -0.0, +-inf
and denormals pass. torch.relu is not this rule everywhere: on CPU it keeps
-0.0 but rewrites some NaN payloads; torch 2.11 on an NVIDIA H200 turns -0.0
into +0.0; on MI350X the post reports -0.0 kept (not verified here;
tests/test_hardware.py records it). So kernel results are compared with this
rule, never with torch.relu bit for bit (FACTS section 8).
"""

import numpy as np
import torch

INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
UINT = {torch.float32: np.uint32, torch.float16: np.uint16, torch.bfloat16: np.uint16}
MANTISSA_BITS = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}

# NaNs with payloads (quiet and signalling, both signs), +-inf, +-0.0,
# denormals, largest and smallest finite (normal and subnormal), +-1.
SPECIAL = {
    torch.float32: [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0x7FA00001, 0xFFBFFFFF,
                    0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                    0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000],
    torch.float16: [0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7E55, 0x7D00, 0xFDFF, 0x7C00, 0xFC00, 0x0000, 0x8000,
                    0x0001, 0x8001, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x3C00, 0xBC00],
    torch.bfloat16: [0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FC5, 0x7FA1, 0xFFBF, 0x7F80, 0xFF80, 0x0000, 0x8000,
                     0x0001, 0x8001, 0x007F, 0x807F, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x3F80, 0xBF80],
}


def relu_bits_u(u, dtype):
    """The bit rule on unsigned bit patterns (numpy), integers only."""
    u = np.asarray(u)
    width = 32 if dtype == torch.float32 else 16
    mant = MANTISSA_BITS[dtype]
    sign = (u >> (width - 1)) & 1
    mag = u & ((1 << (width - 1)) - 1)
    exp_all_ones = (mag >> mant) == (1 << (width - 1 - mant)) - 1
    is_nan = exp_all_ones & ((mag & ((1 << mant) - 1)) != 0)
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
