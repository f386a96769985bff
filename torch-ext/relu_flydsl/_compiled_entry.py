"""The compiled entry (_compiled_entry.c): loading it, and what the general path tells it.

    load()                  at import: the shipped binary, checked against its sha256 in the
                            manifest, then imported (once; any failure leaves relu() on its
                            Python path, which gives the same answers)
    status()                {"loaded", "reason", "file", "sha256", "allocation", "devices"}
    learn(info)             the general path saw a ROCm device (arch, stream): check the entry's
                            answers there against torch's, then tell the entry (or stand down there)
    add(entry, rung)        the general path launched a ready single-launch entry: replay it
                            (unless the settings changed since it was made ready)
    present_cpu(...)        CPU tensors as device memory (the virtual gfx950, host benchmarks)

Where it cannot load (not x86-64 Linux, a Python outside 3.10-3.13 or a free-threaded build, a
torch without the DLPack C exchange API, libtorch's answers missing or not torch's own
(torch_decides, bump_version), a missing or damaged binary, RELU_FLYDSL_ENTRY=0) status() says
why, and the first call that reaches the general path warns once with it. Every libtorch function
it binds answers probes first: the questions and bump_version at load (or it does not load), the
C shim and THPVariable_Wrap before relu(x) allocates through them (else torch.empty_like, and
status()["allocation"] says why).
"""

import contextlib
import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
import sysconfig
import warnings

import torch

from . import _hip, _objects
from ._inputs import OVERLAP
from ._state import ENV_DATA, ENV_ENTRY, ENV_KEYS, OFF, STATE
from ._state import DISABLED as _DISABLED
from ._state import NO_DEVICE as _NO_DEVICE
from .flash_relu_rocm.registry import RUNGS

MODULE = "_relu_flydsl_entry"    # PyInit__relu_flydsl_entry in _compiled_entry.c
ABI = "cp310-abi3"               # the CPython limited API it is built against
PYTHONS = ((3, 10), (3, 13))     # the interpreters it is built and tested for
RUNG_NAMES = tuple(RUNGS)        # the entry's rung index i is RUNG_NAMES[i - 1]; 0 is the default
# DLPack (code, bits) of the dtypes the kernels serve (DLDataTypeCode: 0 int, 2 float, 4 bfloat)
DL_DTYPES = {torch.float32: (2, 32), torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.int8: (0, 8)}
# relu(x)'s output without torch.empty_like's Python argument parsing (_compiled_entry.c, new_like):
# libtorch's stable C shim allocates, libtorch_python's THPVariable_Wrap returns the tensor.
SHIM = ("aoti_torch_empty_strided", "aoti_torch_get_data_ptr", "aoti_torch_delete_tensor_object")
WRAP = "_Z16THPVariable_WrapRKN2at10TensorBaseE"  # THPVariable_Wrap(const at::TensorBase &)
# torch 2.10-2.12 still have named tensors, whose names empty_like keeps and the shim would not: there
# the entry asks at::impl::has_names(const c10::TensorImpl *) and allocates a named x with empty_like.
HAS_NAMES = "_ZN2at4impl9has_namesEPKN3c1010TensorImplE"
# What relu() must leave to the general path, asked of libtorch by the entry (_compiled_entry.c,
# torch_decides), in the order queries() takes them.
QUERIES = (
    "_ZN3c104impl20TorchDispatchModeTLS9stack_lenEv",  # c10::impl::TorchDispatchModeTLS::stack_len()
    "_ZN2at9functorch20getDynamicLayerStackEv",        # at::functorch::getDynamicLayerStack()
    "_ZN2at6native6is_negERKNS_6TensorE",              # at::native::is_neg(const at::Tensor &)
    "_ZN2at6native12is_inferenceERKNS_6TensorE",       # at::native::is_inference(const at::Tensor &)
    "_ZNK3c1010TensorImpl13requires_gradEv",           # c10::TensorImpl::requires_grad() const
    "_ZN2at6native14_is_zerotensorERKNS_6TensorE",     # at::native::_is_zerotensor(const at::Tensor &)
    "_ZN2at17functionalization4impl18isFunctionalTensorERKNS_6TensorE",  # ...::isFunctionalTensor(const Tensor &)
)
# torch::autograd::impl::bump_version(const at::Tensor &): the version counter bump of torch's out= and
# in-place ops, for the out the kernel wrote (the first name found; the TensorBase spelling is the
# same call).
BUMP = ("_ZN5torch8autograd4impl12bump_versionERKN2at6TensorE",
        "_ZN5torch8autograd4impl12bump_versionERKN2at10TensorBaseE")
TENSOR_AT = object.__basicsize__  # THPVariable: PyObject_HEAD, then its at::Tensor (torch 2.10 on)

SERVE = None  # the entry's serve(x, out, rung) once loaded; relu() reads it
_module = None
_loaded = None  # the module as loaded, kept when unload() stops using it (STATE.reset() restores it)
_reason = "not loaded yet"
presented = False  # CPU tensors count as device memory (present_cpu)
_file = None
_memfd = None  # kept open: its /proc path names this process's copy of the binary
_hip_bound = None  # the HIP library whose entry points the compiled entry calls
presenting = None  # the stand-in's callbacks while CPU tensors are presented (tools/vgpu/serve.py)
allocation = None  # how relu(x) allocates its output there: "torch's C shim", or why torch.empty_like
devices = {}  # device index -> why the entry stands down there (None: it serves there); learn() fills it


def _why_not_here():
    """Why this process cannot use the binary, or None."""
    if os.environ.get(ENV_ENTRY, "").strip().lower() in OFF:
        return f"disabled by {ENV_ENTRY}"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"built for x86-64 Linux, not {sys.platform} {platform.machine()}"
    if not PYTHONS[0] <= sys.version_info[:2] <= PYTHONS[1] or sys.implementation.name != "cpython":
        return f"built for CPython {PYTHONS[0][0]}.{PYTHONS[0][1]}-{PYTHONS[1][0]}.{PYTHONS[1][1]}, not " \
               f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):  # how it was built, whatever the GIL's state now
        return "a free-threaded Python build (Py_GIL_DISABLED: the limited API binary is built for the GIL " \
               "build's object layout)"
    if ENV_DATA is None:
        return "os.environ is not CPython's (no _data to read the settings from)"
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        return f"torch {torch.__version__} has no DLPack C exchange API (Tensor.__dlpack_c_exchange_api__)"
    if not hasattr(os, "memfd_create"):
        return "no os.memfd_create"
    return None


def _verified_bytes():
    """The binary's bytes, only if they match the manifest's sha256; (bytes, manifest entry)."""
    try:  # read, not cached: the kernels' first use reads it again (code objects may be replaced)
        meta = _objects.read_manifest().get("entry")
    except _objects.ObjectError as e:
        raise ImportError(str(e)) from None
    if not isinstance(meta, dict) or not meta.get("file") or not meta.get("sha256"):
        raise ImportError(f"no compiled entry in {_objects.MANIFEST}; {_objects.BUILD_HINT}")
    if meta.get("abi") != ABI:
        raise ImportError(f"the compiled entry is built for {meta.get('abi')}, not {ABI}")
    path = _objects.OBJECTS_DIR / str(meta["file"])
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ImportError(f"{path.name} unreadable ({type(e).__name__}); {_objects.BUILD_HINT}") from None
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ImportError(f"{path.name} does not match its sha256 in {_objects.MANIFEST} (not loaded)")
    return data, meta


def _import(data: bytes):
    """Import the verified bytes themselves: written to a memfd, loaded from its /proc path
    (no window between the check and the load, and no file left behind)."""
    global _memfd
    fd = os.memfd_create(MODULE, 0)
    try:
        os.write(fd, data)
        path = f"/proc/self/fd/{fd}"
        loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
        spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except BaseException:
        os.close(fd)
        raise
    _memfd = fd
    return module


def _libtorch():
    """torch._C's handle: it finds the symbols of the libraries it links (libtorch_python,
    libtorch_cpu, libc10)."""
    return ctypes.CDLL(torch._C.__file__)


def torch_decides(x, out):
    """The compiled entry's torch_decides (_compiled_entry.c) asked through torch's Python API:
    why the general path must take relu(x, out), or None. The entry's answers are checked
    against these before it loads (_bind_queries)."""
    if type(x) is not torch.Tensor or (out is not None and type(out) is not torch.Tensor):
        return "not an exact torch.Tensor"
    if torch._C._len_torch_dispatch_stack():
        return "a dispatch mode"
    if torch._C._functorch.maybe_current_level() is not None:
        return "a torch.func transform"
    for t, name in ((x, "x"), (out, "out")):  # x's answers, then out's
        if t is None:
            continue
        if t.requires_grad:
            return f"{name} requires grad"
        if t.is_neg():
            return f"{name} is a neg-bit view"
        if t._is_zerotensor() or torch._is_functional_tensor(t):  # a view of one: its offset as its data pointer
            return f"{name} has no memory of its own"
    if out is not None and out.is_inference():
        return "out is an inference tensor"
    return None


def _dispatch_mode():
    """A dispatch mode that runs every op as it is (imported here: torch's module is private, and
    a torch without it only keeps the entry from loading)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return PassThrough()


@contextlib.contextmanager
def _transform():
    """Inside one torch.func transform level (grad's), as torch.func.grad enters it."""
    torch._C._functorch._grad_increment_nesting()
    try:
        yield
    finally:
        torch._C._functorch._grad_decrement_nesting()


def _probes(device=None):
    """(x, out) pairs with each answer of torch_decides, on `device` (None: the CPU)."""
    with torch.inference_mode(False), torch.enable_grad():  # whatever mode the caller is in
        t, u = torch.zeros(2, device=device), torch.zeros(2, device=device)
        with torch.inference_mode():
            frozen = torch.zeros(2, device=device)
        grad = torch.zeros(2, device=device, requires_grad=True)
        param = torch.nn.Parameter(torch.zeros(2, device=device), requires_grad=False)
        zero, functional = torch._efficientzerotensor(2, device=device), torch._to_functional_tensor(u)
        return ((t, None), (t, u), (param, None), (t, param), (grad, None), (t, grad), (torch._neg_view(t), None),
                (t, torch._neg_view(u)), (t, frozen), (frozen, None), (1.0, None), (zero, None), (t, zero),
                (functional, None), (t, functional))


def _check_answers(module, device=None):
    """The entry's answers (decides) against torch's own (torch_decides) on probe tensors on
    `device`, outside and inside a dispatch mode and a torch.func transform. RuntimeError says
    what differs."""
    probe = torch.zeros(1, device=device)
    if ctypes.c_void_p.from_address(id(probe) + TENSOR_AT).value != probe._cdata:
        raise RuntimeError(f"torch {torch.__version__}'s tensor object does not hold its at::Tensor at byte "
                           f"{TENSOR_AT}")
    probes = _probes(device)
    for state, where in ((contextlib.nullcontext, ""), (_dispatch_mode, " in a dispatch mode"),
                         (_transform, " in a torch.func transform")):
        with state():
            for x, out in probes:
                got, want = module.decides(x, out), torch_decides(x, out)
                if got != want:
                    raise RuntimeError(f"libtorch's answers differ from torch's{where}: {got!r} where torch says "
                                       f"{want!r}")


def _bump_address(lib):
    for name in BUMP:
        f = getattr(lib, name, None)
        if f is not None:
            return _hip.address(f)
    raise AttributeError(f"none of {', '.join(BUMP)}")


def _check_bump(module):
    """The entry's bump_version against torch's own in-place op (torch.relu_) on probe tensors: the
    same counters move (a view's is its base's), by as much, outside and inside inference mode.
    RuntimeError says what differs."""
    for mode in (False, True):
        moved = []
        for bump in (module.bumped, torch.relu_):
            with torch.inference_mode(False):
                base, other = torch.zeros(4), torch.zeros(4)
            view = base[1:3]
            before = (base._version, view._version, other._version)
            with torch.inference_mode(mode):
                bump(view)
            moved.append(tuple(v - b for v, b in zip((base._version, view._version, other._version), before)))
        if moved[0] != moved[1]:
            raise RuntimeError(f"libtorch's bump_version moved (base, view, other tensor) by {moved[0]} where "
                               f"torch's in-place op moves them by {moved[1]}")


def _bind_queries(module):
    """Hand the entry libtorch's answers (QUERIES) and bump_version (BUMP), and check them against
    torch's own on CPU probe tensors (_check_answers, _check_bump; learn() checks the answers again
    on each device before the entry serves there). RuntimeError says what is missing or differs;
    the entry then does not load."""
    try:
        lib = _libtorch()
        addresses = [_hip.address(getattr(lib, name)) for name in QUERIES] + [_bump_address(lib)]
    except (OSError, AttributeError) as e:
        raise RuntimeError(f"libtorch's answers for the entry not found ({e})") from None
    module.queries(torch.Tensor, TENSOR_AT, *addresses)
    _check_answers(module)
    _check_bump(module)


def _named_probe():
    """A named tensor (torch warns that named tensors are experimental)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.zeros(2, names=("n",))


def _torch_shim():
    """The allocator's arguments (_compiled_entry.c, allocator()) from the loaded torch, or why not.
    Where torch has named tensors, at::impl::has_names' address too (_allocate_with checks its
    answers against torch's before the shim is used)."""
    try:
        lib = _libtorch()
        names = None
        if hasattr(torch.Tensor, "has_names"):  # empty_like keeps a named x's names; the shim would not
            names = _hip.address(getattr(lib, HAS_NAMES))

        def code(name):  # the shim's int32_t aoti_torch_<name>() constants
            f = getattr(lib, f"aoti_torch_{name}")
            f.restype = ctypes.c_int32
            return f()

        shim = tuple(_hip.address(getattr(lib, name)) for name in SHIM + (WRAP,))
        devices = (code("device_type_cpu"), code("device_type_cuda"))
        dtypes = tuple((dl_code, bits, code(f"dtype_{str(dtype)[6:]}")) for dtype, (dl_code, bits) in DL_DTYPES.items())
    except (OSError, AttributeError) as e:
        return None, f"torch's C shim, THPVariable_Wrap or has_names not found ({e})"
    return shim + devices + (dtypes, names), None


NO_SHIM = (None, None, None, None, 0, 0, (), None)


def _made(make):
    """What a caller can see of the new tensor make() returns as (tensor, address or None, made by
    the shim), whether its one reference holds it, and that it is freed with that reference."""
    y, address, via_shim = make()
    storage = y.untyped_storage()
    seen = (type(y).__name__, tuple(y.shape), y.stride(), y.storage_offset(), y.dtype, y.device, y.requires_grad,
            y.is_inference(), storage.nbytes(), address is None or y.data_ptr() == address, bool(via_shim),
            sys.getrefcount(y))
    del y
    return seen + (torch._C._storage_Use_Count(storage._cdata),)  # 1: only `storage` holds it now


def _allocation_differs(module):
    """None where relu(x)'s output, as the entry makes it through the shim and THPVariable_Wrap, is
    what torch.empty_like(x) makes, for dense probes of every served dtype (strided, size-1
    dimensions, 0-dim), and is freed with its last reference; else what differs."""
    with torch.inference_mode(False):
        for dtype in DL_DTYPES:
            base = torch.zeros(24, dtype=dtype)
            probes = (base.view(4, 6).t(), base.view(2, 3, 4).permute(2, 0, 1), base[:4].as_strided((4, 1), (1, 7)),
                      base[5]) if dtype == torch.float32 else (base.view(4, 6).t(),)
            for x in probes:
                got = _made(lambda: module.allocate(x))
                want = _made(lambda: (torch.empty_like(x), None, True))
                if got != want:
                    return f"torch's C shim gave {got} where torch.empty_like gives {want} (x {tuple(x.shape)}, " \
                           f"{x.stride()})"
    return None


def _allocate_with(module, shim_or_why):
    """Bind the allocation; a has_names that does not answer as torch does (a named and a plain
    probe), or a shim and wrapper that do not make torch.empty_like's tensor (_allocation_differs),
    leave relu(x) on empty_like, with the reason."""
    global allocation
    shim, why_not = shim_or_why
    if shim is not None and shim[-1] is not None:
        module.allocator(*NO_SHIM[:-1], shim[-1])  # has_names alone, to ask it
        try:
            plain, named = torch.zeros(2), _named_probe()
            answers, want = (module.named(plain), module.named(named)), (plain.has_names(), named.has_names())
        except Exception as e:  # noqa: BLE001 - whatever it is, relu(x) keeps empty_like
            answers, want = f"{type(e).__name__}: {e}", (False, True)
        if answers != want or want != (False, True):
            shim, why_not = None, f"libtorch's has_names answered {answers} where torch says {want}"
    module.allocator(*(shim or NO_SHIM))
    if shim is not None:
        try:
            why_not = _allocation_differs(module)
        except Exception as e:  # noqa: BLE001 - whatever it is, relu(x) keeps empty_like
            why_not = f"the probe of torch's C shim raised {type(e).__name__}: {e}"
        if why_not is not None:
            shim = None
            module.allocator(*NO_SHIM)
    allocation = ("torch's C shim" + (" (a named x: torch.empty_like)" if shim[-1] is not None else "")
                  if shim is not None else f"torch.empty_like: {why_not}")


def use_shim(on: bool) -> str:
    """relu(x) allocates through torch's C shim (on, where found) or with torch.empty_like: for
    the tests that compare both. Returns how it allocates now."""
    if _loaded is not None:
        _allocate_with(_loaded, _torch_shim() if on else (None, "switched off (use_shim)"))
    return allocation


class _Replay:
    """STATE.replay: the entry's ready entries and devices, dropped with the general path's."""

    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module

    def clear(self, env, disabled, entries_max):
        devices.clear()
        self.module.clear(env, disabled, entries_max)

    def entries(self) -> int:
        return self.module.entries()


def _init(module, empty_like=torch.empty_like):
    """Hand the entry torch's DLPack API, the settings' raw values and torch's functions
    (empty_like: the tests pass one that runs Python in the middle of a call)."""
    module.init(torch.Tensor.__dlpack_c_exchange_api__, ENV_DATA, ENV_KEYS, RUNG_NAMES, torch.relu,
                torch.clamp_min, empty_like, STATE.lasting[_NO_DEVICE].hit, STATE.lasting[_DISABLED].hit, OVERLAP)


def load():
    """Load and initialise the compiled entry, or record why not. Returns status()."""
    global _module, _loaded, _reason, _file, SERVE, _hip_bound, presented
    _module = _loaded = SERVE = STATE.replay = None  # a failed load leaves nothing of an earlier one
    _hip_bound, presented = None, False  # a binary loaded now knows no runtime and presents nothing
    devices.clear()
    why = _why_not_here()
    if why is None:
        try:
            data, meta = _verified_bytes()
            module = _import(data)
            _init(module)
            _bind_queries(module)
            _allocate_with(module, _torch_shim())
        except (AttributeError, ImportError, OSError, RuntimeError, TypeError, ValueError) as e:
            why = f"{type(e).__name__}: {e}" if not isinstance(e, ImportError) else str(e)
        else:
            _module = _loaded = module
            _file = meta
            STATE.replay = _Replay(module)
            if _restore not in STATE.on_reset:
                STATE.on_reset.append(_restore)
            STATE.refresh()  # hands it the settings
            SERVE = module.serve
    _reason = why
    _publish()
    return status()


def _restore():
    """As loaded (STATE.reset(): a fresh process), after an unload() or use(False)."""
    global _module, SERVE, _reason
    if _loaded is None:
        return
    _module, SERVE, _reason = _loaded, _loaded.serve, None
    STATE.replay = _Replay(_loaded)
    _publish()


def status() -> dict:
    """{"loaded": bool, "reason": why not (None when loaded), "file", "sha256", "allocation": how
    relu(x) allocates (None when not loaded), "devices": {index: why the entry stands down on that
    device, or None where it serves}} (devices: those the general path has seen since the settings
    last changed)."""
    loaded = _module is not None
    return {"loaded": loaded, "reason": None if loaded else _reason, "file": _file["file"] if loaded else None,
            "sha256": _file["sha256"] if loaded else None, "allocation": allocation if loaded else None,
            "devices": dict(devices)}


def not_loaded():
    """Why relu() runs without the compiled entry, or None when it has it."""
    return None if _module is not None else _reason


def _bind_hip(lib):
    """Hand the entry the HIP runtime's entry points (again whenever _hip binds another)."""
    global _hip_bound
    devices.clear()  # hip() drops what the entry knew of devices
    address = _hip.address
    _module.hip(address(lib.hipModuleLaunchKernel), address(getattr(lib, "hipDrvLaunchKernelEx", None)),
                address(lib.hipGetDevice), address(lib.hipSetDevice), address(lib.hipGetLastError))
    _hip_bound = lib


def _stand_down(index: int, why: str):
    """The entry does not serve device `index` (it stays unknown there: the general path serves
    it); status() says why, and the first time it warns."""
    devices[index] = why
    STATE.warn_once(("entry device", index, why), f"the compiled entry does not serve device {index} ({why}); "
                    "its calls take the Python path (same results, more host time)", fallback=False)


def learn(info, arch_reason: str):
    """The general path saw device info.index (a ROCm device, or the stand-in's): tell the entry
    whether it is a gfx950 and, where not, the counter of its fallback. First, on each device,
    the entry's answers to libtorch's questions must be torch's own for tensors on that device,
    and the stream it would launch on there torch's current stream (device_info asked torch):
    where either differs the entry stands down on that device."""
    if _module is None:
        return
    if devices.get(info.index) is not None:
        return  # stood down there until the settings change
    gfx950 = info.arch == "gfx950"
    if gfx950 and _hip.lib() is not _hip_bound:
        _bind_hip(_hip.lib())
    if info.index not in devices:
        try:  # presented CPU tensors are that device's memory; else the ROCm device itself ("cuda" to torch)
            _check_answers(_module, None if presented else torch.device("cuda", info.index))
        except Exception as e:  # noqa: BLE001 - whatever it is, the general path serves there
            return _stand_down(info.index, f"{type(e).__name__}: {e}")
    hit = STATE.counter(("fallback", arch_reason)).hit
    try:
        stream = _module.device(info.index, gfx950, hit, info.stream)
    except Exception as e:  # noqa: BLE001 - whatever it is, the general path serves on
        return unload(f"device({info.index}) raised {type(e).__name__}: {e}")
    if stream != info.stream:  # the entry did not learn it
        return _stand_down(info.index, f"the DLPack stream query gave {stream:#x}, torch's current stream is "
                           f"{info.stream:#x}")
    devices[info.index] = None


def _still_ready(entry, rung) -> bool:
    """Whether `entry`, made ready by a call that read the settings earlier, is what a call
    would run now (with STATE.lock held: refresh() changes the settings under it). Launching
    releases the GIL, so another thread may have changed them meanwhile."""
    s = STATE.settings
    if STATE.entries.get(entry.key) is not entry or s.disabled:
        return False  # made under settings since replaced (refresh() drops every entry)
    p = entry.plan
    if rung is None and p.rung != s.default_rung:
        return False
    vkey = (p.rung, p.dtype, p.vec, entry.device)
    return STATE.functions.get(vkey) is entry.function if not s.canary else (
        vkey in STATE.verdicts and STATE.verdicts[vkey] is None)


def add(entry, rung):
    """Replay a ready single-launch entry (_dispatch.Entry) of `rung` as asked (None: the default),
    unless the settings changed since it was made ready."""
    if rung is not None and (type(rung) is not str or rung not in RUNG_NAMES):
        return  # asked by another spelling: the general path keeps serving it
    p = entry.plan
    code, bits = DL_DTYPES[getattr(torch, p.dtype)]
    numel, x_align, y_align, device = entry.key[2:]
    with STATE.lock:
        if _module is None or devices.get(device, "not learned") is not None or not _still_ready(entry, rung):
            return  # (a device the entry stands down on, or has not learned, keeps the general path)
        try:
            _module.add(0 if rung is None else RUNG_NAMES.index(rung) + 1, code, bits, numel, x_align, y_align,
                        device, entry.function.value, entry.grid, entry.block, entry.hit, f"rung {p.rung}, {p.dtype}")
        except Exception as e:  # noqa: BLE001 - whatever it is, the general path serves on
            unload(f"add() raised {type(e).__name__}: {e}")


def replays(entry, rung) -> bool:
    """Whether the compiled entry holds `entry` (a _dispatch.Entry) of `rung` as asked."""
    if _module is None or (rung is not None and rung not in RUNG_NAMES):
        return False
    code, bits = DL_DTYPES[getattr(torch, entry.plan.dtype)]
    numel, x_align, y_align, device = entry.key[2:]
    return _module.has(0 if rung is None else RUNG_NAMES.index(rung) + 1, code, bits, numel, x_align, y_align,
                       device)


def unload(reason: str):
    """Stop serving through the compiled entry (the general path serves everything), warning once."""
    global SERVE, _module, _reason
    if _module is None:
        return
    # every entry and device dropped; the settings as the general path read them, so that a call
    # already holding serve is counted as the general path would count it (not as the kill switch)
    with STATE.lock:
        _module.clear(STATE.env, STATE.settings.disabled, 1)
    devices.clear()
    STATE.replay = None
    _module, SERVE, _reason = None, None, reason
    _publish()
    STATE.warn_once(("entry", reason), f"the compiled entry is not used ({reason}); every call takes the Python "
                    "path (same results, more host time)", fallback=False)


def present_cpu(on: bool, device_of=None, stream_of=None):
    """CPU tensors as device memory: device_of(pointer) -> device and stream_of(device) -> stream
    are C function addresses (None: device 0, torch's CPU stream); off: back to real devices."""
    global presented
    if _loaded is not None:
        _loaded.present_cpu(on, device_of, stream_of)
        presented = bool(on)
        devices.clear()


def _publish():
    from . import _relu

    _relu._compiled = SERVE


def use(on: bool):
    """Serve through the compiled entry (on, where it loaded) or not: for the tests that run one
    call both ways. Returns whether it serves now."""
    global SERVE
    SERVE = _module.serve if on and _module is not None else None
    _publish()
    return SERVE is not None
