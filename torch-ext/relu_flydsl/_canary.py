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
GIVEN, APART, IN_PLACE, NEW = "given", "apart", "in place", "new"  # where a Canary.frame's output is


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


def _first(mask: torch.Tensor):
    """(index of the first True, how many) of a 1-D bool tensor, or None: on its own device
    (a large device buffer is judged without a copy or an index per element)."""
    if not bool(mask.any()):
        return None
    return int(mask.to(torch.uint8).argmax()), int(mask.sum())


def _hex(v: int, width: int) -> str:
    return f"0x{v & ((1 << width) - 1):0{width // 4}X}"


class Canary:
    """A buffer layout with guards, and its judge: a first-use canary's, and every case of the
    hardware check (_check.py, through Canary.frame): one machinery for both.

        GIVEN     [guard | x | guard | out | guard]    one allocation (a canary: always)
        APART     [guard | x | guard]  [guard | out | guard]   out in an allocation of its own
        IN_PLACE  [guard | x | guard]                  x is the output
        NEW       [guard | x | guard]                  the output is a new tensor (judge(output=))

    Every byte outside x and out must keep SENTINEL; x must keep its bits (unless it is the
    output); the output must hold the bit rule of x's bits, bit for bit. `buffer` (and, APART,
    `out_buffer`) is device memory (`device_memory`) of `total` (`out_total`) bytes, filled by load()."""

    def __init__(self, rung, dtype: str, vec: int):
        n = length(rung, vec)
        # guards of at least a tile: a kernel running a whole block past the
        # end stays inside the allocation, where the sentinels see it
        tile_bytes = rung.tile(vec) * ELEMENT_BYTES[dtype]
        guard = max(GUARD, -(-tile_bytes // GUARD) * GUARD)
        self._lay_out(dtype, input_bits(dtype, vec, n), guard, 0, 0, GIVEN)

    @classmethod
    def frame(cls, dtype: str, bits: torch.Tensor, guard: int = GUARD, x_offset: int = 0, out_offset: int = 0,
              out: str = APART):
        """A layout for `bits` (x's elements in memory order, as the dtype's integers, on any
        device): x `x_offset` bytes past its guard, out `out_offset` bytes past its own (GIVEN,
        APART), or IN_PLACE, or NEW."""
        if out not in (GIVEN, APART, IN_PLACE, NEW):
            raise ValueError(f"out must be one of {GIVEN!r}, {APART!r}, {IN_PLACE!r}, {NEW!r}")
        self = cls.__new__(cls)
        self._lay_out(dtype, bits, guard, x_offset, out_offset, out)
        return self

    def _lay_out(self, dtype, bits, guard, x_offset, out_offset, out):
        self.dtype, self.width, self.out = dtype, _dtype(dtype).width, out
        self.bits = bits
        self.n = bits.numel()
        self.nbytes = self.n * self.width // 8
        self.x_at = guard + x_offset
        span = -(-(self.x_at + self.nbytes) // GUARD) * GUARD  # keeps what follows 256-byte aligned
        self.out_total = None
        if out == GIVEN:
            self.out_at = span + guard + out_offset
            span = -(-(self.out_at + self.nbytes) // GUARD) * GUARD
        elif out == APART:
            self.out_at = guard + out_offset
            self.out_total = -(-(self.out_at + self.nbytes) // GUARD) * GUARD + guard
        else:
            self.out_at = self.x_at if out == IN_PLACE else None
        self.total = span + guard
        self.buffer = self.out_buffer = None

    @property
    def host(self) -> torch.Tensor:
        """The buffer's contents before the launch (CPU): guards and x."""
        host = torch.full((self.total,), SENTINEL, dtype=torch.uint8)
        host[self.x_at:self.x_at + self.nbytes] = self.bits.cpu().view(torch.uint8)
        return host

    def load(self, buffer, out_buffer=None):
        """Fill `buffer` (device memory of self.total bytes): guards and x; APART, `out_buffer`
        (of self.out_total bytes): guards, and SENTINEL where the output goes."""
        self.buffer, self.out_buffer = buffer, out_buffer
        if self.bits.device != buffer.device:  # one copy of the whole image to the device
            buffer.copy_(self.host)
        else:  # bits already where the buffer is (a large sweep's): filled there
            buffer.fill_(SENTINEL)
            buffer[self.x_at:self.x_at + self.nbytes].copy_(self.bits.view(torch.uint8))
        if self.out == APART:
            out_buffer.fill_(SENTINEL)

    def views(self):
        """(x, out): 1-D tensors of the dtype inside the buffers (out None for a new output)."""
        t = getattr(torch, self.dtype)
        x = self.buffer[self.x_at:self.x_at + self.nbytes].view(t)
        if self.out == IN_PLACE:
            return x, x
        b = self.out_buffer if self.out == APART else self.buffer
        return x, None if self.out_at is None else b[self.out_at:self.out_at + self.nbytes].view(t)

    def _regions(self):
        """The guard regions: (which buffer, 0 or 1 (APART's output), from, to, how to say byte i written there)."""
        x_end = self.x_at + self.nbytes
        if self.out == GIVEN:
            out_end = self.out_at + self.nbytes
            return ((0, 0, self.x_at, lambda i: f"guard before the input written at byte {i - self.x_at} of the input"),
                    (0, x_end, self.out_at, lambda i: f"guard before the output written at byte {i - self.out_at} "
                                                      f"of the output ({i - x_end} past the input's end)"),
                    (0, out_end, self.total, lambda i: f"guard after the output written at byte {i - out_end} "
                                                       "past the output's end"))
        what = "output" if self.out == IN_PLACE else "input"
        regions = ((0, 0, self.x_at, lambda i: f"guard before the {what} written at byte {i - self.x_at} of the {what}"),
                   (0, x_end, self.total, lambda i: f"guard after the {what} written at byte {i - x_end} "
                                                    f"past the {what}'s end"))
        if self.out == APART:
            out_end = self.out_at + self.nbytes
            regions += ((1, 0, self.out_at, lambda i: f"guard before the output written at byte {i - self.out_at} "
                                                      "of the output"),
                        (1, out_end, self.out_total, lambda i: f"guard after the output written at byte "
                                                               f"{i - out_end} past the output's end"))
        return regions

    def judge(self, output=None, on_device=False, bits=True):
        """None if the kernel was right; else the evidence, one line. `output`: a new output
        (NEW), its elements in x's memory order; on_device: compared where the buffers are (a
        large buffer), not copied to the host; bits=False: guards and input only (a
        baseline whose bits are not the rule's)."""
        # .cpu(): waits for the kernel on its stream
        got = [b if on_device or b is None else b.cpu() for b in (self.buffer, self.out_buffer)]
        for which, lo, hi, say in self._regions():
            bad = _first(got[which][lo:hi] != SENTINEL)
            if bad:
                i = lo + bad[0]
                return f"{say(i)} (0x{SENTINEL:02X} -> 0x{int(got[which][i]):02X})"
        itype = _int_view(self.dtype)
        x_bits = self.bits.to(got[0].device)
        x_now = got[0][self.x_at:self.x_at + self.nbytes].view(itype)
        if self.out != IN_PLACE:
            bad = _first(x_now != x_bits)
            if bad:
                i = bad[0]
                return (f"input changed at element {i} of {self.n}: {_hex(int(x_bits[i]), self.width)} -> "
                        f"{_hex(int(x_now[i]), self.width)}")
        if not bits:
            return None
        if self.out == NEW:
            out = output.reshape(-1).view(itype).to(got[0].device)
        else:
            out = got[1 if self.out == APART else 0][self.out_at:self.out_at + self.nbytes].view(itype)
        expect = expected_bits(x_bits, self.dtype)
        bad = _first(out != expect)
        if bad:
            i = bad[0]
            return (f"element {i} of {self.n} ({bad[1]} differ): input {_hex(int(x_bits[i]), self.width)}, "
                    f"output {_hex(int(out[i]), self.width)}, expected {_hex(int(expect[i]), self.width)}")
        return None
