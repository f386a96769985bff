"""Which path one call takes, and running it.

    run(x, out, rung)      x, out already validated (same shape, dtype, device)
      choose path          gfx950 device + supported dtype + contiguous x and out
        |-- FlyDSL         plan (cached per size/alignment) -> compiled kernel -> launch
        `-- fallback       torch.clamp_min(x, 0, out=out): torch.relu's own kernel
      record the path      dispatch_stats()

Nothing here imports flydsl until the FlyDSL path is first taken.
"""

import os
import threading
import warnings
from collections import Counter
from typing import NamedTuple, Optional

import torch

from .flash_relu_rocm import cache, plan
from .flash_relu_rocm.registry import DEFAULT_RUNG, DTYPES, RUNGS, get_rung

SUPPORTED_ARCH = "gfx950"
FLYDSL_REQUIREMENT = "flydsl==0.5.0"
ENV_DISABLE = "RELU_FLYDSL_DISABLE"  # "1": every call takes the torch fallback (operator kill switch)
ENV_RUNG = "RELU_FLYDSL_RUNG"        # "v1".."v5": rung used when the call names none


class DeviceInfo(NamedTuple):
    arch: str    # e.g. "gfx950"
    stream: int  # raw HIP stream handle of torch's current stream on that device


class Settings:
    def __init__(self):
        self.refresh()

    def refresh(self):
        """Re-read the environment (done once at import; call after changing it)."""
        self.disabled = os.environ.get(ENV_DISABLE, "").strip().lower() in ("1", "true", "yes", "on")
        forced = os.environ.get(ENV_RUNG, "").strip()
        self.default_rung = get_rung(forced).name if forced else DEFAULT_RUNG


settings = Settings()

_arch_by_index = {}


def _current_stream(index: int) -> int:
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # cheap path on ROCm builds
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def device_info(x: torch.Tensor) -> Optional[DeviceInfo]:
    """The ROCm device `x` lives on, or None. The only function the virtual
    device tests substitute (to present CPU tensors as gfx950 memory)."""
    if x.device.type != "cuda" or torch.version.hip is None:
        return None
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    arch = _arch_by_index.get(index)
    if arch is None:
        arch = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
        _arch_by_index[index] = arch
    return DeviceInfo(arch, _current_stream(index))


# ---- observable dispatch -------------------------------------------------
_stats = Counter()
_stats_lock = threading.Lock()
_warned = set()


def _record(key):
    with _stats_lock:
        _stats[key] += 1


def dispatch_stats() -> dict:
    """Calls per path since start (or the last reset):
    {"flydsl/v5/bfloat16": n, "fallback/not a ROCm device": m, ...}."""
    with _stats_lock:
        return {"/".join(k): v for k, v in sorted(_stats.items())}


def reset_dispatch_stats():
    with _stats_lock:
        _stats.clear()


def _warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"relu_flydsl: {message}; using the torch fallback (results are identical)", RuntimeWarning, 3)


def fallback_reason(x: torch.Tensor, out: torch.Tensor, info: Optional[DeviceInfo]) -> Optional[str]:
    """Why the FlyDSL path cannot serve this call, or None when it can."""
    if settings.disabled:
        return f"disabled by {ENV_DISABLE}"
    if info is None:
        return "not a ROCm device"
    if info.arch != SUPPORTED_ARCH:
        return f"arch {info.arch} (kernels are built for {SUPPORTED_ARCH})"
    dtype = str(x.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        return f"dtype {dtype}"
    if not (x.is_contiguous() and out.is_contiguous()):
        return "non-contiguous"
    return None


# ---- the FlyDSL path -----------------------------------------------------
class _Prepared(NamedTuple):
    plan: plan.Plan
    kernel: object  # CompiledFunction


_prepared = {}
_broken = {}  # (rung, dtype, vec) -> why it cannot be compiled here


def _prepare(rung_name: str, dtype: str, numel: int, x_addr: int, y_addr: int) -> _Prepared:
    # Plans depend on the size and on each pointer's alignment within 16 bytes.
    key = (rung_name, dtype, numel, x_addr & 15, y_addr & 15)
    prepared = _prepared.get(key)
    if prepared is None:
        rung = get_rung(rung_name)
        p = plan.plan(rung, dtype, numel, x_addr, y_addr)
        prepared = _Prepared(p, cache_compiled(rung, dtype, p.vec))
        if len(_prepared) > 4096:  # bound memory for processes that see endless sizes
            _prepared.clear()
        _prepared[key] = prepared
    return prepared


def _flydsl_unavailable() -> Optional[str]:
    try:
        import flydsl  # noqa: F401
    except ImportError:
        return f"flydsl is not installed (pip install {FLYDSL_REQUIREMENT})"
    return None


_runtime_take_error = None


def _launch_error() -> int:
    """FlyDSL's launcher prints a failed hipModuleLaunchKernel and returns
    normally; the HIP error code waits in its runtime. Take it."""
    global _runtime_take_error
    if _runtime_take_error is None:
        import ctypes
        from pathlib import Path

        import flydsl

        lib = Path(flydsl.__file__).parent / "_mlir" / "_mlir_libs" / "libfly_jit_runtime.so"
        fn = ctypes.CDLL(str(lib)).flydslRuntimeTakeError
        fn.restype = ctypes.c_int
        fn.argtypes = []
        _runtime_take_error = fn
    return _runtime_take_error()


def _run_flydsl(x, out, rung_name, dtype, stream):
    xf, yf = x.view(-1), out.view(-1)
    numel = xf.numel()
    prepared = _prepare(rung_name, dtype, numel, xf.data_ptr(), yf.data_ptr())
    launches = prepared.plan.launches
    kernel = prepared.kernel
    if len(launches) == 1:
        kernel(xf, yf, launches[0].grid, stream)
    else:
        for launch in launches:
            kernel(xf[launch.start : launch.stop], yf[launch.start : launch.stop], launch.grid, stream)
    error = _launch_error()
    if error:
        raise RuntimeError(
            f"relu_flydsl: kernel launch failed with HIP error {error} "
            f"(rung {rung_name}, {dtype}, numel {numel}); the output is not valid"
        )


def run(x: torch.Tensor, out: torch.Tensor, rung: Optional[str]) -> torch.Tensor:
    info = device_info(x)
    reason = fallback_reason(x, out, info)
    if reason is None and x.numel() == 0:
        reason = "empty tensor"
    if reason is None:
        reason = _flydsl_unavailable()
        if reason is not None:
            _warn_once("import", reason)
    if reason is None:
        rung_name = rung or settings.default_rung
        dtype = str(x.dtype).removeprefix("torch.")
        why = _broken.get((rung_name, dtype))
        if why is None:
            try:
                _run_flydsl(x, out, rung_name, dtype, info.stream)
                _record(("flydsl", rung_name, dtype))
                return out
            except _CompileError as e:
                why = _broken[(rung_name, dtype)] = f"cannot compile {rung_name}/{dtype} here: {e}"
                _warn_once(("compile", rung_name, dtype), why)
        reason = why
    torch.clamp_min(x, 0, out=out)  # torch.relu is clamp_min(x, 0): same kernel, same bits
    _record(("fallback", reason))
    return out


class _CompileError(Exception):
    pass


def _compile_guard(compiled):
    """Turn compiler/toolchain failures (missing ld.lld, unwritable cache, a
    corrupt cache entry) into _CompileError, which `run` reports once and
    answers with the fallback. Launch failures are not caught: they raise."""

    def wrapped(rung, dtype, vec):
        try:
            return compiled(rung, dtype, vec)
        except Exception as e:  # noqa: BLE001 - re-raised as a typed, reported error
            raise _CompileError(f"{type(e).__name__}: {e}") from e

    return wrapped


cache_compiled = _compile_guard(cache.compiled)


def warmup(dtypes=DTYPES, rungs=None, vecs=None):
    """Compile kernels ahead of the first call (cold start ~0.1 s each).
    vecs=None compiles each rung's widest vector, the one dense tensors use."""
    compiled = []
    for rung_name in rungs or (settings.default_rung,):
        rung = get_rung(rung_name)
        for dtype in dtypes:
            for vec in vecs or (rung.max_vec(dtype),):
                cache_compiled(rung, dtype, vec)
                compiled.append((rung.name, dtype, vec))
    return compiled


__all__ = ["DeviceInfo", "dispatch_stats", "reset_dispatch_stats", "run", "warmup", "RUNGS"]
