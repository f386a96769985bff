"""Host time of relu(x, out=y) against an earlier release's runtime, both loaded in one process.

    .venv/bin/python benchmarks/compare_host.py [--against 849434f] [--dtype float32] [--rounds 41] [--calls 3000]
    add --stream HANDLE to launch on another stream than the null stream, --clock thread to time
    this thread's CPU time, --json FILE to also write the result as JSON

What it measures: the host time per call of `relu(x, out=y)` on 1-element tensors (where
host time is all there is) of this checkout's package ("new") and of the package at git
revision --against ("old"; default 849434f, the last release whose kernels were
JIT-compiled through FlyDSL and launched through FlyDSL's compiled host entry), and their
ratio new/old. 1.00 means no regression; below 1 the new runtime is faster.

How:
- The old package is extracted with `git archive REV torch-ext flash_relu_rocm build.toml`
  into a temporary folder and imported there as relu_flydsl_<rev> (its flash_relu_rocm
  link and build.toml resolve inside that folder). Its _ops._UNIQUE_ID is rewritten, so
  both packages register their torch.library ops under namespaces of their own. A
  revision that serves prebuilt code objects (it has _objects.py) gets a copy of this
  checkout's code_objects/ (git-ignored, so not in the archive): host time does not
  depend on the kernels' code.
- One HIP library serves both: the no-op libamdhip64.so.7 of tools/noop_hip, loaded before
  either package binds one (FlyDSL's runtime, which the old package launches through,
  binds to it as well). Every launch reaches the HIP library and does nothing there, so what
  is timed is the host work of a call.
- CPU tensors are presented as a gfx950 by the stub benchmarks/host_overhead.py uses, put in
  place of each package's _dispatch.device_info; its stream is --stream (default 0: the null
  stream, torch's default stream, where the new fast path launches with hipDrvLaunchKernelEx;
  on any other handle it launches with hipModuleLaunchKernel).
- The first-use canary is off for both (RELU_FLYDSL_CANARY=0: the no-op device runs no
  kernel, so no canary could pass); the timed calls are the steady state a verified kernel
  reaches. The old package compiles its kernel with FlyDSL at its first call (untimed;
  tools/toolchain.py points FlyDSL at the gfx950 linker).
- Warm-up calls (untimed) make each package's fast path ready; then it is checked that
  each serves relu(x, out=y) from its fast path (a ready fast-path entry; for a FlyDSL
  release, its FlyDSL direct launch).
- Rounds: each round times `calls` calls of new, of old and of torch.clamp_min(x, 0, out=y)
  (context: torch's own kernel into out), the order of new and old swapped every other
  round, gc off. The ratio is taken round by round, and its median over rounds reported,
  never a ratio of medians taken from different rounds.
- After timing, each package's dispatch_stats() must have counted every timed call on its
  kernel path (flydsl/<rung>/<dtype>), and the no-op library must have seen one launch per
  timed call; how many went through hipDrvLaunchKernelEx is printed.
"""

import argparse
import gc
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from benchmarks.host_overhead import gfx950_stub, paired, per_call

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_AGAINST = "849434f"
BUILD_HINT = ".venv/bin/python -m flash_relu_rocm.build"
CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}
NEW, OLD, TORCH = "new relu(x, out=y)", "old relu(x, out=y)", "torch.clamp_min(x, 0, out=y)"


def say(message):
    print(f"compare_host: {message}", flush=True)


def extract_all(t: tarfile.TarFile, dest: Path, filtered: bool = hasattr(tarfile, "data_filter")):
    """t's members under dest, nothing outside it: tarfile's "data" filter where this Python has
    it (3.11.4+); elsewhere (Debian 12's 3.11.2) the members are checked first, more strictly:
    files, folders and symbolic links only, no absolute name, no `..` in a name, no path through
    a link (so each path means what it reads as), every link's target inside dest; no
    setuid/setgid/sticky bit, no group or other write."""
    if filtered:
        t.extractall(dest, filter="data")
        return
    members = t.getmembers()
    links = {PurePosixPath(m.name).as_posix() for m in members if m.issym()}

    def refuse(m, why):
        raise tarfile.TarError(f"{m.name}: {why}; nothing extracted into {dest}")

    for m in members:
        parts = PurePosixPath(m.name).parts
        if not (m.isfile() or m.isdir() or m.issym()):
            refuse(m, "not a file, folder or symbolic link")
        if not parts or m.name.startswith("/") or ".." in parts:
            refuse(m, "a name outside the folder")
        if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            refuse(m, "a path through a link")
        if m.issym():
            walk = list(parts[:-1])
            for part in PurePosixPath(m.linkname).parts:
                if part.startswith("/") or (part == ".." and not walk):
                    refuse(m, f"links outside the folder ({m.linkname})")
                if part == "..":
                    walk.pop()
                elif part != ".":
                    walk.append(part)
                    if "/".join(walk) in links:
                        refuse(m, f"links through a link ({m.linkname})")
        m.mode &= 0o755
    t.extractall(dest, members=members)


def extract(rev: str, dest: Path) -> str:
    """The package at `rev`, under dest/torch-ext/ as relu_flydsl_<rev> with its own
    op namespace; returns the package name."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "torch-ext", "flash_relu_rocm",
                              "build.toml"], check=True, capture_output=True).stdout
    tar = dest / "old.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        extract_all(t, dest)
    tag = re.sub(r"\W", "_", rev)
    name = f"relu_flydsl_{tag}"
    pkg = dest / "torch-ext" / name
    (dest / "torch-ext" / "relu_flydsl").rename(pkg)
    ops = pkg / "_ops.py"
    text, n = re.subn(r'^_UNIQUE_ID = ".*"$', f'_UNIQUE_ID = "old_{tag}"', ops.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{rev}: expected one _UNIQUE_ID line in torch-ext/relu_flydsl/_ops.py, found {n}")
    ops.write_text(text)
    if (pkg / "_objects.py").exists() and not (pkg / "code_objects").exists():
        shutil.copytree(ROOT / "torch-ext" / "relu_flydsl" / "code_objects", pkg / "code_objects")
    return name


def fast_path_ready(pkg) -> bool:
    """One relu(x, out=y) entry is ready for `pkg`'s fast path."""
    d = pkg._dispatch
    if hasattr(d, "STATE") and hasattr(d.STATE, "replay"):  # the compiled entry's entries
        return d.STATE.replay is not None and d.STATE.replay.entries() == 1
    if hasattr(d, "STATE"):  # prebuilt code objects, the Python fast path: entries in STATE.fast
        return len(d.STATE.fast) == 1
    entries = getattr(d, "_fast", {})  # FlyDSL releases: the entry's direct launch is set
    return len(entries) == 1 and all(e.direct for e in entries.values())


def stats_delta(before: dict, after: dict) -> dict:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default=DEFAULT_AGAINST, help=f"the old revision (default {DEFAULT_AGAINST})")
    # the dtypes both runtimes serve: the default revision, 849434f, served no int8
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--calls", type=int, default=3000, help="calls per row per round")
    parser.add_argument("--stream", type=lambda s: int(s, 0), default=0,
                        help="the stream handle device_info reports (default 0, the null stream)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="wall: time.perf_counter (default); thread: this thread's CPU time "
                             "(time.thread_time), which leaves out time the thread was not running")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)

    # Before either package binds a HIP library or FlyDSL's runtime loads (see the docstring).
    os.environ["RELU_FLYDSL_CANARY"] = "0"
    from tools import noop_hip, toolchain

    hip = noop_hip.load()
    toolchain.apply()

    import torch

    import relu_flydsl as new
    from relu_flydsl import _objects

    missing = _objects.unavailable()
    if missing:
        sys.exit(f"compare_host: {missing}. Build them: {BUILD_HINT}")
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.against], check=True,
                         capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="relu-flydsl-compare-") as tmp:
        say(f"extracting {args.against} ({rev}) into {tmp}")
        name = extract(args.against, Path(tmp))
        sys.path.insert(0, str(Path(tmp) / "torch-ext"))  # the extracted package, importable by its new name
        old = importlib.import_module(name)
        return run(args, rev, torch, hip, new, old)


def run(args, rev, torch, hip, new, old):
    for pkg in (new, old):  # CPU tensors presented as a gfx950 on --stream, as host_overhead.py does
        if hasattr(pkg, "_compiled_entry"):
            from vgpu.serve import present_cpu_as

            present_cpu_as(pkg, stream=args.stream)  # both device hooks
        else:
            pkg._dispatch.device_info = gfx950_stub(pkg._dispatch, args.stream)
    x = torch.randn(1).to(getattr(torch, args.dtype))
    y = torch.empty_like(x)
    new_relu, old_relu = new.relu, old.relu
    jit = not hasattr(old._dispatch, "STATE")
    say(f"first calls{' (the old package JIT-compiles its kernel with FlyDSL)' if jit else ''}")
    t0 = time.perf_counter()
    for _ in range(3):  # the first call plans and loads (old: compiles); the next ones reach the fast path
        new_relu(x, out=y)
        old_relu(x, out=y)
    say(f"ready after {time.perf_counter() - t0:.1f} s")
    key = f"flydsl/{new._dispatch.STATE.current().default_rung}/{args.dtype}"
    for label, pkg in (("new", new), ("old", old)):
        stats = pkg.dispatch_stats()
        if stats != {key: 3}:
            sys.exit(f"compare_host: the {label} package did not take {key}: dispatch_stats() = {stats}")
        if not fast_path_ready(pkg):
            sys.exit(f"compare_host: the {label} package's fast path is not ready after its first calls")

    rows = {NEW: lambda: new_relu(x, out=y), OLD: lambda: old_relu(x, out=y),
            TORCH: lambda: torch.clamp_min(x, 0, out=y)}
    orders = ((NEW, OLD, TORCH), (OLD, NEW, TORCH))
    times = {n: [] for n in rows}
    before = {"new": new.dispatch_stats(), "old": old.dispatch_stats()}
    launches, ex_launches = hip.noop_hip_launch_count(), hip.noop_hip_launch_ex_count()
    clock, step = CLOCKS[args.clock], max(1, args.rounds // 4)
    say(f"timing {args.rounds} rounds x {args.calls} calls per row")
    gc.disable()
    try:
        for i in range(args.rounds):
            for n in orders[i % 2]:
                times[n].append(per_call(rows[n], args.calls, clock=clock))
            if (i + 1) % step == 0 and i + 1 < args.rounds:
                say(f"  {i + 1}/{args.rounds} rounds")
    finally:
        gc.enable()
    timed = args.rounds * args.calls
    stats = {label: stats_delta(before[label], pkg.dispatch_stats()) for label, pkg in (("new", new), ("old", old))}
    for label, got in stats.items():
        if got != {key: timed}:
            sys.exit(f"compare_host: not every timed {label} call took {key}: dispatch_stats() grew by {got}")
    launched = hip.noop_hip_launch_count() - launches
    if launched != 2 * timed:
        sys.exit(f"compare_host: launches seen by the no-op HIP library: {launched}, expected {2 * timed}")
    ex = hip.noop_hip_launch_ex_count() - ex_launches  # only the new package calls it

    median = {n: statistics.median(t) for n, t in times.items()}
    print(f"host time per call, relu(x, out=y), {args.dtype}, 1 element; new: this checkout, old: {rev}; "
          f"no-op libamdhip64 (tools/noop_hip), CPU presented as gfx950, stream {args.stream:#x}, canary off; "
          f"path: {key}; median of {args.rounds} rounds x {args.calls} calls, {args.clock} clock")
    print(f"{'call':<34}{'median us':>11}{'min us':>10}{'max us':>10}")
    for n, t in times.items():
        print(f"{n:<34}{median[n] * 1e6:>11.3f}{min(t) * 1e6:>10.3f}{max(t) * 1e6:>10.3f}")
    ratios = {"new / old": paired(times, NEW, OLD), "new / torch.clamp_min": paired(times, NEW, TORCH),
              "old / torch.clamp_min": paired(times, OLD, TORCH)}
    print("paired ratios (median over rounds of the per-round ratio):")
    for n, v in ratios.items():
        print(f"  {n:<24} {v:6.3f}")
    per_round = sorted(p / q for p, q in zip(times[NEW], times[OLD]))
    q1, q3 = per_round[len(per_round) // 4], per_round[(3 * len(per_round)) // 4]
    print(f"new / old per round: min {per_round[0]:.3f}, quartiles {q1:.3f}-{q3:.3f}, max {per_round[-1]:.3f}")
    print(f"dispatch_stats() of the timed calls: new {stats['new']}, old {stats['old']}; "
          f"new launches through hipDrvLaunchKernelEx: {ex} of {timed}")
    if args.json:
        doc = {"against": rev, "dtype": args.dtype, "rounds": args.rounds, "calls": args.calls,
               "stream": args.stream, "clock": args.clock, "path": key,
               "rows": {n: {"median_us": median[n] * 1e6, "min_us": min(t) * 1e6, "max_us": max(t) * 1e6}
                        for n, t in times.items()},
               "paired": ratios, "per_round_new_over_old": per_round, "dispatch_stats": stats,
               "launches": launched, "ex_launches": ex}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
