"""Build and load the no-op libamdhip64.so.7 (noop_hip.c).

    lib = noop_hip.load()      # compile once (cc), then CDLL(path, RTLD_GLOBAL)
    lib.noop_hip_launch_count()
    lib.noop_hip_set_devices(2)   # devices hipGetDeviceCount reports (default 1)

Load it before the first CompiledFunction call of the process:
libfly_jit_runtime.so is opened then, and its NEEDED libamdhip64.so.7 binds to
the library already loaded under that soname. One process holds one such
library: a process that loaded the virtual device's stub (tools/vgpu/) cannot
load this one, and the other way round (`loaded_hip()` tells which is loaded).

Command line: .venv/bin/python -m tools.noop_hip [--out DIR]  (builds, prints the library path)
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "noop_hip.c"
VERSION_SCRIPT = HERE / "noop_hip.map"
HEADER = HERE.parent / "hip_launch_config.h"  # included by noop_hip.c
SONAME = "libamdhip64.so.7"

_lib = None


def build(out_dir=None) -> Path:
    """Compile the stub (cached by source hash); returns the .so path."""
    digest = hashlib.sha256(SOURCE.read_bytes() + VERSION_SCRIPT.read_bytes() + HEADER.read_bytes()).hexdigest()[:12]
    out = Path(out_dir) if out_dir else Path(tempfile.gettempdir()) / f"relu-flydsl-noop-hip-{digest}"
    target = out / SONAME
    if target.exists():
        return target
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc/gcc/clang) to build the no-op HIP stub")
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{SONAME}.{os.getpid()}"
    subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE),
         f"-Wl,-soname,{SONAME}", f"-Wl,--version-script={VERSION_SCRIPT}"],
        check=True, capture_output=True, text=True,
    )
    tmp.replace(target)
    return target


def loaded_hip():
    """Path of the libamdhip64.so.7 mapped into this process, or None."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if SONAME in line:
                return line.split(None, 5)[-1].strip()
    return None


def load():
    """Load the stub into this process (RTLD_GLOBAL) and return it.
    Raises RuntimeError when another libamdhip64.so.7 is already loaded."""
    global _lib
    if _lib is not None:
        return _lib
    path = build()
    present = loaded_hip()
    if present is not None and Path(present).resolve() != path.resolve():
        raise RuntimeError(f"another {SONAME} is already loaded in this process: {present}")
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    for name in ("launch_count", "launch_ex_count", "sync_count", "malloc_count", "memcpy_count", "load_count",
                 "get_function_count", "launch_stream", "set_device_calls", "capture_query_count"):
        getattr(lib, f"noop_hip_{name}").restype = ctypes.c_uint64
    lib.noop_hip_launch_stream.argtypes = [ctypes.c_uint64]
    lib.noop_hip_launch_grid.restype = ctypes.c_uint32
    lib.noop_hip_launch_grid.argtypes = [ctypes.c_uint64]
    lib.noop_hip_fail_launches.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.noop_hip_set_devices.argtypes = [ctypes.c_int]
    _lib = lib
    return lib

