"""`kernels benchmark ./relu-build` as users type it: kernels' own CLI, in fresh processes.

- On the virtual gfx950 (tools/kernels_cli_vgpu.py: kernels sees a ROCm torch, the kernels
  run on the emulator): every workload verifies and dispatch_stats() shows only FlyDSL
  calls, exactly as many as the CLI makes; with the kill switch set, the CLI stops at the
  first workload naming the fallback instead of printing a speedup.
- On this CPU machine, the plain CLI: an unbuilt relu-build/ (the committed stub) names
  the command that builds it; a built one says why nothing can be timed here.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["benchmark", "./relu-build", "--iterations", "2", "--warmup", "1"]  # small counts: the emulator is slow
CALLS_PER_WORKLOAD = 1 + 1 + 1 + 2  # setup's path check, the verify run, warm-up, iterations


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder holding a fresh relu-build/, the CLI's working directory."""
    import build_variant

    d = tmp_path_factory.mktemp("cli")
    build_variant.build(d / "relu-build")
    return d


def _kernels_cli():
    """The `kernels` console script of this interpreter, or its entry point (kernels.cli:main)."""
    script = Path(sys.executable).parent / "kernels"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from kernels.cli import main; sys.argv[0] = 'kernels'; sys.exit(main())"]


def _run(cmd, cwd, env=None, timeout=600):
    e = dict(os.environ)
    e.pop("RELU_FLYDSL_DISABLE", None)
    e.pop("RELU_FLYDSL_RUNG", None)
    e.update(env or {})
    return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)


def _vgpu_cli(work, args, env=None):
    return _run([sys.executable, str(ROOT / "tools" / "kernels_cli_vgpu.py"), *args], work, env)


@pytest.mark.vgpu
def test_kernels_benchmark_runs_every_workload_on_the_virtual_gfx950(vgpu_device, work):
    r = _vgpu_cli(work, ARGS)
    out = r.stderr + r.stdout
    print(out[-3000:])  # the dispatch statistics, in the test log
    assert r.returncode == 0, out[-4000:]
    rows = [ln for ln in out.splitlines() if ln.startswith("│ Relu")]
    assert len(rows) == 52, rows
    assert all(ln.rstrip().endswith("✓       │") for ln in rows), [ln for ln in rows if "✓" not in ln]
    stats = dict(re.findall(r"^  (flydsl/\S+|fallback/.+?)\s+(\d+)$", out, re.M))
    c = CALLS_PER_WORKLOAD
    assert {k: int(v) for k, v in stats.items()} == {
        "flydsl/v1/bfloat16": 4 * c,
        "flydsl/v2/bfloat16": 4 * c,
        "flydsl/v3/bfloat16": 4 * c,
        "flydsl/v4/bfloat16": (4 + 7) * c,          # ladder + cache band
        "flydsl/v5/bfloat16": (4 + 4 + 7) * c,      # dtype (default rung) + ladder + cache band
        "flydsl/v5/float16": 4 * c,
        "flydsl/v5/float32": (4 + 2) * c,           # dtype + upstream's base/large
        "flydsl/v5/int8": 4 * c,
    }
    m = re.search(r"relu\(\) calls (\d+), FlyDSL path (\d+), fallback (\d+), kernel launches on the virtual "
                  r"gfx950 (\d+), device errors (\d+), invalid accesses (\d+)", out)
    calls, flydsl, fallback, launches, errors, invalid = map(int, m.groups())
    assert calls == flydsl == 52 * c and fallback == 0 and launches >= calls and errors == invalid == 0
    assert "PROBLEM" not in out


@pytest.mark.vgpu
def test_kernels_benchmark_refuses_to_report_a_fallback_as_a_speedup(vgpu_device, work):
    """The kill switch makes every call torch's: the CLI stops at the first workload."""
    r = _vgpu_cli(work, ARGS, env={"RELU_FLYDSL_DISABLE": "1"})
    out = r.stderr + r.stdout
    assert r.returncode == 1, out[-4000:]
    assert ("ReluBenchmark.base: relu() ran fallback/disabled by RELU_FLYDSL_DISABLE (1 call), not the FlyDSL "
            "kernel (float32). Timing it would report torch against torch as a speedup") in out, out[-3000:]
    assert "faster" not in out and "Speedup" not in out


def test_unbuilt_relu_build_names_the_command_that_builds_it(tmp_path):
    """A fresh clone has only the committed relu-build/benchmarks/benchmark.py."""
    stub = tmp_path / "relu-build" / "benchmarks"
    stub.mkdir(parents=True)
    shutil.copy2(ROOT / "relu-build" / "benchmarks" / "benchmark.py", stub / "benchmark.py")
    r = _run([*_kernels_cli(), "benchmark", "./relu-build"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "relu-build has no build/ folder: relu-build/ is not built yet. Build it in the relu-flydsl " \
           "repository with `bash main.sh`" in r.stderr, r.stderr


def test_a_machine_without_rocm_torch_is_told_why_nothing_runs(work):
    if torch.version.hip is not None:
        pytest.skip("this torch is a ROCm build: the CLI would load the variant here")
    r = _run([*_kernels_cli(), "benchmark", "./relu-build"], work)
    assert r.returncode == 1, r.stderr
    kind = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only"
    assert (f"relu-flydsl has one variant, build/torch-rocm (ROCm, gfx950 kernels), and this torch "
            f"({torch.__version__}) is a {kind} build: kernels cannot load the variant here") in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


SHORT_OUT = """
import sys
sys.path.insert(0, sys.argv[1])  # cwd is `work`, outside the checkout, as for a user: this checkout's tools/
import kernels_cli_vgpu as runner
dev = runner._virtual_device()
register = type(dev).register

def short(self, t, nbytes=None, name="tensor", **kw):  # `out` registered 2 bytes short
    if name == "out":
        return self.memory.add(t.data_ptr(), t.numel() * t.element_size() - 2, name, owner=t)
    return register(self, t, nbytes, name=name, **kw)

type(dev).register = short
sys.exit(runner.main(sys.argv[2:]))
"""


@pytest.mark.vgpu
def test_the_runner_checks_memory_against_the_registered_tensors(vgpu_device, work):
    """Not vacuous: with `out` registered 2 bytes short, the first out= workload's kernel
    (its buffer descriptor spans the whole out) is stopped by the virtual device."""
    r = _run([sys.executable, "-c", SHORT_OUT, str(ROOT / "tools"), *ARGS], work)
    out = r.stderr + r.stdout
    assert r.returncode == 1, out[-3000:]
    assert "runs 2 bytes past the end of allocation out" in out, out[-3000:]
    assert "PROBLEM: the virtual device recorded errors" in out
