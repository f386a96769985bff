"""Which path one call takes, and running it.

    run(x, out, rung)      x, out already validated (same shape, dtype, device)
      choose path          gfx950 device + supported dtype + contiguous x and out
        |-- FlyDSL         plan (cached per size/alignment) -> compiled kernel -> launch
        `-- fallback       torch.clamp_min(x, 0, out=out): torch.relu's own kernel
      record the path      dispatch_stats()

Nothing here imports flydsl until the FlyDSL path is first taken.
"""

import itertools
import os
import threading
import warnings
from typing import NamedTuple, Optional

import torch

from . import _canary, _hip
from .flash_relu_rocm import cache, plan
from .flash_relu_rocm.registry import DEFAULT_RUNG, DTYPES, ELEMENT_BYTES, RUNGS, get_rung

SUPPORTED_ARCH = "gfx950"
FLYDSL_REQUIREMENT = "flydsl==0.5.0"
ENV_DISABLE = "RELU_FLYDSL_DISABLE"  # "1": every call takes the torch fallback (operator kill switch)
ENV_RUNG = "RELU_FLYDSL_RUNG"        # "v1".."v5": rung used when the call names none
ENV_CANARY = _canary.ENV_CANARY      # "0": no first-use canaries
_flydsl_missing = False  # None once flydsl imported; the reason string once it failed


class DeviceInfo(NamedTuple):
    arch: str             # e.g. "gfx950"
    stream: int           # raw HIP stream handle of torch's current stream on that device
    current: bool = True  # its device is the current HIP device (else launches switch there and back)
    index: int = 0        # the device's index


# The two variables are re-read whenever they change, so an operator can flip
# the kill switch in a running process (os.environ). Comparing their raw values
# costs two dict lookups per call: CPython's os.environ keeps them in `_data`.
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEYS = tuple(os.environ.encodekey(k) for k in (ENV_DISABLE, ENV_RUNG, ENV_CANARY)) if _ENV_DATA is not None else ()


def _env_raw():
    if _ENV_DATA is not None:
        return (_ENV_DATA.get(_ENV_KEYS[0]), _ENV_DATA.get(_ENV_KEYS[1]), _ENV_DATA.get(_ENV_KEYS[2]))
    return (os.environ.get(ENV_DISABLE), os.environ.get(ENV_RUNG), os.environ.get(ENV_CANARY))


class Settings:
    """FlyDSL-path settings from the environment. Any change (a changed
    variable, refresh() or direct assignment) clears the launch entries
    relu()'s hot path uses, so the hot path needs no other check."""

    def __init__(self):
        self.refresh()

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        for cache_ in (globals().get("_fast"), globals().get("_entries")):
            if cache_:
                cache_.clear()

    def refresh(self):
        """Re-read the environment (automatic when the variables change) and
        retry a failed flydsl import."""
        global _flydsl_missing
        if _flydsl_missing:
            _flydsl_missing = False
        self.env = _env_raw()
        self.disabled = os.environ.get(ENV_DISABLE, "").strip().lower() in ("1", "true", "yes", "on")
        self.canary = os.environ.get(ENV_CANARY, "").strip().lower() not in ("0", "false", "no", "off")
        forced = os.environ.get(ENV_RUNG, "").strip()
        try:
            self.default_rung = get_rung(forced).name if forced else DEFAULT_RUNG
        except ValueError as e:
            self.default_rung = DEFAULT_RUNG
            _warn_once(("env", forced), f"ignoring {ENV_RUNG}={forced!r}: {e}", fallback=False)

    def current(self):
        """The settings, re-read first if the environment changed."""
        if _env_raw() != self.env:
            self.refresh()
        return self


# torch dtype -> registry name, for the dtypes the kernels serve
_DTYPE_NAMES = {getattr(torch, name): name for name in DTYPES}

_arch_by_index = {}
_HIP = torch.version.hip


def _current_stream(index: int) -> int:
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # cheap path on ROCm builds
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def device_info(x: torch.Tensor) -> Optional[DeviceInfo]:
    """The ROCm device `x` lives on, or None. The only function the virtual
    device tests substitute (to present CPU tensors as gfx950 memory)."""
    if not x.is_cuda or _HIP is None:
        return None
    index = x.get_device()
    arch = _arch_by_index.get(index)
    if arch is None:
        arch = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
        _arch_by_index[index] = arch
    return DeviceInfo(arch, _current_stream(index), index == torch.cuda.current_device(), index)


# ---- observable dispatch -------------------------------------------------
# One itertools.count per path: next() is a single C call, atomic under the
# GIL, so counting costs ~50 ns and needs no lock on the per-call path.
_counters = {}
_counters_lock = threading.Lock()
_warned = set()


def _counter(key):
    c = _counters.get(key)
    if c is None:
        with _counters_lock:
            c = _counters.setdefault(key, itertools.count())
    return c


def _record(key):
    next(_counter(key))


def _count_value(c) -> int:
    return int(repr(c)[6:-1])  # "count(5)": reading never advances it


def dispatch_stats() -> dict:
    """Calls per path since start (or the last reset):
    {"flydsl/v5/bfloat16": n, "fallback/not a ROCm device": m, ...}."""
    with _counters_lock:
        items = sorted(_counters.items())
    return {"/".join(k): n for k, c in items if (n := _count_value(c))}


def reset_dispatch_stats():
    with _counters_lock:
        _counters.clear()
        _fast.clear()  # cached entries hold their counters
        _entries.clear()


def _warn_once(key, message, fallback=True):
    if key not in _warned:
        _warned.add(key)
        tail = "; using the torch fallback (torch.relu's own kernel and results on this device)" if fallback else ""
        warnings.warn(f"relu_flydsl: {message}{tail}", RuntimeWarning, 3)


settings = Settings()


def fallback_reason(x: torch.Tensor, out: torch.Tensor, info: Optional[DeviceInfo]) -> Optional[str]:
    """Why the FlyDSL path cannot serve this call, or None when it can."""
    if settings.current().disabled:
        return f"disabled by {ENV_DISABLE}"
    if info is None:
        return "not a ROCm device"
    if info.arch != SUPPORTED_ARCH:
        return f"arch {info.arch} (kernels are built for {SUPPORTED_ARCH})"
    dtype = _DTYPE_NAMES.get(x.dtype)
    if dtype is None:
        return f"dtype {str(x.dtype).removeprefix('torch.')}"
    if not (x.is_contiguous() and out.is_contiguous()):
        return "non-contiguous"
    if x.is_neg() or out.is_neg() or x.is_conj() or out.is_conj():
        # A lazy negation/conjugation view (torch._neg_view, x.conj().imag):
        # its memory holds the other sign, so a raw-memory kernel would be wrong.
        return "neg/conj-bit view"
    return None


# ---- the FlyDSL path -----------------------------------------------------
class _Entry:
    """Everything one (rung, dtype, numel, alignment, device) call needs,
    computed once: the plan, its compiled kernel and the path's stats counter."""

    __slots__ = ("plan", "kernel", "direct", "grid", "single", "esize", "count", "device")

    def __init__(self, p: plan.Plan, kernel, count, device: int):
        self.plan = p
        self.kernel = kernel  # CompiledFunction for `device`: kernel(x1d, y1d, grid, stream)
        # cache.DirectLaunch after the kernel's first public call; False where
        # FlyDSL's call state is not the verified layout (then: kernel(...)).
        # Set only once the kernel is verified on its device (canary), so
        # relu()'s hot path never serves an unverified kernel.
        self.direct = None
        self.single = len(p.launches) == 1
        self.grid = p.launches[0].grid if self.single else None
        self.esize = ELEMENT_BYTES[p.dtype]
        self.count = count
        self.device = device


# Launch entries, keyed (rung as asked (None = default), torch dtype, numel,
# x_addr & 15, y_addr & 15, device): plans depend on the size and on each
# pointer's alignment within 16 bytes, kernels on the device. `_fast` holds the
# single-launch entries relu()'s hot path may use directly: only entries
# created while the FlyDSL path is enabled; any settings change clears it.
_entries = {}
_fast = {}
_ENTRIES_MAX = 4096  # bound memory for processes that see endless sizes
_broken = {}  # (rung, dtype) -> why it cannot be compiled here


def _entry(rung, rung_name: str, torch_dtype, numel: int, x_addr: int, y_addr: int, device: int = 0) -> _Entry:
    key = (rung, torch_dtype, numel, x_addr & 15, y_addr & 15, device)  # the hot path's key too
    entry = _entries.get(key)
    if entry is None:
        dtype = _DTYPE_NAMES[torch_dtype]
        r = get_rung(rung_name)
        p = plan.plan(r, dtype, numel, x_addr, y_addr)
        entry = _Entry(p, cache_compiled(r, dtype, p.vec, device), _counter(("flydsl", rung_name, dtype)), device)
        if len(_entries) >= _ENTRIES_MAX:
            _entries.clear()
            _fast.clear()
        _entries[key] = entry
        if entry.single:
            _fast[key] = entry
    return entry


# ---- the first-use canary (see _canary.py) --------------------------------
# (rung, dtype, vec, device) -> None when the kernel passed its canary there,
# else the evidence. Kept for the life of the process: a failed kernel is never
# used again on that device. Concurrent first calls wait for the one canary.
_canaries = {}
_canary_locks = {}
canary_runs = {}  # (rung, dtype, vec, device) -> canaries run (tests assert 1)
_loaded = set()   # (rung, dtype, vec, device) whose module is loaded (a launch ran there)
NOT_VERIFIED = "not verified before graph capture (call warmup())"
NOT_LOADED = "not loaded before graph capture (call warmup())"


def _capturing(stream: int) -> bool:
    return _hip.capture_status(stream) != _hip.CAPTURE_NONE


def _on_device(device: int, current: bool, fn, *args):
    """fn(*args) with `device` current: FlyDSL loads modules and launches on
    the current device. The caller's current device is restored."""
    if current:
        return fn(*args)
    with _hip.on_device(device):
        return fn(*args)


def _canary_failed(key) -> str:
    rung, dtype, vec, device = key
    return f"canary failed {rung}/{dtype}/x{vec} on device {device}"


def _run_canary(kernel, key, stream, current: bool):
    """Run and judge one canary; None if the kernel was right, else the
    evidence. A canary launch that fails (a HIP error) fails the canary too:
    that kernel is not trusted on that device."""
    rung_name, dtype, vec, device = key
    r = get_rung(rung_name)
    c = _canary.Canary(r, dtype, vec)
    with _canary.device_memory(c.total, device) as buffer:
        c.load(buffer)
        x, y = c.views()
        # the shipped planner's launches for this kernel, checked for the rules
        # every launch relies on; then the kernel itself on the device
        why = _canary.check_plans(r, dtype, vec, c.n, x.data_ptr(), y.data_ptr())
        if why:
            return why
        p = plan.plan(r, dtype, c.n, x.data_ptr(), y.data_ptr())
        error = _on_device(device, current, _launch_chunks, kernel, x, y, p.launches, stream)
        if error:
            return f"its launch failed with HIP error {error}"
        return c.judge()


def _verify(entry: _Entry, stream: int, current: bool) -> Optional[str]:
    """None when `entry`'s kernel may run on its device now, else the fallback
    reason. Runs the kernel's canary on first use (once, whatever the threads)."""
    p = entry.plan
    key = (p.rung, p.dtype, p.vec, entry.device)
    if not settings.canary:
        if key not in _loaded and _capturing(stream):
            return NOT_LOADED  # its module load must not happen inside a capture
        return None
    if key in _canaries:
        return None if _canaries[key] is None else _canary_failed(key)
    with _counters_lock:
        lock = _canary_locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _canaries:
            if _capturing(stream):
                return NOT_VERIFIED
            try:
                evidence = _run_canary(entry.kernel, key, stream, current)
            except Exception as e:  # noqa: BLE001 - a canary that cannot run proves nothing
                evidence = f"the canary could not run ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]})"
            canary_runs[key] = canary_runs.get(key, 0) + 1
            _canaries[key] = evidence
            _loaded.add(key)
            if evidence:
                _warn_once(("canary", key), f"{_canary_failed(key)}: {evidence}; that kernel is not used on "
                           f"device {key[3]} for the life of the process")
    return None if _canaries[key] is None else _canary_failed(key)


def _flydsl_unavailable() -> Optional[str]:
    """Why flydsl cannot be imported, or None. A failed import is remembered
    (a retry costs a file-system search per call); settings.refresh() or a
    changed environment variable retries it."""
    global _flydsl_missing
    if _flydsl_missing is False:
        try:
            import flydsl  # noqa: F401
        except ImportError:
            _flydsl_missing = f"flydsl is not installed (pip install {FLYDSL_REQUIREMENT})"
        else:
            _flydsl_missing = None
    return _flydsl_missing


def _take_error_first() -> int:
    """FlyDSL's launcher prints a failed hipModuleLaunchKernel and returns
    normally; the HIP error code waits in its runtime (flydslRuntimeTakeError).
    First call: bind the C function, then replace this stub with it."""
    global _take_error
    import ctypes
    from pathlib import Path

    import flydsl

    lib = Path(flydsl.__file__).parent / "_mlir" / "_mlir_libs" / "libfly_jit_runtime.so"
    fn = ctypes.CDLL(str(lib)).flydslRuntimeTakeError
    fn.restype = ctypes.c_int
    fn.argtypes = []
    _take_error = fn
    return fn()


_take_error = _take_error_first  # called after EVERY launch, right after it


def _launch_failed(error, rung_name, dtype, numel):
    raise RuntimeError(
        f"relu_flydsl: kernel launch failed with HIP error {error} "
        f"(rung {rung_name}, {dtype}, numel {numel}); the output is not valid"
    )


def _launch_chunks(kernel, xf, yf, launches, stream) -> int:
    """FlyDSL's public call on each chunk of the 1-D views xf, yf; the first
    HIP error, 0 if none. Every launch's error is taken, even after a failure,
    so none is left behind for the next call. (First launches and canaries.)"""
    error = 0
    for launch in launches:
        kernel(xf[launch.start : launch.stop], yf[launch.start : launch.stop], launch.grid, stream)
        failed = _take_error()
        error = error or failed
    return error


def _launch(entry: _Entry, x, out, stream):
    direct = entry.direct
    if direct:
        xp, yp, esize = x.data_ptr(), out.data_ptr(), entry.esize
        error = 0
        for launch in entry.plan.launches:
            offset = launch.start * esize
            direct(xp + offset, yp + offset, launch.numel, launch.grid, stream)
            failed = _take_error()  # after every launch, even after a failure: none left for the next call
            error = error or failed
    else:
        # A kernel's first launches: FlyDSL's public call.
        error = _launch_chunks(entry.kernel, x.view(-1), out.view(-1), entry.plan.launches, stream)
        if direct is None and not error:
            p = entry.plan
            _loaded.add((p.rung, p.dtype, p.vec, entry.device))
            entry.direct = cache.direct_launch(entry.kernel) or False
    if error:
        _launch_failed(error, entry.plan.rung, entry.plan.dtype, x.numel())
    next(entry.count)


_NO_INFO = object()  # "device_info not asked yet" (None means: not a ROCm device)


def run(x: torch.Tensor, out: torch.Tensor, rung: Optional[str], info=_NO_INFO) -> torch.Tensor:
    if info is _NO_INFO:
        info = device_info(x)
    reason = fallback_reason(x, out, info)
    if reason is None and x.numel() == 0:
        reason = "empty tensor"
    if reason is None:
        reason = _flydsl_unavailable()
        if reason is not None:
            _warn_once("import", reason)
    if reason is None:
        rung_name = rung or settings.default_rung  # current(): fallback_reason re-read it
        dtype = _DTYPE_NAMES[x.dtype]
        why = _broken.get((rung_name, dtype))
        if why is None:
            try:
                entry = _entry(rung, rung_name, x.dtype, x.numel(), x.data_ptr(), out.data_ptr(), info.index)
            except KernelCompileError as e:
                why = _broken[(rung_name, dtype)] = f"cannot compile {rung_name}/{dtype} here: {e}"
                _warn_once(("compile", rung_name, dtype), why)
            else:
                if not entry.direct:  # first launches: verified on this device first
                    why = _verify(entry, info.stream, info.current)
                if why is None:
                    _on_device(info.index, info.current, _launch, entry, x, out, info.stream)
                    return out
        reason = why
    torch.clamp_min(x, 0, out=out)  # torch.relu is clamp_min(x, 0): same kernel, same bits
    _record(("fallback", reason))
    return out


class KernelCompileError(RuntimeError):
    pass


def _compile_guard(compiled):
    """Turn compiler/toolchain failures (missing ld.lld, unwritable cache, a
    corrupt cache entry) into KernelCompileError, which `run` reports once and
    answers with the fallback. Launch failures are not caught: they raise."""

    def wrapped(rung, dtype, vec, device=0):
        try:
            return compiled(rung, dtype, vec, device)
        except Exception as e:  # noqa: BLE001 - re-raised as a typed, reported error
            first_line = (str(e).strip().splitlines() or [""])[0]  # the stats key stays one line
            raise KernelCompileError(f"{type(e).__name__}: {first_line}") from e

    return wrapped


cache_compiled = _compile_guard(cache.compiled)


def _warmup_devices(devices):
    """The devices warmup() verifies kernels on: as given, else the current
    HIP device; () where no HIP runtime is loaded (compile only)."""
    if devices is not None:
        return (devices,) if isinstance(devices, int) else tuple(devices)
    try:
        return (_hip.get_device(),)
    except (OSError, RuntimeError, AttributeError):
        return ()


def warmup(dtypes=DTYPES, rungs=None, vecs=None, devices=None):
    """Compile kernels ahead of the first call (see the README's cold start)
    and run their first-use canaries on each device, so no canary and no
    module load happens later (e.g. inside a HIP graph capture).
    dtypes: one or several names ("bfloat16") or torch dtypes; rungs: default
    the serving rung; vecs=None compiles each rung's widest vector, the one
    dense, aligned tensors use; devices: device indices (default the current
    HIP device; none without a HIP runtime: compile only). Raises ValueError
    for an unknown dtype or rung, RuntimeError if a kernel cannot compile here.
    A kernel that fails its canary warns and is not used on that device.
    Returns the (rung, dtype, vec) compiled."""
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = (dtypes,)
    if isinstance(rungs, str):
        rungs = (rungs,)
    names = []
    for dtype in dtypes:
        name = _DTYPE_NAMES.get(dtype, dtype)
        if name not in DTYPES:
            raise ValueError(f"warmup(): unsupported dtype {dtype!r}; the kernels serve {', '.join(DTYPES)}")
        names.append(name)
    rung_list = [get_rung(r) for r in (rungs or (settings.current().default_rung,))]
    compiled = []
    for rung in rung_list:
        for dtype in names:
            for vec in vecs or (rung.max_vec(dtype),):
                cache_compiled(rung, dtype, vec)
                compiled.append((rung.name, dtype, vec))
    for device in _warmup_devices(devices):
        for rung_name, dtype, vec in compiled:
            _warm_on(get_rung(rung_name), dtype, vec, device)
    return compiled


def _warm_on(rung, dtype: str, vec: int, device: int):
    """Make (rung, dtype, vec) ready on `device` as a first call would: its
    module loaded there and, unless disabled, its canary run."""
    key = (rung.name, dtype, vec, device)
    if key in _loaded and (not settings.current().canary or key in _canaries):
        return
    kernel = cache_compiled(rung, dtype, vec, device)
    c = _canary.Canary(rung, dtype, vec)
    with _canary.device_memory(c.total, device) as buffer:
        c.load(buffer)
        x, y = c.views()
        info = device_info(x)  # the device's arch, current stream, whether it is current
        if info is None or info.arch != SUPPORTED_ARCH:
            return  # not a device the kernels serve
        entry = _Entry(plan.plan(rung, dtype, c.n, x.data_ptr(), y.data_ptr()), kernel, itertools.count(), device)
        if not settings.canary:
            if not _capturing(info.stream):
                _on_device(device, info.current, _launch, entry, x, y, info.stream)  # loads the module
            return
    _verify(entry, info.stream, info.current)  # the canary (its own memory); a failure warns


__all__ = ["DeviceInfo", "dispatch_stats", "reset_dispatch_stats", "run", "warmup", "RUNGS"]
