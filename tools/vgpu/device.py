"""The virtual gfx950: loads the stand-in HIP library, receives FlyDSL's code
objects and launches through ctypes callbacks, and runs them on the emulator
over host memory checked against the registered allocations."""

import ctypes
import itertools
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .build import SONAME, build_stub
from .codeobj import CodeObject
from .emulator import STRADDLE_MODELS, Emulator, Program
from .memory import Memory, OutOfBounds

HIP_SUCCESS = 0
HIP_ERROR_INVALID_IMAGE = 200
HIP_ERROR_LAUNCH_FAILURE = 719

_LOAD_CB = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint64)
_LAUNCH_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_char_p,
                              ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p)


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
        self._load_cb = _LOAD_CB(self._on_load)
        self._launch_cb = _LAUNCH_CB(self._on_launch)
        L.vgpu_set_callbacks(self._load_cb, self._launch_cb)
        self.memory = Memory()
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

    # ------------------------------------------------------------------ test API
    def register(self, tensor_or_addr, nbytes=None, name="tensor", writable=True, guard=False, owner=None):
        """Declare live device memory: a torch tensor (its exact extent) or (addr, nbytes)."""
        if nbytes is None:
            t = tensor_or_addr
            return self.memory.add(t.data_ptr(), t.numel() * t.element_size(), name, writable, guard, owner=t)
        return self.memory.add(tensor_or_addr, nbytes, name, writable, guard, owner=owner)

    def guarded(self, shape, dtype, guard_bytes=256, sentinel=0xA5, offset_elems=0, name="out"):
        """A tensor inside a sentinel-filled buffer; the bytes around it are
        registered as guard regions. Returns (view, whole buffer)."""
        import torch

        numel = int(np.prod(shape)) if shape != () else 1
        esize = torch.empty((), dtype=dtype).element_size()
        pre = guard_bytes + offset_elems * esize
        total = pre + numel * esize + guard_bytes
        buf = torch.full((total,), sentinel, dtype=torch.uint8)
        view = buf[pre:pre + numel * esize].view(dtype).view(shape)
        base = buf.data_ptr()
        self.memory.add(base, pre, f"{name}-guard-before", guard=True, owner=buf)
        if numel:
            self.memory.add(base + pre, numel * esize, name, owner=buf)
        self.memory.add(base + pre + numel * esize, guard_bytes, f"{name}-guard-after", guard=True, owner=buf)
        return view, buf

    def fresh_output(self, nbytes, name="fresh-output"):
        """The next launch receives one pointer to memory the test could not
        register beforehand (e.g. relu(x) allocating its output): register the
        first unknown pointer argument as an allocation of nbytes."""
        self._fresh = (int(nbytes), name)

    def fail_launches(self, count=1, code=HIP_ERROR_LAUNCH_FAILURE):
        """Make the next `count` hipModuleLaunchKernel calls return `code`."""
        self.lib.vgpu_fail_launches(count, code)

    @property
    def launch_attempts(self):
        """Every hipModuleLaunchKernel call (including injected failures)."""
        n = self.lib.vgpu_launch_count()
        return [(self.lib.vgpu_launch_stream(i), self.lib.vgpu_launch_result(i)) for i in range(min(n, 4096))]

    def counts(self):
        return dict(load=self.lib.vgpu_load_count(), get_function=self.lib.vgpu_get_function_count(),
                    launch=self.lib.vgpu_launch_count())

    def reset(self):
        """Forget allocations, launches, errors and violations (not the modules)."""
        self.memory.clear()
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
        if self.memory.violations:
            v = self.memory.violations
            raise DeviceError(f"virtual device: {len(v)} invalid memory access(es); first: {v[0]}")

    def writes(self, tensor):
        """Per-element write counts of a registered tensor (min over its bytes and max)."""
        base = tensor.data_ptr()
        r = self.memory.find(base)
        if r is None:
            raise KeyError("tensor is not registered")
        esize = tensor.element_size()
        n = tensor.numel()
        w = r.writes[base - r.base:base - r.base + n * esize].reshape(n, esize)
        return w.min(axis=1), w.max(axis=1)

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

    def _on_launch(self, module, name, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        rec = None
        try:
            name = name.decode()
            co = self.modules[module]
            if name not in co.kernels:
                raise DeviceError(f"kernel {name!r} not in module {module}")
            key = (module, name)
            prog = self.programs.get(key)
            if prog is None:
                prog = self.programs[key] = Program(co.kernels[name])
            kernel = co.kernels[name]
            rec = LaunchRecord(name, (gx, gy, gz), (bx, by, bz), shmem, stream, [], straddle=self.straddle)
            self.launches.append(rec)
            if extra:
                raise DeviceError("hipModuleLaunchKernel 'extra' argument packing is not supported")
            if shmem:
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
                if kind == "global_buffer" and self._fresh:
                    ptr = int.from_bytes(raw, "little")
                    if ptr and self.memory.find(ptr) is None:
                        nbytes, fname = self._fresh
                        self._fresh = None
                        self.memory.add(ptr, nbytes, fname)
            region = self.memory.add(kernarg.ctypes.data, kernarg.size, f"kernarg:{name}", writable=False,
                                     owner=kernarg)
            emu = Emulator(prog, self.memory, self.straddle)
            try:
                emu.run((gx, gy, gz), (bx, by, bz), kernarg.ctypes.data)
            finally:
                self.memory.remove(region)
                rec.cache_bits = emu.cache_bits
                rec.range_dropped = emu.range_dropped
                rec.instructions = emu.executed
            return HIP_SUCCESS
        except BaseException as e:  # ctypes would swallow it: record, return an error code
            e.__traceback_text__ = traceback.format_exc()
            self.errors.append(e)
            if rec is not None:
                rec.error = e
                rec.result = HIP_ERROR_LAUNCH_FAILURE
            return HIP_ERROR_LAUNCH_FAILURE


_DEVICE = None


def device(build_dir=None):
    """The process-wide virtual device (built and loaded on first use). Must run
    before FlyDSL first launches a compiled kernel in this process."""
    global _DEVICE
    if _DEVICE is None:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from toolchain import find_tool

        objdump = find_tool("llvm-objdump")
        _DEVICE = VirtualGPU(build_stub(build_dir), objdump)
    return _DEVICE
