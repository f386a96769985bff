"""The canary's judge compares bits, the sign of zero included: a kernel
that writes -0.0 where the bit rule gives +0.0 (x < 0: e.g. max(x, -0.0), or
x * (x > 0)) fails its canary, though -0.0 == +0.0 as numbers."""

import pytest
import torch

from test_canary import _failed_canary

pytestmark = pytest.mark.vgpu


@pytest.mark.parametrize("dtype,key,hexdigits", [(torch.float32, "v5/float32/x4", 8),
                                                  (torch.bfloat16, "v5/bfloat16/x8", 4)], ids=str)
def test_negative_zero_for_negative_inputs_fails_the_canary(vgpu, monkeypatch, dtype, key, hexdigits):
    import relu_flydsl

    def negative_zero(canary):
        x, out = canary.views()
        out[x < 0] = -0.0  # NaNs compare False: only the negative numbers

    x, out = _failed_canary(vgpu, monkeypatch, negative_zero, dtype, 4096,
                            rf"canary failed {key} on device 0: element \d+ of \d+ \(\d+ differ\): "
                            rf"input 0x[0-9A-F]{{{hexdigits}}}, output 0x8{'0' * (hexdigits - 1)}, "
                            rf"expected 0x{'0' * hexdigits}")
    assert torch.equal(out, torch.relu(x))
    assert relu_flydsl.dispatch_stats() == {f"fallback/canary failed {key} on device 0": 1}
    assert vgpu.launches == []  # the failed kernel never ran on the call's tensors
