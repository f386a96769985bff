"""Cold start: time to the first relu() result in a fresh process.

    python benchmarks/cold_start.py [--runs 5] [--dtype bfloat16]

Each run is a new Python process that imports relu_flydsl and calls
relu(x, out=y) once on the FlyDSL path (FlyDSL's real compile and launch path;
the HIP library is the no-op stand-in of tools/noop_hip, so no device work is
timed, and CPU tensors are presented as gfx950 memory). Scenarios:

  cold disk cache   an empty FlyDSL cache folder: the first call traces and compiles
  warm disk cache   the folder the cold runs filled: the first call loads the kernel
  warmup() first    warm cache; warmup() called before the first call (time shown separately)
  in memory         FlyDSL's disk cache unusable (a file where the folder should be):
                    compiled in memory with one warning, as relu() does then

Medians over --runs processes. The process's own start-up (interpreter, torch
import) is reported apart from relu_flydsl's share.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time, warnings
t_start = time.perf_counter()
sys.path[:0] = [{root!r}, {root!r} + "/torch-ext"]
from tools import noop_hip, toolchain
toolchain.apply()
noop_hip.load()
import torch
t_torch = time.perf_counter()
import relu_flydsl
from relu_flydsl import _dispatch
t_import = time.perf_counter()
_dispatch.device_info = lambda t: _dispatch.DeviceInfo("gfx950", 0)
x = torch.randn(1 << 16).to(getattr(torch, {dtype!r})); y = torch.empty_like(x)
t_fly = time.perf_counter()
import flydsl.compiler  # what relu()'s first FlyDSL call would import; timed on its own
t_warm = time.perf_counter()
if {warmup!r}:
    relu_flydsl.warmup(({dtype!r},))
t0 = time.perf_counter()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    relu_flydsl.relu(x, out=y)
t1 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t2 = time.perf_counter()
stats = relu_flydsl.dispatch_stats()
assert stats == {{"flydsl/v5/{dtype}": 2}}, stats
print(json.dumps(dict(torch_import=t_torch - t_start, package_import=t_import - t_torch,
                      flydsl_import=t_warm - t_fly, warmup=t0 - t_warm, first_call=t1 - t0,
                      to_first_result=t1 - t_fly, second_call=t2 - t1,
                      warnings=[str(m.message)[:120] for m in w])))
"""


def run_child(cache_dir, dtype, warmup):
    env = dict(os.environ, FLYDSL_RUNTIME_CACHE_DIR=str(cache_dir))
    code = CHILD.format(root=str(ROOT), dtype=dtype, warmup=warmup)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"child failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    result["process_wall"] = wall
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "float16", "bfloat16"))
    args = ap.parse_args(argv)

    rows = {}
    with tempfile.TemporaryDirectory(prefix="relu-cold-") as tmp:
        tmp = Path(tmp)
        blocker = tmp / "not-a-folder"
        blocker.write_text("")
        scenarios = [
            ("cold disk cache", lambda i: tmp / f"cold-{i}", False),
            ("warm disk cache", lambda i: tmp / "cold-0", False),
            ("warmup() first", lambda i: tmp / "cold-0", True),
            ("in memory", lambda i: blocker / "cache", False),
        ]
        total = args.runs * len(scenarios)
        done = 0
        for name, cache_dir, warmup in scenarios:
            rows[name] = []
            for i in range(args.runs):
                rows[name].append(run_child(cache_dir(i), args.dtype, warmup))
                done += 1
                print(f"\rcold start: {done}/{total} processes", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)

    def med(name, key):
        return statistics.median(r[key] for r in rows[name]) * 1e3

    print(f"time to first relu() result in a fresh process, {args.dtype}, 65536 elements, FlyDSL path "
          f"(no-op HIP: host work only), median of {args.runs} processes, ms")
    cols = ("package_import", "flydsl_import", "warmup", "first_call", "to_first_result", "second_call")
    print("to_first_result = flydsl_import + warmup + first_call (torch's own import and the interpreter excluded)")
    print(f"{'scenario':<18}" + "".join(f"{c:>16}" for c in cols))
    for name in rows:
        print(f"{name:<18}" + "".join(f"{med(name, c):>16.2f}" for c in cols))
    warned = {w for r in rows["in memory"] for w in r["warnings"]}
    print(f"in-memory runs warned once each: {all(len(r['warnings']) == 1 for r in rows['in memory'])} ({'; '.join(sorted(warned))[:160]})")
    print(f"torch import (not ours): {med('cold disk cache', 'torch_import'):.0f} ms; whole process: "
          f"{med('cold disk cache', 'process_wall'):.0f} ms cold, {med('warm disk cache', 'process_wall'):.0f} ms warm")


if __name__ == "__main__":
    main()
