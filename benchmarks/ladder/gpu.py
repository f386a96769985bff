"""The gpu and baseline modes: correctness first, then timing, then the report.

gpu (a gfx950 device): every asked rung and torch (`torch.clamp(x, min=0, out=out)`, as in
the reference post, "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels").
The rungs come from a RungSource (rungs.py, `--rungs-from`): the shipped kernels, or a
stand-in that runs every step of this mode on any GPU.
baseline (any GPU torch sees, CUDA or ROCm): torch alone, no FlyDSL, no `kernels`. A rung that fails a check gets no bandwidth number; exit status 1 then.
"""

import json
import platform
import shlex
import statistics
import sys
from pathlib import Path

from .. import relu_semantics
from . import checks, report, rungs, timing
from .cases import cases
from .progress import Progress
from .report import TORCH

DEVICE = "cuda"  # torch's name for the GPU, CUDA or ROCm; the tests run this mode on "cpu"


def _torch():
    import torch

    return torch


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


def any_gpu():
    """(True, name) if torch sees a GPU (CUDA or ROCm), else (False, why not)."""
    torch = _torch()
    if not torch.cuda.is_available():
        build = f"ROCm {torch.version.hip}" if torch.version.hip else (
            f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only")
        return False, f"torch {torch.__version__} ({build} build) sees no CUDA or ROCm GPU"
    return True, torch.cuda.get_device_name(0)


def load_relu(variant=None):
    """The relu_flydsl module: a built variant folder via kernels, or the repo source."""
    if variant:
        from kernels import get_local_kernel

        return get_local_kernel(Path(variant))
    import relu_flydsl

    return relu_flydsl


def _device_name():
    return _torch().cuda.get_device_name(0) if DEVICE != "cpu" else "cpu"


def _impl_call(mod, impl):
    torch = _torch()
    if impl == TORCH:
        return lambda x, out: torch.clamp(x, min=0, out=out)
    return lambda x, out: mod.relu(x, out=out, rung=impl)


def _bind(call, x, out):
    return lambda: call(x, out)


def check_all(mod, impls, dtypes, sizes=None):
    """Correctness before any timing, on `sizes` (default checks.CHECK_SIZES).
    ({(impl, dtype): reason}, {dtype: torch's note})."""
    failed, notes = {}, {}
    for dtype in dtypes:
        for impl in impls:
            if impl == TORCH:
                fails, diff = checks.check_baseline(_impl_call(mod, impl), dtype, DEVICE, sizes)
                if diff.any:
                    notes[dtype] = diff.note()
                how = "values as torch specifies relu: +0.0 == -0.0, NaN where NaN; guards; input"
            else:
                before = mod.dispatch_stats()
                fails = checks.check_impl(_impl_call(mod, impl), dtype, DEVICE, sizes)
                why = checks.kernel_path_ran(before, mod.dispatch_stats(), impl, dtype)
                if why:
                    fails.append(why)
                how = "bit rule; guards; input; kernel path"
            status = f"ok [{how}]" if not fails else "FAILED: " + "; ".join(fails[:3])
            print(f"check {impl:5s} {dtype:8s} {status}")
            if impl == TORCH and dtype in notes and not fails:
                print(f"      {notes[dtype]}")
            if fails:
                failed[(impl, dtype)] = "; ".join(fails[:3])
    return failed, notes


def time_case(case, mod, impls, failed, args, peak, bar):
    """Rows of one case: round-robin timing, then the timed buffers checked again, and the
    kernel-path counts of exactly this window."""
    torch = _torch()
    case_failed = {i: failed[(i, case.dtype)] for i in impls if (i, case.dtype) in failed}
    live = [i for i in impls if i not in case_failed]
    method = timing.method_for(case.traffic)
    x0 = checks.check_input(case.numel, case.dtype, DEVICE, seed=1).view(case.shape)
    bufs = {}
    for impl in live:  # separate input and output buffers per implementation
        out, buf = checks.guarded(case.numel, case.dtype, DEVICE)
        bufs[impl] = (x0.clone(), out.view(case.shape), buf, x0)
    calls = {i: _bind(_impl_call(mod, i), bufs[i][0], bufs[i][1]) for i in live}
    stats_before = mod.dispatch_stats() if mod else {}
    host = method == timing.EVENTS_HOST
    samples = timing.collect_samples(
        live, lambda i: timing.time_launches(calls[i], args.iters, args.warmup, host=host), args.rounds, bar)
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    stats_after = mod.dispatch_stats() if mod else {}
    launches = args.rounds * (args.iters + args.warmup)
    expected = {i: (f"flydsl/{i}/{case.dtype}", launches) for i in live if i != TORCH}
    case_failed.update(checks.window_failures(stats_before, stats_after, expected))
    notes = {}
    for impl in live:  # the timed buffers are guarded and checked too
        x, out, buf, x_before = bufs[impl]
        if impl == TORCH:
            diff = relu_semantics.Differences(case.dtype)
            fails = checks.check_output_torch(x, out, buf, x_before, diff)
            notes[impl] = diff.note()
        else:
            fails = checks.check_output(x, out, buf, x_before)
        if fails:
            case_failed[impl] = "; ".join(fails[:3])
    for impl in case_failed:
        samples.pop(impl, None)
    rows = report.summarize(case, samples, case_failed, peak=peak, notes=notes, method=method)
    for r in rows:
        if r["impl"] == TORCH and r["gbps"] is not None:
            r["crosscheck"] = timing.crosscheck(calls[TORCH], r["median_us"] / 1e6, case.traffic)
    bufs.clear()  # free this case's tensors before the next case allocates
    calls.clear()  # (emptied, not deleted: the timing lambda above still refers to it)
    del x0
    if DEVICE != "cpu":
        torch.cuda.empty_cache()
    return rows


def run_gpu(args, baseline=False, source=None):
    """Correctness, then timing. baseline=True: torch only, on any GPU torch sees (no FlyDSL).
    The rungs come from `source` (a rungs.RungSource; default the shipped kernels)."""
    torch = _torch()
    if baseline:
        mod, impls = None, [TORCH]
    else:
        source = source or rungs.source()
        mod = source.load(args.variant)
        impls = list(args.rungs) + [TORCH]
    peak, _ = args.peak
    all_cases = cases(tuple(args.dtypes), tuple(args.sweeps))
    print(f"device: {_device_name()}; torch {torch.__version__}; "
          f"{len(all_cases)} cases x {len(impls)} implementations; {args.rounds} rounds of "
          f"{args.warmup} warm-ups + {args.iters} timed launches; median reported")
    if not baseline:
        print(f"rungs: {source.what}")
    failed, check_notes = check_all(mod, impls, args.dtypes)
    rows = []
    timed = sum(1 for c in all_cases for i in impls if (i, c.dtype) not in failed)  # a failed check is not timed
    bar = Progress(timed * args.rounds, "timing")
    for case in all_cases:
        rows += time_case(case, mod, impls, failed, args, peak, bar)
    bar.close()
    return rows, impls, check_notes


def environment():
    torch = _torch()
    env = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
           "cpu": platform.processor() or platform.machine()}
    try:  # the installed distribution's version: importing flydsl is not needed, and can fail otherwise
        from importlib.metadata import PackageNotFoundError, version

        env["flydsl"] = version("flydsl")
    except PackageNotFoundError:
        env["flydsl"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def command(args):
    """The command line as typed from the repository root (under -m, sys.argv[0] is __main__.py's
    path; main(argv) called from Python has its own argv)."""
    argv = getattr(args, "argv", None)
    argv = sys.argv[1:] if argv is None else argv
    return " ".join([Path(sys.executable).name, "-m", "benchmarks.ladder"] + [shlex.quote(a) for a in argv])


def gpu_main(args, baseline=False, source=None):
    source = None if baseline else (source or rungs.source())
    gpu = _device_name()
    on_gfx950 = source is not None and source.gfx950
    args.peak = report.peak_for(gpu, gfx950=on_gfx950)
    rows, impls, check_notes = run_gpu(args, baseline, source)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "baseline" if baseline else "ladder"
    meta = environment()
    observed = relu_semantics.observe_torch(DEVICE)  # what torch does to -0.0, NaN payloads, denormals here
    peak, peak_label = args.peak
    meta.update(mode="baseline" if baseline else "gpu", rungs_from=None if baseline else source.name,
                rungs=None if baseline else source.what,
                method={m: timing.describe(m, args.iters, args.warmup, args.rounds)
                        for m in (timing.EVENTS, timing.EVENTS_HOST)},
                host_timed_below_bytes=timing.HOST_TIMED_BELOW,
                gbps="2 x numel x element size / median device time per launch",
                checks={"rungs": "bit rule y = +0.0 if x < 0 else x on the bits; guards; input; kernel path",
                        TORCH: "values equal to max(x, 0) with +0.0 == -0.0; NaN where x is NaN; guards; input; "
                               "departures from the bit rule reported as notes"},
                torch_check_notes=check_notes, torch_relu_observed=observed,
                crossings=report.crossings(rows),
                peak_gbps=peak, peak_label=peak_label, command=command(args))
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    report.write_csv(rows, out / f"{stem}.csv")
    what = "torch baseline" if baseline else (
        "relu-flydsl ladder" if on_gfx950 else f"relu-flydsl ladder harness, {source.what},")
    try:
        report.plot(rows, out / f"{stem}.png", impls, peak=peak, peak_label=peak_label, title=f"{what} on {gpu}",
                    caches=on_gfx950 or any(k in gpu for k in ("MI350", "MI355")))
        png = f", {stem}.png"
    except ImportError as e:
        png = f" (no {stem}.png: {e})"
    print()
    print(f"GB/s (median of rounds); {peak_label}")
    print(report.baseline_table(rows) if baseline else report.ladder_table(rows, impls))
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
