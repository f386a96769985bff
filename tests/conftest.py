"""Shared test setup. Sections are owned by topic; append, don't rewrite."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "torch-ext", ROOT / "tools"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def pytest_configure(config):
    config.addinivalue_line("markers", "hardware: needs a real gfx950 GPU (skipped elsewhere, with the reason)")
    config.addinivalue_line("markers", "compile: compiles kernels for gfx950 (CPU only, needs lld-22)")
    config.addinivalue_line("markers", "vgpu: runs compiled kernels on the virtual gfx950 device")


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


# ---- virtual gfx950 device (tools/vgpu) ------------------------------------
def _vgpu_unavailable():
    """Why the virtual device cannot run here, or None."""
    from vgpu.build import find_cc

    if find_cc() is None:
        return "no C compiler (gcc/cc/clang): cannot build the stand-in libamdhip64.so.7"
    try:
        import toolchain

        toolchain.find_tool("llvm-objdump")
        toolchain.find_tool("ld.lld")
    except FileNotFoundError as e:
        return f"LLVM 22 tools missing ({e})"
    try:
        import flydsl  # noqa: F401
    except ImportError:
        return "flydsl is not installed"
    return None


@pytest.fixture(scope="session")
def vgpu_device():
    """The process-wide virtual gfx950 (stub built into tools/vgpu/build/)."""
    reason = _vgpu_unavailable()
    if reason:
        pytest.skip(f"virtual gfx950 unavailable: {reason}")
    import os

    import toolchain

    toolchain.apply()
    os.environ.pop("COMPILE_ONLY", None)  # kernels must be launchable in this process
    import vgpu

    return vgpu.device()


def _vgpu_current_device(dev):
    """The stand-in's current device of this thread (0 where it models one device)."""
    get = getattr(dev, "get_device", None)
    return get() if callable(get) else 0


def _vgpu_device_info(dev, dispatch):
    """`_dispatch.device_info` for the virtual gfx950: CPU tensors are device
    memory; the device is the one holding the tensor's registered allocation
    (device 0 for unregistered memory), the stream `dev.stream` (an int for
    every device, or a dict device -> stream)."""
    device_of = getattr(dev, "device_of", None)

    def device_info(x):
        if x.device.type != "cpu":
            return None
        index = device_of(x.data_ptr(), 0) if device_of else 0
        stream = dev.stream.get(index, 0) if isinstance(dev.stream, dict) else dev.stream
        return dispatch.DeviceInfo("gfx950", stream, index == _vgpu_current_device(dev), index)

    return device_info


def _vgpu_canary_memory(dev):
    """`_canary.device_memory` for the virtual gfx950: CPU memory registered
    on the canary's device as ONE region (so the canary's own sentinels, not
    the memory checker, judge guard writes, as on hardware), unregistered after
    the canary; its launches move from `dev.launches` to `dev.canary_launches`
    so the suites' launch counts see only the calls they make."""
    from contextlib import contextmanager

    import torch

    @contextmanager
    def device_memory(nbytes, device):
        buf = torch.empty(nbytes, dtype=torch.uint8)
        kw = {"device": device} if hasattr(dev, "memories") else {}
        region = dev.register(buf, name=f"canary-{device}", **kw)
        lo, hi = buf.data_ptr(), buf.data_ptr() + nbytes
        try:
            yield buf
        finally:
            mem = dev.memories[device] if hasattr(dev, "memories") else dev.memory
            mem.remove(region)
            mine = [r for r in dev.launches if r.args and lo <= r.args[0] < hi]
            for r in mine:
                dev.launches.remove(r)
            dev.canary_launches.extend(mine)

    return device_memory


@pytest.fixture
def vgpu(vgpu_device, monkeypatch):
    """A clean virtual device per test, with relu_flydsl seeing CPU tensors as
    gfx950 memory (`_dispatch.device_info` substituted) and its first-use
    canaries running on the virtual device (`_canary.device_memory`
    substituted; their launches land in `vgpu.canary_launches`). Canary results
    are forgotten before each test, so each test sees first uses. Set
    `vgpu.stream` to change the stream handle the dispatcher passes. At
    teardown any error recorded on the device, or a ladder launch (canaries
    included) whose grid is not exactly ceil(numel / tile), fails the test
    unless `vgpu.errors_expected`."""
    import relu_flydsl._canary as canary
    import relu_flydsl._dispatch as dispatch

    dev = vgpu_device
    dev.reset()
    dev.straddle = "dword"
    dev.stream = 0
    dev.errors_expected = False
    dev.canary_launches = []
    forget_canaries(dispatch)
    monkeypatch.setattr(dispatch, "device_info", _vgpu_device_info(dev, dispatch))
    monkeypatch.setattr(canary, "device_memory", _vgpu_canary_memory(dev))
    yield dev
    try:
        if not dev.errors_expected:
            dev.check()
            import vgpu_support

            vgpu_support.assert_exact_grids(dev.launches)  # no over-launch hidden by a predicate
            vgpu_support.assert_exact_grids(dev.canary_launches)
    finally:
        dev.reset()
        dev.canary_launches = []
        forget_canaries(dispatch)


def forget_canaries(dispatch):
    """Tests only: forget canary results and loaded modules (so the next call is a
    first use again) and the launch entries holding verified kernels."""
    dispatch._canaries.clear()
    dispatch.canary_runs.clear()
    dispatch._warned.difference_update([k for k in dispatch._warned if isinstance(k, tuple) and k[0] == "canary"])
    dispatch._loaded.clear()
    dispatch.reset_dispatch_stats()


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
