"""Launch planning: pure Python, no flydsl, no device.

Rules (each one exists because breaking it corrupted memory or values in the
reference post, "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels",
or in our own emulation):
- the vector width divides numel, so no vector straddles the end of a buffer
  (a predicate bit covers a whole vector; the hardware drops a straddling
  buffer access whole);
- the vector width respects the alignment of BOTH pointers: a view starting at
  an odd element gets a narrower vector, never a misaligned 128-bit access;
- the grid is exact: ceil(numel / rung.tile(vec)) blocks (block * vec elements
  in every shipped rung), no over-launch;
- the kernels index in signed 32-bit: within one launch every computed element
  index stays below 2^31, and for buffer rungs every byte offset (and the
  descriptor's num_records) below 2^32. Larger tensors are split into launches
  at multiples of the tile, so every chunk keeps the width and alignment.
"""

from dataclasses import dataclass

from .registry import ELEMENT_BYTES, Rung


@dataclass
class LaunchLimits:
    """Per-launch ceilings. Tests lower them to force split launches on small
    tensors; production code never changes them."""

    max_index: int = 2**31 - 1         # numel and every computed element index (signed i32)
    max_buffer_bytes: int = 2**32 - 1  # num_records and every byte offset in a descriptor (u32)


LIMITS = LaunchLimits()


@dataclass(frozen=True)
class Launch:
    start: int   # first element of this launch
    numel: int   # elements in this launch
    grid: int    # blocks

    @property
    def stop(self) -> int:
        return self.start + self.numel


@dataclass(frozen=True)
class Plan:
    rung: str
    dtype: str
    vec: int
    block: int
    tile: int    # elements per block: the rung's tile at this vector width
    launches: tuple


def pick_vec(numel: int, dtype: str, max_vec: int, *addresses: int) -> int:
    """Widest power-of-two vector <= max_vec dividing numel, with every address
    aligned to vec * element size."""
    esize = ELEMENT_BYTES[dtype]
    vec = max_vec
    while vec > 1 and (numel % vec or any(a % (vec * esize) for a in addresses)):
        vec //= 2
    return vec


def fits_one_launch(rung: Rung, dtype: str, numel: int, vec: int, tile: int, limits: LaunchLimits) -> bool:
    """True when every index (and, for buffer rungs, every byte offset and
    num_records) of one launch over `numel` elements stays representable. The
    exact grid's last block is counted whole: its idle threads still compute
    their index before the predicate or the descriptor masks them."""
    last_index = -(-numel // tile) * tile - vec
    ok = numel <= limits.max_index and last_index <= limits.max_index
    if rung.buffer:
        esize = ELEMENT_BYTES[dtype]
        ok = ok and numel * esize <= limits.max_buffer_bytes and (last_index + vec) * esize - 1 <= limits.max_buffer_bytes
    return ok


def split_size(rung: Rung, dtype: str, vec: int, tile: int, limits: LaunchLimits) -> int:
    """Largest multiple of the tile that fits one launch: chunk boundaries at
    tile multiples keep every chunk's width and alignment."""
    lo, hi = 0, limits.max_index // tile
    while lo < hi:  # binary search over whole tiles; fits_one_launch is monotone
        mid = (lo + hi + 1) // 2
        if fits_one_launch(rung, dtype, mid * tile, vec, tile, limits):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        raise ValueError(f"launch limits {limits} leave no room for one tile of {tile} elements")
    return lo * tile


def plan(rung: Rung, dtype: str, numel: int, x_addr: int, y_addr: int, limits: LaunchLimits = None) -> Plan:
    """Plan y[:numel] = relu(x[:numel]) for contiguous x and y at these addresses."""
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    vec = pick_vec(numel, dtype, rung.max_vec(dtype), x_addr, y_addr)
    tile = rung.tile(vec)
    limits = limits or LIMITS
    if fits_one_launch(rung, dtype, numel, vec, tile, limits):
        chunk = max(numel, 1)
    else:
        chunk = split_size(rung, dtype, vec, tile, limits)
    launches = []
    for start in range(0, numel, chunk):
        n = min(chunk, numel - start)
        launches.append(Launch(start, n, -(-n // tile)))
    return Plan(rung.name, dtype, vec, rung.block, tile, tuple(launches))
