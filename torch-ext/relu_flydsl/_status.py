"""The health check and the path explainer: what is serving, and what one call would do.

    status()                   the package's state as a documented, JSON-serialisable dict
    problems(st)               what the package run with -m exits 1 for (a gfx950 not served)
    explain(x, out, rung=)     which path relu(x, out, rung=rung) would take, and why

Both only read: no kernel launch, no module load, no canary, no allocation of an output.
"""

import os
import platform
import sys
from typing import Optional

import torch

from . import _compiled_entry, _dispatch, _hip, _inputs, _objects, _relu
from ._state import DISABLED, ENV_CANARY, ENV_DISABLE, ENV_ENTRY, ENV_RUNG, NO_DEVICE, OFF, SETTINGS, STATE
from ._state import Settings, env_raw
from ._version import __version__
from .flash_relu_rocm import plan
from .flash_relu_rocm.registry import RUNGS, get_rung

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
                                          manifest now, and none was found unusable before
                      "reason": str | None, why not (the first problem)
                      "count": int,       kernels in the manifest
                      "broken": {"v5/bfloat16/x8": reason, ...}},  every unusable one
     "entry": {"loaded": bool,        the compiled entry (low host time per call) is loaded
               "reason": str | None,  why not
               "serving": bool,       relu() goes through it now
               "file": str | None, "sha256": str | None,
               "allocation": str,     how relu(x) allocates its output
               "devices": {"0": {...}, ...}},  what the entry knows of each device, as
                                      _compiled_entry.status() reports it
     "devices": [{"index": int, "arch": str,
                  "kernel_path": bool,     relu() runs the kernels on this device
                  "reason": str | None,    why not (kill switch, arch, no code objects, no HIP
                                           runtime)
                  "canary": {"v5/bfloat16/x8": "passed" | "failed: <evidence>" | "not run"
                                               | "not run (loaded with the canary off)"
                                               | "not run (object unusable: ...)", ...},
                               the serving rung's kernels for dense aligned tensors (what
                               warmup() readies by default) and every kernel used there
                  "entry": {...} | None},  the compiled entry's view of this device
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
    entry = _entry()
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
                        "canary": _canaries(index, settings), "entry": entry["devices"].get(str(index))})
    st = {"version": int(__version__), "torch": torch.__version__,
          "python": f"{platform.python_version()} {sys.implementation.name}",
          "hip_runtime": _hip.runtime_path(), "hip_reason": hip_reason,
          "code_objects": objects, "entry": entry, "devices": devices, "settings": _settings(settings)}
    if device_error is not None:
        st["devices_error"] = device_error
    return st


def _device_reason(arch, settings, objects, hip_reason) -> Optional[str]:
    """Why relu() does not run the kernels on a device of `arch`, or None (in fallback_reason's order)."""
    if settings.disabled:
        return DISABLED[1]
    if arch != SUPPORTED_ARCH:
        return f"arch {arch} (kernels are built for {SUPPORTED_ARCH})"
    if objects["count"] == 0:
        return objects["reason"]
    return hip_reason


def _code_objects() -> dict:
    try:
        kernels = _objects.manifest()["kernels"]
    except _objects.ObjectError as e:
        return {"verified": False, "reason": str(e), "count": 0, "broken": {}}
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


def _entry() -> dict:
    st = _compiled_entry.status()  # keys may grow: read with .get()
    loaded = bool(st.get("loaded"))
    allocation = st.get("allocation") if loaded else None
    return {"loaded": loaded, "reason": st.get("reason"), "serving": _compiled_entry.SERVE is not None,
            "file": st.get("file"), "sha256": st.get("sha256"),
            "allocation": allocation or "torch.empty_like(x) (the Python path)",
            "devices": {str(k): v for k, v in (st.get("devices") or {}).items()}}


def _canaries(device: int, settings) -> dict:
    """Each kernel's canary verdict on `device`: the serving rung's widest kernels, then any other used there."""
    rung = RUNGS[settings.default_rung]
    kernels = {(rung.name, dtype, rung.max_vec(dtype)) for dtype in _dispatch.DTYPES}
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
        elif k in STATE.broken:
            said = f"not run (object unusable: {STATE.broken[k]})"
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
    """What makes the health check fail: a gfx950 on which the kernel path is not active, or
    a kernel whose canary failed there. [] when none."""
    found = []
    for d in st["devices"]:
        if d["arch"] != SUPPORTED_ARCH:
            continue
        if not d["kernel_path"]:
            found.append(f"device {d['index']} ({d['arch']}): the kernel path is off: {d['reason']}")
        for kernel, verdict in d["canary"].items():
            if verdict.startswith("failed"):
                found.append(f"device {d['index']}: {kernel} {verdict}")
    return found


# ---- explain() -------------------------------------------------------------------------------
_ALIGNED = 1 << 20  # a new output's address for planning: torch's allocators align far beyond 16 bytes


def explain(x, out=None, *, rung=None) -> str:
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

    An eager call's answer (under torch.compile relu() traces to torch's relu). A launch
    can still fail with a HIP error, and a first use's canary can fail: explain() cannot
    know those before they run."""
    autograd = False
    try:
        if _relu._check(x, out, rung, False):
            why = _inputs.why_torch(x, out) or "torch input"
            return _say("torch's relu (torch's own result or error)", why, None, f"fallback/{why}")
    except (TypeError, ValueError, RuntimeError) as e:
        return _say(f"raises {type(e).__name__}", str(e), None, "nothing (the call fails before any path)")
    if out is None and x.requires_grad and torch.is_grad_enabled():
        autograd = True  # through the op, into _dispatch.run with a new output
    info = _dispatch.device_info(x)
    if info is None:
        key = DISABLED if STATE.current().disabled else NO_DEVICE
        return _say("torch fallback", key[1], None, "/".join(key))
    if out is not None and out is not x:
        there = _dispatch.device_info(out)
        if there is None or there.index != info.index:
            return _say("raises ValueError", f"relu(): out is on device {None if there is None else there.index} "
                        f"but x is on device {info.index}", None, "nothing (the call fails before any path)")
    # out None: a new tensor of x's strides where x is dense, else contiguous: the same answers as x
    reason = _dispatch.fallback_reason(x, x if out is None else out, info)
    if reason is None and x.numel() == 0:
        reason = "empty tensor"
    if reason is None:
        reason = _objects.unavailable() or _hip.unavailable()
    if reason is not None:
        return _say("torch fallback", reason, None, f"fallback/{reason}")
    rung_name = rung or STATE.settings.default_rung
    xp = x.data_ptr()
    yp = _ALIGNED if out is None else out.data_ptr()
    p = plan.plan(get_rung(rung_name), _dispatch._DTYPE_NAMES[x.dtype], x.numel(), xp, yp)
    vkey = (p.rung, p.dtype, p.vec, info.index)
    counted = f"flydsl/{p.rung}/{p.dtype}"
    launches = ", ".join(f"grid {c.grid} x block {p.block}" for c in p.launches)
    kernel = (f"rung {p.rung}, {p.dtype}, x{p.vec}: {len(p.launches)} launch{'es' if len(p.launches) > 1 else ''} "
              f"({launches}) on device {info.index}, stream {info.stream:#x}")
    verdict = STATE.verdicts.get(vkey, _UNJUDGED)
    if verdict is not None and verdict is not _UNJUDGED:
        failed = _dispatch._canary_failed(vkey)
        return _say("torch fallback", f"{failed}: {verdict} (final for this process)", None, f"fallback/{failed}")
    broken = STATE.broken.get(vkey[:3])
    if broken is not None:
        return _say("torch fallback", broken, None, f"fallback/{broken}")
    loaded = vkey in STATE.functions
    if loaded and (verdict is None or not STATE.settings.canary):
        checked = "its canary passed" if verdict is None else f"loaded, canary off ({ENV_CANARY})"
        key = (rung, x.dtype, x.numel(), xp & 15, yp & 15, info.index)
        entry = STATE.entries.get(key)
        contiguous = x.is_contiguous() and (out is None or out.is_contiguous())  # what the entry replays
        if (not autograd and contiguous and entry is not None and entry.function is not None
                and _compiled_entry.SERVE is not None and _compiled_entry.torch_decides(x, out) is None
                and _compiled_entry.replays(entry, rung)):
            return _say("kernel, compiled entry", f"a ready entry for this size, alignment and device ({checked})",
                        kernel, counted)
        return _say("kernel, general path", _general_why(autograd, entry, checked, contiguous), kernel, counted)
    if _dispatch._capturing(info.stream):
        why = _dispatch.NOT_VERIFIED if STATE.settings.canary else _dispatch.NOT_LOADED
        return _say("torch fallback", f"{why}: a graph capture is in progress on this stream", None, f"fallback/{why}")
    if not loaded:
        try:
            _objects.read_verified(*vkey[:3])
        except _objects.ObjectError as e:
            return _say("torch fallback", str(e), None, f"fallback/{e}")
    steps = ("module loaded (sha256 checked), " if not loaded else "") + (
        "canary run on this device" if STATE.settings.canary else f"no canary ({ENV_CANARY} off)")
    return _say("kernel after first use", f"first use on device {info.index}: {steps}; a failed canary gives the "
                f"torch fallback instead (fallback/{_dispatch._canary_failed(vkey)})", kernel, counted)


def _general_why(autograd, entry, checked, contiguous) -> str:
    if autograd:
        return f"x requires grad: through the autograd op ({checked})"
    if _compiled_entry.SERVE is None:
        return f"the compiled entry is not serving ({_compiled_entry.not_loaded() or 'switched off'}); {checked}"
    if not contiguous:
        return f"a dense layout that is not contiguous, which the compiled entry leaves to Python ({checked})"
    if entry is None or entry.function is None:
        return f"the first call of this size, alignment and device ({checked}); the compiled entry replays it after"
    if not entry.single:
        return f"a split launch, which only the general path makes ({checked})"
    return f"the compiled entry leaves this call to the general path ({checked})"


def _say(path, why, kernel, counted) -> str:
    lines = [f"path: {path}", f"why: {why}"]
    if kernel:
        lines.append(f"kernel: {kernel}")
    lines.append(f"counted as: {counted}")
    return "\n".join(lines)
