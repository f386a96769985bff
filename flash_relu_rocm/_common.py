"""Pieces every rung shares: the dtype table and the host launcher.

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
}


def relu_select(x):
    """`x < 0 ? +0.0 : x` as an ordered compare: NaN and -0.0 fall through
    unchanged (the bit rule). `maximumf` would turn -0.0 into +0.0, as torch's
    GPU relu does on an NVIDIA H200."""
    zero = fx.full_like(x, 0.0)
    return (x < zero).select(zero, x)


def kernel_name(rung, dtype, vec, block, unroll=1):
    """What profilers and the disassembly show, e.g. relu_v5_nontemporal_bfloat16_x8_b128."""
    return f"relu_{rung}_{dtype}_x{vec}_b{block}" + (f"_u{unroll}" if unroll > 1 else "")


def host_launcher(kernel, block):
    """The `@flyc.jit` launcher: the grid is a runtime argument computed by the
    planner (exact, never over-launched), so one compiled kernel serves every size."""

    @flyc.jit
    def launch(X: fx.Tensor, Y: fx.Tensor, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(X, Y).launch(grid=(grid, 1, 1), block=(block, 1, 1), stream=stream)

    return launch
