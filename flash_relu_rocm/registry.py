"""The ladder as data: one entry per rung, read by dispatch, tests, the ISA
report and the benchmarks alike. Importing this file does not import flydsl."""

from dataclasses import dataclass
import importlib

from .dtypes import ALL_DTYPES, ALL_ELEMENT_BYTES, DTYPES  # the one dtype table (dtypes.py)
# Re-exported (the `as` form marks it so) for the planner, the runtime and the
# tests, which read the served dtypes' sizes beside the rungs.
from .dtypes import ELEMENT_BYTES as ELEMENT_BYTES

VECTOR_BYTES = 16  # one 128-bit copy atom per thread


@dataclass(frozen=True)
class Rung:
    name: str          # short name used everywhere: "v1" .. "v5"
    module: str        # file in this package holding the kernel
    idea: str          # what this rung adds over the previous one
    block: int         # threads per block
    vectorized: bool   # moves up to 128 bits per thread and instruction
    buffer: bool       # buffer descriptors: hardware bounds check, one launch < 4 GiB
    nt_store: bool     # non-temporal store
    # One vector per thread in every rung: the unroll sweep of "Beating torch.relu
    # with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels" rejected unrolling.
    # The planner, canary and ISA check read only tile(); v3_tuned.unrolled(n), the
    # swept variant, overrides it.

    def max_vec(self, dtype: str) -> int:
        """Widest vector in elements this rung may use for `dtype`."""
        return VECTOR_BYTES // ALL_ELEMENT_BYTES[dtype] if self.vectorized else 1

    def tile(self, vec: int) -> int:
        """Elements one block moves at vector width `vec`: what the planner's
        grid divides by."""
        return self.block * vec

    def build(self, dtype: str, vec: int):
        """The `@flyc.jit` launcher for (dtype, vec); imports flydsl. Takes
        the served dtypes and the pending ones (dtypes.PENDING_DTYPES), which
        are compiled and checked but not served."""
        if dtype not in ALL_DTYPES:
            raise ValueError(f"{self.name}: unsupported dtype {dtype!r}; supported: {DTYPES}")
        module = importlib.import_module(f".{self.module}", __package__)
        return module.build(dtype, vec, block=self.block)


RUNGS = {
    r.name: r
    for r in (
        Rung("v1", "v1_naive", "one element per thread, one-bit predicate", 256, False, False, False),
        Rung("v2", "v2_vectorized", "128-bit copy atoms", 256, True, False, False),
        Rung("v3", "v3_tuned", "swept block size (128); unrolling rejected", 128, True, False, False),
        Rung("v4", "v4_buffer", "buffer descriptors with hardware bounds checks", 128, True, True, False),
        Rung("v5", "v5_nontemporal", "non-temporal stores", 128, True, True, True),
    )
}
DEFAULT_RUNG = "v5"


def get_rung(name: str) -> Rung:
    try:
        return RUNGS[name]
    except KeyError:
        raise ValueError(f"unknown rung {name!r}; choose one of {sorted(RUNGS)}") from None
