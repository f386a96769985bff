"""Host time per call of relu(x) and relu(x, out=y), paired with torch's own calls, on
1-element tensors (the size where host time is all there is).

    .venv/bin/python benchmarks/host_overhead.py [--dtype bfloat16] [--rounds 41] [--calls 3000]
    .venv/bin/python benchmarks/host_overhead.py --gpu [--calls 20000 --rounds 15]
    .venv/bin/python benchmarks/host_overhead.py --fallback    # the torch fallback on CPU tensors
    add --json FILE to also write the result as JSON

CPU mode (default where torch sees no GPU). The kernel path runs for real up to the HIP
library: the shipped code object is loaded with hipModuleLoadData and launched (on the null
stream hipDrvLaunchKernelEx, elsewhere hipModuleLaunchKernel) on a no-op libamdhip64.so.7
(tools/noop_hip/) that accepts every call and runs nothing, so what is timed is exactly the
host work of a call. Repeated calls go through the compiled entry (_compiled_entry.c), which
asks for the device itself: the tensor's DLPack device, torch's current-stream query
(DLPackCurrentWorkStream) and hipGetDevice. CPU torch has no GPU, so the tensors are CPU
tensors presented as device 0 (_compiled_entry.present_cpu): the stream query is torch's own
function asked for the CPU device, hipGetDevice the no-op library's. That is the modelled
query, the same C calls as on ROCm, and a lower bound of the real one (torch's ROCm stream
lookup does a little more). The general path's first call asks the dispatcher's
device_info(), replaced by a stub that presents CPU tensors as a gfx950 (stream 0); its
Python model ("device query (modelled)": the real query's Python steps with its two C calls
into the GPU runtime stood in by trivial ones) is timed apart, as what the Python path adds
where the compiled entry cannot load. "relu(x, out=y), Python path" is relu() with the
compiled entry switched off (_compiled_entry.use(False)): the path of a platform it cannot
load on, with the stub query. The GPU mode measures the real query.

GPU mode (--gpu; any CUDA or ROCm GPU torch sees): nothing is replaced. On a gfx950 the
kernel path runs; elsewhere every relu() call is the torch fallback (dispatch_stats() says
which), and the target is at most 1.15 x torch's own call on both forms: relu(x) against
torch.relu(x), relu(x, out=y) against torch.clamp_min(x, 0, out=y). Exit status 1 if not.

Fallback mode (--fallback): the path every CPU tensor, and every tensor on a GPU other
than a gfx950, takes (relu()'s fast path hands plain tensors to torch's kernel). Nothing is
replaced and the no-op HIP library is not loaded: CPU tensors, every timed relu() call the
torch fallback ("fallback/not a ROCm device", checked after timing), paired with torch's own
calls and held to the --gpu mode's target (exit status 1 if not met).

Rows run in this order within each round (methods interleaved, so a drift in the machine's
speed hits all alike); each pair is compared round by round (the median of per-round
ratios), never as a ratio of medians taken from different rounds:
  relu(x, out=y)              the package's public call into a preallocated out
  torch.clamp_min(x, 0, out=) torch.relu's own ATen kernel into out: relu(x, out=y)'s pair
  relu(x)                     allocating
  torch.relu(x)               allocating: relu(x)'s pair
  relu(x, out=y) 2-D          the same on a (1, 1) tensor
  relu(x, out=y) 4-D          on a contiguous (1, 2, 2, 2) tensor: the layouts' own comparison
                              (torch's DLPack description of a tensor of several dimensions
                              costs more than of one, in both rows)
  torch.clamp_min 4-D         its pair
  relu(x, out=y) channels_last  on a (1, 2, 2, 2) channels_last tensor (8 elements, not
                              contiguous), out of its strides; CPU mode: replayed by the
                              compiled entry like the contiguous rows
  torch.clamp_min channels_last its pair, on the same tensors
  relu(x, out=y) transposed   on a (2, 2) transposed view, out of its strides
  torch.clamp_min transposed  its pair
  relu(x) channels_last       allocating, the output with x's strides (torch.empty_like's)
  torch.relu channels_last    its pair
  relu(x, out=y), Python path the same with the compiled entry off: CPU mode only
  launch()                    the package's launch function (_launch.launch: argument
                              packing, the ctypes call, the error check; on the null
                              stream hipDrvLaunchKernelEx): CPU/gfx950 only
  floor                       a bare ctypes hipModuleLaunchKernel with pre-packed arguments
                              (_launch.prepacked): CPU/gfx950 only
  floor (Ex)                  the same with hipDrvLaunchKernelEx, the fast path's launch on
                              the null stream (prepacked(ex=True)): CPU/gfx950 only
  device query                CPU: the Python model above; GPU: the package's real device_info(x)
"""

import argparse
import functools
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

from flash_relu_rocm.dtypes import DTYPES


GPU_TARGET = 1.15
BUILD_HINT = ".venv/bin/python tools/build_variant.py"


def per_call(fn, calls, sync=None, clock=time.perf_counter):
    """Seconds per call of `calls` calls of fn (sync, when given, ends the batch on a GPU)."""
    t0 = clock()
    for _ in range(calls):
        fn()
    if sync is not None:
        sync()
    return (clock() - t0) / calls


def paired(times, a, b):
    """Median over rounds of (a's time / b's time) in the same round."""
    return statistics.median(x / y for x, y in zip(times[a], times[b]))


def as_called(relu, rung):
    """relu as a caller calls it: relu(x) and relu(x, out=y) exactly, unless --rung names a
    rung (then each call passes rung=, which costs a keyword argument)."""
    return relu if rung is None else functools.partial(relu, rung=rung)


def gfx950_stub(dispatch, stream=0):
    """A stand-in for dispatch.device_info on CPU: CPU tensors are device 0, a gfx950,
    current, on `stream`; anything else is no ROCm device."""
    gfx950 = dispatch.DeviceInfo("gfx950", stream)
    return lambda t: gfx950 if t.is_cpu else None


def modelled_device_query(torch, DeviceInfo):
    """The real device_info(x)'s Python steps, its two GPU-runtime C calls stood in by
    trivial C calls (see the module docstring). Presents CPU tensors as device 0, gfx950."""
    archs = {0: "gfx950"}
    is_initialized = torch.cuda.is_initialized   # real: current_device()'s first step
    get_device = abs                              # stands in for torch._C._cuda_getDevice()
    raw_stream = abs                              # stands in for torch._C._cuda_getCurrentRawStream(i)

    def lazy_init():  # torch.cuda._lazy_init(): an initialised runtime returns after this check
        if is_initialized():
            return

    def current_device():  # torch.cuda.current_device(): _lazy_init(), then the C call
        lazy_init()
        return get_device(0)

    def device_info(x):
        if not x.is_cpu:  # the real query tests x.is_cuda and the HIP build
            return None
        index = max(x.get_device(), 0)  # CPU tensors report -1
        arch = archs.get(index)
        return DeviceInfo(arch, raw_stream(index), index == current_device(), index)

    return device_info


def cpu_setup(args, torch):
    """(methods, check, meta): the timed callables on the no-op HIP library."""
    from tools import noop_hip

    # The no-op library computes nothing, so a first-use canary cannot pass on
    # it; off, the timed calls are the steady state a verified kernel reaches.
    os.environ["RELU_FLYDSL_CANARY"] = "0"
    hip = noop_hip.load()  # the process's libamdhip64 before the package binds one

    import relu_flydsl
    from relu_flydsl import _compiled_entry, _dispatch, _launch, _objects
    from relu_flydsl.flash_relu_rocm.registry import get_rung

    missing = _objects.unavailable() or _compiled_entry.not_loaded()
    if missing:
        sys.exit(f"host_overhead: {missing}. Build them: {BUILD_HINT}")
    stubbed = gfx950_stub(_dispatch)  # timed apart below
    modelled = modelled_device_query(torch, _dispatch.DeviceInfo)
    _dispatch.device_info = stubbed
    _compiled_entry.present_cpu(True)  # device 0, torch's CPU stream query, the no-op hipGetDevice

    dtype = getattr(torch, args.dtype)
    x = torch.randn(1).to(dtype)
    y = torch.empty_like(x)
    x2, y2 = x.view(1, 1), y.view(1, 1)
    # dense, not contiguous: out of x's strides (the kernel's and the compiled entry's rule)
    x4 = torch.randn(1, 2, 2, 2).to(dtype)
    y4 = torch.empty_like(x4)
    xc = x4.to(memory_format=torch.channels_last)
    yc = torch.empty_like(xc)
    xt = torch.randn(2, 2).to(dtype).t()
    yt = torch.empty_like(xt)
    assert not xc.is_contiguous() and not xt.is_contiguous() and yc.stride() == xc.stride() and yt.stride() == xt.stride()
    rung = get_rung(args.rung or _dispatch.STATE.current().default_rung)
    key = f"flydsl/{rung.name}/{args.dtype}"
    relu = as_called(relu_flydsl.relu, args.rung)

    relu(x, out=y)  # module load (hipModuleLoadData) and the plan, untimed
    relu(x4, out=y4)  # (the channels_last tensors' entry: same size and alignment)
    relu(xc, out=yc)
    relu(xt, out=yt)
    relu(xc)
    stats = relu_flydsl.dispatch_stats()
    if stats != {key: 5}:
        sys.exit(f"host_overhead: the kernel path was not taken: dispatch_stats() = {stats}")
    function = _objects.function(rung.name, args.dtype, 1, 0)  # numel 1 -> vector width 1
    xp, yp = x.data_ptr(), y.data_ptr()
    launch, config = _launch.launch, _launch.config(1, rung.block)
    floor = _launch.prepacked(function, rung.block, xp, yp, 1, 1, 0)
    floor_ex = _launch.prepacked(function, rung.block, xp, yp, 1, 1, 0, ex=True)

    def relu_python():  # around_round() switches the compiled entry off for this row's batch
        relu(x, out=y)

    methods = {
        "relu(x, out=y)": lambda: relu(x, out=y),
        "torch.clamp_min(x, 0, out=y)": lambda: torch.clamp_min(x, 0, out=y),
        "relu(x)": lambda: relu(x),
        "torch.relu(x)": lambda: torch.relu(x),
        "relu(x, out=y) 2-D": lambda: relu(x2, out=y2),
        "relu(x, out=y) 4-D": lambda: relu(x4, out=y4),
        "torch.clamp_min 4-D": lambda: torch.clamp_min(x4, 0, out=y4),
        "relu(x, out=y) channels_last": lambda: relu(xc, out=yc),
        "torch.clamp_min channels_last": lambda: torch.clamp_min(xc, 0, out=yc),
        "relu(x, out=y) transposed": lambda: relu(xt, out=yt),
        "torch.clamp_min transposed": lambda: torch.clamp_min(xt, 0, out=yt),
        "relu(x) channels_last": lambda: relu(xc),
        "torch.relu channels_last": lambda: torch.relu(xc),
        "launch()": lambda: launch(function, 1, rung.block, config, xp, yp, 1, 0),
        "floor": floor,
        "floor (Ex)": floor_ex,
        "device query (modelled)": lambda: modelled(x),
        "device query (stub)": lambda: stubbed(x),
        "relu(x, out=y), Python path": relu_python,
    }
    relu_rows = ("relu(x, out=y)", "relu(x)", "relu(x, out=y) 2-D", "relu(x, out=y) 4-D", "relu(x, out=y) channels_last",
                 "relu(x, out=y) transposed", "relu(x) channels_last", "relu(x, out=y), Python path")
    launch_rows = relu_rows + ("launch()", "floor", "floor (Ex)")

    def around_round(name):  # the Python-path row runs its whole batch with the compiled entry off
        if name == "relu(x, out=y), Python path":
            _compiled_entry.use(False)
            return lambda: _compiled_entry.use(True)
        return None

    launches_before = [hip.noop_hip_launch_count()]

    def start():
        relu_flydsl.reset_dispatch_stats()
        launches_before[0] = hip.noop_hip_launch_count()

    def check(calls_per_row):
        relu_calls = sum(calls_per_row[n] for n in relu_rows)
        stats = relu_flydsl.dispatch_stats()
        if stats != {key: relu_calls}:
            return f"not every timed relu call took {key}: dispatch_stats() = {stats}, expected {relu_calls}"
        launched = hip.noop_hip_launch_count() - launches_before[0]
        expected = sum(calls_per_row[n] for n in launch_rows)
        if launched != expected:
            return f"launches seen by the no-op HIP library: {launched}, expected {expected}"
        return None

    meta = {"mode": "cpu", "path": key, "device": "CPU, presented as gfx950; no-op libamdhip64 (tools/noop_hip)"}
    pairs = (("relu(x, out=y)", "torch.clamp_min(x, 0, out=y)"), ("relu(x)", "torch.relu(x)"),
             ("relu(x, out=y) 4-D", "torch.clamp_min 4-D"),
             ("relu(x, out=y) channels_last", "torch.clamp_min channels_last"),
             ("relu(x, out=y) transposed", "torch.clamp_min transposed"),
             ("relu(x) channels_last", "torch.relu channels_last"),
             ("relu(x, out=y), Python path", "torch.clamp_min(x, 0, out=y)"),
             ("relu(x, out=y)", "floor (Ex)"), ("launch()", "floor (Ex)"))
    return methods, start, check, around_round, meta, pairs, None


def fallback_setup(args, torch):
    """(methods, ...) for the torch fallback on CPU tensors: the real package, nothing stubbed."""
    import relu_flydsl

    dtype = getattr(torch, args.dtype)
    x = torch.randn(1).to(dtype)
    y = torch.empty_like(x)
    relu = as_called(relu_flydsl.relu, args.rung)
    relu_flydsl.reset_dispatch_stats()
    relu(x, out=y)
    relu(x)
    key = "fallback/not a ROCm device"
    stats = relu_flydsl.dispatch_stats()
    if stats != {key: 2}:
        sys.exit(f"host_overhead --fallback: the first calls did not take {key}: dispatch_stats() = {stats}")
    methods = {
        "relu(x, out=y)": lambda: relu(x, out=y),
        "torch.clamp_min(x, 0, out=y)": lambda: torch.clamp_min(x, 0, out=y),
        "relu(x)": lambda: relu(x),
        "torch.relu(x)": lambda: torch.relu(x),
    }

    def start():
        relu_flydsl.reset_dispatch_stats()

    def check(calls_per_row):
        n = calls_per_row["relu(x, out=y)"] + calls_per_row["relu(x)"]
        stats = relu_flydsl.dispatch_stats()
        if stats != {key: n}:
            return f"not every timed relu call took {key}: dispatch_stats() = {stats}, expected {n}"
        return None

    meta = {"mode": "fallback", "path": key, "device": "CPU tensors (the torch fallback, nothing replaced)",
            "torch": torch.__version__}
    pairs = (("relu(x, out=y)", "torch.clamp_min(x, 0, out=y)"), ("relu(x)", "torch.relu(x)"))
    return methods, start, check, (lambda name: None), meta, pairs, None


def gpu_setup(args, torch):
    import relu_flydsl
    from relu_flydsl import _dispatch

    dev = torch.device("cuda", torch.cuda.current_device())
    dtype = getattr(torch, args.dtype)
    x = torch.randn(1, device=dev).to(dtype)
    y = torch.empty_like(x)
    relu = as_called(relu_flydsl.relu, args.rung)
    relu(x, out=y)
    relu(x)
    torch.cuda.synchronize()
    paths = relu_flydsl.dispatch_stats()
    device_info = _dispatch.device_info
    methods = {
        "relu(x, out=y)": lambda: relu(x, out=y),
        "torch.clamp_min(x, 0, out=y)": lambda: torch.clamp_min(x, 0, out=y),
        "relu(x)": lambda: relu(x),
        "torch.relu(x)": lambda: torch.relu(x),
        "device query": lambda: device_info(x),
    }

    def start():
        relu_flydsl.reset_dispatch_stats()

    def check(calls_per_row):
        stats = relu_flydsl.dispatch_stats()
        n = calls_per_row["relu(x, out=y)"] + calls_per_row["relu(x)"]
        if sum(stats.values()) != n or set(stats) != set(paths):
            return f"timed relu calls took other paths than the first calls: {stats} (first calls: {paths})"
        return None

    meta = {"mode": "gpu", "path": ", ".join(sorted(paths)), "device": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "hip": torch.version.hip, "cuda": torch.version.cuda}
    pairs = (("relu(x, out=y)", "torch.clamp_min(x, 0, out=y)"), ("relu(x)", "torch.relu(x)"))
    return methods, start, check, (lambda name: None), meta, pairs, torch.cuda.synchronize


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="time on the GPU torch sees (CUDA or ROCm), nothing replaced")
    parser.add_argument("--fallback", action="store_true",
                        help="time the torch fallback on CPU tensors (the path off gfx950), nothing replaced")
    parser.add_argument("--rounds", type=int, help="rounds (default 41 on CPU, 15 on a GPU)")
    parser.add_argument("--calls", type=int, help="calls per method per round (default 3000 on CPU, 20000 on a GPU)")
    parser.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    parser.add_argument("--rung", default=None, help="rung (default: the package default)")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    if args.gpu and args.fallback:
        parser.error("--gpu and --fallback are two modes: pick one")

    import torch

    if args.gpu and not torch.cuda.is_available():
        sys.exit(f"host_overhead --gpu: torch {torch.__version__} sees no CUDA or ROCm GPU; "
                 "run `.venv/bin/python benchmarks/host_overhead.py` for the CPU mode")
    rounds = args.rounds or (15 if args.gpu else 41)
    calls = args.calls or (20000 if args.gpu else 3000)
    setup = gpu_setup if args.gpu else fallback_setup if args.fallback else cpu_setup
    methods, start, check, around_round, meta, pairs, sync = setup(args, torch)

    times = {name: [] for name in methods}
    start()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in methods.items():
                undo = around_round(name)
                try:
                    times[name].append(per_call(fn, calls, sync))
                finally:
                    if undo:
                        undo()
    finally:
        gc.enable()
    why = check({name: rounds * calls for name in methods})
    if why:
        sys.exit(f"host_overhead: {why}")

    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"host time per call, {args.dtype}, 1 element, {meta['device']}; path: {meta['path']}; "
          f"median of {rounds} rounds x {calls} calls")
    print(f"{'call':<34}{'median us':>11}{'min us':>10}{'max us':>10}")
    for name, t in times.items():
        print(f"{name:<34}{median[name] * 1e6:>11.2f}{min(t) * 1e6:>10.2f}{max(t) * 1e6:>10.2f}")
    ratios = {f"{a} / {b}": paired(times, a, b) for a, b in pairs}
    print("paired ratios (median over rounds of the per-round ratio):")
    for name, v in ratios.items():
        print(f"  {name:<62} {v:6.2f}")
    ok = True
    targeted = args.gpu or args.fallback
    if targeted:
        worst = max(ratios[f"{a} / {b}"] for a, b in pairs)
        ok = worst <= GPU_TARGET
        print(f"target: both forms at most {GPU_TARGET} x torch's own call: {'PASS' if ok else 'FAIL'} "
              f"(worst {worst:.2f})")
    else:
        query = median["device query (modelled)"] - median["device query (stub)"]
        print(f"device query of the Python path: modelled {median['device query (modelled)'] * 1e6:.2f} us per call "
              f"against the stub's {median['device query (stub)'] * 1e6:.2f} us (+{query * 1e6:.2f} us, not in the "
              "Python-path row; the compiled entry's own query is in its rows)")
        own = median["relu(x, out=y)"] - median["floor (Ex)"]
        print(f"relu(x, out=y) above its floor (Ex): {own * 1e6:.2f} us (the tracing check, the compiled entry's "
              "questions to libtorch and checks, device query, lookup, packing, error check, stats)")
    doc = {**meta, "dtype": args.dtype, "rounds": rounds, "calls": calls,
           "command": ".venv/bin/python benchmarks/host_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": {n: {"median_us": median[n] * 1e6, "min_us": min(t) * 1e6, "max_us": max(t) * 1e6}
                    for n, t in times.items()},
           "paired": ratios, "target": GPU_TARGET if targeted else None, "ok": ok}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
