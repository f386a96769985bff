"""The bit-rule reference itself must be right before anything is judged by it."""

import numpy as np
import pytest
import torch

import reference
from flash_relu_rocm.dtypes import ALL, ALL_DTYPES
from reference import assert_relu_bits, bits, relu_bits, special_values

FLOATS = [getattr(torch, d) for d in ALL_DTYPES if ALL[d].floating]
INTEGERS = [getattr(torch, d) for d in ALL_DTYPES if not ALL[d].floating]


def test_every_dtype_of_the_table_has_a_rule():
    assert set(reference.SPECIAL) == {getattr(torch, d) for d in ALL_DTYPES}
    assert torch.int8 in INTEGERS
    with pytest.raises(ValueError, match="no bit rule"):
        reference.relu_bits_u(np.zeros(1, np.uint8), torch.uint8)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
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


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_rule_on_special_values(dtype):
    x = special_values(dtype)
    assert sorted(x.tolist()) == [-128, -1, 0, 1, 127]  # restated on purpose: checks dtypes.py's int8 row
    assert relu_bits(x).tolist() == [0 if v < 0 else v for v in x.tolist()]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rule_matches_torch_relu_on_non_nan(dtype):
    x = torch.randn(10000).to(dtype)
    x[::7] = -0.0
    assert torch.equal(bits(torch.relu(x)), relu_bits(x))


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_rule_matches_torch_relu(dtype):
    x = torch.arange(-128, 128, dtype=torch.int16).to(dtype).repeat(3)
    assert torch.equal(bits(torch.relu(x)), relu_bits(x))


def test_assert_relu_bits_detects_a_sign_flip():
    x = torch.tensor([-0.0, 1.0])
    with pytest.raises(AssertionError):
        assert_relu_bits(torch.tensor([0.0, 1.0]), x)  # maximumf's answer for -0.0


def test_assert_relu_bits_detects_a_negative_int8_passed_through():
    x = torch.tensor([-1, 5], dtype=torch.int8)
    assert_relu_bits(torch.tensor([0, 5], dtype=torch.int8), x)
    with pytest.raises(AssertionError):
        assert_relu_bits(x.clone(), x)
