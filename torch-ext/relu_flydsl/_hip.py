"""ctypes bindings to the HIP runtime already loaded in this process.

ROCm builds of torch load libamdhip64 themselves; on a CPU machine the tests
load a stand-in under the same SONAME first. This module never loads a HIP
library: it opens one that is already mapped (dlopen with RTLD_NOLOAD by
SONAME, else the path found in /proc/self/maps), so every module load and
launch goes to the runtime torch's own kernels use.

Bound on first use; nothing here runs unless the dispatcher saw a ROCm device.
"""

import ctypes
import os
import threading

SONAMES = ("libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so")
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2
_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)

_lib = None
MISSING = "no HIP runtime (libamdhip64) is loaded in this process"
_lock = threading.Lock()


class HipUnavailable(RuntimeError):
    """No HIP runtime is loaded in this process."""


def _find_loaded():
    for name in SONAMES:
        try:
            return ctypes.CDLL(name, mode=_RTLD_NOLOAD)
        except OSError:
            pass
    try:  # loaded by path under another file name (e.g. a wheel's bundled copy)
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                if os.path.basename(path).startswith("libamdhip64"):
                    return ctypes.CDLL(path, mode=_RTLD_NOLOAD)
    except OSError:
        pass
    return None


def _bind():
    global _lib
    with _lock:
        if _lib is None:
            # A miss is not remembered: the next use looks again. ROCm torch loads the
            # runtime at import, so a process that has one finds it at the first look and
            # binds it for good; only processes without a ROCm device look more than once
            # (warmup() on a CPU machine, a test that loads a stand-in later), and there a
            # remembered miss would hide a runtime loaded after it.
            lib = _find_loaded()
            if lib is None:
                raise HipUnavailable(MISSING)
            vp, i32, pvp = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)
            for name, args in (("hipGetDevice", [ctypes.POINTER(i32)]), ("hipSetDevice", [i32]),
                               ("hipGetDeviceCount", [ctypes.POINTER(i32)]),
                               ("hipModuleLoadData", [pvp, vp]), ("hipModuleUnload", [vp]),
                               ("hipModuleGetFunction", [pvp, vp, ctypes.c_char_p]),
                               ("hipGetLastError", [])):
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, i32
            # hipModuleLaunchKernel is called without argtypes (see _launch.py):
            # every argument is passed as a ready C value, which halves its cost.
            lib.hipModuleLaunchKernel.restype = i32
            if hasattr(lib, "hipDrvLaunchKernelEx"):  # ROCm 7 (see _launch.py); likewise without argtypes
                lib.hipDrvLaunchKernelEx.restype = i32
            if hasattr(lib, "hipStreamIsCapturing"):
                lib.hipStreamIsCapturing.argtypes = [vp, ctypes.POINTER(i32)]
                lib.hipStreamIsCapturing.restype = i32
            elif hasattr(lib, "hipStreamBeginCapture"):
                raise RuntimeError("relu_flydsl: the HIP runtime can capture streams but has no hipStreamIsCapturing")
            _lib = lib
    return _lib


def lib():
    """The bound HIP library; HipUnavailable when none is loaded."""
    return _lib or _bind()


def address(function):
    """A bound entry point's address (int), None for None: for the compiled entry."""
    return None if function is None else ctypes.cast(function, ctypes.c_void_p).value


def unavailable():
    """Why no HIP runtime can be used, or None."""
    try:
        lib()
    except HipUnavailable as e:
        return str(e)
    return None


def runtime_path():
    """The file of the HIP runtime bound, as mapped into this process (the mapping that holds
    its hipGetDevice, from /proc/self/maps; else the path the dynamic loader recorded for it,
    from dladdr), or None when none is loaded or neither names a file. Never a bare SONAME:
    with several ROCm installs, it says which runtime the kernels launch through."""
    if unavailable() is not None:
        return None
    try:
        at = address(_lib.hipGetDevice)
    except (AttributeError, TypeError, ctypes.ArgumentError):
        return None
    return mapped_file(at) or _loader_file(at)


def mapped_file(at: int):
    """The file whose mapping in this process holds address `at`, or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                start, _, end = fields[0].partition("-")
                if int(start, 16) <= at < int(end, 16):
                    path = fields[5].strip() if len(fields) == 6 else ""
                    path = path.removesuffix(" (deleted)")
                    return path if path.startswith("/") else None
    except (OSError, ValueError, IndexError):
        pass
    return None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loader_file(at: int):
    """dladdr's file for address `at`, resolved, when it is a path (not a bare name), else None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes, dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)], ctypes.c_int
    info = _DlInfo()
    if not dladdr(at, ctypes.byref(info)) or not info.dli_fname:
        return None
    name = os.fsdecode(info.dli_fname)
    return os.path.realpath(name) if "/" in name else None


def _check(err, what):
    """Raise for a failed HIP call, its error taken first (as the compiled entry's hip_failed):
    left pending, torch's next launch check would report it as torch's own."""
    if err:
        clear_last_error()
        raise RuntimeError(f"relu_flydsl: {what} failed with HIP error {err}")


def get_device() -> int:
    d = ctypes.c_int(-1)
    _check(lib().hipGetDevice(ctypes.byref(d)), "hipGetDevice")
    return d.value


def device_count() -> int:
    n = ctypes.c_int(0)
    _check(lib().hipGetDeviceCount(ctypes.byref(n)), "hipGetDeviceCount")
    return n.value


def set_device(index: int) -> None:
    _check(lib().hipSetDevice(index), f"hipSetDevice({index})")


def clear_last_error() -> int:
    """hipGetLastError: takes (and returns) the thread's pending error, so a
    failed launch of ours does not trip torch's next launch check."""
    return lib().hipGetLastError()


def load_module(image: bytes):
    """hipModuleLoadData on the current device: (module handle, 0) or (None, error)."""
    module = ctypes.c_void_p()
    err = lib().hipModuleLoadData(ctypes.byref(module), image)
    if err:
        clear_last_error()
        return None, err
    return module, 0


def get_function(module, symbol: str):
    """hipModuleGetFunction: (function handle, 0) or (None, error)."""
    function = ctypes.c_void_p()
    err = lib().hipModuleGetFunction(ctypes.byref(function), module, symbol.encode())
    if err:
        clear_last_error()
        return None, err
    return function, 0


def unload_module(module) -> int:
    err = lib().hipModuleUnload(module)
    if err:
        clear_last_error()
    return err


def capture_status(stream: int) -> int:
    """hipStreamIsCapturing on the stream the kernel would launch on: 0 none,
    1 active, 2 invalidated. An error (e.g. the legacy stream while another
    stream captures) counts as capturing: nothing unsafe is done then."""
    hip = lib()
    if not hasattr(hip, "hipStreamIsCapturing"):
        return CAPTURE_NONE  # a HIP library that cannot capture (a no-op stand-in)
    status = ctypes.c_int(0)
    err = hip.hipStreamIsCapturing(ctypes.c_void_p(stream or None), ctypes.byref(status))
    if err:
        clear_last_error()
        return CAPTURE_ACTIVE
    return status.value


class on_device:
    """`with on_device(i):` makes device i current, restoring the previous one."""

    __slots__ = ("index", "prev")

    def __init__(self, index: int):
        self.index = index

    def __enter__(self):
        self.prev = get_device()
        if self.prev != self.index:
            set_device(self.index)
        return self

    def __exit__(self, *exc):
        if self.prev != self.index:
            set_device(self.prev)
        return False
