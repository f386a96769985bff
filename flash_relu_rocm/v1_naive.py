"""v1 naive: one element per thread, guarded by a one-bit predicate.

The correct starting point and nothing more: every thread moves one element
(2 bytes in bf16, 1 in int8) per memory instruction. It serves every dtype,
int8 included: the rung's idea (one element, one predicate bit) does not
depend on the element, and it is the baseline the vectorized rungs are read
against. The reference post ("Beating torch.relu with FlyDSL: A Hands-On
Guide to Bandwidth-Bound Kernels", MI350X, bf16 8192x8192) measured 2865 GB/s,
36% of peak, 0.42x torch.
"""

import flydsl.compiler as flyc
import flydsl.expr as fx

from ._common import ELEMENT_TYPES, host_launcher, kernel_name, relu_for


def build(dtype: str, vec: int = 1, block: int = 256):
    assert vec == 1, "v1 moves one element per thread"
    elem = ELEMENT_TYPES[dtype]
    relu = relu_for(dtype, vec)

    @flyc.kernel(name=kernel_name("v1_naive", dtype, vec, block))
    def relu_v1_naive(X: fx.Tensor, Y: fx.Tensor):
        bid = fx.block_idx.x
        tid = fx.thread_idx.x
        numel = X.shape.unpack()

        # One bit per copy atom; here one atom moves one element.
        in_bounds = fx.make_rmem_tensor(1, fx.Boolean)
        in_bounds[0] = bid * block + tid < numel

        tile = fx.make_layout(block, 1)
        one = fx.make_layout(1, 1)
        eX = fx.logical_divide(fx.slice(fx.logical_divide(X, tile), (None, bid)), one)
        eY = fx.logical_divide(fx.slice(fx.logical_divide(Y, tile), (None, bid)), one)

        atom = fx.make_copy_atom(fx.UniversalCopy(elem.width), elem)
        rX = fx.make_rmem_tensor(1, elem)
        rY = fx.make_rmem_tensor(1, elem)
        fx.copy_atom_call(atom, fx.slice(eX, (None, tid)), rX, pred=in_bounds)
        fx.memref_store_vec(relu(fx.memref_load_vec(rX)), rY)
        fx.copy_atom_call(atom, rY, fx.slice(eY, (None, tid)), pred=in_bounds)

    return host_launcher(relu_v1_naive, block)
