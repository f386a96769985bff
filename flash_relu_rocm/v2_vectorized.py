"""v2 vectorized: each thread moves `vec` contiguous elements in one 128-bit atom.

Against v1 only the chunk sizes change (tile = block * vec, one = vec, atom
bits = vec * element bits); every divide, slice and copy line is the same. The
planner picks `vec` so that it divides numel and both pointers are aligned to
vec * element size: one predicate bit cannot describe a half-valid vector.
128 bits are 4 float32, 8 float16/bfloat16 or 16 int8 elements.
The reference post ("Beating torch.relu with FlyDSL: A Hands-On Guide to
Bandwidth-Bound Kernels", bf16 8192x8192) measured 6793 GB/s, 85% of peak,
0.99x torch, 2.37x v1.
"""

import flydsl.compiler as flyc
import flydsl.expr as fx

from ._common import ELEMENT_TYPES, host_launcher, kernel_name, relu_for


def build(dtype: str, vec: int, block: int = 256):
    elem = ELEMENT_TYPES[dtype]
    relu = relu_for(dtype, vec)

    @flyc.kernel(name=kernel_name("v2_vectorized", dtype, vec, block))
    def relu_v2_vectorized(X: fx.Tensor, Y: fx.Tensor):
        bid = fx.block_idx.x
        tid = fx.thread_idx.x
        numel = X.shape.unpack()

        in_bounds = fx.make_rmem_tensor(1, fx.Boolean)
        in_bounds[0] = (bid * block + tid) * vec < numel

        tile = fx.make_layout(block * vec, 1)
        one = fx.make_layout(vec, 1)
        eX = fx.logical_divide(fx.slice(fx.logical_divide(X, tile), (None, bid)), one)
        eY = fx.logical_divide(fx.slice(fx.logical_divide(Y, tile), (None, bid)), one)

        atom = fx.make_copy_atom(fx.UniversalCopy(vec * elem.width), elem)
        rX = fx.make_rmem_tensor(vec, elem)
        rY = fx.make_rmem_tensor(vec, elem)
        fx.copy_atom_call(atom, fx.slice(eX, (None, tid)), rX, pred=in_bounds)
        fx.memref_store_vec(relu(fx.memref_load_vec(rX)), rY)
        fx.copy_atom_call(atom, rY, fx.slice(eY, (None, tid)), pred=in_bounds)

    return host_launcher(relu_v2_vectorized, block)
