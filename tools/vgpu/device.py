"""The virtual gfx950 devices: loads the stand-in HIP library, receives FlyDSL's
code objects and launches through ctypes callbacks, and runs them on the emulator
over host memory checked against the registered allocations of the launch's
device (one allocation registry per device)."""

import ctypes
import itertools
import threading
import traceback
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .build import SONAME, build_stub
from .codeobj import CodeObject
from .emulator import Emulator, Program
from .memory import Memory

HIP_SUCCESS = 0
HIP_ERROR_INVALID_VALUE = 1
HIP_ERROR_INVALID_DEVICE = 101
HIP_ERROR_INVALID_IMAGE = 200
HIP_ERROR_INVALID_RESOURCE_HANDLE = 400
HIP_ERROR_ILLEGAL_STATE = 401
HIP_ERROR_LAUNCH_FAILURE = 719
HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
HIP_ERROR_STREAM_CAPTURE_INVALIDATED = 901
HIP_ERROR_STREAM_CAPTURE_IMPLICIT = 906
HIP_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908

# hipStreamCaptureStatus and hipStreamCaptureMode
CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2
CAPTURE_MODE_GLOBAL, CAPTURE_MODE_THREAD_LOCAL, CAPTURE_MODE_RELAXED = 0, 1, 2

_LOAD_CB = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint64)
_LAUNCH_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_char_p,
                              ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
_ARGS_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32),
                            ctypes.c_int)

Attempt = namedtuple("Attempt", "stream result device")
# the calls whose failures the stand-in can inject (fail_calls), by its index for each
FAULT_CALLS = {"hipModuleLaunchKernel": 0, "hipSetDevice": 1, "hipGetDevice": 2}


class HipError(RuntimeError):
    """A HIP call of the stand-in failed; `code` is the hipError_t."""

    def __init__(self, call, code):
        self.call, self.code = call, code
        super().__init__(f"{call} returned {code}")


class DeviceError(Exception):
    """A launch failed on the virtual device (out-of-bounds access, unsupported
    instruction, bad launch); carries the original exception as __cause__."""


@dataclass
class LaunchRecord:
    kernel: str
    grid: tuple
    block: tuple
    shared_mem: int
    stream: int
    args: list               # decoded kernel arguments, in metadata order
    result: int = HIP_SUCCESS
    error: BaseException = None
    straddle: str = ""
    cache_bits: dict = field(default_factory=dict)
    range_dropped: int = 0
    instructions: int = 0
    device: int = 0          # the virtual device it ran on (its stream's device)


class VirtualGPU:
    def __init__(self, lib_path, objdump):
        self.lib_path = str(lib_path)
        self.objdump = objdump
        self.lib = ctypes.CDLL(self.lib_path, mode=ctypes.RTLD_GLOBAL)
        self._check_soname_owner()
        L = self.lib
        L.vgpu_launch_stream.restype = ctypes.c_uint64
        L.vgpu_launch_stream.argtypes = [ctypes.c_uint64]
        L.vgpu_launch_count.restype = ctypes.c_uint64
        L.vgpu_load_count.restype = ctypes.c_uint64
        L.vgpu_get_function_count.restype = ctypes.c_uint64
        L.vgpu_launch_result.argtypes = [ctypes.c_uint64]
        L.vgpu_fail_launches.argtypes = [ctypes.c_int, ctypes.c_int]
        L.vgpu_fail_calls.argtypes = [ctypes.c_int] * 4
        L.vgpu_fail_calls_pending.argtypes = [ctypes.c_int]
        L.vgpu_foreign_get_function_count.restype = ctypes.c_uint64
        L.vgpu_launch_device.argtypes = [ctypes.c_uint64]
        L.vgpu_stream_device.argtypes = [ctypes.c_void_p]
        L.vgpu_graph_node_count.argtypes = [ctypes.c_void_p]
        for name, args in (("hipSetDevice", [ctypes.c_int]), ("hipGetDevice", [ctypes.POINTER(ctypes.c_int)]),
                           ("hipGetDeviceCount", [ctypes.POINTER(ctypes.c_int)]),
                           ("hipStreamCreate", [ctypes.POINTER(ctypes.c_void_p)]),
                           ("hipStreamDestroy", [ctypes.c_void_p]),
                           ("hipStreamBeginCapture", [ctypes.c_void_p, ctypes.c_int]),
                           ("hipStreamEndCapture", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
                           ("hipStreamIsCapturing", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
                           ("hipGraphInstantiate", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p,
                                                    ctypes.c_char_p, ctypes.c_size_t]),
                           ("hipGraphLaunch", [ctypes.c_void_p, ctypes.c_void_p]),
                           ("hipGraphDestroy", [ctypes.c_void_p]), ("hipGraphExecDestroy", [ctypes.c_void_p])):
            getattr(L, name).argtypes = args
            getattr(L, name).restype = ctypes.c_int
        self._load_cb = _LOAD_CB(self._on_load)
        self._launch_cb = _LAUNCH_CB(self._on_launch)
        self._args_cb = _ARGS_CB(self._on_args)
        L.vgpu_set_callbacks(self._load_cb, self._launch_cb, self._args_cb)
        self.memories = [Memory()]  # allocation registry of each device
        self._emulating = threading.RLock()  # one emulated launch at a time (shared registries)
        self.straddle = "dword"
        self.modules = {}          # id -> CodeObject
        self.programs = {}         # (module id, kernel) -> Program
        self._ids = itertools.count(1)
        self.launches = []         # LaunchRecord of every launch that reached the emulator
        self.errors = []           # exceptions raised inside callbacks, in order
        self._fresh = None         # pending fresh-output declaration (nbytes, name)

    def _check_soname_owner(self):
        """The stand-in must be the libamdhip64.so.7 this process uses."""
        maps = Path("/proc/self/maps").read_text().splitlines()
        paths = {ln.split()[-1] for ln in maps if ln.endswith(SONAME) or SONAME in ln.split()[-1]}
        mine = str(Path(self.lib_path).resolve())
        others = {p for p in paths if str(Path(p).resolve()) != mine}
        if others:
            raise RuntimeError(f"another {SONAME} is already loaded in this process: {sorted(others)}")

    # ------------------------------------------------------------------ memory
    @property
    def memory(self):
        """Device 0's allocation registry (the only one of a single-device test)."""
        return self.memories[0]

    def _add(self, device, base, size, name, writable=True, guard=False, owner=None, fresh=False):
        """Register [base, base + size) on `device`; one address belongs to one device."""
        if not 0 <= device < len(self.memories):
            raise ValueError(f"device {device} does not exist (device count {len(self.memories)})")
        for d, m in enumerate(self.memories):
            if d != device:
                for r in m.regions:
                    if base < r.end and r.base < base + size:
                        raise ValueError(f"region {name} [0x{base:x}, +{size}) overlaps {r.name} of device {d}")
        return self.memories[device].add(base, size, name, writable, guard, owner=owner, fresh=fresh)

    def register(self, tensor_or_addr, nbytes=None, name="tensor", writable=True, guard=False, owner=None,
                 device=0):
        """Declare live memory of `device`: a torch tensor (its exact extent) or (addr, nbytes)."""
        if nbytes is None:
            t = tensor_or_addr
            return self._add(device, t.data_ptr(), t.numel() * t.element_size(), name, writable, guard, owner=t)
        return self._add(device, int(tensor_or_addr), int(nbytes), name, writable, guard, owner=owner)

    def guarded(self, shape, dtype, guard_bytes=256, sentinel=0xA5, offset_elems=0, name="out", device=0):
        """A tensor inside a sentinel-filled buffer of `device`; the bytes around it are
        registered as guard regions. Returns (view, whole buffer)."""
        import torch

        numel = int(np.prod(shape)) if shape != () else 1
        esize = torch.empty((), dtype=dtype).element_size()
        pre = guard_bytes + offset_elems * esize
        total = pre + numel * esize + guard_bytes
        buf = torch.full((total,), sentinel, dtype=torch.uint8)
        view = buf[pre:pre + numel * esize].view(dtype).view(shape)
        base = buf.data_ptr()
        self._add(device, base, pre, f"{name}-guard-before", guard=True, owner=buf)
        if numel:
            self._add(device, base + pre, numel * esize, name, owner=buf)
        self._add(device, base + pre + numel * esize, guard_bytes, f"{name}-guard-after", guard=True, owner=buf)
        return view, buf

    def device_of(self, addr, default=None):
        """The device whose registered allocation contains `addr`, else `default`."""
        for d, m in enumerate(self.memories):
            if m.find(int(addr)) is not None:
                return d
        return default

    @property
    def violations(self):
        """Memory violations of every device, device 0's first."""
        return [v for m in self.memories for v in m.violations]

    def fresh_output(self, nbytes, name="fresh-output"):
        """The next launch receives one pointer to memory the test could not
        register beforehand (e.g. relu(x) allocating its output): register the
        first unknown pointer argument as an allocation of nbytes, on the launch's device.

        Nothing keeps a fresh output alive and the device never sees it freed, so what the
        bookkeeping holds may not depend on when Python frees it: memory handed out for a
        fresh output proves every earlier fresh output it overlaps freed, and replaces them.
        That memory may start inside such a freed output (its pointer is then not unknown):
        where no pointer is unknown, the last one whose memory overlaps only fresh outputs is
        the new one (relu's out is its last pointer)."""
        self._fresh = (int(nbytes), name)

    def _take_fresh(self, device, pointers):
        """Meet a pending fresh_output() declaration with a launch's pointer arguments."""
        nbytes, name = self._fresh

        def overlapped(p):
            return [(m, r) for m in self.memories for r in m.regions if p < r.end and r.base < p + nbytes]

        chosen = next((p for p in pointers if p and self.device_of(p) is None), None)
        if chosen is None:
            chosen = next((p for p in reversed(pointers) if p and all(r.fresh for _, r in overlapped(p))), None)
        if chosen is None:
            return
        self._fresh = None
        for m, r in overlapped(chosen):
            if r.fresh:
                m.remove(r)
        self._add(device, chosen, nbytes, name, fresh=True)

    def writes(self, tensor):
        """Per-element write counts of a registered tensor (min over its bytes and max)."""
        base = tensor.data_ptr()
        r = next((r for m in self.memories if (r := m.find(base)) is not None), None)
        if r is None:
            raise KeyError("tensor is not registered")
        esize = tensor.element_size()
        n = tensor.numel()
        w = r.writes[base - r.base:base - r.base + n * esize].reshape(n, esize)
        return w.min(axis=1), w.max(axis=1)

    # ------------------------------------------------------------------ devices and streams
    def set_device_count(self, n):
        """Number of virtual devices (1..16); each has its own allocation registry."""
        if self.lib.vgpu_set_device_count(int(n)) != 0:
            raise ValueError(f"device count {n} not in 1..16")
        while len(self.memories) < n:
            self.memories.append(Memory())
        del self.memories[n:]

    def refuse_loads_during_capture(self, on=True):
        """Strict mode: hipModuleLoadData during a global-mode capture fails with
        hipErrorStreamCaptureUnsupported and invalidates it, like the unsafe calls.
        ROCm's clr does not refuse it; tests use this to show no module load
        happens inside a capture. reset() turns it off."""
        self.lib.vgpu_refuse_loads_during_capture(1 if on else 0)

    @property
    def device_count(self):
        return len(self.memories)

    def _hip(self, call, *args):
        rc = getattr(self.lib, call)(*args)
        if rc != HIP_SUCCESS:
            raise HipError(call, rc)

    def set_device(self, device):
        """hipSetDevice in the calling thread (the current device is per host thread)."""
        self._hip("hipSetDevice", int(device))

    def current_device(self):
        """The calling thread's current device without a HIP call (as torch knows it): what the
        device hooks ask, so an injected hipGetDevice failure meets the package's own call."""
        return self.lib.vgpu_current_device()

    def get_device(self):
        d = ctypes.c_int(-1)
        self._hip("hipGetDevice", ctypes.byref(d))
        return d.value

    def create_stream(self, device=None):
        """hipStreamCreate on `device` (default: the current one); returns the raw handle."""
        prev = self.get_device()
        if device is not None:
            self.set_device(device)
        try:
            h = ctypes.c_void_p()
            self._hip("hipStreamCreate", ctypes.byref(h))
            return h.value
        finally:
            self.set_device(prev)

    def destroy_stream(self, stream):
        self._hip("hipStreamDestroy", stream)

    def stream_device(self, stream):
        """Device of a stream made by hipStreamCreate; -1 for any other handle."""
        return self.lib.vgpu_stream_device(stream)

    # ------------------------------------------------------------------ capture and graphs
    def begin_capture(self, stream, mode=CAPTURE_MODE_GLOBAL):
        self._hip("hipStreamBeginCapture", stream, int(mode))

    def end_capture(self, stream):
        """Ends the capture; returns the graph handle (HipError 901 if it was invalidated)."""
        g = ctypes.c_void_p()
        self._hip("hipStreamEndCapture", stream, ctypes.byref(g))
        return g.value

    def is_capturing(self, stream):
        """hipStreamIsCapturing: CAPTURE_NONE, CAPTURE_ACTIVE or CAPTURE_INVALIDATED."""
        st = ctypes.c_int(-1)
        self._hip("hipStreamIsCapturing", stream, ctypes.byref(st))
        return st.value

    def graph_nodes(self, graph):
        """Number of launches recorded in a graph or executable graph."""
        return self.lib.vgpu_graph_node_count(graph)

    def instantiate(self, graph):
        e = ctypes.c_void_p()
        self._hip("hipGraphInstantiate", ctypes.byref(e), graph, None, None, 0)
        return e.value

    def replay(self, graph_exec, stream):
        """hipGraphLaunch: runs the recorded launches on the emulator, in order."""
        self._hip("hipGraphLaunch", graph_exec, stream)

    def destroy_graph(self, graph):
        self._hip("hipGraphDestroy", graph)

    def destroy_exec(self, graph_exec):
        self._hip("hipGraphExecDestroy", graph_exec)

    # ------------------------------------------------------------------ records and checks
    def fail_launches(self, count=1, code=HIP_ERROR_LAUNCH_FAILURE):
        """Make the next `count` hipModuleLaunchKernel calls (not captured ones) return `code`."""
        self.lib.vgpu_fail_launches(count, code)

    def fail_calls(self, call, count=1, code=None, after=0):
        """Make `call` ("hipModuleLaunchKernel" (hipDrvLaunchKernelEx too; not captured
        launches), "hipSetDevice" or "hipGetDevice") fail: after its next `after` calls, its
        next `count` return `code` (default hipErrorLaunchFailure, hipErrorInvalidDevice,
        hipErrorInvalidValue) and leave it pending, as a real failure does. reset() clears it."""
        default = {0: HIP_ERROR_LAUNCH_FAILURE, 1: HIP_ERROR_INVALID_DEVICE, 2: HIP_ERROR_INVALID_VALUE}
        index = FAULT_CALLS[call]
        if self.lib.vgpu_fail_calls(index, int(after), int(count), default[index] if code is None else int(code)):
            raise ValueError(f"fail_calls({call!r}, count={count}, after={after})")

    def fail_pending(self, call):
        """Injected failures of `call` still to come."""
        return self.lib.vgpu_fail_calls_pending(FAULT_CALLS[call])

    def last_error(self):
        """hipGetLastError: the pending HIP error (0: none), taken."""
        return self.lib.hipGetLastError()

    @property
    def launch_attempts(self):
        """Every hipModuleLaunchKernel call and replayed launch: (stream, result)."""
        return [(a.stream, a.result) for a in self.attempts()]

    def attempts(self):
        """Every hipModuleLaunchKernel call and replayed launch: Attempt(stream, result, device)."""
        n = self.lib.vgpu_launch_count()
        return [Attempt(self.lib.vgpu_launch_stream(i), self.lib.vgpu_launch_result(i), self.lib.vgpu_launch_device(i))
                for i in range(min(n, 4096))]

    def counts(self):
        """Calls so far: load (hipModuleLoadData), get_function, launch (attempts), and
        foreign_get_function: hipModuleGetFunction while the module's device was not
        current (ROCm 6.x aborts the process there; ROCm 7 allows it)."""
        return dict(load=self.lib.vgpu_load_count(), get_function=self.lib.vgpu_get_function_count(),
                    launch=self.lib.vgpu_launch_count(),
                    foreign_get_function=self.lib.vgpu_foreign_get_function_count())

    def reset(self):
        """Forget allocations, launches, errors (the runtime's pending one, which
        hipGetLastError would return, too) and violations (not the modules or
        streams); abandon any capture; back to one device, device 0 current in the
        calling thread."""
        self.lib.vgpu_abort_captures()
        for index in FAULT_CALLS.values():  # first: set_device below must not meet an injected failure
            self.lib.vgpu_fail_calls(index, 0, 0, 0)
        self.lib.hipGetLastError()  # process-wide: a test that left one must not fail the next
        self.lib.vgpu_refuse_loads_during_capture(0)
        for m in self.memories:
            m.clear()
        self.set_device_count(1)
        self.set_device(0)
        self.launches.clear()
        self.errors.clear()
        self._fresh = None
        self.lib.vgpu_fail_launches(0, 0)
        self.lib.vgpu_reset_records()

    def check(self):
        """Raise the first error recorded inside a callback, or the first memory violation."""
        if self.errors:
            e = self.errors[0]
            raise DeviceError(f"virtual device: {type(e).__name__}: {e}") from e
        v = self.violations
        if v:
            raise DeviceError(f"virtual device: {len(v)} invalid memory access(es); first: {v[0]}")

    # ------------------------------------------------------------------ callbacks
    def _on_load(self, image, size):
        try:
            data = ctypes.string_at(image, size)
            co = CodeObject(data, self.objdump)
            mid = next(self._ids)
            self.modules[mid] = co
            return mid
        except BaseException as e:  # ctypes would swallow it
            e.__traceback_text__ = traceback.format_exc()
            self.errors.append(e)
            return -1

    def _on_args(self, module, name, sizes, cap):
        """Sizes of a kernel's arguments, for the stub to copy them at capture."""
        try:
            args = self.modules[module].kernels[name.decode()].args
            if len(args) > cap or any(a[".value_kind"] not in ("global_buffer", "by_value") for a in args):
                return -1
            for i, a in enumerate(args):
                sizes[i] = a[".size"]
            return len(args)
        except BaseException as e:
            e.__traceback_text__ = traceback.format_exc()
            self.errors.append(e)
            return -1

    def _on_launch(self, module, name, gx, gy, gz, bx, by, bz, shmem, stream, params, extra, device):
        try:
            with self._emulating:
                return self._launch(module, name.decode(), (gx, gy, gz), (bx, by, bz), shmem, stream, params,
                                    extra, device)
        except BaseException as e:  # ctypes would swallow it: record, return an error code
            e.__traceback_text__ = traceback.format_exc()
            self.errors.append(e)
            return HIP_ERROR_LAUNCH_FAILURE

    def _launch(self, module, name, grid, block, shmem, stream, params, extra, device):
        co = self.modules[module]
        if name not in co.kernels:
            raise DeviceError(f"kernel {name!r} not in module {module}")
        key = (module, name)
        prog = self.programs.get(key)
        if prog is None:
            prog = self.programs[key] = Program(co.kernels[name])
        rec = LaunchRecord(name, grid, block, shmem, stream, [], straddle=self.straddle, device=device)
        self.launches.append(rec)
        try:
            self._run(rec, co.kernels[name], prog, params, extra, device)
        except BaseException as e:
            rec.error = e
            rec.result = HIP_ERROR_LAUNCH_FAILURE
            raise
        return HIP_SUCCESS

    def _run(self, rec, kernel, prog, params, extra, device):
        memory = self.memories[device]
        if extra:
            raise DeviceError("hipModuleLaunchKernel 'extra' argument packing is not supported")
        if rec.shared_mem:
            raise DeviceError("dynamic shared memory is not supported")
        if not params and kernel.args:
            raise DeviceError("kernelParams is NULL")
        ksize = int(kernel.kernarg_size)
        kernarg = np.zeros(max(4, -(-ksize // 4) * 4), dtype=np.uint8)
        slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        for i, a in enumerate(kernel.args):
            kind = a[".value_kind"]
            if kind not in ("global_buffer", "by_value"):
                raise DeviceError(f"kernel argument kind {kind} (hidden arguments) is not supported")
            off, sz = a[".offset"], a[".size"]
            raw = ctypes.string_at(slots[i], sz)  # exactly the argument's size: slots are 8 bytes
            kernarg[off:off + sz] = np.frombuffer(raw, dtype=np.uint8)
            rec.args.append(int.from_bytes(raw, "little", signed=(kind == "by_value")))
        if self._fresh:
            self._take_fresh(device, [v for v, a in zip(rec.args, kernel.args) if a[".value_kind"] == "global_buffer"])
        region = memory.add(kernarg.ctypes.data, kernarg.size, f"kernarg:{rec.kernel}", writable=False,
                            owner=kernarg)
        emu = Emulator(prog, memory, self.straddle)
        seen = len(memory.violations)
        try:
            emu.run(rec.grid, rec.block, kernarg.ctypes.data)
        except BaseException as e:
            pointers = [v for v, a in zip(rec.args, kernel.args) if a[".value_kind"] == "global_buffer"]
            foreign = self._explain_foreign(e, [v.address for v in memory.violations[seen:]] + pointers, device)
            if foreign is e:
                raise
            raise foreign from e
        finally:
            memory.remove(region)
            rec.cache_bits = emu.cache_bits
            rec.range_dropped = emu.range_dropped
            rec.instructions = emu.executed

    def _explain_foreign(self, e, addresses, device):
        """A launch on `device` failed on memory (an access outside its allocations, or a
        buffer descriptor whose base is not in one): if an address it touched or was
        given lies in another device's allocation, say so. The launch error itself
        comes from the emulator: another device's memory is not mapped on this one."""
        for addr in addresses:
            other = self.device_of(addr)
            if other is not None and other != device:
                r = self.memories[other].find(addr)
                return DeviceError(f"{e}; address 0x{addr:x} is in allocation {r.name!r} of device {other}, "
                                   f"not of device {device} where the kernel runs")
        return e


_DEVICE = None


def device(build_dir=None):
    """The process-wide virtual device (built and loaded on first use). Must run
    before FlyDSL first launches a compiled kernel in this process."""
    global _DEVICE
    if _DEVICE is None:
        from toolchain import find_tool  # tools/toolchain.py, beside this package on the import path

        objdump = find_tool("llvm-objdump")
        _DEVICE = VirtualGPU(build_stub(build_dir), objdump)
    return _DEVICE
