"""How one point is timed.

Policy:
- Device time and rounds: the package's own method (torch-ext/relu_flydsl/_timing.py, which
  the shipped hardware check uses too; one copy, loaded here by path): a pair of device events
  (torch.cuda.Event) around `iters` back-to-back launches, after `warmup` untimed launches,
  with no synchronisation between launches; seconds per launch = elapsed / iters. This is the
  method of the reference post ("Beating torch.relu with FlyDSL: A Hands-On Guide to
  Bandwidth-Bound Kernels"), and what a model's stream of kernels sees. `rounds` timings per
  implementation, taken round-robin across implementations (the first one rotates from round
  to round, so none always runs first or last), each with its own input and output buffers;
  the MEDIAN of the rounds is reported (a cold or disturbed round moves a mean, not a median).
- Small sizes (traffic below HOST_TIMED_BELOW, 64 MiB): the same events, plus host time:
  the CPU's wall time per launch for the same loop, up to the last launch's return (the
  events then synchronise). Where the host time is at least HOST_BOUND_FRACTION (0.9) of the
  device time, the launches are host-bound: the GB/s there measure how fast the host issues
  launches, not memory, and the row says so (method "events+host", host_bound true). Not
  "host >= device": when the host is the limit the device waits for each launch, so the events
  span the host's loop plus the last kernel and the event, and device time stays a little
  above host time (on an NVIDIA H200, host / device was 0.96-0.99 at every host-bound size and
  fell to 0.2-0.8 once the kernels took longer than the launches).
- Cross-check: torch's median against triton.testing.do_bench (median, L2 flushed between
  runs) where Triton is importable, on the same call and buffers.
"""

import importlib.util
import sys
from pathlib import Path

from .cases import MIB


def _package_timing():
    """torch-ext/relu_flydsl/_timing.py, loaded by path: standalone, so neither the package
    (its compiled entry, its HIP bindings) nor a variant is imported for it."""
    name = "_relu_flydsl_timing"
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).resolve().parents[2] / "torch-ext" / "relu_flydsl" / "_timing.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


_method = _package_timing()
ITERS, WARMUP, ROUNDS = _method.ITERS, _method.WARMUP, _method.ROUNDS
Timing, schedule, collect_samples, time_launches = (_method.Timing, _method.schedule, _method.collect_samples,
                                                    _method.time_launches)
HOST_TIMED_BELOW = 64 * MIB
HOST_BOUND_FRACTION = 0.9  # host time per launch >= this x device time: host-bound (see above)
EVENTS = "events"
EVENTS_HOST = "events+host"


def method_for(traffic):
    """The timing method of a point of `traffic` bytes."""
    return EVENTS_HOST if traffic < HOST_TIMED_BELOW else EVENTS


def describe(method, iters, warmup, rounds):
    text = _method.describe(iters, warmup, rounds)
    if method == EVENTS_HOST:
        text += "; host time per launch for the same loop (perf_counter up to the last launch's return)"
    return text


def crosscheck(fn, harness_seconds, traffic):
    """The harness's median against an independent timer, triton.testing.do_bench (median,
    L2 flushed between runs), on the same call and buffers. ratio = harness GB/s / do_bench GB/s."""
    try:
        from triton.testing import do_bench
    except Exception as e:  # noqa: BLE001 - no Triton (or a broken one): say so, time nothing
        return {"available": False, "reason": f"triton.testing is not importable ({type(e).__name__}: {e})"}
    try:
        ms = do_bench(fn, return_mode="median")
    except Exception as e:  # noqa: BLE001 - Triton without a GPU driver for this device (e.g. CPU tensors)
        return {"available": False, "reason": f"triton.testing.do_bench failed ({type(e).__name__}: {e})"}
    return {"available": True, "timer": "triton.testing.do_bench(return_mode='median')", "do_bench_us": ms * 1e3,
            "do_bench_gbps": traffic / (ms / 1e3) / 1e9, "harness_us": harness_seconds * 1e6,
            "ratio": ms / 1e3 / harness_seconds}
