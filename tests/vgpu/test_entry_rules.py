"""Rules of the compiled entry's table (docs/compiled-entry.md) that no other scenario drives
through the entry itself: out on another device than a tensor of another arch (the entry's own
torch fallback), relu(x)'s allocation raising, and which launch call the null stream takes.
Scenarios of test_hot_path's `Ctx`, as the other scenario files'."""

import ctypes

import pytest
import torch

import vgpu_support as S
from test_hot_path import F32, scenario_test

pytestmark = pytest.mark.vgpu
N = 1024


def out_device_on_another_arch(c):
    """x on a gfx942 (device 1, learned: the entry serves its torch fallback), out on device 0:
    the entry leaves the call to the general path, which raises its device error; out untouched
    (torch's clamp_min would write it here, where both are host memory)."""
    c.dev.set_device_count(2)
    info = c.d.device_info
    c.mp.setattr(c.d, "device_info", lambda t: info(t)._replace(arch="gfx942") if info(t).index == 1 else info(t))
    x, _ = c.dev.guarded((N,), F32, name="x", device=1)
    x.copy_(torch.randn(N, generator=torch.Generator().manual_seed(3)))
    for seed in (1, 2):  # the general path learns device 1, then the entry serves it
        y, _ = c.dev.guarded((N,), F32, name=f"y{seed}", device=1)
        general = c.general
        assert c.relu(x, out=y) is y and torch.equal(y, torch.relu(x))
    assert c.general == general, "device 1's fallback must be the entry's by now"
    out, obuf = c.dev.guarded((N,), F32, name="out0", device=0)
    before, general = obuf.numpy().copy(), c.general
    with pytest.raises(ValueError, match="device"):
        c.relu(x, out=out)
    assert c.general == general + 1, "the general path must decide"
    assert (obuf.numpy() == before).all(), "out written"
    S.assert_guards(obuf, out)


def allocation_error_raised(c):
    """relu(x) with its entry ready, torch.empty_like (the shim off) raising: that error, raised
    by the entry (the general path not entered), nothing launched."""
    xbits = S.make_bits("mixed", N, F32, 1)
    x, _ = S.guarded_input(c.dev, xbits, F32)
    kept = []  # relu(x)'s outputs stay alive: their memory stays registered, never handed out again
    for hot in (False, True):
        c.dev.fresh_output(N * 4)
        general = c.general
        kept.append(c.relu(x))
        S.assert_bits(kept[-1], S.relu_bits(xbits, F32))
        assert (c.general == general) == hot
    assert c.entry.use_shim(False).startswith("torch.empty_like")

    def empty_like(t, *args, **kwargs):
        raise RuntimeError("empty_like: out of memory (stand-in)")

    c.entry._init(c.entry._loaded, empty_like=empty_like)
    try:
        general, launches = c.general, len(c.dev.launches)
        with pytest.raises(RuntimeError, match="out of memory"):
            c.relu(x)
        assert c.general == general, "the entry must raise the allocation's error itself"
        assert len(c.dev.launches) == launches, "launched without an output"
    finally:
        c.entry._init(c.entry._loaded)
        c.entry.use_shim(True)


def null_stream_launches_through_launch_ex(c):
    """On the null stream the entry launches through hipDrvLaunchKernelEx (on the virtual device
    it makes hipModuleLaunchKernel's launch, so only a counting hook bound in its place tells the
    two apart); on another stream, through hipModuleLaunchKernel."""
    lib, ex = c.dev.lib, ctypes.CFUNCTYPE(ctypes.c_int, *(ctypes.c_void_p,) * 4)
    real, calls = ex(ctypes.cast(c.dev.lib.hipDrvLaunchKernelEx, ctypes.c_void_p).value), []
    hook = ex(lambda *args: calls.append(1) or real(*args))
    address = c.pkg._hip.address
    c.call(N // 2)  # the entry bound to the runtime first (learn() would bind it over the hook)
    assert c.entry._hip_bound is c.pkg._hip.lib()
    for stream, want in ((0, 1), (c.stream, 0)):
        c.stream = c.dev.stream = stream
        c.entry._loaded.hip(address(lib.hipModuleLaunchKernel), ctypes.cast(hook, ctypes.c_void_p).value,
                            address(lib.hipGetDevice), address(lib.hipSetDevice), address(lib.hipGetLastError))
        try:
            c.warm(N)  # a first call (the general path's own launch), then the entry's
            assert len(calls) == want, f"stream {stream:#x}: {len(calls)} launches through hipDrvLaunchKernelEx"
        finally:
            c.entry._bind_hip(c.entry._hip_bound)  # the hook is not left bound
        calls.clear()


SCENARIOS = {f.__name__: f for f in (out_device_on_another_arch, allocation_error_raised,
                                     null_stream_launches_through_launch_ex)}
test_entry_rules = scenario_test(SCENARIOS)
