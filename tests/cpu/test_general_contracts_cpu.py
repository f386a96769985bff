"""torch's contracts around a result on the general path, where no device is needed: the
torch.library ops' version counters (their mutation bumped once by torch, nothing more), the
compiled form's, and relu()'s own against torch's; forward AD (a dual tensor gets torch's
tangent, counted "fallback/forward AD"; out= refuses it before writing); forward-over-reverse;
the HIP runtime's file as mapped; the warning without the compiled entry, word for word; and a
setting read at import warning at the importing line. tests/vgpu/test_general_contracts.py
holds the same contracts on the kernel path."""

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import relu_flydsl
from relu_flydsl import _compiled_entry, _hip, _relu
from test_fast_path_answers import _general_path_only

ROOT = Path(__file__).resolve().parents[2]
NO_DEVICE = "fallback/not a ROCm device"




def _bumps(write, t):
    v = t._version
    write()
    return t._version - v


# ---- version counters --------------------------------------------------------
def _torch_bumps():
    x, y = torch.randn(8), torch.empty(8)
    return {"out": _bumps(lambda: torch.clamp_min(x, 0, out=y), y), "in place": _bumps(lambda: torch.relu_(x), x),
            "new": torch.relu(x)._version}


def test_the_ops_bump_once_as_torch():
    """The torch.library ops (what torch.compile's op mode and autograd call): out bumped once by
    the op's mutation, as torch.clamp_min(out=) bumps it, not again by the fallback inside; a
    new output at version 0, as torch.relu's."""
    want = _torch_bumps()
    x, y = torch.randn(8), torch.empty(8)
    got = {"out": _bumps(lambda: _relu._relu_out_op(x, y), y), "in place": _bumps(lambda: _relu._relu_out_op(x, x), x),
           "new": _relu._relu_op(x)._version}
    assert got == want
    ns = getattr(torch.ops, relu_flydsl._ops._OPS_NAME)
    assert _bumps(lambda: ns.relu_out(x, y), y) == want["out"]
    leaf = torch.randn(8, requires_grad=True)
    assert _relu._relu_op(leaf)._version == torch.relu(leaf)._version  # through autograd


@pytest.mark.parametrize("general", [False, True], ids=["entry", "general path"])
def test_relu_bumps_as_torch(general):
    want = _torch_bumps()
    with _general_path_only() if general else contextlib.nullcontext():
        x, y = torch.randn(8), torch.empty(8)
        got = {"out": _bumps(lambda: relu_flydsl.relu(x, out=y), y),
               "in place": _bumps(lambda: relu_flydsl.relu(x, out=x), x), "new": relu_flydsl.relu(x)._version}
    assert got == want


@pytest.mark.parametrize("mode", ["torch", "op"])
def test_the_compiled_form_bumps_as_torch_compiled(monkeypatch, mode):
    """Compiled (aot_eager: torch's own graph, no code generation), relu(x, out=y) and
    relu(x, out=x) bump as the same graph of torch's clamp_min(out=) and relu_ does."""
    monkeypatch.setenv("RELU_FLYDSL_COMPILE", mode)
    torch._dynamo.reset()

    def compiled(f):
        return torch.compile(f, backend="aot_eager", fullgraph=True)

    x, y = torch.randn(8), torch.empty(8)
    ours = (_bumps(lambda: compiled(lambda a, b: relu_flydsl.relu(a, out=b))(x, y), y),
            _bumps(lambda: compiled(lambda a: relu_flydsl.relu(a, out=a))(x), x))
    torch_own = (_bumps(lambda: compiled(lambda a, b: torch.clamp_min(a, 0, out=b))(x, y), y),
                 _bumps(lambda: compiled(lambda a: torch.relu_(a))(x), x))
    torch._dynamo.reset()
    assert ours == torch_own


def test_saved_tensor_overwritten_raises_as_torch():
    for write in (lambda t: torch.clamp_min(torch.randn(4), 0, out=t), lambda t: relu_flydsl.relu(torch.randn(4), out=t)):
        s = torch.randn(4, requires_grad=True).sigmoid()
        write(s.detach())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            s.sum().backward()


# ---- forward AD ---------------------------------------------------------------
@pytest.mark.parametrize("general", [False, True], ids=["entry", "general path"])
def test_dual_tensors_get_torchs_tangent(general):
    x, t = torch.tensor([-1.0, 2.0, -0.0, 3.0]), torch.tensor([5.0, 6.0, 7.0, 8.0])
    relu_flydsl.reset_dispatch_stats()
    with _general_path_only() if general else contextlib.nullcontext(), fwAD.dual_level():
        got, want = relu_flydsl.relu(fwAD.make_dual(x, t)), torch.relu(fwAD.make_dual(x, t))
        assert torch.equal(got, want) and torch.equal(fwAD.unpack_dual(got).tangent, fwAD.unpack_dual(want).tangent)
        d, ref = fwAD.make_dual(x.clone(), t), fwAD.make_dual(x.clone(), t)
        assert relu_flydsl.relu(d, out=d) is d
        torch.relu_(ref)
        assert torch.equal(fwAD.unpack_dual(d).tangent, fwAD.unpack_dual(ref).tangent)
        for xx, out in ((fwAD.make_dual(x, t), torch.full((4,), 9.0)), (x, fwAD.make_dual(torch.full((4,), 9.0), t))):
            with pytest.raises(NotImplementedError, match="does not support forward AD"):
                relu_flydsl.relu(xx, out=out)
            assert torch.equal(out, torch.full((4,), 9.0)) and out._version == 0, "written before the refusal"
        plain = relu_flydsl.relu(x)  # no tangent: not forward AD's
    assert torch.equal(plain, torch.relu(x))
    assert relu_flydsl.dispatch_stats() == {"fallback/forward AD": 4, NO_DEVICE: 1}, relu_flydsl.dispatch_stats()


def test_forward_ad_and_forward_over_reverse_as_the_opinfo_declares():
    """gradcheck with forward AD and gradgradcheck forward-over-reverse, as torch's OpInfo for
    nn.functional.relu declares them (supports_forward_ad, supports_fwgrad_bwgrad)."""
    x = (torch.randn(6, dtype=torch.float64) + torch.tensor([0.5, -0.5] * 3, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(relu_flydsl.relu, (x,), check_forward_ad=True, check_backward_ad=True)
    assert torch.autograd.gradgradcheck(relu_flydsl.relu, (x,), check_fwd_over_rev=True)


# ---- the HIP runtime's file ----------------------------------------------------
def _library():
    name = ctypes.util.find_library("z") or ctypes.util.find_library("m")
    if name is None:
        pytest.skip("no shared library (libz, libm) to stand in for a HIP runtime")
    lib = ctypes.CDLL(name)
    path = _hip.mapped_file(ctypes.cast(lib[_symbol(lib)], ctypes.c_void_p).value)
    assert path, f"{name} not found in /proc/self/maps"
    return path


def _symbol(lib):
    return next(s for s in ("zlibVersion", "cos") if hasattr(lib, s))


def test_runtime_path_names_the_file_mapped(tmp_path, monkeypatch):
    """Two copies of one library, loaded from two folders under the same file name, each bound
    in turn as the runtime (as found by its SONAME): runtime_path() names the file of the one
    bound, not the SONAME and not whichever copy is mapped first. (Not named libamdhip64: the
    process keeps them mapped, and a HIP runtime lookup must never find them.)"""
    source = _library()
    paths = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        paths.append(shutil.copy(source, tmp_path / folder / "libstandin.so.1"))
    libs = [ctypes.CDLL(p) for p in paths]
    for path, lib in zip(paths, libs):
        runtime = ctypes.CDLL(path)
        runtime._name = "libamdhip64.so.7"  # found by SONAME
        monkeypatch.setattr(runtime, "hipGetDevice", lib[_symbol(lib)], raising=False)
        monkeypatch.setattr(_hip, "_lib", runtime)
        assert _hip.runtime_path() == os.path.realpath(path)
    monkeypatch.setattr(_hip, "_lib", None)
    monkeypatch.setattr(_hip, "_find_loaded", lambda: None)
    assert _hip.runtime_path() is None


# ---- warnings ----------------------------------------------------------------
def test_the_warning_without_the_compiled_entry(monkeypatch):
    """Word for word: the calls take the Python path (here: torch's kernel, as the entry would
    have given), the same results, more host time; at the caller's line."""
    monkeypatch.setattr(_compiled_entry, "not_loaded", lambda: "built for another test")
    relu_flydsl._state.STATE.reset()
    x = torch.randn(4)
    with _general_path_only(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        relu_flydsl.relu(x)
        relu_flydsl.relu(x, out=torch.empty(4))
    said = [(str(w.message), w.filename) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert said == [("relu_flydsl: the compiled entry is not used (built for another test); every call takes "
                     "the Python path (same results, more host time)", __file__)], said


IMPORTER = """import json, importlib, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always"); {statement}
print(json.dumps([{{"where": ("importer" if w.filename == __file__ else w.filename) + f":{{w.lineno}}",
                    "message": str(w.message)}} for w in caught if issubclass(w.category, RuntimeWarning)]))
"""


def import_warnings(package: str, root: str, env: dict, how: str = "import") -> list:
    """The RuntimeWarnings of importing `package` (found in `root`) in a fresh interpreter with
    `env` set: [{"where": "importer:<line>" or "<file>:<line>", "message"}]. The import is on
    line 3 of the importing script."""
    statement = f"import {package}" if how == "import" else f"importlib.import_module({package!r})"
    folder = Path(tempfile.mkdtemp(prefix="relu-flydsl-importer-"))
    script = folder / "importer.py"
    script.write_text(IMPORTER.format(statement=statement))
    child = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    child.update(env)
    child["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in [child.get("PYTHONPATH")] if p])
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=child, capture_output=True, text=True,
                              timeout=300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_setting_read_at_import_warns_at_the_importers_line():
    """RELU_FLYDSL_RUNG=v9 at import: one warning, at the import statement, as a setting read at
    a call warns at the calling line (tests/vgpu/test_general_contracts.py: importlib.import_module)."""
    package = Path(relu_flydsl.__file__).resolve().parent
    got = import_warnings("relu_flydsl", str(package.parent), {"RELU_FLYDSL_RUNG": "v9"})
    assert [w["where"] for w in got] == ["importer:3"], got
    assert "ignoring RELU_FLYDSL_RUNG='v9'" in got[0]["message"]


# ---- out= in x's storage -----------------------------------------------------
@pytest.mark.parametrize("general", [False, True], ids=["entry", "general path"])
def test_disjoint_views_of_one_storage_are_not_an_overlap(general):
    """out and x in one storage but on disjoint bytes: torch's clamp_min(out=) writes it, and so
    does relu() on either path (torch._C._overlaps alone calls every two views of one storage
    overlapping); bytes shared, even one element, stay relu()'s ValueError with nothing written."""
    with _general_path_only() if general else contextlib.nullcontext():
        buf = torch.randn(200)
        want = buf.clone()
        torch.clamp_min(want[0:10], 0, out=want[10:20])
        relu_flydsl.relu(buf[0:10], out=buf[10:20])  # adjacent, not overlapping
        assert torch.equal(buf, want)
        before = buf.clone()
        with pytest.raises(ValueError, match="overlap"):
            relu_flydsl.relu(buf[0:10], out=buf[9:19])
        assert torch.equal(buf, before)
