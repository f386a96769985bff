"""The benchmark shapes, as data: the one list that the `kernels benchmark`
workloads (benchmarks/benchmark.py) and the ladder harness (benchmarks/ladder/)
both read. Pure Python: importing it imports neither torch nor flydsl.

The shapes are those of the reference post, "Beating torch.relu with FlyDSL:
A Hands-On Guide to Bandwidth-Bound Kernels": its four shapes, and its cache
band of N x 8192 bfloat16 tensors from 134 to 1074 MB of total traffic
(2 x numel x element size).
"""

from .registry import RUNGS

POST_SHAPES = ((8192, 8192), (16384, 8192), (32768, 8192), (4096, 14336))
CACHE_BAND_SHAPES = ((4096, 8192), (6144, 8192), (8192, 8192), (12288, 8192),
                     (16384, 8192), (24576, 8192), (32768, 8192))
CACHE_BAND_DTYPE = "bfloat16"
# the band asks one question: do non-temporal stores pay there? The buffer rungs differ in that alone
CACHE_BAND_RUNGS = tuple(name for name, r in RUNGS.items() if r.buffer)


def traffic_mb(shape, element_bytes):
    """Total traffic of one relu over `shape` in MB (1e6 bytes), rounded."""
    numel = 1
    for s in shape:
        numel *= s
    return round(2 * numel * element_bytes / 1e6)
