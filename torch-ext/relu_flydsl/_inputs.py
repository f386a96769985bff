"""Which inputs torch must handle itself, torch's answer for them, and argument checks.

    needs_torch(x, out)     True: a layout, wrapper or transform the kernel path cannot serve
    why_torch(x, out)       the same decision as a short reason (for dispatch_stats), or None
    torch_relu(x, out)      torch's own result (or torch's own error) for relu(x, out)
    short(value)            a value's repr cut to ~80 characters, for error messages
    check_rung(rung, rungs) rung=None or a known rung name, else TypeError/ValueError
    warmup_args(...)        warmup()'s arguments checked and normalized

needs_torch runs on every call that misses relu()'s hot path, so its checks go
cheapest first and stop at the first hit. Call it eagerly only: under
torch.compile the traced path already runs torch's relu.
Standard library and torch only (this file ships in the variant).
"""

import operator

import torch

OVERLAP = "relu(): out overlaps x without being x; pass out=x for in place, or a separate buffer"
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter  # disables __torch_function__: behaves as a plain tensor
_strided = torch.strided
_functorch = torch._C._functorch
_current_level = _functorch.maybe_current_level        # None outside torch.func transforms
_dispatch_modes = torch._C._len_torch_dispatch_stack    # FakeTensorMode, make_fx, FlopCounterMode ...
_inference_mode = torch.is_inference_mode_enabled


class _EveryLevel:
    """Stands in for torch.autograd.forward_ad where it keeps no `_current_level` int: every
    call then asks each tensor for a tangent (slower, never wrong)."""
    _current_level = 0


# torch.autograd.forward_ad's `_current_level`: -1 outside fwAD.dual_level(), else the level
# whose tangents relu() must keep (torch has one forward-AD level at a time). relu() reads it
# before the compiled entry, which cannot see tangents.
FORWARD_AD = (torch.autograd.forward_ad if type(getattr(torch.autograd.forward_ad, "_current_level", None)) is int
              else _EveryLevel)
_unpack_dual = getattr(torch._VF, "_unpack_dual", None)


# A tensor's address for reading: const_data_ptr() leaves a copy-on-write tensor one (data_ptr()
# copies it first); torch before 2.13 has only data_ptr() (and no copy-on-write tensors to keep).
read_ptr = getattr(torch.Tensor, "const_data_ptr", torch.Tensor.data_ptr)


def has_tangent(t) -> bool:
    """t (a tensor) carries a forward-AD tangent at the current level (only asked while a
    level is active: a few microseconds)."""
    level = FORWARD_AD._current_level
    if level < 0:
        return False
    if _unpack_dual is None:
        return torch.autograd.forward_ad.unpack_dual(t, level=level).tangent is not None
    return _unpack_dual(t, level)[1] is not None


def dual(x, out) -> bool:
    """x, or out where it is a tensor, carries a forward-AD tangent (the level is read first: outside
    fwAD.dual_level() this is one attribute read)."""
    return FORWARD_AD._current_level >= 0 and (has_tangent(x) or (isinstance(out, _Tensor) and has_tangent(out)))


def needs_torch(x, out) -> bool:
    """True when torch must handle relu(x, out) itself: non-strided layouts
    (sparse COO/CSR/CSC/BSR/BSC, mkldnn), nested or quantized tensors, tensor
    subclasses (__torch_function__ / __torch_dispatch__ wrappers, FakeTensor,
    the jagged NestedTensor; nn.Parameter counts as plain), an
    active torch.func transform (vmap, grad, jvp, jacrev, functionalize, any
    nesting: the tensors inside are functorch wrappers without storage) or an
    active torch dispatch mode (FakeTensorMode, make_fx, FlopCounterMode),
    an out that is an inference tensor outside inference mode (torch raises), and
    an x or out with a forward-AD tangent (fwAD.make_dual: torch computes the tangent).
    A non-tensor x or out is left to the caller's validation (False).

    Meta tensors need nothing here: they are on no ROCm device, so the
    dispatcher's fallback (torch's kernel) serves them. out (when not x) is
    checked for type, layout and nesting only: relu() requires out's dtype
    and device to equal x's, so a quantized or meta out with a plain x is
    rejected by that validation, never served.
    Inlined and ordered cheapest first: it runs on every call that misses
    relu()'s hot path."""
    tx = type(x)
    if tx is not _Tensor and tx is not _Parameter:
        return isinstance(x, _Tensor)
    if x.layout is not _strided or x.is_nested or x.is_quantized:
        return True
    if out is not None and out is not x:
        to = type(out)
        if to is not _Tensor and to is not _Parameter:
            return isinstance(out, _Tensor)
        if out.layout is not _strided or out.is_nested:
            return True
    if out is not None and out.is_inference() and not _inference_mode():
        return True  # torch refuses writes to inference tensors outside inference mode
    if _current_level() is not None or _dispatch_modes() != 0:
        return True
    return dual(x, out)  # a dual tensor (fwAD.make_dual): torch's kernel computes its tangent


def why_torch(x, out):
    """needs_torch's decision as a short reason ("sparse_csr layout",
    "torch.func transform", ...), or None where needs_torch says False.
    Slower than needs_torch: call it once needs_torch said True."""
    for t, full in ((x, True), (out, False)):
        if not isinstance(t, _Tensor) or (not full and t is x):
            continue
        if type(t) is not _Tensor and type(t) is not _Parameter:
            return f"tensor subclass {type(t).__name__}"
        if t.layout is not _strided:
            return f"{str(t.layout).replace('torch.', '')} layout"
        if t.is_nested:
            return "nested tensor"
        if full and t.is_quantized:
            return "quantized tensor"
    if not isinstance(x, _Tensor):
        return None
    if isinstance(out, _Tensor) and out.is_inference() and not _inference_mode():
        return "inference tensor written outside inference mode"
    if _current_level() is not None:
        return "torch.func transform"
    if _dispatch_modes():
        return "torch dispatch mode"
    if dual(x, out):
        return "forward AD"
    return None


def torch_relu(x, out):
    """torch's own result for relu(x, out), or torch's own error:
    out None -> torch.relu(x); out is x -> torch.relu_(x) (torch's in-place
    relu, which sparse, quantized and batched tensors support); another out ->
    torch.clamp_min(x, 0, out=out), torch.relu's kernel with an out (torch
    rejects it for sparse, nested and quantized layouts and under vmap, grad
    and jvp). relu()'s own contract for out (same dtype, device and shape) is
    checked first, where the shape can be read, and an inference-tensor out
    outside inference mode, and a dual x or out with another out (torch's out=
    functions refuse forward AD), are refused before anything is written
    (torch raises the same errors after writing)."""
    if out is None:
        return torch.relu(x)
    if isinstance(out, _Tensor) and out.is_inference() and not _inference_mode():
        # torch raises this too, but only after its kernel has written out
        raise RuntimeError("relu(): out is an inference tensor: torch refuses an inplace update to an inference "
                           "tensor outside InferenceMode; clone it or call relu under torch.inference_mode()")
    if out is x:
        return torch.relu_(x)
    if not isinstance(out, _Tensor):
        raise TypeError(f"relu(): out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.dtype != x.dtype:
        raise TypeError(f"relu(): out has dtype {out.dtype} but x has dtype {x.dtype}")
    if out.device != x.device:
        raise ValueError(f"relu(): out is on device {out.device} but x is on {x.device}")
    try:
        shapes = (x.shape, out.shape)
    except RuntimeError:  # a strided nested tensor has no single shape: torch decides
        shapes = None
    if shapes is not None and shapes[0] != shapes[1]:
        raise ValueError(f"relu(): out has shape {tuple(shapes[1])} but x has shape {tuple(shapes[0])}")
    if FORWARD_AD._current_level >= 0 and _current_level() is None and dual(x, out):
        # torch's out= functions refuse forward AD too, but only after writing out (inside a
        # torch.func transform torch's own error comes first: torch decides there)
        raise NotImplementedError("relu(): out= does not support forward AD (a dual x or out; torch's "
                                  "out= functions refuse it too); call relu(x) without out=, or relu(x, out=x)")
    return torch.clamp_min(x, 0, out=out)


# ---- argument checks -------------------------------------------------------
SHORT = 80  # characters of a bad value quoted in a message


def short(value, limit: int = SHORT) -> str:
    """repr(value), cut to about `limit` characters ("..." and the full
    length appended), so a message never echoes a huge value whole."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails must not hide the real error
        text = f"<{type(value).__name__} object>"
    if len(text) <= limit:
        return text
    return f"{text[:limit - 3]}... ({len(text)} characters)"


def check_rung(rung, rungs, where="relu()") -> None:
    """rung must be None (the default rung) or one of `rungs` (names):
    TypeError for another type (a list is not hashable), ValueError for an
    unknown name; the message quotes at most ~80 characters of the value."""
    if rung is None:
        return
    if type(rung) is not str:  # also refuses str subclasses with their own __eq__/__hash__
        raise TypeError(f"{where}: rung must be one of {', '.join(sorted(rungs))} (a str) or None, "
                        f"got {type(rung).__name__} {short(rung)}")
    if rung not in rungs:
        raise ValueError(f"{where}: unknown rung {short(rung)}; choose one of {', '.join(sorted(rungs))}")


_SEQUENCES = (list, tuple, set, frozenset, range)


def _names(value, what, accepted):
    """A list/tuple/set/range of values as a tuple; None and other types: TypeError."""
    if isinstance(value, _SEQUENCES):
        return tuple(value)
    raise TypeError(f"warmup(): {what} must be {accepted} or a list of them, got {type(value).__name__} {short(value)}")


def warmup_args(dtypes, rungs, vecs, devices, device_count, dtype_names, rung_table):
    """warmup()'s arguments checked and normalized, before anything compiles.

    dtypes: a dtype name ("bfloat16") or a torch.dtype, or a list/tuple/set of
      them (a bare name is accepted: it means that one dtype, as a bare
      torch.dtype does). Names and dtypes are the keys of `dtype_names`
      (torch.dtype -> name) or its values.
    rungs: None (the caller's default rung), a rung name, or a list of names
      (keys of `rung_table`).
    vecs: None (each rung's widest vector), a positive int or a list of them.
    devices: None (the caller picks the current device), an int, a
      torch.device("cuda", i) (ROCm torch names its GPUs "cuda"), or a
      list/tuple/set/range of them; each index in range(device_count).
      Strings ("cuda:0") and index-less torch.device("cuda") are refused.
    Returns (dtype_name_tuple, rung_tuple_or_None, vec_tuple_or_None,
    device_tuple_or_None). Raises TypeError for a wrong kind of value
    (None in a list, a str where an int is meant, a bool) and ValueError for
    an unknown dtype or rung, a non-positive vec or a device that is absent.
    """
    served = ", ".join(sorted(set(dtype_names.values())))
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = (dtypes,)
    names = []
    for dtype in _names(dtypes, "dtypes", f"a dtype name ({served}) or torch.dtype"):
        if isinstance(dtype, (torch.dtype, str)):  # (a torch.dtype's repr is its str)
            name = dtype_names.get(dtype) if isinstance(dtype, torch.dtype) else \
                dtype if dtype in dtype_names.values() else None
            if name is None:
                raise ValueError(f"warmup(): unsupported dtype {short(dtype)}; the kernels serve {served}")
        else:
            raise TypeError(f"warmup(): a dtype must be a name ({served}) or a torch.dtype, "
                            f"got {type(dtype).__name__} {short(dtype)}")
        if name not in names:
            names.append(name)

    if rungs is not None:
        if isinstance(rungs, str):
            rungs = (rungs,)
        rungs = _names(rungs, "rungs", f"a rung name ({', '.join(sorted(rung_table))})")
        for rung in rungs:
            if rung is None:
                raise TypeError(f"warmup(): a rung in a list must be a name ({', '.join(sorted(rung_table))}), got None")
            check_rung(rung, rung_table, "warmup()")

    if vecs is not None:
        if _index(vecs) is not None:
            vecs = (vecs,)
        vecs = _names(vecs, "vecs", "a positive int (a vector width in elements)")
        for vec in vecs:
            if _index(vec) is None:
                raise TypeError(f"warmup(): a vec must be a positive int, got {type(vec).__name__} {short(vec)}")
            if vec < 1:
                raise ValueError(f"warmup(): a vec must be a positive int, got {vec}")
        vecs = tuple(_index(v) for v in vecs)

    if devices is not None:
        if isinstance(devices, torch.device) or _index(devices) is not None:
            devices = (devices,)
        accepted = f"GPU indices 0..{device_count - 1}" if device_count else "none (this process sees no GPU)"
        devices = tuple(_device_index(d, device_count, accepted)
                        for d in _names(devices, "devices", f"a device index ({accepted}) or torch.device('cuda', i)"))
    return tuple(names), rungs, vecs, devices


def _index(value):
    """An int (or integer-like, e.g. numpy.int64) as int; None for anything else, bool included."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _device_index(device, device_count, accepted) -> int:
    if isinstance(device, torch.device):
        if device.type != "cuda":  # ROCm torch names its GPUs "cuda"
            raise ValueError(f"warmup(): device {short(str(device))} is not a GPU; accepted: {accepted}")
        if device.index is None:  # "the current device" would depend on when warmup runs
            raise ValueError(f"warmup(): name the device's index, e.g. torch.device('cuda', 0); accepted: {accepted}")
        index = device.index
    elif _index(device) is not None:
        index = _index(device)
    else:
        raise TypeError(f"warmup(): a device is an int or a torch.device, not {type(device).__name__} "
                        f"{short(device)}; accepted: {accepted}")
    if not 0 <= index < device_count:
        raise ValueError(f"warmup(): no device {index} here; accepted: {accepted}")
    return index
