"""explain(x, out, rung=) says which path relu() would take, without running anything:
checked against what relu() then does (the dispatch_stats() key it adds, or the error it
raises), call after call (first use, the general path, the compiled entry's replay), over
inputs of every path, inside a graph capture, on the virtual gfx950 and on the CPU. And
status()'s count of the devices the compiled entry serves, as it starts and stops serving."""

import re

import pytest
import torch


def _pkg():
    import relu_flydsl
    from relu_flydsl import _dispatch

    return relu_flydsl, _dispatch.STATE


class Sub(torch.Tensor):
    pass


def _registered(dev, t, name):
    if dev is not None:
        dev.register(t, name=name)
    return t


# name -> build(dev) -> (x, out, rung, bytes of an output relu() allocates itself or None)
def _cases():
    def f32(dev, n=4096, dtype=torch.float32, name="x"):
        return _registered(dev, torch.randn(n).to(dtype), name)

    def same(dev, x, name="out"):
        return _registered(dev, torch.empty_like(x), name)

    def transposed(dev):
        x = _registered(dev, torch.randn(64, 48), "x").t()
        return x, _registered(dev, torch.empty(64, 48), "out").t(), None, None

    def strided(dev):
        base = _registered(dev, torch.randn(8192), "x")
        return base[::2], same(dev, base[::2].contiguous()), None, None

    def mixed_strides(dev):
        x = _registered(dev, torch.randn(64, 48), "x").t()
        return x, _registered(dev, torch.empty(48, 64), "out"), None, None

    def fresh(dev):
        x = f32(dev, 3000)
        return x, None, None, x.numel() * 4

    def in_place(dev):
        x = f32(dev)
        return x, x, None, None

    def overlapping(dev):
        base = _registered(dev, torch.randn(4097), "x")
        return base[:4096], base[1:], None, None

    def neg_view(dev):
        x = f32(dev)
        return torch._neg_view(x), same(dev, x), None, None

    return {
        "float32": lambda d: ((x := f32(d)), same(d, x), None, None),
        "bfloat16-odd-size": lambda d: ((x := f32(d, 1001, torch.bfloat16)), same(d, x), None, None),
        "int8-rung-v1": lambda d: ((x := _registered(d, torch.randint(-128, 127, (777,), dtype=torch.int8), "x")),
                                   same(d, x), "v1", None),
        "float16-rung-v3": lambda d: ((x := f32(d, 5000, torch.float16)), same(d, x), "v3", None),
        "transposed-out-alike": transposed,
        "mixed-strides": mixed_strides,
        "every-other-element": strided,
        "out-none": fresh,
        "in-place": in_place,
        "float64": lambda d: ((x := f32(d, 100, torch.float64)), same(d, x), None, None),
        "empty": lambda d: ((x := torch.empty(0)), torch.empty(0), None, None),
        "neg-view": neg_view,
        "subclass": lambda d: (torch.randn(10).as_subclass(Sub), None, None, None),
        "sparse": lambda d: (torch.randn(4, 4).to_sparse(), None, None, None),
        "bad-out-dtype": lambda d: (torch.randn(10), torch.empty(10, dtype=torch.float16), None, None),
        "bad-shape": lambda d: (torch.randn(10), torch.empty(11), None, None),
        "bool": lambda d: (torch.ones(3, dtype=torch.bool), None, None, None),
        "unknown-rung": lambda d: ((x := f32(d)), same(d, x), "v9", None),
        "overlap": overlapping,
    }


CASES = _cases()


def _delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def explained_then_run(x, out, rung, fresh=None, dev=None):
    """explain() (nothing runs: no launch, no canary, no module), then relu(): the same path.
    Returns what explain said."""
    relu_flydsl, state = _pkg()
    launches = None if dev is None else (len(dev.launches), len(dev.canary_launches))
    modules, canaries = dict(state.functions), dict(state.canary_runs)
    said = relu_flydsl.explain(x, out, rung=rung)
    assert state.functions == modules and state.canary_runs == canaries, "explain() loaded or canaried"
    if dev is not None:
        assert (len(dev.launches), len(dev.canary_launches)) == launches, "explain() launched"
    counted = re.search(r"^counted as: (.*)$", said, re.M).group(1)
    before = relu_flydsl.dispatch_stats()
    if fresh is not None and dev is not None:
        dev.fresh_output(fresh)
    raised, general = None, []
    from relu_flydsl import _relu

    check = _relu._check
    _relu._check = lambda *a: general.append(1) or check(*a)  # relu()'s general path starts here
    try:
        y = relu_flydsl.relu(x, out, rung=rung)
    except Exception as e:  # noqa: BLE001 - compared with what explain said
        raised = e
    finally:
        _relu._check = check
    if said.startswith("path: kernel"):  # (fallbacks: the entry serves some, Python others; the same answer)
        replayed = said.startswith("path: kernel, compiled entry")
        assert bool(general) != replayed, f"explain said {said!r}; the general path ran: {bool(general)}"
    delta = _delta(before, relu_flydsl.dispatch_stats())
    if said.startswith("path: raises"):
        assert raised is not None, said
        assert said.startswith(f"path: raises {type(raised).__name__}\nwhy: {raised}"), (said, raised)
        assert delta == {}
    else:
        assert raised is None, (said, raised)
        assert delta == {counted: 1}, (said, delta)
        if x.layout == torch.strided and not x.is_neg() and type(x) is torch.Tensor:
            assert torch.equal(y, torch.relu(x))
    return said


@pytest.mark.vgpu
@pytest.mark.parametrize("name", list(CASES))
def test_explain_matches_relu_on_the_virtual_gfx950(vgpu, name):
    """Three calls each: the first use (module load and canary), then the general path's
    ready entry or the compiled entry's replay: explain says each before it happens."""
    x, out, rung, fresh = CASES[name](vgpu)
    said = [explained_then_run(x, out, rung, fresh, vgpu) for _ in range(3)]
    paths = [s.splitlines()[0] for s in said]
    if paths[0].startswith("path: kernel"):
        assert paths[0] == "path: kernel after first use", said[0]
        assert all(p.startswith("path: kernel, ") for p in paths[1:]), paths
    if name in ("float32", "bfloat16-odd-size", "in-place", "out-none", "int8-rung-v1"):
        assert paths[1:] == ["path: kernel, compiled entry"] * 2, said  # the entry replays ready entries
    if name == "transposed-out-alike":  # dense, not contiguous: as the compiled entry says it replays that layout
        from relu_flydsl import _status

        route = "compiled entry" if _status._entry_takes_layout(x, out) else "general path"
        assert paths[1:] == [f"path: kernel, {route}"] * 2, said


@pytest.mark.vgpu
def test_explain_names_the_reason_for_each_fallback(vgpu, monkeypatch):
    relu_flydsl, _ = _pkg()
    x, out, _, _ = CASES["float32"](vgpu)
    assert "why: dtype float64" in explained_then_run(*CASES["float64"](vgpu), dev=vgpu)
    assert "why: non-contiguous" in explained_then_run(*CASES["mixed-strides"](vgpu), dev=vgpu)
    assert "why: neg/conj-bit view" in explained_then_run(*CASES["neg-view"](vgpu), dev=vgpu)
    assert "why: tensor subclass Sub" in explained_then_run(*CASES["subclass"](vgpu), dev=vgpu)
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    assert "why: disabled by RELU_FLYDSL_DISABLE" in explained_then_run(x, out, None, dev=vgpu)
    monkeypatch.delenv("RELU_FLYDSL_DISABLE")
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    said = explained_then_run(x, out, None, dev=vgpu)
    assert "no canary (RELU_FLYDSL_CANARY off)" in said
    assert "canary off" in explained_then_run(x, out, None, dev=vgpu)


@pytest.mark.vgpu
def test_explain_sees_the_compiled_entry_switched_off(vgpu):
    relu_flydsl, _ = _pkg()
    from relu_flydsl import _compiled_entry

    x, out, _, _ = CASES["float32"](vgpu)
    explained_then_run(x, out, None, dev=vgpu)
    was = _compiled_entry.SERVE is not None
    _compiled_entry.use(False)
    try:
        said = explained_then_run(x, out, None, dev=vgpu)
    finally:
        _compiled_entry.use(was)
    assert said.startswith("path: kernel, general path\nwhy: the compiled entry is not serving"), said


@pytest.mark.vgpu
def test_explain_inside_a_forward_ad_level(vgpu):
    """relu() asks the general path while a forward-AD level is active (a plain x keeps the kernel,
    a dual x goes to torch's kernel): explain() says so, ready entry or not."""
    import torch.autograd.forward_ad as fwAD

    x, out, _, _ = CASES["float32"](vgpu)
    explained_then_run(x, out, None, dev=vgpu)  # first use: the entry is ready after it
    with fwAD.dual_level():
        said = explained_then_run(x, out, None, dev=vgpu)
        assert said.startswith("path: kernel, general path\nwhy: a forward-AD level is active"), said
        dual = fwAD.make_dual(x, torch.ones_like(x))
        assert "why: forward AD" in explained_then_run(dual, None, None, dev=vgpu)
    assert explained_then_run(x, out, None, dev=vgpu).startswith("path: kernel, compiled entry")


@pytest.mark.vgpu
def test_explain_for_autograd(vgpu):
    x = torch.randn(2048, requires_grad=True)
    vgpu.register(x.detach(), name="x")
    for _ in range(2):
        said = explained_then_run(x, None, None, fresh=x.numel() * 4, dev=vgpu)
    assert "through the autograd op" in said


@pytest.mark.parametrize("name", ["float32", "out-none", "in-place", "float64", "empty", "subclass", "sparse",
                                  "bad-out-dtype", "bad-shape", "bool", "unknown-rung", "overlap", "neg-view",
                                  "every-other-element"])
def test_explain_matches_relu_on_the_cpu(name):
    """No ROCm device: torch's kernel, counted as "not a ROCm device" (or torch's own path, or
    relu()'s error), through the compiled entry and without it."""
    from relu_flydsl import _compiled_entry

    x, out, rung, _ = CASES[name](None)
    said = explained_then_run(x, out, rung)
    if not said.startswith("path: raises") and name not in ("subclass", "sparse"):
        assert said.startswith("path: torch fallback\nwhy: not a ROCm device"), said
    was = _compiled_entry.SERVE is not None
    _compiled_entry.use(False)
    try:
        assert explained_then_run(x, out, rung) == said
    finally:
        _compiled_entry.use(was)


# ---- inside a HIP graph capture: what _dispatch._ready does there ------------------------------
def _damaged(monkeypatch, tmp_path, key):
    """The code objects copied, kernel `key`'s file damaged, the copy in use."""
    import json
    import shutil

    from relu_flydsl import _objects
    from relu_flydsl._state import STATE

    copy = tmp_path / "code_objects"
    shutil.copytree(_objects.OBJECTS_DIR, copy)
    path = copy / json.loads((copy / "manifest.json").read_text())["kernels"][key]["file"]
    data = path.read_bytes()
    path.write_bytes(b"not a code object")
    monkeypatch.setattr(_objects, "OBJECTS_DIR", copy)
    STATE.manifest = None
    return path, data


def _captured(dev, x, out):
    """explained_then_run inside a capture on the tensors' stream; the capture must stay valid."""
    dev.begin_capture(dev.stream)
    try:
        said = explained_then_run(x, out, None, dev=dev)
        assert dev.is_capturing(dev.stream) == 1, "the capture must stay valid"
    finally:
        dev.destroy_graph(dev.end_capture(dev.stream))
    return said


@pytest.mark.vgpu
def test_explain_inside_a_capture_is_what_relu_does(vgpu, monkeypatch, tmp_path):
    """Inside a capture the general path loads no module and runs no canary: a kernel not yet
    ready falls back with the capture's reason, whether its module is not loaded, loaded with the
    canary off and the canary since turned on, or its object known to be unusable (the capture
    is asked first); a ready one launches into the graph. explain() says each."""
    import warnings

    from relu_flydsl import _dispatch

    vgpu.stream = vgpu.create_stream(0)
    vgpu.refuse_loads_during_capture()
    x, out, _, _ = CASES["float32"](vgpu)
    said = _captured(vgpu, x, out)  # nothing loaded yet
    assert said.startswith(f"path: torch fallback\nwhy: {_dispatch.NOT_VERIFIED}"), said
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    explained_then_run(x, out, None, dev=vgpu)  # loaded, no canary
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "1")
    said = _captured(vgpu, x, out)  # loaded, its canary not run: not inside a capture
    assert said.startswith(f"path: torch fallback\nwhy: {_dispatch.NOT_VERIFIED}"), said
    explained_then_run(x, out, None, dev=vgpu)  # the canary runs outside
    said = _captured(vgpu, x, out)
    assert said.startswith("path: kernel, "), said
    bf16, bf16_out, _, _ = CASES["bfloat16-odd-size"](vgpu)  # v5/bfloat16/x1: its object damaged, found so
    _damaged(monkeypatch, tmp_path, "v5/bfloat16/x1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert "sha256" in explained_then_run(bf16, bf16_out, None, dev=vgpu)
    said = _captured(vgpu, bf16, bf16_out)
    assert said.startswith(f"path: torch fallback\nwhy: {_dispatch.NOT_VERIFIED}"), said


# ---- status(): the devices the compiled entry serves ---------------------------------------------
@pytest.mark.vgpu
def test_status_counts_the_devices_the_entry_serves(vgpu):
    """Loaded is not serving: a device counts once the entry has learned it (the first call
    there) and only while relu() calls the entry. Switched off, or unloaded, it serves none,
    even where it still remembers a device."""
    import warnings

    relu_flydsl, state = _pkg()
    from relu_flydsl import _compiled_entry

    assert _compiled_entry.status()["loaded"], _compiled_entry.status()["reason"]

    def entry_there():
        st = relu_flydsl.status()
        there = st["devices"][0]["entry"]
        assert st["entry"]["devices"]["0"] == there and st["entry"]["serving"] == (st["entry"]["serving_devices"] > 0)
        assert (st["entry"]["cost"] is None) == st["entry"]["in_use"]
        return st["entry"]["serving_devices"], there

    assert entry_there() == (0, "not learned yet: the first relu() call on the device teaches it")
    x, out, _, _ = CASES["float32"](vgpu)
    said = [explained_then_run(x, out, None, dev=vgpu) for _ in range(2)]
    assert said[1].startswith("path: kernel, compiled entry"), said
    assert entry_there() == (1, None)
    _compiled_entry.use(False)
    assert entry_there() == (0, "switched off: relu() does not call it")
    _compiled_entry.use(True)
    assert entry_there() == (1, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _compiled_entry.unload("unloaded by a test")
    assert entry_there() == (0, "not loaded (unloaded by a test)")
    _compiled_entry.devices[0] = None  # what an entry that kept its per-device verdicts would say
    assert entry_there() == (0, "not loaded (unloaded by a test)")
    assert explained_then_run(x, out, None, dev=vgpu).startswith("path: kernel, general path")
    state.reset()  # a fresh process: loaded again, no device learned
    assert _compiled_entry.status()["loaded"] and entry_there()[0] == 0
