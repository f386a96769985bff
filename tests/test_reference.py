"""The bit-rule reference itself must be right before anything is judged by it."""

import pytest
import torch

from reference import assert_relu_bits, bits, relu_bits, special_values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rule_on_special_values(dtype):
    x = special_values(dtype)
    y = relu_bits(x).view(dtype)
    for xi, yi, xb, yb in zip(x.tolist(), y.tolist(), bits(x).tolist(), bits(y).tolist()):
        if xi != xi:  # NaN: bits unchanged
            assert yb == xb
        elif xi < 0:
            assert yb == 0  # +0.0, not -0.0
        else:
            assert yb == xb  # includes -0.0, +inf, denormals


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rule_matches_torch_relu_on_non_nan(dtype):
    x = torch.randn(10000).to(dtype)
    x[::7] = -0.0
    assert torch.equal(bits(torch.relu(x)), relu_bits(x))


def test_assert_relu_bits_detects_a_sign_flip():
    x = torch.tensor([-0.0, 1.0])
    with pytest.raises(AssertionError):
        assert_relu_bits(torch.tensor([0.0, 1.0]), x)  # maximumf's answer for -0.0
