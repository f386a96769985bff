"""The virtual gfx950 as the target of tests/hardware/test_hardware.py, and the run of that
suite behind tests/hardware/run.sh (`main`: its environment, and its gate: no hardware test
ran is a failure unless --allow-no-gpu says that is expected).

    RELU_FLYDSL_HARDWARE_TARGET=vgpu [RELU_FLYDSL_HARDWARE_VARIANT=relu-build/build/torch-rocm] \\
        .venv/bin/python -m pytest -m hardware -ra tests/hardware/test_hardware.py

runs the hardware suite's own test functions with DEVICE a CPU device that a
built variant (tools/build_variant.py; built into a temporary folder when no
variant is named) sees as gfx950 memory of the virtual device (tools/vgpu/serve.py).
Each relu() call declares the whole allocations behind x and out to the device
for that call, so the suite's own sentinels judge writes outside the output, as
on hardware; an access outside those allocations stops the launch, and after the
call any device error or invalid access fails the test, as does a launch not on
the exact grid. The package's state is not reset between tests: one process, as
on a GPU. Sizes above MAX_ELEMENTS are skipped with the reason (CAP_REASON);
tests/conftest.py applies the cap. tests/vgpu/test_hardware_suite.py runs it.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ENV_TARGET = "RELU_FLYDSL_HARDWARE_TARGET"
ENV_VARIANT = "RELU_FLYDSL_HARDWARE_VARIANT"
ENV_MAX_ELEMENTS = "RELU_FLYDSL_HARDWARE_MAX_ELEMENTS"
ENV_RESULTS = "RELU_FLYDSL_HARDWARE_RESULTS"  # test_observe_torch_relu's folder (default: a new temporary one)
ENV_RAN = "RELU_FLYDSL_HARDWARE_RAN"  # a file each hardware test that runs adds its name to (run.sh's gate)
NOTHING_RAN = 5  # run.sh's exit status when no hardware test ran (pytest's own for "no tests collected")
ROOT = Path(__file__).resolve().parent.parent
SUITE = "tests/hardware/test_hardware.py"
# a test of 1048576 elements takes ~0.5 s on the emulator (2-core CPU): 8192*8192 would take
# ~30 s each, 40 tests, and GBs of memory
MAX_ELEMENTS = int(os.environ.get(ENV_MAX_ELEMENTS, 1048583))
CAP_REASON = (f"more than {MAX_ELEMENTS} elements: capped on the virtual gfx950 "
              f"(the emulator takes ~0.5 s per million elements; {ENV_MAX_ELEMENTS} sets the cap)")


# every relu() call of the run and the path it took (dispatch_stats): the suite's views and in-place
# tests do not assert the path, so a torch fallback would pass them; the report shows it
CALLS = {"relu": 0, "flydsl": 0, "fallback": {}}


class Report:
    """A pytest plugin: the CALLS line in the terminal summary."""

    @pytest.hookimpl(trylast=True)  # after tests/conftest.py's virtual gfx950 lines
    def pytest_terminal_summary(self, terminalreporter):
        fb = CALLS["fallback"]
        terminalreporter.write_line(
            f"hardware suite on the virtual gfx950: relu() calls {CALLS['relu']}, FlyDSL path {CALLS['flydsl']}, "
            f"torch fallback {sum(fb.values())}" + (f" {fb}" if fb else ""))


def selected() -> bool:
    return os.environ.get(ENV_TARGET) == "vgpu"


def unavailable():
    """Why the virtual device cannot run here, or None."""
    from vgpu.build import find_cc

    if find_cc() is None:
        return "no C compiler (gcc/cc/clang): cannot build the stand-in libamdhip64.so.7"
    try:
        import toolchain

        toolchain.find_tool("llvm-objdump")
    except FileNotFoundError as e:
        return f"LLVM 22 tools missing ({e})"
    return None


def variant_path() -> Path:
    named = os.environ.get(ENV_VARIANT)
    if named:
        return Path(named)
    import build_variant

    out = Path(tempfile.mkdtemp(prefix="relu-hardware-vgpu-")) / "relu-build"
    build_variant.build(out)
    return out / "build" / build_variant.VARIANT


class Served:
    """The loaded variant as the suite sees it: its own functions, and relu()
    running on the virtual device with the memory behind x and out declared."""

    def __init__(self, package, dev):
        self._package, self._dev = package, dev

    def __getattr__(self, name):
        return getattr(self._package, name)

    def relu(self, x, out=None, **kwargs):
        import vgpu_support

        dev = self._dev
        seen = set()
        for t in (x, out):
            if t is None:
                continue
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                dev.register(storage.data_ptr(), storage.nbytes(), name="x" if t is x else "out")
        if out is None:
            dev.fresh_output(x.numel() * x.element_size(), name="relu(x) output")
        try:
            before = self._package.dispatch_stats()
            try:
                result = self._package.relu(x, out, **kwargs)
            except Exception as e:
                if dev.errors or dev.violations:  # what stopped the launch
                    first = dev.errors[0] if dev.errors else dev.violations[0]
                    e.add_note(f"virtual gfx950: {type(first).__name__}: {first}")
                raise
            CALLS["relu"] += 1
            for path, k in self._package.dispatch_stats().items():
                if k > before.get(path, 0):
                    if path.startswith("flydsl/"):
                        CALLS["flydsl"] += 1
                    else:
                        CALLS["fallback"][path] = CALLS["fallback"].get(path, 0) + 1
            dev.check()
            vgpu_support.assert_exact_grids(dev.launches)
            vgpu_support.assert_exact_grids(dev.canary_launches)
        finally:
            dev.reset()  # forgets the regions declared for this call
            dev.canary_launches = []
        return result


def device_torch_relu(x):
    """torch.relu as torch's GPU kernel computes it (`_isnan(v) ? v : max(v, 0)`, the ATen
    source ROCm builds compile): the suite's comparison with torch.relu on the same device
    uses it on the virtual gfx950, whose tensors are CPU tensors. CPU torch's own relu
    rewrites NaN payloads (f16 and bf16 from ~1000 elements); the GPU kernel returns a NaN
    input itself."""
    import torch

    return torch.where(torch.isnan(x), x, torch.clamp_min(x, 0))


def target():
    """test_hardware.py's target (device, why, package, synchronize, results) on the virtual gfx950."""
    from types import SimpleNamespace

    import torch

    why = unavailable()
    if why:
        return SimpleNamespace(device=None, why=f"virtual gfx950 unavailable: {why}", package=None,
                               synchronize=None, results=None)
    import toolchain
    import vgpu
    import vgpu_support
    from vgpu.serve import serve

    import kernels

    toolchain.apply()
    dev = vgpu.device()  # the stand-in libamdhip64.so.7, before anything opens HIP
    dev.straddle = "dword"
    dev.stream = 0
    path = variant_path()
    package = kernels.get_local_kernel(path)
    serve(dev, package)
    results = Path(os.environ.get(ENV_RESULTS) or tempfile.mkdtemp(prefix="relu-hardware-vgpu-results-"))
    vgpu_support.SUMMARY_LINES.extend([
        f"hardware suite on the virtual gfx950: variant {path} (loaded as {package.__name__})",
        f"hardware suite on the virtual gfx950: {CAP_REASON}",
        "hardware suite on the virtual gfx950: torch.relu in test_bit_exact_and_guard_region is torch's GPU "
        "formula (hardware_vgpu.device_torch_relu), not CPU torch's relu",
        f"hardware suite on the virtual gfx950: test_observe_torch_relu observes CPU torch, written under {results}",
    ])
    return SimpleNamespace(device=torch.device("cpu"), why="", package=Served(package, dev),
                           synchronize=lambda device=None: None, results=results)


# ---- tests/hardware/run.sh ---------------------------------------------------------------------
def suite_env(environ, variant, ran_file) -> dict:
    """The environment of run.sh's pytest: the variant asked for (run.sh --variant), else this
    checkout's package whatever RELU_FLYDSL_HARDWARE_VARIANT said before; the gate's file."""
    env = dict(environ)
    if variant:
        env[ENV_VARIANT] = str(variant)
    else:
        env.pop(ENV_VARIANT, None)
    env[ENV_RAN] = str(ran_file)
    return env


def tests_ran(ran_file) -> list:
    """The hardware tests that ran (test_hardware.py's autouse fixture wrote their names)."""
    try:
        return [line for line in Path(ran_file).read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def gate(ran_file, allow_no_gpu: bool):
    """(exit status, what to say) once pytest passed: NOTHING_RAN when no hardware test ran
    (every one skipped: no gfx950 here), unless --allow-no-gpu said that is expected."""
    ran = tests_ran(ran_file)
    if ran:
        return 0, f"run.sh: {len(ran)} hardware tests ran"
    if allow_no_gpu:
        return 0, "run.sh: no hardware test ran (every one was skipped; --allow-no-gpu: expected here)"
    return NOTHING_RAN, ("run.sh: FAILED: no hardware test ran: every one was skipped (the SKIPPED lines above say "
                         "why). Nothing was checked; where that is expected (no gfx950 here), pass --allow-no-gpu")


def main(argv=None) -> int:
    """run.sh's work once its arguments are checked: `hardware_vgpu.py [--variant FOLDER]
    [--allow-no-gpu] [pytest arguments]`; pytest's status, else the gate's."""
    import argparse

    parser = argparse.ArgumentParser(prog="tests/hardware/run.sh", allow_abbrev=False)
    parser.add_argument("--variant", default=None)
    parser.add_argument("--allow-no-gpu", action="store_true")
    args, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory(prefix="relu-hardware-") as tmp:
        ran = Path(tmp) / "ran"
        env = suite_env(os.environ, args.variant, ran)
        cmd = [sys.executable, "-m", "pytest", "-m", "hardware", "-ra", "-p", "no:cacheprovider", SUITE, *rest]
        rc = subprocess.call(cmd, cwd=ROOT, env=env)
        if rc != 0:
            return rc
        code, said = gate(ran, args.allow_no_gpu)
    print(said, file=sys.stderr if code else sys.stdout, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
