"""How a bandwidth point is timed: the method of the reference post ("Beating torch.relu with
FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels"), one copy for the hardware check
(_check.py) and the ladder harness (benchmarks/ladder/timing.py loads this file).

- Device time: a pair of device events (torch.cuda.Event) around `iters` back-to-back
  launches, after `warmup` untimed launches, with no synchronisation between launches;
  seconds per launch = elapsed / iters. What a model's stream of kernels sees.
- Rounds: `rounds` timings per implementation, taken round-robin across implementations
  (the first one rotates from round to round, so none always runs first or last), each with
  its own input and output buffers; the MEDIAN of the rounds is reported (a cold or
  disturbed round moves a mean, not a median).

Standalone: the standard library, and torch when a timing runs; no import of the package.
"""

import statistics
import time
from typing import NamedTuple, Optional

ITERS, WARMUP, ROUNDS = 100, 20, 15


class Timing(NamedTuple):
    device: float                  # seconds per launch, device events
    host: Optional[float] = None   # seconds per launch on the host (when asked)


def describe(iters=ITERS, warmup=WARMUP, rounds=ROUNDS) -> str:
    return (f"device events around {iters} back-to-back launches after {warmup} warm-ups, "
            f"median of {rounds} rounds round-robin")


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
    """Timing of one round: device events around `iters` launches after `warmup`, on the
    current device's current stream; with host=True also the host's wall time per launch
    of the same loop."""
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


def median_device(samples) -> float:
    """The median device seconds per launch of one implementation's rounds."""
    return statistics.median(t.device if isinstance(t, Timing) else t for t in samples)
