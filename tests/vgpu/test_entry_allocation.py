"""relu(x)'s allocation in the compiled entry on a torch with named tensors (2.10-2.12): the shim
for a tensor without names, torch.empty_like (which keeps names) for a named one, asked of
libtorch's at::impl::has_names, bound only after it answered as torch does. This torch (2.13) has
no named tensors, so a stand-in has_names (a C callback answering for one chosen tensor) and a
torch.Tensor.has_names to match play torch 2.12's part; tools/torch_releases.py runs the real
one on 2.10-2.12."""

import ctypes
import sys

import pytest
import torch

import vgpu_support as S

pytestmark = pytest.mark.vgpu
HAS_NAMES = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
N = 256


class _Lib:
    """torch._C's handle, with a stand-in for at::impl::has_names."""

    def __init__(self, lib, names, has_names):
        self._lib, self._names, self._has_names = lib, names, has_names

    def __getattr__(self, name):
        return self._has_names if name == self._names else getattr(self._lib, name)


@pytest.fixture
def named_torch(vgpu, monkeypatch):
    """(entry module, the "named" tensor, set_answer(fn)): torch with named tensors, as 2.12."""
    entry = sys.modules["relu_flydsl._compiled_entry"]
    if entry.not_loaded():
        pytest.skip(f"the compiled entry is not loaded: {entry.not_loaded()}")
    named = torch.zeros(2)  # the tensor "with names": the probe, then the calls' x
    monkeypatch.setattr(torch.Tensor, "has_names", lambda self: self is named, raising=False)
    monkeypatch.setattr(entry, "_named_probe", lambda: named)
    answer = [lambda impl: impl == named._cdata]
    callback = HAS_NAMES(lambda impl: answer[0](impl or 0))
    lib = entry._libtorch()
    monkeypatch.setattr(entry, "_libtorch", lambda: _Lib(lib, entry.HAS_NAMES, callback))
    yield entry, named, answer
    monkeypatch.undo()
    entry.use_shim(True)  # as loaded: this torch's own allocation
    entry._init(entry._loaded)


def _count_empty_like(entry):
    calls = []

    def empty_like(t, *a, **k):
        calls.append(t)
        return torch.empty_like(t, *a, **k)

    entry._init(entry._loaded, empty_like=empty_like)
    return calls


def _call(vgpu, x, bits):
    vgpu.fresh_output(N * 4)
    y = sys.modules["relu_flydsl"].relu(x)
    S.assert_bits(y, S.relu_bits(bits, torch.float32))
    vgpu.check()
    return y


def test_a_named_x_allocates_with_empty_like(vgpu, named_torch):
    entry, named, _ = named_torch
    assert entry.use_shim(True) == "torch's C shim (a named x: torch.empty_like)"
    bits = S.make_bits("mixed", N, torch.float32, 3)
    x, _ = S.guarded_input(vgpu, bits, torch.float32)
    kept = [_call(vgpu, x, bits)]  # the general path makes the entry ready
    empty_like = _count_empty_like(entry)
    kept.append(_call(vgpu, x, bits))  # replayed: x has no names, the shim allocates (empty_like not called)
    assert empty_like == []
    assert entry._loaded.allocated_on() == (entry._torch_shim()[0][5], 0)  # the shim's "cuda", device 0
    # x "named" now (the stand-in answers for x's TensorImpl): empty_like, which keeps names
    named_torch[2][0] = lambda impl: impl == x._cdata
    kept.append(_call(vgpu, x, bits))
    assert empty_like == [x], "a named x's output comes from torch.empty_like"


@pytest.mark.parametrize("wrong", ["always", "never"])
def test_has_names_answering_otherwise_keeps_empty_like(vgpu, named_torch, wrong):
    """A has_names whose answers on a named and a plain probe are not torch's: no shim."""
    entry, _, answer = named_torch
    answer[0] = (lambda impl: True) if wrong == "always" else (lambda impl: False)
    how = entry.use_shim(True)
    assert how.startswith("torch.empty_like: libtorch's has_names answered"), how
    bits = S.make_bits("mixed", N, torch.float32, 4)
    x, _ = S.guarded_input(vgpu, bits, torch.float32)
    _call(vgpu, x, bits)
    empty_like = _count_empty_like(entry)
    _call(vgpu, x, bits)
    assert empty_like == [x]
