"""What the compiled entry checks on each device before it serves there (_compiled_entry.learn):
libtorch's answers against torch's own for tensors on that device, and the stream it would launch
on against torch's current stream. Where either differs the entry stands down on that device only:
its calls take the general path (same results), status() says why, and it warns once."""

import ctypes
import sys
import warnings

import pytest
import torch

import vgpu_support as S
from test_devices import _checked
from vgpu.serve import DEVICE_OF, STREAM_OF

pytestmark = pytest.mark.vgpu
N = 1024


def _pkg():
    import relu_flydsl

    return relu_flydsl, sys.modules["relu_flydsl._compiled_entry"], sys.modules["relu_flydsl._relu"]


@pytest.fixture
def two(vgpu, monkeypatch):
    dev = S.two_devices(vgpu)
    _, entry, relu_module = _pkg()
    if entry.not_loaded():
        pytest.skip(f"the compiled entry is not loaded: {entry.not_loaded()}")
    general = [0]
    check = relu_module._check

    def counted(*args, **kwargs):
        general[0] += 1
        return check(*args, **kwargs)

    monkeypatch.setattr(relu_module, "_check", counted)
    dev.general = general
    return dev


def _call(dev, device, seed):
    """relu(x, out=y) on `device`, checked (test_devices' _checked); returns whether the general path took it."""
    before = dev.general[0]
    _checked(dev, device, torch.float32, N, seed)
    assert dev.launches[-1].device == device
    return dev.general[0] > before


def _serves(dev, device, seeds):
    return [not _call(dev, device, seed) for seed in seeds]


def _answers_differ_on_device_1(entry, monkeypatch, wrong=lambda: True, devices=(1,)):
    """While the entry checks device 1 (learn; or each of `devices`), torch's answers say "a
    dispatch mode" where the entry's say nothing (as if libtorch answered otherwise for that
    device's tensors), while wrong()."""
    learning, learn, torch_decides = [None], entry.learn, entry.torch_decides

    def learn_marked(info, arch_reason):
        learning[0] = info.index
        try:
            return learn(info, arch_reason)
        finally:
            learning[0] = None

    def decides_on(x, out):
        want = torch_decides(x, out)
        return "a dispatch mode" if wrong() and learning[0] in devices and want is None else want

    monkeypatch.setattr(entry, "learn", learn_marked)
    monkeypatch.setattr(entry, "torch_decides", decides_on)


def test_both_devices_checked_then_served(two):
    entry = _pkg()[1]
    assert _serves(two, 0, (1, 2, 3)) == [False, True, True]
    assert _serves(two, 1, (4, 5, 6)) == [False, True, True]
    assert entry.status()["devices"] == {0: None, 1: None}


def test_answers_differing_on_one_device(two, monkeypatch):
    """torch's answers for device 1's tensors differ from the entry's: device 1 is served by
    the general path, bit-exact, with one warning and status() saying why; device 0 by the entry."""
    relu_flydsl, entry, _ = _pkg()
    _answers_differ_on_device_1(entry, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on_1 = _serves(two, 1, (1, 2, 3))
        on_0 = _serves(two, 0, (4, 5, 6))
    assert on_1 == [False, False, False], "device 1: the general path, every call"
    assert on_0 == [False, True, True], "device 0: the entry still serves"
    why = entry.status()["devices"][1]
    assert why and "differ from torch's" in why and entry.status()["devices"][0] is None
    mine = [w for w in caught if "does not serve device 1" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 6}


def test_stream_differing_on_one_device(two, monkeypatch):
    """The entry's DLPack stream query for device 1 disagrees with torch's current stream there:
    the entry does not learn device 1 (launching on a stream torch's work is not ordered with),
    whether or not device 1 is the current device."""
    relu_flydsl, entry, _ = _pkg()
    device_of = DEVICE_OF(lambda pointer: two.device_of(pointer, 0))
    stream_of = STREAM_OF(lambda index: two.stream[index] + (16 if index == 1 else 0))
    entry.present_cpu(True, ctypes.cast(device_of, ctypes.c_void_p).value,
                      ctypes.cast(stream_of, ctypes.c_void_p).value)
    entry.presenting = (device_of, stream_of)
    for current in (0, 1):
        relu_flydsl._dispatch.STATE.reset()
        two.set_device(current)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            on_1 = _serves(two, 1, (1, 2))
            on_0 = _serves(two, 0, (3, 4))
        assert on_1 == [False, False] and on_0 == [False, True], (current, on_1, on_0)
        assert "DLPack stream query" in entry.status()["devices"][1]
        assert [w for w in caught if "does not serve device 1" in str(w.message)]
        assert two.get_device() == current
    assert all(r.stream == two.stream[r.device] for r in two.launches)


def test_stand_down_ends_with_the_settings(two, monkeypatch):
    """A device the entry stood down on is checked again once the settings change (which drops
    every entry): the answers agree now, and the entry serves there."""
    _, entry, _ = _pkg()
    wrong = [True]
    _answers_differ_on_device_1(entry, monkeypatch, lambda: wrong[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _serves(two, 1, (1, 2)) == [False, False]
    wrong[0] = False
    monkeypatch.setenv("RELU_FLYDSL_RUNG", "v5")  # a settings change: everything relearned
    assert _serves(two, 1, (3, 4, 5)) == [False, True, True]
    assert entry.status()["devices"][1] is None
