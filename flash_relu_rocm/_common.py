"""Pieces every rung shares: the element types, the relu arithmetic, the
kernel name and the host launcher.

Imports flydsl, so only the rung modules import this file (the registry and the
planner stay importable without flydsl).
"""

import flydsl.compiler as flyc
import flydsl.expr as fx

# torch dtype name -> FlyDSL element type. The host must pick the kernel by the
# tensor's dtype: a bf16 kernel handed f32 tensors silently recompiles.
ELEMENT_TYPES = {
    "float32": fx.Float32,
    "float16": fx.Float16,
    "bfloat16": fx.BFloat16,
    "int8": fx.Int8,
}


def relu_select(x):
    """`x < 0 ? 0 : x` as an ordered compare: NaN and -0.0 fall through
    unchanged (the bit rule). `maximumf` would turn -0.0 into +0.0, as torch's
    GPU relu does on an NVIDIA H200. For integers LLVM folds this into `smax`."""
    zero = fx.full_like(x, 0)
    return (x < zero).select(zero, x)


# v_perm_b32 selector bytes 8..11 give 0xFF or 0x00 from the sign bit of bytes
# 1, 3, 5, 7 of {S0, S1} (S1 = bytes 0..3). With S1 = w and S0 = w << 8 those
# are the signs of w's bytes 1, 3, 0, 2: this selector puts each byte's sign
# mask under that byte.
_SIGN_MASK_SELECTOR = 0x090B080A


def relu_int8_dwords(x):
    """relu on int8 four bytes per 32-bit word: mask = each byte's sign spread
    over the byte (one shift + one v_perm_b32), y = w & ~mask (one v_bitop3).
    On gfx950 (LLVM 22) that is 12 VALU instructions per dwordx4, against 16
    for a shift-and-multiply sign mask (with quarter-rate v_mul_lo_u32) and 39
    for `smax <16 x i8>`, which both arith.maxsi and compare/select compile
    to (v_max_i16_sdwa per byte plus repacking): tools/isa_report.py --int8-forms."""
    words = x.bitcast(fx.Int32)
    out = []
    for i in range(words.numel):
        w = words[i]
        mask = fx.Int32(fx.rocdl.perm_b32(w << 8, w, fx.Int32(_SIGN_MASK_SELECTOR)))
        out.append(w & ~mask)
    return fx.Vector.from_elements(out, fx.Int32).bitcast(fx.Int8)


def relu_for(dtype: str, vec: int):
    """The relu arithmetic for a vector of `vec` elements of `dtype`, chosen
    on the host (a Python `if` inside the kernel body would be traced)."""
    if dtype == "int8" and vec % 4 == 0:
        return relu_int8_dwords
    return relu_select  # floats; int8 below one word (1 or 2 bytes): v_max_i16


def kernel_name(label: str, dtype: str, vec: int, block: int) -> str:
    """What profilers and the disassembly show, e.g. relu_v5_nontemporal_bfloat16_x8_b128
    (`label` is the rung file's name)."""
    return f"relu_{label}_{dtype}_x{vec}_b{block}"


def host_launcher(kernel, block):
    """The `@flyc.jit` launcher: the grid is a runtime argument computed by the
    planner (exact, never over-launched), so one compiled kernel serves every size."""

    @flyc.jit
    def launch(X: fx.Tensor, Y: fx.Tensor, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(X, Y).launch(grid=(grid, 1, 1), block=(block, 1, 1), stream=stream)

    return launch
