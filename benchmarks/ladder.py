#!/usr/bin/env python
"""The ladder harness: every rung against torch, the reference post's method.

    python benchmarks/ladder.py                 full run on a gfx950 device (MI350X/MI355X);
                                                elsewhere the no-GPU report (below)
    python benchmarks/ladder.py --mode baseline torch's relu alone, on whatever GPU torch sees
                                                (CUDA or ROCm): checks the harness and the machine
    python benchmarks/ladder.py --out DIR       results folder (default results/, git-ignored)
    python benchmarks/ladder.py --mode nogpu    the no-GPU report even on a GPU machine

What is checked, and against what:
  - The rungs' specification is the bit rule y = +0.0 if x < 0 else x, on the bits: NaN payloads
    (quiet, signalling, negative), +-inf, -0.0 and denormals pass through. Rungs are gated on it
    exactly, plus guard regions, input unchanged and the rung's FlyDSL path really ran.
  - torch is a baseline, not the specification, and is checked as torch specifies relu: values
    equal to max(x, 0) with +0.0 == -0.0, NaN where the input is NaN, guards and input untouched.
    Its bits differ from the bit rule by device: torch 2.11 on an NVIDIA H200 turns -0.0 into
    +0.0 (checked); torch on CPU keeps -0.0 but rewrites some NaN payloads (large bf16 tensors ->
    0xFFFF, f16 signalling NaNs quieted); the reference post reports -0.0 kept on its MI350X.
    Such a difference is counted and reported as a note in the table and the JSON ("torch on this
    device: -0.0 -> +0.0 in 3 of 67108864 elements") and torch is still timed; a wrong value
    refuses it. Every GPU run also records what torch.relu and the clamp baseline do on the
    device to -0.0, NaN payloads and denormals (benchmarks/relu_semantics.py).

GPU mode (a gfx950 device is present):
  1. correctness first, for every rung and torch, as above, on sizes 1 .. 2^20 holding the
     special values. A rung that fails is reported as failed and never gets a bandwidth number.
  2. timing: device events around a loop of 100 launches after 20 warm-ups; 15 rounds taken
     round-robin across the implementations (the first one rotates each round), separate
     input and output buffers per implementation; the MEDIAN of the 15 per-launch times.
     torch is `torch.clamp(x, min=0, out=out)`, as in the post. The timed buffers are checked
     again afterwards. torch's timing is cross-checked against triton.testing.do_bench (median,
     L2 flushed) where Triton is installed: harness GB/s / do_bench GB/s per case.
  3. GB/s = 2 x numel x element size / time; percent of an 8000 GB/s peak (MI350X); ratio to torch.
     Sweeps: the post's four shapes and its cache band (134..1074 MB of traffic), bf16.
  4. results: ladder.json, ladder.csv, ladder.png (GB/s against traffic, one panel per dtype,
     one line per rung, torch dashed, the peak line named for the device it assumes) in the
     output folder, and the table on stdout. Exit status 1 when any implementation was refused.

Baseline mode (--mode baseline): the same checks, timing, cross-check and outputs
(baseline.json/.csv/.png) for torch alone, on any GPU torch sees; no FlyDSL, no `kernels`
(the shapes are read from benchmark.py's source, not imported). The peak line is the device's
datasheet figure where known (H200 4.8 TB/s, MI350X/MI355X 8 TB/s), else none. On a machine
with no GPU it prints "NO GPU HERE", times nothing and exits 2.

No-GPU mode (anything else, e.g. this project's CPU machines): device bandwidth is NOT
measured. It prints (and writes to nogpu.json) what can be known here:
  - the gfx950 ISA of every rung (tools/isa.py, compiled here);
  - emulated instruction counts per byte moved per rung, from the virtual gfx950 (tools/vgpu/);
  - host time per relu(x, out=y) call through FlyDSL's real launch path with a no-op HIP
    library, next to torch.relu's eager host time on a small CPU tensor (host_overhead.py).
Each of the last two runs in its own subprocess (one process can hold only one stand-in
libamdhip64). A section whose tool is missing says so and why; nothing is made up.
"""

import argparse
import ast
import contextlib
import csv
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import relu_semantics  # noqa: E402 - benchmarks/relu_semantics.py: bit rule, torch's semantics

PEAK_GBPS = 8000.0  # MI350X / MI355X HBM3E, the device the ladder is built for
PEAK_LABEL = "MI350X peak 8 TB/s (reference)"
# Peaks by device name for the baseline mode (vendors' datasheets; a reference line, not a measurement).
PEAKS = (("MI350X", 8000.0, PEAK_LABEL), ("MI355X", 8000.0, "MI355X peak 8 TB/s (reference)"),
         ("H200", 4800.0, "H200 peak 4.8 TB/s (datasheet)"))
ITERS, WARMUP, ROUNDS = 100, 20, 15
TORCH = "torch"
RUNGS = ("v1", "v2", "v3", "v4", "v5")
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
SENTINEL = -7.0
GUARD = 8192  # elements of sentinel before and after every checked output
CHECK_SIZES = (1, 7, 8, 1000, 4257, 65539, 1 << 20)


# ---- the cases: the post's shapes and its cache band (from benchmark.py) ----------------
def bench_shapes():
    """{name: shapes} of POST_SHAPES and CACHE_BAND_SHAPES, read from benchmarks/benchmark.py's
    source (the single list of shapes). Read, not imported: benchmark.py imports `kernels`,
    which a plain CUDA or ROCm machine running the baseline mode need not have."""
    want = ("POST_SHAPES", "CACHE_BAND_SHAPES")
    found = {}
    for node in ast.parse((HERE / "benchmark.py").read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in want:
            found[node.targets[0].id] = tuple(tuple(s) for s in ast.literal_eval(node.value))
    missing = [w for w in want if w not in found]
    if missing:
        raise RuntimeError(f"benchmarks/benchmark.py defines no literal {', '.join(missing)}")
    return found


@dataclass(frozen=True)
class Case:
    shape: tuple
    dtype: str
    sweeps: tuple  # "shapes" (the post's four) and/or "band" (the cache band)

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def name(self):
        return "x".join(map(str, self.shape))

    @property
    def traffic(self):
        return traffic_bytes(self.numel, self.dtype)


def cases(dtypes=("bfloat16",), sweeps=("shapes", "band")):
    """The union of the post's shapes and the cache band, ordered by traffic."""
    bm = bench_shapes()
    tagged = {}
    if "shapes" in sweeps:
        for s in bm["POST_SHAPES"]:
            tagged.setdefault(tuple(s), []).append("shapes")
    if "band" in sweeps:
        for s in bm["CACHE_BAND_SHAPES"]:
            tagged.setdefault(tuple(s), []).append("band")
    out = [Case(s, d, tuple(t)) for d in dtypes for s, t in tagged.items()]
    return sorted(out, key=lambda c: (c.dtype, c.traffic))


# ---- pure measurement logic (unit-tested with fake timings) ---------------------------
def traffic_bytes(numel, dtype):
    """Bytes one ReLU moves: every element read once and written once."""
    return 2 * numel * ELEMENT_BYTES[dtype]


def gbps(traffic, seconds):
    return traffic / seconds / 1e9


def schedule(impls, rounds):
    """Round-robin order: every round times each implementation once; the first one
    rotates from round to round, so no implementation always runs first or last."""
    impls = list(impls)
    n = len(impls)
    return [(r, impls[(r + k) % n]) for r in range(rounds) for k in range(n)]


def collect_samples(impls, time_once, rounds=ROUNDS, progress=None):
    """{impl: [seconds per launch, one per round]}; time_once(impl) does one timing."""
    samples = {i: [] for i in impls}
    for _, impl in schedule(impls, rounds):
        samples[impl].append(time_once(impl))
        if progress is not None:
            progress(1)
    return samples


def _quartiles(xs):
    q = statistics.quantiles(sorted(xs), n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]


def summarize(case, samples, failed=None, peak=PEAK_GBPS, notes=None):
    """One row per implementation: the MEDIAN per-launch time, GB/s, % of peak (None when no
    peak is known), ratio to torch. Implementations in `failed` ({impl: reason}) get no numbers,
    only the reason. `notes` ({impl: text}): e.g. where torch differs from the bit rule."""
    failed, notes = failed or {}, notes or {}
    rows = []
    med = {i: statistics.median(s) for i, s in samples.items() if s and i not in failed}
    torch_gbps = gbps(case.traffic, med[TORCH]) if TORCH in med else None
    for impl in list(samples) + [i for i in failed if i not in samples]:
        row = {"shape": case.name, "dtype": case.dtype, "sweeps": "+".join(case.sweeps), "numel": case.numel,
               "traffic_mb": round(case.traffic / 1e6, 1), "impl": impl, "note": notes.get(impl) or None}
        if impl in failed:
            row.update(status="FAILED correctness: " + failed[impl], median_us=None, gbps=None,
                       pct_peak=None, vs_torch=None, iqr_pct=None, samples_us=[])
        else:
            s = samples[impl]
            g = gbps(case.traffic, med[impl])
            q1, q3 = _quartiles(s)
            row.update(status="ok", median_us=med[impl] * 1e6, gbps=g, pct_peak=100.0 * g / peak if peak else None,
                       vs_torch=(g / torch_gbps) if torch_gbps else None,
                       iqr_pct=100.0 * (q3 - q1) / med[impl], samples_us=[t * 1e6 for t in s])
        rows.append(row)
    return rows


def ladder_table(rows, impls):
    """The post's 'where it landed' table: GB/s per shape, one column per implementation."""
    by_case = {}
    for r in rows:
        by_case.setdefault((r["dtype"], r["traffic_mb"], r["shape"]), {})[r["impl"]] = r
    head = ["shape", "dtype", "traffic MB"] + list(impls) + ["best / torch"]
    lines, foot = [head], []
    for (dtype, mb, shape), per in sorted(by_case.items()):
        cells = [shape, dtype, f"{mb:.0f}"]
        best = None
        for i in impls:
            r = per.get(i)
            if r is None:
                cells.append("-")
            elif r["gbps"] is None:
                cells.append("FAILED")
            else:
                cells.append(f"{r['gbps']:.0f}" + (f" [{len(foot) + 1}]" if r.get("note") else ""))
                if r.get("note"):  # a footnote: the note is too long for a cell
                    foot.append(f"[{len(foot) + 1}] {i}, {shape} {dtype}: {r['note']}")
                if i != TORCH and (best is None or r["gbps"] > best):
                    best = r["gbps"]
        t = per.get(TORCH)
        cells.append(f"{best / t['gbps']:.2f}x" if best and t and t["gbps"] else "-")
        lines.append(cells)
    widths = [max(len(str(l[c])) for l in lines) for c in range(len(head))]
    out = ["  ".join(str(c).rjust(w) for c, w in zip(l, widths)) for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out + foot)


def baseline_table(rows):
    """The baseline mode's table: torch per case, % of the named peak, and the cross-check."""
    head = ["shape", "dtype", "traffic MB", "median us", "GB/s", "% peak", "IQR %", "do_bench GB/s",
            "harness/do_bench", "note"]
    lines = [head]
    for r in sorted(rows, key=lambda r: (r["dtype"], r["traffic_mb"], r["shape"])):
        cc = r.get("crosscheck") or {}
        if r["gbps"] is None:
            lines.append([r["shape"], r["dtype"], f"{r['traffic_mb']:.0f}", "-", "FAILED", "-", "-", "-", "-",
                          r["status"]])
            continue
        lines.append([r["shape"], r["dtype"], f"{r['traffic_mb']:.0f}", f"{r['median_us']:.1f}", f"{r['gbps']:.0f}",
                      f"{r['pct_peak']:.1f}" if r["pct_peak"] is not None else "-", f"{r['iqr_pct']:.1f}",
                      f"{cc['do_bench_gbps']:.0f}" if cc.get("available") else "-",
                      f"{cc['ratio']:.3f}" if cc.get("available") else "-", r.get("note") or ""])
    widths = [max(len(str(l[c])) for l in lines) for c in range(len(head))]
    out = ["  ".join(str(c).rjust(w) if k < len(head) - 1 else str(c) for k, (c, w) in enumerate(zip(l, widths))).rstrip()
           for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths[:-1]) + "  ----")
    return "\n".join(out)


def write_csv(rows, path):
    cols = ["shape", "dtype", "sweeps", "numel", "traffic_mb", "impl", "status", "median_us", "gbps",
            "pct_peak", "vs_torch", "iqr_pct", "note"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def plot(rows, path, impls, peak=PEAK_GBPS, title="relu-flydsl ladder", peak_label=PEAK_LABEL):
    """GB/s against total traffic: one panel per dtype (a bf16 and an f32 point are never
    joined), one line per implementation, torch dashed, the peak of the device it assumes
    drawn and named (`peak_label`; no line when peak is None). Returns {dtype: line labels}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = plt.subplots(1, max(1, len(dtypes)), figsize=(1.5 + 6 * max(1, len(dtypes)), 5.5), sharey=True,
                             squeeze=False)
    top = max([peak or 0] + [r["gbps"] for r in rows if r["gbps"]])
    drawn = {}
    for ax, dtype in zip(axes[0], dtypes):
        for impl in impls:
            pts = sorted((r["traffic_mb"], r["gbps"]) for r in rows
                         if r["impl"] == impl and r["dtype"] == dtype and r["gbps"])
            if not pts:
                continue
            xs, ys = zip(*pts)
            style = dict(color="black", linestyle="--", linewidth=2, marker="s") if impl == TORCH else dict(marker="o")
            ax.plot(xs, ys, label=impl if impl != TORCH else "torch (clamp into out)", **style)
        if peak:
            ax.axhline(peak, color="red", linestyle=":", label=peak_label)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.0f}" if str(int(v))[0] in "2345" else ""))
        ax.set_xlabel("total traffic, MB (2 x numel x element size)")
        ax.set_title(dtype)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        drawn[dtype] = [ln.get_label() for ln in ax.get_lines()]
    axes[0][0].set_ylabel("GB/s (median of rounds)")
    axes[0][0].set_ylim(0, top * 1.08)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


class Progress:
    """tqdm when installed, else a plain counter on stderr."""

    def __init__(self, total, desc):
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="timing", file=sys.stderr)
        except ImportError:
            self._bar = None
        self.total, self.done, self.desc = total, 0, desc

    def __call__(self, n=1):
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.done == self.total or self.done % max(1, self.total // 50) == 0:
            print(f"\r{self.desc}: {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
        else:
            print(file=sys.stderr)


# ---- correctness: the bit rule and guard regions ----------------------------------
_INT_VIEW = {"float32": "int32", "float16": "int16", "bfloat16": "int16"}
SPECIAL_BITS = {  # NaN payloads (quiet, signalling, negative), +-inf, +-0, denormals
    "float32": [0x7FC00000, 0x7F800001, -0x003FFFFF, 0x7F800000, -0x00800000, -0x80000000, 0, 1,
                -0x7FFFFFFF, 0x007FFFFF, -0x7F800001, 0x3F800000, -0x40800000],
    "float16": [0x7E00, 0x7C01, -0x01FF, 0x7C00, -0x0400, -0x8000, 0, 1, -0x7FFF, 0x03FF, -0x7C01,
                0x3C00, -0x4400],
    "bfloat16": [0x7FC0, 0x7F81, -0x003F, 0x7F80, -0x0080, -0x8000, 0, 1, -0x7FFF, 0x007F, -0x7F81,
                 0x3F80, -0x4080],
}


def _torch():
    import torch

    return torch


bits = relu_semantics.bits            # the element bits as integers, flattened
bit_rule = relu_semantics.bit_rule    # y = +0.0 if x < 0 else x, on the bits


def check_input(numel, dtype, device, seed=0):
    """randn with the special values spliced in at the start, middle and end."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(numel, generator=g, dtype=torch.float32).to(getattr(torch, dtype))
    sp = torch.tensor(SPECIAL_BITS[dtype], dtype=getattr(torch, _INT_VIEW[dtype])).view(getattr(torch, dtype))
    for start in (0, max(0, numel // 2 - len(sp) // 2), max(0, numel - len(sp))):
        k = min(len(sp), numel - start)
        x[start:start + k] = sp[:k]
    return x.to(device)


def guarded(numel, dtype, device):
    """(out, buf): out = buf[GUARD:GUARD+numel]; the rest of buf holds SENTINEL."""
    torch = _torch()
    buf = torch.full((numel + 2 * GUARD,), SENTINEL, dtype=getattr(torch, dtype), device=device)
    return buf[GUARD:GUARD + numel], buf


def _guard_and_input(x, buf, x_before):
    torch = _torch()
    fails, n = [], x.numel()
    sentinel = torch.full((GUARD,), SENTINEL, dtype=buf.dtype, device=buf.device)
    if not (torch.equal(bits(buf[:GUARD]), bits(sentinel)) and torch.equal(bits(buf[GUARD + n:]), bits(sentinel))):
        fails.append(f"numel {n}: guard region overwritten")
    if x_before is not None and not torch.equal(bits(x.reshape(-1)), bits(x_before.reshape(-1))):
        fails.append(f"numel {n}: input modified")
    return fails


def check_output(x, out, buf, x_before=None):
    """Failures (list of strings) of one call's result under the bit rule; [] when correct.
    This is the rungs' gate."""
    torch = _torch()
    fails = []
    n = x.numel()
    ref = bit_rule(x.reshape(-1))
    if not torch.equal(bits(out.reshape(-1)), bits(ref)):
        wrong = int((bits(out.reshape(-1)) != bits(ref)).sum())
        fails.append(f"numel {n}: {wrong} elements differ from the bit rule")
    return fails + _guard_and_input(x, buf, x_before)


def check_output_torch(x, out, buf, x_before=None, diff=None):
    """The torch baseline's check, as torch specifies relu: values equal to max(x, 0) with
    +0.0 == -0.0, NaN exactly where x is NaN, guards and input untouched. Where its bits
    differ from the bit rule (sign of zero, NaN payloads) `diff` (a Differences) counts it:
    a note, not a failure. Wrong values fail."""
    fails = relu_semantics.value_failures(x, out)
    if diff is not None and not fails:
        diff.add(x, out)
    return fails + _guard_and_input(x, buf, x_before)


def _run_checks(call, dtype, device, sizes, checker):
    fails = []
    for n in sizes:
        x = check_input(n, dtype, device, seed=n)
        x_before = x.clone()
        out, buf = guarded(n, dtype, device)
        try:
            call(x, out)
        except Exception as e:  # noqa: BLE001 - reported as a failure of this implementation
            fails.append(f"numel {n}: raised {type(e).__name__}: {e}")
            continue
        if device != "cpu":
            _torch().cuda.synchronize()
        fails += checker(x, out, buf, x_before)
    return fails


def check_impl(call, dtype, device, sizes=CHECK_SIZES):
    """Run call(x, out) on the check inputs under the bit rule; list of failures ([] = correct)."""
    return _run_checks(call, dtype, device, sizes, check_output)


def check_baseline(call, dtype, device, sizes=CHECK_SIZES):
    """(failures, Differences): the torch baseline on the same inputs, checked as torch
    specifies relu (check_output_torch); the Differences say where it departs from the bit rule."""
    diff = relu_semantics.Differences(dtype)
    fails = _run_checks(call, dtype, device, sizes, lambda x, out, buf, xb: check_output_torch(x, out, buf, xb, diff))
    return fails, diff


def flydsl_path_ran(stats_before, stats_after, rung, dtype):
    """None if every call since stats_before took the FlyDSL path of `rung`, else why not."""
    key = f"flydsl/{rung}/{dtype}"
    delta = {k: v - stats_before.get(k, 0) for k, v in stats_after.items() if v != stats_before.get(k, 0)}
    other = {k: v for k, v in delta.items() if k != key}
    if other:
        return f"calls took other paths: {other}"
    if delta.get(key, 0) == 0:
        return f"no call reached {key}"
    return None


# ---- GPU mode ---------------------------------------------------------------------
def gfx950_device():
    """(True, name) if device 0 is a gfx950, else (False, why not)."""
    torch = _torch()
    if torch.version.hip is None:
        return False, f"torch {torch.__version__} is not a ROCm build"
    if not torch.cuda.is_available():
        return False, "torch sees no ROCm device"
    arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    if arch != "gfx950":
        return False, f"device 0 is {arch}, not gfx950"
    return True, torch.cuda.get_device_name(0)


def load_relu(variant=None):
    """The relu_flydsl module: a built variant folder via kernels, or the repo source."""
    if variant:
        from kernels import get_local_kernel

        return get_local_kernel(Path(variant))
    sys.path.insert(0, str(ROOT / "torch-ext"))
    import relu_flydsl

    return relu_flydsl


def time_launches(fn, iters=ITERS, warmup=WARMUP):
    """Seconds per launch: device events around `iters` launches after `warmup`."""
    torch = _torch()
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def _impl_call(mod, impl):
    torch = _torch()
    if impl == TORCH:
        return lambda x, out: torch.clamp(x, min=0, out=out)
    return lambda x, out: mod.relu(x, out=out, rung=impl)


DEVICE = "cuda"  # torch's name for the GPU, CUDA or ROCm; tests run the GPU path on "cpu"


def _device_name():
    return _torch().cuda.get_device_name(0) if DEVICE != "cpu" else "cpu"


def _sync():
    if DEVICE != "cpu":
        _torch().cuda.synchronize()


def any_gpu():
    """(True, name) if torch sees a GPU (CUDA or ROCm), else (False, why not)."""
    torch = _torch()
    if not torch.cuda.is_available():
        build = f"ROCm {torch.version.hip}" if torch.version.hip else (
            f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only")
        return False, f"torch {torch.__version__} ({build} build) sees no CUDA or ROCm GPU"
    return True, torch.cuda.get_device_name(0)


def peak_for(device_name, gfx950=False):
    """(GB/s, label) of the peak line the report assumes; (None, reason) when none is known."""
    if gfx950:
        return PEAK_GBPS, PEAK_LABEL
    for key, gb, label in PEAKS:
        if key in device_name:
            return gb, label
    return None, f"no peak known for {device_name}"


def crosscheck(fn, harness_seconds, traffic):
    """The harness's median against an independent timer, triton.testing.do_bench (median,
    L2 flushed between runs), on the same call and buffers. ratio = harness GB/s / do_bench GB/s."""
    try:
        from triton.testing import do_bench
    except Exception as e:  # noqa: BLE001 - no Triton (or a broken one): say so, time nothing
        return {"available": False, "reason": f"triton.testing is not importable ({type(e).__name__}: {e})"}
    ms = do_bench(fn, return_mode="median")
    return {"available": True, "timer": "triton.testing.do_bench(return_mode='median')", "do_bench_us": ms * 1e3,
            "do_bench_gbps": gbps(traffic, ms / 1e3), "harness_us": harness_seconds * 1e6,
            "ratio": ms / 1e3 / harness_seconds}


def run_gpu(args, baseline=False):
    """Correctness, then timing. baseline=True: torch only, on any GPU torch sees (no FlyDSL)."""
    torch = _torch()
    if baseline:
        mod, impls = None, [TORCH]
    else:
        mod = load_relu(args.variant)
        impls = list(args.rungs) + [TORCH]
    device = DEVICE
    peak, _ = args.peak
    all_cases = cases(tuple(args.dtypes), tuple(args.sweeps))
    print(f"device: {_device_name()}; torch {torch.__version__}; "
          f"{len(all_cases)} cases x {len(impls)} implementations; {args.rounds} rounds of "
          f"{args.warmup} warm-ups + {args.iters} timed launches; median reported")

    # 1. correctness before any timing: rungs on the bit rule, torch as torch specifies relu
    failed, check_notes = {}, {}  # (impl, dtype) -> reason; dtype -> torch's departure from the bit rule
    for dtype in args.dtypes:
        for impl in impls:
            if impl == TORCH:
                fails, diff = check_baseline(_impl_call(mod, impl), dtype, device)
                if diff.any:
                    check_notes[dtype] = diff.note()
                how = "values as torch specifies relu: +0.0 == -0.0, NaN where NaN; guards; input"
            else:
                before = mod.dispatch_stats()
                fails = check_impl(_impl_call(mod, impl), dtype, device)
                why = flydsl_path_ran(before, mod.dispatch_stats(), impl, dtype)
                if why:
                    fails.append(why)
                how = "bit rule; guards; input; FlyDSL path"
            status = f"ok [{how}]" if not fails else "FAILED: " + "; ".join(fails[:3])
            print(f"check {impl:5s} {dtype:8s} {status}")
            if impl == TORCH and dtype in check_notes and not fails:
                print(f"      {check_notes[dtype]}")
            if fails:
                failed[(impl, dtype)] = "; ".join(fails[:3])

    # 2. timing, case by case, round-robin across implementations
    rows = []
    bar = Progress(len(all_cases) * len(impls) * args.rounds, "timing")
    for case in all_cases:
        case_failed = {i: failed[(i, case.dtype)] for i in impls if (i, case.dtype) in failed}
        live = [i for i in impls if i not in case_failed]
        x0 = check_input(case.numel, case.dtype, device, seed=1).view(case.shape)
        bufs = {}
        for impl in live:  # separate input and output buffers per implementation
            out, buf = guarded(case.numel, case.dtype, device)
            bufs[impl] = (x0.clone(), out.view(case.shape), buf, x0)
        calls = {i: _bind(_impl_call(mod, i), bufs[i][0], bufs[i][1]) for i in live}
        stats_before = mod.dispatch_stats() if mod else {}
        samples = collect_samples(live, lambda i: time_launches(calls[i], args.iters, args.warmup),
                                  args.rounds, bar)
        _sync()
        stats_after = mod.dispatch_stats() if mod else {}
        notes = {}
        for impl in live:  # the timed buffers are guarded and checked too
            x, out, buf, x_before = bufs[impl]
            if impl == TORCH:
                diff = relu_semantics.Differences(case.dtype)
                fails = check_output_torch(x, out, buf, x_before, diff)
                notes[impl] = diff.note()
            else:
                fails = check_output(x, out, buf, x_before)
                key = f"flydsl/{impl}/{case.dtype}"
                if stats_after.get(key, 0) - stats_before.get(key, 0) != args.rounds * (args.iters + args.warmup):
                    fails.append(f"not every timed call took {key}")
            if fails:
                case_failed[impl] = "; ".join(fails[:3])
                samples.pop(impl, None)
        case_rows = summarize(case, samples, case_failed, peak=peak, notes=notes)
        for r in case_rows:
            if r["impl"] == TORCH and r["gbps"] is not None:
                r["crosscheck"] = crosscheck(calls[TORCH], r["median_us"] / 1e6, case.traffic)
        rows += case_rows
        del bufs, calls, x0
        if DEVICE != "cpu":
            torch.cuda.empty_cache()
    bar.close()
    return rows, impls, check_notes


def _bind(call, x, out):
    return lambda: call(x, out)


def gpu_main(args, baseline=False):
    gpu = _device_name()
    args.peak = peak_for(gpu, gfx950=not baseline)
    rows, impls, check_notes = run_gpu(args, baseline)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "baseline" if baseline else "ladder"
    meta = environment()
    observed = relu_semantics.observe_torch(DEVICE)  # what torch does to -0.0, NaN payloads, denormals here
    peak, peak_label = args.peak
    meta.update(mode="baseline" if baseline else "gpu",
                method=f"device events around {args.iters} launches after {args.warmup} warm-ups; median of "
                       f"{args.rounds} rounds round-robin; GB/s = 2 x numel x element size / time",
                checks={"rungs": "bit rule y = +0.0 if x < 0 else x on the bits; guards; input; FlyDSL path",
                        TORCH: "values equal to max(x, 0) with +0.0 == -0.0; NaN where x is NaN; guards; input; "
                               "departures from the bit rule reported as notes"},
                torch_check_notes=check_notes, torch_relu_observed=observed,
                peak_gbps=peak, peak_label=peak_label, command=" ".join([Path(sys.executable).name] + sys.argv))
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    write_csv(rows, out / f"{stem}.csv")
    what = "torch baseline" if baseline else "relu-flydsl ladder"
    try:
        plot(rows, out / f"{stem}.png", impls, peak=peak, peak_label=peak_label, title=f"{what} on {gpu}")
        png = f", {stem}.png"
    except ImportError as e:
        png = f" (no {stem}.png: {e})"
    print()
    print(f"GB/s (median of rounds); {peak_label}")
    print(baseline_table(rows) if baseline else ladder_table(rows, impls))
    ccs = [r for r in rows if (r.get("crosscheck") or {}).get("available")]
    if ccs:
        ratios = [r["crosscheck"]["ratio"] for r in ccs]
        print(f"\ncross-check, torch: harness GB/s / triton.testing.do_bench GB/s (median, L2 flushed) = "
              f"{statistics.median(ratios):.3f} (median of {len(ratios)} cases, range {min(ratios):.3f}..{max(ratios):.3f})")
    else:
        why = next((r["crosscheck"]["reason"] for r in rows if r.get("crosscheck")), "torch was not timed")
        print(f"\ncross-check unavailable: {why}")
    print(f"\nwhat torch does on this device (bits; {observed['device']}):")
    for op, obs in observed["ops"].items():
        print(f"  {op}: {relu_semantics.summary(obs)}")
    bad = sorted({r["impl"] for r in rows if r["gbps"] is None})
    if bad:
        print(f"\nnot reported (failed correctness): {', '.join(bad)}")
    print(f"\nwrote {out}/{stem}.json, {stem}.csv{png}")
    return 1 if bad else 0


def environment():
    torch = _torch()
    env = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
           "cpu": platform.processor() or platform.machine()}
    try:
        import flydsl

        env["flydsl"] = getattr(flydsl, "__version__", "?")
    except ImportError:
        env["flydsl"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


# ---- no-GPU mode --------------------------------------------------------------------
@dataclass
class Section:
    title: str
    available: bool
    text: str                       # what is printed
    data: dict = field(default_factory=dict)
    reason: str = ""                # why it is unavailable


def section_isa():
    sys.path.insert(0, str(ROOT / "tools"))
    import isa

    with contextlib.redirect_stdout(io.StringIO()):  # FlyDSL prints one line per ISA dump
        isas = isa.collect()
    data = {f"{i.rung}/{i.dtype}": {"vec": i.vec, "instructions": len(i.body), "memory_instructions": len(i.memops),
                                    "vgprs": i.vgprs, "sgprs": i.sgprs, "scratch_bytes": i.scratch_bytes,
                                    "memops": [m.text for m in i.memops]} for i in isas}
    return Section("gfx950 ISA per rung (compiled here with COMPILE_ONLY, tools/isa.py)", True, isa.table(isas), data)


def _subprocess_section(name, title, timeout):
    """Run one section in its own process (each loads its own stand-in libamdhip64)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--section", name]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Section(title, False, "", reason=f"timed out after {timeout} s")
    marker = "@@SECTION@@"
    if p.returncode != 0 or marker not in p.stdout:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return Section(title, False, "", reason=f"subprocess exited {p.returncode}: " + " | ".join(tail))
    payload = json.loads(p.stdout.split(marker, 1)[1])
    return Section(**payload)


VGPU_NUMEL = 65536      # every rung: whole blocks only and <= 4096 waves (one emulator batch)
VGPU_MAX_BATCH_WAVES = 4096  # tools/vgpu Emulator's default batch


def section_vgpu():
    """Emulated instructions per byte moved per rung, from the virtual gfx950 (tools/vgpu/):
    the real code objects launched through FlyDSL's own host path, run by the emulator."""
    title = "emulated instructions per byte moved (virtual gfx950, tools/vgpu/, deterministic)"
    for p in (ROOT / "tools", ROOT / "torch-ext"):
        sys.path.insert(0, str(p))
    try:
        import toolchain
        import vgpu
    except ImportError as e:
        return Section(title, False, "", reason=f"tools/vgpu is not importable here ({e})")
    toolchain.apply()
    os.environ.pop("COMPILE_ONLY", None)  # the kernels must be launchable in this process
    dev = vgpu.device()
    import relu_flydsl
    from relu_flydsl import _dispatch
    from relu_flydsl.flash_relu_rocm.registry import RUNGS as REG

    from vgpu.serve import serve

    serve(dev, relu_flydsl)  # CPU tensors as gfx950 memory; canary launches kept apart from dev.launches
    rows, data = [], {}
    for dtype in ("bfloat16", "float16", "float32"):
        for rung in RUNGS:
            r = REG[rung]
            vec = r.max_vec(dtype)
            assert VGPU_NUMEL % (r.block * vec * r.unroll) == 0
            dev.reset()
            x = check_input(VGPU_NUMEL, dtype, "cpu", seed=3)
            x_before = x.clone()
            out, buf = guarded(VGPU_NUMEL, dtype, "cpu")
            dev.register(x, name="x", writable=False)
            dev.register(out, name="out")
            stats0 = relu_flydsl.dispatch_stats()
            n0 = len(dev.launches)
            relu_flydsl.relu(x, out=out, rung=rung)
            fails = []
            try:
                dev.check()
            except Exception as e:  # noqa: BLE001 - an invalid access is a failed check
                fails.append(str(e))
            fails += check_output(x, out, buf, x_before)
            why = flydsl_path_ran(stats0, relu_flydsl.dispatch_stats(), rung, dtype)
            if why:
                fails.append(why)
            launches = dev.launches[n0:]
            if len(launches) != 1:
                fails.append(f"{len(launches)} launches reached the virtual device, expected 1")
            if fails:
                data[f"{rung}/{dtype}"] = {"failed": fails}
                rows.append((rung, dtype, "FAILED: " + "; ".join(fails[:2])))
                continue
            rec = launches[0]
            blocks = rec.grid[0] * rec.grid[1] * rec.grid[2]
            threads = rec.block[0] * rec.block[1] * rec.block[2]
            waves = blocks * -(-threads // 64)
            assert waves <= VGPU_MAX_BATCH_WAVES  # one batch, whole tiles: every wave runs every step
            per_wave = rec.instructions
            total = per_wave * waves
            moved = traffic_bytes(VGPU_NUMEL, dtype)
            d = {"numel": VGPU_NUMEL, "kernel": rec.kernel, "grid": list(rec.grid), "block": list(rec.block),
                 "vec": vec, "waves": waves, "instructions_per_wave": per_wave, "wave_instructions": total,
                 "bytes_moved": moved, "wave_instructions_per_kib": 1024 * total / moved,
                 "bytes_per_wave_instruction": moved / total, "bit_exact_and_guards_ok": True}
            data[f"{rung}/{dtype}"] = d
            rows.append((rung, dtype, d))
    head = ("rung", "dtype", "vec", "grid x block", "waves", "instr/wave", "wave-instr", "bytes moved",
            "wave-instr per KiB", "bytes per wave-instr", "checks")
    lines = [head]
    for rung, dtype, d in rows:
        if isinstance(d, str):
            lines.append((rung, dtype) + ("",) * 8 + (d,))
            continue
        lines.append((rung, dtype, str(d["vec"]), f"{d['grid'][0]} x {d['block'][0]}", str(d["waves"]),
                      str(d["instructions_per_wave"]), str(d["wave_instructions"]), str(d["bytes_moved"]),
                      f"{d['wave_instructions_per_kib']:.2f}", f"{d['bytes_per_wave_instruction']:.0f}",
                      "bit-exact, guards ok"))
    widths = [max(len(l[c]) for l in lines) for c in range(len(head))]
    text = [f"one launch per row, numel {VGPU_NUMEL}; an emulator step issues one instruction to every wave of "
            "the batch (here one batch, whole tiles: steps = instructions per wave); wave-instr = instr/wave x waves"]
    text += ["  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    text.insert(2, "  ".join("-" * w for w in widths))
    return Section(title, True, "\n".join(text), data)


def parse_host_overhead(stdout):
    """{path: median us} from host_overhead.py's table."""
    med = {}
    for line in stdout.splitlines():
        for name in ("relu_flydsl", "CompiledFunction", "torch.relu"):
            rest = line[len(name):]
            if line.startswith(name) and rest[:1] == " " and not rest.lstrip().startswith("2-D"):
                try:
                    med[name] = float(rest.split()[0])
                except (ValueError, IndexError):
                    pass
    return med


def section_host(timeout=600):
    """benchmarks/host_overhead.py in its own process (it loads the no-op libamdhip64):
    host time per relu(x, out=y) through FlyDSL's launch path vs torch.relu eager on CPU."""
    title = "host time per call: relu(x, out=y) via FlyDSL + no-op HIP vs torch.relu eager (CPU, 1 element)"
    script = HERE / "host_overhead.py"
    if not script.exists():
        return Section(title, False, "", reason="benchmarks/host_overhead.py is not in this checkout")
    cmd = [sys.executable, str(script), "--dtype", "bfloat16"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Section(title, False, "", reason=f"{script.name} timed out after {timeout} s")
    med = parse_host_overhead(p.stdout)
    if "relu_flydsl" not in med or "torch.relu" not in med:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return Section(title, False, "", reason=f"{script.name} exited {p.returncode}: " + " | ".join(tail))
    ratio = med["relu_flydsl"] / med["torch.relu"]
    text = p.stdout.rstrip() + (f"\nrelu_flydsl / torch.relu (host time per call) = {ratio:.2f}"
                                f"  [{' '.join(Path(c).name if i < 2 else c for i, c in enumerate(cmd))}]")
    return Section(title, True, text, {"median_us": med, "relu_flydsl_over_torch_relu": ratio,
                                       "exit_status": p.returncode, "command": cmd[1:]})


SECTIONS = {"vgpu": section_vgpu}


def nogpu_main(args, why):
    t0 = time.perf_counter()
    print(f"No gfx950 device here ({why}).")
    print("DEVICE BANDWIDTH WAS NOT MEASURED: nothing below is a GB/s figure. On an MI350X/MI355X run")
    print("    python benchmarks/ladder.py")
    print("for the timed ladder. What this machine can report:\n")
    sections = []
    for k, (label, fn) in enumerate((("isa", section_isa),
                                     ("vgpu", lambda: _subprocess_section("vgpu", "virtual gfx950", 900)),
                                     ("host", section_host)), 1):
        t = time.perf_counter()
        try:
            s = fn()
        except Exception as e:  # noqa: BLE001 - a broken section is reported, not hidden
            s = Section(label, False, "", reason=f"{type(e).__name__}: {e}")
        s.data["seconds"] = round(time.perf_counter() - t, 1)
        sections.append(s)
        print(f"[{k}/3] {s.title}")
        print(s.text if s.available else f"UNAVAILABLE: {s.reason}")
        print()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"mode": "nogpu", "device_bandwidth_measured": False, "why_no_gpu": why, "environment": environment(),
           "command": " ".join([Path(sys.executable).name] + sys.argv),
           "sections": [asdict(s) for s in sections]}
    (out / "nogpu.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}/nogpu.json ({time.perf_counter() - t0:.0f} s). Device bandwidth was not measured.")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "results"), help="results folder (default results/)")
    p.add_argument("--mode", choices=("auto", "gpu", "nogpu", "baseline"), default="auto",
                   help="auto: gpu on a gfx950, else nogpu; baseline: torch only, on any GPU")
    p.add_argument("--rungs", nargs="+", default=list(RUNGS), choices=RUNGS)
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"], choices=sorted(ELEMENT_BYTES))
    p.add_argument("--sweeps", nargs="+", default=["shapes", "band"], choices=("shapes", "band"))
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--iters", type=int, default=ITERS)
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--variant", help="time a built variant folder (relu-build/build/torch-rocm) instead of the source")
    p.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)  # internal: one no-GPU section
    args = p.parse_args(argv)

    if args.section:
        s = SECTIONS[args.section]()
        print("@@SECTION@@" + json.dumps(asdict(s)))
        return 0
    if args.mode == "baseline":
        has_gpu, what = any_gpu()
        if not has_gpu:
            print(f"ladder.py --mode baseline: NO GPU HERE: {what}. Nothing was timed.\n"
                  "The baseline mode times torch's relu on a CUDA or ROCm GPU. On this machine run\n"
                  "    python benchmarks/ladder.py\n"
                  "for the no-GPU report.", file=sys.stderr)
            return 2
        return gpu_main(args, baseline=True)
    ok, why = gfx950_device()
    if args.mode == "gpu" and not ok:
        p.error(f"--mode gpu needs a gfx950 device: {why}")
    if args.mode == "nogpu" or not ok:
        return nogpu_main(args, why if not ok else "--mode nogpu")
    return gpu_main(args)


if __name__ == "__main__":
    sys.exit(main())
