"""The health check on the CPU: status() is the documented, JSON-serialisable dict and only
reads; `python -m relu_flydsl` prints it and exits 1 exactly when a gfx950 is present and
the kernel path is not active there; the settings are the one list _state.SETTINGS; the
package's RuntimeWarnings name the caller's line. ROCm devices are simulated
(_dispatch.device_archs, or a patched torch in a child process)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import relu_flydsl
from relu_flydsl import __main__, _compiled_entry, _dispatch, _hip, _objects, _relu, _state, _status
from relu_flydsl._state import STATE

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"version", "torch", "python", "hip_runtime", "hip_reason", "code_objects", "entry", "devices", "settings"}
SETTING_NAMES = ["RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG", "RELU_FLYDSL_CANARY", "RELU_FLYDSL_ENTRY",
                 "RELU_FLYDSL_COMPILE"]


@pytest.fixture
def fresh(monkeypatch):
    """A fresh dispatch state (nothing warned yet), the settings unset; restored after."""
    for name in SETTING_NAMES:
        monkeypatch.delenv(name, raising=False)
    STATE.reset()
    yield STATE
    monkeypatch.undo()  # the test's settings first: a reset under them would warn again
    STATE.reset()


@pytest.fixture
def no_hip(monkeypatch):
    """No HIP runtime in this process (whatever an earlier test loaded)."""
    monkeypatch.setattr(_hip, "_lib", None)
    monkeypatch.setattr(_hip, "_find_loaded", lambda: None)


def test_public_names():
    for name in ("status", "explain", "VariantVerificationError"):
        assert name in relu_flydsl.__all__ and getattr(relu_flydsl, name) is not None
    from relu_flydsl._verify import VariantVerificationError

    assert relu_flydsl.VariantVerificationError is VariantVerificationError
    assert issubclass(VariantVerificationError, RuntimeError)


def test_status_is_the_documented_dict(fresh, no_hip):
    st = relu_flydsl.status()
    assert set(st) == KEYS
    assert json.loads(json.dumps(st)) == st  # JSON-serialisable as is
    assert st["version"] == int(relu_flydsl.__version__) and st["torch"] == torch.__version__
    assert st["hip_runtime"] is None and st["hip_reason"] == _hip.MISSING
    manifest = json.loads((_objects.OBJECTS_DIR / "manifest.json").read_text())
    assert st["code_objects"] == {"verified": True, "reason": None, "count": len(manifest["kernels"]), "broken": {}}
    entry = _compiled_entry.status()
    assert st["entry"]["loaded"] == entry["loaded"] and st["entry"]["reason"] == entry.get("reason")
    assert st["entry"]["allocation"] == (entry.get("allocation") if entry["loaded"] else
                                         "torch.empty_like(x) (the Python path)")
    assert st["devices"] == []  # a CPU torch: no ROCm device
    assert [s["name"] for s in st["settings"]] == SETTING_NAMES
    for key in ("devices", "code_objects", "entry", "settings"):
        assert f'"{key}"' in relu_flydsl.status.__doc__  # documented


def test_settings_is_the_one_list():
    """Five variables, each (name, accepted values, when read, meaning); the names are the
    ones the modules that read them use."""
    assert [row[0] for row in _state.SETTINGS] == SETTING_NAMES
    assert all(len(row) == 4 and all(isinstance(f, str) and f for f in row) for row in _state.SETTINGS)
    assert _compiled_entry.ENV_ENTRY == _state.ENV_ENTRY and _relu.ENV_COMPILE == _state.ENV_COMPILE
    assert (_state.ENV_DISABLE, _state.ENV_RUNG, _state.ENV_CANARY) == tuple(SETTING_NAMES[:3])
    reads = {row[0]: row[2] for row in _state.SETTINGS}
    assert reads["RELU_FLYDSL_ENTRY"] == "at import" and "every call" in reads["RELU_FLYDSL_DISABLE"]
    assert "traces" in reads["RELU_FLYDSL_COMPILE"]


@pytest.mark.parametrize("env, name, in_force, note", [
    ({}, "RELU_FLYDSL_DISABLE", False, None),
    ({"RELU_FLYDSL_DISABLE": " TRUE "}, "RELU_FLYDSL_DISABLE", True, None),
    ({"RELU_FLYDSL_RUNG": "v3"}, "RELU_FLYDSL_RUNG", "v3", None),
    ({"RELU_FLYDSL_RUNG": "v9"}, "RELU_FLYDSL_RUNG", "v5", "unknown rung 'v9' ignored"),
    ({"RELU_FLYDSL_CANARY": "off"}, "RELU_FLYDSL_CANARY", False, None),
    ({"RELU_FLYDSL_COMPILE": "OP"}, "RELU_FLYDSL_COMPILE", "op", None),
    ({"RELU_FLYDSL_COMPILE": "fast"}, "RELU_FLYDSL_COMPILE", "torch", "unknown value 'fast'"),
    ({"RELU_FLYDSL_ENTRY": "0"}, "RELU_FLYDSL_ENTRY", True, "changed since import"),
])
def test_settings_in_force(fresh, monkeypatch, env, name, in_force, note):
    if name == "RELU_FLYDSL_ENTRY" and not _compiled_entry.status()["loaded"]:
        pytest.skip(f"the compiled entry did not load here ({_compiled_entry.status()['reason']})")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seen = STATE.env
    (row,) = [s for s in relu_flydsl.status()["settings"] if s["name"] == name]
    assert row["value"] == env.get(name) and row["in_force"] == in_force
    assert (row["note"] is None) if note is None else (note in row["note"]), row
    assert STATE.env is seen  # status() reads the settings; the dispatch state is not refreshed


def test_a_corrupt_object_is_reported(fresh, monkeypatch, tmp_path):
    copy = tmp_path / "code_objects"
    shutil.copytree(_objects.OBJECTS_DIR, copy)
    meta = json.loads((copy / "manifest.json").read_text())["kernels"]["v2/float16/x4"]
    (copy / meta["file"]).write_bytes(b"not a code object")
    monkeypatch.setattr(_objects, "OBJECTS_DIR", copy)
    STATE.manifest = None
    co = relu_flydsl.status()["code_objects"]
    assert co["verified"] is False and list(co["broken"]) == ["v2/float16/x4"]
    assert meta["file"] in co["reason"] and "sha256" in co["reason"]


# ---- devices ------------------------------------------------------------------------------
def test_device_archs_asks_torch_on_a_rocm_torch(fresh, monkeypatch):
    import types

    monkeypatch.setattr(_dispatch, "_HIP_BUILD", "7.0.0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    archs = {0: "gfx950:sramecc+:xnack-", 1: "gfx942:sramecc+:xnack-"}
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(gcnArchName=archs[index]))
    assert _dispatch.device_archs() == {0: "gfx950", 1: "gfx942"}


@pytest.mark.parametrize("archs, code", [({0: "gfx950"}, 1), ({0: "gfx942"}, 0), ({0: "gfx942", 1: "gfx950"}, 1), ({}, 0)])
def test_health_check_fails_for_a_gfx950_without_the_kernel_path(fresh, no_hip, monkeypatch, capsys, archs, code):
    monkeypatch.setattr(_dispatch, "device_archs", lambda: archs)
    st = relu_flydsl.status()
    assert [(d["index"], d["arch"]) for d in st["devices"]] == sorted(archs.items())
    for d in st["devices"]:
        assert d["kernel_path"] is False
        assert d["reason"] == (_hip.MISSING if d["arch"] == "gfx950" else f"arch {d['arch']} (kernels are built for gfx950)")
        assert d["canary"] == {f"v5/{t}/x{v}": "not run" for t, v in
                               (("bfloat16", 8), ("float16", 8), ("float32", 4), ("int8", 16))}
    assert __main__.main([]) == code
    text = capsys.readouterr().out
    assert ("PROBLEM: device" in text) == bool(code) and not any(line.startswith("OK") for line in text.splitlines())
    assert ("NO GFX950 SERVED: " in text) == (not code)
    assert __main__.main(["--json"]) == code
    assert json.loads(capsys.readouterr().out)["devices"] == st["devices"]


def test_kernel_path_on_a_served_gfx950(fresh, monkeypatch, capsys):
    monkeypatch.setattr(_dispatch, "device_archs", lambda: {0: "gfx950"})
    monkeypatch.setattr(_hip, "unavailable", lambda: None)
    monkeypatch.setattr(_hip, "runtime_path", lambda: "/opt/rocm/lib/libamdhip64.so.7")
    st = relu_flydsl.status()
    assert st["devices"][0]["kernel_path"] is True and st["devices"][0]["reason"] is None
    assert __main__.main([]) == 0 and "kernel path active" in capsys.readouterr().out
    monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
    assert relu_flydsl.status()["devices"][0]["reason"] == "disabled by RELU_FLYDSL_DISABLE"
    assert __main__.main([]) == 1


CHILD = textwrap.dedent("""
    import runpy, sys, types
    import torch
    arch = sys.argv[1]
    if arch != "cpu":  # a ROCm torch whose device 0 has this arch; no HIP runtime is loaded
        torch.version.hip = "7.0.0"
        torch.version.cuda = None
        torch.cuda.device_count = lambda: 1
        torch.cuda.get_device_properties = lambda index=None: types.SimpleNamespace(gcnArchName=arch + ":sramecc+")
    sys.argv = ["relu_flydsl"] + sys.argv[2:]
    runpy.run_module("relu_flydsl", run_name="__main__")
""")


@pytest.mark.parametrize("arch, code", [("cpu", 0), ("gfx942", 0), ("gfx950", 1)])
def test_python_dash_m(arch, code):
    r = subprocess.run([sys.executable, "-c", CHILD, arch], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == code, r.stdout + r.stderr
    assert r.stdout.startswith(f"relu_flydsl {relu_flydsl.__version__}: torch ")
    if arch == "gfx950":
        assert f"PROBLEM: device 0 (gfx950): the kernel path is off: {_hip.MISSING}" in r.stdout
    r = subprocess.run([sys.executable, "-c", CHILD, arch, "--json"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == code and set(json.loads(r.stdout)) == KEYS | {"package"}


def test_python_dash_m_as_written():
    r = subprocess.run([sys.executable, "-m", "relu_flydsl"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    last = r.stdout.rstrip().splitlines()[-1]
    assert r.returncode == 0 and last.startswith("NO GFX950 SERVED: "), r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "relu_flydsl", "--require-gfx950"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 5 and r.stdout.rstrip().splitlines()[-1] == last, r.stdout + r.stderr


def test_status_loads_nothing(fresh):
    before = (dict(STATE.functions), dict(STATE.verdicts), dict(STATE.canary_runs), dict(STATE.entries))
    relu_flydsl.status()
    relu_flydsl.explain(torch.randn(8))
    assert relu_flydsl.explain(torch.randn(8), arch="gfx950").startswith("path: kernel, ")
    assert (STATE.functions, STATE.verdicts, STATE.canary_runs, STATE.entries) == before
    assert relu_flydsl.dispatch_stats() == {}


# ---- warnings name the caller's line -------------------------------------------------------
def _ours(caught):
    return [w for w in caught if "relu_flydsl" in str(w.message)]


@pytest.mark.parametrize("call", ["relu", "relu-out", "layer", "warmup", "explain"])
def test_unknown_rung_warning_points_at_the_caller(fresh, monkeypatch, call):
    monkeypatch.setenv("RELU_FLYDSL_RUNG", "v9")
    x = torch.randn(16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if call == "relu":
            relu_flydsl.relu(x)
        elif call == "relu-out":
            relu_flydsl.relu(x, out=torch.empty_like(x))
        elif call == "layer":
            relu_flydsl.layers.ReLU()(x)
        elif call == "warmup":
            relu_flydsl.warmup("float32", devices=())
        else:
            relu_flydsl.explain(x)
    (w,) = [w for w in _ours(caught) if "RELU_FLYDSL_RUNG" in str(w.message)]
    assert "ignoring RELU_FLYDSL_RUNG='v9': unknown rung" in str(w.message)
    assert w.filename == __file__, (w.filename, w.lineno)


def test_entry_not_loaded_warning_points_at_the_caller(fresh, monkeypatch):
    """The compiled entry unavailable (presented: not_loaded() gives a reason, relu() without
    it): the first call that reaches the general path warns, at the caller's line."""
    monkeypatch.setattr(_compiled_entry, "not_loaded", lambda: "a reason of this test")
    was = _compiled_entry.use(False)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            relu_flydsl.relu(torch.randn(4))
    finally:
        _compiled_entry.use(was)
    (w,) = _ours(caught)
    assert "the compiled entry is not used (a reason of this test)" in str(w.message)
    assert w.filename == __file__


def test_no_device_warmup_warning_points_at_the_caller(fresh, no_hip):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = relu_flydsl.warmup(("bfloat16",))
    assert result.ready == [] and not result.ok
    assert result.not_ready == {("v5", "bfloat16", 8, None): f"no device to warm up ({_hip.MISSING})"}
    (w,) = _ours(caught)
    assert "nothing is ready" in str(w.message) and w.filename == __file__


def test_caller_stacklevel_skips_package_and_torch_frames():
    """The level names the first frame outside the package and torch, however deep the call."""
    package = {"caller_stacklevel": _state.caller_stacklevel}
    exec(compile("def warn(): return caller_stacklevel()\n"  # level 1: the frame that warns
                 "def inner(): return warn()\n"
                 "def api(): return inner()\n"
                 "def through_torch(): return torch_call(inner)\n",
                 os.path.join(_state.PACKAGE_DIR, "fake.py"), "exec"), package)
    exec(compile("def torch_call(f): return f()\n", os.path.join(os.path.dirname(torch.__file__), "fake.py"),
                 "exec"), package)
    assert package["api"]() == 4  # warn, inner, api, then this test
    assert package["through_torch"]() == 5  # warn, inner, torch_call, through_torch, this test


def test_warmup_on_a_torch_without_rocm_states_it(fresh, monkeypatch):
    """A HIP runtime in the process but a torch that cannot allocate on its device: stated
    per device and warned, not raised, nothing ready."""
    monkeypatch.setattr(_hip, "unavailable", lambda: None)
    monkeypatch.setattr(_hip, "get_device", lambda: 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = relu_flydsl.warmup("float32")
    assert result.ready == [] and list(result.not_ready) == [("v5", "float32", 4, 0)]
    assert result.not_ready[("v5", "float32", 4, 0)].startswith("no memory on device 0 (")
    (w,) = _ours(caught)
    assert "nothing is ready on device 0" in str(w.message) and w.filename == __file__


# ---- code objects: the device's kernel path, the loader's verdicts ----------------------------
class _Fresh:
    """The `fresh` fixture's state as a context (for tests the mutation check runs by name, with
    monkeypatch and tmp_path only): settings unset, the dispatch state fresh, reset after."""

    def __init__(self, monkeypatch):
        for name in SETTING_NAMES:
            monkeypatch.delenv(name, raising=False)
        self.mp = monkeypatch

    def __enter__(self):
        STATE.reset()
        return self

    def __exit__(self, *exc):
        STATE.reset()

    def gfx950(self, hip=True):
        """status() sees one gfx950, with a HIP runtime loaded (hip) or none."""
        self.mp.setattr(_dispatch, "device_archs", lambda: {0: "gfx950"})
        self.mp.setattr(_hip, "unavailable", (lambda: None) if hip else (lambda: _hip.MISSING))
        self.mp.setattr(_hip, "runtime_path", lambda: "/opt/rocm/lib/libamdhip64.so.7" if hip else None)

    def objects(self, tmp_path):
        """The code objects copied to tmp_path and used from there: (copy, manifest kernels)."""
        copy = tmp_path / "code_objects"
        shutil.copytree(_objects.OBJECTS_DIR, copy)
        self.mp.setattr(_objects, "OBJECTS_DIR", copy)
        STATE.manifest = None
        return copy, json.loads((copy / "manifest.json").read_text())["kernels"]


def test_a_gfx950_without_usable_code_objects_is_not_served(monkeypatch, tmp_path, capsys):
    """Every object file gone, or the manifest gone: every call on a gfx950 takes the fallback, so
    its kernel path is off, with the loader's reason, and `python -m relu_flydsl` exits 1. One
    serving kernel's object gone: that dtype falls back; a problem too, the path stays on."""
    with _Fresh(monkeypatch) as f:
        f.gfx950()
        copy, kernels = f.objects(tmp_path)
        assert relu_flydsl.status()["devices"][0]["kernel_path"] is True
        (copy / kernels["v5/bfloat16/x8"]["file"]).unlink()
        st = relu_flydsl.status()
        (d,) = st["devices"]
        assert d["kernel_path"] is True and d["canary"]["v5/bfloat16/x8"].startswith("not run (object unusable: ")
        assert _status.problems(st) == [f"device 0: v5/bfloat16/x8 {d['canary']['v5/bfloat16/x8']}"]
        for meta in kernels.values():
            (copy / meta["file"]).unlink(missing_ok=True)
        st = relu_flydsl.status()
        (d,) = st["devices"]
        assert d["kernel_path"] is False and "unreadable" in d["reason"], d
        assert d["entry"] == f"the kernel path is off there ({d['reason']})" or not st["entry"]["in_use"]
        assert __main__.main([]) == 1
        assert "kernel path OFF" in capsys.readouterr().out
        (copy / "manifest.json").unlink()
        STATE.manifest = None  # as in a process that starts without it
        (d,) = relu_flydsl.status()["devices"]
        assert d["kernel_path"] is False and d["reason"] == _objects.unavailable() and "missing" in d["reason"]
        assert __main__.main([]) == 1


def test_the_loaders_verdicts_on_objects_stand(monkeypatch, tmp_path):
    """A code object the loader found damaged stays unusable for the process (its first use,
    warmup() here, remembered it): status() says so after the file is repaired on disk, as
    relu() and explain(arch=) do."""
    import warnings

    with _Fresh(monkeypatch) as f:
        copy, kernels = f.objects(tmp_path)
        path = copy / kernels["v5/float32/x4"]["file"]
        data = path.read_bytes()
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            result = relu_flydsl.warmup("float32", devices=())
        assert "sha256" in result.not_ready[("v5", "float32", 4, None)]
        path.write_bytes(data)  # repaired: the loader does not look again
        f.gfx950()
        st = relu_flydsl.status()
        co = st["code_objects"]
        assert co["verified"] is False and list(co["broken"]) == ["v5/float32/x4"] and "sha256" in co["reason"]
        assert st["devices"][0]["canary"]["v5/float32/x4"] == f"not run (object unusable: {co['broken']['v5/float32/x4']})"
        assert any("v5/float32/x4" in p for p in _status.problems(st))
        said = relu_flydsl.explain(torch.randn(64), arch="gfx950")
        assert said.startswith(f"path: torch fallback\nwhy: {co['broken']['v5/float32/x4']}"), said


# ---- the compiled entry: loaded, in use, serving; the cost where it is not in use -------------
def test_the_entry_serves_no_device_on_a_cpu_torch(fresh, no_hip):
    """Loaded is not serving: a CPU torch has no device the entry replays kernels on."""
    st = relu_flydsl.status()
    entry = st["entry"]
    assert entry["serving_devices"] == 0 and entry["serving"] is False and entry["devices"] == {}
    assert entry["in_use"] == (_compiled_entry.SERVE is not None) == (entry["cost"] is None)


def test_the_entry_off_names_the_python_paths_cost(monkeypatch):
    """Where the entry is not in use (not loaded, or switched off), status() names the cost of the
    path every call takes instead, from the one source of that claim."""
    from relu_flydsl._claims import NO_ENTRY_COST

    with _Fresh(monkeypatch) as f:
        f.gfx950()
        was = _compiled_entry.use(False)
        try:
            st = relu_flydsl.status()
        finally:
            _compiled_entry.use(was)
    cost = st["entry"]["cost"]
    assert json.loads(json.dumps(cost)) == cost
    assert (cost["out"], cost["new"]) == (list(NO_ENTRY_COST["out"]), list(NO_ENTRY_COST["new"]))
    lo, hi = NO_ENTRY_COST["out"]
    assert f"relu(x, out=y) costs {lo:g}-{hi:g}x" in cost["said"] and "torch.clamp_min" in cost["said"]
    lo, hi = NO_ENTRY_COST["new"]
    assert f"relu(x) {lo:g}-{hi:g}x" in cost["said"] and "torch.relu" in cost["said"]
    assert st["entry"]["in_use"] is False and st["entry"]["serving_devices"] == 0
    assert st["devices"][0]["entry"] == "switched off: relu() does not call it"
    assert st["entry"]["devices"] == {"0": st["devices"][0]["entry"]}
    if was:
        assert relu_flydsl.status()["entry"]["cost"] is None
