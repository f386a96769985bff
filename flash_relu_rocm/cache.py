"""Development only (never imported by relu() or the shipped serve path, which
loads the prebuilt code objects): a JIT compile cache, one `CompiledFunction`
per (rung, dtype, vec, device), for tools and tests that run a
kernel straight from FlyDSL.

numel is a runtime argument, so this is a handful of kernels per process. The
per-call path is a dict lookup; `flyc.compile` runs once per key, under a
per-key lock, so concurrent first calls compile each kernel exactly once.

Per device: FlyDSL 0.5.0 loads a CompiledFunction's code object once, at its
first call, on the HIP device current then (hipModuleLoadData), and launches
that module's function ever after; flyc.compile of the same launcher returns
the same artifact (one module). So each device gets its own launcher, built
and compiled for it (a disk-cache hit after the first device), whose first
call the dispatcher makes with that device current.
"""

import os
import struct
import threading
import warnings

from .registry import Rung

_compiled = {}
_locks = {}
_locks_guard = threading.Lock()
compile_counts = {}  # key -> number of times flyc.compile ran (tests assert 1)


def _placeholder(dtype: str, vec: int):
    # CPU tensors are compile placeholders for flyc.compile: it traces and
    # compiles without launching (a live device tensor would launch once).
    import torch

    return torch.empty(vec, dtype=getattr(torch, dtype))


_DISK_CACHE_ENV = "FLYDSL_RUNTIME_ENABLE_CACHE"
_disk_cache_broken = None  # the OSError that made us compile in memory, once seen


def _compile(rung: Rung, dtype: str, vec: int):
    """flyc.compile of this rung's launcher. If FlyDSL's disk cache cannot be
    used (unwritable or not a directory), compile again in memory, without the
    disk cache, and say so once: relu keeps its kernels, each process just
    compiles them itself."""
    import flydsl.compiler as flyc

    global _disk_cache_broken

    def attempt():
        return flyc.compile(rung.build(dtype, vec), _placeholder(dtype, vec), _placeholder(dtype, vec), 1, 0)

    if _disk_cache_broken is None:
        try:
            return attempt()
        except OSError as e:
            _disk_cache_broken = e
            warnings.warn(
                f"relu_flydsl: FlyDSL's kernel cache is not usable ({type(e).__name__}: {e}); "
                "compiling in memory without the disk cache (each process compiles its kernels again)",
                RuntimeWarning,
                4,
            )
    saved = os.environ.get(_DISK_CACHE_ENV)
    os.environ[_DISK_CACHE_ENV] = "0"
    try:
        return attempt()
    finally:
        if saved is None:
            os.environ.pop(_DISK_CACHE_ENV, None)
        else:
            os.environ[_DISK_CACHE_ENV] = saved


def compiled(rung: Rung, dtype: str, vec: int, device: int = 0):
    """The CompiledFunction for this rung/dtype/vec on `device`; compiles on
    first use. Call it as fn(x, y, grid, stream) with positional arguments
    only, with `device` current (its first call loads the module there)."""
    key = (rung, dtype, vec, device)  # the whole Rung: v3_tuned.unrolled(n) (another class) differs from v3
    fn = _compiled.get(key)
    if fn is not None:
        return fn
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        fn = _compiled.get(key)
        if fn is None:
            fn = _compile(rung, dtype, vec)
            compile_counts[key] = compile_counts.get(key, 0) + 1
            if fn is None:
                raise RuntimeError(
                    "flyc.compile returned no callable: COMPILE_ONLY is set in this process, "
                    "so kernels can be compiled but not launched"
                )
            _compiled[key] = fn
    return fn


def cached_keys():
    return sorted(_compiled)


def clear():
    """Forget every compiled kernel (tests only)."""
    _compiled.clear()
    compile_counts.clear()


# ---- direct launch ---------------------------------------------------------
# A CompiledFunction call runs one Python "fill" per ABI slot, which reads the
# tensor's data_ptr() and shape again (about 3 us a launch on these CPUs). The
# dispatcher already holds those numbers, so after a kernel's first (public)
# call it packs the six slots itself and calls FlyDSL's compiled host entry.
# This reads FlyDSL 0.5.0 internals (`_call_state`, its slot spec and
# `_func_exe`); the layout is verified first and, if it differs, the public
# call is used. The virtual-device suite runs every launch through this path.
_EXPECTED_SLOTS = ((0, 8), (0, 4), (1, 8), (1, 4), (2, 4), (3, 8))  # (argument, bytes): X ptr, X numel, Y ptr, Y numel, grid, stream


# The six slots laid out in one 8-byte-aligned buffer, filled by one pack_into.
_ARGS = struct.Struct("<Qi4xQiiQ")  # X ptr, X numel, (pad), Y ptr, Y numel, grid, stream
_SLOT_OFFSETS = (0, 8, 16, 24, 28, 32)


class DirectLaunch(threading.local):
    """direct.launch(x_addr, y_addr, numel, grid, stream): one kernel launch.
    A threading.local: each thread gets its own argument buffer (FlyDSL's own
    call state is per thread too)."""

    def __init__(self, func_exe):
        import ctypes

        buf = (ctypes.c_uint64 * ((_ARGS.size + 7) // 8))()
        base = ctypes.addressof(buf)
        packed = (ctypes.c_void_p * len(_SLOT_OFFSETS))(*(base + o for o in _SLOT_OFFSETS))
        pack_into = _ARGS.pack_into

        def launch(x_addr, y_addr, numel, grid, stream):
            pack_into(buf, 0, x_addr, numel, y_addr, numel, grid, stream)
            func_exe(packed)

        self.launch = launch
        self._keepalive = (buf, packed)

    def __call__(self, x_addr, y_addr, numel, grid, stream):
        self.launch(x_addr, y_addr, numel, grid, stream)


def direct_launch(fn):
    """A DirectLaunch for this CompiledFunction once FlyDSL has set up its call
    state (after the first public call), or None if its ABI is not the one
    verified here."""
    import ctypes

    state = getattr(fn, "_call_state", None)
    spec = getattr(state, "_spec", None)
    if state is None or spec is None or getattr(state, "_predispatch", None) is not None or getattr(state, "_presets", None):
        return None
    try:
        layout = tuple((arg, ctypes.sizeof(ctype)) for arg, ctype, _fill in spec)
    except (TypeError, ValueError):
        return None
    if layout != _EXPECTED_SLOTS or not callable(getattr(state, "_func_exe", None)):
        return None
    return DirectLaunch(state._func_exe)
