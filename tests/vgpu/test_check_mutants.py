"""Tests written for the check mutants of tests/mutation_support.py
(CHECK_MUTANTS) that no other test caught: the canary's planner check and
guards, capture states (invalidated, a failing query, a module loaded with the
canary off), the stream a launch uses, and in place by address and strides.
Each passes on the tree and fails on its mutant (tests/test_mutations.py)."""

import dataclasses
import types

import pytest
import torch

import vgpu_support as S


def _pkg():
    import relu_flydsl
    from relu_flydsl import _canary, _dispatch, _hip
    from relu_flydsl.flash_relu_rocm.registry import ELEMENT_BYTES, RUNGS

    return relu_flydsl, _canary, _dispatch, _hip, RUNGS, ELEMENT_BYTES


def test_canary_plan_check_sees_misaligned_pointers(monkeypatch):
    """A planner wrong only for pointers one element off the vector alignment
    is reported by the canary's plan check."""
    _, canary, _, _, RUNGS, ELEMENT_BYTES = _pkg()
    rung, dtype, vec = RUNGS["v1"], "float32", 1
    real = canary._plan.plan

    def plan(r, d, numel, xa, ya):
        p = real(r, d, numel, xa, ya)
        if xa % 16:  # misaligned: one block too many
            return dataclasses.replace(p, launches=[dataclasses.replace(p.launches[0], grid=p.launches[0].grid + 1)]
                                       + list(p.launches[1:]))
        return p

    monkeypatch.setattr(canary._plan, "plan", plan)
    n = canary.length(rung, vec)
    why = canary.check_plans(rung, dtype, vec, n, 4096, 8192)
    assert why and f"byte offset {ELEMENT_BYTES[dtype]}" in why, why


def test_canary_guards_are_at_least_a_tile():
    """Every kernel's canary has at least one tile of guard before x, between x
    and out, and after out."""
    _, canary, _, _, RUNGS, ELEMENT_BYTES = _pkg()
    for rung in RUNGS.values():
        for dtype in ELEMENT_BYTES:  # every served dtype
            vec = 1
            while vec <= rung.max_vec(dtype):
                c = canary.Canary(rung, dtype, vec)
                tile = rung.tile(vec) * ELEMENT_BYTES[dtype]
                gaps = (c.x_at, c.out_at - (c.x_at + c.nbytes), c.total - (c.out_at + c.nbytes))
                assert min(gaps) >= tile, (rung.name, dtype, vec, gaps, tile)
                vec *= 2


@pytest.mark.vgpu
def test_first_call_on_an_invalidated_capture_falls_back(vgpu):
    """A capture the runtime reports as invalidated (2) still counts as a
    capture: no module load, no canary, torch's kernel."""
    relu_flydsl = _pkg()[0]
    vgpu.stream = vgpu.create_stream(0)
    n, dtype = 4096, torch.bfloat16
    x, _ = vgpu.guarded((n,), dtype, name="x")
    x.copy_(S.to_tensor(S.make_bits("mixed", n, dtype, 3), dtype))
    out, _ = vgpu.guarded((n,), dtype, name="out")
    loads = vgpu.counts()["load"]
    vgpu.begin_capture(vgpu.stream)
    vgpu.lib.hipStreamSynchronize(vgpu.stream)  # forbidden inside a capture: invalidates it
    assert vgpu.is_capturing(vgpu.stream) == 2
    relu_flydsl.relu(x, out=out)
    with pytest.raises(Exception):
        vgpu.end_capture(vgpu.stream)
    vgpu.lib.hipGetLastError()
    assert vgpu.counts()["load"] == loads and vgpu.launches == [] and vgpu.canary_launches == []
    assert (S.tensor_bits(out) == S.tensor_bits(torch.relu(x))).all()
    assert list(relu_flydsl.dispatch_stats()) == ["fallback/not verified before graph capture (call warmup())"]


def test_a_failing_capture_query_counts_as_capturing(monkeypatch):
    """hipStreamIsCapturing itself failing (e.g. the legacy stream while another
    stream captures) is read as capturing, and its error is taken."""
    _, _, _, hip, _, _ = _pkg()
    taken = []
    fake = types.SimpleNamespace(hipStreamIsCapturing=lambda stream, status: 906,
                                 hipGetLastError=lambda: taken.append(1) or 906)
    monkeypatch.setattr(hip, "lib", lambda: fake)
    assert hip.capture_status(0) == hip.CAPTURE_ACTIVE
    assert taken


@pytest.mark.vgpu
def test_loaded_module_is_verified_before_a_capture_uses_it(vgpu, monkeypatch):
    """A module loaded with the canary off, the canary turned on: a first call
    of that kernel inside a capture is not served unverified."""
    relu_flydsl = _pkg()[0]
    vgpu.stream = vgpu.create_stream(0)
    dtype = torch.bfloat16
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    a, _ = vgpu.guarded((4096,), dtype, name="a")
    a.copy_(S.to_tensor(S.make_bits("mixed", 4096, dtype, 5), dtype))
    b, _ = vgpu.guarded((4096,), dtype, name="b")
    relu_flydsl.relu(a, out=b)  # loads the module, no verdict
    assert vgpu.launches
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "1")
    relu_flydsl.dispatch_stats(reset=True) if "reset" in relu_flydsl.dispatch_stats.__code__.co_varnames else None
    n = 4096 + 8  # another entry, the same kernel
    x, _ = vgpu.guarded((n,), dtype, name="x")
    x.copy_(S.to_tensor(S.make_bits("mixed", n, dtype, 6), dtype))
    out, _ = vgpu.guarded((n,), dtype, name="out")
    launched = len(vgpu.launches)
    vgpu.begin_capture(vgpu.stream)
    relu_flydsl.relu(x, out=out)
    graph = vgpu.end_capture(vgpu.stream)
    nodes = vgpu.graph_nodes(graph)
    vgpu.destroy_graph(graph)
    assert nodes == 0 and len(vgpu.launches) == launched, "an unverified kernel was captured"
    assert (S.tensor_bits(out) == S.tensor_bits(torch.relu(x))).all()
    assert "fallback/not verified before graph capture (call warmup())" in relu_flydsl.dispatch_stats()


def test_device_info_takes_the_tensors_devices_stream(monkeypatch):
    """Two devices whose current streams differ; device 0 current; a tensor on
    device 1 gets device 1's current stream."""
    _, _, dispatch, _, _, _ = _pkg()
    streams = {0: 0x1000, 1: 0x2000}
    monkeypatch.setattr(dispatch, "_HIP_BUILD", "7.0")
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda i: streams[i], raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setitem(dispatch.STATE.archs, 1, "gfx950")
    x = types.SimpleNamespace(is_cuda=True, get_device=lambda: 1)
    info = dispatch.device_info(x)
    assert (info.index, info.stream, info.current) == (1, streams[1], False)


def test_out_at_xs_address_with_other_strides_is_not_in_place():
    """out = x.t(): x's address, other strides. Not in place: a partial
    overlap, refused, nothing written."""
    relu_flydsl = _pkg()[0]
    x = torch.randn(8, 8)
    before = x.clone()
    with pytest.raises(ValueError, match="overlaps"):
        relu_flydsl.relu(x, out=x.t())
    assert torch.equal(x, before)


def _segfaults():
    """A kill test that crashes its process, as damaged native code loaded into it can."""
    import ctypes

    ctypes.string_at(0)


def test_a_kill_test_that_crashes_is_a_named_failure():
    """A check mutant whose kill test loads native code runs it in a child process: a crash
    there is a failure reported with the child's last lines (faulthandler's), and this
    process goes on."""
    import mutation_support as M

    cm = M.CheckMutant("crash", "a kill test that crashes", "tests/vgpu/test_check_mutants.py", "_segfaults",
                       "ctypes.string_at(0)", "None", ("test_check_mutants", "_segfaults", {}), child=True)
    failed, said = M.run_in_child(cm, mutate=False)
    assert failed and "died (signal 11)" in said and "Segmentation fault" in said and "_segfaults" in said, said
