"""The compiled entry fails safe: wherever it cannot load (a damaged, missing or unlisted
binary, another platform or Python, the switch RELU_FLYDSL_ENTRY=0), relu() serves exactly
as through it, from Python, and says why once (one RuntimeWarning at the first call that
reaches the general path; _compiled_entry.status() names the reason). Each case reloads the
package's real loader (_compiled_entry.load()) against a changed copy of code_objects/ or a
changed check, then loads the shipped binary again."""

import contextlib
import hashlib
import json
import shutil
import sysconfig
import types
import warnings

import pytest
import torch

import relu_flydsl
from relu_flydsl import _compiled_entry, _objects, _relu
from relu_flydsl._state import STATE

NO_DEVICE = "fallback/not a ROCm device"


@contextlib.contextmanager
def _loaded_from(objects_dir, monkeypatch, **patches):
    """_compiled_entry.load() with code objects from `objects_dir` and module attributes
    patched; the shipped binary loaded again afterwards."""
    with monkeypatch.context() as mp:
        mp.setattr(_objects, "OBJECTS_DIR", objects_dir)
        for name, value in patches.items():
            mp.setattr(_compiled_entry, name, value)
        STATE.manifest = None
        try:
            yield _compiled_entry.load()
        finally:
            mp.undo()
            STATE.manifest = None
            assert _compiled_entry.load()["loaded"], _compiled_entry.status()
            STATE.reset()


def _objects_copy(tmp_path, change):
    dst = tmp_path / "code_objects"
    shutil.copytree(_objects.OBJECTS_DIR, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    change(dst, manifest)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def _flip(dst, manifest):
    path = dst / manifest["entry"]["file"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _remove(dst, manifest):
    (dst / manifest["entry"]["file"]).unlink()


def _unlist(dst, manifest):
    del manifest["entry"]


def _other_abi(dst, manifest):
    manifest["entry"]["abi"] = "cp314-abi3"


def _served_from_python(monkeypatch):
    """Three calls: torch's results, counted as through the compiled entry, the general path
    entered each time, one warning naming the reason."""
    entered = []
    check = _relu._check
    monkeypatch.setattr(_relu, "_check", lambda *a: entered.append(a) or check(*a))
    x = torch.tensor([-1.0, -0.0, float("nan"), 2.0])
    y = torch.empty_like(x)
    relu_flydsl.reset_dispatch_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [relu_flydsl.relu(x), relu_flydsl.relu(x, out=y), relu_flydsl.relu(x)]
    for g in got:
        assert torch.equal(g.view(torch.int32), torch.relu(x).view(torch.int32))
    assert relu_flydsl.dispatch_stats() == {NO_DEVICE: 3}
    assert len(entered) == 3, "the Python path serves every call"
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("change, reason", [(_flip, "does not match its sha256"), (_remove, "unreadable"),
                                            (_unlist, "no compiled entry in manifest.json"),
                                            (_other_abi, "built for cp314-abi3")],
                         ids=["damaged", "missing", "unlisted", "other-abi"])
def test_an_unusable_binary_is_not_loaded(tmp_path, monkeypatch, change, reason):
    with _loaded_from(_objects_copy(tmp_path, change), monkeypatch) as status:
        assert not status["loaded"] and reason in status["reason"], status
        assert _relu._compiled is None and STATE.replay is None
        messages = _served_from_python(monkeypatch)
        assert len(messages) == 1 and "compiled entry is not used" in messages[0] and reason in messages[0], messages


def test_a_damaged_binary_is_not_loaded(tmp_path, monkeypatch):
    """The sha256 check itself (the check mutant entry-sha256-unchecked must fail here)."""
    with _loaded_from(_objects_copy(tmp_path, _flip), monkeypatch) as status:
        assert not status["loaded"] and "sha256" in status["reason"], status


def _built_free_threaded(name):  # sysconfig of a free-threaded build (3.13t)
    return 1 if name == "Py_GIL_DISABLED" else sysconfig.get_config_var(name)


@pytest.mark.parametrize("patch, reason", [
    ({"PYTHONS": ((3, 12), (3, 13))}, "built for CPython 3.12-3.13"),
    ({"ENV_ENTRY": "RELU_FLYDSL_TEST_ENTRY_OFF"}, "disabled by RELU_FLYDSL_TEST_ENTRY_OFF"),
    ({"platform": types.SimpleNamespace(machine=lambda: "aarch64")}, "built for x86-64 Linux, not linux aarch64"),
    ({"sysconfig": types.SimpleNamespace(get_config_var=_built_free_threaded)}, "a free-threaded Python build"),
], ids=["other-python", "switched-off", "other-platform", "free-threaded-build"])
def test_where_it_cannot_serve_it_is_not_loaded(monkeypatch, patch, reason):
    monkeypatch.setenv("RELU_FLYDSL_TEST_ENTRY_OFF", "0")
    with _loaded_from(_objects.OBJECTS_DIR, monkeypatch, **patch) as status:
        assert not status["loaded"] and reason in status["reason"], status
        messages = _served_from_python(monkeypatch)
        # switched off on purpose: said by status(), not warned
        assert len(messages) == (0 if reason.startswith("disabled") else 1), messages


def test_the_shipped_binary_is_the_manifests(monkeypatch):
    """Loaded from the manifest's file, its sha256 the manifest's."""
    status = _compiled_entry.status()
    assert status["loaded"], status
    meta = _objects.manifest()["entry"]
    data = (_objects.OBJECTS_DIR / meta["file"]).read_bytes()
    assert status["sha256"] == meta["sha256"] == hashlib.sha256(data).hexdigest()



_NOT_FOUND = "torch's C shim, THPVariable_Wrap or has_names not found"


@pytest.mark.parametrize("patch, reason", [
    ({"WRAP": "_Z16no_such_wrapperv"}, _NOT_FOUND),
    ({"SHIM": ("aoti_torch_no_such_allocator",) + _compiled_entry.SHIM[1:]}, _NOT_FOUND),
    ({"HAS_NAMES": "_Z13no_such_namesv"}, _NOT_FOUND),
], ids=["no-wrapper", "no-shim", "named-tensors-without-has-names"])
def test_without_the_shim_relu_x_allocates_with_empty_like(monkeypatch, patch, reason):
    """Where torch lacks what relu(x)'s allocation through its C shim needs (or keeps named
    tensors, whose names empty_like keeps, without at::impl::has_names), the entry still loads
    and serves; status() says how relu(x) allocates and why (tests/vgpu/test_fast_fallback.py runs
    that allocation; tests/vgpu/test_entry_allocation.py the has_names binding)."""
    if "HAS_NAMES" in patch:  # a torch with named tensors (2.13 has none)
        monkeypatch.setattr(torch.Tensor, "has_names", lambda self: False, raising=False)
    with _loaded_from(_objects.OBJECTS_DIR, monkeypatch, **patch) as status:
        assert status["loaded"] and status["allocation"].startswith(f"torch.empty_like: {reason}"), status
        x = torch.tensor([-1.0, -0.0, float("nan"), 2.0])
        assert torch.equal(relu_flydsl.relu(x).view(torch.int32), torch.relu(x).view(torch.int32))
    monkeypatch.undo()  # (has_names too) and loaded again as shipped
    assert _compiled_entry.load()["allocation"] == "torch's C shim"
    STATE.reset()


# ---- what the entry asks libtorch (torch_decides) ----------------------------------------
class _UserMode(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _operands():
    """(what, x, out): every answer torch_decides gives, and tensors it must not flag."""
    t, u = torch.randn(4), torch.empty(4)
    with torch.inference_mode():
        frozen = torch.randn(4)
    grad = torch.randn(4, requires_grad=True)
    return [
        ("plain", t, None), ("out=", t, u), ("in place", t, t), ("int8", t.to(torch.int8), None),
        ("2-D view", torch.randn(3, 4)[1:], None), ("no grad leaf of a graph", (grad * 2).detach(), None),
        ("parameter", torch.nn.Parameter(torch.randn(4)), None),
        ("parameter without grad", torch.nn.Parameter(torch.randn(4), requires_grad=False), None),
        ("parameter out", t, torch.nn.Parameter(torch.empty(4), requires_grad=False)),
        ("not a tensor", [1.0], None), ("None", None, None), ("not a tensor out", t, 3),
        ("x requires grad", grad, None), ("x in a graph", grad * 2, None), ("out requires grad", t, grad),
        ("neg view", torch._neg_view(t), None), ("neg view out", t, torch._neg_view(u)),
        ("conj of real", t.conj(), None), ("inference x", frozen, None), ("inference out", t, frozen),
        ("meta", torch.empty(4, device="meta"), None),
        ("ZeroTensor", torch._efficientzerotensor(4), None), ("ZeroTensor view", torch._efficientzerotensor(8)[4:], None),
        ("ZeroTensor out", t, torch._efficientzerotensor(4)), ("functional", torch._to_functional_tensor(t), None),
        ("functional of a view", torch._to_functional_tensor(torch.randn(8)[4:]), None),
        ("functional out", t, torch._to_functional_tensor(u)),
        ("view of a functional out", t, torch._to_functional_tensor(torch.empty(8))[4:]),
    ]


def _answers(operands):
    entry = _compiled_entry._module
    return [(what, entry.decides(x, out), _compiled_entry.torch_decides(x, out)) for what, x, out in operands]


def _inside(transform, operands):
    seen = []

    def f(t):
        seen.extend(_answers(operands + [("the transform's own tensor", t, None)]))
        return t.sum()

    transform(f)(torch.ones(3))
    return seen


@pytest.mark.parametrize("state", ["plain", "no_grad", "inference_mode", "dispatch mode", "FakeTensorMode",
                                   "vmap", "grad", "vmap of grad"])
def test_the_entrys_questions_get_torchs_answers(state):
    """The entry's own questions to libtorch (subclass, dispatch mode, torch.func transform,
    autograd, neg bit, inference out, no memory of its own) answer as torch's Python API does, for every kind of
    operand, outside and inside grad modes, dispatch modes and transforms."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert _compiled_entry.status()["loaded"], _compiled_entry.status()
    operands = _operands()
    if state in ("vmap", "grad", "vmap of grad"):
        transform = {"vmap": torch.func.vmap, "grad": torch.func.grad,
                     "vmap of grad": lambda f: torch.func.vmap(torch.func.grad(f))}[state]
        seen = _inside(transform, operands)
        assert {got for _, got, _ in seen} == {"a torch.func transform", "not an exact torch.Tensor"}, seen
    else:
        with {"plain": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode,
              "dispatch mode": _UserMode, "FakeTensorMode": FakeTensorMode}[state]():
            seen = _answers(operands)
        if state in ("dispatch mode", "FakeTensorMode"):
            assert {got for _, got, _ in seen} == {"a dispatch mode", "not an exact torch.Tensor"}, seen
        else:
            assert {got for _, got, _ in seen} >= {None, "not an exact torch.Tensor", "x requires grad",
                                                   "out requires grad", "x is a neg-bit view",
                                                   "out is a neg-bit view", "out is an inference tensor",
                                                   "x has no memory of its own", "out has no memory of its own"}, seen
    wrong = [(what, got, want) for what, got, want in seen if got != want]
    assert not wrong, f"the entry's answers differ from torch's: {wrong}"


@pytest.mark.parametrize("patch, reason", [
    ({"QUERIES": _compiled_entry.QUERIES[:2] + (_compiled_entry.QUERIES[3], _compiled_entry.QUERIES[2])
      + _compiled_entry.QUERIES[4:]}, "libtorch's answers differ from torch's"),
    ({"QUERIES": _compiled_entry.QUERIES[:4] + ("_ZNK3c1010TensorImpl12no_such_flagEv",)},
     "libtorch's answers for the entry not found"),
    ({"TENSOR_AT": _compiled_entry.TENSOR_AT + 8}, "tensor object does not hold its at::Tensor at byte"),
    ({"BUMP": (_compiled_entry.QUERIES[2],)}, "libtorch's bump_version moved (base, view, other tensor) by (0, 0, 0)"),
    ({"BUMP": ("_Z12no_such_bumpv",)}, "libtorch's answers for the entry not found"),
], ids=["answers-differ", "missing", "other-layout", "bump-does-not-bump", "no-bump"])
def test_where_libtorch_answers_otherwise_the_entry_is_not_loaded(monkeypatch, patch, reason):
    """The entry's questions are checked against torch's own answers before it loads: a function
    that answers another question (is_neg and is_inference swapped), one that is missing, a
    tensor object laid out otherwise, a bump_version that does not bump as torch's in-place op does
    (here is_neg bound in its place) or none leave relu() on the Python path, which says why once."""
    with _loaded_from(_objects.OBJECTS_DIR, monkeypatch, **patch) as status:
        assert not status["loaded"] and reason in status["reason"], status
        assert _relu._compiled is None and STATE.replay is None
        messages = _served_from_python(monkeypatch)
        assert len(messages) == 1 and reason in messages[0], messages


def test_a_torch_without_what_the_check_needs_keeps_the_entry_unloaded(monkeypatch):
    """A torch lacking a function the check before loading calls (here the torch.func level it
    enters) leaves the entry unloaded, with the reason; the package itself imports and serves."""
    with monkeypatch.context() as mp:
        mp.delattr(torch._C._functorch, "_grad_increment_nesting")
        status = _compiled_entry.load()
        assert not status["loaded"] and "_grad_increment_nesting" in status["reason"], status
        x = torch.tensor([-1.0, 2.0])
        with pytest.warns(RuntimeWarning, match="compiled entry is not used .*_grad_increment_nesting"):
            assert torch.equal(relu_flydsl.relu(x), torch.relu(x))
    assert _compiled_entry.load()["loaded"], _compiled_entry.status()
    STATE.reset()


def test_the_entry_bumps_as_torch_and_allocates_as_empty_like():
    """The loaded entry's bump_version and relu(x)'s allocation through the shim answer their probes
    (what load() and use_shim() check before trusting them) on this torch."""
    module = _compiled_entry._loaded
    assert _compiled_entry.status()["loaded"] and _compiled_entry.status()["allocation"] == "torch's C shim"
    _compiled_entry._check_bump(module)
    assert _compiled_entry._allocation_differs(module) is None
    t = torch.zeros(3)
    before = t._version
    module.bumped(t)
    assert t._version == before + 1
    with torch.inference_mode():
        frozen = torch.zeros(3)
    with pytest.raises(TypeError, match="not an inference tensor"):
        module.bumped(frozen)  # (torch would throw: inference tensors have no version counter)
