"""How one point is timed.

Policy:
- Device time: a pair of device events (torch.cuda.Event) around `iters` back-to-back
  launches, after `warmup` untimed launches, with no synchronisation between launches;
  seconds per launch = elapsed / iters. This is the method of the reference post
  ("Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels"), and what a
  model's stream of kernels sees.
- Rounds: `rounds` timings per implementation, taken round-robin across implementations
  (the first one rotates from round to round, so none always runs first or last), each with
  its own input and output buffers; the MEDIAN of the rounds is reported (a cold or
  disturbed round moves a mean, not a median).
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

import time
from typing import NamedTuple, Optional

from .cases import MIB

ITERS, WARMUP, ROUNDS = 100, 20, 15
HOST_TIMED_BELOW = 64 * MIB
HOST_BOUND_FRACTION = 0.9  # host time per launch >= this x device time: host-bound (see above)
EVENTS = "events"
EVENTS_HOST = "events+host"


def method_for(traffic):
    """The timing method of a point of `traffic` bytes."""
    return EVENTS_HOST if traffic < HOST_TIMED_BELOW else EVENTS


def describe(method, iters, warmup, rounds):
    text = (f"device events around {iters} back-to-back launches after {warmup} warm-ups, "
            f"median of {rounds} rounds round-robin")
    if method == EVENTS_HOST:
        text += "; host time per launch for the same loop (perf_counter up to the last launch's return)"
    return text


class Timing(NamedTuple):
    device: float                  # seconds per launch, device events
    host: Optional[float] = None   # seconds per launch on the host (EVENTS_HOST only)


def schedule(impls, rounds):
    """Round-robin order: every round times each implementation once; the first one
    rotates from round to round, so no implementation always runs first or last."""
    impls = list(impls)
    n = len(impls)
    return [(r, impls[(r + k) % n]) for r in range(rounds) for k in range(n)]


def collect_samples(impls, time_once, rounds=ROUNDS, progress=None):
    """{impl: [timing, one per round]}; time_once(impl) does one timing."""
    samples = {i: [] for i in impls}
    for _, impl in schedule(impls, rounds):
        samples[impl].append(time_once(impl))
        if progress is not None:
            progress(1)
    return samples


def time_launches(fn, iters=ITERS, warmup=WARMUP, host=False):
    """Timing of one round: device events around `iters` launches after `warmup`;
    with host=True also the host's wall time per launch of the same loop."""
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    end.record()
    end.synchronize()
    return Timing(start.elapsed_time(end) / 1e3 / iters, (t1 - t0) / iters if host else None)


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
