"""Which path one call takes, and running it: the general path.

    (relu()'s repeated calls are replayed by the compiled entry, _compiled_entry.c: what run()
    decides for a single-launch kernel it hands there with _compiled_entry.add, what it learns of a
    device with _compiled_entry.learn; a call the entry cannot serve comes here.)
    torch_input(x, out)    an input only torch serves (sparse, nested, ...): counted, torch's answer
    serve(x, out, rung)    relu()'s call after validation: no ROCm device -> torch's kernel
                           (no_device), else run() (out None: torch.empty_like(x))
    run(x, out, rung, bump) acts on decide(): the one decision, which explain() renders
      decide()             fallback_reason (gfx950, served dtype, contiguous or dense x with out
                           of its strides, no neg bit), memory_reason (storage there, element-
                           aligned), empty, code objects, HIP runtime, plan (per size/alignment/device)
        |-- kernel         first use on a device: module loaded (sha256 checked), canary ->
        |                  settings re-read (changed: decide again) -> launch on the tensor's
        |                  device's current stream -> out's version bumped (bump) -> counted
        `-- fallback       torch.clamp_min(x, 0, out=out) (bump: torch's own), counted
    bump: the caller's out (relu(x, out=)) is bumped once, as torch's out= ops bump it; a new
    output stays at version 0 (torch.relu's); the torch.library op's out is bumped by torch.library.

Nothing here compiles, links or imports anything beyond the standard library,
torch and this package: the kernels are the shipped code objects (_objects.py).
All mutable dispatch state lives in _state.STATE; _launch keeps its own per-thread
argument buffers and launch configs, which decide nothing.
"""

import contextlib
from typing import NamedTuple, Optional

import torch

from . import _canary, _compiled_entry, _hip, _inputs, _launch, _objects
from ._state import ENV_CANARY, ENV_DISABLE, ENV_RUNG, STATE
from .flash_relu_rocm import plan
from .flash_relu_rocm.registry import DTYPES, ELEMENT_BYTES, RUNGS, get_rung

SUPPORTED_ARCH = "gfx950"
NOT_VERIFIED = "not verified before graph capture (call warmup())"
NOT_LOADED = "not loaded before graph capture (call warmup())"
_ARCH_REASON = "arch {} (kernels are built for " + SUPPORTED_ARCH + ")"
NO_MEMORY = "no memory at the data pointer (NULL)"
MISALIGNED = "data not aligned to its element size"


class DeviceInfo(NamedTuple):
    arch: str             # e.g. "gfx950"
    stream: int           # raw HIP stream handle of torch's current stream on that device
    current: bool = True  # its device is the current HIP device (else launches switch there and back)
    index: int = 0        # the device's index


# torch dtype -> dtype name, for the dtypes the kernels serve
_DTYPE_NAMES = {getattr(torch, name): name for name in DTYPES}
_HIP_BUILD = torch.version.hip


def _current_stream(index: int) -> int:
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # cheap path on ROCm builds
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def device_info(x: torch.Tensor) -> Optional[DeviceInfo]:
    """The ROCm device `x` lives on, or None. The only function the virtual
    device tests substitute (to present CPU tensors as gfx950 memory)."""
    if _HIP_BUILD is None or not x.is_cuda:  # a CUDA or CPU-only torch: never
        return None
    index = x.get_device()
    return DeviceInfo(_arch(index), _current_stream(index), index == torch.cuda.current_device(), index)


def _arch(index: int) -> str:
    """A ROCm device's arch (e.g. "gfx950"), asked of torch once per process."""
    arch = STATE.archs.get(index)
    if arch is None:
        arch = STATE.archs[index] = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
    return arch


def device_archs() -> dict:
    """{index: arch} of the ROCm devices torch sees (torch's device count and properties, kept as
    device_info keeps them; nothing launched); {} on a torch without ROCm. status() reads it; the
    virtual-device tests substitute it as they substitute device_info."""
    if _HIP_BUILD is None:
        return {}
    return {index: _arch(index) for index in range(torch.cuda.device_count())}


def dispatch_stats() -> dict:
    """Calls per path since start (or the last reset):
    {"flydsl/v5/bfloat16": n, "fallback/not a ROCm device": m, ...}."""
    return STATE.stats()


def reset_dispatch_stats():
    """Zero every count of dispatch_stats()."""
    STATE.reset_stats()


def fallback_reason(x: torch.Tensor, out: torch.Tensor, info: Optional[DeviceInfo]) -> Optional[str]:
    """Why the kernel path cannot serve this call, or None when it can."""
    if STATE.current().disabled:
        return f"disabled by {ENV_DISABLE}"
    if info is None:
        return "not a ROCm device"
    if info.arch != SUPPORTED_ARCH:
        return _ARCH_REASON.format(info.arch)
    dtype = _DTYPE_NAMES.get(x.dtype)
    if dtype is None:
        return f"dtype {str(x.dtype).removeprefix('torch.')}"
    if not (x.is_contiguous() and out.is_contiguous()):
        # relu is elementwise: a dense layout in any dimension order (channels_last,
        # a transpose) is one flat span, and out with exactly x's strides puts each
        # result at its input's offset. Mixed strides keep the fallback.
        if x.stride() != out.stride() or not dense(x):
            return "non-contiguous"
    if x.is_neg() or out.is_neg():  # (only complex dtypes, none served, carry the conj bit)
        # A lazy negation view (torch._neg_view, x.conj().imag): its memory holds
        # the other sign, so a raw-memory kernel would be wrong.
        return "neg/conj-bit view"
    return None


def memory_reason(x: torch.Tensor, out: Optional[torch.Tensor], xp: int, yp: int) -> Optional[str]:
    """What a launch at xp, yp (x's and out's data pointers as decide() read them; out None: a new
    output) cannot address, or None. Judged by the storages' addresses: a ZeroTensor's or functional
    wrapper's is NULL, and a view of one has its offset as its data pointer (zeros(16)[4:]: 16)."""
    size = x.element_size()
    xb, yb = xp - x.storage_offset() * size, yp if out is None else yp - out.storage_offset() * size
    if not (xb and yb):
        return NO_MEMORY
    if (xp | yp) % size:  # e.g. float32 at an odd byte address
        return MISALIGNED
    return None


def dense(t) -> bool:
    """Non-overlapping and dense in some dimension order (what torch.empty_like
    returns for such a tensor): its elements fill exactly numel slots from
    data_ptr() on."""
    expected = 1
    for size, stride in sorted(((sz, st) for sz, st in zip(t.shape, t.stride()) if sz != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


# ---- the decision ------------------------------------------------------------
FALLBACK, UNAVAILABLE, FIRST_USE, KERNEL = "fallback", "unavailable", "first use", "kernel"
_ALIGNED = 1 << 20  # a new output's address for explain(): torch's allocators align far beyond 16 bytes
_new = tuple.__new__


class Decision(NamedTuple):
    """decide()'s answer. path: FALLBACK (torch's kernel, for `reason`), UNAVAILABLE (the same; no
    code objects or HIP runtime: warned once), FIRST_USE (the kernel once _ready() makes it ready
    on the device, else _ready()'s reason) or KERNEL. entry: the launch entry (its plan: rung,
    dtype, vector width, launches) for xp and yp, x's and out's pointers; settings: those read."""
    path: str
    reason: Optional[str]
    settings: object
    entry: Optional["Entry"] = None
    xp: int = 0
    yp: int = 0


def decide(x, out, rung, info: Optional[DeviceInfo], look: bool = False, there: bool = False) -> Decision:
    """What relu(x, out, rung=rung) does on info's device (None: no ROCm device), in this order:
    fallback_reason (settings re-read first), an empty tensor, memory_reason (each pointer read
    once), the code objects, the HIP runtime, the plan and whether its kernel is ready. run() acts
    on it; explain() renders it. look: explain()'s answer, acting on nothing (out None: a new output,
    planned aligned); there: explain(arch=)'s, info a device of another machine (its HIP runtime,
    modules and canaries not asked: a repeated call once the kernel is ready there)."""
    if out is not None and out is not x and info is not None and not there:
        at = device_info(out)  # the same device as torch.device (relu() checked); asked of device memory too
        if at is None or at.index != info.index:
            raise ValueError(f"relu(): out is on device {None if at is None else at.index} but x is on "
                             f"device {info.index}")
    # (fallback_reason re-reads the settings first: a change clears the entries)
    n = x.numel()
    reason = fallback_reason(x, x if out is None else out, info) or (None if n else "empty tensor")
    settings = STATE.settings
    if reason is None:  # each pointer read once, past the rules that need none
        if look:  # read-only pointers: a copy-on-write tensor stays one
            xp, yp = _inputs.read_ptr(x), _ALIGNED if out is None else _inputs.read_ptr(out)
        else:  # out's pointer first (writing materializes a copy-on-write out, and x with it where they
            # share one), then x's read-only one: relu reads a copy-on-write x in place, as torch.relu does
            yp = out.data_ptr()
            xp = _inputs.read_ptr(x)
        reason = memory_reason(x, out, xp, yp)
    if reason is not None:
        return Decision(FALLBACK, reason, settings)
    reason = _objects.unavailable() or (None if there else _hip.unavailable())
    if reason is not None:
        return Decision(UNAVAILABLE, reason, settings)
    entry = _entry(rung, rung or settings.default_rung, x.dtype, n, xp, yp, info.index, not look)
    if entry.function is not None and not there:  # (there: this machine's entries are not asked)
        return _new(Decision, (KERNEL, None, settings, entry, xp, yp))  # (tuple's own: no Python frame)
    if there:
        reason, function = _unusable(entry.vkey[:3]), True
    elif look:
        function, reason = _ready(entry.vkey, info, look=True)
    else:
        function = None
    if reason is not None:
        return Decision(FALLBACK, reason, settings, entry, xp, yp)
    return Decision(FIRST_USE if function is None else KERNEL, None, settings, entry, xp, yp)


# ---- launch entries --------------------------------------------------------
class Entry:
    """Everything one (rung, dtype, numel, alignment, device) call needs,
    computed once: the plan, the kernel's block and function, the path's counter.
    `function` is set only once the kernel is ready on its device (module
    loaded, canary passed or off): only such entries go to the compiled entry."""

    __slots__ = ("plan", "function", "block", "esize", "grid", "single", "hit", "device", "key", "vkey")

    def __init__(self, p: plan.Plan, device: int, key):
        self.plan, self.function, self.block = p, None, p.block
        self.esize = ELEMENT_BYTES[p.dtype]
        self.single = len(p.launches) == 1
        self.grid = p.launches[0].grid if self.single else None
        self.hit = STATE.counter(("flydsl", p.rung, p.dtype)).hit
        self.device, self.key, self.vkey = device, key, (p.rung, p.dtype, p.vec, device)  # vkey: the kernel there


def _entry(rung, rung_name: str, torch_dtype, numel: int, x_addr: int, y_addr: int, device: int, keep=True) -> Entry:
    # keyed by the rung as asked (None: the default), the size, each pointer's alignment within 16
    # bytes and the device; no layout: every dense layout with out of x's strides (fallback_reason)
    # is one flat span of numel elements from data_ptr() to an elementwise kernel
    key = (rung, torch_dtype, numel, x_addr & 15, y_addr & 15, device)
    entry = STATE.entries.get(key)
    if entry is None:
        r = get_rung(rung_name)
        entry = Entry(plan.plan(r, _DTYPE_NAMES[torch_dtype], numel, x_addr, y_addr), device, key)
        if keep:  # (explain() leaves the table as it is)
            STATE.add_entry(key, entry)
    return entry


# ---- first use on a device: module load and canary --------------------------
def _capturing(stream: int) -> bool:
    return _hip.capture_status(stream) != _hip.CAPTURE_NONE


def _canary_failed(vkey) -> str:
    rung, dtype, vec, device = vkey
    return f"canary failed {rung}/{dtype}/x{vec} on device {device}"


def _on_device(device: int, current: bool, fn, *args):
    """fn(*args) with `device` current (modules load and kernels launch on the
    current device); the caller's current device is restored."""
    if current:
        return fn(*args)
    with _hip.on_device(device):
        return fn(*args)


def _run_canary(function, vkey, stream, current: bool):
    """Run and judge one canary; None if the kernel was right, else the
    evidence. A canary launch that fails (a HIP error) fails the canary too."""
    rung_name, dtype, vec, device = vkey
    r = get_rung(rung_name)
    c = _canary.Canary(r, dtype, vec)
    with _canary.device_memory(c.total, device) as buffer:
        c.load(buffer)
        x, y = c.views()
        xp, yp = x.data_ptr(), y.data_ptr()
        # the shipped planner's launches for this kernel, checked for the rules
        # every launch relies on; then the kernel itself on the device
        why = _canary.check_plans(r, dtype, vec, c.n, xp, yp)
        if why:
            return why
        p = plan.plan(r, dtype, c.n, xp, yp)
        error = _on_device(device, current, _launch.launch_all, function, r.block, ELEMENT_BYTES[dtype], xp, yp,
                           p.launches, stream)
        if error:
            return f"its launch failed with HIP error {error}"
        return c.judge()


def _ready(vkey, info: DeviceInfo, look=False):
    """(function, None) when kernel vkey = (rung, dtype, vec, device) may launch now, else (None,
    the fallback reason). On first use on a device: loads its module and, unless disabled, runs
    its canary, once whatever the threads, never inside a graph capture. A failed canary is final:
    that kernel never launches on that device again, whatever RELU_FLYDSL_CANARY says later (its
    warning promises so). look: the same questions, acting on none (explain()): (None, None)
    where the first use is still to come."""
    s = STATE
    canary = s.settings.canary
    with _NO_LOCK if look else s.key_lock(("ready",) + vkey):
        verdict = s.verdicts.get(vkey, _UNJUDGED)
        if verdict is not None and verdict is not _UNJUDGED:
            return None, _canary_failed(vkey)
        function = s.functions.get(vkey)
        if function is not None and verdict is None:
            return function, None
        if function is not None and not canary:
            return function, None
        if _capturing(info.stream):
            return None, NOT_VERIFIED if canary else NOT_LOADED  # no module load, no canary inside a capture
        if look:  # what the load would meet: an object known or found unusable
            return None, None if function is not None else _unusable(vkey[:3])
        rung, dtype, vec, device = vkey
        try:
            function = _on_device(device, info.current, _objects.function, rung, dtype, vec, device)
        except _objects.ObjectError as e:
            return None, str(e)
        if verdict is None or not canary:
            return function, None
        try:
            evidence = _run_canary(function, vkey, info.stream, info.current)
        except Exception as e:  # noqa: BLE001 - a canary that cannot run proves nothing
            evidence = f"the canary could not run ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]})"
        s.canary_runs[vkey] = s.canary_runs.get(vkey, 0) + 1
        s.verdicts[vkey] = evidence
        if evidence:
            s.warn_once(("canary", vkey), f"{_canary_failed(vkey)}: {evidence}; that kernel is not used on "
                        f"device {device} for the life of the process")
            return None, _canary_failed(vkey)
    return function, None


_UNJUDGED = object()  # no canary verdict yet (a verdict of None means: passed)
_NO_LOCK = contextlib.nullcontext()


def _unusable(kernel) -> Optional[str]:
    """Why the loader refuses kernel (rung, dtype, vec) on any device, or None, found without
    loading: its remembered verdict, then the object's check on disk (_objects.function's order)."""
    why = STATE.broken.get(kernel)
    if why is None:
        try:
            _objects.read_verified(*kernel)
        except _objects.ObjectError as e:
            why = str(e)
    return why


# ---- launching ---------------------------------------------------------------
def _launch_failed(error, p: plan.Plan, numel):
    raise RuntimeError(f"relu_flydsl: kernel launch failed with HIP error {error} (rung {p.rung}, {p.dtype}, "
                       f"numel {numel}); the output is not valid")


_CHANGED = object()  # the settings changed between the call's decision and its launch


def _launch_now(entry: Entry, x_addr: int, y_addr: int, stream: int, settings, written):
    """The launches of `entry`, with its device current: the HIP error (0: launched), or _CHANGED,
    launching nothing, where the settings the call decided under are no longer current (re-read
    here, last: a module load, a canary, a device switch since can run Python that changes them).
    `written` (the caller's out) gets its version bumped once for the writes, as torch's out= ops
    do, before the caller's device is restored (a failed restore raises with out written)."""
    if STATE.current() is not settings:
        return _CHANGED
    error = _launch.launch_all(entry.function, entry.block, entry.esize, x_addr, y_addr, entry.plan.launches, stream)
    if written is not None:
        _bump((written,))  # also after a failed launch: a split may have written part of out
    return error


def _launch_entry(entry: Entry, x_addr: int, y_addr: int, info: DeviceInfo, settings, written) -> bool:
    """Launch `entry` on info's device and stream (see _launch_now); False when the settings
    changed first (nothing launched), else True, or RuntimeError for a failed launch."""
    p = entry.plan
    error = _on_device(info.index, info.current, _launch_now, entry, x_addr, y_addr, info.stream, settings, written)
    if error is _CHANGED:
        return False
    if error:
        _launch_failed(error, p, sum(c.numel for c in p.launches))
    entry.hit()
    return True


def _version_bumper():
    """bump((tensor,)): torch's increment_version, as the one C call it makes where that call
    takes a tuple of tensors and bumps each once (checked on a probe), else the public function.
    An inference tensor has no counter: nothing is bumped."""
    c_bump = getattr(torch._C, "_increment_version", None)
    probe = torch.empty(2)
    try:
        c_bump((probe,))
    except Exception:  # noqa: BLE001 - another signature: the public function
        c_bump = None
    if c_bump is not None and probe._version == 1:
        return c_bump
    public = torch.autograd.graph.increment_version
    return lambda tensors: public(tensors[0])


_bump = _version_bumper()


def _fallback(x: torch.Tensor, out: torch.Tensor, bump: bool):
    """torch.relu's own kernel into out (torch.relu is clamp_min(x, 0): same kernel, same bits).
    bump: out's version counter bumped by it, as torch.clamp_min(out=) bumps it; else untouched
    (a new output, as torch.relu's; or the op's out, which torch.library's mutation already bumped)."""
    with contextlib.nullcontext() if bump else _below_inplace_or_view():  # not bump: no autograd (under
        torch.clamp_min(x, 0, out=out)  # no_grad, or inside the op: below it)


_below_inplace_or_view = torch._C._AutoDispatchBelowADInplaceOrView


def no_device(x: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    """relu(x, out) validated, device_info(x) None: what run() does there (torch.relu's kernel,
    fallback_reason counted), without allocating first for out None."""
    STATE.record(("fallback", fallback_reason(x, out, None)))
    return torch.relu(x) if out is None else torch.clamp_min(x, 0, out=out)


def torch_input(x, out):
    """relu(x, out) for an input only torch serves (_inputs.needs_torch said so):
    counted with its reason, then torch's own result or error."""
    STATE.record(("fallback", _inputs.why_torch(x, out) or "torch input"))
    return _inputs.torch_relu(x, out)


def serve(x: torch.Tensor, out: Optional[torch.Tensor], rung: Optional[str]) -> torch.Tensor:
    """relu(x, out) validated, eager, needing no autograd: the path choice
    the compiled entry did not make. No ROCm device -> torch's kernel (nothing
    allocated first); else run() (out None: into torch.empty_like(x))."""
    why = _compiled_entry.not_loaded()
    if why is not None and not why.startswith("disabled by") and _objects.unavailable() is None:
        STATE.warn_once(("entry", why), f"the compiled entry is not used ({why}); every call takes the Python "
                        "path (same results, more host time)", fallback=False)
    info = device_info(x)
    if info is None:
        return no_device(x, out)
    if out is None:
        return run(x, torch.empty_like(x), rung, info)
    return run(x, out, rung, info, bump=True)


_NO_INFO = object()  # "device_info not asked yet" (None means: not a ROCm device)


def run(x: torch.Tensor, out: torch.Tensor, rung: Optional[str], info=_NO_INFO, bump: bool = False) -> torch.Tensor:
    """relu(x, out) validated, on the kernel or torch's fallback, as decide() says. bump: out is
    the caller's, and its version counter goes up once for the write, as torch's out= and
    in-place ops do (on the fallback, torch's own bump); else it is left as it was (a new
    output; the op's out, which torch.library's mutation bumps)."""
    if info is _NO_INFO:
        info = device_info(x)
    for _ in range(_DECISIONS):
        path, reason, settings, entry, xp, yp = decide(x, out, rung, info)
        if info is not None and STATE.replay is not None and (x.is_cuda or _compiled_entry.presented) and (
                info.arch != SUPPORTED_ARCH or _hip.unavailable() is None):  # (a gfx950: the HIP runtime bound)
            _compiled_entry.learn(info, _ARCH_REASON.format(info.arch))  # what device_info found, for the entry
        if path != KERNEL:
            if path == FIRST_USE:  # module load and canary on this device, or why not
                entry.function, reason = _ready(entry.vkey, info)
            elif path == UNAVAILABLE:
                STATE.warn_once(("unavailable", reason), reason)
            if reason is not None:
                break
        if not _launch_entry(entry, xp, yp, info, settings, out if bump else None):
            continue  # the settings changed before the launch: decide again under the new ones
        if entry.single and STATE.replay is not None:  # replayed by the compiled entry from now on
            _compiled_entry.add(entry, rung)
        return out
    else:
        reason = "the settings kept changing during the call"
    _fallback(x, out, bump)
    STATE.record(("fallback", reason))
    return out


_DECISIONS = 4  # decisions per call when the settings keep changing under it, then torch's fallback


# ---- warmup ------------------------------------------------------------------
def _warmup_devices(devices):
    """The devices warmup() makes kernels ready on: as given, else the current
    HIP device; () where no HIP runtime is loaded (objects checked only)."""
    if devices is not None:
        return devices
    try:
        return () if _hip.unavailable() is not None else (_hip.get_device(),)
    except (OSError, RuntimeError, AttributeError):
        return ()


def _device_count() -> int:
    """GPUs the HIP runtime in this process has (0 without one)."""
    try:
        return 0 if _hip.unavailable() is not None else _hip.device_count()
    except RuntimeError:
        return 0


class WarmupResult:
    """What warmup() made ready, and what it could not, on each device.

    ready      [(rung, dtype, vec, device), ...]: a kernel counts as ready on a device only
               once its module is loaded there and its first-use canary passed there (or
               the canary is switched off: `canary` is then False and nothing was checked)
    not_ready  {(rung, dtype, vec, device): reason}: device None where the reason holds for
               every device (a corrupt or missing code object; no device to warm up at all)
    devices    {device: arch} of the devices warmed up (an arch other than gfx950 readies
               nothing: its kernels are in not_ready)
    canary     whether the canaries ran (RELU_FLYDSL_CANARY unset or on)
    disabled   whether the kill switch (RELU_FLYDSL_DISABLE) is on: ready kernels are then
               not used until it is off
    ok         ready is not empty and not_ready is
    str(result) says the same in a few lines.
    """

    __slots__ = ("ready", "not_ready", "devices", "canary", "disabled")

    def __init__(self, ready, not_ready, devices, canary, disabled):
        self.ready, self.not_ready, self.devices = ready, not_ready, devices
        self.canary, self.disabled = canary, disabled

    @property
    def ok(self) -> bool:
        return bool(self.ready) and not self.not_ready

    def __repr__(self):
        return (f"WarmupResult(ready={self.ready!r}, not_ready={self.not_ready!r}, devices={self.devices!r}, "
                f"canary={self.canary!r}, disabled={self.disabled!r})")

    def __eq__(self, other):
        return isinstance(other, WarmupResult) and repr(self) == repr(other)

    __hash__ = None

    def __str__(self):
        lines = []
        checked = "module loaded, canary passed" if self.canary else f"module loaded, canary off ({ENV_CANARY})"
        for rung, dtype, vec, device in self.ready:
            lines.append(f"ready      {rung}/{dtype}/x{vec} on device {device} ({checked})")
        for (rung, dtype, vec, device), why in self.not_ready.items():
            where = "" if device is None else f" on device {device}"
            lines.append(f"not ready  {rung}/{dtype}/x{vec}{where}: {why}")
        if self.disabled:
            lines.append(f"every call takes the torch fallback while {ENV_DISABLE} is on")
        return "\n".join(lines) or "nothing asked"


def warmup(dtypes=DTYPES, rungs=None, vecs=None, devices=None) -> WarmupResult:
    """Make kernels ready ahead of the first call (see docs/serving.md's cold
    start): each code object checked against its sha256, its module loaded on
    each device and, unless disabled, its first-use canary run there, so no
    module load and no canary happens later (e.g. inside a HIP graph capture).

    dtypes: a name ("bfloat16") or torch dtype, or a list of them; rungs:
    default the serving rung; vecs=None takes each rung's widest vector, the
    one dense, aligned tensors use; devices: an index, torch.device("cuda", i)
    or a list of them (default the current HIP device; none without a HIP
    runtime).

    Returns a WarmupResult: `.ready` lists (rung, dtype, vec, device) for each
    kernel whose module loaded and whose canary passed on that device (with
    RELU_FLYDSL_CANARY off: loaded, unchecked, and `.canary` is False);
    `.not_ready` maps every other (rung, dtype, vec, device) to why: no device
    at all (device None), a device that is not a gfx950, a corrupt or missing
    code object (device None), a failed canary, a module that did not load, a
    graph capture in progress. Each of those also warns (once per process and
    reason); `.ok` is True only when everything asked is ready.

    Raises TypeError/ValueError for a bad argument (_inputs.warmup_args names
    what is accepted), RuntimeError when there are no usable code objects at all."""
    names, rungs, vecs, devices = _inputs.warmup_args(
        dtypes, rungs, vecs, devices, _device_count() if devices is not None else 0, _DTYPE_NAMES, RUNGS)
    settings = STATE.current()
    rung_objects = [RUNGS[r] for r in (rungs or (settings.default_rung,))]
    missing = _objects.unavailable()
    if missing:
        raise RuntimeError(f"relu_flydsl: warmup(): {missing}")
    kernels, not_ready = [], {}
    for r in rung_objects:
        for dtype in names:
            for vec in vecs or (r.max_vec(dtype),):
                try:
                    _objects.entry(r.name, dtype, vec)
                    why = STATE.broken.get((r.name, dtype, vec))
                    if why is None:
                        _objects.read_verified(r.name, dtype, vec)
                    else:
                        raise _objects.ObjectError(why)
                except _objects.ObjectError as e:
                    STATE.broken[(r.name, dtype, vec)] = str(e)
                    STATE.warn_once(("object", (r.name, dtype, vec)), str(e))
                    not_ready[(r.name, dtype, vec, None)] = str(e)
                    continue
                kernels.append((r.name, dtype, vec))
    targets = _warmup_devices(devices)
    if not targets and kernels:
        why = f"no device to warm up ({_hip.unavailable() or 'the HIP runtime reports no current device'})"
        for rung_name, dtype, vec in kernels:
            not_ready[(rung_name, dtype, vec, None)] = why
        STATE.warn_once(("warmup", why), f"warmup(): nothing is ready: {why}", fallback=False)
    ready, archs = [], {}
    for device in targets:
        info, why = _device_info(device, kernels)
        archs[device] = info and info.arch
        if why is not None:
            STATE.warn_once(("warmup", device, why), f"warmup(): nothing is ready on device {device}: {why}")
        for rung_name, dtype, vec in kernels:
            STATE.current()  # as a first call reads the settings; a failed canary warns in _ready
            reason = why or _ready((rung_name, dtype, vec, device), info)[1]
            if reason is None:
                ready.append((rung_name, dtype, vec, device))
            else:
                not_ready[(rung_name, dtype, vec, device)] = reason
                if why is None and not _warned_there(reason, (rung_name, dtype, vec)):
                    STATE.warn_once(("warmup", rung_name, dtype, vec, device, reason),
                                    f"warmup(): {rung_name}/{dtype}/x{vec} is not ready on device {device}: {reason}")
    return WarmupResult(ready, not_ready, archs, STATE.settings.canary, STATE.settings.disabled)


def _warned_there(reason: str, kernel) -> bool:
    """The reason was warned where it arose (a failed canary with its evidence, an unusable object)."""
    return reason.startswith("canary failed ") or STATE.broken.get(kernel) == reason


def _device_info(device: int, kernels):
    """(device_info for `device` or None, None when kernels can be made ready there, else why not),
    asked of a canary-sized buffer there (what the virtual device answers for its own memory too)."""
    why = _hip.unavailable()
    if why is not None or not kernels:
        return None, why
    c = _canary.Canary(get_rung(kernels[0][0]), *kernels[0][1:])
    try:
        with _canary.device_memory(c.total, device) as buffer:
            c.load(buffer)
            info = device_info(c.views()[0])
    except Exception as e:  # noqa: BLE001 - e.g. a torch without ROCm: stated, not raised
        return None, f"no memory on device {device} ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]})"
    if info is None:
        return None, "not a ROCm device"
    return info, _ARCH_REASON.format(info.arch) if info.arch != SUPPORTED_ARCH else None


__all__ = ["DeviceInfo", "ENV_CANARY", "ENV_DISABLE", "ENV_RUNG", "dispatch_stats", "reset_dispatch_stats", "run",
           "serve", "warmup"]
