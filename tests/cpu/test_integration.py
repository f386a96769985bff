"""Serving-grade integration: torch.library registration, torch.compile,
autograd, kernels.kernelize, graph safety and observable dispatch.

CPU tests run in this process. Tests named test_noop_* take the real kernel
path (shipped code objects, module load, ctypes launch) through a no-op libamdhip64.so.7 (tools/noop_hip/): one process can hold
only one libamdhip64.so.7 and the virtual-device suite loads its own, so these
tests run in one child pytest process (this file, -k test_noop_) that loads
the no-op library first; in the parent each test reports its child's result.
The no-op device computes nothing: values are never checked there.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

import relu_flydsl
from relu_flydsl import _dispatch, _ops, layers
from relu_flydsl._relu import _relu_op, _relu_out_op
from reference import SERVED_FLOATS
from reference import bits  # the integer view of each dtype (flash_relu_rocm/dtypes.py)

CHILD_ENV = "RELU_FLYDSL_NOOP_CHILD"
IN_CHILD = os.environ.get(CHILD_ENV) == "1"


# ---- 1. torch.library registration, opcheck, torch.compile --------------------
def test_ops_registered_under_kernel_namespace():
    ns = _ops._OPS_NAME
    assert _ops.add_op_namespace_prefix("relu") == f"{ns}::relu"
    for name in ("relu", "relu_out"):
        op = getattr(getattr(torch.ops, ns), name).default
        assert op.name() == f"{ns}::{name}"
    schema = str(getattr(torch.ops, ns).relu_out.default._schema)
    assert "!) out" in schema, schema  # declared as mutating out


def test_fake_impl_gives_shape_dtype_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 5, dtype=torch.bfloat16)
        y = _relu_op(x)
    assert y.shape == (3, 5) and y.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_opcheck_relu(dtype):
    x = torch.randn(4, 7).to(dtype)
    torch.library.opcheck(_relu_op, (x,))
    torch.library.opcheck(_relu_op, (x.detach().requires_grad_(dtype == torch.float32),))


def test_opcheck_relu_out():
    x = torch.randn(33)
    torch.library.opcheck(_relu_out_op, (x, torch.empty_like(x)))


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = layers.ReLU()

    def forward(self, x):
        return self.act(relu_flydsl.relu(x) * 2 - 1)


# Compiled graphs take torch's relu by default and the kernel op with
# RELU_FLYDSL_COMPILE=op; both must trace fullgraph, dynamic, without recompiles.
# What Inductor makes of each is measured in tests/cpu/test_compile_fusion.py.
@pytest.fixture(params=["torch", "op"])
def compile_mode(request, monkeypatch):
    monkeypatch.setenv("RELU_FLYDSL_COMPILE", request.param)
    return request.param


def _graph_recorder():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    return graphs, backend


def _uses_op(graphs):
    return any(f"{_ops._OPS_NAME}." in g for g in graphs)


def test_compile_fullgraph_dynamic_no_recompile(compile_mode):
    torch._dynamo.reset()
    graphs, backend = _graph_recorder()
    model = _Model()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for n in (3, 17, 100, 1025):
            x = torch.randn(n)
            assert torch.equal(compiled(x), model(x))
        x = torch.randn(5, 9)  # a new rank is a new graph by design; stays out of this check
    assert len(graphs) == 1 and _uses_op(graphs) == (compile_mode == "op"), graphs
    torch._dynamo.reset()


def test_compile_out_variant_fullgraph(compile_mode):
    torch._dynamo.reset()
    graphs, backend = _graph_recorder()

    def f(x, y):
        relu_flydsl.relu(x, out=y)
        return y + 1

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend=backend)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for n in (10, 33):
            x = torch.randn(n)
            y = torch.empty_like(x)
            out = compiled(x, y)
            assert torch.equal(y, torch.relu(x)) and torch.equal(out, torch.relu(x) + 1)
    x = torch.randn(12)
    expected = torch.relu(x)
    out = compiled(x, x)  # in place: x passed twice is a new graph (dynamo's duplicate-input guard)
    assert torch.equal(x, expected) and torch.equal(out, expected + 1)
    # default: torch's clamp_min plus the run-time overlap check (check_out); "op": relu_out
    assert _uses_op(graphs) and (".relu_out." in "".join(graphs)) == (compile_mode == "op"), graphs
    torch._dynamo.reset()


# ---- 2. autograd ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", SERVED_FLOATS)
def test_gradients_bit_identical_to_torch(dtype):
    vals = [0.0, -0.0, 1.5, -2.0, float("nan"), float("inf"), float("-inf"), 1e-40, -1e-40, 3.0]
    x = torch.tensor(vals, dtype=torch.float32).to(dtype)
    grad = torch.tensor([1.0, 2.0, 3.0, -4.0, 5.0, 6.0, 7.0, float("nan"), 9.0, -0.0]).to(dtype)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    ya, yb = relu_flydsl.relu(a), torch.relu(b)
    assert torch.equal(bits(ya.detach()), bits(yb.detach()))
    ya.backward(grad)
    yb.backward(grad)
    assert torch.equal(bits(a.grad), bits(b.grad)), (a.grad, b.grad)
    assert a.grad[0].item() == 0.0  # zero gradient at x == 0, as torch


def test_out_with_grad_is_rejected_and_writes_nothing():
    x = torch.randn(4, requires_grad=True)
    y = torch.full((4,), 7.0)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        relu_flydsl.relu(x, out=y)
    assert torch.equal(y, torch.full((4,), 7.0))


def test_layer_flags_are_truthful():
    assert layers.ReLU.has_backward is True and layers.ReLU.can_torch_compile is True
    # has_backward: gradients flow through the layer
    x = torch.randn(64, requires_grad=True)
    layers.ReLU()(x).sum().backward()
    assert torch.equal(x.grad, (x.detach() > 0).to(x.dtype))
    # can_torch_compile: compiles without graph breaks, forward and backward,
    # whichever path RELU_FLYDSL_COMPILE picks (tests/cpu/test_compile_fusion.py: Inductor fuses it)
    for mode in ("torch", "op"):
        torch._dynamo.reset()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RELU_FLYDSL_COMPILE", mode)
            layer = torch.compile(layers.ReLU(), fullgraph=True, backend="aot_eager")
            x2 = x.detach().clone().requires_grad_()
            layer(x2).sum().backward()
        assert torch.equal(x2.grad, x.grad), mode
    torch._dynamo.reset()


# ---- 3. kernels.kernelize --------------------------------------------------------
@pytest.fixture(scope="module")
def built_variant(tmp_path_factory):
    out = tmp_path_factory.mktemp("relu-build") / "relu-build"
    subprocess.run([sys.executable, str(ROOT / "tools" / "build_variant.py"), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def test_kernelize_replaces_forward_with_built_variant(built_variant):
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

    @use_kernel_forward_from_hub("ReLU")
    class ReLU(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x)

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with torch.no_grad():
        before = model(x)
    assert model[1].forward.__func__ is ReLU.forward

    # kernels resolves a LocalLayerRepository with get_local_kernel: on a CPU
    # machine it refuses the repo root (its only variant is torch-rocm, which
    # "does not match system backend (cpu)"), but loads the variant folder
    # itself. The mapping is registered for device "cpu": for "rocm",
    # kernelize queries torch.cuda's device capability, which a CPU build of
    # torch cannot answer. The same layer serves gfx950 through "rocm".
    variant = built_variant / "build" / "torch-rocm"
    mapping = {"ReLU": {"cpu": LocalLayerRepository(variant, layer_name="ReLU")}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=Mode.INFERENCE, device="cpu", use_fallback=False)

    fwd = model[1].forward.__func__
    assert fwd is not ReLU.forward
    assert fwd.__qualname__ == "ReLU.forward" and fwd.__module__.endswith(".layers")
    # The variant's module (named by its metadata id). kernels caches imported
    # variants by that name, so an identical build loaded by another test in
    # this pytest run may serve it: compare identity by id, not by folder.
    variant_id = json.loads((variant / "metadata.json").read_text())["id"]
    assert fwd.__module__ == f"{variant_id}.layers"
    assert fwd.__code__.co_filename.endswith("build/torch-rocm/layers.py")
    with torch.no_grad():
        after = model(x)
    assert torch.equal(bits(after), bits(before))

    # training + compile modes are accepted too (the flags are declared)
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=Mode.TRAINING | Mode.TORCH_COMPILE, device="cpu", use_fallback=False)
    assert model[1].forward.__func__ is fwd


# ---- 4-6. the FlyDSL path on the no-op HIP library (child process) ---------------
_child_results = {}


def _run_child():
    xml = Path(os.environ.get("TMPDIR", "/tmp")) / f"relu-flydsl-noop-{os.getpid()}.xml"
    env = dict(os.environ, **{CHILD_ENV: "1"})
    for var in ("RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG"):
        env.pop(var, None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-k", "test_noop_", "-p", "no:cacheprovider",
         f"--junitxml={xml}"],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(ROOT),
    )
    results = {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
            results[case.get("name")] = (
                ("passed", "") if problem is None else (problem.tag, (problem.get("message") or "") + "\n" + (problem.text or ""))
            )
        xml.unlink()
    results["__output__"] = proc.stdout[-4000:] + proc.stderr[-4000:]
    return results


@pytest.fixture
def noop_device(request, monkeypatch):
    """In the child: the no-op libamdhip64.so.7 loaded, CPU tensors presented
    as gfx950 memory on a stream the test chooses (noop_device.stream = n).
    In the parent: the child's result for this test."""
    if not IN_CHILD:
        if not _child_results:
            _child_results.update(_run_child())
        outcome, message = _child_results.get(request.node.name, ("missing", _child_results["__output__"]))
        if outcome == "skipped":
            pytest.skip(f"(child process) {message}")
        if outcome != "passed":
            pytest.fail(f"no-op device test failed in the child process ({outcome}):\n{message}", pytrace=False)
        yield None  # the child ran this test and it passed; the body returns at once
        return
    try:
        from tools import noop_hip
        lib = noop_hip.load()
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot build/load the no-op HIP library here: {e}")

    class Device:
        stream = 0x5000
        hip = lib

    import relu_flydsl
    from vgpu.serve import present_cpu_as

    restore = present_cpu_as(relu_flydsl, stream=lambda: Device.stream, setattr_=monkeypatch.setattr)
    monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    monkeypatch.delenv("RELU_FLYDSL_RUNG", raising=False)
    # The no-op device computes nothing, so no first-use canary can pass on it
    # (canaries are tested on the virtual gfx950, tests/vgpu/test_canary.py).
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    _dispatch.STATE.reset()
    lib.noop_hip_reset()
    yield Device
    restore()
    monkeypatch.undo()  # environment and device_info back before re-reading settings
    _dispatch.STATE.reset()
    lib.noop_hip_reset()


def _no_sync_no_alloc(monkeypatch):
    """Make every host synchronization and every torch allocation entry point raise."""

    def forbidden(name):
        def f(*a, **k):
            raise AssertionError(f"{name} called on the FlyDSL out= path")
        return f

    for name in ("empty", "empty_like", "zeros", "zeros_like", "empty_strided", "full", "ones"):
        monkeypatch.setattr(torch, name, forbidden(f"torch.{name}"))
    for name in ("item", "cpu", "tolist", "numpy", "clone", "contiguous", "to"):
        monkeypatch.setattr(torch.Tensor, name, forbidden(f"Tensor.{name}"))
    monkeypatch.setattr(torch.cuda, "synchronize", forbidden("torch.cuda.synchronize"))
    monkeypatch.setattr(torch.cuda.Stream, "synchronize", forbidden("Stream.synchronize"))
    monkeypatch.setattr(torch.cuda.Event, "synchronize", forbidden("Event.synchronize"))


def _planned(shape):
    """x = randn(shape) and y = empty_like(x) after a first relu(x, out=y): the kernel is
    loaded and the launch planned (which may allocate), so the next call meets its cached entry."""
    x = torch.randn(shape)
    y = torch.empty_like(x)
    relu_flydsl.relu(x, out=y)
    return x, y


@pytest.mark.parametrize("shape", [(1000,), (8, 125)])
def test_noop_out_path_launches_on_current_stream_without_alloc_or_sync(noop_device, monkeypatch, shape):
    if noop_device is None:
        return
    hip = noop_device.hip
    x, y = _planned(shape)
    start = hip.noop_hip_launch_count()
    syncs, mallocs, copies = hip.noop_hip_sync_count(), hip.noop_hip_malloc_count(), hip.noop_hip_memcpy_count()
    _no_sync_no_alloc(monkeypatch)
    streams = [0x1000, 0x2000, 0x1000, 0x3000]
    for s in streams:
        noop_device.stream = s  # "torch's current stream" as device_info reports it
        assert relu_flydsl.relu(x, out=y) is y
    monkeypatch.undo()
    n = hip.noop_hip_launch_count() - start
    assert n == len(streams)
    assert [hip.noop_hip_launch_stream(start + i) for i in range(n)] == streams
    assert hip.noop_hip_sync_count() == syncs, "the FlyDSL path synchronized the device"
    assert hip.noop_hip_malloc_count() == mallocs and hip.noop_hip_memcpy_count() == copies
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 1 + len(streams)}


def test_noop_out_path_allocates_no_tensor_memory(noop_device):
    if noop_device is None:
        return
    x, y = _planned(4096)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(3):
            relu_flydsl.relu(x, out=y)
    allocated = sum(max(e.cpu_memory_usage, 0) for e in prof.events())
    assert allocated == 0, f"{allocated} bytes allocated by torch on the out= path"
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 4}


def test_noop_dispatch_stats_count_each_path(noop_device):
    if noop_device is None:
        return
    hip = noop_device.hip
    relu_flydsl.relu(torch.randn(64), out=torch.empty(64))
    relu_flydsl.relu(torch.randn(64, dtype=torch.bfloat16))
    relu_flydsl.relu(torch.randn(64), rung="v2")
    relu_flydsl.relu(torch.randn(8, 8)[:, ::2])                  # strided with gaps
    relu_flydsl.relu(torch.arange(-3, 3))                         # int64
    relu_flydsl.relu(torch.randn(0))                              # empty
    relu_flydsl.relu(torch.randn(4, device="meta"))               # not a ROCm device
    assert relu_flydsl.dispatch_stats() == {
        "fallback/dtype int64": 1,
        "fallback/empty tensor": 1,
        "fallback/non-contiguous": 1,
        "fallback/not a ROCm device": 1,
        "flydsl/v2/float32": 1,
        "flydsl/v5/bfloat16": 1,
        "flydsl/v5/float32": 1,
    }
    assert hip.noop_hip_launch_count() == 3
    relu_flydsl.reset_dispatch_stats()
    assert relu_flydsl.dispatch_stats() == {}


def test_noop_disable_env_forces_fallback_everywhere(noop_device, monkeypatch):
    if noop_device is None:
        return
    hip = noop_device.hip
    x, y = _planned(256)
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    _dispatch.STATE.refresh()
    relu_flydsl.reset_dispatch_stats()
    before = hip.noop_hip_launch_count()
    relu_flydsl.relu(x, out=y)
    relu_flydsl.relu(x)
    relu_flydsl.relu(x.to(torch.float16), rung="v3")
    assert hip.noop_hip_launch_count() == before
    assert relu_flydsl.dispatch_stats() == {"fallback/disabled by RELU_FLYDSL_DISABLE": 3}
    assert torch.equal(y, torch.relu(x))  # the fallback really computed it


def test_noop_rung_env_forces_rung(noop_device, monkeypatch):
    if noop_device is None:
        return
    x, y = _planned(512)
    monkeypatch.setenv("RELU_FLYDSL_RUNG", "v3")
    _dispatch.STATE.refresh()
    relu_flydsl.reset_dispatch_stats()
    relu_flydsl.relu(x, out=y)
    relu_flydsl.relu(x)
    relu_flydsl.relu(x, out=y, rung="v4")  # an explicit rung still wins
    assert relu_flydsl.dispatch_stats() == {"flydsl/v3/float32": 2, "flydsl/v4/float32": 1}
    monkeypatch.setenv("RELU_FLYDSL_RUNG", "v9")  # a typo must not take the process down
    with pytest.warns(RuntimeWarning, match="ignoring RELU_FLYDSL_RUNG='v9'"):
        _dispatch.STATE.refresh()
    assert _dispatch.STATE.settings.default_rung == "v5"


def test_noop_failed_launch_raises(noop_device):
    if noop_device is None:
        return
    hip = noop_device.hip
    x, y = _planned(128)
    hip.noop_hip_fail_launches(1, 719)
    with pytest.raises(RuntimeError, match="HIP error"):
        relu_flydsl.relu(x, out=y)
    relu_flydsl.relu(x, out=y)  # the error was taken: the next launch is clean
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 2}


def test_noop_hot_path_validates_like_check(noop_device):
    if noop_device is None:
        return
    x, y = _planned(64)
    buf = torch.randn(65)
    with pytest.raises(ValueError, match="overlaps"):
        relu_flydsl.relu(buf[:64], out=buf[1:])
    with pytest.raises(ValueError, match="shape"):
        relu_flydsl.relu(x, out=torch.empty(8, 8))
    with pytest.raises(TypeError, match="dtype"):
        relu_flydsl.relu(x, out=torch.empty(64, dtype=torch.float16))
    with pytest.raises(ValueError, match="unknown rung"):
        relu_flydsl.relu(x, out=y, rung="v0")
    assert relu_flydsl.relu(y, out=y) is y  # in place is allowed
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 2}
