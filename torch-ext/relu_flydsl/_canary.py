"""The first-use canary: a compiled kernel runs on a device only after it was
seen to be right there.

Before a kernel's (rung, dtype, vec) first real launch on a device, it runs
once on that device on a small canary and the result is checked on the host:

    [guard | x: n elements | guard | out: n elements | guard]   one allocation

- x holds every special bit pattern of the dtype (flash_relu_rocm/dtypes.py:
  NaN payloads quiet, signalling and negative, +-inf, +-0, denormals,
  extremes, +-1), each at every lane position of the kernel's vector, at the
  start and in the partial tail, with random numbers and raw random bit
  patterns between;
- n = one tile + half a tile + one vector: a partial last block (and wave);
- out must equal the bit rule `+0.0 if x < 0 else x` (int8: 0 if x < 0) bit
  for bit; x and every guard byte must be unchanged.

A canary proves that kernel on those inputs on that device, nothing more: it
is not a proof for every size. The dispatcher (_dispatch.py) decides when to
run it; this module only builds, runs and judges one.
"""

from contextlib import contextmanager

import torch

from .flash_relu_rocm import dtypes as _dtypes
from .flash_relu_rocm import plan as _plan
from .flash_relu_rocm.registry import ELEMENT_BYTES

SENTINEL = 0xA5                    # guard bytes; relu of 0xA5.. (negative) is 0, never the sentinel
GUARD = 256                        # bytes, keeps x and out 256-byte aligned
SEED = 0x5EED



def _dtype(name: str):
    # pending dtypes too: a canary judges whatever kernel is about to be served
    return _dtypes.get(name, pending=True)


def _int_view(name: str):
    return getattr(torch, _dtype(name).int_view)


@contextmanager
def device_memory(nbytes: int, device: int):
    """`with device_memory(n, d) as buf:` n bytes (uint8) on ROCm device d for
    one canary, used only inside the block. The one substitution point of the
    virtual-device tests (tests/conftest.py): there, CPU memory registered with
    the virtual gfx950 for the block, its launches told apart from the test's."""
    yield torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))


def length(rung, vec: int) -> int:
    """Canary elements for this kernel: a full tile, then a partial block
    that also ends inside a wave."""
    tile = rung.tile(vec)
    return tile + tile // 2 + vec


def input_bits(dtype: str, vec: int, n: int) -> torch.Tensor:
    """The canary input as signed integers of the dtype's width (CPU), deterministic.
    Every special value sits at every lane position of a `vec`-wide vector,
    at the start of x and again in its partial tail; random numbers and raw
    random bit patterns in between."""
    d = _dtype(dtype)
    width, itype = d.width, _int_view(dtype)
    g = torch.Generator().manual_seed(SEED + n)
    if d.floating:
        numbers = (torch.randn(n, generator=g) * 8).to(getattr(torch, dtype)).view(itype)
    else:
        numbers = torch.randint(-(1 << (width - 1)), 1 << (width - 1), (n,), generator=g, dtype=torch.int64).to(itype)
    raw = torch.randint(-(1 << (width - 1)), 1 << (width - 1), (n,), generator=g, dtype=torch.int64).to(itype)
    bits = torch.where(torch.rand(n, generator=g) < 0.15, raw, numbers)
    special = torch.tensor([_dtypes.signed(u, width) for u in d.special], dtype=itype)
    k = special.numel()
    # vector q, lane l holds special (q + l) % k: over k vectors every special
    # value visits every lane position
    i = torch.arange(min(n, k * vec))
    diagonal = special[(i // vec + i % vec) % k]
    bits[: diagonal.numel()] = diagonal
    bits[n - diagonal.numel():] = diagonal  # and in the partial tail (last block, last wave)
    return bits


def expected_bits(bits: torch.Tensor, dtype: str) -> torch.Tensor:
    """The bit rule: +0.0 where x < 0 (not -0.0, not NaN), else x unchanged;
    for integer dtypes, 0 where x < 0."""
    d = _dtype(dtype)
    if not d.floating:
        return torch.where(bits < 0, torch.zeros_like(bits), bits)
    mag = bits.to(torch.int64) & ((1 << (d.width - 1)) - 1)
    is_nan = mag > d.exp_all_ones
    negative = (bits < 0) & (mag != 0) & ~is_nan
    return torch.where(negative, torch.zeros_like(bits), bits)


def check_plans(rung, dtype: str, vec: int, n: int, x_addr: int, y_addr: int):
    """The planner's launches for this kernel, host side: None if every plan
    near the canary's size that picks this kernel keeps the rules every launch
    relies on (vec divides numel, both pointers aligned to the vector, chunks
    contiguous and within the limits, the grid exact), else the evidence."""
    esize = ELEMENT_BYTES[dtype]
    limits = _plan.LIMITS
    canonical = _plan.plan(rung, dtype, n, x_addr, y_addr)
    if canonical.vec != vec:
        return f"the planner chose x{canonical.vec}, not x{vec}, for the canary's {n} elements"
    for numel in range(n, n + 2 * vec + 1):
        for offset in (0, esize):
            xa, ya = x_addr + offset, y_addr + offset
            p = _plan.plan(rung, dtype, numel, xa, ya)
            if p.vec != vec:
                continue  # another kernel's plan
            say = f"the planner's launch of x{vec} for {numel} elements at byte offset {offset}"
            if numel % vec or xa % (vec * esize) or ya % (vec * esize):
                return f"{say}: the vector width does not divide the size or the pointers' alignment"
            start = 0
            for launch in p.launches:
                exact = -(-launch.numel // p.tile)
                if launch.start != start or launch.grid != exact:
                    return f"{say}: chunk at {launch.start} has grid {launch.grid}, exact is {exact}"
                if launch.numel > limits.max_index or (rung.buffer and launch.numel * esize > limits.max_buffer_bytes):
                    return f"{say}: chunk of {launch.numel} elements exceeds the launch limits"
                start = launch.stop
            if start != numel:
                return f"{say}: chunks cover {start} elements"
    return None


def _hex(v: int, width: int) -> str:
    return f"0x{v & ((1 << width) - 1):0{width // 4}X}"


class Canary:
    """One canary's buffer layout and its judge; `buffer` is device memory."""

    def __init__(self, rung, dtype: str, vec: int):
        self.dtype, self.width = dtype, _dtype(dtype).width
        self.n = length(rung, vec)
        self.nbytes = self.n * self.width // 8
        span = -(-self.nbytes // GUARD) * GUARD
        # guards of at least a tile: a kernel running a whole block past the
        # end stays inside the allocation, where the sentinels see it
        tile_bytes = rung.tile(vec) * ELEMENT_BYTES[dtype]
        guard = max(GUARD, -(-tile_bytes // GUARD) * GUARD)
        self.x_at = guard
        self.out_at = guard + span + guard
        self.total = self.out_at + span + guard
        self.bits = input_bits(dtype, vec, self.n)
        self.host = torch.full((self.total,), SENTINEL, dtype=torch.uint8)
        self.host[self.x_at:self.x_at + self.nbytes] = self.bits.view(torch.uint8)
        self.buffer = None

    def load(self, buffer):
        """Fill `buffer` (device memory of self.total bytes): guards and x."""
        self.buffer = buffer
        buffer.copy_(self.host)

    def views(self):
        """(x, out): 1-D tensors of the dtype inside the buffer."""
        t = getattr(torch, self.dtype)
        b = self.buffer
        return (b[self.x_at:self.x_at + self.nbytes].view(t), b[self.out_at:self.out_at + self.nbytes].view(t))

    def judge(self):
        """None if the kernel was right; else the evidence, one line."""
        got = self.buffer.cpu()  # synchronous: waits for the kernel on its stream
        x_end, out_end = self.x_at + self.nbytes, self.out_at + self.nbytes
        regions = ((0, self.x_at, lambda i: f"guard before the input written at byte {i - self.x_at} of the input"),
                   (x_end, self.out_at, lambda i: f"guard before the output written at byte {i - self.out_at} "
                                                  f"of the output ({i - x_end} past the input's end)"),
                   (out_end, self.total, lambda i: f"guard after the output written at byte {i - out_end} "
                                                   "past the output's end"))
        for lo, hi, say in regions:
            bad = (got[lo:hi] != SENTINEL).nonzero()
            if bad.numel():
                i = lo + int(bad[0])
                return f"{say(i)} (0x{SENTINEL:02X} -> 0x{int(got[i]):02X})"
        itype = _int_view(self.dtype)
        x_now = got[self.x_at:self.x_at + self.nbytes].view(itype)
        bad = (x_now != self.bits).nonzero()
        if bad.numel():
            i = int(bad[0])
            return (f"input changed at element {i} of {self.n}: {_hex(int(self.bits[i]), self.width)} -> "
                    f"{_hex(int(x_now[i]), self.width)}")
        out = got[self.out_at:self.out_at + self.nbytes].view(itype)
        expect = expected_bits(self.bits, self.dtype)
        bad = (out != expect).nonzero()
        if bad.numel():
            i = int(bad[0])
            return (f"element {i} of {self.n} ({bad.numel()} differ): input {_hex(int(self.bits[i]), self.width)}, "
                    f"output {_hex(int(out[i]), self.width)}, expected {_hex(int(expect[i]), self.width)}")
        return None
