"""The health check and the path explainer: what is serving, and what one call would do.

    status()                   the package's state as a documented, JSON-serialisable dict
    problems(st)               the devices' part of what the health check exits 1 for
    explain(x, out, rung=, arch=)  which path relu(x, out, rung=rung) would take, and why (arch=:
                               on a device of that arch, from any machine)

Both only read: no kernel launch, no module load, no canary, no allocation of an output.
"""

import os
import platform
import re
import sys
from typing import Optional

import torch

from . import _compiled_entry, _dispatch, _hip, _inputs, _objects, _relu
from ._claims import NO_ENTRY_COST
from ._state import DISABLED, ENV_CANARY, ENV_DISABLE, ENV_ENTRY, ENV_RUNG, OFF, SETTINGS, STATE
from ._state import Settings, env_raw
from ._version import __version__
from .flash_relu_rocm.registry import RUNGS

SUPPORTED_ARCH = _dispatch.SUPPORTED_ARCH
_UNJUDGED = _dispatch._UNJUDGED  # no canary verdict yet (None means: passed)


# ---- status() --------------------------------------------------------------------------------
def status() -> dict:
    """The health check: is the kernel path on, and if not, why. A JSON-serialisable dict:

    {"version": int,                  this package's release
     "torch": str, "python": str,     the running torch and Python ("3.11.7 cpython")
     "hip_runtime": str | None,       the HIP library the kernels launch through (libamdhip64,
                                      as mapped into this process), None when none is loaded
     "hip_reason": str | None,        why there is none
     "code_objects": {"verified": bool,   every kernel's code object matches its sha256 in the
                                          manifest now, and the loader found none unusable
                                          (its verdicts are final for the process)
                      "reason": str | None, why not (the first problem)
                      "count": int,       kernels in the manifest
                      "broken": {"v5/bfloat16/x8": reason, ...}},  every unusable one
     "entry": {"loaded": bool,        the compiled entry (low host time per call) is loaded
               "reason": str | None,  why not
               "in_use": bool,        relu() calls it (loaded, and not switched off)
               "serving_devices": int,  devices on which it replays the kernels now (a device
                                      is learned at the first relu() call there: 0 in a
                                      process that has not called relu() on a gfx950)
               "serving": bool,       serving_devices > 0
               "cost": None | {"out": [lo, hi], "new": [lo, hi], "said": str},  where it is
                                      not in use: the Python path's host time per call as a
                                      multiple of torch's own (relu(x, out=y) against
                                      torch.clamp_min(out=), relu(x) against torch.relu)
               "file": str | None, "sha256": str | None,
               "allocation": str,     how relu(x) allocates its output
               "devices": {"0": None | str, ...}},  per device: None where the entry replays
                                      the kernels now, else why not
     "devices": [{"index": int, "arch": str,
                  "kernel_path": bool,     relu() runs the kernels on this device
                  "reason": str | None,    why not (kill switch, arch, no code objects, no HIP
                                           runtime, none of the serving rung's objects usable)
                  "canary": {"v5/bfloat16/x8": "passed" | "failed: <evidence>" | "not run"
                                               | "not run (loaded with the canary off)"
                                               | "not run (object unusable: ...)", ...},
                               the serving rung's kernels for dense aligned tensors (what
                               warmup() readies by default) and every kernel used there
                  "entry": None | str},    the compiled entry there, as in "entry"["devices"]
                 ...],             the ROCm devices torch sees (none on a CPU or CUDA torch),
                                   and any other device the kernels ran on
     "settings": [{"name": str, "value": str | None (raw, as set now), "in_force": the value
                   in force (a bool for a switch, the rung, "op"/"torch"), "read": when it is
                   read, "values": what it accepts, "meaning": str,
                   "note": str | None (e.g. an ignored value)}, ...]}   (_state.SETTINGS)

    Safe to call anywhere, any number of times: it launches nothing, loads no module and
    runs no canary (warmup() does that). On a ROCm torch it asks torch for each device's
    properties, which initialises torch's HIP state as a first relu() on a device would.
    """
    settings = Settings(env_raw())  # what the next call will use; the dispatch state is not touched
    hip_reason = _hip.unavailable()
    objects = _code_objects()
    raw = _compiled_entry.status()  # keys may grow: read with .get()
    learned = dict(raw.get("devices") or {})
    devices = []
    try:
        archs = dict(_dispatch.device_archs())
    except Exception as e:  # noqa: BLE001 - a health check reports, it does not fail
        archs, device_error = {}, f"{type(e).__name__}: {e}"
    else:
        device_error = None
    for vkey in list(STATE.verdicts) + list(STATE.functions):
        archs.setdefault(vkey[3], STATE.archs.get(vkey[3], SUPPORTED_ARCH))  # a kernel ran there: a gfx950
    for index in sorted(archs):
        arch = archs[index]
        reason = _device_reason(arch, settings, objects, hip_reason)
        devices.append({"index": index, "arch": arch, "kernel_path": reason is None, "reason": reason,
                        "canary": _canaries(index, settings, objects["broken"]),
                        "entry": _entry_there(index, reason, raw, learned)})
    entry = _entry(raw, {str(d["index"]): d["entry"] for d in devices})
    st = {"version": int(__version__), "torch": torch.__version__,
          "python": f"{platform.python_version()} {sys.implementation.name}",
          "hip_runtime": _hip.runtime_path(), "hip_reason": hip_reason,
          "code_objects": objects, "entry": entry, "devices": devices, "settings": _settings(settings)}
    if device_error is not None:
        st["devices_error"] = device_error
    return st


def _serving_kernels(settings) -> list:
    """The kernels relu() runs on dense, aligned tensors: the serving rung's widest, per dtype."""
    rung = RUNGS[settings.default_rung]
    return sorted((rung.name, dtype, rung.max_vec(dtype)) for dtype in _dispatch.DTYPES)


def _device_reason(arch, settings, objects, hip_reason) -> Optional[str]:
    """Why relu() does not run the kernels on a device of `arch`, or None (in the general
    path's order: fallback_reason, the manifest, the HIP runtime, then each kernel's object)."""
    if settings.disabled:
        return DISABLED[1]
    if arch != SUPPORTED_ARCH:
        return f"arch {arch} (kernels are built for {SUPPORTED_ARCH})"
    if objects["count"] == 0:
        return objects["reason"]
    if hip_reason is not None:
        return hip_reason
    kernels = [_objects.key(*k) for k in _serving_kernels(settings)]
    if all(k in objects["broken"] for k in kernels):  # every call of the serving rung falls back
        return f"no usable code object for rung {settings.default_rung}: {kernels[0]}: {objects['broken'][kernels[0]]}"
    return None


def _code_objects() -> dict:
    try:
        kernels = _objects.manifest()["kernels"]
    except _objects.ObjectError as e:
        return {"verified": False, "reason": str(e), "count": 0, "broken": {}}
    # the loader's verdicts first: final for the process, whatever the files on disk say now
    broken = {_objects.key(*k): why for k, why in STATE.broken.items()}
    for name, meta in sorted(kernels.items()):
        if name in broken:
            continue
        try:  # the loader's own check, as a first call would make it
            _objects.read_verified(meta.get("rung"), meta.get("dtype"), meta.get("vec"))
        except _objects.ObjectError as e:
            broken[name] = str(e)
    first = next(iter(sorted(broken.items())), None)
    return {"verified": not broken, "reason": None if first is None else f"{first[0]}: {first[1]}",
            "count": len(kernels), "broken": dict(sorted(broken.items()))}


def no_entry_cost() -> dict:
    """The Python path's host time per call as a multiple of torch's own call (_claims.NO_ENTRY_COST)."""
    out, new = NO_ENTRY_COST["out"], NO_ENTRY_COST["new"]
    said = (f"without the compiled entry every call takes the Python path: relu(x, out=y) costs {out[0]:g}-"
            f"{out[1]:g}x the host time of torch.clamp_min(x, 0, out=y), relu(x) {new[0]:g}-{new[1]:g}x that of "
            "torch.relu(x) (same results)")
    return {"out": list(out), "new": list(new), "said": said}


def _entry_there(index: int, kernel_reason, raw: dict, learned: dict) -> Optional[str]:
    """Why the compiled entry does not replay the kernels on device `index`, or None where it does.
    Its own record of the device counts only while relu() calls it: an entry unloaded or switched
    off serves no device, whatever it remembers."""
    if _compiled_entry.SERVE is None:  # unloaded or switched off: it serves nothing, whatever it remembers
        return "switched off: relu() does not call it" if raw.get("loaded") else f"not loaded ({raw.get('reason')})"
    if kernel_reason is not None:
        return f"the kernel path is off there ({kernel_reason})"
    if index not in learned:
        return "not learned yet: the first relu() call on the device teaches it"
    if learned[index] is not None:
        return f"stood down: {learned[index]}"
    return None


def _entry(raw: dict, there: dict) -> dict:
    loaded = bool(raw.get("loaded"))
    in_use = loaded and _compiled_entry.SERVE is not None
    allocation = raw.get("allocation") if loaded else None
    serving = sum(1 for why in there.values() if why is None)
    return {"loaded": loaded, "reason": raw.get("reason"), "in_use": in_use, "serving_devices": serving,
            "serving": serving > 0, "cost": None if in_use else no_entry_cost(),
            "file": raw.get("file"), "sha256": raw.get("sha256"),
            "allocation": allocation or "torch.empty_like(x) (the Python path)", "devices": there}


def _canaries(device: int, settings, broken: dict) -> dict:
    """Each kernel's canary verdict on `device`: the serving rung's widest kernels, then any other used there."""
    kernels = set(_serving_kernels(settings))
    kernels |= {k[:3] for k in list(STATE.verdicts) + list(STATE.functions) if k[3] == device}
    out = {}
    for k in sorted(kernels):
        vkey = k + (device,)
        verdict = STATE.verdicts.get(vkey, _UNJUDGED)
        if verdict is None:
            said = "passed"
        elif verdict is not _UNJUDGED:
            said = f"failed: {verdict}"
        elif vkey in STATE.functions:
            said = "not run (loaded with the canary off)"
        elif _objects.key(*k) in broken:
            said = f"not run (object unusable: {broken[_objects.key(*k)]})"
        else:
            said = "not run"
        out[_objects.key(*k)] = said
    return out


def _settings(settings) -> list:
    rows = []
    for name, values, read, meaning in SETTINGS:
        value = os.environ.get(name)
        note = None
        if name == ENV_DISABLE:
            in_force = settings.disabled
        elif name == ENV_RUNG:
            in_force = settings.default_rung
            if settings.bad_rung is not None:
                note = f"unknown rung {_inputs.short(settings.bad_rung)} ignored"
        elif name == ENV_CANARY:
            in_force = settings.canary
        elif name == ENV_ENTRY:
            in_force = not (_compiled_entry.status().get("reason") or "").startswith(f"disabled by {ENV_ENTRY}")
            if in_force == ((value or "").strip().lower() in OFF):
                note = "changed since import: applies in a new process"
        else:  # ENV_COMPILE: as the next traced graph reads it
            word = (value or "").strip().lower()
            in_force = "op" if word == "op" else "torch"
            if word not in ("", "torch", "op"):
                note = f"unknown value {_inputs.short(value)}: torch (warns when a graph is traced)"
        rows.append({"name": name, "value": value, "in_force": in_force, "read": read, "values": values,
                     "meaning": meaning, "note": note})
    return rows


def problems(st: dict) -> list:
    """The devices' part of the health check's failures (__main__.problems adds the files'): a gfx950
    without the kernel path, a kernel whose canary failed or object is unusable there. [] if none."""
    found = []
    for d in st["devices"]:
        if d["arch"] != SUPPORTED_ARCH:
            continue
        if not d["kernel_path"]:
            found.append(f"device {d['index']} ({d['arch']}): the kernel path is off: {d['reason']}")
        for kernel, verdict in d["canary"].items():
            if verdict.startswith(("failed", "not run (object unusable")):
                found.append(f"device {d['index']}: {kernel} {verdict}")
    return found


# ---- explain() -------------------------------------------------------------------------------
_ARCH_NAME = re.compile(r"gfx[0-9]{2,4}[0-9a-f]?")  # an AMD GPU arch as gcnArchName names it (gfx90a, gfx950, gfx1100)


def _arch_asked(arch) -> Optional[str]:
    """explain()'s arch=, checked: None, or an AMD GPU arch name (its feature suffix dropped)."""
    if arch is None:
        return None
    if not isinstance(arch, str):
        raise TypeError(f"explain(): arch must be a str such as {SUPPORTED_ARCH!r} or None, got {type(arch).__name__}")
    name = arch.split(":")[0]
    if not _ARCH_NAME.fullmatch(name):
        raise ValueError(f"explain(): unknown arch {_inputs.short(arch)}: give an AMD GPU arch as torch names it "
                         f"(torch.cuda.get_device_properties(i).gcnArchName), such as {SUPPORTED_ARCH!r}")
    return name


def explain(x, out=None, *, rung=None, arch=None) -> str:
    """Which path relu(x, out, rung=rung) would take now, and why, without running it: no
    launch, no allocation of out, no module load, no canary. Lines of "field: text":

        path: one of
          raises <Error>               relu()'s validation refuses the call (the message follows)
          torch's relu                 an input only torch serves (sparse, nested, subclass, ...)
          torch fallback               torch's kernel (torch.clamp_min(x, 0)), with the reason
          kernel, compiled entry       the compiled entry replays a ready kernel entry
          kernel, general path         the kernel, launched from Python (a first call of this
                                       size, alignment and device, or the entry off)
          kernel after first use       the kernel, once its module is loaded (sha256 checked)
                                       and its canary passes on this device (if it fails:
                                       the torch fallback, "canary failed ...")
        why: the reason
        kernel: rung, dtype, vector width, launches, device, stream (kernel paths)
        counted as: the dispatch_stats() key the call adds (or "nothing" when it raises)

    arch="gfx950" (any AMD arch name torch reports, e.g. "gfx942"): the answer for x and out as
    if they lived on a device of that arch, from any machine (a CPU or CUDA torch included):
    the path, rung, vector width and launches that this package, this torch and these settings
    would give a repeated call there once its kernel is ready (the first call on each device
    loads the module and runs the canary through the general path), or the fallback reason.
    The pointers' alignment is x's and out's own; a new output is planned as aligned. A line
    "for: ..." says so. Raises TypeError/ValueError for another arch value.

    An eager call's answer (under torch.compile relu() traces to torch's relu). A launch
    can still fail with a HIP error, and a first use's canary can fail: explain() cannot
    know those before they run."""
    arch = _arch_asked(arch)
    said = _explain(x, out, rung, arch)
    if arch is None:
        return said
    return (f"{said}\nfor: a {arch} (device {_index(x)}), asked with arch=: a repeated call there once its kernel is "
            "ready (this machine's devices are not asked)")


def _explain(x, out, rung, arch) -> str:
    """_dispatch.decide()'s answer for relu(x, out, rung=rung), rendered."""
    try:
        if _relu._check(x, out, rung, False):
            why = _inputs.why_torch(x, out) or "torch input"
            return _say("torch's relu (torch's own result or error)", why, None, f"fallback/{why}")
        if arch is None:
            info = _dispatch.device_info(x)
        else:  # a hypothetical device: its stream is never asked; no memory on any device for meta
            info = None if x.is_meta else _dispatch.DeviceInfo(arch, 0, True, _index(x))
        d = _dispatch.decide(x, out, rung, info, look=True, there=arch is not None)
    except (TypeError, ValueError, RuntimeError) as e:
        return _say(f"raises {type(e).__name__}", str(e), None, "nothing (the call fails before any path)")
    if d.reason is not None:
        return _say("torch fallback", _more(d), None, f"fallback/{d.reason}")
    p, vkey, counted = d.entry.plan, d.entry.vkey, f"flydsl/{d.entry.plan.rung}/{d.entry.plan.dtype}"
    autograd = out is None and x.requires_grad and torch.is_grad_enabled()  # through the op, a new output
    why = _entry_leaves(x, out, rung, d.entry.single, autograd)
    if arch is not None:
        first = ("the first call of this size, alignment and device takes the general path, which loads the module "
                 "(sha256 checked) and runs the canary there before its launch")
        return _say(_ROUTE[why is None], f"{why or 'the compiled entry replays a ready entry'}; {first}",
                    _kernel(p, f"on a {arch} (device {info.index}), torch's current stream"), counted)
    kernel = _kernel(p, f"on device {info.index}, stream {info.stream:#x}")
    if d.path == _dispatch.FIRST_USE:
        steps = ("module loaded (sha256 checked), " if vkey not in STATE.functions else "") + (
            "canary run on this device" if STATE.settings.canary else f"no canary ({ENV_CANARY} off)")
        return _say("kernel after first use", f"first use on device {info.index}: {steps}; a failed canary gives the "
                    f"torch fallback instead (fallback/{_dispatch._canary_failed(vkey)})", kernel, counted)
    checked = "its canary passed" if STATE.verdicts.get(vkey, _UNJUDGED) is None else f"loaded, canary off ({ENV_CANARY})"
    if why is None and (d.entry.function is None or not _compiled_entry.replays(d.entry, rung)):
        why = "the first call of this size, alignment and device; the compiled entry replays it after"
    return _say(_ROUTE[why is None], f"{why or 'a ready entry for this size, alignment and device'} ({checked})",
                kernel, counted)


_ROUTE = {True: "kernel, compiled entry", False: "kernel, general path"}


def _index(x) -> int:
    return x.get_device() if isinstance(x, torch.Tensor) and x.is_cuda else 0


def _more(d) -> str:
    """A fallback's reason, with what the kernel's own state on the device adds to it."""
    vkey = d.entry and d.entry.vkey
    if vkey and d.reason == _dispatch._canary_failed(vkey):
        return f"{d.reason}: {STATE.verdicts.get(vkey)} (final for this process)"
    if d.reason in (_dispatch.NOT_VERIFIED, _dispatch.NOT_LOADED):
        return f"{d.reason}: a graph capture is in progress on this stream"
    return d.reason


def _entry_takes_layout(x, out) -> bool:
    """Whether the compiled entry replays a call of this layout (x, and out or None) once its
    entry is ready: its own answer (_compiled_entry.c, takes_layout), False where it is not loaded."""
    module = _compiled_entry._module
    return module is not None and module.takes_layout(x, out)


def _entry_leaves(x, out, rung, single: bool, autograd: bool) -> Optional[str]:
    """Why the compiled entry leaves a kernel call to the general path even once its entry is
    ready, or None when it replays it."""
    if autograd:
        return "x requires grad: through the autograd op"
    if _inputs.FORWARD_AD._current_level >= 0:  # relu()'s guard, before the compiled entry
        return "a forward-AD level is active: relu() asks the general path"
    if _compiled_entry.SERVE is None:
        return (f"the compiled entry is not serving ({_compiled_entry.not_loaded() or 'switched off'}); "
                f"{no_entry_cost()['said']}")
    decides = _compiled_entry.torch_decides(x, out)
    if decides is not None:
        return f"{decides}: the compiled entry leaves it to the general path"
    if not _entry_takes_layout(x, out):
        return "a layout the compiled entry does not replay (_compiled_entry.c, takes_layout)"
    if not single:
        return "a split launch, which only the general path makes"
    return None


def _kernel(p, where: str) -> str:
    launches = ", ".join(f"grid {c.grid} x block {p.block}" for c in p.launches)
    return (f"rung {p.rung}, {p.dtype}, x{p.vec}: {len(p.launches)} launch{'es' if len(p.launches) > 1 else ''} "
            f"({launches}) {where}")


def _say(path, why, kernel, counted) -> str:
    lines = [f"path: {path}", f"why: {why}"]
    if kernel:
        lines.append(f"kernel: {kernel}")
    lines.append(f"counted as: {counted}")
    return "\n".join(lines)
