"""`.venv/bin/kernels benchmark ./relu-build` workloads (a Hub download: `kernels benchmark <folder>`).

    ReluBenchmark          upstream kernels-community/relu's workloads: seed 42, `base`
                           1024x1024 and `large` 4096x4096 float32, benchmark_* sets
                           self.out = relu(x), verify_* returns F.relu(x): allocating on
                           both sides, as upstream's. Directly comparable with upstream.
    ReluDtypeBenchmark     every dtype the kernels serve (dtypes.py) at the shapes of the reference post
                           ("Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels")
                           (8192x8192, 16384x8192, 32768x8192, 4096x14336), default rung,
                           relu(x, out=y) into a buffer preallocated in setup.
    ReluLadderBenchmark    each ladder rung (registry.py), bfloat16, the post's shapes,
                           relu(x, out=y, rung="vN").
    ReluCacheBandBenchmark v4 against v5 across the post's cache band: 134 .. 1074 MB of
                           total traffic (2 x numel x 2 bytes), bfloat16, N x 8192.

Workload names spell dtype, shape and rung (e.g. `v5_bf16_16384x8192`).

A fair reference. kernels times verify_<w>() as the "Ref" column and prints Ref/kernel as
the speedup. So every verify_ computes torch's result the way its benchmark_ computes the
kernel's: the out= workloads write torch.clamp_min(x, 0) (torch.relu's own ATen kernel)
into a buffer preallocated in setup, the upstream-mirror ReluBenchmark allocates on both
sides. (kernels times the reference once after warm-up, the kernel as a mean of
iterations: single Ref samples are noisy.)

No speedup from a fallback. Every setup_ calls relu() once (untimed) and checks, through
the kernel's dispatch_stats(), that the FlyDSL kernel ran (the asked rung, if any), and
nothing fell back. If not, it raises RuntimeError naming the path that ran (e.g.
`fallback/arch gfx942 ...`, `fallback/disabled by RELU_FLYDSL_DISABLE`): kernels prints it
and exits 1 instead of printing torch-against-torch "speedups".

Sizes: every shape below is the full-size shape, and it is what runs on every device.
`ROW_DIVISOR` (1 here) divides the number of rows of every shape; only tests and
tools/kernels_cli_vgpu.py (the CLI on the virtual gfx950, where emulation costs ~0.1 s per
million elements) change it.

When kernels' CLI discovers this file (it imports it as `benchmark_module`), two checks
replace errors of kernels that name no cause: a folder without build/ (relu-build/ not
built yet) and a machine whose torch is not a ROCm build (the only variant is torch-rocm).

The rungs, the dtypes and the shapes are read from the kernel's own tables
(flash_relu_rocm/registry.py, dtypes.py, workloads.py: the same files the ladder harness
reads), from the variant next to this file (../build/torch-rocm/flash_relu_rocm/) or, in
the source repository, from ../flash_relu_rocm/. bench_table() lists every workload with
its full-size shape.
"""

import importlib
import importlib.util
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark

BUILD_COMMAND = "bash main.sh"  # builds relu-build/ (tools/build_variant.py) in the source repository


def _check_runnable_here():
    """Clear messages, raised as RuntimeError (kernels prints it and exits 1), for what
    kernels itself would report as a missing Hub revision or a missing variant."""
    folder = Path(__file__).resolve().parent.parent
    if not (folder / "build").is_dir():
        raise RuntimeError(
            f"{folder} has no build/ folder: relu-build/ is not built yet. Build it in the relu-flydsl "
            f"repository with `{BUILD_COMMAND}` (it runs tools/build_variant.py), then run "
            f"`.venv/bin/kernels benchmark ./relu-build` again.")
    if torch.version.hip is None:
        kind = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only"
        raise RuntimeError(
            f"relu-flydsl has one variant, build/torch-rocm (ROCm, gfx950 kernels), and this torch "
            f"({torch.__version__}) is a {kind} build: kernels cannot load the variant here, so nothing "
            f"would be timed. Run it on an MI350X/MI355X with a ROCm build of torch; on other machines "
            f"`{BUILD_COMMAND}` prints the no-GPU report (ISA, virtual-device counts, host overhead).")


if __name__ == "benchmark_module":  # the name kernels.cli.benchmark imports this file under
    _check_runnable_here()

ROW_DIVISOR = 1  # tests and the virtual-device runner only; see the module docstring



def _ladder_tables():
    """flash_relu_rocm (registry, dtypes, workloads: pure Python), loaded by path under a
    private name: the variant's copy when this file sits in a built kernel repository,
    else the source repository's."""
    name = "_relu_flydsl_benchmark_tables"
    if name in sys.modules:
        return sys.modules[name]
    root = Path(__file__).resolve().parent.parent
    for folder in (root / "build" / "torch-rocm" / "flash_relu_rocm", root / "flash_relu_rocm"):
        if (folder / "workloads.py").is_file():
            break
    else:
        raise RuntimeError(f"no flash_relu_rocm/ (with workloads.py) next to {Path(__file__).resolve()}")
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    for sub in ("dtypes", "registry", "workloads"):
        setattr(package, sub, importlib.import_module(f"{name}.{sub}"))
    return package


_tables = _ladder_tables()
RUNG_NAMES = tuple(_tables.registry.RUNGS)
SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int8": "i8"}  # workload names only
DTYPES = {SHORT.get(n, n): getattr(torch, n) for n in _tables.dtypes.DTYPES}
POST_SHAPES = _tables.workloads.POST_SHAPES
CACHE_BAND_SHAPES = _tables.workloads.CACHE_BAND_SHAPES
CACHE_BAND_RUNGS = _tables.workloads.CACHE_BAND_RUNGS
CACHE_BAND_DTYPE = SHORT[_tables.workloads.CACHE_BAND_DTYPE]
# Total traffic 2 x numel x element size in MB (1e6 bytes): 134, 201, 268, 403, 537, 805, 1074.
CACHE_BAND_MB = tuple(_tables.workloads.traffic_mb(s, _tables.dtypes.ELEMENT_BYTES[_tables.workloads.CACHE_BAND_DTYPE])
                      for s in CACHE_BAND_SHAPES)


def random_input(shape, dtype, device):
    """randn for floating dtypes; integers over the whole range (randn has no integer form)."""
    if dtype.is_floating_point:
        return torch.randn(*shape, device=device, dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max + 1, shape, device=device, dtype=dtype)


def scaled(shape):
    """The shape that is allocated: full size unless ROW_DIVISOR was changed."""
    rows, cols = shape
    return (max(1, rows // ROW_DIVISOR), cols)


def _shape_name(shape):
    return "x".join(map(str, shape))


def require_flydsl_path(kernel, call, rung, dtype, workload):
    """Run `call` (one relu() call) and raise RuntimeError unless the FlyDSL kernel served
    it: `flydsl/<rung>/<dtype>` (any rung when rung is None) and no `fallback/...`."""
    before = kernel.dispatch_stats()
    call()
    after = kernel.dispatch_stats()
    ran = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    if rung is None:
        served = any(k.startswith("flydsl/") and k.endswith(f"/{dtype}") for k in ran)
    else:
        served = f"flydsl/{rung}/{dtype}" in ran
    if served and not any(k.startswith("fallback/") for k in ran):
        return
    paths = ", ".join(f"{k} ({n} call{'s' * (n != 1)})" for k, n in sorted(ran.items())) or "no recorded path"
    wanted = f"FlyDSL kernel {rung}/{dtype}" if rung else f"FlyDSL kernel ({dtype})"
    raise RuntimeError(
        f"{workload}: relu() ran {paths}, not the {wanted}. Timing it would report torch against torch "
        f"as a speedup, so the benchmark stops here (see dispatch_stats() in the README).")


class ReluBenchmark(Benchmark):
    """Upstream's workloads (allocating relu(x) against allocating F.relu(x))."""

    seed: int = 42

    def _setup(self, shape, workload):
        self.x = torch.randn(*scaled(shape), device=self.device, dtype=torch.float32)
        require_flydsl_path(self.kernel, lambda: self.kernel.relu(self.x), None, "float32", workload)

    def setup_base(self):
        self._setup((1024, 1024), "ReluBenchmark.base")

    def benchmark_base(self):
        self.out = self.kernel.relu(self.x)

    def verify_base(self) -> torch.Tensor:
        return F.relu(self.x)

    def setup_large(self):
        self._setup((4096, 4096), "ReluBenchmark.large")

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
    dtype_name = str(dtype).removeprefix("torch.")
    workload = f"{cls.__name__}.{name}"

    if rung is None:
        def bench(self):
            self.out = self.kernel.relu(self.x, out=self.y)
    else:
        def bench(self):
            self.out = self.kernel.relu(self.x, out=self.y, rung=rung)

    def setup(self):
        self.x = random_input(scaled(shape), dtype, self.device)
        self.y = torch.empty_like(self.x)    # the kernel's preallocated output
        self.ref = torch.empty_like(self.x)  # the reference's, allocated alike
        require_flydsl_path(self.kernel, lambda: bench(self), rung, dtype_name, workload)

    def verify(self) -> torch.Tensor:
        # torch.relu is clamp_min(x, 0) in ATen: its kernel, into a preallocated buffer like ours
        return torch.clamp_min(self.x, 0, out=self.ref)

    for prefix, fn in (("setup_", setup), ("benchmark_", bench), ("verify_", verify)):
        fn.__name__ = prefix + name
        fn.__qualname__ = f"{cls.__name__}.{prefix}{name}"
        setattr(cls, prefix + name, fn)
    cls.WORKLOADS[name] = {"dtype": dtype_key, "shape": shape, "rung": rung}


class ReluDtypeBenchmark(Benchmark):
    """Every served dtype at the post's shapes, default rung, into a preallocated out."""

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
        _add_workload(ReluCacheBandBenchmark, f"{_rung}_{CACHE_BAND_DTYPE}_{_mb:04d}MB_{_shape_name(_shape)}",
                      CACHE_BAND_DTYPE, _shape, _rung)


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
