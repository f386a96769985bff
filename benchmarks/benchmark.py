"""`kernels benchmark ./relu-build` workloads.

ReluBenchmark mirrors upstream kernels-community/relu exactly (seed 42, base
1024x1024 and large 4096x4096 float32, benchmark_* sets self.out = relu(x),
verify_* returns F.relu(x)), so results compare directly with upstream.
"""

import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark


class ReluBenchmark(Benchmark):
    seed: int = 42

    def setup_base(self):
        self.x = torch.randn(1024, 1024, device=self.device, dtype=torch.float32)

    def benchmark_base(self):
        self.out = self.kernel.relu(self.x)

    def verify_base(self) -> torch.Tensor:
        return F.relu(self.x)

    def setup_large(self):
        self.x = torch.randn(4096, 4096, device=self.device, dtype=torch.float32)

    def benchmark_large(self):
        self.out = self.kernel.relu(self.x)

    def verify_large(self) -> torch.Tensor:
        return F.relu(self.x)
