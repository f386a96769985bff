"""HIP graph capture on the virtual gfx950, through the public
relu(): warm up, capture relu(x, out=y) (single and split launches), write
new data into x, replay, y is bit-exact; a first call inside a capture takes
the documented torch fallback without touching the capture."""

import pytest
import torch

import vgpu_support as S
from reference import SERVED  # the served dtypes (flash_relu_rocm/dtypes.py)

pytestmark = pytest.mark.vgpu


def _pkg():
    import relu_flydsl
    from relu_flydsl import _dispatch
    from relu_flydsl.flash_relu_rocm import plan

    return relu_flydsl, _dispatch, plan


@pytest.fixture
def cap(vgpu):
    vgpu.stream = vgpu.create_stream(0)
    vgpu.refuse_loads_during_capture()  # stricter than clr: a module load inside a capture fails the test
    return vgpu


def _capture_and_replay(dev, dtype, n, rounds=3):
    relu_flydsl = _pkg()[0]
    x, xbuf = dev.guarded((n,), dtype, name="x")
    out, obuf = dev.guarded((n,), dtype, name="out")
    x.copy_(S.to_tensor(S.make_bits("mixed", n, dtype, 0), dtype))
    stream = dev.stream
    dev.begin_capture(stream)
    assert relu_flydsl.relu(x, out=out) is out
    assert dev.is_capturing(stream) == 1
    graph = dev.end_capture(stream)
    nodes = dev.graph_nodes(graph)
    exe = dev.instantiate(graph)
    launched = len(dev.launches)
    for seed in range(1, rounds + 1):  # new data in x each time; the graph reads it
        xbits = S.make_bits("mixed", n, dtype, seed)
        x.copy_(S.to_tensor(xbits, dtype))
        out.fill_(0)
        dev.replay(exe, stream)
        dev.check()
        S.assert_bits(out, S.relu_bits(xbits, dtype))
        S.assert_guards(obuf, out)
        S.assert_guards(xbuf, x)
    dev.destroy_exec(exe)
    dev.destroy_graph(graph)
    return nodes, len(dev.launches) - launched


@pytest.mark.parametrize("dtype", SERVED, ids=str)
def test_warmup_then_capture_a_single_launch(cap, dtype):
    relu_flydsl, dispatch, _ = _pkg()
    relu_flydsl.warmup(dtype)
    nodes, replayed = _capture_and_replay(cap, dtype, 4096)
    assert nodes == 1 and replayed == 3
    name = str(dtype)[6:]
    assert relu_flydsl.dispatch_stats() == {f"flydsl/v5/{name}": 1}  # the captured call
    assert all(r.stream == cap.stream for r in cap.launches)


def test_warmup_then_capture_split_launches(cap, monkeypatch):
    relu_flydsl, dispatch, plan = _pkg()
    monkeypatch.setattr(plan, "LIMITS", plan.LaunchLimits(max_index=3000, max_buffer_bytes=6000))
    dispatch.reset_dispatch_stats()
    try:
        relu_flydsl.warmup("bfloat16")
        nodes, replayed = _capture_and_replay(cap, torch.bfloat16, 10240)
    finally:
        dispatch.reset_dispatch_stats()
    assert nodes > 2 and replayed == 3 * nodes


def test_capture_after_an_eager_call_uses_the_hot_path(cap):
    """An eager call first (canary, plan, direct launch cached): the captured
    call then goes through relu()'s hot path."""
    relu_flydsl, dispatch, _ = _pkg()
    n, dtype = 4096, torch.float32
    x, _ = cap.guarded((n,), dtype, name="x0")
    out, _ = cap.guarded((n,), dtype, name="out0")
    relu_flydsl.relu(x, out=out)
    nodes, replayed = _capture_and_replay(cap, dtype, n)  # same size and alignment: the cached entry
    assert nodes == 1 and replayed == 3


@pytest.mark.parametrize("canary", ["1", "0"])
def test_first_call_inside_capture_falls_back(cap, monkeypatch, canary):
    """Not warmed up: the call inside the capture runs torch's kernel (the
    graph holds no launch of ours), the capture stays valid, and the stats
    say to call warmup()."""
    relu_flydsl, dispatch, _ = _pkg()
    monkeypatch.setenv("RELU_FLYDSL_CANARY", canary)
    n, dtype = 4096, torch.bfloat16
    xbits = S.make_bits("mixed", n, dtype, 7)
    x, _ = cap.guarded((n,), dtype, name="x")
    x.copy_(S.to_tensor(xbits, dtype))
    out, _ = cap.guarded((n,), dtype, name="out")
    loads = cap.counts()["load"]
    cap.begin_capture(cap.stream)
    relu_flydsl.relu(x, out=out)
    assert cap.is_capturing(cap.stream) == 1, "the capture must stay valid"
    graph = cap.end_capture(cap.stream)
    assert cap.graph_nodes(graph) == 0
    cap.destroy_graph(graph)
    assert (S.tensor_bits(out) == S.tensor_bits(torch.relu(x))).all()  # torch's kernel (on the CPU here)
    reason = "not verified" if canary == "1" else "not loaded"
    assert relu_flydsl.dispatch_stats() == {f"fallback/{reason} before graph capture (call warmup())": 1}
    assert cap.launches == [] and cap.canary_launches == []
    assert cap.counts()["load"] == loads  # no module load inside the capture
