"""The correctness suite on a real gfx950 (MI350X / MI355X), through relu().

Runs only where a gfx950 device is present; everywhere else each test is
reported as SKIPPED with the reason, which `-ra` prints in the summary
(one line: `SKIPPED [N] ...: needs a gfx950 GPU (MI350X/MI355X): torch ... is a
CPU-only build` or `... a CUDA 13.0 build, not ROCm, GPU: <name>`; `-v` alone cuts
it short). On a gfx950 machine, and anywhere else to see why it is skipped:

    bash tests/hardware/run.sh                  # this checkout's package
    bash tests/hardware/run.sh --variant PATH   # an installed or downloaded release (after an upgrade)

(run.sh runs `.venv/bin/python -m pytest -m hardware -ra tests/hardware/test_hardware.py`, through
tests/hardware_vgpu.py; with --variant it sets RELU_FLYDSL_HARDWARE_VARIANT to the variant folder,
loaded as `kernels` loads it, and without it drops that variable. It exits 5 when no test ran,
unless --allow-no-gpu; `run.sh --help` lists its exit statuses. test_the_package_under_test prints, and checks, which files the run tests.
Without a checkout, the variant's own check does the same: `python FOLDER check`.)

With RELU_FLYDSL_HARDWARE_TARGET=vgpu the same tests run on the virtual gfx950
against a built variant (tests/hardware_vgpu.py; tests/vgpu/test_hardware_suite.py
runs them there in CI).

The kernels' rule is `y = +0.0 if x < 0 else x` on the bits: NaN payloads,
+-inf, -0.0 and denormals pass through. Checks, as in the reference post "Beating
torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels":
bit-exact values against that rule, a sentinel guard region around the output
that must survive, and the path that actually ran (dispatch_stats). Also a
comparison with torch.relu on the same device that ignores only the sign of
zero, because torch's GPU relu is `_isnan(v) ? v : max(v, 0)`: torch 2.11 on an
NVIDIA GPU turns -0.0 into +0.0; the reference post reports -0.0 kept on its MI350X;
torch on CPU keeps -0.0 but rewrites some NaN payloads (large bf16
tensors -> 0xFFFF, f16 signalling NaNs quieted). test_observe_torch_relu
records, and prints, which holds for the ROCm torch of the machine it runs on;
it observes and never fails on torch's choices.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import hardware_vgpu
from flash_relu_rocm.registry import RUNGS
from reference import SERVED as DTYPES  # the served dtypes (flash_relu_rocm/dtypes.py)
from reference import assert_relu_bits, special_values

from benchmarks import relu_semantics  # pure torch: the observation of torch.relu on a device


def _gfx950_device():
    if torch.version.hip is None:
        gpu = f", GPU: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU visible"
        build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        return None, f"torch {torch.__version__} is {build}, not ROCm{gpu}"
    if not torch.cuda.is_available():
        return None, "no ROCm GPU visible"
    archs = [torch.cuda.get_device_properties(i).gcnArchName.split(":")[0] for i in range(torch.cuda.device_count())]
    if "gfx950" in archs:
        return torch.device("cuda", archs.index("gfx950")), ""
    return None, f"no gfx950 among the visible GPUs ({', '.join(archs)})"


ROOT = Path(__file__).resolve().parents[2]


def _target():
    """Where the suite runs: a real gfx950 with this checkout's package, or the variant
    RELU_FLYDSL_HARDWARE_VARIANT names (run.sh --variant: an installed or downloaded release,
    loaded as `kernels` loads it), or, with RELU_FLYDSL_HARDWARE_TARGET=vgpu, the virtual
    gfx950 running a built variant (tests/hardware_vgpu.py). device is None where neither is
    available (why says why)."""
    if hardware_vgpu.selected():
        return hardware_vgpu.target()
    device, why = _gfx950_device()
    variant = os.environ.get(hardware_vgpu.ENV_VARIANT)
    if not variant:
        import relu_flydsl as package
    elif device is None:
        package = None  # kernels refuses a torch-rocm variant here; every test skips with `why`
    else:
        import kernels

        package = kernels.get_local_kernel(Path(variant))
    return SimpleNamespace(device=device, why=why, package=package, synchronize=torch.cuda.synchronize,
                           results=ROOT / "results")


TARGET = _target()
DEVICE, WHY, relu_flydsl = TARGET.device, TARGET.why, TARGET.package
pytestmark = [pytest.mark.hardware, pytest.mark.skipif(DEVICE is None, reason=f"needs a gfx950 GPU (MI350X/MI355X): {WHY}")]

@pytest.fixture(autouse=True)
def _ran(request):
    """Each test that runs (not skipped) adds its name to RELU_FLYDSL_HARDWARE_RAN's file:
    run.sh fails where none did (tests/hardware_vgpu.gate)."""
    ran = os.environ.get(hardware_vgpu.ENV_RAN)
    if ran:
        with open(ran, "a", encoding="utf-8") as f:
            f.write(request.node.nodeid + "\n")


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
    TARGET.synchronize(DEVICE)
    assert relu_flydsl.dispatch_stats() == {f"flydsl/{rung}/{str(dtype)[6:]}": 1}
    assert_relu_bits(out.cpu(), x.cpu())
    same = relu_semantics.same_ignoring_zero_sign(out, torch.relu(x))
    assert bool(same.all()), (
        f"{int((~same).sum())} elements differ from torch.relu on the same device, compared on the bits "
        "ignoring only the sign of zero (torch's GPU relu may turn -0.0 into +0.0; the kernel keeps it)")
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


def test_observe_torch_relu(record_property, capsys):
    """What torch.relu (and the harness's torch.clamp baseline) does on this device to -0.0,
    NaN payloads (quiet, signalling, negative) and denormals: recorded (results/ and the
    JUnit properties) and printed. An observation: torch's choices here never fail it."""
    doc = relu_semantics.observe_torch(DEVICE)
    text = relu_semantics.format_observation(doc)
    out = TARGET.results
    out.mkdir(exist_ok=True)
    (out / "torch_relu_observed.json").write_text(json.dumps(doc, indent=2) + "\n")
    for op, obs in doc["ops"].items():
        record_property(op, relu_semantics.summary(obs))
    with capsys.disabled():
        print("\n" + text + f"\n(written to {out / 'torch_relu_observed.json'})")
    # what must hold is only that every value was observed
    assert all(len(recs) == len(relu_semantics.OBSERVED) for obs in doc["ops"].values() for recs in obs.values())


def test_the_package_under_test(record_property, capsys):
    """The files this run tests: with run.sh --variant (RELU_FLYDSL_HARDWARE_VARIANT) the variant's,
    never this checkout's, each matching its release digest (a broken download fails here); without
    it, this checkout's package (a build of it on the virtual gfx950)."""
    where = Path(os.path.abspath(relu_flydsl.__file__)).parent  # not resolved: the cache links into blobs/
    line = f"relu_flydsl under test: {relu_flydsl.__name__} version {relu_flydsl.__version__} from {where}"
    record_property("package", str(where))
    with capsys.disabled():
        print("\n" + line)
    variant = os.environ.get(hardware_vgpu.ENV_VARIANT)
    if variant:
        assert where == Path(os.path.abspath(variant)), f"{line}, not from the variant asked for, {variant}"
        relu_flydsl.verify_digest()  # VariantVerificationError names each changed, missing or added file
    elif not hardware_vgpu.selected():
        assert where == ROOT / "torch-ext" / "relu_flydsl", f"{line}, not from this checkout"
