"""The public `relu(x, out=None)`: validation, torch.library ops, autograd.

What runs, and with what results:
- The kernel (eager, gfx950, float32/float16/bfloat16/int8, contiguous or
  dense with out of x's strides; a shipped code object built from the FlyDSL
  ladder) computes, on the bits, y = +0.0 if x < 0 else x: NaN keeps its
  exact bits, -0.0 stays -0.0, +-inf and denormals pass (int8: y = 0 if
  x < 0 else x).
- The torch fallback (everything else) returns torch's own results, which
  differ by device: torch 2.11 on an NVIDIA GPU turns -0.0 into +0.0; CPU
  torch rewrites some NaN payloads (large bf16 tensors give 0xFFFF, f16
  signalling NaNs are quieted).
- Under torch.compile, relu traces to torch's relu so Inductor fuses it with
  its neighbours (a standalone pass cannot beat a fused one). Results are
  what Inductor makes of torch's relu on that device (measured: on an H200,
  torch 2.11, -0.0 and NaN bits kept, unlike eager torch there; on CPU, torch
  2.13, -0.0 kept, some bf16/f16 NaN payloads changed). RELU_FLYDSL_COMPILE=op,
  read when a graph is traced, keeps the opaque kernel op there instead.

relu() is a tracing and forward-AD check in Python and the compiled entry (_compiled_entry.c:
its own questions to libtorch, then a ready kernel entry, or the torch fallback off gfx950),
then, for what it did not serve, the general path: validation, inputs only torch serves (a
dual tensor among them: torch computes its tangent), the compiled and autograd forms, and one
call into the dispatcher (_dispatch.serve). Writes into a caller's tensor bump its version
counter once, as torch's out= and in-place ops do (autograd's check of saved tensors). A torch.library op costs several microseconds
of host time per call: eager calls reach it only for autograd, and it calls
the same dispatcher.
"""

import os
import warnings
from typing import Optional

import torch

from . import _dispatch, _inputs
from ._inputs import FORWARD_AD as _fwad
from ._inputs import OVERLAP as _OVERLAP
from ._ops import add_op_namespace_prefix
from ._state import ENV_COMPILE, caller_stacklevel
from .flash_relu_rocm.registry import RUNGS


_is_compiling = torch.compiler.is_compiling
# bool and the complex dtypes (x.dtype == torch.bool or x.is_complex(), as one lookup)
_REJECTED = frozenset(d for d in vars(torch).values() if isinstance(d, torch.dtype) and (d == torch.bool or d.is_complex))


def _check(x, out, rung, compiling: bool) -> bool:
    """Reject bad input before anything is written. True when torch must
    handle the call itself (_inputs.needs_torch: sparse, nested, quantized,
    subclasses, torch.func transforms, dispatch modes, meta)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"relu(): x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype in _REJECTED:
        raise TypeError(f"relu(): dtype {x.dtype} is not supported (torch.relu rejects it too)")
    if rung is not None:
        _inputs.check_rung(rung, RUNGS)
    if not compiling and _inputs.needs_torch(x, out):
        return True
    if out is None:
        return False
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"relu(): out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != x.dtype:
        raise TypeError(f"relu(): out has dtype {out.dtype} but x has dtype {x.dtype}")
    if out.device != x.device:
        raise ValueError(f"relu(): out is on device {out.device} but x is on {x.device}")
    if out.shape != x.shape:
        raise ValueError(f"relu(): out has shape {tuple(out.shape)} but x has shape {tuple(x.shape)}")
    in_place = out is x
    if not compiling:  # pointers are not traceable: the op checks at run time
        in_place = in_place or _same_view(x, out)
        if not in_place and out.numel() and _overlaps(x, out):  # _check_overlap, inlined
            raise ValueError(_OVERLAP)
    if not in_place and not (out.is_contiguous() or _dispatch.dense(out)):  # out=x: any layout, as torch.relu_
        raise ValueError(
            f"relu(): out must be dense (no gaps, no overlapping elements; e.g. torch.empty_like(x)); "
            f"got strides {out.stride()} for shape {tuple(out.shape)}"
        )
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        raise RuntimeError(
            "relu(): out= does not support automatic differentiation; call relu(x) without out= "
            "or run under torch.no_grad()"
        )
    return False


def _same_view(x, out) -> bool:
    """out is x's memory in x's layout (shapes are already equal): in place."""
    return out.data_ptr() == _inputs.read_ptr(x) and out.stride() == x.stride()  # out first: see _dispatch.run


def _span(t):
    """The bytes t's elements lie in, [first, end) (torch's strides are never negative; read-only:
    a copy-on-write t stays one)."""
    first = _inputs.read_ptr(t)
    return first, first + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()


def _overlaps(x, out) -> bool:
    """out and x share bytes, as the compiled entry judges it: torch._C._overlaps answers True for
    any two views of one storage, disjoint ones too, so their byte spans decide then."""
    if not torch._C._overlaps(out, x):
        return False
    (xa, xb), (ya, yb) = _span(x), _span(out)
    return xa < yb and ya < xb


def _check_overlap(x, out) -> None:
    if not _same_view(x, out) and out.numel() and _overlaps(x, out):
        raise ValueError(_OVERLAP)


# ---- torch.library registration (torch.compile, autograd) ----------------
# Version counters: the ops' writes leave them to torch.library, as torch's own ops do: a new
# output keeps version 0 (torch.relu's), and a mutated argument (out) is bumped once by
# torch.library's ADInplaceOrView kernel, so _dispatch.run bumps nothing here (bump=False).
@torch.library.custom_op(add_op_namespace_prefix("relu"), mutates_args=())
def _relu_op(x: torch.Tensor, rung: Optional[str] = None) -> torch.Tensor:
    return _dispatch.run(x, torch.empty_like(x), rung)


@_relu_op.register_fake
def _(x, rung=None):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)


def _backward(ctx, grad):
    (result,) = ctx.saved_tensors
    # torch.relu's own backward: zero where result <= 0 (NaN passes the gradient).
    return torch.ops.aten.threshold_backward(grad, result, 0), None


torch.library.register_autograd(add_op_namespace_prefix("relu"), _backward, setup_context=_setup_context)


@torch.library.custom_op(add_op_namespace_prefix("relu_out"), mutates_args=("out",))
def _relu_out_op(x: torch.Tensor, out: torch.Tensor, rung: Optional[str] = None) -> None:
    _check_overlap(x, out)
    _dispatch.run(x, out, rung)


@_relu_out_op.register_fake
def _(x, out, rung=None):
    return None


# ---- under torch.compile --------------------------------------------------


@torch.library.custom_op(add_op_namespace_prefix("check_out"), mutates_args=())
def _check_out_op(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """relu(x, out=y)'s overlap check at run time (pointers are not
    traceable); reads no elements. Returns a 0-dim True that the compiled
    write selects on: an op whose output nothing uses is dropped from the graph."""
    _check_overlap(x, out)
    return torch.ones((), dtype=torch.bool, device=x.device)


@_check_out_op.register_fake
def _(x, out):
    return x.new_empty((), dtype=torch.bool)


def _compile_uses_op() -> bool:
    value = os.environ.get(ENV_COMPILE, "").strip().lower()
    if value not in ("", "torch", "op"):
        warnings.warn(f"ignoring {ENV_COMPILE}={value!r}: use 'op' or 'torch' (the default)", RuntimeWarning,
                      caller_stacklevel())
    return value == "op"


# torch.compiler.assume_constant_result(_compile_uses_op): dynamo calls it for real
# at trace time and the graph keeps the answer. The decorator imports torch._dynamo
# (~1 s) at package import; all it does is set this mark (checked by
# tests/cpu/test_compile_fusion.py against the installed torch).
_compile_uses_op._dynamo_marked_constant = True


def _traced(x, out, rung):
    """relu under torch.compile, x and out validated. Default: torch's relu,
    which Inductor fuses with its neighbours; rung is then unused."""
    if _compile_uses_op():
        if out is None:
            return _relu_op(x, rung)
        _relu_out_op(x, out, rung)
        return out
    if out is None:
        return torch.relu(x)
    # A copy_ Inductor fuses with the relu (in place for out=x). torch.relu, not
    # clamp_min: Inductor lowers them differently (on an H200, clamp_min turned
    # -0.0 into +0.0 and float32 NaN payloads into 0x7FFFFFFF; relu kept both).
    y = torch.relu(x)
    out.copy_(y if out is x else torch.where(_check_out_op(x, out), y, x))
    return out


_serve, _torch_input = _dispatch.serve, _dispatch.torch_input


class _NoFlag:
    _is_compiling_flag = False


def _compiling_parts():
    """torch.compiler.is_compiling() as `dynamo() or flags._is_compiling_flag`, one Python
    call cheaper: in torch 2.13 is_compiling is `False if torch.jit.is_scripting() else
    _is_compiling_flag`, and is_scripting() is False outside TorchScript; Dynamo folds
    is_dynamo_compiling() (like is_compiling()) to True while it traces, so the flag is
    never read in a traced frame. A torch whose is_compiling reads otherwise keeps its own."""
    code = getattr(torch.compiler.is_compiling, "__code__", None)
    if (code is not None and code.co_names == ("torch", "jit", "is_scripting", "_is_compiling_flag")
            and isinstance(getattr(torch.compiler, "_is_compiling_flag", None), bool)
            and hasattr(torch.compiler, "is_dynamo_compiling")):
        return torch.compiler.is_dynamo_compiling, torch.compiler
    return torch.compiler.is_compiling, _NoFlag


_dynamo, _flags = _compiling_parts()
_compiled = None  # the compiled entry's serve(x, out, rung) where it loaded (_compiled_entry.py sets it)


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None, *, rung: Optional[str] = None) -> torch.Tensor:
    """ReLU with an optional preallocated output.

    x: any tensor torch.relu accepts. On a gfx950 device, float32/float16/
       bfloat16/int8 contiguous tensors (or dense ones, with out of x's
       strides) run the shipped gfx950 kernel: on the bits, y = +0.0 if x < 0
       else x (NaN bits, -0.0, +-inf, denormals pass; int8: y = 0 if x < 0 else x).
       Everything else runs torch's kernel and returns torch's results, whose
       sign of zero and NaN payloads differ by device (`dispatch_stats()`
       says which path ran).
    out: same shape, dtype and device as x; dense (or x's strides); may
       be x itself (in place), must not partially overlap x. Returned.
    rung: "v1".."v5" to run a specific ladder rung (benchmarks, study);
       default v5, or $RELU_FLYDSL_RUNG.

    Under torch.compile this traces to torch's relu (out=: a copy_ of it
    that Inductor fuses), so it fuses with its neighbours; rung is unused. With
    RELU_FLYDSL_COMPILE=op, read when the graph is traced, the kernel op
    runs there instead.
    """
    # Tracing is asked here, where Dynamo folds it, and forward AD (a dual_level is active: the
    # general path asks the tensors for tangents); the compiled entry asks libtorch the rest
    # (subclasses, torch.func transforms, dispatch modes, autograd, neg bits, an inference-tensor
    # out: _compiled_entry.c, torch_decides). A call it returns None for takes the general path.
    if _compiled is not None and not _dynamo() and not _flags._is_compiling_flag and _fwad._current_level < 0:
        y = _compiled(x, out, rung)
        if y is not None:
            return y
    compiling = _is_compiling()
    if _check(x, out, rung, compiling):  # an input only torch can serve: torch's result or torch's error
        return _torch_input(x, out)
    if compiling:
        return _traced(x, out, rung)
    if out is None and x.requires_grad and torch.is_grad_enabled():  # autograd through the op
        return _relu_op(x, rung)
    return _serve(x, out, rung)
