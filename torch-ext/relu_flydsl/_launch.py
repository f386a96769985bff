"""Kernel launches: one function, used by first calls, canaries and relu()'s fast path.

    launch(function, grid, block, config, x_addr, y_addr, numel, stream) -> HIP error (0: launched)
    launch_all(function, block, esize, x_addr, y_addr, launches, stream)   every launch of a plan
    config(grid, block)                  the HIP_LAUNCH_CONFIG launch() takes on the null stream
                                         (cached; a fast-path entry keeps its own)
    THREAD.state, prepare(state, args)   this thread's launch arguments, prepared once per change
    launch_kernel / launch_ex            hipModuleLaunchKernel / hipDrvLaunchKernelEx (None without it)

The ladder kernels take one 28-byte kernarg segment (the manifest's `args`):

    offset 0   X pointer    8 bytes
    offset 8   X numel      4 bytes (i32)
    offset 16  Y pointer    8 bytes
    offset 24  Y numel      4 bytes (i32)

They are packed into one buffer per thread (HIP copies the arguments during
hipModuleLaunchKernel, but ctypes releases the GIL for the call, so a shared
buffer could be overwritten by another thread mid-launch), and kernelParams
points at the four slots. The error is the call's return code; after a
failure hipGetLastError is called once, so a failed launch of ours is not
reported again by torch's next launch check.

hipModuleLaunchKernel is called without ctypes argtypes: every argument is
either a small int (grid, block: passed as C unsigned int values) or a ready
c_void_p (function, stream, kernelParams) or None (the null stream, no
extra), which halves the call's cost. On the null stream hipDrvLaunchKernelEx
is called instead, 4 arguments (see below why only there).
"""

import ctypes
import struct
import threading

from . import _hip

KERNARG = struct.Struct("<Qi4xQi")  # X ptr, X numel, (pad), Y ptr, Y numel: 28 bytes
KERNARG_LAYOUT = ((0, 8), (8, 4), (16, 8), (24, 4))  # (offset, size) of each argument
assert KERNARG.size == 28 and tuple(KERNARG_LAYOUT[-1]) == (24, 4)

pack_into = KERNARG.pack_into


class _Args(threading.local):
    """This thread's kernarg buffer and the kernelParams array pointing into it.
    `state` is what a launch reads, with one thread-local lookup: [kernelParams,
    (x, y, numel, stream) last prepared, that stream's argument, buffer, whether
    that stream takes hipDrvLaunchKernelEx (the null stream, where the runtime has it)]."""

    def __init__(self):
        self.buffer = (ctypes.c_uint64 * 4)()
        base = ctypes.addressof(self.buffer)
        self.slots = (ctypes.c_void_p * 4)(*(base + offset for offset, _ in KERNARG_LAYOUT))
        self.params = ctypes.c_void_p(ctypes.addressof(self.slots))
        self.state = [self.params, None, None, self.buffer, False]


THREAD = _Args()
STREAMS = {0: None}  # raw stream handle -> its argument: c_void_p, None (NULL) for the null stream


_MISSING = object()


def stream_arg(stream: int):
    """The argument for a raw stream handle (cached: a process uses few streams)."""
    s = STREAMS.get(stream, _MISSING)
    if s is _MISSING:
        if len(STREAMS) > 256:
            STREAMS.clear()
            STREAMS[0] = None
        s = STREAMS[stream] = ctypes.c_void_p(stream) if stream else None
    return s


# ---- hipDrvLaunchKernelEx ---------------------------------------------------
# hipDrvLaunchKernelEx(const HIP_LAUNCH_CONFIG *config, hipFunction_t f, void **kernelParams,
# void **extra) takes 4 arguments where hipModuleLaunchKernel takes 11: ctypes converts
# each argument on every call, so it costs less host time. HIP_LAUNCH_CONFIG, as
# hip_runtime_api.h (ROCm 7) declares it, x86-64 layout:
#   offset  0  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
#              sharedMemBytes (7 x 4 bytes, then 4 bytes of padding)
#   offset 32  hipStream_t hStream
#   offset 40  hipLaunchAttribute *attrs
#   offset 48  unsigned numAttrs (then 4 bytes of padding): 56 bytes
# With numAttrs 0, clr's hipDrvLaunchKernelEx makes the launch hipModuleLaunchKernel makes
# (ihipModuleLaunchKernel, kernelParams copied before it returns). Used on the null stream
# only: clr's first hipDrvLaunchKernelEx did not capture launches into a graph (no
# STREAM_CAPTURE; ROCm's later runtimes do), and the null stream never captures, while for
# it hipModuleLaunchKernel's capture step does nothing either. Runtimes without the symbol
# (ROCm 6) use hipModuleLaunchKernel everywhere.
class LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


assert ctypes.sizeof(LaunchConfig) == 56 and LaunchConfig.hStream.offset == 32 and LaunchConfig.numAttrs.offset == 48


CONFIGS = {}  # (grid, block) -> null_stream_config(grid, block): config()


def null_stream_config(grid: int, block: int):
    """A pointer to the HIP_LAUNCH_CONFIG of one launch on the null stream (it
    keeps the struct alive; never written after this: threads may share it)."""
    return ctypes.pointer(LaunchConfig(grid, 1, 1, block, 1, 1, 0, None, None, 0))


def config(grid: int, block: int):
    """null_stream_config(grid, block), cached (few sizes launch often)."""
    c = CONFIGS.get((grid, block))
    if c is None:
        if len(CONFIGS) > 256:
            CONFIGS.clear()
        c = CONFIGS[(grid, block)] = null_stream_config(grid, block)
    return c


def prepare(state, args, _pack=pack_into):
    """Pack this thread's buffer for args = (x_addr, y_addr, numel, stream) and
    set its stream argument; `state` remembers them (THREAD.state)."""
    if launch_kernel is None:
        bind()
    x_addr, y_addr, numel, stream = args
    _pack(state[3], 0, x_addr, numel, y_addr, numel)
    state[2] = stream_arg(stream)
    state[4] = stream == 0 and launch_ex is not None
    state[1] = args


def bind():
    """Bind hipModuleLaunchKernel and, where the runtime has it, hipDrvLaunchKernelEx."""
    global launch_kernel, launch_ex
    lib = _hip.lib()
    launch_ex = getattr(lib, "hipDrvLaunchKernelEx", None)
    launch_kernel = lib.hipModuleLaunchKernel


# Bound by the first prepare() (every thread prepares before its first launch) or prepacked()
launch_kernel = None  # hipModuleLaunchKernel
launch_ex = None      # hipDrvLaunchKernelEx, where the runtime has it


def launch(function, grid: int, block: int, config, x_addr: int, y_addr: int, numel: int, stream: int,
           _a=THREAD) -> int:
    """One kernel launch of `function` (a c_void_p from hipModuleGetFunction)
    on `stream`, the caller's device current: hipDrvLaunchKernelEx with
    `config` (config(grid, block)) on the null stream where the runtime has
    it, else hipModuleLaunchKernel. Returns the HIP error, 0 if none. The one
    launch of the package: first calls, canaries and relu()'s fast path."""
    state = _a.state
    args = (x_addr, y_addr, numel, stream)
    if args != state[1]:  # repeated calls (same tensors, same stream) find them prepared already
        prepare(state, args)
    if state[4]:  # the null stream: 4 arguments
        err = launch_ex(config, function, state[0], None)
    else:
        err = launch_kernel(function, grid, 1, 1, block, 1, 1, 0, state[2], state[0], None)
    if err:
        _hip.clear_last_error()  # taken, so torch's next launch check does not see it
    return err


def launch_all(function, block: int, esize: int, x_addr: int, y_addr: int, launches, stream: int) -> int:
    """Every launch of a plan (split launches included): the first HIP error,
    0 if none. Each launch's error is taken, even after a failure, so none is
    left behind for the next call."""
    error = 0
    for chunk in launches:
        offset = chunk.start * esize
        failed = launch(function, chunk.grid, block, config(chunk.grid, block), x_addr + offset, y_addr + offset,
                        chunk.numel, stream)
        error = error or failed
    return error


def prepacked(function, block: int, x_addr: int, y_addr: int, numel: int, grid: int, stream: int, ex: bool = False):
    """The launch floor: a no-argument callable that makes the bare ctypes
    hipModuleLaunchKernel call (ex: hipDrvLaunchKernelEx, null stream only)
    with these arguments packed once, up front (no packing, no checks per
    call). For benchmarks: what relu() costs above it is the package's own host
    work. Its own buffer: not shared with launch()."""
    buffer = (ctypes.c_uint64 * 4)()
    KERNARG.pack_into(buffer, 0, x_addr, numel, y_addr, numel)
    base = ctypes.addressof(buffer)
    slots = (ctypes.c_void_p * 4)(*(base + offset for offset, _ in KERNARG_LAYOUT))
    params = ctypes.c_void_p(ctypes.addressof(slots))
    if launch_kernel is None:
        bind()
    if ex:
        if stream or launch_ex is None:
            raise ValueError("prepacked(ex=True): the null stream of a runtime with hipDrvLaunchKernelEx only")
        fn, cfg = launch_ex, null_stream_config(grid, block)

        def floor():
            return fn(cfg, function, params, None)
    else:
        fn, s = launch_kernel, stream_arg(stream)

        def floor():
            return fn(function, grid, 1, 1, block, 1, 1, 0, s, params, None)

    floor.keepalive = (buffer, slots)
    return floor
