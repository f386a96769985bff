"""The one decision (_dispatch.decide: fallback_reason's rules, an empty tensor, the code objects,
the HIP runtime, the rung and the vector width), rule by rule, through relu() and through
explain(), each checked against the rule's own answer: the dispatch_stats() key relu() adds and
the kernel it launches on the virtual gfx950, the path, reason and kernel explain() names.
tests/vgpu/test_explain*.py hold explain() equal to relu(); a mutant of one rule changes both
alike, so these tests hold each to the rule (the decision mutants: tests/mutants_general.py's
DECISION, each killed by both tests here)."""

import re
import warnings

import pytest
import torch

import relu_flydsl
import vgpu_support as S
from relu_flydsl import _compiled_entry, _dispatch, _hip, _objects

pytestmark = pytest.mark.vgpu
N = 1024
_SYMBOL = re.compile(r"relu_(v\d)_[a-z]+_([a-z0-9]+)_x(\d+)_b(\d+)")


def _reg(dev, t, name="x"):
    dev.register(t, name=name)
    return t


def _x(dev, n=N, dtype=torch.float32):
    return _reg(dev, torch.randn(n).to(dtype))


def _out(dev, x):
    return _reg(dev, torch.empty_like(x), "out")


def _gfx942(mp):
    info = _dispatch.device_info
    mp.setattr(_dispatch, "device_info", lambda t: (lambda i: i and i._replace(arch="gfx942"))(info(t)))


def _with_out(x_of=_x, rung=None):
    return lambda d, mp: (lambda x: (x, _out(d, x), rung))(x_of(d))


def _after(setting, make=_with_out()):
    """make(dev) once setting(monkeypatch) is in force."""
    return lambda d, mp: (setting(mp), make(d, mp))[1]


def _out_on_device_1(d, mp):
    """out described on device 1, x on device 0 (device_info's answer for out alone)."""
    x = _x(d)
    out, info = _out(d, x), _dispatch.device_info
    mp.setattr(_dispatch, "device_info", lambda t: (lambda i: i and i._replace(index=1) if t is out else i)(info(t)))
    return x, out, None


OUT_DEVICE = ValueError("relu(): out is on device 1 but x is on device 0")
# rule -> (make(dev, monkeypatch) -> (x, out, rung), answer): an error raised, a fallback reason, or
# the kernel (rung, dtype, vec) that the registry's widths and the pointers' alignments give
RULES = {
    "out device": (_out_on_device_1, OUT_DEVICE),
    "kill switch": (_after(lambda mp: mp.setenv("RELU_FLYDSL_DISABLE", "1")), "disabled by RELU_FLYDSL_DISABLE"),
    # x requiring grad: relu() runs through the op, whose call asks device_info and decides
    "not a ROCm device": (_after(lambda mp: mp.setattr(_dispatch, "device_info", lambda t: None),
                                 lambda d, mp: (_x(d).requires_grad_(), None, None)), "not a ROCm device"),
    "arch": (_after(_gfx942), "arch gfx942 (kernels are built for gfx950)"),
    "dtype": (_with_out(lambda d: _x(d, 100, torch.float64)), "dtype float64"),
    "layout": (lambda d, mp: (_reg(d, torch.randn(32, 48)).t(), _reg(d, torch.empty(48, 32), "out"), None),
               "non-contiguous"),
    "neg bit": (lambda d, mp: (torch._neg_view(_x(d)), _reg(d, torch.empty(N), "out"), None), "neg/conj-bit view"),
    "no memory": (lambda d, mp: (torch._efficientzerotensor(N), None, None), _dispatch.NO_MEMORY),
    "misaligned": (lambda d, mp: (S.odd_float32(d, torch.randn(N)), None, None), _dispatch.MISALIGNED),
    "empty": (lambda d, mp: (_reg(d, torch.empty(0)), None, None), "empty tensor"),
    "code objects": (_after(lambda mp: mp.setattr(_objects, "unavailable", lambda: "no code objects (a test)")),
                     "no code objects (a test)"),
    "hip runtime": (_after(lambda mp: mp.setattr(_hip, "unavailable", lambda: "no HIP runtime (a test)")),
                    "no HIP runtime (a test)"),
    "rung": (_with_out(lambda d: _x(d, 4096), "v2"), ("v2", "float32", 4)),
    # out one bfloat16 element past a 16-byte boundary: the planner's width for both pointers is 1
    "vector width": (lambda d, mp: (_x(d, 2048, torch.bfloat16),
                                    _reg(d, torch.empty(2049, dtype=torch.bfloat16), "out")[1:], None),
                     ("v5", "bfloat16", 1)),
}


def _setup(dev, mp, rule):
    mp.setenv("RELU_FLYDSL_CANARY", "0")  # the rule is under test here, not the kernel
    return RULES[rule][0](dev, mp) + (RULES[rule][1],)


@pytest.mark.parametrize("rule", list(RULES))
def test_relu_follows_each_rule(vgpu, monkeypatch, rule):
    """relu() on the general path (the compiled entry off): the rule's fallback, counted under its
    reason with torch's values, or the rule's kernel launched and counted."""
    x, out, rung, want = _setup(vgpu, monkeypatch, rule)
    before, launches = relu_flydsl.dispatch_stats(), len(vgpu.launches)
    _compiled_entry.use(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an unavailable runtime warns once
            if isinstance(want, Exception):
                with pytest.raises(type(want), match=re.escape(str(want))):
                    relu_flydsl.relu(x, out, rung=rung)
                assert relu_flydsl.dispatch_stats() == before and len(vgpu.launches) == launches, rule
                return
            y = relu_flydsl.relu(x, out, rung=rung)
    finally:
        _compiled_entry.use(True)
    after = relu_flydsl.dispatch_stats()
    delta = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    ran = [_SYMBOL.fullmatch(r.kernel).group(1, 2, 3) for r in vgpu.launches[launches:]]
    if isinstance(want, str):
        assert delta == {f"fallback/{want}": 1} and ran == [], (rule, delta, ran)
    else:
        assert delta == {f"flydsl/{want[0]}/{want[1]}": 1} and ran == [(want[0], want[1], str(want[2]))], \
            (rule, delta, ran)
    if not x._is_zerotensor():
        assert torch.equal(y.detach(), torch.relu(x.detach())), rule


@pytest.mark.parametrize("rule", list(RULES))
def test_explain_says_each_rule(vgpu, monkeypatch, rule):
    """explain(): the rule's fallback and reason, or its kernel (rung, dtype, vector width)."""
    x, out, rung, want = _setup(vgpu, monkeypatch, rule)
    f = dict(line.split(": ", 1) for line in relu_flydsl.explain(x, out, rung=rung).splitlines())
    if isinstance(want, Exception):
        assert (f["path"], f["why"]) == (f"raises {type(want).__name__}", str(want)), (rule, f)
    elif isinstance(want, str):
        assert (f["path"], f["why"], f["counted as"]) == ("torch fallback", want, f"fallback/{want}"), (rule, f)
    else:
        assert f["path"].startswith("kernel") and f["kernel"].startswith("rung {}, {}, x{}: ".format(*want)), (rule, f)
