"""Helpers for the virtual-device suites: inputs, the bit rule, and the checks
every launch must pass (values, guards, reads/writes inside the allocations)."""

import numpy as np
import torch

UINT = {torch.float32: np.uint32, torch.float16: np.uint16, torch.bfloat16: np.uint16}
SINT = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
SENTINEL = 0xA5

# NaNs with payloads (quiet and signalling, both signs), +-inf, +-0, denormals,
# largest and smallest finite (normal and subnormal), ordinary numbers.
SPECIAL = {
    torch.float32: [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0x7FA00001, 0xFFBFFFFF,
                    0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                    0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000],
    torch.float16: [0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7E55, 0x7D00, 0xFDFF, 0x7C00, 0xFC00, 0x0000, 0x8000,
                    0x0001, 0x8001, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x3C00, 0xBC00],
    torch.bfloat16: [0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FC5, 0x7FA1, 0xFFBF, 0x7F80, 0xFF80, 0x0000, 0x8000,
                     0x0001, 0x8001, 0x007F, 0x807F, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x3F80, 0xBF80],
}


def make_bits(kind, n, dtype, seed):
    """uint bit patterns: 'random' (normal numbers of both signs), 'special'
    (the special values, cycled), 'mixed' (random with specials every few elements)."""
    rng = np.random.default_rng(seed)
    ut = UINT[dtype]
    rand = torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 8).to(dtype)
    rand = rand.view(SINT[dtype]).numpy().view(ut).copy()
    special = np.array(SPECIAL[dtype], dtype=ut)
    if kind == "random":
        return rand
    if kind == "special":
        return rng.permutation(np.resize(special, n))
    if kind == "mixed":
        pos = rng.random(n) < 0.15
        rand[pos] = rng.choice(special, int(pos.sum()))
        # raw random bit patterns as well: every NaN payload and denormal is fair game
        raw = rng.random(n) < 0.1
        rand[raw] = rng.integers(0, np.iinfo(ut).max, int(raw.sum()), dtype=ut, endpoint=True)
        return rand
    raise ValueError(kind)


def relu_bits(u, dtype):
    """The bit rule y = +0.0 if x < 0 else x on unsigned bit patterns."""
    u = np.asarray(u)
    width = 32 if dtype == torch.float32 else 16
    mant = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}[dtype]
    sign = (u >> (width - 1)) & 1
    mag = u & ((1 << (width - 1)) - 1)
    exp_all_ones = (mag >> mant) == (1 << (width - 1 - mant)) - 1
    is_nan = exp_all_ones & ((mag & ((1 << mant) - 1)) != 0)
    negative = (sign == 1) & (mag != 0) & ~is_nan
    return np.where(negative, 0, u).astype(u.dtype)


NP_SINT = {torch.float32: np.int32, torch.float16: np.int16, torch.bfloat16: np.int16}


def to_tensor(bits_u, dtype):
    return torch.from_numpy(np.ascontiguousarray(bits_u).view(NP_SINT[dtype])).view(dtype)


def tensor_bits(t):
    return t.contiguous().view(SINT[t.dtype]).numpy().view(UINT[t.dtype])


def guarded_input(dev, bits_u, dtype, offset_elems=0, name="x"):
    x, buf = dev.guarded((bits_u.size,), dtype, offset_elems=offset_elems, name=name)
    x.copy_(to_tensor(bits_u, dtype))
    return x, buf


def assert_guards(buf, view):
    """Every byte of `buf` outside `view` still holds the sentinel."""
    b = buf.numpy()
    start = view.data_ptr() - buf.data_ptr()
    stop = start + view.numel() * view.element_size()
    outside = np.concatenate([b[:start], b[stop:]])
    bad = np.flatnonzero(outside != SENTINEL)
    assert bad.size == 0, f"{bad.size} guard byte(s) overwritten; first at buffer offsets {bad[:8].tolist()}"


def assert_written_once(dev, y):
    lo, hi = dev.writes(y)
    bad = np.flatnonzero((lo != 1) | (hi != 1))
    assert bad.size == 0, (f"{bad.size} of {y.numel()} output elements not written exactly once; first "
                           f"{bad[:8].tolist()} counts {hi[bad[:8]].tolist()}")


def assert_bits(y, expect_u):
    got = tensor_bits(y)
    bad = np.flatnonzero(got != expect_u)
    assert bad.size == 0, (f"{bad.size} of {got.size} elements differ from the bit rule; first at "
                           f"{bad[:5].tolist()}: expected {[hex(v) for v in expect_u[bad[:5]]]} "
                           f"got {[hex(v) for v in got[bad[:5]]]}")
