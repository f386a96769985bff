"""relu()'s fast path and the dispatcher's edges on the virtual gfx950.
Every scenario goes through public relu() (or layers.ReLU)
with the kernel's entry already cached, and proves it: a warm call with the
same size and alignments takes the hot path (relu()'s general-path validation
`_relu._check` is not entered) before the call under test.

Each scenario is a function of a `Ctx` (a package and the virtual device), so
tests/test_mutations.py runs the same scenarios against mutated copies of the
package: a dispatch, planner or hot-path mutant is caught by the first scenario
that fails on it.
"""

import re
import sys

import numpy as np
import pytest
import torch

import vgpu_support as S
from vgpu.serve import present_cpu

pytestmark = pytest.mark.vgpu
F32, BF16 = torch.float32, torch.bfloat16
STREAM = 0x5EED0  # the stream device_info reports: every launch must carry it
_VEC = re.compile(r"_x(\d+)_b\d+")


class Ctx:
    """One package (the real one or a mutated copy) on the virtual gfx950:
    counts entries into relu()'s general path and presets a stream."""

    def __init__(self, pkg, dev, mp):
        self.pkg, self.dev, self.mp = pkg, dev, mp
        self.relu = pkg.relu
        self.d = pkg._dispatch
        self.r = sys.modules[pkg.__name__ + "._relu"]
        self.state_module = sys.modules[pkg.__name__ + "._state"]
        self.state = self.state_module.STATE
        self.plan = sys.modules[pkg.__name__ + ".flash_relu_rocm.plan"]
        self.general = 0
        check = self.r._check

        def counted(*args, **kwargs):
            self.general += 1
            return check(*args, **kwargs)

        mp.setattr(self.r, "_check", counted)
        self.stream = dev.stream = STREAM  # what device_info reports, and what call() expects launches on
        self.state.reset()  # each scenario builds its own entries and loads its own modules
        self.entry = sys.modules[pkg.__name__ + "._compiled_entry"]
        present_cpu(dev, self.entry)  # this package's compiled entry sees the virtual device too

    def flydsl_calls(self):
        return sum(n for k, n in self.pkg.dispatch_stats().items() if k.startswith("flydsl/"))

    def tensors(self, n, dtype=F32, x_off=0, y_off=0, seed=0, kind="random"):
        """Guarded x (filled) and out, each `*_off` elements past a 16-byte boundary."""
        xbits = S.make_bits(kind, n, dtype, seed)
        x, xbuf = S.guarded_input(self.dev, xbits, dtype, offset_elems=x_off)
        out, obuf = self.dev.guarded((n,), dtype, offset_elems=y_off, name="out")
        return xbits, x, xbuf, out, obuf

    def checked(self, x, out, xbits, xbuf, obuf, dtype=F32, rung=None, hot=None):
        """relu(x, out=out) on guarded tensors, every vgpu check applied: out returned, bit-exact,
        written once, guards intact, counted once. hot=True: the hot path (the compiled entry)
        must serve it; False: the general path. Returns its launch records."""
        general, calls, before = self.general, self.flydsl_calls(), len(self.dev.launches)
        assert self.relu(x, out=out, rung=rung) is out
        self.dev.check()
        S.assert_bits(out, S.relu_bits(xbits, dtype))
        S.assert_written_once(self.dev, out)
        S.assert_guards(obuf, out)
        S.assert_guards(xbuf, x)
        assert self.flydsl_calls() == calls + 1, "the call must count once in dispatch_stats()"
        if hot is not None:
            took = "the hot path" if self.general == general else "the general path"
            assert (self.general == general) == hot, f"expected the {'hot' if hot else 'general'} path; took {took}"
        return self.dev.launches[before:]

    def call(self, n, dtype=F32, x_off=0, y_off=0, seed=0, hot=None, rung=None):
        """One relu(x, out=) on fresh guarded tensors (checked()), launched on the preset stream.
        Returns its launches."""
        xbits, x, xbuf, out, obuf = self.tensors(n, dtype, x_off, y_off, seed, kind="mixed")
        launched = self.checked(x, out, xbits, xbuf, obuf, dtype, rung, hot)
        assert launched, "a dense gfx950 tensor must take the kernel path"
        assert all(r.stream == self.stream for r in launched), [hex(r.stream) for r in launched]
        return launched

    def warm(self, n, dtype=F32, x_off=0, y_off=0, rung=None):
        """Cache the entry for (n, dtype, alignments): a first call, then a
        second one that must take the hot path."""
        self.call(n, dtype, x_off, y_off, seed=1, rung=rung)
        return self.call(n, dtype, x_off, y_off, seed=2, hot=True, rung=rung)


def run_scenario(scenario, pkg, dev, mp):
    """One scenario on the package as its test runs it: the kill switch and a forced rung unset,
    the compiled entry still loaded after it, served through again and the state reset whatever
    happened (the scenario files' tests share this)."""
    mp.delenv("RELU_FLYDSL_DISABLE", raising=False)
    mp.delenv("RELU_FLYDSL_RUNG", raising=False)
    try:
        scenario(Ctx(pkg, dev, mp))
        assert pkg._compiled_entry.status()["loaded"], "the scenario unloaded the compiled entry"
    finally:
        pkg._compiled_entry.use(True)
        pkg._state.STATE.reset()


def scenario_test(scenarios, known_bugs=None, raises=AssertionError):
    """The test of a scenario file: each of `scenarios` (name -> scenario) by run_scenario, those
    named in known_bugs (name -> the bug) expected to fail with `raises` (strict). Bound to a
    test_* name there, which pytest collects."""
    known_bugs = known_bugs or {}

    @pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=known_bugs[n], raises=raises,
                                                                               strict=True))
                                      if n in known_bugs else n for n in scenarios])
    def test(vgpu, monkeypatch, name):
        import relu_flydsl

        run_scenario(scenarios[name], relu_flydsl, vgpu, monkeypatch)

    return test


def _untouched(buf, before, what="out"):
    assert np.array_equal(buf.numpy(), before), f"{what} must be left byte for byte untouched"


def _error_taken(c):
    """A failed launch's error was taken from the HIP runtime (hipGetLastError
    reports nothing), so torch's next launch check does not trip on it."""
    pending = c.dev.lib.hipGetLastError()
    assert pending == 0, f"HIP error {pending} left pending after a failed launch"


def _vec(record):
    return int(_VEC.search(record.kernel)[1])


# ---- the scenarios -------------------------------------------------------
def overlap_in_bytes(c):
    """out partially overlaps x by more than numel BYTES but less than numel
    elements' bytes: ValueError from the hot path, nothing written."""
    n = 1024
    c.warm(n)
    buf, bbuf = c.dev.guarded((n + n // 2,), F32, name="x-and-out")
    buf.copy_(torch.randn(n + n // 2))
    # out starts n/2 elements (2n bytes) after x, or x after out: both still 16-byte aligned
    for x, out in ((buf[:n], buf[n // 2:]), (buf[n // 2:], buf[:n])):
        before, general, launches = bbuf.numpy().copy(), c.general, len(c.dev.launches)
        with pytest.raises(ValueError, match="overlaps"):
            c.relu(x, out=out)
        assert c.general == general, "the hot path must reject it (the entry is cached)"
        assert len(c.dev.launches) == launches
        _untouched(bbuf, before, "x and out")
    # adjacent, not overlapping: out starts right where x ends (and the reverse)
    buf, bbuf = c.dev.guarded((2 * n,), F32, name="x-then-out")
    xbits = S.make_bits("random", n, F32, seed=15)
    for x, out in ((buf[:n], buf[n:]), (buf[n:], buf[:n])):
        x.copy_(S.to_tensor(xbits, F32))
        general = c.general
        assert c.relu(x, out=out) is out
        assert c.general == general, "expected the hot path"
        S.assert_bits(out, S.relu_bits(xbits, F32))
    c.dev.check()


def in_place(c):
    """relu(x, out=x), with its entry cached: bit-exact in place on the hot path."""
    n = 1024
    x, xbuf = c.dev.guarded((n,), F32, name="x")
    for i, seed in enumerate((16, 17, 18)):
        xbits = S.make_bits("mixed", n, F32, seed)
        x.copy_(S.to_tensor(xbits, F32))
        general = c.general
        assert c.relu(x, out=x) is x
        c.dev.check()
        assert (c.general == general) == (i > 0), "the second and third calls take the hot path"
        S.assert_bits(x, S.relu_bits(xbits, F32))
        S.assert_guards(xbuf, x)


def other_device(c):
    """Tensors on device 1 while device 0 is current, with the entry for their
    size and alignment cached on device 0: correct results, the current device
    unchanged, and no launch of device 0's kernel for them: a kernel serving
    them runs on device 1, on device 1's stream (or the torch fallback serves them)."""
    n = 1024
    c.warm(n)
    c.dev.set_device_count(2)
    s1 = c.dev.create_stream(1)
    c.dev.stream = {0: STREAM, 1: s1}
    try:
        for seed in (3, 4):  # the second call finds whatever the first one cached
            xbits = S.make_bits("random", n, F32, seed)  # normal numbers: torch's result is the bit rule's
            x, _ = c.dev.guarded((n,), F32, name="x1", device=1)
            x.copy_(S.to_tensor(xbits, F32))
            out, obuf = c.dev.guarded((n,), F32, name="out1", device=1)
            launches = len(c.dev.launches)
            assert c.relu(x, out=out) is out
            c.dev.check()
            assert c.dev.get_device() == 0, "the current device must be unchanged"
            wrong = [(r.kernel, r.device, hex(r.stream)) for r in c.dev.launches[launches:]
                     if r.device != 1 or r.stream != s1]
            assert not wrong, f"launched for device 1's tensor off device 1 or its stream: {wrong}"
            S.assert_bits(out, S.relu_bits(xbits, F32))
            S.assert_guards(obuf, out)
    finally:
        c.dev.stream = STREAM
        c.dev.destroy_stream(s1)


def out_on_another_device(c):
    """relu(x, out=y) with x on device 0 and y on device 1, the entry for their size cached
    on device 0: ValueError naming the devices, as torch's own check gives on hardware,
    nothing launched or written, on either path."""
    n = 1024
    c.warm(n)
    c.dev.set_device_count(2)
    for seed in (5, 6):
        _, x, _, _, _ = c.tensors(n, seed=seed)
        out, obuf = c.dev.guarded((n,), F32, name="out1", device=1)
        before, launches = obuf.numpy().copy(), len(c.dev.launches)
        with pytest.raises(ValueError, match="device"):
            c.relu(x, out=out)
        assert len(c.dev.launches) == launches
        _untouched(obuf, before)


def null_stream(c):
    """torch's default stream, the null stream, where every launch takes
    hipDrvLaunchKernelEx with a launch config: a first call of a size whose
    plan has many blocks, then its hot-path repeat, are bit-exact with guards
    intact and launch on stream 0 with the plan's grid."""
    c.stream = c.dev.stream = 0
    try:
        n = 8 * 4257
        grid = c.plan.plan(c.pkg._dispatch.get_rung("v5"), "float32", n, 0, 0).launches[0].grid
        assert grid > 1
        for hot in (False, True):
            launched = c.call(n, seed=12 + hot, hot=hot, rung="v5")
            assert [r.grid for r in launched] == [(grid, 1, 1)], [r.grid for r in launched]
            state = c.pkg._launch.THREAD.state
            assert c.pkg._launch.launch_ex is not None and state[4], "the null stream's launch is hipDrvLaunchKernelEx"
    finally:
        c.stream = c.dev.stream = STREAM


def _split(c, rung=None):
    """Stands in for > 2^31 elements (max_index lowered): f32 6144 elements in
    3 launches. Returns n and each launch's (byte offset into x, bytes)."""
    c.mp.setattr(c.plan, "LIMITS", c.plan.LaunchLimits(max_index=3000, max_buffer_bytes=2**32 - 1))
    c.state.reset()
    n = 6144
    c.call(n, seed=1, rung=rung)  # first launches: module load (and canary, when on)
    launched = c.call(n, seed=2, rung=rung)  # the entry's launches again
    assert len(launched) == 3
    chunks = [(r.args[0] - launched[0].args[0], r.args[1] * 4) for r in launched]
    assert sum(nb for _, nb in chunks) == n * 4, chunks
    return n, chunks


def split_launch_fails_in_the_middle(c):
    """The middle launch of a split faults (its slice of x is not mapped):
    RuntimeError from that call, and the next good call is clean."""
    n, chunks = _split(c)
    xb = torch.randn(n)
    for i in (0, 2):  # chunk 1 unmapped
        c.dev.register(xb.data_ptr() + chunks[i][0], chunks[i][1], name=f"x-chunk{i}", owner=xb)
    out, _ = c.dev.guarded((n,), F32, name="out")
    launches = len(c.dev.launches)
    with pytest.raises(RuntimeError, match="launch failed"):
        c.relu(xb, out=out)
    failed = [r.result != 0 for r in c.dev.launches[launches:]]
    assert failed == [False, True, False] and len(c.dev.errors) == 1, (failed, c.dev.errors)
    _error_taken(c)
    c.dev.reset()
    c.call(n, seed=4)  # no error left behind for the next call
    c.call(n, seed=5)


def split_launch_fails_twice(c):
    """Two launches of one split fail: the call raises, and neither error is
    left behind for the next call."""
    n, chunks = _split(c)
    xb = torch.randn(n)
    c.dev.register(xb.data_ptr(), chunks[0][1], name="x-chunk0", owner=xb)  # chunks 1 and 2 unmapped
    out, _ = c.dev.guarded((n,), F32, name="out")
    launches = len(c.dev.launches)
    with pytest.raises(RuntimeError, match="launch failed"):
        c.relu(xb, out=out)
    failed = [r.result != 0 for r in c.dev.launches[launches:]]
    assert failed == [False, True, True], (failed, c.dev.errors)
    c.dev.reset()
    c.call(n, seed=4)


def layer_failed_launch(c):
    """relu(x) without out= (layers.ReLU's path) after its first call: a failed
    launch raises on that call, not on the next."""
    n = 1024
    layer = c.pkg.layers.ReLU()
    xbits = S.make_bits("mixed", n, F32, seed=6)
    x, _ = S.guarded_input(c.dev, xbits, F32)
    keep = []  # outputs stay alive: their addresses are not reused
    with torch.no_grad():
        for i in range(3):
            c.dev.fresh_output(n * 4, name=f"y{i}")
            if i == 1:
                c.dev.fail_launches(1)
                with pytest.raises(RuntimeError, match="launch failed"):
                    layer(x)
                continue
            y = layer(x)
            keep.append(y)
            c.dev.check()
            S.assert_bits(y, S.relu_bits(xbits, F32))
            assert c.dev.launches[-1].stream == STREAM
    assert c.flydsl_calls() == 2


def hot_failed_launch(c):
    """A failed launch on the hot path raises on that call; the next is clean."""
    n = 1024
    c.warm(n)
    _, x, _, out, _ = c.tensors(n, seed=7)
    general = c.general
    c.dev.fail_launches(1)
    with pytest.raises(RuntimeError, match="launch failed"):
        c.relu(x, out=out)
    assert c.general == general, "expected the hot path"
    _error_taken(c)
    c.call(n, seed=8, hot=True)


def first_launch_fails(c):
    """The first launch of a new size (kernel already loaded and used)
    fails: RuntimeError on that call; the next call is clean."""
    c.warm(1024)
    _, x, _, out, _ = c.tensors(2048, seed=9)
    c.dev.fail_launches(1)
    with pytest.raises(RuntimeError, match="launch failed"):
        c.relu(x, out=out)
    _error_taken(c)
    c.call(2048, seed=10)
    c.call(2048, seed=11, hot=True)


def _transposed(c, a, b, dtype=F32, name="t"):
    """(a, b) dense, not contiguous, strides (1, a): torch.empty_like of a transposed view."""
    flat, buf = c.dev.guarded((a * b,), dtype, name=name)
    t = flat.view(b, a).t()
    assert t.stride() == torch.empty_like(torch.empty(b, a, dtype=dtype).t()).stride() == (1, a)
    return t, buf


def dense_noncontiguous_out(c):
    """Contiguous x, out = a dense non-contiguous layout: torch's result in out's
    layout (the entry for a contiguous out of that size is cached)."""
    a, b = 24, 40
    c.warm(a * b)
    xbits = S.make_bits("random", a * b, F32, seed=11)
    x, _ = S.guarded_input(c.dev, xbits, F32)
    x = x.view(a, b)
    out, obuf = _transposed(c, a, b, name="out")
    launches = len(c.dev.launches)
    assert c.relu(x, out=out) is out
    c.dev.check()
    assert out.stride() == (1, a)
    assert np.array_equal(S.tensor_bits(out), S.tensor_bits(torch.relu(x))), "not torch's result in out's layout"
    assert c.dev.launches[launches:] == [], "no kernel serves a non-contiguous out"
    S.assert_guards(obuf, out.t())


def dense_noncontiguous_x(c):
    """x dense but not contiguous, out contiguous: torch's result."""
    a, b = 24, 40
    c.warm(a * b)
    x, _ = _transposed(c, a, b, name="x")
    x.copy_(torch.randn(a, b))
    out, obuf = c.dev.guarded((a, b), F32, name="out")
    launches = len(c.dev.launches)
    c.relu(x, out=out)
    c.dev.check()
    assert np.array_equal(S.tensor_bits(out), S.tensor_bits(torch.relu(x))), "not torch's result"
    assert c.dev.launches[launches:] == []
    S.assert_guards(obuf, out)


def misaligned_out(c):
    """x 16-byte aligned, out not: the plan narrows the vector so neither
    pointer is accessed misaligned; first call and hot path alike. Checked on
    the launches (each pointer argument a multiple of vec * element size) and
    on the emulator's alignment records (every access naturally aligned; a
    misaligned one is also a device violation)."""
    for dtype, y_off, vec in ((F32, 1, 1), (F32, 2, 2), (BF16, 2, 2), (BF16, 4, 4)):
        esize = torch.empty((), dtype=dtype).element_size()
        c.warm(1024, dtype)  # the aligned entry (widest vector) is cached
        for hot in (False, True):
            for r in c.call(1024, dtype, y_off=y_off, seed=12, hot=hot):
                x_ptr, y_ptr = r.args[0], r.args[2]
                assert y_ptr % 16 == y_off * esize and x_ptr % 16 == 0, "test set-up"
                assert _vec(r) == vec, f"{dtype} out at +{y_off * esize} bytes: launched {r.kernel}, expected x{vec}"
                assert x_ptr % (vec * esize) == 0 and y_ptr % (vec * esize) == 0
                records = getattr(r, "alignment", None)  # instr -> (text, bytes, smallest alignment seen)
                if records is not None:
                    assert records and all(align >= nbytes for _, nbytes, align in records.values()), records


def hostile_out_on_the_hot_path(c):
    """With the entry for x's size cached, an out of another dtype or shape
    (same numel), or an x or out that requires grad, is rejected as on the
    general path: the error, nothing written, nothing launched."""
    n = 1024
    c.warm(n)
    cases = (
        ("dtype", lambda x: c.dev.guarded((n,), torch.float16, name="out16"), TypeError, "dtype"),
        ("shape", lambda x: c.dev.guarded((2, n // 2), F32, name="out2d"), ValueError, "shape"),
        ("x grad", lambda x, out: x.requires_grad_(), RuntimeError, "automatic differentiation"),
        ("out grad", lambda x, out: out.requires_grad_(), RuntimeError, "automatic differentiation"),
    )
    for what, make, exc, match in cases:
        _, x, _, out, obuf = c.tensors(n, seed=13)
        if "grad" in what:
            make(x, out)
        else:
            out, obuf = make(x)
        before, launches = obuf.numpy().copy(), len(c.dev.launches)
        with pytest.raises(exc, match=match):
            c.relu(x, out=out)
        _untouched(obuf, before)
        assert len(c.dev.launches) == launches



def neg_out_on_the_hot_path(c):
    """With the entry for x's size cached, out= a neg-bit view of a fresh buffer (its memory
    holds -out): the general path takes the call, no launch, and out reads relu(x)."""
    n = 1024
    c.warm(n)
    _, x, _, out, obuf = c.tensors(n, seed=14)
    view = torch._neg_view(out)
    general, launches = c.general, len(c.dev.launches)
    assert c.relu(x, out=view) is view
    assert c.general == general + 1, "the general path decides"
    assert c.dev.launches[launches:] == [], "no kernel writes this view's raw memory"
    want = torch._neg_view(torch.empty(n))
    torch.clamp_min(x, 0, out=want)  # torch's own answer to the same call
    S.assert_bits(view.resolve_neg(), S.tensor_bits(want.resolve_neg()))
    c.dev.check()

def kill_switch_on_the_hot_path(c):
    """RELU_FLYDSL_DISABLE=1 set in a running process stops the hot path's
    cached entry from launching, and the entry's own torch fallback on another
    arch (device 1, a gfx942) does not count that device's reason on the first
    call after it was set: the kill switch first, as the general path counts it;
    unset, the kernel serves again."""
    n = 1024
    c.warm(n)
    c.dev.set_device_count(2)
    info = c.d.device_info
    c.mp.setattr(c.d, "device_info", lambda t: info(t)._replace(arch="gfx942") if info(t).index == 1 else info(t))
    x1, _ = c.dev.guarded((n,), F32, name="x1", device=1)
    out1, _ = c.dev.guarded((n,), F32, name="out1", device=1)
    for _ in range(2):  # device 1 learned: its fallback is the entry's
        c.relu(x1, out=out1)
    c.mp.setenv("RELU_FLYDSL_DISABLE", "1")
    before = c.pkg.dispatch_stats()
    c.relu(x1, out=out1)  # the first call after it was set
    after = c.pkg.dispatch_stats()
    assert {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)} == \
        {"fallback/disabled by RELU_FLYDSL_DISABLE": 1}, (before, after)
    _, x, _, out, _ = c.tensors(n, seed=14)
    launches = len(c.dev.launches)
    c.relu(x, out=out)
    assert c.dev.launches[launches:] == [] and torch.equal(out, torch.relu(x))
    c.mp.delenv("RELU_FLYDSL_DISABLE")
    c.warm(n)


def other_arch(c):
    """A tensor on a gfx942 (device 1) with the gfx950 entry for its size cached on
    device 0: torch's result, no launch (the kernels are built for gfx950 only)."""
    n = 1024
    c.warm(n)
    c.dev.set_device_count(2)
    info = c.d.device_info
    c.mp.setattr(c.d, "device_info", lambda t: info(t)._replace(arch="gfx942") if info(t).index == 1 else info(t))
    for seed in (19, 20, 21):  # first call, then whatever it cached
        x, _ = c.dev.guarded((n,), F32, name="x", device=1)
        x.copy_(torch.randn(n, generator=torch.Generator().manual_seed(seed)))
        out, obuf = c.dev.guarded((n,), F32, name="out", device=1)
        launches, general = len(c.dev.launches), c.general
        assert c.relu(x, out=out) is out
        assert c.dev.launches[launches:] == [], "a gfx950 kernel launched on a gfx942"
        if seed > 19:  # device 1 learned: its fallback served by the compiled entry
            assert c.general == general, "the gfx942's fallback left to the general path"
        assert torch.equal(out, torch.relu(x))
        S.assert_guards(obuf, out)


def entries_bounded(c):
    """A process that sees endless sizes keeps a bounded number of launch
    entries, hot-path entries included (here the bound is lowered to 3)."""
    c.mp.setattr(c.state_module, "ENTRIES_MAX", 3)
    c.state.refresh()  # the compiled entry takes its bound from here
    for n in (64, 128, 192, 256, 320, 384):
        c.call(n, seed=n)
        replayed = c.state.replay.entries() if c.state.replay is not None else 0
        assert len(c.state.entries) <= 3 and replayed <= 3, (len(c.state.entries), replayed)
    c.call(384, seed=1, hot=True)  # the newest entry survives


def buffer_split_by_bytes(c):
    """Stands in for > 4 GiB on the buffer rungs: only the descriptor's byte
    limit is lowered, and every launch stays within it."""
    c.mp.setattr(c.plan, "LIMITS", c.plan.LaunchLimits(max_index=2**31 - 1, max_buffer_bytes=10000))
    c.state.reset()
    for seed in (21, 22):  # first launches, then the cached entry
        launched = c.call(4096, seed=seed, rung="v5")
        assert len(launched) >= 2 and all(r.args[1] * 4 <= 10000 for r in launched), \
            [r.args[1] for r in launched]


def corrupt_object(c):
    """One byte of a shipped code object flipped (in a copy of code_objects/):
    relu() warns once, naming the file, and returns torch's result on every
    call without launching that kernel; another kernel still serves."""
    import shutil
    import tempfile
    import warnings
    from pathlib import Path

    objects = c.pkg._objects
    tmp = Path(tempfile.mkdtemp(prefix="relu-objects-"))
    try:
        shutil.copytree(objects.OBJECTS_DIR, tmp / "code_objects")
        name = objects.entry("v5", "float32", 4)["file"]
        path = tmp / "code_objects" / name
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        c.mp.setattr(objects, "OBJECTS_DIR", tmp / "code_objects")
        c.state.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for seed in (23, 24):  # the first call, then whatever it cached
                _, x, _, out, obuf = c.tensors(1024, seed=seed)
                launches = len(c.dev.launches)
                assert c.relu(x, out=out, rung="v5") is out
                assert c.dev.launches[launches:] == [], "a corrupt code object was launched"
                assert torch.equal(out, torch.relu(x))
                S.assert_guards(obuf, out)
        said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(said) == 1 and name in said[0], said
        fallbacks = {k: n for k, n in c.pkg.dispatch_stats().items() if k.startswith("fallback/")}
        assert list(fallbacks.values()) == [2] and name in next(iter(fallbacks)), fallbacks
        c.call(1024, BF16, rung="v5")  # v5/bfloat16/x8 is intact: it serves
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SCENARIOS = {f.__name__: f for f in (
    overlap_in_bytes, other_device, out_on_another_device, split_launch_fails_in_the_middle, split_launch_fails_twice,
    layer_failed_launch, hot_failed_launch, first_launch_fails, dense_noncontiguous_out,
    dense_noncontiguous_x, misaligned_out, hostile_out_on_the_hot_path, neg_out_on_the_hot_path,
    kill_switch_on_the_hot_path,
    in_place, other_arch, entries_bounded, buffer_split_by_bytes, corrupt_object, null_stream,
)}


# Scenarios that expose a bug not fixed yet: expected to fail (strict), and left
# out of the mutation check's soundness run until fixed.
KNOWN_BUGS = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_BUGS[n], raises=RuntimeError, strict=True))
                                  if n in KNOWN_BUGS else n for n in SCENARIOS])
def test_hot_path(vgpu, monkeypatch, name):
    import relu_flydsl

    vgpu.errors_expected = name.startswith("split_launch_fails")  # the faults it injects; it checks them itself
    run_scenario(SCENARIOS[name], relu_flydsl, vgpu, monkeypatch)
