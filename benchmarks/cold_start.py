"""Cold start: time to the first relu() result in a fresh process.

    python benchmarks/cold_start.py [--runs 5] [--dtype bfloat16]
    python benchmarks/cold_start.py --canary-cost      # the canary's size and emulated cost per kernel

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
import) is reported apart from relu_flydsl's share. The no-op device runs no
kernel, so no first-use canary could pass there: those scenarios run with
RELU_FLYDSL_CANARY=0. The canary's cost is measured on the virtual gfx950
(tools/vgpu), where kernels really run (emulated): first call with the canary
off and on (warm disk cache), and the ratio.
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
from contextlib import contextmanager
from relu_flydsl import _canary
@contextmanager
def _host_memory(nbytes, device):  # the no-op device's "memory" (warmup() loads modules with a launch)
    yield torch.empty(nbytes, dtype=torch.uint8)
_canary.device_memory = _host_memory
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


# The canary's cost: the same first call on the virtual gfx950 (kernels emulated),
# canary off or on. The canary's memory comes from the test suite's hook.
VGPU_CHILD = r"""
import json, os, sys, time
sys.path[:0] = [{root!r}, {root!r} + "/torch-ext", {root!r} + "/tools", {root!r} + "/tests"]
import toolchain
toolchain.apply()
os.environ.pop("COMPILE_ONLY", None)
import vgpu
dev = vgpu.device()
import torch
import relu_flydsl
from relu_flydsl import _canary, _dispatch
from vgpu.serve import serve
serve(dev, relu_flydsl)
dtype = getattr(torch, {dtype!r})
x = (torch.randn(1 << 16) * 4).to(dtype); y = torch.empty_like(x)
dev.register(x, name="x"); dev.register(y, name="y")
import flydsl.compiler
from relu_flydsl.flash_relu_rocm import cache
from relu_flydsl.flash_relu_rocm.registry import RUNGS
rung = RUNGS[_dispatch.settings.default_rung]
cache.compiled(rung, {dtype!r}, rung.max_vec({dtype!r}))  # compiled (disk cache), not yet loaded or run
t0 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t1 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t2 = time.perf_counter()
assert relu_flydsl.dispatch_stats() == {{"flydsl/v5/{dtype}": 2}}, relu_flydsl.dispatch_stats()
print(json.dumps(dict(first_call=t1 - t0, second_call=t2 - t1, canary_launches=len(dev.canary_launches))))
"""


def run_vgpu_child(cache_dir, dtype, canary):
    env = dict(os.environ, FLYDSL_RUNTIME_CACHE_DIR=str(cache_dir), RELU_FLYDSL_CANARY="1" if canary else "0")
    p = subprocess.run([sys.executable, "-c", VGPU_CHILD.format(root=str(ROOT), dtype=dtype)],
                       capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        sys.exit(f"virtual-device child failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def canary_cost():
    """Per kernel (every rung x dtype at its widest vector, and the x1 kernels):
    the canary's length, its input/output bytes, the whole guarded allocation,
    and its emulated cost on the virtual gfx950 (waves, instructions per wave,
    wave-instructions). Runs in this process."""
    for p in (ROOT / "tools", ROOT / "torch-ext", ROOT / "tests"):
        sys.path.insert(0, str(p))
    import toolchain

    toolchain.apply()
    os.environ.pop("COMPILE_ONLY", None)
    os.environ.pop("RELU_FLYDSL_CANARY", None)
    import vgpu

    dev = vgpu.device()
    import relu_flydsl
    from relu_flydsl import _canary, _dispatch
    from relu_flydsl.flash_relu_rocm.registry import DTYPES, ELEMENT_BYTES, RUNGS
    from vgpu.serve import serve

    serve(dev, relu_flydsl)
    print("first-use canary per kernel (virtual gfx950, deterministic; one canary per kernel and device)")
    print(f"{'kernel':<22}{'elements':>10}{'x+out bytes':>13}{'allocation':>12}{'launches':>10}{'waves':>7}"
          f"{'instr/wave':>12}{'wave-instr':>12}{'ms here':>13}")
    rows = []
    for name, rung in RUNGS.items():
        for dtype in DTYPES:
            for vec in sorted({1, rung.max_vec(dtype)}):
                before = len(dev.canary_launches)
                key = (name, dtype, vec, 0)
                _dispatch.warmup(dtype, rungs=name, vecs=(vec,))  # compile, load the module, first canary
                assert _dispatch._canaries.get(key, "missing") is None, (key, _dispatch._canaries.get(key))
                del _dispatch._canaries[key]  # run it again, timed alone
                before = len(dev.canary_launches)
                t0 = time.perf_counter()
                _dispatch.warmup(dtype, rungs=name, vecs=(vec,))
                ms = (time.perf_counter() - t0) * 1e3
                assert _dispatch._canaries.get(key, "missing") is None, (key, _dispatch._canaries.get(key))
                launches = dev.canary_launches[before:]
                c = _canary.Canary(rung, dtype, vec)
                waves = sum(r.grid[0] * -(-r.block[0] // 64) for r in launches)
                per_wave = max(r.instructions for r in launches)
                total = sum(r.instructions * r.grid[0] * -(-r.block[0] // 64) for r in launches)
                rows.append((f"{name}/{dtype}/x{vec}", c.n, 2 * c.nbytes, c.total, len(launches), waves, per_wave, total, ms))
    for r in rows:
        print(f"{r[0]:<22}{r[1]:>10}{r[2]:>13}{r[3]:>12}{r[4]:>10}{r[5]:>7}{r[6]:>12}{r[7]:>12}{r[8]:>13.1f}")
    print("elements = one tile + half a tile + one vector (a partial last block); allocation = x + out + "
          "three sentinel guards of at least a tile; ms = one canary here, module already loaded: set-up and "
          "check on the host plus the emulated launch (a real gfx950 runs the launch in microseconds)")
    return rows


def run_child(cache_dir, dtype, warmup):
    env = dict(os.environ, FLYDSL_RUNTIME_CACHE_DIR=str(cache_dir), RELU_FLYDSL_CANARY="0")
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
    ap.add_argument("--canary-cost", action="store_true", help="print the canary's size and cost per kernel, then exit")
    args = ap.parse_args(argv)
    if args.canary_cost:
        canary_cost()
        return

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
        canary_rows = {False: [], True: []}
        for i in range(args.runs):  # the cache cold-0 is warm by now
            for canary in (False, True):
                canary_rows[canary].append(run_vgpu_child(tmp / "cold-0", args.dtype, canary))
                print(f"\rcold start: canary runs {2 * i + canary + 1}/{2 * args.runs}", end="", file=sys.stderr,
                      flush=True)
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

    on = [r["first_call"] for r in canary_rows[True]]
    off = [r["first_call"] for r in canary_rows[False]]
    ratios = sorted(a / b for a, b in zip(on, off))
    print(f"first call on the virtual gfx950 (kernels emulated; warm disk cache), {args.dtype}, 65536 elements, "
          f"median of {args.runs} processes, ms:")
    print(f"  canary off {statistics.median(off) * 1e3:.2f}   canary on {statistics.median(on) * 1e3:.2f}   "
          f"ratio on/off {statistics.median(ratios):.2f} (per-process pairs {ratios[0]:.2f}-{ratios[-1]:.2f}); "
          f"canary launches per process: {canary_rows[True][0]['canary_launches']} (off: "
          f"{canary_rows[False][0]['canary_launches']})")
    print("  (emulation makes every launch ~1000x slower than a gfx950: the canary's share here is an upper bound)")


if __name__ == "__main__":
    main()
