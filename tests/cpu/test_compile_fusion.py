"""Under torch.compile, relu must never cost a fusion.

Measured on CPU with Inductor: torch._inductor.utils.run_and_get_code returns
the generated wrapper code; we count the fused kernels its call() runs and the
package's custom ops it calls, and compare with the same model using
torch.nn.ReLU. Compiles are few and small (Inductor's graph cache serves a
graph identical to the baseline's, which is what these tests expect anyway).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch._inductor.utils import run_and_get_code

ROOT = Path(__file__).resolve().parents[2]

import relu_flydsl
from reference import INT_VIEW  # the integer view of each dtype (flash_relu_rocm/dtypes.py)
from relu_flydsl import _relu, layers

_KERNEL_CALL = re.compile(r"^\s+(cpp_fused_\w+)\(", re.M)
# a call of any build's op (the namespace carries the build id), not a comment
_OP_CALL = re.compile(r"^[ \t]+(?:[^#\n]*?\W)?torch\.ops\._relu_flydsl_\w+\.(\w+)\.default\(", re.M)


@pytest.fixture(autouse=True)
def _default_compile_path(monkeypatch):
    monkeypatch.delenv(_relu.ENV_COMPILE, raising=False)  # the caller's shell must not pick the path


def inductor(fn, *args):
    """(output, fused kernels called, package ops called) of fn compiled by Inductor, fullgraph."""
    out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    code = "\n".join(codes)
    assert "def call(" in code, "run_and_get_code captured no Inductor output"
    return out, _KERNEL_CALL.findall(code), _OP_CALL.findall(code)


def mlp(act):
    torch.manual_seed(0)  # same weights for every activation
    return nn.Sequential(nn.Linear(8, 16), act, nn.Linear(16, 4))


def chain(act):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), act, nn.SiLU(), nn.Linear(16, 4))


MODELS = {"mlp": mlp, "chain": chain}


def _x():
    torch.manual_seed(1)
    return torch.randn(3, 8)


def _inference(model):
    with torch.no_grad():
        return inductor(model, _x())


def _training(model):
    """Forward and backward compiled (the backward graph compiles inside
    .backward(), so run_and_get_code sees both): output, input gradient,
    kernels and ops of both graphs."""
    compiled = torch.compile(model, fullgraph=True)
    x = _x().requires_grad_()

    def step(x):
        y = compiled(x)
        y.sum().backward()
        return y.detach()

    out, codes = run_and_get_code(step, x)
    code = "\n".join(codes)
    assert code.count("def call(") == 2, "expected a forward and a backward graph"
    return (out, x.grad), _KERNEL_CALL.findall(code), _OP_CALL.findall(code)


@pytest.fixture(scope="module")
def baseline():
    """nn.ReLU's compiled kernels per (model, inference|training), with outputs."""
    return {}


def _baseline(baseline, name, kind):
    key = (name, kind)
    if key not in baseline:
        model = MODELS[name](nn.ReLU())
        out, kernels, ops = (_inference if kind == "inference" else _training)(model)
        # the baseline itself: relu fused into a kernel with its neighbours
        assert kernels and any("relu" in k for k in kernels), kernels
        assert ops == []
        baseline[key] = (out, kernels)
    return baseline[key]


def _same(a, b):
    if isinstance(a, tuple):
        return all(_same(u, v) for u, v in zip(a, b))
    return torch.equal(a, b)


# ---- 1. the package's relu lets Inductor fuse --------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_layer_fuses_like_nn_relu(baseline, name):
    ref_out, ref_kernels = _baseline(baseline, name, "inference")
    out, kernels, ops = _inference(MODELS[name](layers.ReLU()))
    assert ops == [], f"custom op in the compiled graph: {ops}"
    assert kernels == ref_kernels
    assert torch.equal(out, ref_out)
    with torch.no_grad():  # and torch's eager result, to rounding (Inductor reorders GELU/SiLU math)
        torch.testing.assert_close(out, MODELS[name](nn.ReLU())(_x()))


class _InPlace(nn.Module):
    def forward(self, h):
        return relu_flydsl.relu(h, out=h)


@pytest.mark.parametrize("name", MODELS)
def test_in_place_out_fuses_like_nn_relu(baseline, name):
    ref_out, ref_kernels = _baseline(baseline, name, "inference")
    out, kernels, ops = _inference(MODELS[name](_InPlace()))
    assert ops == []
    assert len(kernels) == len(ref_kernels), (kernels, ref_kernels)  # named after clamp_min, not relu
    assert torch.equal(out, ref_out)


def test_out_buffer_is_written_by_the_fused_kernel(baseline):
    """relu(h, out=y), y a separate buffer: the relu is fused into the write
    of y; the only op call is the run-time overlap check (metadata only)."""
    ref_out, ref_kernels = _baseline(baseline, "mlp", "inference")
    model = mlp(nn.ReLU())
    y = torch.full((3, 16), 7.0)

    def f(x, y):
        relu_flydsl.relu(model[0](x), out=y)
        return model[2](y)

    with torch.no_grad():
        out, kernels, ops = inductor(f, _x(), y)
        assert torch.equal(y, torch.relu(model[0](_x())))
    assert ops == ["check_out"]
    assert len(kernels) == len(ref_kernels), (kernels, ref_kernels)
    assert torch.equal(out, ref_out)


# -0.0, a quiet NaN with a payload, a signalling NaN, a negative NaN, a negative denormal, 1.0
# (this graph's own inputs, as signed bits; not dtypes.py's special table)
_SPECIALS = {torch.float32: [-2**31, 0x7FC00123, 0x7F800001, -0x3FFFFF, -2**31 + 1, 0x3F800000],
             torch.bfloat16: [-2**15, 0x7FC1, 0x7F81, -63, -2**15 + 1, 0x3F80]}


def _specials(device):
    return [torch.tensor(bits * 50, dtype=INT_VIEW[dt]).view(dt).to(device) for dt, bits in _SPECIALS.items()]


def _pkg_relu(a, b):
    return relu_flydsl.relu(a), relu_flydsl.relu(b)


def _pkg_out_y(a, b):
    ya, yb = torch.empty_like(a), torch.empty_like(b)
    relu_flydsl.relu(a, out=ya)
    relu_flydsl.relu(b, out=yb)
    return ya, yb


def _pkg_out_x(a, b):
    a, b = a.clone(), b.clone()
    relu_flydsl.relu(a, out=a)
    relu_flydsl.relu(b, out=b)
    return a, b


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_compiled_relu_is_inductors_torch_relu_bit_for_bit(device):
    """Every form compiles to what Inductor makes of torch.relu on that
    device, special values included; not clamp_min, which Inductor lowers
    differently (on an H200 with torch 2.11, clamp_min gave +0.0 for -0.0
    and 0x7FFFFFFF for float32 NaNs, where relu kept both, as the bit rule)."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device here: Triton's lowering is checked on a GPU machine")
    xs = _specials(device)
    ref, _, _ = inductor(lambda a, b: (torch.relu(a), torch.relu(b)), *xs)
    for f in (_pkg_relu, _pkg_out_y, _pkg_out_x):
        got, _, ops = inductor(f, *xs)
        assert ops == ([] if f is not _pkg_out_y else ["check_out", "check_out"]), (f.__name__, ops)
        for g, r, x in zip(got, ref, xs):
            it = INT_VIEW[x.dtype]
            assert torch.equal(g.view(it), r.view(it)), (f.__name__, x.dtype, g.view(it)[:6], r.view(it)[:6])


# ---- 2. after kernels.kernelize, in every mode -------------------------------------
@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    out = tmp_path_factory.mktemp("relu-build") / "relu-build"
    subprocess.run([sys.executable, str(ROOT / "tools" / "build_variant.py"), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    return out / "build" / "torch-rocm"


def _modes():
    from kernels import Mode

    return {
        "inference": Mode.INFERENCE,
        "training": Mode.TRAINING,
        "inference+compile": Mode.INFERENCE | Mode.TORCH_COMPILE,
        "training+compile": Mode.TRAINING | Mode.TORCH_COMPILE,
    }


@pytest.mark.parametrize("mode_name", ["inference", "training", "inference+compile", "training+compile"])
def test_kernelized_layer_fuses_like_nn_relu(baseline, variant, mode_name):
    """kernelize swaps layers.ReLU in under every mode (the layer declares
    has_backward and can_torch_compile); compiled, it costs no fusion."""
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

    mode = _modes()[mode_name]

    @use_kernel_forward_from_hub("ReLU")
    class ReLU(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x)

    # device "cpu": see tests/cpu/test_integration.py::test_kernelize_replaces_forward_with_built_variant
    mapping = {"ReLU": {"cpu": LocalLayerRepository(variant, layer_name="ReLU")}}
    variant_id = json.loads((variant / "metadata.json").read_text())["id"]
    kind = "training" if Mode.TRAINING in mode else "inference"
    for name, make in MODELS.items():
        model = make(ReLU())
        with use_kernel_mapping(mapping, inherit_mapping=False):
            kernelize(model, mode=mode, device="cpu", use_fallback=False)
        act = next(m for m in model if isinstance(m, ReLU))
        assert act.forward.__func__.__module__ == f"{variant_id}.layers", "kernelize did not swap the layer in"
        ref_out, ref_kernels = _baseline(baseline, name, kind)
        out, kernels, ops = (_inference if kind == "inference" else _training)(model)
        assert ops == [], (name, ops)
        assert kernels == ref_kernels, (name, kernels, ref_kernels)
        assert _same(out, ref_out), name


# ---- 3. the switch: RELU_FLYDSL_COMPILE=op keeps the FlyDSL op ----------------------
def test_switch_keeps_the_flydsl_op(monkeypatch):
    monkeypatch.setenv(_relu.ENV_COMPILE, "op")
    out, kernels, ops = _inference(mlp(layers.ReLU()))
    assert ops == ["relu"]
    with torch.no_grad():
        assert torch.equal(out, mlp(nn.ReLU())(_x()))  # the op's CPU fallback: torch's kernel

    def f(h, y):
        relu_flydsl.relu(h, out=y)
        return y * 2

    h = torch.randn(40)
    y = torch.empty_like(h)
    out, _, ops = inductor(f, h, y)
    assert ops == ["relu_out"]
    assert torch.equal(y, torch.relu(h)) and torch.equal(out, torch.relu(h) * 2)


def _dynamo_graphs():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    return graphs, backend


def test_switch_is_read_when_a_graph_is_traced(monkeypatch):
    graphs, backend = _dynamo_graphs()
    torch._dynamo.reset()
    f = torch.compile(lambda x: relu_flydsl.relu(x) + 1, fullgraph=True, backend=backend)
    x = torch.randn(5)
    monkeypatch.setenv(_relu.ENV_COMPILE, "op")
    assert torch.equal(f(x), torch.relu(x) + 1)
    monkeypatch.delenv(_relu.ENV_COMPILE)
    f(x)  # same graph: no retrace, no guard on the variable
    assert len(graphs) == 1 and "_relu_flydsl_" in graphs[0] and ".relu.default(" in graphs[0]
    torch._dynamo.reset()
    f(x)  # traced again: the default
    assert len(graphs) == 2 and "_relu_flydsl_" not in graphs[1] and "torch.relu(" in graphs[1], graphs[1]
    monkeypatch.setenv(_relu.ENV_COMPILE, "flydsl")  # unknown: warns, keeps the default
    torch._dynamo.reset()
    with pytest.warns(RuntimeWarning, match="ignoring RELU_FLYDSL_COMPILE='flydsl'"):
        f(x)
    assert "_relu_flydsl_" not in graphs[2]
    torch._dynamo.reset()


def test_opcheck_check_out_op():
    x = torch.randn(9)
    torch.library.opcheck(_relu._check_out_op, (x, torch.empty_like(x)))


# ---- validation still raises under torch.compile ----------------------------------
def test_bad_input_raises_at_trace_time():
    def f(x, y):
        return relu_flydsl.relu(x, out=y)

    x = torch.randn(4)
    for y, exc, msg in ((torch.empty(4, dtype=torch.float16), TypeError, "out has dtype"),
                        (torch.empty(5), ValueError, "out has shape"),
                        (torch.empty(8)[::2], ValueError, "dense")):
        torch._dynamo.reset()
        with pytest.raises(exc, match=msg):
            torch.compile(f, backend="eager")(x, y)  # graph break: eager raises the error itself
        torch._dynamo.reset()
        with pytest.raises(Exception, match=msg):  # fullgraph: dynamo's error names it
            torch.compile(f, fullgraph=True, backend="eager")(x, y)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown rung"):
        torch.compile(lambda x: relu_flydsl.relu(x, rung="v0"), fullgraph=True, backend="eager")(x)
    torch._dynamo.reset()


def test_partial_overlap_raises_at_run_time_with_nothing_written():
    def f(a, b):
        relu_flydsl.relu(a, out=b)
        return b

    buf = torch.randn(65)
    before = buf.clone()
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="overlaps"):
        torch.compile(f, fullgraph=True)(buf[:64], buf[1:])
    assert torch.equal(buf, before)
    torch._dynamo.reset()


def test_compile_switch_is_marked_as_torch_marks_a_constant_result():
    """_relu sets assume_constant_result's mark itself (the decorator imports
    torch._dynamo at package import); it must be exactly what the installed
    torch's decorator sets."""
    import relu_flydsl._relu as R

    def probe():
        return True

    marked = torch.compiler.assume_constant_result(probe)
    added = {k: v for k, v in vars(marked).items()}
    assert added == {"_dynamo_marked_constant": True}, added
    assert getattr(R._compile_uses_op, "_dynamo_marked_constant", None) is True
