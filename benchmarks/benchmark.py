"""`kernels benchmark ./relu-build` workloads.

    ReluBenchmark          upstream kernels-community/relu's workloads, unchanged: seed 42,
                           `base` 1024x1024 and `large` 4096x4096 float32,
                           benchmark_* sets self.out = relu(x), verify_* returns F.relu(x).
                           Directly comparable with upstream.
    ReluDtypeBenchmark     bfloat16 / float16 / float32 at the reference post's shapes
                           (8192x8192, 16384x8192, 32768x8192, 4096x14336), default rung,
                           relu(x, out=out) into a preallocated buffer.
    ReluLadderBenchmark    each ladder rung v1..v5, bfloat16, the post's shapes,
                           relu(x, out=out, rung="vN").
    ReluCacheBandBenchmark v4 against v5 across the post's cache band: 134 .. 1074 MB of
                           total traffic (2 x numel x 2 bytes), bfloat16, N x 8192.

Workload names spell dtype, shape and rung (e.g. `v5_bf16_16384x8192`).

Sizes: every shape below is the full-size shape, and it is what runs on every device.
Nothing shrinks by itself on CPU. `ROW_DIVISOR` (1 here) divides the number of rows of
every shape; only tests/test_benchmarks.py changes it, to verify all workloads on CPU in
seconds; the same test asserts the full-size table these classes declare.

Verification is kernels' `torch.allclose(out, ref, atol=1e-2)`; inputs are torch.randn
(no NaN). A rung workload on a GPU also checks, through the kernel's dispatch_stats(),
that the FlyDSL path of that rung really ran (a silent torch fallback would otherwise be
timed under the rung's name). On CPU every call is the torch fallback by design.

bench_table() lists every workload with its full-size shape; benchmarks/ladder.py reads
the post's shapes and the cache band from here.
"""

import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark

ROW_DIVISOR = 1  # tests only; see the module docstring

RUNG_NAMES = ("v1", "v2", "v3", "v4", "v5")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
POST_SHAPES = ((8192, 8192), (16384, 8192), (32768, 8192), (4096, 14336))
# Total traffic 2 x numel x 2 bytes (bf16) in MB (1e6 bytes): 134, 201, 268, 403, 537, 805, 1074.
CACHE_BAND_MB = (134, 201, 268, 403, 537, 805, 1074)
CACHE_BAND_SHAPES = ((4096, 8192), (6144, 8192), (8192, 8192), (12288, 8192),
                     (16384, 8192), (24576, 8192), (32768, 8192))
CACHE_BAND_RUNGS = ("v4", "v5")


def scaled(shape):
    """The shape that is allocated: full size unless a test set ROW_DIVISOR."""
    rows, cols = shape
    return (max(1, rows // ROW_DIVISOR), cols)


def _shape_name(shape):
    return "x".join(map(str, shape))


class ReluBenchmark(Benchmark):
    seed: int = 42

    def setup_base(self):
        self.x = torch.randn(*scaled((1024, 1024)), device=self.device, dtype=torch.float32)

    def benchmark_base(self):
        self.out = self.kernel.relu(self.x)

    def verify_base(self) -> torch.Tensor:
        return F.relu(self.x)

    def setup_large(self):
        self.x = torch.randn(*scaled((4096, 4096)), device=self.device, dtype=torch.float32)

    def benchmark_large(self):
        self.out = self.kernel.relu(self.x)

    def verify_large(self) -> torch.Tensor:
        return F.relu(self.x)


# ---- generated workloads -------------------------------------------------------------
# Each generated workload is one (dtype, full-size shape, rung) entry of the class's
# WORKLOADS table; setup_/benchmark_/verify_ methods are made from it, so the table is
# exactly what kernels discovers and runs.


def _add_workload(cls, name, dtype_key, shape, rung):
    dtype = DTYPES[dtype_key]

    def setup(self):
        self.x = torch.randn(*scaled(shape), device=self.device, dtype=dtype)
        self.y = torch.empty_like(self.x)
        self._stats_before = self.kernel.dispatch_stats() if rung else None

    if rung is None:
        def bench(self):
            self.out = self.kernel.relu(self.x, out=self.y)
    else:
        def bench(self):
            self.out = self.kernel.relu(self.x, out=self.y, rung=rung)

    def verify(self) -> torch.Tensor:
        if rung is not None and self.device != "cpu":
            _require_flydsl_path(self.kernel, self._stats_before, rung, str(dtype).removeprefix("torch."))
        return F.relu(self.x)

    for prefix, fn in (("setup_", setup), ("benchmark_", bench), ("verify_", verify)):
        fn.__name__ = prefix + name
        fn.__qualname__ = f"{cls.__name__}.{prefix}{name}"
        setattr(cls, prefix + name, fn)
    cls.WORKLOADS[name] = {"dtype": dtype_key, "shape": shape, "rung": rung}


def _require_flydsl_path(kernel, before, rung, dtype):
    after = kernel.dispatch_stats()
    key = f"flydsl/{rung}/{dtype}"
    if after.get(key, 0) <= before.get(key, 0):
        fallbacks = {k: v - before.get(k, 0) for k, v in after.items() if k.startswith("fallback/")
                     and v > before.get(k, 0)}
        raise RuntimeError(f"rung {rung} ({dtype}) did not run the FlyDSL kernel on this device "
                           f"(torch fallback: {fallbacks}); refusing to time the fallback as {rung}")


class ReluDtypeBenchmark(Benchmark):
    """bf16/f16/f32 at the post's shapes, default rung, into a preallocated out."""

    seed: int = 42
    WORKLOADS: dict = {}


for _dt in DTYPES:
    for _shape in POST_SHAPES:
        _add_workload(ReluDtypeBenchmark, f"{_dt}_{_shape_name(_shape)}", _dt, _shape, None)


class ReluLadderBenchmark(Benchmark):
    """Every rung, bf16, the post's shapes: relu(x, out=out, rung=...)."""

    seed: int = 42
    WORKLOADS: dict = {}


for _rung in RUNG_NAMES:
    for _shape in POST_SHAPES:
        _add_workload(ReluLadderBenchmark, f"{_rung}_bf16_{_shape_name(_shape)}", "bf16", _shape, _rung)


class ReluCacheBandBenchmark(Benchmark):
    """v4 against v5 across the post's cache band (bf16, total traffic in the name)."""

    seed: int = 42
    WORKLOADS: dict = {}


for _mb, _shape in zip(CACHE_BAND_MB, CACHE_BAND_SHAPES):
    for _rung in CACHE_BAND_RUNGS:
        _add_workload(ReluCacheBandBenchmark, f"{_rung}_bf16_{_mb:04d}MB_{_shape_name(_shape)}", "bf16",
                      _shape, _rung)


def bench_table():
    """Every workload of this file with its full-size shape: {Class.workload: {...}}."""
    table = {
        "ReluBenchmark.base": {"dtype": "f32", "shape": (1024, 1024), "rung": None},
        "ReluBenchmark.large": {"dtype": "f32", "shape": (4096, 4096), "rung": None},
    }
    for cls in (ReluDtypeBenchmark, ReluLadderBenchmark, ReluCacheBandBenchmark):
        for name, spec in cls.WORKLOADS.items():
            table[f"{cls.__name__}.{name}"] = dict(spec)
    return table
