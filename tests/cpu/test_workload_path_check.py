"""benchmarks/benchmark.py's check that a workload's own call took the kernel
path, on the source tree's file (tests/release/test_benchmarks.py checks the
variant's copy): kernel-path counts left by earlier workloads do not count."""

import pytest
import torch

pytest.importorskip("kernels", reason="kernels not installed: benchmarks/benchmark.py imports it")
from benchmarks import benchmark  # noqa: E402


class _Kernel:
    """torch's relu behind the kernel's API, with earlier workloads' counts in its stats."""

    def __init__(self, path, earlier):
        self.path, self.stats = path, dict(earlier)

    def relu(self, x, out=None, rung=None):
        self.stats[self.path] = self.stats.get(self.path, 0) + 1
        return torch.relu(x)

    def dispatch_stats(self):
        return dict(self.stats)


def test_a_workload_reads_its_own_calls_not_earlier_ones():
    earlier = {"flydsl/v5/float32": 40}
    ok = _Kernel("flydsl/v5/float32", earlier)
    benchmark.require_flydsl_path(ok, lambda: ok.relu(torch.ones(3)), "v5", "float32", "W")
    fell_back = _Kernel("fallback/empty tensor", earlier)
    with pytest.raises(RuntimeError, match="fallback/empty tensor"):
        benchmark.require_flydsl_path(fell_back, lambda: fell_back.relu(torch.ones(3)), "v5", "float32", "W")
    silent = _Kernel("flydsl/v5/float32", earlier)
    with pytest.raises(RuntimeError, match="no recorded path"):
        benchmark.require_flydsl_path(silent, lambda: torch.relu(torch.ones(3)), None, "float32", "W")
