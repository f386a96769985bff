"""What the harness times: cases of (shape, dtype), tagged with the sweeps they belong to.

Sweeps:
  curve  total traffic (2 x numel x element size) from 64 KiB to 2 GiB, log-spaced: 3 points
         per octave, 6 per octave through the last-level-cache band of an MI350X (L2 32 MiB,
         Infinity Cache 256 MiB: from half the L2 to twice the Infinity Cache, 16 MiB .. 512 MiB),
         where torch and the rungs change regime. 1-D tensors.
  shapes the four shapes of the reference post, "Beating torch.relu with FlyDSL: A Hands-On
         Guide to Bandwidth-Bound Kernels" (flash_relu_rocm/workloads.py)
  band   the post's cache band, N x 8192 (flash_relu_rocm/workloads.py)
Since an element is read once and written once, the traffic is also the footprint of x and out
together: a point's traffic says which cache level its working set fits in.
"""

import math
from dataclasses import dataclass

from flash_relu_rocm import workloads
from flash_relu_rocm.dtypes import DTYPES, ELEMENT_BYTES

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
CURVE_LO, CURVE_HI = 64 * KIB, 2 * GIB
L2_BYTES, LLC_BYTES = 32 * MIB, 256 * MIB  # MI350X: L2, Infinity Cache (last level)
BAND_LO, BAND_HI = L2_BYTES // 2, 2 * LLC_BYTES
PER_OCTAVE, BAND_PER_OCTAVE = 3, 6
NUMEL_QUANTUM = 64  # curve sizes are whole multiples: every rung runs its widest vector (<= 16 elements)
SWEEPS = ("curve", "shapes", "band")


def traffic_bytes(numel, dtype):
    """Bytes one ReLU moves: every element read once and written once."""
    return 2 * numel * ELEMENT_BYTES[dtype]


def curve_traffic(lo=CURVE_LO, hi=CURVE_HI, per_octave=PER_OCTAVE, band=(BAND_LO, BAND_HI),
                  band_per_octave=BAND_PER_OCTAVE):
    """Target traffic in bytes, ascending: lo * 2^(k / band_per_octave) for every k inside
    `band` (ends included), every (band_per_octave / per_octave)-th k outside, lo and hi
    always. band_per_octave must be a multiple of per_octave."""
    if band_per_octave % per_octave:
        raise ValueError(f"band_per_octave {band_per_octave} is not a multiple of per_octave {per_octave}")
    step = band_per_octave // per_octave
    top = round(math.log2(hi / lo) * band_per_octave)
    out = []
    for k in range(top + 1):
        t = lo * 2 ** (k / band_per_octave)
        if k in (0, top) or k % step == 0 or band[0] <= t <= band[1]:
            out.append(t)
    return out


def curve_numel(traffic, dtype):
    """Elements whose traffic is nearest `traffic`, a whole multiple of NUMEL_QUANTUM."""
    per = 2 * ELEMENT_BYTES[dtype] * NUMEL_QUANTUM
    return max(1, round(traffic / per)) * NUMEL_QUANTUM


@dataclass(frozen=True)
class Case:
    shape: tuple
    dtype: str
    sweeps: tuple  # of SWEEPS

    @property
    def numel(self):
        return math.prod(self.shape)

    @property
    def name(self):
        return "x".join(map(str, self.shape))

    @property
    def traffic(self):
        return traffic_bytes(self.numel, self.dtype)


def shapes_of(sweep, dtype, **curve):
    if sweep == "curve":
        return list(dict.fromkeys((curve_numel(t, dtype),) for t in curve_traffic(**curve)))
    if sweep == "shapes":
        return [tuple(s) for s in workloads.POST_SHAPES]
    if sweep == "band":
        return [tuple(s) for s in workloads.CACHE_BAND_SHAPES]
    raise ValueError(f"unknown sweep {sweep!r}; choose from {SWEEPS}")


def cases(dtypes=("bfloat16",), sweeps=SWEEPS, **curve):
    """The union of the asked sweeps per dtype, ordered by (dtype, traffic); a size in
    several sweeps is one case carrying every tag (one of the post's 2-D shapes over a curve size)."""
    for d in dtypes:
        if d not in DTYPES:
            raise ValueError(f"unknown dtype {d!r}; the kernels serve {', '.join(DTYPES)}")
    out = []
    for d in dtypes:
        tagged = {}  # numel -> (shape, sweeps): a curve size equal to one of the post's shapes is that shape
        for sweep in sorted(sweeps, key=lambda s: s == "curve"):
            for s in shapes_of(sweep, d, **curve):
                shape, tags = tagged.setdefault(math.prod(s), (s, []))
                tags.append(sweep)
        out += [Case(s, d, tuple(t)) for s, t in tagged.values()]
    return sorted(out, key=lambda c: (c.dtype, c.traffic, c.name))
