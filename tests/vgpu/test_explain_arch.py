"""explain(x, out, rung=, arch="gfx950") answers for a gfx950 from any machine: asked of plain
CPU tensors (this torch's own device_info: no ROCm device), it must say what the virtual gfx950
then runs for the same tensors: the dispatch_stats() key, the rung, the vector width and every
launch's grid (as the virtual device records them), whether a repeated call is the compiled
entry's or the general path's, relu()'s error, or the fallback and its reason. Over the layout x
dtype table: contiguous, transposed, channels_last, permuted, strided, out=, out=x, misaligned
offsets, empty, 0-dim, every served dtype, rungs, split launches, bool/complex refused, float64
and int32 falling back, autograd, subclasses, the settings. And the same answers in a process
with no HIP runtime at all."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import relu_flydsl
from relu_flydsl import _dispatch, _relu

ROOT = Path(__file__).resolve().parents[2]
F32, F16, BF16, I8 = torch.float32, torch.float16, torch.bfloat16, torch.int8
PLAIN = _dispatch.device_info, _dispatch.device_archs  # this torch's own answers (no fixture installed yet)
_SYMBOL = re.compile(r"relu_(v\d)_[a-z]+_([a-z0-9]+)_x(\d+)_b(\d+)")


class Sub(torch.Tensor):
    pass


# ---- the table: name -> build(dev) -> (x, out, rung); dev None: plain tensors -------------------
def _reg(dev, t, name="x"):
    if dev is not None:
        dev.register(t, name=name)
    return t


def _data(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def _flat(n, dtype=F32, out="same", offset=(0, 0)):
    """A 1-D x of n elements (offset[0] elements into its allocation) and out: "same" (its own
    allocation, offset[1] elements in), "none" or "x"."""
    def build(dev):
        base = _reg(dev, _data((n + offset[0],), dtype, n), "x")
        x = base[offset[0]:]
        if out == "none":
            return x, None, None
        if out == "x":
            return x, x, None
        obase = _reg(dev, torch.empty(n + offset[1], dtype=dtype), "out")
        return x, obase[offset[1]:], None
    return build


def _layout(shape, make, out, dtype=F32):
    """x = make(base) for a registered base of `shape`; out: "alike" (make() of its own base),
    "contiguous", "none" or "x"."""
    def build(dev):
        x = make(_reg(dev, _data(shape, dtype, 3), "x"))
        if out == "none":
            return x, None, None
        if out == "x":
            return x, x, None
        if out == "contiguous":
            return x, _reg(dev, torch.empty(x.shape, dtype=dtype), "out"), None
        return x, make(_reg(dev, torch.empty(shape, dtype=dtype), "out")), None
    return build


def _with_rung(build, rung):
    return lambda dev: build(dev)[:2] + (rung,)


def _channels_last(t):
    return t.permute(0, 2, 3, 1)  # a (2, 5, 6, 4) allocation seen as NCHW (2, 4, 5, 6) channels_last


def _neg_view(dev):
    x = _reg(dev, _data((512,), F32, 5))
    return torch._neg_view(x), _reg(dev, torch.empty(512), "out"), None


def _overlap(dev):
    base = _reg(dev, _data((1025,), F32, 6))
    return base[:1024], base[1:], None


def _grad(dev):
    x = _data((2048,), F32, 7).requires_grad_()
    _reg(dev, x.detach())
    return x, None, None


CASES = {
    # contiguous, every served dtype, edge sizes, out=, relu(x), out=x
    "float32-4096": _flat(4096),
    "float32-1": _flat(1),
    "float32-4257-none": _flat(4257, out="none"),
    "bfloat16-1001": _flat(1001, BF16),
    "bfloat16-7-none": _flat(7, BF16, out="none"),
    "float16-5000-none": _flat(5000, F16, out="none"),
    "float16-1023": _flat(1023, F16),
    "int8-777": _flat(777, I8),
    "int8-4100-none": _flat(4100, I8, out="none"),
    "float32-in-place": _flat(4096, out="x"),
    "int8-in-place": _flat(1024, I8, out="x"),
    "0-dim": _layout((), lambda t: t, "alike"),
    # misaligned offsets: a narrower vector, planned for both pointers
    "x-offset-4-bytes": _flat(4096, offset=(1, 0)),
    "x-offset-8-bytes": _flat(4096, offset=(2, 0)),
    "out-offset-2-bytes": _flat(2048, BF16, offset=(0, 1)),
    "int8-offsets-3-and-5": _flat(1600, I8, offset=(3, 5)),
    "x-offset-none": _flat(3000, F16, out="none", offset=(3, 0)),
    # dense, not contiguous
    "transposed-out-alike": _layout((64, 48), lambda t: t.t(), "alike"),
    "transposed-none": _layout((64, 48), lambda t: t.t(), "none", BF16),
    "transposed-in-place": _layout((32, 40), lambda t: t.t(), "x", F16),
    "transposed-out-contiguous": _layout((64, 48), lambda t: t.t(), "contiguous"),
    "channels-last-out-alike": _layout((2, 5, 6, 4), _channels_last, "alike", BF16),
    "channels-last-none": _layout((2, 5, 6, 4), _channels_last, "none", F16),
    "channels-last-out-contiguous": _layout((2, 5, 6, 4), _channels_last, "contiguous"),
    "permuted-3d-out-alike": _layout((6, 10, 12), lambda t: t.permute(2, 0, 1), "alike", I8),
    # not dense
    "strided-out-contiguous": _layout((8192,), lambda t: t[::2], "contiguous"),
    "strided-none": _layout((8192,), lambda t: t[::2], "none"),
    "strided-in-place": _layout((8192,), lambda t: t[::2], "x"),
    "sliced-rows-none": _layout((64, 64), lambda t: t[:, :48], "none", BF16),
    # empty
    "empty-none": _layout((0,), lambda t: t, "none"),
    "empty-out": _layout((0, 5), lambda t: t, "alike"),
    # dtypes the kernels do not serve, dtypes relu() refuses
    "float64": _flat(100, torch.float64),
    "int32-none": _flat(100, torch.int32, out="none"),
    "bool": _flat(10, torch.bool, out="none"),
    "complex64": _flat(10, torch.complex64),
    "neg-view": _neg_view,
    # rungs
    "rung-v1": _with_rung(_flat(1000), "v1"),
    "rung-v2-int8": _with_rung(_flat(4096, I8), "v2"),
    "rung-v3-float16-none": _with_rung(_flat(5000, F16, out="none"), "v3"),
    "rung-v4-bfloat16": _with_rung(_flat(1001, BF16), "v4"),
    "rung-v9": _with_rung(_flat(16), "v9"),
    # relu()'s other answers
    "overlap": _overlap,
    "out-dtype-differs": lambda dev: (_reg(dev, _data((10,), F32, 8)), _reg(dev, torch.empty(10, dtype=F16)), None),
    "subclass": lambda dev: (_data((10,), F32, 9).as_subclass(Sub), None, None),
    "meta": lambda dev: (torch.empty(16, device="meta"), None, None),
    "autograd": _grad,
}


# ---- explain's answer, read ------------------------------------------------------------------
def fields(said: str) -> dict:
    return dict(line.split(": ", 1) for line in said.splitlines())


def planned(f: dict):
    """(rung, dtype, vec, [(grid, block), ...]) from explain's kernel line."""
    m = re.fullmatch(r"rung (\w+), (\w+), x(\d+): (\d+) launch(?:es)? \((.*)\) on .*", f["kernel"])
    assert m, f["kernel"]
    grids = [(int(g), int(b)) for g, b in re.findall(r"grid (\d+) x block (\d+)", m[5])]
    assert len(grids) == int(m[4])
    return m[1], m[2], int(m[3]), grids


def ran(records):
    """The same, from the launches the virtual device recorded (one kernel for every launch)."""
    kernels = {_SYMBOL.fullmatch(r.kernel).group(1, 2, 3) for r in records}
    assert len(kernels) == 1, [r.kernel for r in records]
    rung, dtype, vec = kernels.pop()
    return rung, dtype, int(vec), [(r.grid[0], r.block[0]) for r in records]


def explain_plain(x, out, rung, arch="gfx950"):
    """explain(arch=) with this torch's own device answers (no ROCm device for a CPU tensor),
    checked to be that: the same call without arch= answers for a CPU tensor."""
    saved = _dispatch.device_info, _dispatch.device_archs
    _dispatch.device_info, _dispatch.device_archs = PLAIN
    try:
        here = fields(relu_flydsl.explain(x, out, rung=rung))
        if here["path"] == "torch fallback":
            assert here["why"] in ("not a ROCm device", "disabled by RELU_FLYDSL_DISABLE"), here
        return relu_flydsl.explain(x, out, rung=rung, arch=arch)
    finally:
        _dispatch.device_info, _dispatch.device_archs = saved


def answers() -> dict:
    """explain(arch="gfx950") of every case's plain tensors (also run in a child process)."""
    return {name: explain_plain(*build(None)) for name, build in CASES.items()}


# ---- what the virtual gfx950 runs ---------------------------------------------------------------
def run_on(dev, x, out, rung, fresh):
    """One relu() on the virtual gfx950: its count, launches, whether relu()'s general path ran."""
    before, start, entered = relu_flydsl.dispatch_stats(), len(dev.launches), []
    check = _relu._check
    _relu._check = lambda *a: entered.append(1) or check(*a)
    if fresh:
        dev.fresh_output(fresh)
    y = raised = None
    try:
        y = relu_flydsl.relu(x, out, rung=rung)
    except Exception as e:  # noqa: BLE001 - compared with what explain said
        raised = e
    finally:
        _relu._check = check
    after = relu_flydsl.dispatch_stats()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
    return {"delta": delta, "launches": dev.launches[start:], "general": bool(entered), "raised": raised, "y": y}


def holds(said: str, dev, x, out, rung):
    """Two calls on the virtual gfx950 (the first use, then a repeated call) do what explain said."""
    f = fields(said)
    assert f["for"].startswith("a gfx950 (device 0)"), said
    kernel = f["path"].startswith("kernel")
    fresh = x.numel() * x.element_size() if kernel and out is None else None
    runs = [run_on(dev, x, out, rung, fresh) for _ in range(2)]
    for r in runs:
        if f["path"].startswith("raises"):
            assert r["raised"] is not None, said
            assert f["path"] == f"raises {type(r['raised']).__name__}" and f["why"] == str(r["raised"]), (said, r)
            assert r["delta"] == {} and r["launches"] == []
            continue
        assert r["raised"] is None, (said, r["raised"])
        assert r["delta"] == {f["counted as"]: 1}, (said, r["delta"])
        if kernel:
            assert ran(r["launches"]) == planned(f), (said, [(x.kernel, x.grid) for x in r["launches"]])
        else:
            assert r["launches"] == [], said
        if type(x) is torch.Tensor and not x.is_neg() and not x.is_meta:
            assert torch.equal(r["y"], torch.relu(x.detach())), said
    if kernel:
        assert runs[0]["general"], "a first call is the general path's (module load, canary)"
        assert runs[1]["general"] == (f["path"] == "kernel, general path"), (said, runs[1]["general"])


@pytest.mark.vgpu
@pytest.mark.parametrize("name", list(CASES))
def test_explain_for_a_gfx950_is_what_the_virtual_gfx950_runs(vgpu, name):
    x, out, rung = CASES[name](vgpu)
    said = explain_plain(x, out, rung)
    holds(said, vgpu, x, out, rung)
    if name.startswith(("float32-4096", "int8-777", "float16-5000", "transposed-out-alike", "channels-last-none")):
        assert fields(said)["path"].startswith("kernel, "), said  # the table reaches the kernel path
    if name in ("float64", "strided-none", "channels-last-out-contiguous", "empty-none", "neg-view", "meta"):
        assert fields(said)["path"] == "torch fallback", said


@pytest.mark.vgpu
@pytest.mark.parametrize("env", [{"RELU_FLYDSL_DISABLE": "1"}, {"RELU_FLYDSL_RUNG": "v2"},
                                 {"RELU_FLYDSL_CANARY": "0"}], ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("name", ["float32-4096", "bfloat16-7-none", "transposed-out-alike", "int8-offsets-3-and-5"])
def test_explain_for_a_gfx950_follows_the_settings(vgpu, monkeypatch, env, name):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    x, out, rung = CASES[name](vgpu)
    said = explain_plain(x, out, rung)
    if "RELU_FLYDSL_DISABLE" in env:
        assert fields(said)["why"] == "disabled by RELU_FLYDSL_DISABLE", said
    if "RELU_FLYDSL_RUNG" in env:
        assert fields(said)["counted as"].startswith("flydsl/v2/"), said
    holds(said, vgpu, x, out, rung)


@pytest.mark.vgpu
@pytest.mark.parametrize("name", ["float32-4257-none", "float16-5000-none", "int8-4100-none"])
def test_explain_for_a_gfx950_plans_split_launches(vgpu, monkeypatch, name):
    """Launch limits that split these sizes (as for tensors past 2^31 elements): every launch's
    grid, and the general path for repeated calls (the entry replays single launches only)."""
    from relu_flydsl.flash_relu_rocm import plan

    monkeypatch.setattr(plan, "LIMITS", plan.LaunchLimits(max_index=3000, max_buffer_bytes=6000))
    x, out, rung = CASES[name](vgpu)
    said = explain_plain(x, out, rung)
    assert len(planned(fields(said))[3]) > 1 and fields(said)["path"] == "kernel, general path", said
    holds(said, vgpu, x, out, rung)


@pytest.mark.vgpu
@pytest.mark.parametrize("name", ["float32-4096", "bfloat16-7-none", "bool"])
def test_explain_for_another_arch_is_its_fallback(vgpu, monkeypatch, name):
    """arch="gfx942": the fallback a device of that arch gets (the virtual device presented as one)."""
    x, out, rung = CASES[name](vgpu)
    said = explain_plain(x, out, rung, arch="gfx942")
    if name != "bool":
        assert fields(said)["why"] == "arch gfx942 (kernels are built for gfx950)", said
    device_info = _dispatch.device_info
    monkeypatch.setattr(_dispatch, "device_info", lambda t: (lambda i: i and i._replace(arch="gfx942"))(device_info(t)))
    runs = [run_on(vgpu, x, out, rung, None) for _ in range(2)]
    f = fields(said)
    for r in runs:
        if name == "bool":
            assert f["path"] == f"raises {type(r['raised']).__name__}" and f["why"] == str(r["raised"])
        else:
            assert r["raised"] is None and r["delta"] == {f["counted as"]: 1} and r["launches"] == []


def test_explain_refuses_an_unknown_arch():
    x = torch.randn(8)
    for arch, error in (("sm_90", ValueError), ("", ValueError), ("GFX950", ValueError), ("gfx", ValueError),
                        ("gfx950 ", ValueError), (950, TypeError), (b"gfx950", TypeError)):
        with pytest.raises(error, match="arch"):
            relu_flydsl.explain(x, arch=arch)
    plain = relu_flydsl.explain(x, arch="gfx950")
    assert relu_flydsl.explain(x, arch="gfx950:sramecc+:xnack-") == plain  # gcnArchName, features and all
    assert fields(plain)["path"].startswith("kernel, ") and fields(plain)["counted as"] == "flydsl/v5/float32"


def test_explain_for_a_gfx950_needs_no_hip_runtime(vgpu_device):
    """The same answers from a process with no HIP runtime loaded (this one has the virtual
    device's stand-in library), over the whole table."""
    from relu_flydsl import _hip

    assert _hip.unavailable() is None
    here = answers()
    code = (f"import json, sys; sys.path[:0] = {[str(Path(__file__).parent)]!r}; import relu_flydsl._hip as h; "
            "import test_explain_arch as T; assert h.unavailable() is not None, 'a HIP runtime is loaded'; "
            "print(json.dumps(T.answers()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == here
