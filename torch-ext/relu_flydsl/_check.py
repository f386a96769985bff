"""The hardware check, shipped with the kernels: `relu_flydsl.check()`, `python -m relu_flydsl
check`, and from the folder `kernels` downloads, `python FOLDER check` (FOLDER/__main__.py loads
the folder as the package). Needs only torch and the standard library.

On each visible gfx950, through the public relu():
  cases      every shipped kernel (rung x dtype x vector width, from the manifest) at the edge
             sizes (1, 7, 1023, 4257, 100000, one element past each vector width, one vector
             past a block), each rounded to the nearest size whose plan picks that kernel; a
             view at element offsets; in place (out=x); a new output (out None); and per rung
             and dtype every dense layout the kernels serve (transposed, channels_last, a 3-D
             permutation). Each is judged by the canary's own judge (_canary.Canary.frame):
             the bit rule bit for bit, guard regions before and after the output and the
             input, the input unchanged; and the call must have taken that kernel
             (dispatch_stats()), never torch's fallback.
  bandwidth  (bandwidth=True) each rung and torch at the reference post's bf16 shapes, by the
             ladder harness's method (_timing.py: device events, round-robin rounds,
             medians); the timed buffers are judged too. The GB/s are this machine's.

The result: CheckResult (.ok, .tested, .failed, .exit_code, .report, str() the verdict).
Exit status, pytest's numbers (the health check's too): 0 every case passed; 1 a failure, named
(a case, or a shipped file that fails its sha256); 4 a usage error; 5 nothing was tested, and
why (no HIP runtime, a CPU or CUDA torch, no device visible, no gfx950, the kill switch).
"""

import json
import math
import os
import platform
import sys
import time
from contextlib import ExitStack, nullcontext
from typing import NamedTuple, Optional

import torch

from . import _canary, _dispatch, _hip, _objects, _state, _timing, _verify
from ._version import __version__
from .flash_relu_rocm import plan as _plan
from .flash_relu_rocm import workloads
from .flash_relu_rocm.registry import ELEMENT_BYTES, RUNGS

SUPPORTED_ARCH = _dispatch.SUPPORTED_ARCH
EDGE_SIZES = (1, 7, 1023, 4257, 100000)
WIDTHS = (2, 4, 8, 16)  # every vector width a kernel has: one element past each is an edge size
OFFSET_SIZE, IN_PLACE_SIZE, NEW_SIZE = 4257, 1023, 4257  # rounded per kernel as the edge sizes are
# (name, memory shape, permutation): x is memory of that shape, permuted; out has x's strides
LAYOUTS = (("transposed", (48, 80), (1, 0)),
           ("transposed", (33, 65), (1, 0)),            # odd: the narrowest kernel
           ("channels_last", (2, 5, 7, 16), (0, 3, 1, 2)),
           ("permuted", (6, 10, 16), (2, 0, 1)))
SWEEP_DTYPE = "bfloat16"
SWEEP_SHAPES = tuple(tuple(s) for s in workloads.POST_SHAPES)  # the reference post's "Where it landed" shapes
SWEEP_ITERS, SWEEP_WARMUP, SWEEP_ROUNDS = _timing.ITERS, _timing.WARMUP, _timing.ROUNDS
TORCH = "torch"  # the baseline: torch.clamp(x, min=0, out=out), torch.relu's kernel, as the post times it
REPORT = "relu_flydsl_check.json"  # the CLI's default report, in the current directory
VISIBILITY = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
PASSED, FAILED, USAGE, NOT_TESTED = 0, 1, 4, 5  # exit statuses: pytest's numbers (see above)
OUT_IS = {_canary.APART: "out=", _canary.IN_PLACE: "out=x", _canary.NEW: "a new output"}


class Case(NamedTuple):
    rung: str
    dtype: str
    vec: int                # the kernel the plan must pick
    shape: tuple            # x's memory shape
    perm: tuple = None      # x = memory.permute(perm); None: contiguous
    layout: str = ""        # its name ("transposed", ...)
    out: str = _canary.APART  # APART (out=, a buffer of its own), IN_PLACE (out=x) or NEW (out None)
    x_offset: int = 0       # elements past the guard
    out_offset: int = 0

    @property
    def kernel(self) -> str:
        return _objects.key(self.rung, self.dtype, self.vec)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def name(self) -> str:
        if self.perm is None:
            what = f"size {self.numel}"
        else:
            what = f"{self.layout} {'x'.join(str(self.shape[p]) for p in self.perm)}"
        if self.x_offset or self.out_offset:
            what += f", a view at element offset {self.x_offset} (out at {self.out_offset})"
        return f"{self.kernel} {what}, {self.out_is}"

    @property
    def out_is(self) -> str:
        return OUT_IS[self.out]


# ---- which cases ----------------------------------------------------------------------------
def _fit(base: int, vec: int, widest: int) -> int:
    """The smallest size >= base whose plan picks exactly `vec` (pointers aligned)."""
    n = -(-base // vec) * vec
    if vec < widest and (n // vec) % 2 == 0:
        n += vec  # an even multiple would allow twice the width
    return n


def kernels_of(selection=None) -> list:
    """[(rung, dtype, vec)] of the manifest, those `selection` names: keys or key prefixes
    ("v5", "v5/bfloat16", "v5/bfloat16/x8"); ValueError for a name that matches none."""
    listed = []
    for key, meta in sorted(_objects.manifest()["kernels"].items()):
        listed.append((key, (meta.get("rung"), meta.get("dtype"), meta.get("vec"))))
    if selection is None:
        return [k for _, k in listed]
    names = [selection] if isinstance(selection, str) else list(selection)
    for name in names:
        if not any(key == name or key.startswith(name + "/") for key, _ in listed):
            raise ValueError(f"check(): no shipped kernel matches {name!r} (kernels are named like "
                             f"'v5', 'v5/bfloat16' or 'v5/bfloat16/x8')")
    return [k for key, k in listed if any(key == n or key.startswith(n + "/") for n in names)]


def cases_for(kernels) -> list:
    """Every case of those kernels (see the module's docstring)."""
    out = []
    chosen = set(kernels)
    for rung_name, dtype, vec in kernels:
        rung = RUNGS[rung_name]
        widest = rung.max_vec(dtype)
        bases = EDGE_SIZES + tuple(w + 1 for w in WIDTHS if w <= widest) + (rung.tile(vec) + vec,)
        for n in sorted({_fit(b, vec, widest) for b in bases}):
            out.append(Case(rung_name, dtype, vec, (n,)))
        # x and out each one vector (of this width) off a wider alignment: the plan narrows to vec
        n = _fit(OFFSET_SIZE, widest, widest)
        out.append(Case(rung_name, dtype, vec, (n,), x_offset=vec, out_offset=3 * vec))
        out.append(Case(rung_name, dtype, vec, (_fit(IN_PLACE_SIZE, vec, widest),), out=_canary.IN_PLACE))
        out.append(Case(rung_name, dtype, vec, (_fit(NEW_SIZE, vec, widest),), out=_canary.NEW))
    for rung_name, dtype in dict.fromkeys((r, d) for r, d, _ in kernels):
        widest = RUNGS[rung_name].max_vec(dtype)
        for layout, shape, perm in LAYOUTS:
            vec = _plan.pick_vec(math.prod(shape), dtype, widest, 0, 0)
            if (rung_name, dtype, vec) not in chosen:
                continue
            for where in (_canary.APART, _canary.NEW if layout == "transposed" else _canary.IN_PLACE):
                out.append(Case(rung_name, dtype, vec, shape, perm, layout, where))
    return out


# ---- one case ---------------------------------------------------------------------------------
def _shaped(flat, case):
    t = flat.view(case.shape)
    return t if case.perm is None else t.permute(case.perm)


def _stats_delta(before: dict, after: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _path_problem(case, delta: dict, device: int) -> Optional[str]:
    """None when the call took the case's kernel path exactly once; else what it took."""
    want = f"flydsl/{case.rung}/{case.dtype}"
    if delta == {want: 1}:
        return None
    took = ", ".join(f"{k} ({v} calls)" if v != 1 else k for k, v in sorted(delta.items())) or "no counted path"
    say = f"the kernel path did not run: took {took}"
    verdict = _state.STATE.verdicts.get((case.rung, case.dtype, case.vec, device))
    if verdict:  # the evidence of its failed canary
        say += f"; its canary on device {device}: {verdict}"
    return say


def run_case(case: Case, device: int, relu, stats) -> Optional[str]:
    """None when relu() passed `case` on `device`; else the evidence, one line."""
    esize = ELEMENT_BYTES[case.dtype]
    bits = _canary.input_bits(case.dtype, case.vec, case.numel)
    frame = _canary.Canary.frame(case.dtype, bits, x_offset=case.x_offset * esize,
                                 out_offset=case.out_offset * esize, out=case.out)
    with ExitStack() as stack:
        buffer = stack.enter_context(_canary.device_memory(frame.total, device))
        apart = stack.enter_context(_canary.device_memory(frame.out_total, device)) if frame.out_total else None
        frame.load(buffer, apart)
        flat_x, flat_out = frame.views()
        x = _shaped(flat_x, case)
        out = None if flat_out is None else (x if case.out == _canary.IN_PLACE else _shaped(flat_out, case))
        planned = _plan.plan(RUNGS[case.rung], case.dtype, case.numel, x.data_ptr(),
                             (x if out is None else out).data_ptr()).vec
        if planned != case.vec:
            return f"the check laid this case out wrongly: the plan picks x{planned}, not x{case.vec}"
        before = stats()
        try:
            y = relu(x, out=out, rung=case.rung)
        except Exception as e:  # noqa: BLE001 - the case's evidence
            return f"relu() raised {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        problem = _path_problem(case, _stats_delta(before, stats()), device)
        if problem:
            return problem
        output = None
        if case.out == _canary.NEW:
            if y.shape != x.shape or y.stride() != x.stride() or y.dtype != x.dtype or y.device != x.device:
                return (f"relu(x) returned {tuple(y.shape)} strides {y.stride()} {y.dtype} on {y.device}, "
                        f"not x's {tuple(x.shape)} strides {x.stride()} {x.dtype} on {x.device}")
            output = y.as_strided((case.numel,), (1,))  # x's memory order
        elif y is not out:
            return "relu() did not return the tensor passed as out"
        return frame.judge(output=output)


# ---- the bandwidth sweep ----------------------------------------------------------------------
def _sweep_bits(n: int, device: int):
    """n elements of the canary's input pattern (every special at every lane), repeated, on the device."""
    period = min(n, 1 << 16)
    pattern = _canary.input_bits(SWEEP_DTYPE, RUNGS["v5"].max_vec(SWEEP_DTYPE), period)
    pattern = pattern.to(torch.device("cuda", device) if torch.cuda.is_available() else "cpu")
    return pattern.repeat(-(-n // period))[:n]


def _current(index: int):
    """Device `index` current (the events record on its stream), where torch has devices."""
    return torch.cuda.device(index) if torch.cuda.is_available() else nullcontext()


def sweep(device: int, rungs, relu, stats, progress=None):
    """(rows, [(name, evidence)]) of the bandwidth sweep on `device`: each of `rungs` and torch at
    every SWEEP_SHAPES, round-robin; a rung whose timed launches did not all take its kernel, or
    whose timed buffers break the bit rule or a guard, gets no number and a failure."""
    rows, failures = [], []
    impls = list(rungs) + [TORCH]
    esize = ELEMENT_BYTES[SWEEP_DTYPE]
    for shape in SWEEP_SHAPES:
        n = math.prod(shape)
        bits = _sweep_bits(n, device)
        frames, calls = {}, {}
        with ExitStack() as stack:
            for impl in impls:
                f = _canary.Canary.frame(SWEEP_DTYPE, bits)
                f.load(stack.enter_context(_canary.device_memory(f.total, device)),
                       stack.enter_context(_canary.device_memory(f.out_total, device)))
                x, out = (v.view(shape) for v in f.views())
                if impl == TORCH:
                    calls[impl] = (lambda x=x, out=out: torch.clamp(x, min=0, out=out))
                else:
                    calls[impl] = (lambda x=x, out=out, r=impl: relu(x, out=out, rung=r))
                frames[impl] = f
            before = stats()
            with _current(device):
                samples = _timing.collect_samples(
                    impls, lambda i: _timing.time_launches(calls[i], SWEEP_ITERS, SWEEP_WARMUP),
                    SWEEP_ROUNDS, progress)
            delta = _stats_delta(before, stats())
            launches = SWEEP_ROUNDS * (SWEEP_ITERS + SWEEP_WARMUP)
            name = "x".join(map(str, shape))
            problems = {}
            for impl in impls:
                if impl != TORCH and delta.get(f"flydsl/{impl}/{SWEEP_DTYPE}", 0) != launches:
                    problems[impl] = (f"{delta.get(f'flydsl/{impl}/{SWEEP_DTYPE}', 0)} of {launches} timed launches "
                                      f"took the kernel path ({', '.join(sorted(delta)) or 'nothing counted'})")
                    continue
                why = frames[impl].judge(on_device=True, bits=impl != TORCH)
                if why:
                    problems[impl] = why
            torch_s = _timing.median_device(samples[TORCH]) if TORCH not in problems else None
            for impl in impls:
                row = {"device": device, "shape": name, "dtype": SWEEP_DTYPE, "numel": n,
                       "traffic_mb": round(2 * n * esize / 1e6, 3), "impl": impl}
                if impl in problems:
                    row.update(result="failed", evidence=problems[impl], median_us=None, gbps=None, vs_torch=None)
                    failures.append((f"bandwidth {impl} {SWEEP_DTYPE} {name} on device {device}", problems[impl]))
                else:
                    s = _timing.median_device(samples[impl])
                    row.update(result="passed", evidence=None, median_us=s * 1e6, gbps=2 * n * esize / s / 1e9,
                               vs_torch=(torch_s / s) if torch_s else None,
                               samples_us=[t.device * 1e6 for t in samples[impl]])
                rows.append(row)
    return rows, failures


def rungs_timed(kernels) -> list:
    """The rungs the sweep times: those whose kernel for SWEEP_DTYPE's large aligned tensors is checked."""
    return [r for r in RUNGS if (r, SWEEP_DTYPE, RUNGS[r].max_vec(SWEEP_DTYPE)) in set(kernels)]


def table(rows, impls) -> str:
    """The sweep as the reference post's "Where it landed" table: GB/s per shape, one column per rung and torch."""
    head = [f"shape ({SWEEP_DTYPE})"] + list(impls) + ["best / torch"]
    lines = [head]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        per = {r["impl"]: r for r in rows if r["shape"] == shape}
        cells = [shape.replace("x", " x ")]
        for i in impls:
            g = (per.get(i) or {}).get("gbps")
            cells.append("FAILED" if i in per and g is None else ("-" if g is None else f"{g:.0f}"))
        best = max((per[i]["gbps"] for i in impls if i != TORCH and i in per and per[i]["gbps"]), default=None)
        t = (per.get(TORCH) or {}).get("gbps")
        cells.append(f"{best / t:.2f}x" if best and t else "-")
        lines.append(cells)
    widths = [max(len(str(r[k])) for r in lines) for k in range(len(head))]
    out = ["| " + " | ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in enumerate(zip(r, widths)))
           + " |" for r in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


# ---- what is here -------------------------------------------------------------------------
def _devices():
    """({index: arch} of the ROCm devices torch sees, None) or ({}, why they cannot be listed)."""
    try:
        return dict(_dispatch.device_archs()), None
    except Exception as e:  # noqa: BLE001 - reported, not raised
        return {}, f"the devices cannot be listed ({type(e).__name__}: {e})"


def nothing_to_test(archs: dict, listing_error: Optional[str] = None) -> Optional[str]:
    """Why no gfx950 can be checked here (None when one can): no HIP runtime, a CPU or CUDA
    torch, no device visible, no gfx950 among the devices."""
    if any(a == SUPPORTED_ARCH for a in archs.values()):
        return None
    if archs:
        return (f"no {SUPPORTED_ARCH} among the devices ("
                + ", ".join(f"device {i}: {a}" for i, a in sorted(archs.items())) + ")")
    said = []
    hip = _hip.unavailable()
    if hip:
        said.append(hip)
    if torch.version.hip is None:
        build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        said.append(f"torch {torch.__version__} is {build}, not ROCm")
    elif listing_error:
        said.append(listing_error)
    else:
        hidden = [f"{k}={os.environ[k]!r}" for k in VISIBILITY if k in os.environ]
        said.append(f"no ROCm device is visible to torch {torch.__version__} (ROCm {torch.version.hip})"
                    + (f"; {', '.join(hidden)}" if hidden else ""))
    return "; ".join(said)


def _device_name(index: int) -> Optional[str]:
    try:
        return torch.cuda.get_device_name(index) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a name is a nicety
        return None


def _package_info(folder=None):
    """(the package's identity and digest, a failure or None): a digest that does not verify fails.
    folder: the variant's (default: this package's own)."""
    folder = folder or os.path.dirname(os.path.abspath(__file__))  # not resolved: a Hub cache links into blobs/
    info = {"name": __package__, "version": int(__version__), "folder": folder, "fingerprint": None}
    metadata = os.path.join(folder, "metadata.json")
    if not os.path.isfile(metadata):
        info["digest"] = "not checked: not a built variant (no metadata.json)"
        return info, None
    try:
        with open(metadata, encoding="utf-8") as f:
            info["fingerprint"] = _verify.digest_fingerprint(json.load(f)["digest"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        info["digest"] = f"FAILED: metadata.json has no readable digest ({type(e).__name__}: {e})"
        return info, f"the variant's metadata.json: {info['digest']}"
    try:
        from ._kernels_private import load

        load()
    except ImportError as e:
        info["digest"] = f"not verified: the kernels library is needed to rehash the files ({e})"
        return info, None
    try:
        _verify.verify_digest(folder)
    except _verify.VariantVerificationError as e:
        info["digest"] = f"FAILED: {e}"
        return info, f"the variant's files against its digest: {e}"
    info["digest"] = "verified: every file matches metadata.json's digest"
    return info, None


def _environment() -> dict:
    return {"python": f"{platform.python_version()} {sys.implementation.name}", "platform": platform.platform(),
            "torch": torch.__version__, "torch_rocm": torch.version.hip, "torch_cuda": torch.version.cuda,
            "hip_runtime": _hip.runtime_path(), "hip_runtime_missing": _hip.unavailable(),
            "visibility": {k: os.environ[k] for k in VISIBILITY if k in os.environ},
            "settings": {s[0]: os.environ.get(s[0]) for s in _state.SETTINGS}}


# ---- the result -------------------------------------------------------------------------------
class CheckResult:
    """What check() found. ok: every case passed (exit_code 0); tested: the cases run;
    failed: the failed cases' names; exit_code: 0 passed, 1 failed, 5 nothing tested;
    report: the JSON report (a dict); str(): the one-line verdict; text: the whole account."""

    __slots__ = ("exit_code", "tested", "failed", "report", "text")

    def __init__(self, exit_code, tested, failed, report, text):
        self.exit_code, self.tested, self.failed, self.report, self.text = exit_code, tested, failed, report, text

    @property
    def ok(self) -> bool:
        return self.exit_code == PASSED

    def __str__(self):
        return self.report["verdict"]

    def __repr__(self):
        return f"CheckResult(exit_code={self.exit_code}, tested={self.tested}, failed={len(self.failed)})"


def _verdict(code, tested, failed, devices, reason, kernels) -> str:
    if code == FAILED:
        first = failed[0]
        return f"relu_flydsl check FAILED: {len(failed)} failed ({tested} cases run); first: {first}"
    if code == NOT_TESTED:
        return f"relu_flydsl check NOT TESTED: nothing was tested: {reason}"
    where = ", ".join(f"device {i}" for i in devices)
    return (f"relu_flydsl check PASSED: {tested} cases of {kernels} kernels on {len(devices)} {SUPPORTED_ARCH} "
            f"({where}): bit-exact, guards intact, input unchanged, every call on its kernel")


class _Bar:
    """A progress bar on stderr (a line per tenth where stderr is not a terminal)."""

    def __init__(self, total, desc, on=True):
        self.total, self.desc, self.done, self.on = max(total, 1), desc, 0, on
        self.tty = on and sys.stderr.isatty()
        self.last = 0.0
        self.tenth = 0

    def __call__(self, n=1):
        self.done += n
        if not self.on:
            return
        if self.tty:
            now = time.monotonic()
            if now - self.last >= 0.1 or self.done >= self.total:
                self.last = now
                filled = int(30 * self.done / self.total)
                print(f"\r{self.desc} [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}",
                      end="", file=sys.stderr, flush=True)
        elif 10 * self.done // self.total > self.tenth:
            self.tenth = 10 * self.done // self.total
            print(f"{self.desc}: {self.done}/{self.total}", file=sys.stderr, flush=True)

    def close(self):
        if self.on and self.tty:
            print(file=sys.stderr, flush=True)


def check(bandwidth: bool = True, *, kernels=None, report=None, progress: bool = True) -> CheckResult:
    """The hardware check (see the module's docstring): on each visible gfx950, every shipped
    kernel through relu() at edge sizes, views, dense layouts, out=, out=x and a new output,
    judged bit for bit with guards; then, with bandwidth=True, a short bandwidth sweep of each
    rung and torch (a minute or two). kernels: only those ("v5", "v5/bfloat16",
    "v5/bfloat16/x8", or a list of them); report: a path to write the JSON report to;
    progress: a progress bar on stderr. Returns a CheckResult; str() is the verdict."""
    started = time.time()
    package, digest_failure = _package_info()
    archs, listing_error = _devices()
    settings = _state.Settings(_state.env_raw())
    reason = nothing_to_test(archs, listing_error)
    gfx = sorted(i for i, a in archs.items() if a == SUPPORTED_ARCH)
    if reason is None and settings.disabled:
        reason = (f"{_state.ENV_DISABLE} is on: every call takes torch's kernel; unset it to check the kernels "
                  f"on {', '.join(f'device {i}' for i in gfx)}")
    failed, evidence, rows, cases_done, lines = [], {}, [], [], []
    if digest_failure:
        failed.append("variant digest")
        evidence["variant digest"] = digest_failure
    devices = [{"index": i, "arch": a, "name": _device_name(i), "checked": reason is None and a == SUPPORTED_ARCH}
               for i, a in sorted(archs.items())]
    relu = getattr(sys.modules[__package__], "relu")  # the public relu(), as a user calls it
    stats = sys.modules[__package__].dispatch_stats
    try:
        chosen = kernels_of(kernels)  # a name that matches no kernel raises ValueError, anywhere
    except _objects.ObjectError as e:
        chosen, objects_error = [], str(e)
    else:
        objects_error = None
    if reason is None:
        if objects_error:
            failed.append("code objects")
            evidence["code objects"] = objects_error
        cases = cases_for(chosen)
        bar = _Bar(len(cases) * len(gfx), "relu_flydsl check: cases", progress)
        for device in gfx:
            for case in cases:
                try:
                    why = run_case(case, device, relu, stats)
                except Exception as e:  # noqa: BLE001 - a case that cannot run is a failed case
                    why = f"the case could not run ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]})"
                name = f"{case.name} on device {device}"
                cases_done.append({"device": device, "case": case.name, "kernel": case.kernel, "rung": case.rung,
                                   "dtype": case.dtype, "vec": case.vec, "numel": case.numel,
                                   "shape": list(case.shape) if case.perm is None
                                   else [case.shape[p] for p in case.perm],
                                   "layout": case.layout or "contiguous", "out": case.out_is,
                                   "offsets": [case.x_offset, case.out_offset],
                                   "result": "failed" if why else "passed", "evidence": why})
                if why:
                    failed.append(name)
                    evidence[name] = why
                bar(1)
        bar.close()
    tested = len(cases_done)
    bad_rungs = {c["rung"] for c in cases_done if c["result"] == "failed"}
    rungs = [r for r in rungs_timed(chosen) if r not in bad_rungs]  # a failed rung gets no number
    if reason is None and bandwidth and rungs:
        bar = _Bar(len(gfx) * len(SWEEP_SHAPES) * (len(rungs) + 1) * SWEEP_ROUNDS, "relu_flydsl check: bandwidth",
                   progress)
        for device in gfx:
            got, problems = sweep(device, rungs, relu, stats, bar)
            rows += got
            for name, why in problems:
                failed.append(name)
                evidence[name] = why
        bar.close()
        impls = rungs + [TORCH]
        for device in gfx:
            mine = [r for r in rows if r["device"] == device]
            if mine:
                lines += ["", f"bandwidth on device {device} ({_device_name(device) or SUPPORTED_ARCH}), GB/s measured "
                          "here: 2 x numel x element size / median device time per launch",
                          f"  {_timing.describe(SWEEP_ITERS, SWEEP_WARMUP, SWEEP_ROUNDS)}",
                          f"  {TORCH}: torch.clamp(x, min=0, out=out), torch.relu's kernel; the shapes and the method "
                          "of the reference post's \"Where it landed\" table",
                          table(mine, impls)]
    code = FAILED if failed else (NOT_TESTED if tested == 0 else PASSED)
    verdict = _verdict(code, tested, [f"{n}: {evidence[n]}" for n in failed], gfx, reason, len(chosen))
    doc = {"verdict": verdict, "exit_code": code, "tested": tested, "failed": failed, "reason": reason,
           "package": package, "environment": _environment(), "devices": devices,
           "kernels": [_objects.key(*k) for k in chosen], "cases": cases_done,
           "bandwidth": {"asked": bool(bandwidth), "dtype": SWEEP_DTYPE,
                         "method": _timing.describe(SWEEP_ITERS, SWEEP_WARMUP, SWEEP_ROUNDS),
                         "gbps": "2 x numel x element size / median device seconds per launch",
                         "torch": "torch.clamp(x, min=0, out=out)", "rows": rows},
           "evidence": evidence, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
           "seconds": round(time.time() - started, 3)}
    head = [f"relu_flydsl check: {package['name']} version {package['version']} from {package['folder']}",
            f"  digest: {package['digest']}",
            f"  torch {torch.__version__}" + (f" (ROCm {torch.version.hip})" if torch.version.hip else "")
            + f", HIP runtime: {_hip.runtime_path() or _hip.unavailable()}"]
    head += [f"  device {d['index']}: {d['arch']}" + (f" ({d['name']})" if d["name"] else "")
             + ("" if d["checked"] else ": not checked") for d in devices] or ["  devices: none"]
    body = [f"FAILED {n}: {evidence[n]}" for n in failed[:20]]
    if len(failed) > 20:
        body.append(f"... and {len(failed) - 20} more failed (every one is in the report)")
    for device in gfx if reason is None else ():
        mine = [c for c in cases_done if c["device"] == device]
        bad = sum(c["result"] == "failed" for c in mine)
        body.append(f"device {device}: {len(mine) - bad} of {len(mine)} cases passed "
                    f"({len({c['kernel'] for c in mine})} kernels)")
    if report is not None:
        path = os.path.abspath(report)
        doc["report"] = path
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
            lines.append(f"report: {path}")
        except OSError as e:
            lines.append(f"report: NOT written to {path} ({type(e).__name__}: {e})")
    text = "\n".join(head + body + lines + [verdict])
    return CheckResult(code, tested, failed, doc, text)
