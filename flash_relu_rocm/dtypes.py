"""The dtypes of the kernels, as one table: bytes, bit width, the integer
view that reads their bits, and the special bit patterns every check uses
(the canary, the harness, the semantics check, the tests).

`DTYPES` is what relu() serves, and all that the build, the runtime and the
checks iterate. `PENDING_DTYPES` have kernels and ISA checks but are not
served yet (`ALL_DTYPES` = both); serving one is removing it from `PENDING`.

Importing this file imports neither torch nor flydsl: names are strings
(`getattr(torch, d.int_view)` gives the torch dtype).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str            # torch's name: "bfloat16" (getattr(torch, name))
    bytes: int           # element size
    int_view: str        # signed integer dtype of the same width, for bit views
    exp_all_ones: int    # exponent mask: magnitude bits above it are NaN (0 for integers)
    special: tuple       # special bit patterns, unsigned
    floating: bool = True  # False: a two's-complement integer (x < 0 is the sign bit)

    @property
    def width(self) -> int:
        return 8 * self.bytes


def _table(*dtypes):
    return {d.name: d for d in dtypes}


# Special values on the bits (unsigned): NaNs with payloads (quiet, signalling,
# both signs), +-inf, +-0.0, denormals, largest/smallest finite, +-1; for
# int8 the ends and the sign boundary: -128, -1, 0, 1, 127.
ALL = _table(
    DType("float32", 4, "int32", 0x7F800000, (
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0x7FA00001, 0xFFBFFFFF,
        0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
        0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000)),
    DType("float16", 2, "int16", 0x7C00, (
        0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7E55, 0x7D00, 0xFDFF, 0x7C00, 0xFC00, 0x0000, 0x8000,
        0x0001, 0x8001, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x3C00, 0xBC00)),
    DType("bfloat16", 2, "int16", 0x7F80, (
        0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FC5, 0x7FA1, 0xFFBF, 0x7F80, 0xFF80, 0x0000, 0x8000,
        0x0001, 0x8001, 0x007F, 0x807F, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x3F80, 0xBF80)),
    DType("int8", 1, "int8", 0, (0x80, 0xFF, 0x00, 0x01, 0x7F), floating=False),
)

# Built and checked in their assembly, not served: relu() sends them to torch.
PENDING = ()

TABLE = {name: d for name, d in ALL.items() if name not in PENDING}  # the served ones
DTYPES = tuple(TABLE)                                   # ("float32", "float16", "bfloat16", "int8")
PENDING_DTYPES = tuple(name for name in ALL if name in PENDING)
ALL_DTYPES = DTYPES + PENDING_DTYPES
ELEMENT_BYTES = {name: d.bytes for name, d in TABLE.items()}
ALL_ELEMENT_BYTES = {name: d.bytes for name, d in ALL.items()}


def get(name: str, pending: bool = False) -> DType:
    """The served dtype `name` (or a pending one too, with pending=True)."""
    d = ALL.get(name)
    if d is None or (name in PENDING and not pending):
        raise ValueError(f"unsupported dtype {name!r}; the kernels serve {', '.join(DTYPES)}") from None
    return d


def signed(u: int, width: int) -> int:
    """An unsigned bit pattern as the signed integer of its width."""
    return u - (1 << width) if u >> (width - 1) else u
