"""Every launch of a call, canary included, runs on the current stream of the
tensor's device: two virtual devices whose current streams differ, device 0
current, tensors on device 1 (first call, fast path, warmup)."""

import pytest
import torch

import vgpu_support as S

pytestmark = pytest.mark.vgpu


@pytest.fixture
def two_streams(vgpu):
    return S.two_devices(vgpu)


def _call(dev, device, dtype, n, seed):
    import relu_flydsl

    xbits = S.make_bits("mixed", n, dtype, seed)
    x, _ = dev.guarded((n,), dtype, name=f"x{seed}", device=device)
    x.copy_(S.to_tensor(xbits, dtype))
    out, _ = dev.guarded((n,), dtype, name=f"out{seed}", device=device)
    assert relu_flydsl.relu(x, out=out) is out
    S.assert_bits(out, S.relu_bits(xbits, dtype))


def _off_stream(dev, records, device):
    return [(r.kernel, r.device, hex(r.stream)) for r in records if r.device != device or r.stream != dev.stream[device]]


def test_first_call_and_its_canary_use_the_tensors_devices_stream(two_streams, monkeypatch):
    import relu_flydsl

    dev = two_streams
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "1")
    for seed in (1, 2):  # the first call (module load, canary, launch), then the fast path
        _call(dev, 1, torch.bfloat16, 4096, seed)
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/bfloat16": 2}
    assert len(dev.launches) == 2 and dev.canary_launches, (dev.launches, dev.canary_launches)
    assert not _off_stream(dev, dev.launches, 1), "a launch off device 1's current stream"
    assert not _off_stream(dev, dev.canary_launches, 1), "a canary launch off device 1's current stream"


def test_warmup_canary_uses_each_devices_stream(two_streams, monkeypatch):
    import relu_flydsl

    dev = two_streams
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "1")
    relu_flydsl.warmup(["float32"], devices=[1])
    assert dev.canary_launches and not _off_stream(dev, dev.canary_launches, 1)
