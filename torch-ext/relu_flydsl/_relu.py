"""The public `relu(x, out=None)`: validation, torch.library ops, autograd.

Semantics are torch.relu's, element by element on the bits: y = +0.0 if x < 0
else x. NaN keeps its exact bits, -0.0 stays -0.0, +-inf and denormals pass.

Eager calls go straight to the dispatcher (a torch.library op costs several
microseconds of host time per call); calls under torch.compile or needing
autograd go through the registered ops, which call the same dispatcher.
"""

from typing import Optional

import torch

from . import _dispatch
from ._ops import add_op_namespace_prefix
from .flash_relu_rocm.registry import RUNGS

_OVERLAP = "relu(): out overlaps x without being x; pass out=x for in place, or a separate buffer"


def _check(x, out, rung) -> None:
    """Reject bad input before anything is written."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"relu(): x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype == torch.bool or x.is_complex():
        raise TypeError(f"relu(): dtype {x.dtype} is not supported (torch.relu rejects it too)")
    if rung is not None and rung not in RUNGS:
        raise ValueError(f"relu(): unknown rung {rung!r}; choose one of {sorted(RUNGS)}")
    if out is None:
        return
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"relu(): out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != x.dtype:
        raise TypeError(f"relu(): out has dtype {out.dtype} but x has dtype {x.dtype}")
    if out.device != x.device:
        raise ValueError(f"relu(): out is on device {out.device} but x is on {x.device}")
    if out.shape != x.shape:
        raise ValueError(f"relu(): out has shape {tuple(out.shape)} but x has shape {tuple(x.shape)}")
    compiling = torch.compiler.is_compiling()
    if not compiling:  # pointers are not traceable: the op checks at run time
        _check_overlap(x, out)
    in_place = out is x or (not compiling and _same_view(x, out))
    if not in_place and not _is_dense(out):  # out=x works for any layout, as torch.relu_ does
        raise ValueError(
            f"relu(): out must be dense (no gaps, no overlapping elements; e.g. torch.empty_like(x)); "
            f"got strides {out.stride()} for shape {tuple(out.shape)}"
        )
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        raise RuntimeError(
            "relu(): out= does not support automatic differentiation; call relu(x) without out= "
            "or run under torch.no_grad()"
        )


def _is_dense(t) -> bool:
    """Non-overlapping and dense, in any dimension order (what
    torch.empty_like returns): its elements fill exactly numel slots."""
    if t.is_contiguous():
        return True
    expected = 1
    for size, stride in sorted(((sz, st) for sz, st in zip(t.shape, t.stride()) if sz != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _same_view(x, out) -> bool:
    """out is x's memory in x's layout (shapes are already equal): in place."""
    return out.data_ptr() == x.data_ptr() and out.stride() == x.stride()


def _check_overlap(x, out) -> None:
    if not _same_view(x, out) and out.numel() and torch._C._overlaps(out, x):
        raise ValueError(_OVERLAP)


# ---- torch.library registration (torch.compile, autograd) ----------------
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


_is_compiling = torch.compiler.is_compiling
_env_raw = _dispatch._env_raw
_Tensor = torch.Tensor
_GFX950 = _dispatch.SUPPORTED_ARCH


def _needs_op(x) -> bool:
    return _is_compiling() or (x.requires_grad and torch.is_grad_enabled())


def relu(x: torch.Tensor, out: Optional[torch.Tensor] = None, *, rung: Optional[str] = None) -> torch.Tensor:
    """torch.relu with an optional preallocated output.

    x: any tensor torch.relu accepts. On a gfx950 device, float32/float16/
       bfloat16 contiguous tensors run the FlyDSL kernel; everything else runs
       torch's kernel (see `dispatch_stats()` for which path ran).
    out: same shape, dtype and device as x; contiguous (or x's strides); may
       be x itself (in place), must not partially overlap x. Returned.
    rung: "v1".."v5" to run a specific ladder rung (benchmarks, study);
       default v5, or $RELU_FLYDSL_RUNG.
    """
    # Hot path (eager, out= given, plain dense tensors, a cached launch entry):
    # _check's validation reduced to what these conditions leave open. Every
    # other call takes the general path below.
    if out is not None and type(x) is _Tensor and type(out) is _Tensor and not _is_compiling():
        dt = x.dtype
        if (
            out.dtype is dt
            and not x.requires_grad
            and not out.requires_grad
            and x.is_contiguous()
            and out.is_contiguous()
            and x.shape == out.shape
            and x.device == out.device
        ):
            d = _dispatch
            if _env_raw() != d.settings.env:  # kill switch / forced rung changed: drops _fast
                d.settings.refresh()
            dev = d.device_info(x)
            if dev is not None and dev.arch == _GFX950 and dev.current:
                numel = x.numel()
                xp = x.data_ptr()
                yp = out.data_ptr()
                # Entries exist only for valid rungs, kernel dtypes, single
                # launches, FlyDSL enabled (settings changes clear them).
                entry = d._fast.get((rung, dt, numel, xp & 15, yp & 15))
                if entry is not None and entry.direct:
                    nbytes = numel * entry.esize
                    if xp != yp and xp < yp + nbytes and yp < xp + nbytes:  # dense ranges overlap
                        raise ValueError(_OVERLAP)
                    entry.direct.launch(xp, yp, numel, entry.grid, dev.stream)  # any rank: the kernel sees 1-D
                    error = d._take_error()  # after every launch
                    if error:
                        d._launch_failed(error, entry.plan.rung, entry.plan.dtype, numel)
                    next(entry.count)
                    return out
    _check(x, out, rung)
    if out is None:
        if _needs_op(x):
            return _relu_op(x, rung)
        return _dispatch.run(x, torch.empty_like(x), rung)
    if _is_compiling():
        _relu_out_op(x, out, rung)
        return out
    return _dispatch.run(x, out, rung)
