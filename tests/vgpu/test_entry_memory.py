"""Both paths after a failed launch, and for tensors that describe no memory, on the virtual gfx950.

A launch that fails after out was handed to it may have written part of out: out's version
counter is bumped all the same (autograd must not trust a saved tensor it may have overwritten),
and the error is raised: on the compiled entry, on the general path, and for a split launch
whose second piece fails (the stand-in fails hipModuleLaunchKernel on demand).

A tensor whose data pointer is NULL with numel > 0 (torch._efficientzerotensor, a
FunctionalTensorWrapper from torch._to_functional_tensor) or whose data is not aligned to its
element size (float32 at an odd byte address: set_() on a storage sliced by one byte) goes to
torch's kernel on both paths, with a ready entry of the same size (so the entry is asked),
giving torch's result or torch's error (a ZeroTensor out: "ZeroTensors are immutable"), counted
under the reason explain() names. An int8 tensor at an odd address is element-aligned: the kernel's.

Each scenario is a function of test_hot_path's `Ctx`, so tests/test_mutations.py runs them
against mutated copies of the package (tests/mutants_entry.py, tests/mutants_general.py)."""

import pytest
import torch

import vgpu_support as S
from test_hot_path import F32, scenario_test

pytestmark = pytest.mark.vgpu
N = 1024
LAUNCH = "hipModuleLaunchKernel"


def _failed_launch(c, x, target, general):
    """relu(x, out=target) with the stand-in failing one launch of it: RuntimeError, target's
    version bumped once, the error taken; `general`: whether relu()'s general path took the call."""
    before, version = c.general, target._version
    with pytest.raises(RuntimeError, match="launch failed"):
        c.relu(x, out=target)
    assert c.dev.fail_pending(LAUNCH) == 0, "the injected failure was not reached"
    assert (c.general > before) == general, "expected " + ("the general path" if general else "the compiled entry")
    assert target._version == version + 1, \
        f"out's version moved by {target._version - version} after a failed launch; it may hold part of the result"
    assert c.dev.last_error() == 0, "the failed launch's error left pending"


# ---- version counters after a failed launch ---------------------------------------------
def entry_failed_launch_bumps_out(c):
    """On the compiled entry (its entry ready): a failed launch into out, and in place."""
    c.warm(N)
    _, x, _, out, _ = c.tensors(N, seed=3)
    for target in (out, x):
        c.dev.fail_calls(LAUNCH, 1)
        _failed_launch(c, x, target, general=False)
    c.call(N, seed=4, hot=True)  # served again


def general_failed_launch_bumps_out(c):
    """On the general path (a first call of its size; the module already loaded, so the failure
    is the call's own launch): out=, in place, and a split launch (max_index lowered: 3 pieces)
    whose second piece fails, the first and third written."""
    c.call(N, seed=1)
    for n, in_place in ((2 * N, False), (3 * N, True)):
        _, x, _, out, _ = c.tensors(n, seed=n)
        c.dev.fail_calls(LAUNCH, 1)
        _failed_launch(c, x, x if in_place else out, general=True)
    c.mp.setattr(c.plan, "LIMITS", c.plan.LaunchLimits(max_index=3000, max_buffer_bytes=2**32 - 1))
    n = 6144
    xbits, x, _, out, _ = c.tensors(n, seed=5, kind="mixed")
    launches = len(c.dev.launches)
    c.dev.fail_calls(LAUNCH, 1, after=1)
    _failed_launch(c, x, out, general=True)
    pieces = [((r.args[2] - out.data_ptr()) // 4, r.args[1]) for r in c.dev.launches[launches:]]
    assert len(pieces) == 2 and pieces[0][0] == 0, f"the pieces around the failed one: {pieces}"
    want = S.relu_bits(xbits, F32)
    for start, k in pieces:
        assert (S.tensor_bits(out[start:start + k]) == want[start:start + k]).all(), "a piece did not write out"
    c.call(n, seed=6)  # the next call is served


# ---- tensors that describe no memory ----------------------------------------------------
def _odd(c, values, name, kept):
    t = S.odd_float32(c.dev, values, name)
    kept.append(t.raw)
    return t


def _cases(c, kept):
    """name -> (make() -> (x, out), the fallback reason; None where torch raises)."""
    values = torch.randn(N)
    NO_MEMORY, MISALIGNED = c.d.NO_MEMORY, c.d.MISALIGNED

    def dev(name, fill=values):
        t, _ = c.dev.guarded((N,), F32, name=name)
        kept.append(t)
        return t.copy_(fill)

    def at_offset(t):  # a view 4 elements in of memory at NULL: its data pointer is 16, aligned as the entry's
        assert t.data_ptr() == 16, t.data_ptr()
        return t

    def functional(name, view=None):  # a wrapper of a whole tensor (data pointer NULL), of a view of one
        t = values.clone() if view is None else torch.cat((values[:4], values))  # ("inner"), or a view of
        c.dev.register(t, name=name)  # a wrapper ("outer": its data pointer is NULL too)
        kept.append(t)
        if view == "inner":
            return at_offset(torch._to_functional_tensor(t[4:]))
        return torch._to_functional_tensor(t)[4:] if view else torch._to_functional_tensor(t)

    zero = (lambda: torch._efficientzerotensor(N))
    zero_view = (lambda: at_offset(torch._efficientzerotensor(N + 4)[4:]))
    in_place_zero, in_place_zero_view, in_place_functional = zero(), zero_view(), functional("x", view="inner")
    return {
        "ZeroTensor x": (lambda: (zero(), None), NO_MEMORY),
        "ZeroTensor x, out=": (lambda: (zero(), dev("out")), NO_MEMORY),
        "ZeroTensor out=": (lambda: (dev("x"), zero()), None),
        "ZeroTensor in place": (lambda: (in_place_zero, in_place_zero), None),
        "functional x": (lambda: (functional("x"), None), NO_MEMORY),
        "functional out=": (lambda: (dev("x"), functional("out")), NO_MEMORY),
        "functional x, plain out=": (lambda: (functional("x"), dev("out")), None),
        "ZeroTensor view x": (lambda: (zero_view(), None), NO_MEMORY),
        "ZeroTensor view x, out=": (lambda: (zero_view(), dev("out")), NO_MEMORY),
        "ZeroTensor view out=": (lambda: (dev("x"), zero_view()), None),
        "ZeroTensor view in place": (lambda: (in_place_zero_view, in_place_zero_view), None),
        "functional view x": (lambda: (functional("x", view="inner"), None), NO_MEMORY),
        "functional view x, plain out=": (lambda: (functional("x", view="inner"), dev("out")), None),
        "functional view out=": (lambda: (dev("x"), functional("out", view="inner")), NO_MEMORY),
        "functional view in place": (lambda: (in_place_functional, in_place_functional), NO_MEMORY),
        "view of a functional x": (lambda: (functional("x", view="outer"), None), NO_MEMORY),
        "view of a functional out=": (lambda: (dev("x"), functional("out", view="outer")), NO_MEMORY),
        "odd x": (lambda: (_odd(c, values, "x-odd", kept), None), MISALIGNED),
        "odd x, out=": (lambda: (_odd(c, values, "x-odd", kept), dev("out")), MISALIGNED),
        "odd out=": (lambda: (dev("x"), _odd(c, values, "out-odd", kept)), MISALIGNED),
        "odd in place": (lambda: (lambda t: (t, t))(_odd(c, values, "x-odd", kept)), MISALIGNED),
    }


def _outcome(call):
    """What a call gives: its values' bytes, or its error (type and first line)."""
    try:
        y = call()
    except RuntimeError as e:
        return "raises", type(e).__name__, (str(e).splitlines() or [""])[0]
    if torch._is_functional_tensor(y):
        y = torch._from_functional_tensor(y)
    return "result", y.numpy().tobytes()


def _torch(x, out):
    return torch.relu(x) if out is None else torch.clamp_min(x, 0, out=out)


def _make_ready(c, x, out):
    """Ask the compiled entry to hold a ready entry for relu(x, out)'s key, with the function of
    the ready aligned one, as a general path that launched such a call would: where it takes it,
    the call below finds it (the entry refuses element-misaligned pointers)."""
    ready = c.state.entries[(None, F32, N, 0, 0, 0)]
    key = (x.data_ptr() & 15, 0 if out is None else out.data_ptr() & 15)
    try:
        c.entry._loaded.add(0, *c.entry.DL_DTYPES[F32], N, *key, 0, ready.function.value, ready.grid, ready.block,
                            ready.hit, "rung v5, float32")
    except ValueError:
        pass


def _no_memory_is_torchs(c, entry):
    """Every case with the entry for N aligned float32 elements ready (in the compiled entry and
    in the general path's table), the compiled entry on (`entry`) or off: torch's result or error,
    the general path deciding, no launch, counted under explain()'s reason; then int8 at odd
    addresses takes the kernel (element-aligned)."""
    kept = []
    c.warm(N)
    assert c.entry._loaded.has(0, *c.entry.DL_DTYPES[F32], N, 0, 0, 0), "the entry of this size must be ready"
    c.entry.use(entry)
    try:
        for name, (make, reason) in _cases(c, kept).items():
            want = _outcome(lambda: _torch(*make()))
            x, out = make()
            if entry:
                _make_ready(c, x, out)
            said = c.pkg.explain(x, out)
            before, general, launches = c.pkg.dispatch_stats(), c.general, len(c.dev.launches)
            got = _outcome(lambda: c.relu(x, out=out))
            assert c.dev.launches[launches:] == [], f"{name}: launched"
            assert got == want, f"{name}: {got[:3] if got[0] == 'raises' else 'a result'} where torch gives " \
                                f"{want[:3] if want[0] == 'raises' else 'a result'}"
            assert c.general == general + 1, f"{name}: the general path must decide"
            counted = {k: n - before.get(k, 0) for k, n in c.pkg.dispatch_stats().items() if n != before.get(k, 0)}
            assert counted == ({} if reason is None else {f"fallback/{reason}": 1}), (name, counted)
            if reason is not None:
                assert said.splitlines()[:2] == ["path: torch fallback", f"why: {reason}"], (name, said)
                assert said.endswith(f"counted as: fallback/{reason}"), (name, said)
        c.dev.check()
        if entry:
            c.warm(N, torch.int8, x_off=1, y_off=3)
        else:
            c.call(N, torch.int8, x_off=1, y_off=3, seed=1, hot=False)
    finally:
        c.entry.use(True)


def no_memory_on_the_entry(c):
    _no_memory_is_torchs(c, entry=True)


def no_memory_on_the_general_path(c):
    _no_memory_is_torchs(c, entry=False)


ENTRY_SCENARIOS = {f.__name__: f for f in (entry_failed_launch_bumps_out, no_memory_on_the_entry)}
GENERAL_SCENARIOS = {f.__name__: f for f in (general_failed_launch_bumps_out, no_memory_on_the_general_path)}

test_entry_memory = scenario_test({**ENTRY_SCENARIOS, **GENERAL_SCENARIOS})
