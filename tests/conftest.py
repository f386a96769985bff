"""Shared test setup. Sections are owned by topic; append, don't rewrite."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    config.addinivalue_line("markers", "hardware: needs a real gfx950 GPU (skipped elsewhere, with the reason)")
    config.addinivalue_line("markers", "compile: compiles kernels for gfx950 (CPU only, needs lld-22)")
    config.addinivalue_line("markers", "vgpu: runs compiled kernels on the virtual gfx950 device")


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


@pytest.fixture(scope="session")
def variant_build(tmp_path_factory):
    """relu-build/ built once per session by tools/build_variant.py, for tests
    that only read it (copy it before changing anything)."""
    import build_variant

    out = tmp_path_factory.mktemp("variant") / "relu-build"
    build_variant.build(out)
    return out


@pytest.fixture(scope="module")
def mutant_root(tmp_path_factory, request):
    """A folder for the mutated package copies of tests/mutation_support.py,
    taken off sys.path after the module."""
    root = tmp_path_factory.mktemp(f"mutants-{request.module.__name__.rsplit('.', 1)[-1]}")
    yield root
    if str(root) in sys.path:
        sys.path.remove(str(root))


# ---- virtual gfx950 device (tools/vgpu) ------------------------------------
def _vgpu_unavailable():
    """Why the virtual device cannot run here, or None: the hardware suite's answer, one place."""
    import hardware_vgpu

    return hardware_vgpu.unavailable()


def shipped_objects_problem():
    """None when torch-ext/relu_flydsl/code_objects/ holds the objects built
    from these sources with this toolchain; else why not (the vgpu suites run
    the shipped files, never a fresh compile, and refuse stale ones)."""
    from flash_relu_rocm import build

    try:
        return build.stale()
    except build.BuildError as e:
        return f"cannot tell whether the code objects are current ({e})"


@pytest.fixture(scope="session")
def vgpu_device():
    """The process-wide virtual gfx950 (stub built into tools/vgpu/build/),
    running the package's shipped code objects."""
    reason = _vgpu_unavailable()
    if reason:
        pytest.skip(f"virtual gfx950 unavailable: {reason}")
    stale = shipped_objects_problem()
    if stale:
        pytest.fail(f"the shipped code objects are not current: {stale}; "
                    "run `.venv/bin/python -m flash_relu_rocm.build` (test.sh does)", pytrace=False)
    import toolchain
    import vgpu

    # ld.lld for the few tests that compile an unshipped kernel (v3 at unroll 4,
    # the checker's own probes); relu() itself never compiles or links
    toolchain.apply()
    return vgpu.device()


@pytest.fixture
def vgpu(vgpu_device, monkeypatch):
    """A clean virtual device per test, with relu_flydsl seeing CPU tensors as
    gfx950 memory (`_dispatch.device_info` substituted) and its first-use
    canaries running on the virtual device (`_canary.device_memory`
    substituted; their launches land in `vgpu.canary_launches`). The dispatch
    state is reset before each test, so each test sees first uses. Set
    `vgpu.stream` to change the stream handle the dispatcher passes. At
    teardown any error recorded on the device, or a ladder launch (canaries
    included) whose grid is not exactly ceil(numel / tile), fails the test
    unless `vgpu.errors_expected`."""
    import relu_flydsl
    from vgpu.serve import serve

    dev = vgpu_device
    dev.reset()
    dev.straddle = "dword"
    dev.stream = 0
    dev.errors_expected = False
    dev.canary_launches = []
    reset_state()
    restore = serve(dev, relu_flydsl, monkeypatch.setattr)  # device_info, the canary's buffer, the compiled entry
    yield dev
    restore()
    try:
        if not dev.errors_expected:
            dev.check()
            import vgpu_support

            vgpu_support.assert_exact_grids(dev.launches)  # no over-launch hidden by a predicate
            vgpu_support.assert_exact_grids(dev.canary_launches)
    finally:
        dev.reset()
        dev.canary_launches = []
        reset_state()


def reset_state():
    """The package's dispatch state as in a fresh process (loaded modules,
    canary verdicts, entries, stats, warnings), so the next call is a first
    use again."""
    from relu_flydsl._state import STATE

    STATE.reset()


def pytest_terminal_summary(terminalreporter):
    """Lines the vgpu suites leave in vgpu_support.SUMMARY_LINES (the mutation
    checks' catch counts), then the lines computed from what ran on the virtual
    device (kernels executed): printed at the end of the run, also under -q."""
    support = sys.modules.get("vgpu_support")
    lines = list(getattr(support, "SUMMARY_LINES", None) or [])
    session = getattr(support, "session_summary", None)
    if session is not None:
        lines += session()
    if lines:
        terminalreporter.write_sep("-", "virtual gfx950")
        for line in lines:
            terminalreporter.write_line(line)


# ---- the hardware suite on the virtual gfx950 (tests/hardware_vgpu.py) ------
def _hardware_on_vgpu(item) -> bool:
    import hardware_vgpu

    return hardware_vgpu.selected() and getattr(getattr(item, "module", None), "__name__", "") == "test_hardware"


def pytest_collection_modifyitems(config, items):
    """With RELU_FLYDSL_HARDWARE_TARGET=vgpu: test_hardware's sizes above the emulator's
    cap are skipped, the reason naming the cap."""
    import hardware_vgpu

    if not hardware_vgpu.selected():
        return
    if not config.pluginmanager.has_plugin("hardware-vgpu-report"):
        config.pluginmanager.register(hardware_vgpu.Report(), "hardware-vgpu-report")
    cap = pytest.mark.skip(reason=hardware_vgpu.CAP_REASON)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if _hardware_on_vgpu(item) and params.get("n", 0) > hardware_vgpu.MAX_ELEMENTS:
            item.add_marker(cap)


@pytest.fixture(autouse=True)
def _hardware_torch_relu_on_vgpu(request):
    """On the virtual gfx950, test_bit_exact_and_guard_region compares with torch's GPU
    relu formula: its tensors are CPU tensors, and CPU torch's relu rewrites NaN payloads.
    (monkeypatch only there: other tests' fixture order stays as it was.)"""
    if _hardware_on_vgpu(request.node) and request.node.originalname == "test_bit_exact_and_guard_region":
        import torch

        import hardware_vgpu

        request.getfixturevalue("monkeypatch").setattr(torch, "relu", hardware_vgpu.device_torch_relu)
