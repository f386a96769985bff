"""torch's OpInfo contracts for relu, held on the kernel path of the virtual gfx950.

The `nn.functional.relu` OpInfo of the installed torch (tests/opinfo_support.py) supplies the
samples, dtypes and flags; the checks are those torch's test/test_ops.py (TestCommon,
TestMathBits), test_ops_gradients.py and test_ops_fwd_gradients.py make for an op with those
flags, written here for relu_flydsl's three forms: relu(x), relu(x, out=y) and relu(x, out=x).
torch's own relu has no out= in that OpInfo (supports_out=False): the out= forms are held to
torch's relu with an out, `torch.ops.aten.relu.out`, and the in-place one to `torch.relu_`.

Each call gives torch's result or torch's error. Where torch would resize or cast out= and the
package refuses by design (docs/semantics.md says so, and test_documented_refusals checks that it
does), the documented error, with nothing written, stands in for torch's result. Results the
kernel makes are held to the bit rule (tests/reference.py); results torch decides, to torch's.
Every call is counted once by dispatch_stats(): the kernel for each sample it can serve
(float32/float16/bfloat16/int8, dense, elements, no neg bit), torch with its reason for the rest.
Where it matters which of relu()'s two paths ran, a test runs the call on the general path (a
first call) and on the compiled entry (its entry ready; test_hot_path's Ctx counts entries into
the general path).
"""

import ctypes
import re
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import opinfo_support as O
import test_hot_path as H

pytestmark = pytest.mark.vgpu

ROOT = Path(__file__).resolve().parents[2]
KERNEL = O.KERNEL_DTYPES
FLOATS = O.FLOAT_KERNEL_DTYPES
# the dtypes torch's relu OpInfo declares on CPU (test_declared_dtypes_and_flags checks the installed torch's)
ALL = KERNEL + (torch.uint8, torch.int16, torch.int32, torch.int64, torch.float64)
PATHS = ("general", "entry")
MAX_SAMPLE = 4096  # elements: the emulator runs every lane; larger reference samples are cut (_cut)
INPLACE = "modified by an inplace operation"
OUT_AUTOGRAD = "does not support automatic differentiation"


def _name(dtype):
    return str(dtype).removeprefix("torch.")


@pytest.fixture
def c(vgpu, monkeypatch):
    import relu_flydsl

    monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    monkeypatch.delenv("RELU_FLYDSL_RUNG", raising=False)
    ctx = H.Ctx(relu_flydsl, vgpu, monkeypatch)
    ctx.op = O.relu_opinfo()
    ctx.calls = lambda: O.Calls(relu_flydsl, vgpu)
    ctx.keep = []  # every result stays alive: memory registered on the device is never reused
    relu = ctx.relu

    def kept(*args, **kwargs):
        y = relu(*args, **kwargs)
        ctx.keep.append(y)
        return y

    ctx.relu = kept
    try:
        yield ctx
    finally:
        relu_flydsl._state.STATE.reset()


def _on(c, path, numel, dtype):
    """For path "entry", make relu()'s entry for (numel, dtype, 16-byte aligned x and out) ready
    (the tensors of these tests sit at the start of guarded buffers); "general": nothing."""
    if path == "entry":
        c.warm(numel, dtype)


def _took(c, path, general_before, what):
    if path == "entry":
        assert c.general == general_before, f"{what}: expected the compiled entry, took the general path"


def _fresh(c, t):
    """relu(t)'s output is made by relu itself: the virtual device registers the launch's new pointer."""
    c.dev.fresh_output(t.numel() * t.element_size(), name="relu-output")


def _adopt(c):
    """Tensors torch makes inside relu()'s autograd op are device memory too: torch's neg-bit
    fallback resolves a neg view into a new tensor before the op sees it (so the kernel serves
    it), and the op allocates its output. The general path registers them on the virtual device."""
    run = c.d.run

    def adopting(x, out, *args, **kwargs):
        for t, name in ((x, "op-input"), (out, "op-output")):
            if t.numel() and c.dev.device_of(t.data_ptr()) is None:
                c.dev.register(t, name=name)
                c.keep.append(t)
        return run(x, out, *args, **kwargs)

    c.mp.setattr(c.d, "run", adopting)


def _values(dtype, shape, seed, away=0.0):
    """Random values of dtype (normal numbers of both signs, ints in range); `away`: no |value|
    below it (finite differences across the kink at 0 are not relu's derivative)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(shape, generator=g) * 8
    if away:
        v = torch.where(v.abs() < away, torch.full_like(v, 2 * away), v)
    return v.round().clamp(-128, 127).to(dtype) if not dtype.is_floating_point else v.to(dtype)


def _reason(x, out=None):
    """The fallback reason dispatch_stats() names for a call the kernel does not serve."""
    if x.dtype not in KERNEL:
        return f"dtype {_name(x.dtype)}"
    y = x if out is None else out
    if not (x.is_contiguous() and y.is_contiguous()) and not (O.dense(x) and y.stride() == x.stride()):
        return "non-contiguous"
    if x.is_neg() or y.is_neg():
        return "neg/conj-bit view"
    if x.numel() == 0:
        return "empty tensor"
    return None


def _served_out(c, x, out, x_rule, torch_result, dtype, what, form):
    """relu(x, out=out) returns out, on the path kernel_serves names: the bit rule of x_rule's
    values on the kernel, torch's result (torch_result) on torch's kernel."""
    kernel = O.kernel_serves(x, out)
    with c.calls() as calls:
        r = c.relu(x, out=out)
    assert r is out, f"{what}: relu(x, {form}) did not return its out"
    calls.kernel(dtype, what) if kernel else calls.torch(_reason(x, out), what)
    if kernel:
        O.assert_rule(out, x_rule, f"{form} {what}")
    else:
        O.same_values(out, torch_result, f"{form} {what}")


def _extremal(t):
    """test_out's case 0: out full of NaN (floats) or the dtype's largest value."""
    fill = float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max
    with torch.no_grad():
        t.fill_(fill)
    return t


def _result(c, what, x, out, expect_torch, kernel):
    """Checks one call's result: the bit rule where the kernel made it, torch's values where
    torch did; its layout is torch's."""
    if kernel:
        O.assert_rule(out, x, what)
    else:
        O.same_values(out, expect_torch, what)
    if x.numel():  # (an empty tensor's strides mean nothing)
        assert out.stride() == expect_torch.stride(), f"{what}: strides {out.stride()}, torch's {expect_torch.stride()}"


def _cut(x0):
    """A sample above MAX_SAMPLE elements cut along one dimension to about that many, its layout
    kind kept (contiguous or not, dense or not): the large samples add sizes, not layouts."""
    if x0.numel() <= MAX_SAMPLE:
        return x0
    for d in range(x0.dim()):
        y = x0.narrow(d, 0, max(1, MAX_SAMPLE * x0.shape[d] // x0.numel()))
        if (y.is_contiguous(), O.dense(y)) == (x0.is_contiguous(), O.dense(x0)):
            return y
    raise AssertionError(f"cannot cut sample {tuple(x0.shape)} strides {x0.stride()} keeping its layout")


def _reference_samples(op, dtype):
    return [_cut(s.input) for s in op.reference_inputs("cpu", dtype)]


# ---- the OpInfo itself -------------------------------------------------------------------
def test_declared_dtypes_and_flags():
    """The flags the tests below follow are the installed torch's."""
    op = O.relu_opinfo()
    assert set(op.supported_dtypes("cpu")) == set(ALL)
    assert set(FLOATS) | {torch.float64} == set(op.supported_backward_dtypes("cpu"))
    assert op.supports_autograd and op.supports_forward_ad and op.supports_fwgrad_bwgrad
    assert op.supports_gradgrad and op.supports_inplace_autograd
    assert not op.supports_out  # torch.nn.functional.relu has no out=; aten.relu.out is its out form


# ---- forward: every reference sample, every form (test_variant_consistency_eager, test_out case 0)
@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_reference_samples_all_forms(c, dtype):
    """relu(x), relu(x, out=y) with y full of NaN or the dtype's largest value, relu(x, out=x):
    for every reference sample (empty, 0-dim, broadcast and overlapping strides, gaps, extremal
    values) the kernel's bits or torch's values, torch's layout, x untouched, out returned as it
    came (same storage, same strides), the version counter advanced where torch's is, and the
    path: the kernel for each sample it can serve, torch with its reason for the others."""
    for i, x0 in enumerate(_reference_samples(c.op, dtype)):
        what = f"sample {i} {tuple(x0.shape)} strides {x0.stride()}"
        x = O.present(c.dev, x0, name=f"x{i}")
        x_before = x.clone()

        # relu(x)
        expect = torch.relu(x0)
        kernel = O.kernel_serves(x)
        if kernel:
            _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, what) if kernel else calls.torch(_reason(x), what)
        _result(c, f"relu(x) {what}", x, y, expect, kernel)
        assert y.data_ptr() != x.data_ptr() or x.numel() == 0, f"{what}: relu(x) returned x's memory"
        assert not y.requires_grad

        # relu(x, out=y): out as torch.relu would return it (test_out), full of extremal values
        out = _extremal(O.present(c.dev, expect, name=f"out{i}"))
        ptr, strides, version = out.data_ptr(), out.stride(), out._version
        torch_out = torch.empty_like(expect)
        torch_version = torch_out._version
        torch.ops.aten.relu.out(x0, out=torch_out)
        _served_out(c, x, out, x, torch_out, dtype, what, "out=")
        assert (out.data_ptr(), out.stride()) == (ptr, strides), f"{what}: out's storage or strides changed"
        assert (out._version > version) == (torch_out._version > torch_version), \
            f"{what}: out's version counter {version} -> {out._version}; torch's out= advances it"
        assert O.same_bits(x, x_before), f"{what}: x changed"

        # relu(x, out=x), against torch.relu_ on the same layout
        xt = O.present(c.dev, x0, name=f"x-torch{i}")
        try:
            torch.relu_(xt)
            torch_error = None
        except RuntimeError as e:
            torch_error = e
        xi = O.present(c.dev, x0, name=f"x-inplace{i}")
        version = xi._version
        if torch_error is not None:  # e.g. overlapping elements: torch refuses to write them
            with c.calls() as calls, pytest.raises(type(torch_error)):
                c.relu(xi, out=xi)
            assert not calls.launched and O.same_bits(xi, x_before), f"{what}: x written before torch's error"
            continue
        _served_out(c, xi, xi, x_before, xt, dtype, what, "out=x")
        assert xi._version > version, f"{what}: relu(x, out=x) left x's version counter at {version}; torch.relu_ advances it"
    c.dev.check()


# ---- out= semantics (test_out, test_out_warning) --------------------------------------------
def _doc_rows():
    return (ROOT / "docs" / "semantics.md").read_text()


def test_documented_refusals():
    """The out= calls torch resizes or casts, and relu_flydsl refuses: each refusal is the
    package's documented contract (docs/semantics.md), which is what lets the tests below take the
    documented error for torch's result."""
    text = _doc_rows()
    assert "`y` must match `x` in shape, dtype and device, be dense" in text  # the API table's out= row
    assert "| `out` dtype differs | `TypeError` naming both dtypes |" in text
    assert "| `out` shape or device differs | `ValueError` naming both |" in text
    assert "| `out` with gaps or overlapping elements (e.g. `buf[::2]`, `expand`) | `ValueError` |" in text
    assert "| `out=` with `x.requires_grad` under grad mode | `RuntimeError` (as torch's `out=`) |" in text


def _refused(c, x, out, exc, match, what, buf=None):
    """relu(x, out) raises exc (matching), writes nothing, launches nothing, counts nothing and
    leaves out's version counter, shape and strides alone."""
    watched = out if buf is None else buf
    before = watched.clone() if watched.device.type != "meta" else None
    layout = (out.shape, out.stride(), None if out.is_inference() else out._version)
    with c.calls() as calls:
        with pytest.raises(exc, match=match):
            c.relu(x, out=out)
    assert not calls.launched, f"{what}: launched before refusing"
    assert not any(k.startswith("flydsl/") for k in calls.stats), f"{what}: counted as the kernel's: {calls.stats}"
    assert (out.shape, out.stride(), None if out.is_inference() else out._version) == layout, \
        f"{what}: out changed shape, strides or version"
    if before is not None:
        assert torch.equal(watched.view(torch.uint8) if watched.dtype != torch.uint8 else watched,
                           before.view(torch.uint8) if before.dtype != torch.uint8 else before), f"{what}: out written"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", KERNEL, ids=_name)
def test_out_contract(c, dtype, path):
    """test_out and test_out_warning's cases, with x a (5, 5) sample: torch's result, or the
    documented error with nothing written (torch resizes a wrong-shaped or empty out, writes
    through gaps, casts or raises RuntimeError for another dtype, raises RuntimeError for
    another device); out on another device index or type is refused on both paths."""
    n = 25
    _on(c, path, n, dtype)
    x0 = _values(dtype, (5, 5), seed=1)
    x = O.present(c.dev, x0)
    expect = torch.relu(x0)

    # torch resizes these (non-empty with a warning, empty silently): documented ValueError
    for shape in ((5, 6), (25,), (0,), (2,)):
        resized = torch.zeros(shape, dtype=dtype)
        torch.ops.aten.relu.out(x0, out=resized)
        assert resized.shape == x0.shape, "torch's out= resizes"
        out = O.present(c.dev, torch.zeros(shape, dtype=dtype), name=f"out{shape}")
        _refused(c, x, out, ValueError, "shape", f"out of shape {shape}")
    # gaps (make_tensor(noncontiguous=True), test_out case 1): torch writes through; documented ValueError
    buf = O.present(c.dev, torch.zeros(5, 10, dtype=dtype), name="gaps")
    _refused(c, x, buf[:, ::2], ValueError, "dense", "out with gaps", buf=buf)
    # another dtype (test_out case 4): torch raises RuntimeError; documented TypeError
    for other in (torch.int64, torch.float64, torch.float16 if dtype != torch.float16 else torch.float32):
        out = O.present(c.dev, torch.zeros(5, 5, dtype=other), name=f"out-{_name(other)}")
        _refused(c, x, out, TypeError, "dtype", f"out of dtype {other}")
    # another device index (virtual device 1), another device type (meta): torch raises RuntimeError
    c.dev.set_device_count(2)
    out1 = O.present(c.dev, torch.zeros(5, 5, dtype=dtype), name="out-device1", device=1)
    _refused(c, x, out1, ValueError, "device", "out on device 1")
    _refused(c, x, torch.empty(5, 5, dtype=dtype, device="meta"), ValueError, "device", "out on meta")
    with pytest.raises(RuntimeError):
        torch.ops.aten.relu.out(x0, out=torch.empty(5, 5, dtype=dtype, device="meta"))

    # dense, not contiguous (a transpose), x contiguous: torch's result in out's layout
    out = O.present(c.dev, torch.zeros(5, 5, dtype=dtype).t(), name="out-t")
    version = out._version
    with c.calls() as calls:
        assert c.relu(x, out=out) is out
    calls.torch("non-contiguous", "transposed out")
    assert out.stride() == (1, 5)
    O.same_values(out, expect, "transposed out")
    assert out._version > version, "transposed out: version counter not advanced"

    # the right out, after all that: the kernel, on the path asked
    out = _extremal(O.present(c.dev, torch.empty(5, 5, dtype=dtype), name="out"))
    general, version = c.general, out._version
    with c.calls() as calls:
        assert c.relu(x, out=out) is out
    calls.kernel(dtype, "out=")
    _took(c, path, general, "out=")
    O.assert_rule(out, x, "out=")
    assert out._version > version, f"relu(x, out=y) on the {path} path left y's version counter at {version}"
    c.dev.check()


@pytest.mark.parametrize("path", PATHS)
def test_out_in_host_memory(c, path):
    """out in host memory (no virtual device holds it: a CPU tensor next to a device x): torch
    raises for another device type; relu() must refuse it before launching, on both paths. The
    stand-in answers device -1 for host memory, to the general path's device_info (None: not a
    ROCm device) and to the compiled entry's device callback."""
    from vgpu.serve import DEVICE_OF, STREAM_OF

    dev, entry = c.dev, c.entry
    device_of = DEVICE_OF(lambda pointer: dev.device_of(pointer, -1))
    stream_of = STREAM_OF(lambda index: H.STREAM)
    entry.present_cpu(True, ctypes.cast(device_of, ctypes.c_void_p).value, ctypes.cast(stream_of, ctypes.c_void_p).value)
    entry.presenting = (device_of, stream_of)
    info = c.d.device_info

    def device_info(t):
        return None if dev.device_of(t.data_ptr()) is None else info(t)

    c.mp.setattr(c.d, "device_info", device_info)
    n = 64
    _on(c, path, n, torch.float32)
    x = O.present(dev, _values(torch.float32, (n,), seed=27))
    host = torch.full((n,), 7.0)  # 16-byte aligned, as the warmed entry's out
    assert dev.device_of(host.data_ptr()) is None
    _refused(c, x, host, (ValueError, RuntimeError), "device", f"out in host memory, {path} path")
    dev.check()


# ---- version counters, no_grad, inference_mode ---------------------------------------------
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", KERNEL, ids=_name)
def test_version_counter(c, dtype, path):
    """Every write the kernel makes advances the written tensor's version counter, as torch's
    out= and in-place ops do: out=y, out=x, under no_grad and under inference_mode (a normal
    tensor written there), on the general path and on the compiled entry."""
    n = 64
    _on(c, path, n, dtype)
    for mode, name in ((torch.enable_grad, "grad mode"), (torch.no_grad, "no_grad"),
                       (torch.inference_mode, "inference_mode")):
        x = O.present(c.dev, _values(dtype, (n,), seed=2), name="x")
        xi = O.present(c.dev, _values(dtype, (n,), seed=3), name="x-inplace")
        before = xi.clone()
        out, _ = c.dev.guarded((n,), dtype, name="out")
        for form, args, written in (("out=y", (x, out), out), ("out=x", (xi, xi), xi)):
            version, general = written._version, c.general
            with mode(), c.calls() as calls:
                c.relu(args[0], out=args[1])
            calls.kernel(dtype, f"{form} under {name}")
            _took(c, path, general, f"{form} under {name}")
            assert written._version > version, \
                f"relu(x, {form}) under {name} on the {path} path left the version counter at {version}"
        O.assert_rule(out, x, name)
        O.assert_rule(xi, before, name)
    c.dev.check()


@pytest.mark.parametrize("dtype", KERNEL, ids=_name)
def test_inference_and_no_grad(c, dtype):
    """torch's inference-mode and no_grad rules on the kernel path: relu(x) in inference mode is
    an inference tensor, out of it a normal one (also of an inference x); writing an inference
    tensor outside inference mode is torch's RuntimeError with nothing written, inside it the
    kernel's write (no version counter to advance there); under no_grad an x
    that requires grad gives a result without grad, and out= (even out=x) is allowed."""
    n = 64
    x0 = _values(dtype, (n,), seed=4)
    x = O.present(c.dev, x0)
    with torch.inference_mode():
        _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, "relu(x) in inference_mode")
        assert y.is_inference() == torch.relu(x0).is_inference() is True
        O.assert_rule(y, x)
    with torch.inference_mode():
        inf_x = torch.empty(n, dtype=dtype)
        inf_x.copy_(x0)
    c.dev.register(inf_x, name="inference-tensor")
    _fresh(c, inf_x)
    with c.calls() as calls:
        y = c.relu(inf_x)
    calls.kernel(dtype, "relu(inference x) outside inference_mode")
    assert not y.is_inference() and not torch.relu(inf_x).is_inference()
    O.assert_rule(y, inf_x)
    with pytest.raises(RuntimeError, match="[Ii]nplace update to inference tensor outside InferenceMode"):
        torch.ops.aten.relu.out(x0, out=inf_x)  # torch's error (torch writes first: hence the copy below)
    with torch.inference_mode():
        inf_x.copy_(x0)
    _refused(c, x, inf_x, RuntimeError, "inference tensor", "inference out outside inference_mode")
    with pytest.raises(RuntimeError, match="inference tensor"):
        c.relu(inf_x, out=inf_x)
    assert torch.equal(inf_x, x0), "inference x written outside inference_mode"
    with torch.inference_mode():  # there torch writes inference tensors, which have no version counter
        for form, args in (("out= an inference tensor", (x, inf_x)), ("out=x, an inference tensor", (inf_x, inf_x))):
            for _ in range(2):  # a first call, then one its entry serves
                inf_x.copy_(x0)
                with c.calls() as calls:
                    assert c.relu(*args[:1], out=args[1]) is args[1]
                calls.kernel(dtype, f"{form} in inference_mode")
                O.assert_rule(inf_x, x0, form)

    if dtype.is_floating_point:
        xg = O.present(c.dev, x0, name="x-grad").requires_grad_()
        with torch.no_grad():
            _fresh(c, xg)
            with c.calls() as calls:
                y = c.relu(xg)
            calls.kernel(dtype, "relu(x requiring grad) under no_grad")
            assert not y.requires_grad and y.grad_fn is None
            O.assert_rule(y, xg)
            out, _ = c.dev.guarded((n,), dtype, name="out")
            with c.calls() as calls:
                c.relu(xg, out=out)
            calls.kernel(dtype, "out= of an x requiring grad under no_grad")
            with c.calls() as calls:
                c.relu(xg, out=xg)
            calls.kernel(dtype, "out=x of a leaf requiring grad under no_grad (torch.relu_ allows it)")
        O.assert_rule(xg, x0)
        assert xg.requires_grad and xg.is_leaf
    c.dev.check()


# ---- the saved-tensor check (autograd's version check) --------------------------------------
def _saved_cases(c, dtype, n):
    """(name, build) pairs: build() returns (loss, overwrite): loss's backward needs a tensor that
    overwrite() writes with relu(..., out=) through a detached alias."""
    def sigmoid_out():
        a = O.present(c.dev, _values(dtype, (n,), seed=5, away=0.1), name="a").requires_grad_()
        s = a.sigmoid()  # saves its result for backward
        c.dev.register(s, name="sigmoid-result")
        x = O.present(c.dev, _values(dtype, (n,), seed=6), name="x")
        return s.sum(), lambda: c.relu(x, out=s.detach())

    def relu_own_output():
        a = O.present(c.dev, _values(dtype, (n,), seed=7, away=0.1), name="a").requires_grad_()
        _fresh(c, a)
        y = c.relu(a)  # saves its output for backward
        x = O.present(c.dev, _values(dtype, (n,), seed=8), name="x")
        return y.sum(), lambda: c.relu(x, out=y.detach())

    def in_place():
        a = O.present(c.dev, _values(dtype, (n,), seed=9, away=0.1), name="a").requires_grad_()
        s = a.sigmoid()
        c.dev.register(s, name="sigmoid-result")
        return s.sum(), lambda: c.relu(s.detach(), out=s.detach())

    return (("out= over sigmoid's saved result", sigmoid_out), ("out= over relu's saved output", relu_own_output),
            ("out=x over sigmoid's saved result", in_place))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_saved_tensor_overwritten(c, dtype, path):
    """A tensor saved for backward and then overwritten by relu(..., out=) gives torch's
    "modified by an inplace operation" RuntimeError at backward, never a gradient computed from
    the overwritten values; on both paths, also under anomaly mode."""
    n = 64
    _on(c, path, n, dtype)
    for anomaly in (False, True):
        for name, build in _saved_cases(c, dtype, n):
            loss, overwrite = build()
            general = c.general
            with c.calls() as calls:
                overwrite()
            calls.kernel(dtype, name)
            _took(c, path, general, name)
            with torch.autograd.set_detect_anomaly(anomaly), pytest.raises(RuntimeError, match=INPLACE):
                loss.backward()
    c.dev.check()


# ---- backward (test_fn_grad, test_fn_gradgrad, variant consistency's backward) ---------------
def _relu_fn(c, **kw):
    """relu for gradcheck: each call's output registered on the virtual device."""
    def fn(x):
        if O.kernel_serves(x):
            _fresh(c, x)
        return c.relu(x, **kw)
    return fn


@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_backward_samples(c, dtype):
    """For every OpInfo sample (requires_grad): relu(x) runs the kernel (bit rule), records a
    graph, and its gradient for a random grad_output is torch.relu's exactly."""
    for i, s in enumerate(c.op.sample_inputs("cpu", dtype, requires_grad=True)):
        what = f"sample {i} {tuple(s.input.shape)}"
        x = O.present(c.dev, s.input, name=f"x{i}").requires_grad_()
        _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, what)
        O.assert_rule(y, x, what)
        assert y.requires_grad and y.grad_fn is not None
        g = _values(dtype, y.shape, seed=10 + i)
        (gx,) = torch.autograd.grad(y, x, g)
        xt = s.input.detach().clone().requires_grad_()
        (gt,) = torch.autograd.grad(torch.relu(xt), xt, g)
        O.same_values(gx, gt, f"gradient {what}")
    c.dev.check()


def test_gradcheck_kernel_float32(c):
    """gradcheck and gradgradcheck (the OpInfo's check_batched_grad) on the kernel path: float32,
    values kept off relu's kink, finite differences at float32's precision."""
    x = O.present(c.dev, _values(torch.float32, (5, 5), seed=11, away=0.05)).requires_grad_()
    fn = _relu_fn(c)
    c.pkg.reset_dispatch_stats()
    kw = dict(eps=1e-2, atol=1e-3, rtol=1e-3, check_batched_grad=c.op.check_batched_grad)
    assert torch.autograd.gradcheck(fn, (x,), **kw)
    assert torch.autograd.gradgradcheck(fn, (x,), **kw)
    stats = c.pkg.dispatch_stats()
    assert set(stats) == {"flydsl/v5/float32"} and stats["flydsl/v5/float32"] > 10, stats
    c.dev.check()


def test_gradcheck_float64(c):
    """float64 (torch's gradcheck dtype) takes torch's kernel, counted with its reason:
    gradcheck and gradgradcheck as test_fn_grad and test_fn_gradgrad run them."""
    x = O.present(c.dev, _values(torch.float64, (5, 5), seed=12, away=0.05)).requires_grad_()
    c.pkg.reset_dispatch_stats()
    assert torch.autograd.gradcheck(c.relu, (x,), check_batched_grad=c.op.check_batched_grad)
    assert torch.autograd.gradgradcheck(c.relu, (x,), check_batched_grad=c.op.check_batched_grad)
    assert set(c.pkg.dispatch_stats()) == {"fallback/dtype float64"}, c.pkg.dispatch_stats()


def test_inplace_autograd(c):
    """relu(x, out=x) with an x that requires grad, under grad mode: torch.relu_ records it
    (supports_inplace_autograd); relu_flydsl documents a RuntimeError (test_documented_refusals),
    which it must raise before writing, as it must for a leaf (torch's error too)."""
    a = O.present(c.dev, _values(torch.float32, (8,), seed=13)).requires_grad_()
    b = a * 2
    c.dev.register(b, name="b")
    before = b.detach().clone()
    with pytest.raises(RuntimeError, match=OUT_AUTOGRAD):
        c.relu(b, out=b)
    assert torch.equal(b.detach(), before)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        torch.relu_(a.detach().clone().requires_grad_())
    with pytest.raises(RuntimeError):
        c.relu(a, out=a)
    out = O.present(c.dev, torch.zeros(8), name="out")
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        torch.clamp_min(a, 0, out=torch.zeros(8))  # torch.relu's kernel with an out (aten.relu.out lets it pass)
    _refused(c, a, out, RuntimeError, OUT_AUTOGRAD, "out= with x requiring grad")


# ---- forward AD (test_forward_mode_AD, test_inplace_forward_mode_AD, test_fn_fwgrad_bwgrad) ----
def _torch_jvp(x0, t0, inplace=False):
    with fwAD.dual_level():
        d = fwAD.make_dual(x0.clone(), t0.clone())
        r = torch.relu_(d) if inplace else torch.relu(d)
        p, t = fwAD.unpack_dual(r)
        return p.clone(), t.clone()


AD_DTYPES = FLOATS + (torch.float64,)  # float64: torch's kernel serves it on the device
# (dtype, path): float64 never has a ready entry, so its "entry" call is its general one
AD_CASES = [pytest.param(d, p, id=f"{_name(d)}-{p}") for d in FLOATS for p in PATHS] + \
    [pytest.param(torch.float64, "general", id="float64-general")]


def _ad_samples(c, dtype, path):
    """(what, x0, t0, x, t) for each OpInfo sample: x and its tangent t presented on the device;
    for path "entry" the entry for x's size is ready first."""
    for i, s in enumerate(c.op.sample_inputs("cpu", dtype)):
        x0 = s.input
        if path == "entry" and dtype in KERNEL:
            c.warm(x0.numel(), dtype)
        t0 = _values(dtype, x0.shape, seed=20 + i)
        yield (f"sample {i} {tuple(x0.shape)}", x0, t0, O.present(c.dev, x0, name=f"x{i}"),
               O.present(c.dev, t0, name=f"t{i}"))


def _primal(key, p, x0, p_torch, what):
    O.assert_rule(p, x0, what) if key.startswith("flydsl/") else O.same_values(p, p_torch, what)


@pytest.mark.parametrize(("dtype", "path"), AD_CASES)
def test_forward_ad(c, dtype, path):
    """test_forward_mode_AD's jvp, for each OpInfo sample: relu(dual) keeps torch.relu's tangent.
    Counted once, on whichever path serves it (the kernel, or torch with a reason); the primal is
    the bit rule's or torch's."""
    for what, x0, t0, x, t in _ad_samples(c, dtype, path):
        p_torch, t_torch = _torch_jvp(x0, t0)
        with fwAD.dual_level():
            if O.kernel_serves(x):
                _fresh(c, x)
            with c.calls() as calls:
                r = c.relu(fwAD.make_dual(x, t))
            key = calls.once(what)
            p, tangent = fwAD.unpack_dual(r)
            assert tangent is not None, f"relu(dual) {what} on the {path} path: the tangent is lost ({key})"
            O.same_values(tangent, t_torch, f"tangent {what}")
            _primal(key, p, x0, p_torch, what)
    c.dev.check()


@pytest.mark.parametrize(("dtype", "path"), AD_CASES)
def test_forward_ad_in_place(c, dtype, path):
    """test_inplace_forward_mode_AD: relu(dual, out=dual) updates the tangent as torch.relu_ does."""
    for what, x0, t0, x, t in _ad_samples(c, dtype, path):
        p_torch, t_torch = _torch_jvp(x0, t0, inplace=True)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            with c.calls() as calls:
                assert c.relu(d, out=d) is d
            key = calls.once(what)
            p, tangent = fwAD.unpack_dual(d)
            O.same_values(tangent, t_torch, f"in-place tangent {what} on the {path} path ({key})")
            _primal(key, p, x0, p_torch, what)
    c.dev.check()


@pytest.mark.parametrize(("dtype", "path"), AD_CASES)
def test_forward_ad_out_refused(c, dtype, path):
    """relu(dual, out=y) and relu(x, out=dual): torch's out= functions have no forward AD
    (NotImplementedError). torch
    raises after writing out; relu_flydsl refuses bad input before writing (as for an inference
    out), so out is left as it was."""
    for what, x0, t0, x, t in _ad_samples(c, dtype, path):
        out = O.present(c.dev, torch.zeros_like(x0), name=f"out-{what}")
        with fwAD.dual_level():
            with pytest.raises(NotImplementedError, match="forward AD"):
                torch.ops.aten.relu.out(fwAD.make_dual(x0, t0), out=torch.zeros_like(x0))
            before = out.clone()
            with pytest.raises(NotImplementedError, match="forward AD"):
                c.relu(fwAD.make_dual(x, t), out=out)
            assert torch.equal(out, before), f"relu(dual, out=y) {what} on the {path} path: out written"
            # a plain x into a dual out: torch refuses that too (its tangent would go stale)
            with pytest.raises(NotImplementedError, match="forward AD"):
                torch.ops.aten.relu.out(x0, out=fwAD.make_dual(torch.zeros_like(x0), torch.zeros_like(t0)))
            dual_out = fwAD.make_dual(out, O.present(c.dev, torch.zeros_like(t0), name=f"out-tangent-{what}"))
            with pytest.raises(NotImplementedError, match="forward AD"):
                c.relu(x, out=dual_out)
            assert torch.equal(out, before), f"relu(x, out=dual) {what} on the {path} path: out written"
    c.dev.check()


@pytest.mark.parametrize("dtype", AD_DTYPES, ids=_name)
def test_forward_ad_requires_grad(c, dtype):
    """A dual tensor whose primal requires grad (what test_fn_fwgrad_bwgrad and gradcheck's forward
    AD build): relu keeps torch.relu's tangent and its backward still gives torch's gradient."""
    _adopt(c)
    for what, x0, t0, x, t in _ad_samples(c, dtype, "general"):
        x.requires_grad_()
        p_torch, t_torch = _torch_jvp(x0, t0)
        with fwAD.dual_level():
            with c.calls() as calls:
                r = c.relu(fwAD.make_dual(x, t))
            key = calls.once(what)
            p, tangent = fwAD.unpack_dual(r)
            assert tangent is not None, f"relu(dual requiring grad) {what}: the tangent is lost ({key})"
            O.same_values(tangent, t_torch, f"tangent {what}")
            _primal(key, p.detach(), x0, p_torch, what)
            (gx,) = torch.autograd.grad(r, x, torch.ones_like(x0))
        O.same_values(gx, (x0 > 0).to(dtype), f"gradient {what}")
    c.dev.check()


def _tol(dtype):
    return dict(eps=1e-2, atol=1e-3, rtol=1e-3) if dtype == torch.float32 else {}


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=_name)
def test_forward_mode_ad_gradcheck(c, dtype):
    """test_forward_mode_AD: gradcheck with forward AD (and the OpInfo's
    check_batched_forward_grad), float32 on the kernel path, float64 on torch's."""
    x = O.present(c.dev, _values(dtype, (5, 5), seed=14, away=0.05)).requires_grad_()
    assert torch.autograd.gradcheck(_relu_fn(c), (x,), check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False,
                                    check_batched_forward_grad=c.op.check_batched_forward_grad, **_tol(dtype))
    c.dev.check()


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=_name)
def test_fwgrad_bwgrad(c, dtype):
    """test_fn_fwgrad_bwgrad: gradgradcheck forward-over-reverse (supports_fwgrad_bwgrad)."""
    _adopt(c)
    x = O.present(c.dev, _values(dtype, (5, 5), seed=14, away=0.05)).requires_grad_()
    assert torch.autograd.gradgradcheck(_relu_fn(c), (x,), check_fwd_over_rev=True, check_rev_over_rev=False,
                                        check_undefined_grad=False, check_batched_grad=False, **_tol(dtype))
    c.dev.check()


# ---- math bits (test_neg_view, test_conj_view) -----------------------------------------------
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_neg_view(c, dtype, path):
    """A neg-bit view as x, as out, and as both (in place): torch's values and gradient, taken by
    torch with its reason (the memory holds the other sign), never the kernel; on both paths. A
    real tensor's conj() has no bit: the kernel."""
    n = 25
    _on(c, path, n, dtype)
    x0 = _values(dtype, (5, 5), seed=15)

    phys = O.present(c.dev, -x0, name="physical")
    nv = torch._neg_view(phys)
    assert nv.is_neg()
    with c.calls() as calls:
        y = c.relu(nv)
    calls.torch("neg/conj-bit view", "relu(neg view)")
    O.same_values(y, torch.relu(x0), "relu(neg view)")

    # requiring grad: torch's neg-bit fallback hands relu's autograd op a resolved copy
    _adopt(c)
    leaf = O.present(c.dev, -x0, name="physical-grad").requires_grad_()
    with c.calls() as calls:
        y = c.relu(torch._neg_view(leaf))
    key = calls.once("relu(neg view requiring grad)")
    O.assert_rule(y, x0) if key.startswith("flydsl/") else O.same_values(y.detach(), torch.relu(x0), "relu(neg view)")
    g = _values(dtype, (5, 5), seed=16)
    y.backward(g)
    lt = (-x0).clone().requires_grad_()
    torch.relu(torch._neg_view(lt)).backward(g)
    O.same_values(leaf.grad, lt.grad, "gradient through a neg view")

    x = O.present(c.dev, x0, name="x")
    phys = O.present(c.dev, torch.zeros(5, 5, dtype=dtype), name="out-physical")
    out = torch._neg_view(phys)
    version = out._version
    with c.calls() as calls:
        assert c.relu(x, out=out) is out
    calls.torch("neg/conj-bit view", "out= a neg view")
    O.same_values(out.resolve_neg(), torch.relu(x0), "out= a neg view")
    O.same_values(phys, -torch.relu(x0), "the neg view's memory")
    assert out._version > version

    phys = O.present(c.dev, -x0, name="inplace-physical")
    nv = torch._neg_view(phys)
    with c.calls() as calls:
        assert c.relu(nv, out=nv) is nv
    calls.torch("neg/conj-bit view", "out=x, x a neg view")
    O.same_values(nv.resolve_neg(), torch.relu(x0), "in place on a neg view")

    real = x.conj()
    assert not real.is_conj()
    _fresh(c, real)
    with c.calls() as calls:
        y = c.relu(real)
    calls.kernel(dtype, "relu(x.conj()) of a real x")
    O.assert_rule(y, x0)
    c.dev.check()


def test_conj_complex_and_bool(c):
    """Complex x (with or without the conj bit) and bool x: torch's relu refuses them
    (NotImplementedError, RuntimeError), relu_flydsl documents TypeError; x.conj().imag is a real
    neg view: torch's values, via torch."""
    z0 = torch.complex(_values(torch.float32, (12,), seed=17), _values(torch.float32, (12,), seed=18))
    z = O.present(c.dev, z0, name="z")
    with pytest.raises(NotImplementedError):
        torch.relu(z0.conj())
    for v in (z, z.conj()):
        with pytest.raises(TypeError, match="complex"):
            c.relu(v)
    assert "| bool or complex `x` | `TypeError` (torch.relu rejects them too) |" in _doc_rows()
    b0 = torch.tensor([True, False] * 4)
    with pytest.raises(RuntimeError, match="Boolean"):
        torch.relu(b0)
    b = O.present(c.dev, b0, name="bool")
    for out in (None, O.present(c.dev, b0, name="bool-out"), b):
        with c.calls() as calls, pytest.raises(TypeError, match="bool"):
            c.relu(b, out=out)
        assert not calls.launched and not calls.stats
    assert torch.equal(b, b0)
    im = z.conj().imag
    assert im.is_neg()
    with c.calls() as calls:
        y = c.relu(im)
    calls.torch(_reason(im), "relu(z.conj().imag)")  # also strided: the layout is asked first
    O.same_values(y, torch.relu(z0.conj().imag), "relu(z.conj().imag)")


# ---- noncontiguous samples (test_noncontiguous_samples) -------------------------------------
@pytest.mark.parametrize("dtype", KERNEL, ids=_name)
def test_noncontiguous_samples(c, dtype):
    """Each OpInfo sample and its noncontiguous() twin (gaps): the same values and gradients; the
    kernel serves the contiguous one, torch the one with gaps. Dense non-contiguous layouts
    (transposed, channels_last) are served by the kernel, in x's layout, for relu(x) and
    relu(x, out=torch.empty_like(x))."""
    grad = dtype.is_floating_point
    for i, s in enumerate(c.op.sample_inputs("cpu", dtype, requires_grad=grad)):
        what = f"sample {i} {tuple(s.input.shape)}"
        ns = s.noncontiguous()
        x = O.present(c.dev, s.input, name=f"x{i}").requires_grad_(grad)
        nx = O.present(c.dev, ns.input, name=f"nx{i}").requires_grad_(grad)
        _fresh(c, x)
        with c.calls() as calls:
            expected = c.relu(x)
        calls.kernel(dtype, what)
        if nx.is_contiguous():  # a 0-dim sample has no gaps to make
            _fresh(c, nx)
        with c.calls() as calls:
            actual = c.relu(nx)
        if nx.is_contiguous():
            calls.kernel(dtype, f"noncontiguous {what}")
        else:
            calls.torch("non-contiguous", f"noncontiguous {what}")
        O.same_values(actual.detach(), expected.detach(), what)
        O.assert_rule(expected, x, what)
        if grad:
            g = _values(dtype, expected.shape, seed=30 + i)
            (gx,) = torch.autograd.grad(expected, x, g)
            (gn,) = torch.autograd.grad(actual, nx, O.present(c.dev, g, name=f"g{i}"))
            O.same_values(gn, gx, f"gradient {what}")

    base = _values(dtype, (2, 3, 4, 5), seed=19)
    for name, x0 in (("transposed", base[0, 0].t()), ("channels_last", base.to(memory_format=torch.channels_last)),
                     ("permuted", base.permute(3, 1, 0, 2))):
        x = O.present(c.dev, x0, name=name)
        expect = torch.relu(x0)
        _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, f"relu(x) {name}")
        O.assert_rule(y, x, name)
        assert y.stride() == expect.stride() == x.stride(), f"{name}: strides {y.stride()}, torch's {expect.stride()}"
        out = O.present(c.dev, torch.empty_like(x0), name=f"{name}-out")
        with c.calls() as calls:
            c.relu(x, out=out)
        calls.kernel(dtype, f"out= {name}")
        O.assert_rule(out, x, f"out= {name}")
    c.dev.check()


@pytest.mark.parametrize("path", [
    "general",
    pytest.param("entry", marks=pytest.mark.xfail(strict=True, reason=(
        "known limitation: the compiled entry reads x through torch's DLPack exchange API, which "
        "materializes a copy-on-write x (docs/semantics.md, 'Copy-on-write inputs')"))),
])
def test_cow_input(c, path):
    """TestCompositeCompliance.test_cow_input: an input relu only reads stays copy-on-write (the
    OpInfo allows no materialization), as torch.relu leaves it, and relu(x) of it is the kernel's.
    A materialized input is a copy relu then reads: new memory the virtual device does not know.
    "general": the general path alone (the compiled entry switched off), which reads x's pointer
    read-only; "entry": a ready entry, which does not keep the contract yet (strict xfail)."""
    from relu_flydsl import _compiled_entry

    _on(c, path, 64, torch.float32)
    if path == "general":
        was = _compiled_entry.SERVE is not None
        _compiled_entry.use(False)
        try:
            _cow_input(c, path)
        finally:
            _compiled_entry.use(was)
    else:
        _cow_input(c, path)


def _cow_input(c, path):
    n = 64  # _on() made the entry ready for this size
    x0 = _values(torch.float32, (n,), seed=28)
    x = O.present(c.dev, x0)
    lazy = torch._lazy_clone(x)
    torch.relu(lazy)
    assert torch._C._is_cow_tensor(lazy), "torch.relu reads a copy-on-write input in place"
    _fresh(c, lazy)
    try:
        with c.calls() as calls:
            y = c.relu(lazy)
    except RuntimeError as e:
        y = e
    if not torch._C._is_cow_tensor(lazy):
        c.dev.errors_expected = True  # the kernel read the copy: memory the device never saw
        pytest.fail(f"relu(x) on the {path} path materialized its copy-on-write input x "
                    f"(torch.relu does not): {y if isinstance(y, Exception) else 'a copy of x was made'}")
    assert not isinstance(y, Exception), y
    calls.kernel(torch.float32, "relu(copy-on-write x)")
    O.assert_rule(y, x0)
    c.dev.check()


# ---- settings and wrappers around the call ---------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_anomaly_mode(c, dtype):
    """detect_anomaly (and its NaN check): relu(x) still runs the kernel, torch's gradient."""
    x0 = _values(dtype, (64,), seed=21)
    x = O.present(c.dev, x0).requires_grad_()
    with torch.autograd.detect_anomaly(check_nan=True):
        _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, "relu(x) in anomaly mode")
        y.backward(torch.ones_like(y))
    O.assert_rule(y, x)
    xt = x0.clone().requires_grad_()
    torch.relu(xt).backward(torch.ones_like(xt))
    O.same_values(x.grad, xt.grad, "gradient in anomaly mode")
    c.dev.check()


@pytest.mark.parametrize("dtype", KERNEL, ids=_name)
def test_deterministic_algorithms(c, dtype):
    """torch.use_deterministic_algorithms(True) (with its uninitialized-memory fill): relu has
    no nondeterministic kernel to refuse, so torch's relu runs, and so does the kernel."""
    was, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        x0 = _values(dtype, (64,), seed=22)
        torch.relu(x0)
        x = O.present(c.dev, x0)
        _fresh(c, x)
        with c.calls() as calls:
            y = c.relu(x)
        calls.kernel(dtype, "relu(x), deterministic")
        O.assert_rule(y, x)
        out, _ = c.dev.guarded((64,), dtype, name="out")
        with c.calls() as calls:
            c.relu(x, out=out)
        calls.kernel(dtype, "out=, deterministic")
        O.assert_rule(out, x)
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
    c.dev.check()


class Logged(torch.Tensor):
    """A __torch_function__ subclass that records the torch functions called on it."""

    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_torch_function_subclass(c):
    """A __torch_function__ subclass: torch's result, of the subclass, through the subclass's
    __torch_function__ (torch serves it, counted with the reason), for all three forms."""
    x0 = _values(torch.float32, (16,), seed=23)
    x = O.present(c.dev, x0).as_subclass(Logged)
    Logged.seen = []
    with c.calls() as calls:
        y = c.relu(x)
    calls.torch("tensor subclass Logged", "relu(subclass)")
    assert type(y) is Logged and Logged.seen, (type(y), Logged.seen)
    expect = torch.relu(x0)
    O.same_values(y.as_subclass(torch.Tensor), expect, "relu(subclass)")
    out = O.present(c.dev, torch.zeros(16), name="out").as_subclass(Logged)
    with c.calls() as calls:
        assert c.relu(x, out=out) is out
    calls.torch("tensor subclass Logged", "out= a subclass")
    O.same_values(out.as_subclass(torch.Tensor), expect, "out= a subclass")
    with c.calls() as calls:
        assert c.relu(x, out=x) is x
    calls.torch("tensor subclass Logged", "out=x, a subclass")
    O.same_values(x.as_subclass(torch.Tensor), expect, "out=x, a subclass")


def test_dtensor_one_rank(c, tmp_path):
    """DTensor on a one-rank gloo group (what tensor-parallel serving hands an activation):
    relu(dtensor), out= and out=x give torch's DTensor (placements kept), served by torch with the
    reason; its local shard, on the device, is served by the kernel."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.fail("torch.distributed with gloo is part of every supported torch build")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        mesh = DeviceMesh("cpu", [0])
        x0 = _values(torch.float32, (8, 6), seed=24)
        dt = distribute_tensor(x0, mesh, [Shard(0)])
        local = dt.to_local()
        c.dev.register(local, name="local-shard")
        expect = torch.relu(dt)
        with c.calls() as calls:
            y = c.relu(dt)
        calls.torch("tensor subclass DTensor", "relu(DTensor)")
        assert isinstance(y, DTensor) and y.placements == expect.placements and y.device_mesh == mesh
        O.same_values(y.full_tensor(), expect.full_tensor(), "relu(DTensor)")
        out = distribute_tensor(torch.zeros(8, 6), mesh, [Shard(0)])
        with c.calls() as calls:
            assert c.relu(dt, out=out) is out
        calls.torch("tensor subclass DTensor", "relu(DTensor, out=DTensor)")
        O.same_values(out.full_tensor(), expect.full_tensor(), "out= a DTensor")
        _fresh(c, local)
        with c.calls() as calls:
            yl = c.relu(local)
        calls.kernel(torch.float32, "relu(DTensor.to_local())")
        O.assert_rule(yl, local)
        with c.calls() as calls:
            assert c.relu(dt, out=dt) is dt
        calls.torch("tensor subclass DTensor", "relu(DTensor, out=itself)")
        O.same_values(dt.full_tensor(), expect.full_tensor(), "out=x, a DTensor")
    finally:
        dist.destroy_process_group()
    c.dev.check()


def test_fake_and_meta(c):
    """FakeTensor (FakeTensorMode) and meta tensors: torch's result (shape, dtype, strides, the
    type), torch's error for a real tensor under FakeTensorMode, counted with the reason, nothing
    launched; a meta out for a device x, or the reverse, is refused."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    x0 = _values(torch.float32, (4, 6), seed=25)
    x = O.present(c.dev, x0)
    with FakeTensorMode() as mode:
        f = mode.from_tensor(x0)
        expect = torch.relu(f)
        with c.calls() as calls:
            y = c.relu(f)
        calls.torch(None, "relu(FakeTensor)")
        assert isinstance(y, FakeTensor) and (y.shape, y.dtype, y.stride()) == (expect.shape, expect.dtype, expect.stride())
        fo = torch.empty(4, 6)
        with c.calls() as calls:
            assert c.relu(f, out=fo) is fo
        calls.torch(None, "relu(FakeTensor, out=)")
        with pytest.raises(AssertionError, match="FakeTensor"):
            torch.relu(x0)
        with c.calls() as calls, pytest.raises(AssertionError, match="FakeTensor"):
            c.relu(x)
        assert not calls.launched
    m = torch.empty(4, 6, device="meta")
    with c.calls() as calls:
        y = c.relu(m)
    calls.torch(None, "relu(meta)")
    assert y.device.type == "meta" and y.shape == m.shape and y.stride() == torch.relu(m).stride()
    mo = torch.empty(4, 6, device="meta")
    with c.calls() as calls:
        assert c.relu(m, out=mo) is mo
    calls.torch(None, "relu(meta, out=meta)")
    with pytest.raises(ValueError, match="device"):
        c.relu(m, out=O.present(c.dev, torch.zeros(4, 6), name="out"))
    _refused(c, x, torch.empty(4, 6, device="meta"), ValueError, "device", "meta out")


# ---- the path claims these tests rely on -----------------------------------------------------
def test_reasons_match_explain(c):
    """The fallback reasons the tests above expect are the ones explain() gives."""
    for x0, out in ((_values(torch.float64, (4,), seed=26), None), (torch.zeros(8)[::2], None),
                    (torch.zeros(0), None)):
        x = O.present(c.dev, x0)
        text = str(c.pkg.explain(x, out))
        assert re.search(re.escape(_reason(x, out)), text), (text, _reason(x, out))

