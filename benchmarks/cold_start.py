"""Cold start: time to the first relu() result in a fresh process, prebuilt code objects
against a JIT compile through FlyDSL, side by side on this machine.

    .venv/bin/python benchmarks/cold_start.py [--runs 5] [--dtype bfloat16]
    .venv/bin/python benchmarks/cold_start.py --canary-cost   # the canary's size and emulated cost per kernel

Each run is a new Python process; the scenarios of run i run back to back, so each
ratio is taken per run (paired) and its median reported. The HIP library is the no-op
stand-in of tools/noop_hip (no device work is timed; CPU tensors are presented as gfx950
memory), and the canary is off there (the no-op device runs no kernel, so no canary could
pass); its cost is measured apart on the virtual gfx950 (below). Scenarios:

  prebuilt objects    what the package does: relu(x, out=y)'s first call reads the
                      shipped code object, checks its sha256, hipModuleLoadData,
                      hipModuleGetFunction, plans and launches. No FlyDSL is imported
                      (checked: `flydsl` is not in sys.modules afterwards).
  JIT, cold cache     what a first call cost when kernels were compiled at serve time:
                      `import flydsl.compiler`, flyc.compile of the same kernel with an
                      empty FlyDSL cache folder, and its first launch (module load)
  JIT, warm cache     the same with the FlyDSL disk cache the cold runs filled

first_result = the package's import + everything the first call needed (FlyDSL's import
and compile for JIT) + the first call; torch's own import and the interpreter are reported
apart. The canary: the prebuilt first call on the virtual gfx950 (tools/vgpu, kernels
emulated), canary off and on, and their ratio (an upper bound of its share: emulation
makes a launch ~1000x slower than a gfx950 runs it).
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

from flash_relu_rocm.dtypes import DTYPES

ROOT = Path(__file__).resolve().parent.parent
NUMEL = 1 << 16

PREBUILT_CHILD = r"""
import json, sys, time, warnings
t_start = time.perf_counter()
from tools import noop_hip
noop_hip.load()
import torch
t_torch = time.perf_counter()
import relu_flydsl
from relu_flydsl import _dispatch
t_import = time.perf_counter()
from vgpu.serve import present_cpu_as
present_cpu_as(relu_flydsl)  # CPU tensors as a gfx950, for both device hooks
x = torch.randn({numel}).to(getattr(torch, {dtype!r})); y = torch.empty_like(x)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    t0 = time.perf_counter()
    relu_flydsl.relu(x, out=y)
    t1 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t2 = time.perf_counter()
stats = relu_flydsl.dispatch_stats()
assert stats == {{"flydsl/v5/{dtype}": 2}}, stats
assert "flydsl" not in sys.modules, "the serve path imported flydsl"
print(json.dumps(dict(torch_import=t_torch - t_start, package_import=t_import - t_torch, flydsl_import=0.0,
                      compile=0.0, first_call=t1 - t0, second_call=t2 - t1,
                      first_result=(t_import - t_torch) + (t1 - t0), warnings=[str(m.message) for m in w])))
"""

# The serve-time JIT the prebuilt objects replace: FlyDSL's import, flyc.compile of the
# kernel relu() would choose, and its first launch through FlyDSL (which loads the module).
JIT_CHILD = r"""
import json, sys, time, warnings
t_start = time.perf_counter()
import toolchain
toolchain.apply()
from tools import noop_hip
noop_hip.load()
import torch
t_torch = time.perf_counter()
import relu_flydsl
from relu_flydsl.flash_relu_rocm import plan
from relu_flydsl.flash_relu_rocm.registry import RUNGS, DEFAULT_RUNG
t_import = time.perf_counter()
x = torch.randn({numel}).to(getattr(torch, {dtype!r})); y = torch.empty_like(x)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    t0 = time.perf_counter()
    import flydsl.compiler as flyc
    t1 = time.perf_counter()
    rung = RUNGS[DEFAULT_RUNG]
    p = plan.plan(rung, {dtype!r}, x.numel(), x.data_ptr(), y.data_ptr())
    grid = p.launches[0].grid
    kernel = flyc.compile(rung.build({dtype!r}, p.vec), x, y, grid, 0)
    t2 = time.perf_counter()
    kernel(x, y, grid, 0)
    t3 = time.perf_counter()
kernel(x, y, grid, 0)
t4 = time.perf_counter()
print(json.dumps(dict(torch_import=t_torch - t_start, package_import=t_import - t_torch, flydsl_import=t1 - t0,
                      compile=t2 - t1, first_call=t3 - t2, second_call=t4 - t3,
                      first_result=(t_import - t_torch) + (t3 - t0), warnings=[str(m.message) for m in w])))
"""

# The canary's cost: the prebuilt first call on the virtual gfx950 (kernels emulated),
# canary off or on. The canary's memory comes from tools/vgpu/serve.py.
VGPU_CHILD = r"""
import json, os, sys, time
import toolchain
toolchain.apply()
os.environ.pop("COMPILE_ONLY", None)
import vgpu
dev = vgpu.device()
import torch
import relu_flydsl
from vgpu.serve import serve
serve(dev, relu_flydsl)
dtype = getattr(torch, {dtype!r})
x = (torch.randn({numel}) * 4).to(dtype); y = torch.empty_like(x)
dev.register(x, name="x"); dev.register(y, name="y")
t0 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t1 = time.perf_counter()
relu_flydsl.relu(x, out=y)
t2 = time.perf_counter()
assert relu_flydsl.dispatch_stats() == {{"flydsl/v5/{dtype}": 2}}, relu_flydsl.dispatch_stats()
print(json.dumps(dict(first_call=t1 - t0, second_call=t2 - t1, canary_launches=len(dev.canary_launches))))
"""


def run_child(code, env_extra):
    env = dict(os.environ, **env_extra)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"cold_start: a child process failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr[-3000:]}")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    result["process_wall"] = wall
    return result


def canary_cost():
    """Per kernel (every rung x dtype at its widest vector, and the x1 kernels): the
    canary's length, its input/output bytes, the whole guarded allocation, and its
    emulated cost on the virtual gfx950 (waves, instructions per wave, wave-instructions).
    Runs in this process."""
    import toolchain

    toolchain.apply()
    os.environ.pop("COMPILE_ONLY", None)
    os.environ.pop("RELU_FLYDSL_CANARY", None)
    import vgpu

    dev = vgpu.device()
    import relu_flydsl
    from relu_flydsl import _canary, _dispatch
    from relu_flydsl._state import STATE
    from relu_flydsl.flash_relu_rocm.registry import DTYPES, RUNGS
    from vgpu.serve import serve

    serve(dev, relu_flydsl)
    print("first-use canary per kernel (virtual gfx950, deterministic; one canary per kernel and device)")
    print(f"{'kernel':<22}{'elements':>10}{'x+out bytes':>13}{'allocation':>12}{'launches':>10}{'waves':>7}"
          f"{'instr/wave':>12}{'wave-instr':>12}{'ms here':>13}")
    rows = []
    for name, rung in RUNGS.items():
        for dtype in DTYPES:
            for vec in sorted({1, rung.max_vec(dtype)}):
                key = (name, dtype, vec, 0)
                _dispatch.warmup(dtype, rungs=name, vecs=(vec,))  # module load and the first canary
                verdict = STATE.verdicts.get(key, "missing")
                if verdict is not None:
                    sys.exit(f"cold_start --canary-cost: the canary of {name}/{dtype}/x{vec} did not pass: {verdict}")
                del STATE.verdicts[key]  # run it again, timed alone
                before = len(dev.canary_launches)
                t0 = time.perf_counter()
                _dispatch.warmup(dtype, rungs=name, vecs=(vec,))
                ms = (time.perf_counter() - t0) * 1e3
                if STATE.verdicts.get(key, "missing") is not None:
                    sys.exit(f"cold_start --canary-cost: the second canary of {name}/{dtype}/x{vec} did not pass")
                launches = dev.canary_launches[before:]
                c = _canary.Canary(rung, dtype, vec)
                waves = sum(r.grid[0] * -(-r.block[0] // 64) for r in launches)
                per_wave = max(r.instructions for r in launches)
                total = sum(r.instructions * r.grid[0] * -(-r.block[0] // 64) for r in launches)
                rows.append((f"{name}/{dtype}/x{vec}", c.n, 2 * c.nbytes, c.total, len(launches), waves, per_wave,
                             total, ms))
    for r in rows:
        print(f"{r[0]:<22}{r[1]:>10}{r[2]:>13}{r[3]:>12}{r[4]:>10}{r[5]:>7}{r[6]:>12}{r[7]:>12}{r[8]:>13.1f}")
    print("elements = one tile + half a tile + one vector (a partial last block); allocation = x + out + "
          "three sentinel guards of at least a tile; ms = one canary here, module already loaded: set-up and "
          "check on the host plus the emulated launch (a real gfx950 runs the launch in microseconds)")
    return rows


def _progress(text):
    print(f"\rcold start: {text}", end="", file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    ap.add_argument("--canary-cost", action="store_true", help="print the canary's size and cost per kernel, then exit")
    args = ap.parse_args(argv)
    if args.canary_cost:
        canary_cost()
        return 0

    fmt = dict(dtype=args.dtype, numel=NUMEL)
    scenarios = ("prebuilt objects", "JIT, cold cache", "JIT, warm cache")
    rows = {name: [] for name in scenarios}
    canary = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="relu-cold-") as tmp:
        tmp = Path(tmp)
        total = args.runs * (len(scenarios) + 2)
        done = 0
        for i in range(args.runs):
            for name in scenarios:
                if name == "prebuilt objects":
                    r = run_child(PREBUILT_CHILD.format(**fmt), {"RELU_FLYDSL_CANARY": "0"})
                else:
                    cache = tmp / (f"cold-{i}" if name == "JIT, cold cache" else "cold-0")
                    r = run_child(JIT_CHILD.format(**fmt), {"FLYDSL_RUNTIME_CACHE_DIR": str(cache)})
                rows[name].append(r)
                done += 1
                _progress(f"{done}/{total} processes")
            for on in (False, True):
                canary[on].append(run_child(VGPU_CHILD.format(**fmt), {"RELU_FLYDSL_CANARY": "1" if on else "0"}))
                done += 1
                _progress(f"{done}/{total} processes")
        print(file=sys.stderr)

    def med(name, key):
        return statistics.median(r[key] for r in rows[name]) * 1e3

    print(f"time to the first relu() result in a fresh process, {args.dtype}, {NUMEL} elements, no-op HIP "
          f"(host work only), canary off, median of {args.runs} processes, ms")
    cols = ("package_import", "flydsl_import", "compile", "first_call", "first_result", "second_call")
    print(f"{'scenario':<18}" + "".join(f"{c:>16}" for c in cols))
    for name in rows:
        print(f"{name:<18}" + "".join(f"{med(name, c):>16.2f}" for c in cols))
    pre = [r["first_result"] for r in rows["prebuilt objects"]]
    for name in scenarios[1:]:
        ratios = sorted(p / j["first_result"] for p, j in zip(pre, rows[name]))
        print(f"first_result, prebuilt objects / {name}: {statistics.median(ratios):.3f} "
              f"(per-run pairs {ratios[0]:.3f}-{ratios[-1]:.3f}; {1 / statistics.median(ratios):.0f}x faster)")
    warned = sorted({w for rs in rows.values() for r in rs for w in r["warnings"]})
    print("warnings during first calls: " + ("none" if not warned else ""))
    for w in warned:
        print(f"  {w}")
    print(f"torch import (not ours): {med('prebuilt objects', 'torch_import'):.0f} ms; whole process: "
          f"{med('prebuilt objects', 'process_wall'):.0f} ms prebuilt, {med('JIT, cold cache', 'process_wall'):.0f} ms "
          f"JIT cold, {med('JIT, warm cache', 'process_wall'):.0f} ms JIT warm")

    on = [r["first_call"] for r in canary[True]]
    off = [r["first_call"] for r in canary[False]]
    ratios = sorted(a / b for a, b in zip(on, off))
    print(f"first call on the virtual gfx950 (prebuilt objects, kernels emulated), {args.dtype}, {NUMEL} elements, "
          f"median of {args.runs} processes, ms:")
    print(f"  canary off {statistics.median(off) * 1e3:.2f}   canary on {statistics.median(on) * 1e3:.2f}   "
          f"ratio on/off {statistics.median(ratios):.2f} (per-process pairs {ratios[0]:.2f}-{ratios[-1]:.2f}); "
          f"canary launches per process: {canary[True][0]['canary_launches']} (off: "
          f"{canary[False][0]['canary_launches']})")
    print("  (emulation makes every launch ~1000x slower than a gfx950: the canary's share here is an upper bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
