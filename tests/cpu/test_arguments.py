"""Bad arguments to relu() and warmup() fail clearly, naming what is accepted, and no
message quotes more than about 80 characters of the bad value.

    relu(x, rung=...)        None or a rung name: TypeError for another type (a list is
                             not hashable), ValueError for an unknown name
    RELU_FLYDSL_RUNG         an unknown value is ignored with a RuntimeWarning
    warmup(dtypes, rungs, vecs, devices)
                             TypeError for a wrong kind of value (None, a str device, a
                             bool), ValueError for an unknown dtype or rung, a device
                             that is absent or not a GPU; a bare dtype name is accepted
Public calls first, then the functions of relu_flydsl._inputs directly.
"""

import re
import uuid

import pytest
import torch

import relu_flydsl
import vgpu_support as S
from relu_flydsl import _inputs
from relu_flydsl.flash_relu_rocm.dtypes import DTYPES
from relu_flydsl.flash_relu_rocm.registry import RUNGS

QUOTE = 80    # characters of a bad value a message may quote
MESSAGE = 200  # a whole message: the quote, what is accepted, a few words
HUGE = "v" * 100_000
ABSENT = 2 ** 20  # no machine has this many GPUs
DTYPE_NAMES = {getattr(torch, name): name for name in DTYPES}


def _longest_run(text, ch):
    return max((len(m) for m in re.findall(f"{re.escape(ch)}+", text)), default=0)


def assert_short(message, bad_char="v"):
    assert len(message) <= MESSAGE, f"{len(message)} characters: {message[:300]}"
    assert _longest_run(message, bad_char) <= QUOTE, message[:300]


# ---- relu(rung=...) -------------------------------------------------------------------
@pytest.mark.parametrize("out", [False, True], ids=["relu(x)", "relu(x, out=y)"])
@pytest.mark.parametrize("rung", [["v5"], {"v5": 1}, {"v5"}, 5, b"v5", 5.0], ids=repr)
def test_a_rung_that_is_not_a_str_is_a_clear_type_error(rung, out):
    x = torch.randn(64)
    y = torch.full((64,), 7.0)
    with pytest.raises(TypeError) as e:
        relu_flydsl.relu(x, out=y if out else None, rung=rung)
    message = str(e.value)
    assert "rung" in message and all(name in message for name in RUNGS), message
    assert type(rung).__name__ in message, message
    assert torch.equal(y, torch.full((64,), 7.0)), "nothing is written on bad input"


@pytest.mark.parametrize("rung", [HUGE, ["v" * 100_000], "v" * 81, "v9 " * 40_000])
def test_a_huge_rung_is_quoted_short(rung):
    with pytest.raises((ValueError, TypeError)) as e:
        relu_flydsl.relu(torch.randn(8), rung=rung)
    assert_short(str(e.value))


def test_an_unknown_rung_names_the_rungs():
    with pytest.raises(ValueError) as e:
        relu_flydsl.relu(torch.randn(8), rung="v9")
    assert "'v9'" in str(e.value) and all(name in str(e.value) for name in RUNGS)
    assert_short(str(e.value))


def test_every_known_rung_and_none_are_accepted():
    x = torch.randn(33)
    for rung in [None, *RUNGS]:
        assert torch.equal(relu_flydsl.relu(x, rung=rung), torch.relu(x))


@pytest.mark.vgpu
def test_an_unhashable_rung_is_a_type_error_on_the_hot_path(vgpu):
    """Once a launch entry exists for this size, relu(x, out=y) takes the hot path,
    which looks the rung up in a dict: a list must still be a clear TypeError."""
    x, y = S.hot_path_pair(vgpu)
    assert any(k.startswith("flydsl/") for k in relu_flydsl.dispatch_stats())
    y.fill_(7.0)
    with pytest.raises(TypeError) as e:
        relu_flydsl.relu(x, out=y, rung=["v5"])
    assert "rung" in str(e.value) and "list" in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:
        relu_flydsl.relu(x, out=y, rung=HUGE)
    assert_short(str(e.value))
    assert torch.equal(y, torch.full_like(y, 7.0))


def test_an_over_long_rung_variable_is_echoed_short(monkeypatch):
    value = "v" * 99_990 + uuid.uuid4().hex[:10]  # unique: each value warns once per process
    monkeypatch.setenv("RELU_FLYDSL_RUNG", value)
    with pytest.warns(RuntimeWarning) as record:
        relu_flydsl.relu(torch.randn(8))
    messages = [str(w.message) for w in record if "RELU_FLYDSL_RUNG" in str(w.message)]
    assert messages, [str(w.message)[:200] for w in record]
    for message in messages:
        assert_short(message)
        assert all(name in message for name in RUNGS), message[:300]


# ---- warmup(...) ----------------------------------------------------------------------
def _served_named(message):
    return all(name in message for name in DTYPES)


def _warmup_refusal(exc, dtypes="bfloat16", bad_char="v", **kwargs):
    """warmup(dtypes, **kwargs)'s message: it raised exc itself (not a subclass) and is short."""
    with pytest.raises(exc) as e:
        relu_flydsl.warmup(dtypes, **kwargs)
    message = str(e.value)
    assert type(e.value) is exc, message[:300]
    assert_short(message, bad_char)
    return message


@pytest.mark.parametrize("dtypes,exc", [
    (None, TypeError),
    ([None], TypeError),
    (3, TypeError),
    ([3], TypeError),
    ({"bfloat16": 1}, TypeError),
    ("float64", ValueError),
    (torch.float64, ValueError),
    (["bfloat16", torch.uint8], ValueError),
    ("uint8", ValueError),
    (torch.int16, ValueError),
    (HUGE, ValueError),
    ([HUGE], ValueError),
], ids=lambda v: _inputs.short(v, 20))
def test_warmup_rejects_bad_dtypes_naming_the_served_ones(dtypes, exc):
    message = _warmup_refusal(exc, dtypes, devices=())
    assert _served_named(message), message[:300]


@pytest.mark.parametrize("devices,exc,words", [
    ([ABSENT], ValueError, "no device"),
    (ABSENT, ValueError, "no device"),
    ([-1], ValueError, "no device -1"),
    ([torch.device("cpu")], ValueError, "not a GPU"),
    ([torch.device("meta")], ValueError, "not a GPU"),
    (torch.device("cuda"), ValueError, "index"),
    ([torch.device("cuda", 100)], ValueError, "no device 100"),  # (torch.device keeps an int8 index)
    ("cuda:0", TypeError, "str"),
    (["cuda:0"], TypeError, "str"),
    (["0"], TypeError, "str"),
    ([None], TypeError, "NoneType"),
    ([True], TypeError, "bool"),
    ([1.0], TypeError, "float"),
    ({0: "a"}, TypeError, "dict"),
    (["x" * 100_000], TypeError, "str"),
], ids=lambda v: _inputs.short(v, 20))
def test_warmup_rejects_bad_devices_naming_what_is_accepted(devices, exc, words):
    message = _warmup_refusal(exc, devices=devices, bad_char="x")
    assert words in message, message[:300]
    assert "accepted" in message or "index" in message, message[:300]
    assert "Torch not compiled" not in message


@pytest.mark.parametrize("rungs,exc", [
    ([["v5"]], TypeError),
    ([None], TypeError),
    (5, TypeError),
    ("v9", ValueError),
    (HUGE, ValueError),
    ([HUGE], ValueError),
], ids=lambda v: _inputs.short(v, 20))
def test_warmup_rejects_bad_rungs(rungs, exc):
    message = _warmup_refusal(exc, rungs=rungs, devices=())
    assert all(name in message for name in RUNGS), message[:300]


@pytest.mark.parametrize("vecs,exc", [([0], ValueError), ([-8], ValueError), (["4"], TypeError), ([None], TypeError),
                                      ([True], TypeError), ("4", TypeError)])
def test_warmup_rejects_bad_vecs(vecs, exc):
    message = _warmup_refusal(exc, vecs=vecs, devices=())
    assert "positive int" in message, message


@pytest.mark.vgpu
def test_warmup_accepts_a_bare_dtype_name_a_dtype_and_lists(vgpu):
    """A bare name means that one dtype (documented in warmup_args), as a bare torch.dtype does."""
    one = relu_flydsl.warmup("float32")
    assert one.ready == [("v5", "float32", 4, 0)] and one.ok
    assert one == relu_flydsl.warmup(torch.float32) == relu_flydsl.warmup(["float32"])
    assert relu_flydsl.warmup(("float32", torch.float32)) == one  # the same dtype twice: once
    assert relu_flydsl.warmup("float32", devices=torch.device("cuda", 0)) == one
    assert relu_flydsl.warmup("float32", devices=range(1)) == one


@pytest.mark.vgpu
def test_warmup_refuses_a_device_the_hip_runtime_does_not_have(vgpu):
    """The virtual gfx950 has one device: device 1 is absent."""
    with pytest.raises(ValueError, match="no device 1 here; accepted: GPU indices 0..0"):
        relu_flydsl.warmup("float32", devices=[0, 1])


# ---- relu_flydsl._inputs, directly -----------------------------------------------------
def test_short_keeps_short_values_and_cuts_long_ones():
    assert _inputs.short("v5") == "'v5'"
    assert _inputs.short(None) == "None"
    cut = _inputs.short(HUGE)
    assert len(cut) <= QUOTE + 25 and cut.startswith("'vvv") and "100002 characters" in cut
    assert _longest_run(cut, "v") <= QUOTE

    class BadRepr:
        def __repr__(self):
            raise RuntimeError("no repr")

    assert _inputs.short(BadRepr()) == "<BadRepr object>"


def test_check_rung():
    for rung in [None, *RUNGS]:
        assert _inputs.check_rung(rung, RUNGS) is None
    with pytest.raises(TypeError, match=r"relu\(\): rung must be one of v1, v2, v3, v4, v5 \(a str\) or None, got list"):
        _inputs.check_rung(["v5"], RUNGS)

    class Sneaky(str):  # equal to "v5" but with its own hash
        __hash__ = None

    with pytest.raises(TypeError):
        _inputs.check_rung(Sneaky("v5"), RUNGS)
    with pytest.raises(ValueError, match=r"warmup\(\): unknown rung 'V5'; choose one of v1, v2, v3, v4, v5"):
        _inputs.check_rung("V5", RUNGS, "warmup()")


def _warmup_args(dtypes="bfloat16", rungs=None, vecs=None, devices=None, device_count=2):
    return _inputs.warmup_args(dtypes, rungs, vecs, devices, device_count, DTYPE_NAMES, RUNGS)


def test_warmup_args_normalizes():
    assert _warmup_args() == (("bfloat16",), None, None, None)
    assert _warmup_args(torch.float16) == (("float16",), None, None, None)
    assert _warmup_args(DTYPES) == (tuple(DTYPES), None, None, None)
    assert _warmup_args([torch.float32, "float32", "bfloat16"]) == (("float32", "bfloat16"), None, None, None)
    assert _warmup_args(rungs="v3") == (("bfloat16",), ("v3",), None, None)
    assert _warmup_args(rungs=["v1", "v4"], vecs=8) == (("bfloat16",), ("v1", "v4"), (8,), None)
    assert _warmup_args(devices=1) == (("bfloat16",), None, None, (1,))
    assert _warmup_args(devices=[torch.device("cuda", 1), 0]) == (("bfloat16",), None, None, (1, 0))
    assert _warmup_args(devices=range(2)) == (("bfloat16",), None, None, (0, 1))
    assert _warmup_args(devices=()) == (("bfloat16",), None, None, ())


def test_warmup_args_device_count_bounds_the_indices():
    assert _warmup_args(devices=[1], device_count=2)[3] == (1,)
    with pytest.raises(ValueError, match="no device 2 here; accepted: GPU indices 0..1"):
        _warmup_args(devices=[2], device_count=2)
    with pytest.raises(ValueError, match=r"no device 0 here; accepted: none \(this process sees no GPU\)"):
        _warmup_args(devices=[0], device_count=0)
