"""relu_flydsl.relu accepts what torch.relu accepts, with torch's result or torch's own error.

Each case is compared, through the public relu(), with what torch does for the same call:
    relu(x)             torch.relu(x)
    relu(x, out=x)      torch.relu_(x)                      (torch's in-place relu)
    relu(x, out=y)      torch.clamp_min(x, 0, out=y)        (torch.relu's kernel with an out)
Same type (subclasses included), layout, dtype, nesting, quantization and values; where
torch raises, the same exception type, and an `out` left as it was.
Inputs: sparse COO (coalesced, uncoalesced, hybrid), CSR, CSC, BSR, BSC; mkldnn; nested
(jagged, strided); quantized (per tensor; per channel, which torch.relu rejects); inference
tensors inside and outside inference mode; nn.Parameter; __torch_function__ and
__torch_dispatch__ subclasses; FakeTensor (FakeTensorMode) and meta; torch.func vmap, grad,
jvp, jacrev, jacfwd, hessian, functionalize and nested transforms.
The same table runs on the virtual gfx950 (CPU tensors seen as gfx950 memory), where
the kernel path must not take any of these inputs.
"""

import contextlib
import warnings

import pytest
import torch
from torch.func import functionalize, grad, hessian, jacfwd, jacrev, jvp, vmap

import relu_flydsl
import vgpu_support as S
from relu_flydsl import _inputs

warnings.filterwarnings("ignore", message=".*(sparse|nested|quantiz|TypedStorage).*")

VALUES = [[-1.5, 2.0, 0.0, -0.0], [3.0, -4.0, 0.25, -1e-30]]  # negatives, both zeros, a tiny negative


def _dense(dtype=torch.float32):
    return torch.tensor(VALUES, dtype=dtype)


# ---- tensor subclasses --------------------------------------------------------------
class FunctionSubclass(torch.Tensor):
    """A __torch_function__ subclass (the default handler keeps the type)."""


class LoggingSubclass(torch.Tensor):
    """A __torch_function__ subclass that records the torch functions it sees."""

    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class WrapperSubclass(torch.Tensor):
    """A __torch_dispatch__ wrapper: no storage of its own; aten ops run on `elem`. Results are
    wrapped again (out= and in-place ops return their argument), as the compared result types need."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda a: a.elem if isinstance(a, WrapperSubclass) else a  # noqa: E731
        wrap = lambda a: WrapperSubclass(a) if isinstance(a, torch.Tensor) and not isinstance(a, WrapperSubclass) else a  # noqa: E731
        tree = torch.utils._pytree
        out = func(*tree.tree_map(unwrap, args), **tree.tree_map(unwrap, kwargs or {}))
        if func._schema.is_mutable:  # out= and in-place ops return the (wrapped) argument they wrote
            return kwargs["out"] if "out" in (kwargs or {}) else args[0]
        return tree.tree_map(wrap, out)


def _quantized(dtype):
    return torch.quantize_per_tensor(_dense(), 0.25, 2 if dtype == torch.quint8 else 0, dtype)


# Each case: a function making a fresh x, and the context it runs in.
CASES = {
    "sparse_coo": (lambda: _dense().to_sparse(), None),
    "sparse_coo_uncoalesced": (lambda: torch.sparse_coo_tensor([[0, 0, 1], [1, 1, 2]], [-1.0, 3.0, -2.0], (2, 4)), None),
    "sparse_coo_hybrid": (lambda: _dense().to_sparse(1), None),
    "sparse_csr": (lambda: _dense().to_sparse_csr(), None),
    "sparse_csc": (lambda: _dense().to_sparse_csc(), None),
    "sparse_bsr": (lambda: _dense().to_sparse_bsr((1, 2)), None),
    "sparse_bsc": (lambda: _dense().to_sparse_bsc((2, 1)), None),
    "mkldnn": (lambda: _dense().to_mkldnn(), None),
    "nested_jagged": (lambda: torch.nested.nested_tensor([_dense()[0, :3].reshape(1, 3), _dense()[:, 1:]],
                                                         layout=torch.jagged), None),
    "nested_strided": (lambda: torch.nested.nested_tensor([_dense()[0], _dense()[1, :2]]), None),
    "quantized_quint8": (lambda: _quantized(torch.quint8), None),
    "quantized_qint8": (lambda: _quantized(torch.qint8), None),
    "quantized_qint32": (lambda: _quantized(torch.qint32), None),
    "quantized_per_channel": (lambda: torch.quantize_per_channel(_dense(), torch.tensor([0.25, 0.5]),
                                                                 torch.tensor([0, 1]), 0, torch.quint8), None),
    "parameter": (lambda: torch.nn.Parameter(_dense(), requires_grad=False), None),
    "function_subclass": (lambda: _dense().as_subclass(FunctionSubclass), None),
    "logging_subclass": (lambda: _dense().as_subclass(LoggingSubclass), None),
    "dispatch_subclass": (lambda: WrapperSubclass(_dense()), None),
    "dispatch_subclass_bf16": (lambda: WrapperSubclass(_dense(torch.bfloat16)), None),
    "meta": (lambda: torch.empty(2, 4, device="meta"), None),
    "fake": (lambda: torch.tensor(VALUES), "fake"),
    "real_in_fake_mode": (lambda: torch.tensor(VALUES), "fake-after"),  # torch refuses real tensors there
    "inference_tensor": (lambda: _inference(_dense()), None),
    "inference_tensor_in_mode": (lambda: _inference(_dense()), "inference"),
    "normal_tensor_in_inference_mode": (lambda: _dense(), "inference"),
}
FORMS = ["relu", "out=x", "out=new"]


def _inference(t):
    with torch.inference_mode():
        return t.clone()


def _make(case, stack):
    """A fresh x for `case`, with its context entered on `stack`."""
    make, kind = CASES[case]
    if kind == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        stack.enter_context(FakeTensorMode())
        return make()
    if kind == "fake-after":  # a real tensor, then the mode
        from torch._subclasses.fake_tensor import FakeTensorMode

        x = make()
        stack.enter_context(FakeTensorMode())
        return x
    if kind == "inference":
        stack.enter_context(torch.inference_mode())
    return make()


def _new_like(x):
    if isinstance(x, WrapperSubclass):
        return WrapperSubclass(torch.empty_like(x.elem))
    return torch.empty_like(x)


def _call(x, form, impl):
    """One call in `form` by `impl` ("torch" or "relu"): (result, out, out's content
    before the call); on an exception, out and that content ride on it as `relu_out`."""
    if form == "relu":
        return (torch.relu(x) if impl == "torch" else relu_flydsl.relu(x)), None, None
    out = x if form == "out=x" else _new_like(x)
    before = _snapshot(out)
    try:
        if impl == "torch":
            result = torch.relu_(x) if out is x else torch.clamp_min(x, 0, out=out)
        else:
            result = relu_flydsl.relu(x, out=out)
    except Exception as e:
        e.relu_out = (out, before)
        raise
    return result, out, before


# ---- comparing results --------------------------------------------------------------
def _bits(t):
    """A plain tensor's values as integers of the same width (so -0.0 != 0.0)."""
    t = t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t
    if t.dtype.is_floating_point:
        return t.contiguous().view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def _content(t):
    """What a result holds, in a form torch.equal can compare (None: no values, e.g. meta)."""
    if isinstance(t, WrapperSubclass):
        return ("wrapper", _content(t.elem))
    if t.is_meta or type(t).__name__ == "FakeTensor":
        return None
    if t.is_nested:
        return ("nested", [_bits(c) for c in t.unbind()])
    if t.layout == torch.sparse_coo:
        return ("coo", t.is_coalesced(), _bits(t._indices()), _bits(t._values()))
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return ("compressed", _bits(t.crow_indices()), _bits(t.col_indices()), _bits(t.values()))
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return ("compressed", _bits(t.ccol_indices()), _bits(t.row_indices()), _bits(t.values()))
    if t.layout == torch._mkldnn:
        return ("mkldnn", _bits(t.to_dense()))
    if t.is_quantized:
        return ("quantized", t.qscheme(), t.q_scale(), t.q_zero_point(), _bits(t.int_repr()))
    return ("dense", _bits(t))


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(p, q) for p, q in zip(a, b))
    return a == b


def _describe(t):
    shape = None if t.is_nested else tuple(t.shape)  # nested: each component's shape is compared in _content
    return (type(t), t.layout, t.dtype, t.device, t.is_nested, t.is_quantized, t.is_inference(), shape)


def assert_same(actual, expected):
    assert _describe(actual) == _describe(expected)
    assert _equal(_content(actual), _content(expected)), (_content(actual), _content(expected))


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # torch's error is part of torch's answer
        return None, e


def _snapshot(out):
    if out is None:
        return None
    try:
        return _content(out)
    except Exception:
        return None


def _assert_torch_error(error, torch_error):
    assert error is not None, f"torch raised {type(torch_error).__name__}: {str(torch_error)[:200]}; relu() returned"
    assert type(error) is type(torch_error), (
        f"torch raised {type(torch_error).__name__}: {str(torch_error)[:300]}\n"
        f"relu() raised {type(error).__name__}: {str(error)[:300]}")
    out, before = getattr(error, "relu_out", (None, None))
    if before is not None:  # (torch itself writes before some of its errors; relu() must not)
        assert _equal(_snapshot(out), before), "relu() wrote into out, then raised"


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_relu_matches_torch(case, form):
    with contextlib.ExitStack() as stack:
        x = _make(case, stack)  # outside _outcome: a case that cannot be built fails the test
        expected, torch_error = _outcome(lambda: _call(x, form, "torch"))
    with contextlib.ExitStack() as stack:
        x = _make(case, stack)
        actual, error = _outcome(lambda: _call(x, form, "relu"))
    if torch_error is not None:
        _assert_torch_error(error, torch_error)
        return
    assert error is None, f"torch returned; relu() raised {type(error).__name__}: {str(error)[:500]}"
    (result, out, _), (want, want_out, _) = actual, expected
    assert_same(result, want)
    if form != "relu":
        assert result is out  # relu returns its out, as torch returns its out / self
        assert want is want_out


# A plain x with an out torch must handle (layout or nesting): torch's answer too.
OUT_KINDS = {
    "sparse_coo": lambda: torch.zeros(2, 4).to_sparse(),
    "sparse_csr": lambda: torch.zeros(2, 4).to_sparse_csr(),
    "nested_strided": lambda: torch.nested.nested_tensor([torch.zeros(4), torch.zeros(4)]),
    "function_subclass": lambda: torch.zeros(2, 4).as_subclass(FunctionSubclass),
    "dispatch_subclass": lambda: WrapperSubclass(torch.zeros(2, 4)),
}


@pytest.mark.parametrize("kind", sorted(OUT_KINDS))
def test_a_plain_x_with_an_out_torch_must_handle(kind):
    expected, torch_error = _outcome(lambda: torch.clamp_min(_dense(), 0, out=OUT_KINDS[kind]()))
    out = OUT_KINDS[kind]()
    before = _snapshot(out)
    actual, error = _outcome(lambda: relu_flydsl.relu(_dense(), out=out))
    if torch_error is not None:
        if error is not None:
            error.relu_out = (out, before)
        _assert_torch_error(error, torch_error)
        return
    assert error is None, f"torch returned; relu() raised {type(error).__name__}: {str(error)[:500]}"
    assert actual is out
    assert_same(actual, expected)


@pytest.mark.parametrize("kind", ["function_subclass", "dispatch_subclass", "sparse_coo"])
def test_relus_own_out_contract_holds_where_torch_serves(kind):
    """torch would resize a wrongly shaped out, or cast into another dtype; relu()
    refuses both for every input (its documented contract), writing nothing."""
    make = {"function_subclass": lambda t: t.as_subclass(FunctionSubclass), "dispatch_subclass": WrapperSubclass,
            "sparse_coo": lambda t: t.to_sparse()}[kind]
    x = make(_dense())
    wrong_shape = make(torch.full((3, 4), 7.0))
    with pytest.raises(ValueError, match="shape"):
        relu_flydsl.relu(x, out=wrong_shape)
    assert _equal(_content(wrong_shape), _content(make(torch.full((3, 4), 7.0))))
    wrong_dtype = make(torch.full((2, 4), 7.0, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        relu_flydsl.relu(x, out=wrong_dtype)
    assert _equal(_content(wrong_dtype), _content(make(torch.full((2, 4), 7.0, dtype=torch.float64))))


def test_logging_subclass_sees_torch_functions():
    """A __torch_function__ subclass is handed to torch: its handler sees a torch call."""
    LoggingSubclass.seen.clear()
    y = relu_flydsl.relu(_dense().as_subclass(LoggingSubclass))
    assert type(y) is LoggingSubclass
    assert LoggingSubclass.seen, "no torch function reached the subclass's __torch_function__"


# ---- torch.func transforms ----------------------------------------------------------
def _sum_of(f):
    return lambda t: f(t).sum()


TRANSFORMS = {
    "vmap": lambda f: vmap(f),
    "vmap_in_dims_1": lambda f: vmap(f, in_dims=1),
    "grad": lambda f: grad(_sum_of(f)),
    "jvp": lambda f: (lambda t: jvp(f, (t,), (torch.ones_like(t),))),
    "jacrev": lambda f: jacrev(f),
    "jacfwd": lambda f: jacfwd(f),
    "hessian": lambda f: hessian(_sum_of(f)),
    "functionalize": lambda f: functionalize(f),
    "vmap(grad)": lambda f: vmap(grad(_sum_of(f))),
    "grad(vmap)": lambda f: grad(lambda t: vmap(f)(t).sum()),
    "vmap(vmap)": lambda f: vmap(vmap(f)),
    "vmap(jvp)": lambda f: vmap(lambda t: jvp(f, (t,), (torch.ones_like(t),))),
    "vmap(jacrev)": lambda f: vmap(jacrev(f)),
    "jacrev(jacrev)": lambda f: jacrev(jacrev(f)),
    "grad(grad)": lambda f: grad(lambda t: grad(_sum_of(f))(t).sum()),
    "captured_in_vmap": lambda f: vmap(lambda t: t + f(CAPTURED)),  # a tensor from outside the transform
}
CAPTURED = torch.tensor([-1.0, 0.5, 0.0, 2.0])


def _relu_forms(relu_fn, relu_inplace, clamp_out):
    return {
        "relu": relu_fn,
        "out=x": lambda t: relu_inplace(t.clone()),
        "out=new": lambda t: clamp_out(t, torch.empty_like(t)),
    }


TORCH_FORMS = _relu_forms(torch.relu, torch.relu_, lambda t, o: torch.clamp_min(t, 0, out=o))
RELU_FORMS = _relu_forms(relu_flydsl.relu, lambda t: relu_flydsl.relu(t, out=t),
                         lambda t, o: relu_flydsl.relu(t, out=o))


def _flat(result):
    if isinstance(result, torch.Tensor):
        return [result]
    return [t for r in result for t in _flat(r)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_relu_under_torch_func_matches_torch(transform, form):
    x = torch.tensor([[-1.5, 2.0, 0.0, -0.5], [3.0, -4.0, 0.25, 1.0], [0.0, -0.0, 7.0, -7.0]])
    wrap = TRANSFORMS[transform]
    want, torch_error = _outcome(lambda: wrap(TORCH_FORMS[form])(x))
    got, error = _outcome(lambda: wrap(RELU_FORMS[form])(x))
    if torch_error is not None:
        _assert_torch_error(error, torch_error)
        return
    assert error is None, f"torch returned; relu() raised {type(error).__name__}: {str(error)[:500]}"
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_same(a, b)


def test_grad_of_relu_is_torchs_gradient():
    """Not vacuous: the gradient is relu's (1 where x > 0), and relu() gives it too."""
    x = torch.tensor([-1.0, 0.0, 2.0, -0.0, 3.0])
    g = grad(lambda t: relu_flydsl.relu(t).sum())(x)
    assert g.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]


# ---- on the virtual gfx950: none of these reach the kernel --------------------------
# Plain dense tensors the kernel may serve (the bit-exactness suites cover them; their
# memory is not registered with the virtual device here). Every other case must never
# reach the kernel.
KERNEL_MAY_SERVE = {("parameter", f) for f in FORMS} | {("normal_tensor_in_inference_mode", f) for f in FORMS} | {
    ("inference_tensor_in_mode", f) for f in FORMS} | {("inference_tensor", "relu"), ("inference_tensor", "out=new")}


@pytest.mark.vgpu
@pytest.mark.parametrize("case,form", [(c, f) for c in sorted(CASES) for f in FORMS if (c, f) not in KERNEL_MAY_SERVE])
def test_relu_matches_torch_on_the_virtual_gfx950(vgpu, case, form):
    """CPU tensors are gfx950 memory here: the kernel path would read these inputs' raw
    memory (or the data pointer of a wrapper without storage). Same answers as on CPU,
    and no FlyDSL call."""
    test_relu_matches_torch(case, form)
    assert not [k for k in relu_flydsl.dispatch_stats() if k.startswith("flydsl/")], relu_flydsl.dispatch_stats()


@pytest.mark.vgpu
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("transform", ["vmap", "grad", "jvp", "jacrev", "vmap(grad)", "captured_in_vmap"])
def test_relu_under_torch_func_on_the_virtual_gfx950(vgpu, transform, form):
    test_relu_under_torch_func_matches_torch(transform, form)
    assert not [k for k in relu_flydsl.dispatch_stats() if k.startswith("flydsl/")], relu_flydsl.dispatch_stats()


@pytest.mark.vgpu
def test_inference_out_is_refused_after_the_kernel_served_that_shape(vgpu):
    """torch refuses to write an inference tensor outside inference mode, also when
    relu()'s hot path holds a launch entry for that size and alignment."""
    x, _ = S.hot_path_pair(vgpu)
    assert any(k.startswith("flydsl/") for k in relu_flydsl.dispatch_stats())
    with torch.inference_mode():
        y = torch.full((4096,), 7.0)
    vgpu.register(y, name="inference out")
    with pytest.raises(RuntimeError, match="(?i)inplace update to (an )?inference tensor outside InferenceMode"):
        relu_flydsl.relu(x, out=y)
    assert torch.equal(y, torch.full((4096,), 7.0))


# ---- needs_torch / why_torch, directly ----------------------------------------------
def _decisions(case, form):
    with contextlib.ExitStack() as stack:
        x = _make(case, stack)
        if form == "out=new":
            try:
                out = _new_like(x)
            except (NotImplementedError, AssertionError):  # mkldnn: no empty_like; fake mode: real x
                out = torch.empty(2, 4)
        else:
            out = None if form == "relu" else x
        return _inputs.needs_torch(x, out), _inputs.why_torch(x, out)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_why_torch_gives_a_reason_exactly_when_needs_torch_says_so(case, form):
    needs, why = _decisions(case, form)
    assert needs == (why is not None), (needs, why)
    plain = case in ("parameter", "meta", "normal_tensor_in_inference_mode", "inference_tensor_in_mode") or (
        case == "inference_tensor" and form != "out=x")
    assert needs == (not plain), (case, form, why)


@pytest.mark.parametrize("case", ["sparse_coo", "sparse_csr", "nested_jagged", "quantized_qint8", "logging_subclass"])
def test_an_input_only_torch_serves_is_counted_with_its_reason(case):
    """relu() hands it to torch and dispatch_stats() counts it once, under why_torch's reason."""
    with contextlib.ExitStack() as stack:
        x = _make(case, stack)
        why = _inputs.why_torch(x, None)
        relu_flydsl.reset_dispatch_stats()
        relu_flydsl.relu(x)
        assert why and relu_flydsl.dispatch_stats() == {f"fallback/{why}": 1}


def test_needs_torch_inside_transforms_and_for_non_tensors():
    x = torch.randn(3, 4)
    seen = []
    vmap(lambda t: seen.append((_inputs.needs_torch(t, None), _inputs.why_torch(t, None))) or t)(x)
    grad(lambda t: seen.append((_inputs.needs_torch(t, None), _inputs.why_torch(t, None))) or t.sum())(x[0])
    assert seen == [(True, "torch.func transform")] * 2
    assert _inputs.needs_torch(x, None) is False and _inputs.why_torch(x, None) is None
    assert _inputs.needs_torch([1.0], None) is False and _inputs.needs_torch(x, [1.0]) is False  # left to validation


@pytest.mark.vgpu
@pytest.mark.parametrize("kind", sorted(OUT_KINDS))
def test_a_plain_x_with_an_out_torch_must_handle_on_the_virtual_gfx950(vgpu, kind):
    test_a_plain_x_with_an_out_torch_must_handle(kind)
    assert not [k for k in relu_flydsl.dispatch_stats() if k.startswith("flydsl/")], relu_flydsl.dispatch_stats()


@pytest.mark.vgpu
@pytest.mark.parametrize("transform", ["functionalize", "vmap", "grad", "jvp"])
def test_transforms_after_the_kernel_served_that_size(vgpu, transform):
    """relu()'s hot path holds a launch entry for 4096 float32 elements; the same size
    inside a transform (a functionalize wrapper's data pointer reads as 0, a batched
    tensor has none) must still get torch's answer, never a launch."""
    x, y = S.hot_path_pair(vgpu)
    served = relu_flydsl.dispatch_stats()
    assert any(k.startswith("flydsl/") for k in served), served
    launches = len(vgpu.launches)
    batch = x.reshape(1, 4096) if transform == "vmap" else x
    for form in ("out=x", "out=new"):
        want, torch_error = _outcome(lambda: _flat(TRANSFORMS[transform](TORCH_FORMS[form])(batch)))
        got, error = _outcome(lambda: _flat(TRANSFORMS[transform](RELU_FORMS[form])(batch)))
        if torch_error is not None:
            _assert_torch_error(error, torch_error)
        else:
            assert error is None, f"{form}: relu() raised {type(error).__name__}: {str(error)[:300]}"
            for a, b in zip(got, want):
                assert_same(a, b)
    assert len(vgpu.launches) == launches, "a launch under a torch.func transform"
    assert {k: v for k, v in relu_flydsl.dispatch_stats().items() if k.startswith("flydsl/")} == {
        k: v for k, v in served.items() if k.startswith("flydsl/")}
