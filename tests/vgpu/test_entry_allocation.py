"""relu(x)'s allocation in the compiled entry on a torch with named tensors (2.10-2.12): the shim
for a tensor without names, torch.empty_like (which keeps names) for a named one, asked of
libtorch's at::impl::has_names, bound only after it answered as torch does. This torch (2.13) has
no named tensors, so a stand-in has_names (a C callback answering for one chosen tensor) and a
torch.Tensor.has_names to match play torch 2.12's part; tools/torch_releases.py runs the real
one on 2.10-2.12.

Each scenario is a function of test_hot_path's `Ctx`, so tests/test_mutations.py runs them
against mutated copies of the package too."""

import ctypes

import pytest
import torch

import vgpu_support as S
from test_hot_path import F32, Ctx

pytestmark = pytest.mark.vgpu
HAS_NAMES = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
N = 256


class _Lib:
    """torch._C's handle, with a stand-in for at::impl::has_names."""

    def __init__(self, lib, names, has_names):
        self._lib, self._names, self._has_names = lib, names, has_names

    def __getattr__(self, name):
        return self._has_names if name == self._names else getattr(self._lib, name)


class _NamedTorch:
    """torch as 2.12 for c's package: Tensor.has_names true for `named`, libtorch's has_names a
    stand-in answering answer(impl). restore() puts this torch's own allocation back."""

    def __init__(self, c):
        self.c, self.entry = c, c.entry
        self.own = c.entry._torch_shim()  # this torch's allocation, to restore
        self.named = named = torch.zeros(2)
        self.answer = lambda impl: impl == named._cdata
        self.callback = HAS_NAMES(lambda impl: bool(self.answer(impl or 0)))
        lib = c.entry._libtorch()
        c.mp.setattr(torch.Tensor, "has_names", lambda t: t is self.named, raising=False)
        c.mp.setattr(c.entry, "_named_probe", lambda: named)
        c.mp.setattr(c.entry, "_libtorch", lambda: _Lib(lib, c.entry.HAS_NAMES, self.callback))

    def count_empty_like(self):
        calls = []

        def empty_like(t, *a, **k):
            calls.append(t)
            return torch.empty_like(t, *a, **k)

        self.entry._init(self.entry._loaded, empty_like=empty_like)
        return calls

    def restore(self):
        self.entry._allocate_with(self.entry._loaded, self.own)
        self.entry._init(self.entry._loaded)


def _call(c, x, bits, kept):
    c.dev.fresh_output(N * 4)
    y = c.relu(x)
    S.assert_bits(y, S.relu_bits(bits, F32))
    c.dev.check()
    kept.append(y)  # its memory stays registered, never handed out again


def entry_named_x_allocates_with_empty_like(c):
    """x without names: the shim allocates; x with names: torch.empty_like, which keeps them."""
    t = _NamedTorch(c)
    try:
        assert c.entry.use_shim(True) == "torch's C shim (a named x: torch.empty_like)"
        bits = S.make_bits("mixed", N, F32, 3)
        x, _ = S.guarded_input(c.dev, bits, F32)
        kept = []
        _call(c, x, bits, kept)  # the general path makes the entry ready
        empty_like = t.count_empty_like()
        general = c.general
        _call(c, x, bits, kept)  # replayed: x has no names
        assert c.general == general, "relu(x) of a ready entry is the compiled entry's"
        assert empty_like == [], "x without names: the shim allocates"
        assert c.entry._loaded.allocated_on() == (t.own[0][5], 0)  # asked of the shim for ("cuda", 0)
        t.answer = lambda impl: impl == x._cdata  # x has names now
        _call(c, x, bits, kept)
        assert c.general == general and empty_like == [x], "a named x's output comes from torch.empty_like"
    finally:
        t.restore()


def entry_has_names_checked_before_use(c):
    """A has_names that does not answer as torch does on a named and a plain probe (always
    true, never true) is not used: relu(x) allocates with torch.empty_like, status() says why."""
    t = _NamedTorch(c)
    try:
        for wrong in (lambda impl: True, lambda impl: False):
            t.answer = wrong
            how = c.entry.use_shim(True)
            assert how.startswith("torch.empty_like: libtorch's has_names answered"), how
            bits = S.make_bits("mixed", N, F32, 4)
            x, _ = S.guarded_input(c.dev, bits, F32)
            kept = []
            _call(c, x, bits, kept)
            empty_like = t.count_empty_like()
            _call(c, x, bits, kept)
            assert empty_like == [x]
            c.entry._init(c.entry._loaded)
    finally:
        t.restore()


SCENARIOS = {f.__name__: f for f in (entry_named_x_allocates_with_empty_like, entry_has_names_checked_before_use)}


@pytest.mark.parametrize("name", SCENARIOS)
def test_entry_allocation(vgpu, monkeypatch, name):
    import relu_flydsl

    c = Ctx(relu_flydsl, vgpu, monkeypatch)
    if c.entry.not_loaded():
        pytest.skip(f"the compiled entry is not loaded: {c.entry.not_loaded()}")
    SCENARIOS[name](c)
