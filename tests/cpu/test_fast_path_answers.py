"""On CPU tensors (not a ROCm device) the compiled entry (_compiled_entry.c) serves plain
tensors with torch's kernel. It must answer every call exactly as the general path alone
does, the compiled entry switched off (_compiled_entry.use(False), the package where the
binary cannot load): the same result (type, layout, values), or the same exception type and
message with out untouched, and the same dispatch_stats() reason, for every input kind of
tests/cpu/test_torch_compat.py, every bad input, and with the kill switch set.
"""

import contextlib
import json
import warnings

import pytest
import torch

import relu_flydsl
import test_torch_compat as C
from relu_flydsl import _compiled_entry, _relu

warnings.filterwarnings("ignore", message=".*(sparse|nested|quantiz|TypedStorage).*")


@pytest.fixture(autouse=True)
def _compiled_entry_loaded():
    """Both sides exist: the comparison would be vacuous without the compiled entry."""
    status = _compiled_entry.status()
    assert status["loaded"], f"the compiled entry did not load: {status['reason']} (test.sh builds it)"


@contextlib.contextmanager
def _general_path_only():
    """relu() without the compiled entry: the general path answers every call."""
    assert _compiled_entry.use(False) is False
    try:
        yield
    finally:
        assert _compiled_entry.use(True)


def _answer(call):
    """(outcome, dispatch_stats()) of one call; the outcome is the result's description
    and content, or the exception's type and message with out's content after it."""
    relu_flydsl.reset_dispatch_stats()
    try:
        result, _, _ = call()
        outcome = ("result", C._describe(result), C._content(result))
    except Exception as e:  # noqa: BLE001 - the error is part of the answer
        out, before = getattr(e, "relu_out", (None, None))
        after = C._snapshot(out) if out is not None else None
        outcome = ("error", type(e), str(e), before is None or C._equal(after, before))
    return outcome, relu_flydsl.dispatch_stats()


def _same_answer(make_call):
    fast = _answer(make_call())
    with _general_path_only():
        general = _answer(make_call())
    assert C._equal(fast[0], general[0]), (fast[0], general[0])
    assert fast[1] == general[1], (fast[1], general[1])
    if fast[0][0] == "error":
        assert fast[0][3], "relu() wrote into out, then raised"
    return fast


def _in(case, form):
    def call():
        with contextlib.ExitStack() as stack:
            x = C._make(case, stack)
            return C._call(x, form, "relu")
    return call


@pytest.mark.parametrize("form", C.FORMS)
@pytest.mark.parametrize("case", sorted(C.CASES))
def test_every_input_kind_gets_the_general_paths_answer(case, form):
    _same_answer(lambda: _in(case, form))


def _bad(x, out, **kwargs):
    def call():
        before = C._snapshot(out)
        try:
            return relu_flydsl.relu(x, out=out, **kwargs), out, before
        except Exception as e:
            e.relu_out = (out, before)
            raise
    return call


def _inference(t):
    with torch.inference_mode():
        return t.clone()


BAD = {
    "bool": lambda: _bad(torch.tensor([True, False]), None),
    "complex": lambda: _bad(torch.tensor([1 + 1j]), None),
    "complex out": lambda: _bad(torch.tensor([1 + 1j]), torch.tensor([7 + 0j])),
    "unknown rung": lambda: _bad(torch.randn(8), None, rung="v9"),
    "unknown rung, out": lambda: _bad(torch.randn(8), torch.full((8,), 7.0), rung="v9"),
    "str subclass rung": lambda: _bad(torch.randn(8), torch.full((8,), 7.0), rung=type("S", (str,), {})("v5")),
    "list rung": lambda: _bad(torch.randn(8), torch.full((8,), 7.0), rung=["v5"]),
    "dtype": lambda: _bad(torch.randn(8), torch.full((8,), 7.0, dtype=torch.float64)),
    "shape": lambda: _bad(torch.randn(8), torch.full((2, 4), 7.0)),
    "not dense": lambda: _bad(torch.randn(8), torch.full((8, 2), 7.0)[:, 0]),
    "meta out": lambda: _bad(torch.randn(8), torch.empty(8, device="meta")),
    "meta x": lambda: _bad(torch.empty(8, device="meta"), torch.full((8,), 7.0)),
    "0-dim x, meta out": lambda: _bad(torch.tensor(-1.0), torch.empty((), device="meta")),
    "x grad": lambda: _bad(torch.randn(8, requires_grad=True), torch.full((8,), 7.0)),
    "out grad": lambda: _bad(torch.randn(8), torch.full((8,), 7.0, requires_grad=True)),
    "in place grad": lambda: (lambda t: _bad(t, t))(torch.randn(8, requires_grad=True)),
    "inference out": lambda: _bad(torch.randn(8), _inference(torch.full((8,), 7.0))),
    "partial overlap": lambda: (lambda b: _bad(b[0:10], b[4:14]))(torch.arange(-8.0, 8.0)),
    "size-1 strides differ": lambda: (lambda t: _bad(t, torch.as_strided(t, (1, 4), (9, 1))))(torch.randn(1, 4)),
    "transposed out=x": lambda: (lambda t: _bad(t, t.t()))(torch.randn(4, 4)),
    "non-tensor out": lambda: _bad(torch.randn(3), [0.0, 0.0, 0.0]),
    "non-tensor x": lambda: _bad([1.0, -1.0], None),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_bad_input_gets_the_general_paths_error(bad):
    outcome, _ = _same_answer(BAD[bad])
    assert outcome[0] == "error", outcome


GOOD = {
    "relu(x)": lambda x: _bad(x, None),
    "out=y": lambda x: _bad(x, torch.full_like(x, 7)),
    "out=x": lambda x: (lambda t: _bad(t, t))(x.clone()),
    "out=x.view_as(x)": lambda x: (lambda t: _bad(t, t.view_as(t)))(x.clone()),
    "strided x": lambda x: _bad(torch.stack([x, x], 1)[:, 0], torch.full_like(x, 7)),
    "0-dim": lambda x: _bad(x[0], torch.full((), 7, dtype=x.dtype)),
    "empty": lambda x: _bad(x[:0], torch.empty(0, dtype=x.dtype)),
    "neg view": lambda x: _bad(torch._neg_view(x), torch.full_like(x, 7)) if x.is_floating_point() else _bad(x, None),
    "grad, no_grad": lambda x: _bad(x.detach().requires_grad_(), None) if x.is_floating_point() else _bad(x, None),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8,
                                   torch.uint8, torch.int64], ids=str)
@pytest.mark.parametrize("form", sorted(GOOD))
def test_plain_calls_get_the_general_paths_result(form, dtype):
    x = (torch.randn(6) * 50).to(dtype)
    with torch.no_grad() if form == "grad, no_grad" else contextlib.nullcontext():
        outcome, stats = _same_answer(lambda: GOOD[form](x))
    assert outcome[0] == "result", outcome
    assert stats == {"fallback/not a ROCm device": 1}, stats


def test_the_compiled_entry_serves_plain_cpu_calls(monkeypatch):
    """Not vacuous: plain calls never enter the general path's validation (a wrong
    guard that left everything to the general path would pass the tests above)."""
    entered = []
    check = _relu._check
    monkeypatch.setattr(_relu, "_check", lambda *a: entered.append(a) or check(*a))
    x = torch.randn(16)
    y = torch.empty_like(x)
    relu_flydsl.reset_dispatch_stats()
    assert relu_flydsl.relu(x, out=y) is y
    assert torch.equal(relu_flydsl.relu(x), torch.relu(x))
    z = x.clone()
    relu_flydsl.relu(z, out=z)
    relu_flydsl.relu(x, out=y, rung="v5")
    assert entered == []
    assert relu_flydsl.dispatch_stats() == {"fallback/not a ROCm device": 4}
    relu_flydsl.relu(torch.randn(4, requires_grad=True))  # autograd: the general path (the op)
    assert len(entered) == 1


@pytest.mark.parametrize("form", ["relu(x)", "out=y", "out=x"])
def test_the_kill_switch_is_counted_first(monkeypatch, form):
    """RELU_FLYDSL_DISABLE set and unset in a running process: the reason follows it."""
    x = torch.randn(16)
    call = GOOD[form](x)
    monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    relu_flydsl.reset_dispatch_stats()
    call()
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    with _general_path_only():
        call()
    call()
    monkeypatch.delenv("RELU_FLYDSL_DISABLE")
    call()
    assert relu_flydsl.dispatch_stats() == {"fallback/not a ROCm device": 2, "fallback/disabled by RELU_FLYDSL_DISABLE": 2}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU torch sees (a CPU 0-dim x with a GPU out)")
def test_a_cpu_scalar_with_a_gpu_out_is_refused():
    """torch's kernel accepts a CPU 0-dim input with a GPU output; relu() refuses
    another device for out on every path, writing nothing."""
    x = torch.tensor(-1.0)
    out = torch.full((), 7.0, device="cuda")
    for general in (False, True):
        with _general_path_only() if general else contextlib.nullcontext():
            with pytest.raises(ValueError, match="device"):
                relu_flydsl.relu(x, out=out)
        assert out.item() == 7.0


def test_host_overhead_times_the_fallback(tmp_path):
    """benchmarks/host_overhead.py --fallback runs the real fallback on CPU tensors (its
    own check: every timed call counted as "not a ROCm device") and reports both pairs."""
    from benchmarks import host_overhead

    out = tmp_path / "fallback.json"
    rc = host_overhead.main(["--fallback", "--rounds", "2", "--calls", "20", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert doc["mode"] == "fallback" and doc["path"] == "fallback/not a ROCm device"
    assert set(doc["paired"]) == {"relu(x, out=y) / torch.clamp_min(x, 0, out=y)", "relu(x) / torch.relu(x)"}
    assert doc["target"] == 1.15 and rc == (0 if doc["ok"] else 1)
