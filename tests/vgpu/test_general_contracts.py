"""torch's contracts around a result, kept by relu()'s general path (the first call of a size,
alignment and device; the compiled entry replays only what it made ready) on the virtual
gfx950: version counters bumped once per write, as torch's out= and in-place ops bump them (so
a tensor saved for backward and then overwritten makes backward raise torch's error); dual
tensors keep torch's tangent; settings re-read right before the launch; a failed restore of
the caller's device raises; the HIP runtime's file as mapped; warnings that say what happens,
at the caller's line.

Each scenario is a function of test_hot_path's `Ctx`, so tests/test_mutations.py runs them
against mutated copies of the package (tests/mutants_general.py names them)."""

import os
import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from test_general_contracts_cpu import import_warnings
from test_hot_path import F32, scenario_test

pytestmark = pytest.mark.vgpu
F64 = torch.float64
N = 1024
KILL = "RELU_FLYDSL_DISABLE"


def _first_call(c, call, flydsl=1):
    """call() through the general path (relu()'s validation entered), counted `flydsl` times on
    the kernel path; returns its result."""
    general, calls, launches = c.general, c.flydsl_calls(), len(c.dev.launches)
    result = call()
    assert c.general > general, "expected the general path (a first call of this size)"
    assert c.flydsl_calls() == calls + flydsl, c.pkg.dispatch_stats()
    assert (len(c.dev.launches) > launches) == bool(flydsl), "a kernel launch iff the kernel path"
    c.dev.check()
    return result


def _normal(c, n, name, device=0):
    """A registered tensor of n normal float32 numbers, both signs (torch's results are the bit rule's)."""
    t, _ = c.dev.guarded((n,), F32, name=name, device=device)
    t.copy_(torch.randn(n))
    return t


# ---- version counters --------------------------------------------------------
def general_path_bumps_versions(c):
    """relu(x, out=y) and relu(x, out=x) on the kernel path bump the version counter once, as
    torch.clamp_min(out=) and torch.relu_ do; relu(x)'s new output keeps version 0, as
    torch.relu's; the torch.library ops likewise (the op's mutation bumps out, the kernel
    nothing more); and on the fallback of a gfx950 call (float64) torch's own bump, not two."""
    ref_x, ref_y = torch.randn(8), torch.empty(8)
    v = ref_y._version
    torch.clamp_min(ref_x, 0, out=ref_y)
    torch_out = ref_y._version - v
    v = ref_x._version
    torch.relu_(ref_x)
    torch_inplace = ref_x._version - v
    assert (torch_out, torch_inplace, torch.relu(ref_x)._version) == (1, 1, 0)

    for i, n in enumerate((N, 2 * N, 3 * N)):  # a new size each: the general path's first call
        x, out = _normal(c, n, f"x{i}"), _normal(c, n, f"out{i}")
        v = out._version
        _first_call(c, lambda: c.relu(x, out=out))
        assert out._version - v == torch_out, f"relu(x, out=y): version +{out._version - v}, torch +{torch_out}"
        assert torch.equal(out, torch.relu(x))
    x = _normal(c, 4 * N, "x-inplace")
    want, v = torch.relu(x), x._version
    _first_call(c, lambda: c.relu(x, out=x))
    assert x._version - v == torch_inplace, f"relu(x, out=x): version +{x._version - v}, torch +{torch_inplace}"
    assert torch.equal(x, want)
    x = _normal(c, 5 * N, "x-new")
    c.dev.fresh_output(5 * N * 4, name="y-new")
    y = _first_call(c, lambda: c.relu(x))
    assert y._version == 0, f"relu(x)'s new output at version {y._version}; torch.relu's is 0"

    # the ops (torch.library: the mutation of out is bumped once by torch, the kernel adds none)
    x, out = _normal(c, 6 * N, "x-op"), _normal(c, 6 * N, "out-op")
    v = out._version
    c.r._relu_out_op(x, out)
    assert out._version - v == torch_out, f"_relu_out_op: version +{out._version - v}, torch +{torch_out}"
    c.dev.fresh_output(6 * N * 4, name="y-op")
    y_op = c.r._relu_op(x)  # (kept: its registered memory is not reused while the scenario runs)
    assert y_op._version == 0
    # inference tensors have no version counter: nothing to bump, nothing raised
    with torch.inference_mode():
        x, out = _normal(c, 7 * N, "x-inference"), _normal(c, 7 * N, "out-inference")
        _first_call(c, lambda: c.relu(x, out=out))
        assert torch.equal(out, torch.relu(x))
    assert c.flydsl_calls() == 8, c.pkg.dispatch_stats()

    # the torch fallback of a gfx950 call (a dtype without a kernel): torch's own bump, once
    x64, out64 = torch.randn(N, dtype=F64), torch.empty(N, dtype=F64)
    for call in (lambda: c.relu(x64, out=out64), lambda: c.r._relu_out_op(x64, out64)):
        v = out64._version
        call()
        assert out64._version - v == torch_out, f"fallback: version +{out64._version - v}, torch +{torch_out}"
    v = x64._version
    c.relu(x64, out=x64)
    assert x64._version - v == torch_inplace
    assert c.relu(x64)._version == 0 and c.r._relu_op(x64)._version == 0
    assert c.pkg.dispatch_stats().get("fallback/dtype float64") == 5, c.pkg.dispatch_stats()


def saved_tensor_overwritten_raises(c):
    """A tensor saved for backward (sigmoid saves its result), overwritten through
    relu(x, out=s.detach()) on the kernel path: backward raises torch's "modified by an
    inplace operation" error, as it does after torch.clamp_min(x, 0, out=s.detach()), instead
    of a wrong gradient. relu(x, out=x) on a saved tensor too."""
    def fails_after(write):
        a = torch.randn(N, requires_grad=True)
        s = a.sigmoid()
        c.dev.register(s, name=f"s{len(c.dev.launches)}")
        write(s.detach())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            s.sum().backward()

    fails_after(lambda t: torch.clamp_min(torch.randn(N), 0, out=t))  # torch's own behaviour
    x = _normal(c, N, "x")
    fails_after(lambda t: _first_call(c, lambda: c.relu(x, out=t)))
    c.state.reset()  # a first call again
    fails_after(lambda t: _first_call(c, lambda: c.relu(t, out=t)))


# ---- forward AD ---------------------------------------------------------------
def _tangent(t):
    return fwAD.unpack_dual(t).tangent


def dual_tensors_keep_their_tangent(c):
    """Inside fwAD.dual_level(), with a ready entry for the size in the compiled entry: relu of
    a dual tensor gives torch.relu's primal and tangent, counted "fallback/forward AD" (torch's
    kernel); a plain tensor there is still the kernel's. relu(dual, out=dual) keeps torch.relu_'s
    tangent; out= with a dual x or a dual out raises as torch's out= functions do, before
    anything is written."""
    c.warm(N)
    x, t = _normal(c, N, "x"), torch.randn(N)
    with fwAD.dual_level():
        want = torch.relu(fwAD.make_dual(x.clone(), t))
        before = c.pkg.dispatch_stats()
        c.dev.fresh_output(N * 4, name="y-dual")  # (where a kernel would write it: served, not refused)
        got = c.relu(fwAD.make_dual(x, t))
        assert _tangent(got) is not None, "relu() of a dual tensor lost its tangent"
        assert torch.equal(got, want) and torch.equal(_tangent(got), _tangent(want))
        assert c.pkg.dispatch_stats().get("fallback/forward AD", 0) == before.get("fallback/forward AD", 0) + 1
        # a plain tensor inside the level: the kernel (the general path: the level is asked first)
        c.call(N, seed=3)
        # in place on a dual
        d = fwAD.make_dual(_normal(c, N, "d"), t.clone())
        ref = fwAD.make_dual(d.detach().clone(), t.clone())
        assert c.relu(d, out=d) is d
        torch.relu_(ref)
        assert torch.equal(d, ref) and torch.equal(_tangent(d), _tangent(ref))
        # out= with a dual x, or into a dual out: refused before writing
        for xx, make_out in ((fwAD.make_dual(x, t), lambda: _normal(c, N, "out-plain")),
                             (x, lambda: fwAD.make_dual(_normal(c, N, "out-dual"), t))):
            out = make_out()
            before, launches = out.detach().clone(), len(c.dev.launches)
            with pytest.raises(NotImplementedError, match="does not support forward AD"):
                c.relu(xx, out=out)
            assert torch.equal(out, before), "out written before the refusal"
            assert len(c.dev.launches) == launches


def forward_over_reverse(c):
    """Forward-over-reverse (the OpInfo declares supports_fwgrad_bwgrad for relu): a dual leaf
    that requires grad, its gradient taken with create_graph, the gradient's tangent, all
    torch.relu's."""
    x, t, v = _normal(c, N, "x"), torch.randn(N), torch.randn(N)

    def grad_tangent(f, base):
        p = base.detach().clone().requires_grad_()
        with fwAD.dual_level():
            d = fwAD.make_dual(p, t)
            y = f(d)
            (g,) = torch.autograd.grad(y, d, v, create_graph=True)
            return fwAD.unpack_dual(y), fwAD.unpack_dual(g)

    (y, yt), (g, gt) = grad_tangent(c.relu, x)
    (wy, wyt), (wg, wgt) = grad_tangent(torch.relu, x)
    assert yt is not None and gt is not None, "tangents lost"
    for got, want in ((y, wy), (yt, wyt), (g, wg), (gt, wgt)):
        assert torch.equal(got, want)


# ---- settings and errors in flight ----------------------------------------------
def settings_reread_before_the_launch(c):
    """The kill switch set while a first call loads its module (anything between the decision
    and the launch can run Python, or let another thread run): that call launches nothing, is
    counted under the kill switch and gives torch's result; a forced rung set there is the rung
    launched. A kill switch set while relu(x) allocates its output likewise."""
    load = c.pkg._objects.function

    def loading(env, value):
        def function(*args):
            c.mp.setenv(env, value)
            return load(*args)
        return function

    c.mp.setattr(c.pkg._objects, "function", loading(KILL, "1"))
    x, out = _normal(c, N, "x"), _normal(c, N, "out")
    launches = len(c.dev.launches)
    assert c.relu(x, out=out) is out
    assert c.dev.launches[launches:] == [], "launched after the kill switch was set"
    assert torch.equal(out, torch.relu(x))
    assert c.pkg.dispatch_stats() == {f"fallback/disabled by {KILL}": 1}, c.pkg.dispatch_stats()

    c.mp.delenv(KILL)
    c.state.reset()
    c.mp.setattr(c.pkg._objects, "function", loading("RELU_FLYDSL_RUNG", "v3"))
    _first_call(c, lambda: c.relu(x, out=out))
    assert torch.equal(out, torch.relu(x))
    assert c.pkg.dispatch_stats() == {"flydsl/v3/float32": 1}, c.pkg.dispatch_stats()
    c.mp.delenv("RELU_FLYDSL_RUNG")
    c.mp.setattr(c.pkg._objects, "function", load)

    c.state.reset()
    c.call(N, seed=4)  # module loaded: the next size is planned, then allocated, then launched
    empty_like = torch.empty_like

    def allocating(t, *args, **kwargs):
        c.mp.setenv(KILL, "1")
        return empty_like(t, *args, **kwargs)

    x = _normal(c, 2 * N, "x2")
    c.mp.setattr(torch, "empty_like", allocating)
    launches = len(c.dev.launches)
    y = c.relu(x)
    c.mp.setattr(torch, "empty_like", empty_like)
    assert c.dev.launches[launches:] == [], "launched after the kill switch was set"
    assert torch.equal(y, torch.relu(x))
    assert c.pkg.dispatch_stats().get(f"fallback/disabled by {KILL}") == 1, c.pkg.dispatch_stats()


def general_path_failed_restore_raises(c):
    """The general path launches on device 1 (device 0 current) and switching back fails:
    RuntimeError naming hipSetDevice, as the compiled entry raises, not a silent change of the
    caller's device; the launch ran (out holds the result, its version bumped) and the error
    is taken. The next call is served."""
    c.dev.set_device_count(2)
    c.dev.set_device(0)
    c.dev.stream = {0: c.stream, 1: c.stream}
    _first_call(c, lambda: c.relu(_normal(c, N, "x1", 1), out=_normal(c, N, "out1", 1)))  # module loaded there
    x, out = _normal(c, 2 * N, "x2", 1), _normal(c, 2 * N, "out2", 1)  # a new size: the general path again
    v, launches = out._version, len(c.dev.launches)
    c.dev.fail_calls("hipSetDevice", 1, after=1)  # the switch to device 1 works, the switch back fails
    with pytest.raises(RuntimeError, match="hipSetDevice"):
        c.relu(x, out=out)
    assert c.dev.fail_pending("hipSetDevice") == 0, "the general path did not switch back"
    assert len(c.dev.launches) == launches + 1 and torch.equal(out, torch.relu(x))
    assert out._version == v + 1, "out was written: its version must say so"
    assert c.dev.last_error() == 0, "the failed hipSetDevice's error left pending"
    c.dev.set_device(0)
    out3 = _normal(c, 2 * N, "out3", 1)
    assert c.relu(x, out=out3) is out3 and torch.equal(out3, torch.relu(x))
    assert c.dev.get_device() == 0


# ---- what the package says ------------------------------------------------------
def runtime_path_is_the_mapped_file(c):
    """status()'s HIP runtime is the file mapped into the process (the stand-in's), never the
    bare SONAME it was found by."""
    path = c.pkg._hip.runtime_path()
    assert path == os.path.realpath(c.dev.lib_path), (path, c.dev.lib_path)


def entry_warning_says_what_happens(c):
    """Without the compiled entry (it did not load), the first call says so once, at the
    caller's line: the calls take the Python path with the same results, which here are the
    kernel's (served and counted), never that they take torch's fallback."""
    c.mp.setattr(c.entry, "not_loaded", lambda: "built for another test")
    c.entry.use(False)
    x, out = _normal(c, N, "x"), _normal(c, N, "out")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                _first_call(c, lambda: c.relu(x, out=out))  # served by the kernel each time
    finally:
        c.entry.use(True)
    assert torch.equal(out, torch.relu(x))
    said = [(str(w.message), w.filename) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert said == [("relu_flydsl: the compiled entry is not used (built for another test); every call takes "
                     "the Python path (same results, more host time)", __file__)], said


def import_warning_at_the_importers_line(c):
    """A setting read at import (RELU_FLYDSL_RUNG=v9) warns at the line that imported the
    package (here with importlib.import_module; tests/cpu: an import statement), as one read at
    a call warns at the calling line."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(c.pkg.__file__)))
    got = import_warnings(c.pkg.__name__, root, {"RELU_FLYDSL_RUNG": "v9"}, how="import_module")
    assert [w["where"] for w in got] == ["importer:3"], got
    assert "RELU_FLYDSL_RUNG='v9'" in got[0]["message"], got


SCENARIOS = {f.__name__: f for f in (
    general_path_bumps_versions, saved_tensor_overwritten_raises, dual_tensors_keep_their_tangent,
    forward_over_reverse, settings_reread_before_the_launch, general_path_failed_restore_raises,
    runtime_path_is_the_mapped_file, entry_warning_says_what_happens, import_warning_at_the_importers_line,
)}

test_general_contracts = scenario_test(SCENARIOS)
