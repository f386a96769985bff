"""The correctness suite on a real gfx950 (MI350X / MI355X), through relu().

Runs only where a gfx950 device is present; everywhere else each test is
reported as SKIPPED with the reason. On a gfx950 machine:

    python -m pytest -m hardware -v tests/test_hardware.py

Checks, as in the reference post: bit-exact values (against the bit rule and
against torch.relu on the same device), a sentinel guard region around the
output that must survive, and the path that actually ran (dispatch_stats).
"""

import pytest
import torch

import relu_flydsl
from flash_relu_rocm.registry import RUNGS
from reference import assert_relu_bits, bits, special_values


def _gfx950_device():
    if torch.version.hip is None:
        return None, f"torch {torch.__version__} is not a ROCm build"
    if not torch.cuda.is_available():
        return None, "no ROCm GPU visible"
    for i in range(torch.cuda.device_count()):
        if torch.cuda.get_device_properties(i).gcnArchName.split(":")[0] == "gfx950":
            return torch.device("cuda", i), ""
    return None, "no gfx950 device among the visible GPUs"


DEVICE, WHY = _gfx950_device()
pytestmark = [pytest.mark.hardware, pytest.mark.skipif(DEVICE is None, reason=f"needs a gfx950 GPU: {WHY}")]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 7, 8, 1023, 1024, 4257, 65536, 100000, 1048576, 1048583, 8192 * 8192]
GUARD = 8192
SENTINEL = -7.0


def make_input(n, dtype, kind):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g).to(dtype)
    if kind == "special":
        sv = special_values(dtype)
        x = sv.repeat(n // sv.numel() + 1)[:n].clone()
    return x.to(DEVICE)


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["random", "special"])
def test_bit_exact_and_guard_region(rung, dtype, n, kind):
    x = make_input(n, dtype, kind)
    buf = torch.full((GUARD + n + GUARD,), SENTINEL, device=DEVICE, dtype=dtype)
    out = buf[GUARD : GUARD + n]
    relu_flydsl.reset_dispatch_stats()
    relu_flydsl.relu(x, out=out, rung=rung)
    torch.cuda.synchronize(DEVICE)
    assert relu_flydsl.dispatch_stats() == {f"flydsl/{rung}/{str(dtype)[6:]}": 1}
    assert_relu_bits(out.cpu(), x.cpu())
    assert torch.equal(bits(out), bits(torch.relu(x))), "differs from torch.relu on the same device"
    sentinel = torch.full((GUARD,), SENTINEL, dtype=dtype)
    assert torch.equal(buf[:GUARD].cpu(), sentinel) and torch.equal(buf[GUARD + n :].cpu(), sentinel), \
        "the kernel wrote outside its output"


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("offset", [1, 3, 5])
def test_views_at_odd_offsets(rung, offset):
    base = make_input(4257 + offset, torch.bfloat16, "random")
    x = base[offset:]
    out = torch.full_like(x, SENTINEL)
    relu_flydsl.relu(x, out=out, rung=rung)
    assert_relu_bits(out.cpu(), x.cpu())


@pytest.mark.parametrize("rung", RUNGS)
def test_in_place(rung):
    x = make_input(100000, torch.bfloat16, "special")
    ref = x.cpu().clone()
    relu_flydsl.relu(x, out=x, rung=rung)
    assert_relu_bits(x.cpu(), ref)
