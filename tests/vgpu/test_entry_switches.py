"""Every setting through the compiled entry (_compiled_entry.c), on the virtual gfx950: each
switch changed between calls while entries are ready gives exactly what relu()'s general path
gives, call by call (result bits, dispatch_stats(), launches, canaries), compared with the
same calls with the entry off (`_compiled_entry.use(False)`): the kill switch
RELU_FLYDSL_DISABLE in every spelling _state.Settings accepts and some it refuses, the canary
switch RELU_FLYDSL_CANARY and the default rung RELU_FLYDSL_RUNG. The kill switch also holds
inside the entry itself, for an entry added after it was read. After the entry is unloaded,
relu() no longer calls it: the general path takes and counts every call, and the one warning
says what changed.

Each scenario is a function of test_hot_path's `Ctx`, so tests/test_mutations.py runs them
against mutated copies of the package (mutation_support.DISPATCH_MUTANTS names them)."""

import warnings

import pytest
import torch

import vgpu_support as S
from test_hot_path import F32, scenario_test
from vgpu.serve import canary_memory_for, present_cpu

pytestmark = pytest.mark.vgpu
N = 256
DISABLE, RUNG, CANARY = "RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG", "RELU_FLYDSL_CANARY"
KILLED = "fallback/disabled by RELU_FLYDSL_DISABLE"
NO_DEVICE = "fallback/not a ROCm device"


def _spellings(*words):
    """Each word as written, in capitals, capitalised, and padded with white space."""
    out = []
    for w in words:
        for s in (w, w.upper(), w.capitalize(), f" {w} ", f"\t{w.upper()}\n"):
            if s not in out:
                out.append(s)
    return out


ON, OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")  # the documented spellings (README, SETTINGS)
KILL_ON = _spellings(*ON)  # what _state.Settings reads as the kill switch, in any case, padded
KILL_OFF = ["0", "false", "No", " OFF ", "", "2", "y", "disable", "10"]
CANARY_VALUES = _spellings(*OFF) + ["1", "", "yes", "2"]
RUNG_VALUES = ["v1", "v2", "v3", "v4", "v5", " v2 ", "V3", "v9", ""]


def _canary_on_the_device(c):
    """The package's first-use canaries run on the virtual device (as the vgpu fixture has it
    for relu_flydsl; a mutated copy needs it too): these scenarios turn the canary on."""
    c.mp.setattr(c.pkg._canary, "device_memory", canary_memory_for(c.dev))


def _set(c, env):
    for name in (DISABLE, RUNG, CANARY):
        if env.get(name) is None:
            c.mp.delenv(name, raising=False)
        else:
            c.mp.setenv(name, env[name])


def _stats_delta(before, after):
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def _step(c, env, seed):
    """relu(x, out=) and relu(x) on device 0 under `env`: what each returned (bits), counted,
    launched and ran as canaries, and how often the general path was entered."""
    _set(c, env)
    xbits = S.make_bits("mixed", N, F32, seed)
    x, xbuf = S.guarded_input(c.dev, xbits, F32)
    out, obuf = c.dev.guarded((N,), F32, name="out")
    stats, launches, canaries, general = c.pkg.dispatch_stats(), len(c.dev.launches), len(c.dev.canary_launches), \
        c.general
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an unknown rung's warning: compared below, once
        assert c.relu(x, out=out) is out
        c.dev.fresh_output(N * 4, name=f"y{seed}")
        y = c.relu(x)
    c.dev.check()
    S.assert_guards(obuf, out)
    S.assert_guards(xbuf, x)
    assert c.dev.get_device() == 0 and c.dev.last_error() == 0
    step = dict(env=env, bits=(S.tensor_bits(out).tolist(), S.tensor_bits(y).tolist()),
                stats=_stats_delta(stats, c.pkg.dispatch_stats()),
                kernels=[r.kernel for r in c.dev.launches[launches:]],
                canaries=len(c.dev.canary_launches) - canaries, general=c.general - general)
    for m in c.dev.memories:  # checked: these tensors go, and their addresses come back
        m.clear()
    return step


def _both_ways(c, settings, base=None):
    """Each of `settings` (a dict of variables) set between calls while entries are ready: the
    steps base, then per setting (setting, setting, base), run with the compiled entry on and
    again with it off. Every step must give the same as without the entry, but for how often
    the general path ran; the entry must have served some. Returns the entry's steps."""
    base = base or {}
    _canary_on_the_device(c)
    plan = [base] + [s for setting in settings for s in (setting, setting, base)]
    runs = {}
    for on in (True, False):
        c.state.reset()  # first uses again: modules, canaries, entries
        assert c.entry.use(on) == on
        try:
            runs[on] = [_step(c, env, seed) for seed, env in enumerate(plan)]
        finally:
            c.entry.use(True)
    for got, want in zip(runs[True], runs[False]):
        g, w = dict(got, general=None), dict(want, general=None)
        assert g == w, f"under {got['env']}, the entry gave {_differs(got, want)}"
    assert sum(s["general"] for s in runs[True]) < sum(s["general"] for s in runs[False]), \
        "the compiled entry served no call"
    return runs[True]


def _differs(got, want):
    keys = [k for k in got if k != "general" and got[k] != want[k]]
    return "; ".join(f"{k} {got[k] if k != 'bits' else '...'} where the general path gives "
                     f"{want[k] if k != 'bits' else 'other bits'}" for k in keys)


# ---- the scenarios -------------------------------------------------------
def kill_switch_spellings(c):
    """RELU_FLYDSL_DISABLE in every spelling the settings accept stops the kernels (nothing
    launched, torch's kernel counted as the kill switch), in others it does not; either way
    exactly as the general path."""
    assert (tuple(c.state_module.ON), tuple(c.state_module.OFF)) == (ON, OFF), "spellings changed: update ON, OFF"
    steps = _both_ways(c, [{DISABLE: v} for v in KILL_ON + KILL_OFF])
    for s in steps:
        value = s["env"].get(DISABLE)
        if value is not None and value in KILL_ON:
            assert s["kernels"] == [] and s["stats"] == {KILLED: 2}, (value, s["stats"], s["kernels"])
        else:
            assert s["kernels"] and KILLED not in s["stats"], (value, s["stats"])


def canary_switch_as_the_general_path(c):
    """RELU_FLYDSL_CANARY turned off and on between calls: the same results, counts, launches
    and canaries as the general path."""
    _both_ways(c, [{CANARY: v} for v in CANARY_VALUES])


def rung_switch_as_the_general_path(c):
    """RELU_FLYDSL_RUNG changed between calls (every rung, padded, another case, unknown, empty):
    the same kernels, results and counts as the general path."""
    steps = _both_ways(c, [{RUNG: v} for v in RUNG_VALUES], base={CANARY: "0"})
    used = {s["env"].get(RUNG): {k.split("/")[1] for k in s["stats"]} for s in steps}
    assert used["v1"] == {"v1"} and used["v3"] == {"v3"}, used


def kill_switch_checked_by_the_entry(c):
    """An entry handed over after the kill switch was read (a general-path call that read the
    settings before they changed, on another thread): add() refuses it, and the entry itself,
    given it anyway (clear(disabled=True) then add()), serves nothing while the switch is on."""
    _canary_on_the_device(c)
    _set(c, {})
    _, x, _, out, _ = c.tensors(N, seed=1)
    c.relu(x, out=out)  # the general path: entry made ready, handed over
    xa, ya = x.data_ptr() & 15, out.data_ptr() & 15
    entry = c.state.entries[(None, F32, N, xa, ya, 0)]
    info = c.d.device_info(x)
    module, (code, bits) = c.entry._loaded, c.entry.DL_DTYPES[F32]
    key = (0, code, bits, N, xa, ya, 0)
    assert module.has(*key)
    c.mp.setenv(DISABLE, "1")
    c.state.current()  # the settings re-read: the table cleared, the switch on
    c.entry.learn(info, "arch gfx950")  # the late call's device and entry arrive
    c.entry.add(entry, None)
    assert not module.has(*key), "an entry made ready before the kill switch was handed over after it"
    # the entry itself: told the switch is on, then handed the entry
    module.device(0, True, c.state.counter(("fallback", "arch gfx950")).hit, info.stream)
    module.add(*key, entry.function.value, entry.grid, entry.block, entry.hit, "rung v5, float32")
    assert module.has(*key)
    _, x, _, out, _ = c.tensors(N, seed=2)
    launches, before = len(c.dev.launches), c.pkg.dispatch_stats()
    assert c.relu(x, out=out) is out
    assert c.dev.launches[launches:] == [], "a kernel launched with RELU_FLYDSL_DISABLE=1"
    assert _stats_delta(before, c.pkg.dispatch_stats()) == {KILLED: 1}
    assert S.tensor_bits(out).tolist() == S.tensor_bits(torch.relu(x)).tolist()
    c.mp.delenv(DISABLE)


def unload_as_the_general_path(c):
    """The entry unloaded while kernels serve: one warning, which does not claim torch's
    fallback serves; relu() no longer calls the entry: the general path takes every call
    (entered each time) and counts it where it counts it with the entry off, on the virtual
    gfx950 and off any ROCm device; the kernels still serve."""
    _canary_on_the_device(c)
    for seed in (1, 2):
        _step(c, {}, seed)  # every setting unset; entries ready, the second call the entry's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c.entry.unload("test")
        said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(said) == 1 and "test" in said[0], said
        assert "fallback" not in said[0], f"the kernels still serve, the warning says otherwise: {said[0]}"
        assert not c.entry.status()["loaded"] and c.entry.status()["reason"] == "test"
        runs = {}
        for on in (True, False):  # unloaded, then also use(False): the same
            if not on:  # (only now: use() itself tells relu() what serves)
                c.entry.use(False)
            steps = [_step(c, {}, seed) for seed in (3, 4)]
            cpu = torch.randn(N, generator=torch.Generator().manual_seed(5))
            with pytest.MonkeyPatch.context() as mp:  # CPU tensors are no device memory: torch's kernel
                mp.setattr(c.d, "device_info", lambda t: None)
                c.entry.present_cpu(False)
                stats, general = c.pkg.dispatch_stats(), c.general
                y = c.relu(cpu)
                z = torch.empty_like(cpu)
                c.relu(cpu, out=z)
            present_cpu(c.dev, c.entry)
            cpu_step = dict(stats=_stats_delta(stats, c.pkg.dispatch_stats()), general=c.general - general,
                            bits=(S.tensor_bits(y).tolist(), S.tensor_bits(z).tolist()))
            runs[on] = (steps, cpu_step)
        said_after = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(said_after) == 1, said_after
    steps, cpu_step = runs[True]
    assert all(s["general"] == 2 and s["kernels"] for s in steps), [(s["general"], s["kernels"]) for s in steps]
    assert cpu_step["stats"] == {NO_DEVICE: 2} and cpu_step["general"] == 2, cpu_step
    assert [dict(s, env=None) for s in steps] == [dict(s, env=None) for s in runs[False][0]]
    assert cpu_step == runs[False][1]
    c.state.reset()  # a fresh process: the entry loaded again
    assert c.entry.status()["loaded"]


SCENARIOS = {f.__name__: f for f in (
    kill_switch_spellings, canary_switch_as_the_general_path, rung_switch_as_the_general_path,
    kill_switch_checked_by_the_entry, unload_as_the_general_path,
)}

test_entry_switches = scenario_test(SCENARIOS)
