"""warmup() means ready, on the virtual gfx950: what it returns is what is ready on each
device (module loaded and canary passed there); a kernel mutant that fails its canary, a
device that is not a gfx950, a corrupt code object, the canary switched off are each stated
in the result, warned about at the caller's line, and never reported ready. A failed canary
is final: RELU_FLYDSL_CANARY=0 later does not bring the kernel back, through either path."""

import shutil
import warnings

import pytest
import torch

import vgpu_support as S
from vgpu.serve import serve

pytestmark = pytest.mark.vgpu


def _pkg():
    import relu_flydsl
    from relu_flydsl import _dispatch

    return relu_flydsl, _dispatch, _dispatch.STATE


def _ours(caught):
    return [w for w in caught if issubclass(w.category, RuntimeWarning) and "relu_flydsl" in str(w.message)]


def test_ready_means_loaded_and_canaried_on_that_device(vgpu):
    relu_flydsl, dispatch, state = _pkg()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about
        result = relu_flydsl.warmup(("float32", torch.bfloat16))
    assert result.ready == [("v5", "float32", 4, 0), ("v5", "bfloat16", 8, 0)]
    assert result.not_ready == {} and result.ok and result.canary and not result.disabled
    assert result.devices == {0: "gfx950"}
    for rung, dtype, vec, device in result.ready:  # what "ready" claims holds in the state
        assert state.verdicts[(rung, dtype, vec, device)] is None
        assert (rung, dtype, vec, device) in state.functions
    assert state.canary_runs == {("v5", "float32", 4, 0): 1, ("v5", "bfloat16", 8, 0): 1}
    assert "ready      v5/float32/x4 on device 0 (module loaded, canary passed)" in str(result)


def test_two_devices_each_ready(vgpu):
    relu_flydsl = _pkg()[0]
    S.two_devices(vgpu)
    result = relu_flydsl.warmup("float32", devices=(0, 1))
    assert result.ready == [("v5", "float32", 4, 0), ("v5", "float32", 4, 1)] and result.ok
    assert result.devices == {0: "gfx950", 1: "gfx950"}


def test_canary_off_is_said_not_hidden(vgpu, monkeypatch):
    relu_flydsl, _, state = _pkg()
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    result = relu_flydsl.warmup("float32")
    assert result.ready == [("v5", "float32", 4, 0)] and result.canary is False
    assert state.canary_runs == {} and vgpu.canary_launches == []
    assert "canary off (RELU_FLYDSL_CANARY)" in str(result)


def test_kill_switch_is_said(vgpu, monkeypatch):
    relu_flydsl = _pkg()[0]
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    result = relu_flydsl.warmup("float32")
    assert result.disabled and "RELU_FLYDSL_DISABLE is on" in str(result)


# ---- a kernel mutant that fails its canary ----------------------------------------------
def _mutant(name, vgpu, monkeypatch, mutant_root):
    import mutation_support as M

    pkg = M.import_copy(M.BY_NAME[name], mutant_root)
    serve(vgpu, pkg, monkeypatch.setattr)
    monkeypatch.delenv("RELU_FLYDSL_CANARY", raising=False)
    return pkg


def test_a_kernel_that_fails_its_canary_is_not_ready(vgpu, monkeypatch, mutant_root):
    """The off-by-one mutant (v1 writes one element past the end, rebuilt from the mutated
    source): warmup states the failed canary with its evidence, warns once at this line,
    and lists only the correct kernel as ready."""
    pkg = _mutant("off-by-one", vgpu, monkeypatch, mutant_root)
    vgpu.errors_expected = True  # the broken kernel's canary launch writes its guard
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pkg.warmup("float32", rungs=("v1", "v5"))
    assert result.ready == [("v5", "float32", 4, 0)] and not result.ok
    assert list(result.not_ready) == [("v1", "float32", 1, 0)]
    assert result.not_ready[("v1", "float32", 1, 0)] == "canary failed v1/float32/x1 on device 0"
    ours = _ours(caught)
    assert len(ours) == 1 and "canary failed v1/float32/x1 on device 0: guard" in str(ours[0].message)
    assert ours[0].filename == __file__  # the caller's line, not the package's
    again = pkg.warmup("float32", rungs="v1")  # stated again, warned once
    assert again.not_ready == {("v1", "float32", 1, 0): "canary failed v1/float32/x1 on device 0"}
    assert again.ready == []


# ---- a device that is not a gfx950 ------------------------------------------------------
def _as_arch(dispatch, monkeypatch, arch, devices=None):
    """device_info answering `arch` for the given devices (all when None)."""
    info = dispatch.device_info
    monkeypatch.setattr(dispatch, "device_info",
                        lambda t: (i if (i := info(t)) is None or (devices is not None and i.index not in devices)
                                   else i._replace(arch=arch)))


def test_a_device_of_another_arch_is_not_ready(vgpu, monkeypatch):
    relu_flydsl, dispatch, state = _pkg()
    _as_arch(dispatch, monkeypatch, "gfx942")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = relu_flydsl.warmup(("float32", "bfloat16"))
    assert result.ready == [] and result.devices == {0: "gfx942"}
    why = "arch gfx942 (kernels are built for gfx950)"
    assert result.not_ready == {("v5", "float32", 4, 0): why, ("v5", "bfloat16", 8, 0): why}
    ours = _ours(caught)
    assert len(ours) == 1 and f"nothing is ready on device 0: {why}" in str(ours[0].message)
    assert ours[0].filename == __file__
    assert state.functions == {} and state.canary_runs == {} and vgpu.canary_launches == []  # nothing loaded there


def test_a_gfx950_and_a_gfx942(vgpu, monkeypatch):
    relu_flydsl, dispatch, state = _pkg()
    S.two_devices(vgpu)
    _as_arch(dispatch, monkeypatch, "gfx942", devices=(1,))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = relu_flydsl.warmup("float32", devices=range(2))
    assert result.ready == [("v5", "float32", 4, 0)]
    assert result.not_ready == {("v5", "float32", 4, 1): "arch gfx942 (kernels are built for gfx950)"}
    assert result.devices == {0: "gfx950", 1: "gfx942"}
    assert set(state.functions) == {("v5", "float32", 4, 0)}


# ---- a corrupt code object ----------------------------------------------------------------
def test_a_corrupt_object_is_not_ready(vgpu, monkeypatch, tmp_path):
    relu_flydsl, dispatch, state = _pkg()
    from relu_flydsl import _objects

    copy = tmp_path / "code_objects"
    shutil.copytree(_objects.OBJECTS_DIR, copy)
    victim = copy / _objects.manifest()["kernels"]["v5/float32/x4"]["file"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    monkeypatch.setattr(_objects, "OBJECTS_DIR", copy)
    state.manifest = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = relu_flydsl.warmup(("float32", "bfloat16"))
    assert result.ready == [("v5", "bfloat16", 8, 0)]
    assert list(result.not_ready) == [("v5", "float32", 4, None)]  # for every device
    assert "does not match its sha256" in result.not_ready[("v5", "float32", 4, None)]
    ours = _ours(caught)
    assert len(ours) == 1 and "does not match its sha256" in str(ours[0].message)
    assert ours[0].filename == __file__
    assert ("v5", "float32", 4, 0) not in state.functions


# ---- a failed canary is final ---------------------------------------------------------------
def _fail_canaries(monkeypatch):
    """Every canary judged failed (a wrong kernel, simulated: one output element flipped after
    the canary's launch and before its judgement)."""
    from relu_flydsl import _canary

    judge = _canary.Canary.judge

    def tampered(self):
        self.views()[1].view(torch.uint8)[0] ^= 1
        return judge(self)

    monkeypatch.setattr(_canary.Canary, "judge", tampered)


def _call(dev, relu, n=4096, seed=0):
    xbits = S.make_bits("random", n, torch.float32, seed)
    x, _ = S.guarded_input(dev, xbits, torch.float32)
    out, _ = dev.guarded((n,), torch.float32, name="out")
    relu(x, out=out)
    S.assert_bits(out, S.relu_bits(xbits, torch.float32))  # torch's bits here = the bit rule (random normals)
    return x, out


def test_a_failed_canary_is_final_whatever_the_switch_says_later(vgpu, monkeypatch):
    """The canary fails, then RELU_FLYDSL_CANARY=0: the kernel never launches on that device
    again (its warning promises it), neither from Python nor replayed by the compiled entry;
    warmup() keeps it out of ready; status() and the health check say so."""
    relu_flydsl, dispatch, state = _pkg()
    from relu_flydsl import __main__, _compiled_entry

    _fail_canaries(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _call(vgpu, relu_flydsl.relu)
    failed = "canary failed v5/float32/x4 on device 0"
    ours = _ours(caught)
    assert len(ours) == 1 and failed in str(ours[0].message) and ours[0].filename == __file__
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    keep = [_call(vgpu, relu_flydsl.relu, seed=s) for s in range(3)]  # a third call: where a replay would run
    assert relu_flydsl.dispatch_stats() == {f"fallback/{failed}": 4}
    assert vgpu.launches == [], "the failed kernel ran on a call's tensors"
    x, out = keep[-1]
    entry = state.entries.get((None, torch.float32, 4096, x.data_ptr() & 15, out.data_ptr() & 15, 0))
    assert entry is None or entry.function is None
    assert not any(_compiled_entry.replays(e, None) for e in state.entries.values())
    result = relu_flydsl.warmup("float32")
    assert result.ready == [] and result.not_ready == {("v5", "float32", 4, 0): failed}
    assert "passed" not in relu_flydsl.explain(*keep[-1]) and failed in relu_flydsl.explain(*keep[-1])
    monkeypatch.setattr(dispatch, "device_archs", lambda: {0: "gfx950"})
    st = relu_flydsl.status()
    assert st["devices"][0]["canary"]["v5/float32/x4"].startswith("failed: element")
    assert __main__.main([]) == 1  # the health check fails for it


# ---- warnings point at the caller's line --------------------------------------------------
def test_canary_warning_points_at_the_caller_through_autograd(vgpu, monkeypatch):
    """relu(x) with x requiring grad reaches the dispatcher through torch's op machinery:
    the warning still names this file."""
    relu_flydsl = _pkg()[0]
    _fail_canaries(monkeypatch)
    x = torch.randn(4096, requires_grad=True)
    vgpu.register(x.detach(), name="x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = relu_flydsl.relu(x)
    assert torch.equal(y.detach(), torch.relu(x.detach()))
    ours = _ours(caught)
    assert len(ours) == 1 and "canary failed" in str(ours[0].message)
    assert ours[0].filename == __file__, ours[0].filename


def test_status_reports_what_is_ready_and_runs_nothing(vgpu, monkeypatch):
    relu_flydsl, dispatch, state = _pkg()
    from relu_flydsl import __main__

    monkeypatch.setattr(dispatch, "device_archs", lambda: {0: "gfx950"})
    st = relu_flydsl.status()
    assert st["hip_runtime"] is not None and "libamdhip64" in st["hip_runtime"] and st["hip_reason"] is None
    (d,) = st["devices"]
    assert d["kernel_path"] is True and set(d["canary"].values()) == {"not run"}
    assert vgpu.counts()["load"] == 0 and vgpu.launches == [] and vgpu.canary_launches == []  # status ran nothing
    relu_flydsl.warmup("float32")
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    relu_flydsl.warmup("bfloat16", rungs="v2", vecs=2)
    canary = relu_flydsl.status()["devices"][0]["canary"]
    assert canary["v5/float32/x4"] == "passed" and canary["v5/bfloat16/x8"] == "not run"
    assert canary["v2/bfloat16/x2"] == "not run (loaded with the canary off)"
    assert __main__.main([]) == 0
