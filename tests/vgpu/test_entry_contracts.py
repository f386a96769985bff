"""The contracts torch keeps around a result, kept by the compiled entry (_compiled_entry.c) on the
virtual gfx950: version counters (out= and in place bump them once, as torch's clamp_min(out=) and
relu_ do; a tensor saved for backward and overwritten makes backward raise), out's device type, the
settings read again after anything that can run Python and before the launch, unload() in flight,
every dense layout replayed, the probes before libtorch's functions are trusted, and the error
paths of the C code (a failed allocation, a __bool__ that raises).

Each scenario is a function of test_hot_path's `Ctx`, so tests/test_mutations.py runs them
against mutated copies of the package (tests/mutants_entry.py names them)."""

import ctypes
import sys
import sysconfig
import warnings
import weakref

import numpy as np
import pytest
import torch

import vgpu_support as S
from test_entry_learn import _answers_differ_on_device_1
from test_hot_path import F32, STREAM, scenario_test
from vgpu.serve import DEVICE_OF, STREAM_OF, present_cpu

pytestmark = pytest.mark.vgpu
N = 1024
DISABLE, RUNG = "RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG"
KILLED = "fallback/disabled by RELU_FLYDSL_DISABLE"
NO_DEVICE = "fallback/not a ROCm device"


def _hot(c, fn):
    """fn()'s result, asserting the compiled entry served it (relu()'s general path not entered)."""
    general = c.general
    result = fn()
    assert c.general == general, "expected the compiled entry to serve this call"
    return result


def _delta(before, after):
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def _torch_version_bump(make, op):
    """How far torch's own op moves the version counter of the out it writes (CPU tensors)."""
    out = make()
    before = out._version
    op(out)
    return out._version - before


# ---- version counters -----------------------------------------------------
def entry_bumps_versions_as_torch(c):
    """On the compiled entry: relu(x, out=y) bumps y's version counter (and its base's) exactly as
    torch.clamp_min(x, 0, out=y) does, relu(x, out=x) bumps x's as torch.relu_ does, and relu(x)'s
    new output starts where torch.relu(x)'s does."""
    want_out = _torch_version_bump(lambda: torch.empty(N), lambda o: torch.clamp_min(torch.zeros(N), 0, out=o))
    want_in_place = _torch_version_bump(lambda: torch.zeros(N), torch.relu_)
    assert want_out == want_in_place == 1, (want_out, want_in_place)
    c.warm(N)
    for seed in (1, 2):
        xbits, x, _, out, _ = c.tensors(N, seed=seed)
        view = out[:]  # a view shares its base's counter
        before = (out._version, view._version)
        _hot(c, lambda: c.relu(x, out=view))
        assert (out._version - before[0], view._version - before[1]) == (want_out, want_out), \
            f"out's version moved by {out._version - before[0]}, torch's out= moves it by {want_out}"
        S.assert_bits(out, S.relu_bits(xbits, F32))
    xbits, x, xbuf, _, _ = c.tensors(N, seed=3)
    c.relu(x, out=x)  # in place: its own entry (out's alignment is x's)
    for seed in (4, 5):
        x.copy_(S.to_tensor(S.make_bits("mixed", N, F32, seed), F32))
        before = x._version
        _hot(c, lambda: c.relu(x, out=x))
        assert x._version - before == want_in_place, f"relu(x, out=x) moved x's version by {x._version - before}"
    c.dev.fresh_output(N * 4, name="y")
    y = _hot(c, lambda: c.relu(x))
    assert y._version == torch.relu(torch.zeros(N))._version
    c.dev.check()


def entry_saved_tensor_overwritten(c):
    """s = a.sigmoid() is saved for backward; relu(x, out=s.detach()) overwrites it on the compiled
    entry: backward raises torch's "modified by an inplace operation" error, as it does after
    torch.clamp_min(x, 0, out=s.detach()), instead of a silently wrong gradient."""
    ref = torch.randn(N, requires_grad=True)
    t = ref.sigmoid()
    torch.clamp_min(torch.randn(N), 0, out=t.detach())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        t.sum().backward()
    c.warm(N)
    a, _ = c.dev.guarded((N,), F32, name="a")
    a.copy_(torch.randn(N))
    a.requires_grad_()
    s = a.sigmoid()
    assert s.data_ptr() & 15 == 0, "test set-up: the entry is ready for aligned pointers"
    c.dev.register(s.detach(), name="s")
    xbits, x, _, _, _ = c.tensors(N, seed=6)
    _hot(c, lambda: c.relu(x, out=s.detach()))
    S.assert_bits(s.detach(), S.relu_bits(xbits, F32))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.sum().backward()
    c.dev.check()


def _off_device(c, arch=None):
    """Every tensor on no ROCm device, or on a ROCm device of `arch` (device 0)."""
    if arch is None:
        c.mp.setattr(c.d, "device_info", lambda t: None)
        c.entry.present_cpu(False)
    else:
        c.mp.setattr(c.d, "device_info", lambda t: c.d.DeviceInfo(arch, c.stream))
        present_cpu(c.dev, c.entry)


def entry_fallback_bumps_once(c):
    """The entry's own torch fallback (no ROCm device, another arch): torch's clamp_min bumps out
    there, and the entry adds nothing: out's and x's versions move exactly as torch's own call
    moves them."""
    want = _torch_version_bump(lambda: torch.empty(64), lambda o: torch.clamp_min(torch.zeros(64), 0, out=o))
    for arch in (None, "gfx942"):
        _off_device(c, arch)
        x = torch.randn(64)
        c.relu(x, out=torch.empty(64))  # learns the device (other arch)
        for _ in range(2):
            y = torch.empty(64)
            before = y._version
            _hot(c, lambda: c.relu(x, out=y))
            assert y._version - before == want, (arch, y._version - before, want)
            z = x.clone()
            before = z._version
            _hot(c, lambda: c.relu(z, out=z))
            assert z._version - before == want, (arch, z._version - before, want)
    assert c.dev.launches == []


# ---- out's device ------------------------------------------------------------
def _present_host(c, host):
    """The entry sees the memory of the tensors in `host` as host memory (a CPU tensor beside the
    device's), the rest as the virtual device's; device_info says the same (no ROCm device)."""
    spans = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in host]

    def on_host(pointer):
        return any(lo <= pointer < hi for lo, hi in spans)

    device_of = DEVICE_OF(lambda pointer: -1 if on_host(pointer) else c.dev.device_of(pointer, 0))
    stream_of = STREAM_OF(lambda index: c.stream)
    c.entry.present_cpu(True, ctypes.cast(device_of, ctypes.c_void_p).value,
                        ctypes.cast(stream_of, ctypes.c_void_p).value)
    c.entry.presenting = (device_of, stream_of)
    info = c.d.device_info
    c.mp.setattr(c.d, "device_info", lambda t: None if on_host(t.data_ptr()) else info(t))


def out_on_the_host(c):
    """x on the device with its entry ready, out a host tensor of the same size, dtype and
    alignment (on hardware: relu(x_on_gpu0, out=cpu_tensor)): the entry leaves the call to the
    general path, which raises its device error; nothing launched, out untouched."""
    host = torch.full((N,), 7.0)
    assert host.data_ptr() & 15 == 0
    _present_host(c, [host])
    c.warm(N)
    for seed in (1, 2):
        _, x, _, _, _ = c.tensors(N, seed=seed)
        general, launches = c.general, len(c.dev.launches)
        with pytest.raises(ValueError, match="device"):
            c.relu(x, out=host)
        assert c.general == general + 1, "the general path decides"
        assert c.dev.launches[launches:] == [], "the kernel launched into host memory"
        assert torch.equal(host, torch.full((N,), 7.0)) and host._version == 0
    present_cpu(c.dev, c.entry)


# ---- settings in flight ------------------------------------------------------
def _allocating_with(c, during):
    """relu(x) allocates with torch.empty_like, which runs during(x) (once) before it allocates."""
    assert c.entry.use_shim(False).startswith("torch.empty_like")
    done = []

    def empty_like(t, *args, **kwargs):
        if not done:
            done.append(t)
            during(t)
        return torch.empty_like(t, *args, **kwargs)

    c.entry._init(c.entry._loaded, empty_like=empty_like)
    return done


def _restore_allocation(c):
    c.entry._init(c.entry._loaded)
    c.entry.use_shim(True)


def _relu_x(c, xbits, x, dtype=F32):
    c.dev.fresh_output(x.numel() * x.element_size())
    launches = len(c.dev.launches)
    y = c.relu(x)
    S.assert_bits(y, S.relu_bits(xbits, dtype))
    return y, c.dev.launches[launches:]


def settings_read_again_before_the_launch(c):
    """Settings changed while relu(x) allocates (torch.empty_like runs Python), with its entry
    ready: the call is decided again under the new ones. The kill switch set there, alone or with
    another call counted under it meanwhile: no launch, counted as the kill switch. A forced rung
    set there (another call reading it meanwhile): the new rung's kernel."""
    other = c.tensors(N // 2, seed=9)
    kept = []  # relu(x)'s outputs stay alive: their memory stays registered, never handed out again
    for case in ("kill switch", "kill switch, another call", "forced rung, another call"):
        c.mp.delenv(DISABLE, raising=False)
        c.mp.delenv(RUNG, raising=False)
        c.state.refresh()
        xbits = S.make_bits("mixed", N, F32, 1)
        x, _ = S.guarded_input(c.dev, xbits, F32)
        kept += [_relu_x(c, xbits, x)[0], _hot(c, lambda: _relu_x(c, xbits, x)[0])]  # made ready, then replayed

        def during(t):
            c.mp.setenv(*((RUNG, "v3") if "rung" in case else (DISABLE, "1")))
            if "another call" in case:
                c.relu(other[1], out=other[3])

        _allocating_with(c, during)
        try:
            before, general = c.pkg.dispatch_stats(), c.general
            y, launched = _relu_x(c, xbits, x)
            kept.append(y)
            stats = _delta(before, c.pkg.dispatch_stats())
        finally:
            _restore_allocation(c)
        assert c.general > general, (case, "the general path decides again")
        if "rung" in case:
            assert [r.kernel for r in launched] and all("v3" in r.kernel for r in launched), \
                (case, [r.kernel for r in launched])
        else:
            assert launched == [], (case, "a kernel launched after RELU_FLYDSL_DISABLE=1 was set")
            assert stats.get(KILLED) == (2 if "another" in case else 1) and not any(
                k.startswith("flydsl/") for k in stats), (case, stats)
        c.dev.check()


def settings_read_again_after_a_callback(c):
    """The stand-in's stream query (a Python callback) sets the kill switch while relu(x, out=y)
    is on the entry: no launch, counted as the kill switch."""
    c.warm(N)
    flip = []

    def stream(index):
        if flip:
            flip.clear()
            c.mp.setenv(DISABLE, "1")
        return c.stream

    device_of = DEVICE_OF(lambda pointer: c.dev.device_of(pointer, 0))
    stream_of = STREAM_OF(stream)
    c.entry.present_cpu(True, ctypes.cast(device_of, ctypes.c_void_p).value,
                        ctypes.cast(stream_of, ctypes.c_void_p).value)
    c.entry.presenting = (device_of, stream_of)
    try:
        c.warm(N)
        xbits, x, _, out, _ = c.tensors(N, seed=3)
        before, launches = c.pkg.dispatch_stats(), len(c.dev.launches)
        flip.append(1)
        c.relu(x, out=out)
        assert c.dev.launches[launches:] == [], "a kernel launched after RELU_FLYDSL_DISABLE=1 was set"
        assert _delta(before, c.pkg.dispatch_stats()) == {KILLED: 1}
        S.assert_bits(out, S.tensor_bits(torch.relu(x)))
    finally:
        present_cpu(c.dev, c.entry)


def unload_in_flight(c):
    """unload() while a call already holds the entry's serve (fetched before it): that call is
    counted as the general path counts it (torch's kernel for a CPU tensor: "not a ROCm device"),
    never under the kill switch; a device tensor goes to the general path. status() names no
    device the entry serves after it stopped. STATE.reset() loads it again."""
    _, x, _, out, _ = c.tensors(N, seed=3)
    cpu, cpu_out = torch.randn(8), torch.empty(8)
    c.warm(N)
    assert c.entry.status()["devices"] == {0: None}
    serve = c.entry.SERVE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        c.entry.unload("test")
    status = c.entry.status()
    assert not status["loaded"] and status["devices"] == {}, status
    before, launches = c.pkg.dispatch_stats(), len(c.dev.launches)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(c.d, "device_info", lambda t: None)
        c.entry._loaded.present_cpu(False, None, None)  # the CPU tensor is host memory
        got = [serve(cpu, None, None), serve(cpu, cpu_out, None)]
        present_cpu(c.dev, c.entry)
    got.append(serve(x, out, None))
    assert got[2] is None, "a device tensor in flight after unload() goes to the general path"
    for y in got[:2]:
        assert y is None or np.array_equal(S.tensor_bits(y), S.tensor_bits(torch.relu(cpu)))
    counted = _delta(before, c.pkg.dispatch_stats())
    assert counted == {NO_DEVICE: sum(y is not None for y in got)}, f"in flight after unload(): counted {counted}"
    assert c.dev.launches[launches:] == []
    c.state.reset()
    present_cpu(c.dev, c.entry)


# ---- dense layouts --------------------------------------------------------------
# (name, numel, make(flat) -> a dense view of a flat buffer of numel elements): every dense dimension
# order the entry must replay, none of them contiguous
LAYOUTS = (
    ("transposed", 1024, lambda f: f.view(64, 16).t()),
    ("channels_last", 1024, lambda f: f.view(2, 8, 16, 4).permute(0, 3, 1, 2)),
    ("channels_last, batch 1", 512, lambda f: f.view(1, 8, 8, 8).permute(0, 3, 1, 2)),
    ("3-D permutation", 1024, lambda f: f.view(8, 16, 8).permute(2, 0, 1)),
    ("size-1 dimension, odd stride", 1024, lambda f: f.as_strided((32, 1, 32), (1, 5, 32))),
)


def _flat(t):
    """A dense tensor's memory as one span (it starts at its data pointer)."""
    return t.as_strided((t.numel(),), (1,))


def dense_layouts_replayed(c):
    """Every dense layout with out of x's strides, out=x in place, and relu(x) (its output with
    x's strides, as torch.empty_like gives): a first call on the general path, then the compiled
    entry, bit-exact, guards intact, out's version bumped. The layout is not part of the entry's
    key: an entry made by a contiguous call of that size serves them too. A layout that is not
    dense (in place on every other element) stays torch's: no launch, torch's values."""
    kept = []  # relu(x)'s outputs stay alive: their memory stays registered, never handed out again
    for name, n, make in LAYOUTS:
        c.state.refresh()  # no entry ready: the layout's first call is the general path's
        for seed in (1, 2, 3):
            hot = seed > 1
            xbits = S.make_bits("mixed", n, F32, seed)
            xflat, xbuf = S.guarded_input(c.dev, xbits, F32)
            x = make(xflat)
            assert not x.is_contiguous() and c.d.dense(x), name
            yflat, ybuf = c.dev.guarded((n,), F32, name="out")
            out = make(yflat)
            takes = c.pkg._status._entry_takes_layout  # what explain() says
            assert takes(x, out) and takes(x, None), name
            general, version = c.general, out._version
            assert c.relu(x, out=out) is out
            assert (c.general == general) == hot, (name, seed, "expected the entry" if hot else "the general path")
            if hot:  # (the general path's own bump is its own)
                assert out._version == version + 1, name
            S.assert_bits(yflat, S.relu_bits(xbits, F32))
            S.assert_written_once(c.dev, yflat)
            S.assert_guards(ybuf, yflat)
            S.assert_guards(xbuf, xflat)
            if not hot:
                continue
            version = x._version
            _hot(c, lambda: c.relu(x, out=x))
            assert x._version == version + 1, name
            S.assert_bits(xflat, S.relu_bits(S.relu_bits(xbits, F32), F32))
            x = make(S.guarded_input(c.dev, xbits, F32)[0])
            c.dev.fresh_output(n * 4)
            y = _hot(c, lambda: c.relu(x))
            kept.append(y)
            assert y.stride() == x.stride() == torch.empty_like(x).stride(), (name, y.stride())
            S.assert_bits(_flat(y), S.relu_bits(xbits, F32))
            c.dev.check()
        c.state.refresh()
        c.warm(n)  # a contiguous call's entry
        xbits, x, _, out, _ = c.tensors(n, seed=4)
        _hot(c, lambda: c.relu(make(x), out=make(out)))
        S.assert_bits(out, S.relu_bits(xbits, F32))
    # not dense: every other element of a buffer, in place
    c.warm(N)
    for seed in (5, 6):
        bits = S.make_bits("mixed", 2 * N, F32, seed)
        base, bbuf = S.guarded_input(c.dev, bits, F32, name="base")
        x = base[::2]
        takes = c.pkg._status._entry_takes_layout
        assert not takes(x, x) and not takes(x, None)
        want = torch.relu(x)
        launches, general = len(c.dev.launches), c.general
        assert c.relu(x, out=x) is x
        assert c.general == general + 1 and c.dev.launches[launches:] == [], "a layout that is not dense is torch's"
        assert np.array_equal(S.tensor_bits(x), S.tensor_bits(want))
        assert np.array_equal(S.tensor_bits(base[1::2]), bits[1::2]), "the elements between were written"
        S.assert_guards(bbuf, base)


def same_address_other_strides(c):
    """out at x's address in other strides (a size-1 dimension's) is not in place: torch's partial
    overlap, ValueError from the entry as from the general path, nothing launched or written."""
    buf, bbuf = c.dev.guarded((N,), F32, name="x-and-out")
    x = buf.view(1, N)
    c.warm(N)
    c.relu(x, out=x)
    _hot(c, lambda: c.relu(x, out=x))  # the in-place entry is ready
    out = buf.as_strided((1, N), (99, 1))
    assert x.is_contiguous() and out.is_contiguous() and out.stride() != x.stride()
    for _ in range(2):
        before, launches = bbuf.numpy().copy(), len(c.dev.launches)
        with pytest.raises(ValueError, match="overlaps"):
            c.relu(x, out=out)
        assert c.dev.launches[launches:] == [] and np.array_equal(bbuf.numpy(), before)


# ---- the null stream, the table restarting mid-call ---------------------------------
def null_stream_launch_from_the_copy(c):
    """On the null stream (hipDrvLaunchKernelEx, its launch config), relu(x)'s allocation adds
    entries until the table restarts (its bound lowered to 3): the call launches with its own
    entry's grid, copied before the allocation, not with whatever the slot then holds."""
    c.stream = c.dev.stream = 0
    c.mp.setattr(c.state_module, "ENTRIES_MAX", 3)
    c.state.refresh()
    try:
        n = 8 * 4257
        grid = c.plan.plan(c.pkg._dispatch.get_rung("v5"), "float32", n, 0, 0).launches[0].grid
        assert grid > 1
        xbits = S.make_bits("mixed", n, F32, 1)
        x, _ = S.guarded_input(c.dev, xbits, F32)
        kept = [_relu_x(c, xbits, x)[0], _relu_x(c, xbits, x)[0]]
        others = [c.tensors(size, seed=size) for size in (256, 512, 768, 1280)]

        def during(t):
            for _, ox, _, oout, _ in others:
                c.relu(ox, out=oout)

        _allocating_with(c, during)
        try:
            general = c.general
            restarts = c.state.replay.entries()
            y, launched = _relu_x(c, xbits, x)
            kept.append(y)
        finally:
            _restore_allocation(c)
        assert c.general == general + len(others), "the call itself was the entry's"
        assert c.state.replay.entries() < restarts + len(others), "the table did not restart"
        mine = [(r.grid, r.stream) for r in launched if r.args[0] == x.data_ptr()]
        assert mine == [((grid, 1, 1), 0)], mine
        c.dev.check()
    finally:
        c.stream = c.dev.stream = STREAM


def null_stream_query_not_trusted(c):
    """The entry's stream query answers the null stream where torch's current stream is another:
    the entry does not learn the device (no entry can be added there) and every call is the
    general path's, on torch's stream. Where torch's stream is the null stream too, it learns it."""
    device_of = DEVICE_OF(lambda pointer: c.dev.device_of(pointer, 0))
    stream_of = STREAM_OF(lambda index: 0)
    c.entry.present_cpu(True, ctypes.cast(device_of, ctypes.c_void_p).value,
                        ctypes.cast(stream_of, ctypes.c_void_p).value)
    c.entry.presenting = (device_of, stream_of)
    try:
        module, (code, bits) = c.entry._loaded, c.entry.DL_DTYPES[F32]
        hit = c.state.counter(("fallback", "arch gfx950")).hit
        entry = (0, code, bits, N, 0, 0, 0)
        for seed in (1, 2, 3):  # the first binds the HIP runtime into the entry, as on any first use
            xbits, x, _, out, _ = c.tensors(N, seed=seed)
            general, launches = c.general, len(c.dev.launches)
            assert c.relu(x, out=out) is out
            assert c.general == general + 1, "a device whose stream query is not torch's: the general path"
            assert [r.stream for r in c.dev.launches[launches:]] == [STREAM]
            S.assert_bits(out, S.relu_bits(xbits, F32))
        assert module.device(0, True, hit, STREAM) == 0  # not learned: torch's stream is another
        with pytest.raises(ValueError, match="known device"):
            module.add(*entry, 0x1000, 1, 128, hit, "rung v5, float32")
        assert module.device(0, True, hit, 0) == 0  # torch's stream is the null stream: learned
        module.add(*entry, 0x1000, 1, 128, hit, "rung v5, float32")
        assert module.has(*entry)
    finally:
        c.state.refresh()  # the made-up entry goes
        present_cpu(c.dev, c.entry)


# ---- relu(x)'s output not the entry's alignment -------------------------------------
def misaligned_fresh_output_freed(c):
    """relu(x) whose new output is not 16-byte aligned (an allocator that gives such addresses):
    the entry hands the call to the general path and drops that output, which is freed."""
    c.dev.fresh_output(N * 4)
    xbits, x, _, _, _ = c.tensors(N, seed=1, kind="mixed")
    kept = [_relu_x(c, xbits, x)[0], _relu_x(c, xbits, x)[0]]
    made = []  # (a weak reference to each misaligned output, its buffer)
    assert c.entry.use_shim(False).startswith("torch.empty_like")
    calls = []

    def empty_like(t, *args, **kwargs):
        calls.append(1)
        view, buf = c.dev.guarded(tuple(t.shape), t.dtype, offset_elems=1, name="misaligned")
        made.append((weakref.ref(view), buf))
        return view

    c.entry._init(c.entry._loaded, empty_like=empty_like)
    try:
        for _ in range(2):
            general = c.general
            y, launched = _relu_x(c, xbits, x)
            kept.append(y)
            assert c.general == general + 1 and launched, "the general path plans a misaligned output"
            assert made[-1][0]() is None, "the entry's misaligned output outlives the call"
    finally:
        _restore_allocation(c)
    assert len(calls) == 2


# ---- the stand-down warning -----------------------------------------------------------
def stand_down_warned_per_device(c):
    """Devices 1 and 2 stood down for the same reason (libtorch's answers differ from torch's for
    their tensors): a warning for each device, status() naming each."""
    c.dev.set_device_count(3)
    c.dev.stream = {0: STREAM, 1: STREAM + 1, 2: STREAM + 2}
    _answers_differ_on_device_1(c.entry, c.mp, devices=(1, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for device in (1, 2):
            for seed in (1, 2):
                xbits = S.make_bits("mixed", N, F32, seed)
                x, _ = c.dev.guarded((N,), F32, name="x", device=device)
                x.copy_(S.to_tensor(xbits, F32))
                out, _ = c.dev.guarded((N,), F32, name="out", device=device)
                c.relu(x, out=out)
                S.assert_bits(out, S.relu_bits(xbits, F32))
    devices = c.entry.status()["devices"]
    assert devices.get(1) and devices.get(1) == devices.get(2), devices
    said = [str(w.message) for w in caught if "compiled entry does not serve device" in str(w.message)]
    assert len(said) == 2 and "device 1" in said[0] and "device 2" in said[1], said


# ---- loading: the gate and the probes ------------------------------------------------
def _reloaded(c):
    """The shipped binary loaded again as the package loads it, presented to the virtual device."""
    status = c.entry.load()
    assert status["loaded"], status
    c.state.reset()
    present_cpu(c.dev, c.entry)


def free_threaded_build_not_loaded(c):
    """A free-threaded CPython build (sysconfig's Py_GIL_DISABLED) does not load the entry, even
    with the GIL enabled at run time (PYTHON_GIL=1); a GIL build loads it whatever it says."""
    get = sysconfig.get_config_var
    try:
        for gil_disabled, gil_now, loads in ((1, True, False), (1, False, False), (0, False, True)):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(sysconfig, "get_config_var", lambda name: gil_disabled if name == "Py_GIL_DISABLED"
                           else get(name))
                mp.setattr(sys, "_is_gil_enabled", lambda: gil_now, raising=False)
                status = c.entry.load()
            assert status["loaded"] == loads, (gil_disabled, gil_now, status)
            if not loads:
                assert "free-threaded" in status["reason"], status
    finally:
        _reloaded(c)


def bump_version_checked_before_load(c):
    """A bump_version that does not bump as torch's in-place op does (here another libtorch
    function of the same arguments), or none at all: the entry does not load, status() says why,
    and relu() serves from the general path."""
    try:
        for names, reason in (((c.entry.QUERIES[2],), "bump_version moved"), (("_Z12no_such_bumpv",), "not found")):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(c.entry, "BUMP", names)
                status = c.entry.load()
            assert not status["loaded"] and reason in status["reason"], status
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # "the compiled entry is not used"
                c.call(N, seed=len(reason))  # the general path serves
    finally:
        _reloaded(c)


class _Lib:
    """torch._C's handle with one function stood in for."""

    def __init__(self, lib, name, stand_in):
        self._lib, self._name, self._stand_in = lib, name, stand_in

    def __getattr__(self, name):
        return self._stand_in if name == self._name else getattr(self._lib, name)


EMPTY_STRIDED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                                 ctypes.c_void_p)


def shim_checked_before_use(c):
    """A C shim whose allocation is not torch.empty_like's (here: compact strides whatever it is
    asked): relu(x) allocates with torch.empty_like, status() says why, and relu(x) of a
    transposed x returns x's strides on the entry."""
    lib = c.entry._libtorch()
    real = lib.aoti_torch_empty_strided
    real.restype, real.argtypes = ctypes.c_int32, [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_int32, ctypes.c_int32,
                                                    ctypes.c_int32, ctypes.c_void_p]

    def compact(ndim, sizes, strides, dtype, device_type, device_index, handle):
        made, step = (ctypes.c_int64 * max(ndim, 1))(), 1
        for d in reversed(range(ndim)):
            made[d] = step
            step *= sizes[d]
        return real(ndim, sizes, made if ndim else strides, dtype, device_type, device_index, handle)

    stand_in = EMPTY_STRIDED(compact)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(c.entry, "_libtorch", lambda: _Lib(lib, c.entry.SHIM[0], stand_in))
        how = c.entry.use_shim(True)
    try:
        assert how.startswith("torch.empty_like: torch's C shim gave"), how
        flat, _ = c.dev.guarded((N,), F32, name="x")
        xbits = S.make_bits("mixed", N, F32, 3)
        flat.copy_(S.to_tensor(xbits, F32))
        x = flat.view(32, 32).t()
        kept = []
        for hot in (False, True):
            c.dev.fresh_output(N * 4)
            general = c.general
            y = c.relu(x)
            kept.append(y)
            assert (c.general == general) == hot and y.stride() == x.stride(), (hot, y.stride())
            S.assert_bits(_flat(y), S.relu_bits(xbits, F32))
    finally:
        c.entry.use_shim(True)


def layer_stack_convention_checked(c):
    """A getDynamicLayerStack that returns its vector by value (its caller passes the result's
    place, and gets it back) is refused by queries() before anything is bound."""
    module = c.entry._loaded
    lib = c.entry._libtorch()
    by_value = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda place: place)
    addresses = [c.entry._hip.address(getattr(lib, name)) for name in c.entry.QUERIES]
    addresses[1] = ctypes.cast(by_value, ctypes.c_void_p).value
    try:
        with pytest.raises(ValueError, match="by value"):
            module.queries(torch.Tensor, c.entry.TENSOR_AT, *addresses, c.entry._bump_address(lib))
    finally:
        c.entry._bind_queries(module)  # libtorch's own again, whatever happened
    c.warm(N)


# ---- the C error paths ------------------------------------------------------------------
class _Raises:
    def __bool__(self):
        raise ZeroDivisionError("a __bool__ that raises")


def truth_errors_raised(c):
    """clear(), device() and present_cpu() given a value whose truth raises: that error, raised
    (not a value returned with an exception set), nothing changed; the entry then serves on."""
    module = c.entry._loaded
    c.warm(N)
    hit = c.state.counter(("fallback", "arch gfx950")).hit
    for call in (lambda: module.clear((None, None, None), _Raises(), 4),
                 lambda: module.device(0, _Raises(), hit, STREAM),
                 lambda: module.present_cpu(_Raises(), None, None)):
        with pytest.raises(ZeroDivisionError):
            call()
    c.call(N, seed=3, hot=True)


def fallback_counter_on_failed_allocations(c):
    """The entry's torch fallback (relu(x, out=y) off any ROCm device), with each Python
    allocation of the call made to fail in turn (_testcapi.set_nomemory, free lists emptied
    first): a MemoryError or torch's result, and the counter's reference count unchanged."""
    import _testcapi

    _off_device(c)
    serve = c.entry._loaded.serve
    hit = c.state.lasting[c.state_module.NO_DEVICE].hit
    x, y = torch.randn(16), torch.empty(16)
    serve(x, y, None)
    refs, failed = sys.getrefcount(hit), 0
    for k in range(40):
        held = [(i, -i) for i in range(2100)], [{} for _ in range(100)]  # tuple and dict free lists empty
        _testcapi.set_nomemory(k, k + 1)
        try:
            serve(x, y, None)
        except MemoryError:
            failed += 1
        finally:
            _testcapi.remove_mem_hooks()
        del held
        assert sys.getrefcount(hit) == refs, f"the counter's references grew when allocation {k} failed"
    assert failed, "no allocation of the fallback failed"


SCENARIOS = {f.__name__: f for f in (
    entry_bumps_versions_as_torch, entry_saved_tensor_overwritten, entry_fallback_bumps_once, out_on_the_host,
    settings_read_again_before_the_launch, settings_read_again_after_a_callback, unload_in_flight,
    dense_layouts_replayed, same_address_other_strides, null_stream_launch_from_the_copy,
    null_stream_query_not_trusted, misaligned_fresh_output_freed, stand_down_warned_per_device,
    free_threaded_build_not_loaded, bump_version_checked_before_load, shim_checked_before_use,
    layer_stack_convention_checked, truth_errors_raised, fallback_counter_on_failed_allocations,
)}

test_entry_contracts = scenario_test(SCENARIOS)
