"""ctypes bindings to the HIP runtime FlyDSL launches through (libamdhip64.so.7):
the current device (per thread) and the stream-capture query.

Bound on first use, after FlyDSL's runtime library is loaded: dlopen by SONAME
then returns the very library FlyDSL's launches go to (on a CPU machine, the
test suite's stand-in). Never called before the FlyDSL path is taken.
"""

import ctypes
import threading

SONAME = "libamdhip64.so.7"
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2

_lib = None
_lock = threading.Lock()


def _bind():
    global _lib
    with _lock:
        if _lib is None:
            from pathlib import Path

            import flydsl

            # FlyDSL's runtime NEEDs libamdhip64.so.7: load it first so the
            # SONAME below resolves to the copy already in the process.
            runtime = Path(flydsl.__file__).parent / "_mlir" / "_mlir_libs" / "libfly_jit_runtime.so"
            ctypes.CDLL(str(runtime))
            lib = ctypes.CDLL(SONAME)
            lib.hipGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
            lib.hipSetDevice.argtypes = [ctypes.c_int]
            for fn in (lib.hipGetDevice, lib.hipSetDevice):
                fn.restype = ctypes.c_int
            if hasattr(lib, "hipStreamIsCapturing"):
                lib.hipStreamIsCapturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
                lib.hipStreamIsCapturing.restype = ctypes.c_int
            elif hasattr(lib, "hipStreamBeginCapture"):
                raise RuntimeError(f"relu_flydsl: {SONAME} can capture streams but has no hipStreamIsCapturing")
            _lib = lib
    return _lib


def get_device() -> int:
    lib = _lib or _bind()
    d = ctypes.c_int(-1)
    err = lib.hipGetDevice(ctypes.byref(d))
    if err:
        raise RuntimeError(f"relu_flydsl: hipGetDevice failed with HIP error {err}")
    return d.value


def set_device(index: int) -> None:
    err = (_lib or _bind()).hipSetDevice(index)
    if err:
        raise RuntimeError(f"relu_flydsl: hipSetDevice({index}) failed with HIP error {err}")


def capture_status(stream: int) -> int:
    """hipStreamIsCapturing on the stream the kernel would launch on: 0 none,
    1 active, 2 invalidated. An error (e.g. the legacy stream while another
    stream captures) counts as capturing: nothing unsafe is done then."""
    lib = _lib or _bind()
    if not hasattr(lib, "hipStreamIsCapturing"):
        return CAPTURE_NONE  # a HIP library that cannot capture (a no-op stand-in)
    status = ctypes.c_int(0)
    err = lib.hipStreamIsCapturing(ctypes.c_void_p(stream or None), ctypes.byref(status))
    return CAPTURE_ACTIVE if err else status.value


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
