"""The development install (tools/dev_install.py, run by tools/setup.sh): each process
imports the checkout of what it runs, whichever checkout's .venv runs it, so one .venv
can serve several checkouts (a worktree links the main checkout's .venv) without any
of them importing another's files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import json, sys, _relu_flydsl_dev_install as d, relu_flydsl; "
         "print(json.dumps([d.CHECKOUT, relu_flydsl.WHERE, sys.path]))")


def _env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _checkout(path: Path, where: str) -> Path:
    """A checkout of the project: its pyproject.toml, tools/dev_install.py and a
    relu_flydsl that says which checkout it is."""
    (path / "torch-ext" / "relu_flydsl").mkdir(parents=True)
    (path / "torch-ext" / "relu_flydsl" / "__init__.py").write_text(f"WHERE = {where!r}\n")
    (path / "tools").mkdir()
    for rel in ("pyproject.toml", "tools/dev_install.py"):
        (path / rel).write_bytes((ROOT / rel).read_bytes())
    (path / "tools" / "probe.py").write_text(PROBE.replace("; ", "\n") + "\n")
    return path


def _venv(path: Path, installed_from: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('d', sys.argv[1]); "
            "d = importlib.util.module_from_spec(spec); spec.loader.exec_module(d); d.install(sys.argv[2])")
    subprocess.run([str(python), "-c", code, str(installed_from / "tools" / "dev_install.py"), str(installed_from)],
                   check=True, env=_env(), timeout=60)
    return python


def _probe(python: Path, cwd: Path, script: Path = None):
    cmd = [str(python), str(script)] if script else [str(python), "-c", PROBE]
    r = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # [checkout chosen, which relu_flydsl, sys.path]


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("checkouts")
    a, b = _checkout(tmp / "a", "a"), _checkout(tmp / "b", "b")
    python_a = _venv(a / ".venv", a)
    (b / ".venv").symlink_to(a / ".venv")  # a worktree sharing a's .venv
    other = b / "vendored"  # a folder of another project inside b
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "another-project"\n')
    elsewhere = tmp / "nowhere"
    elsewhere.mkdir()
    return tmp, a, b, python_a, other, elsewhere


def test_a_script_imports_its_own_checkout(layout):
    tmp, a, b, python_a, other, elsewhere = layout
    checkout, where, path = _probe(python_a, elsewhere, script=b / "tools" / "probe.py")
    assert (checkout, where) == (str(b), "b")  # a's interpreter, b's script: b's files
    assert path[0] == str(b / "tools")  # Python's own entry for the script stays first
    site = next(p for p in path if p.endswith("site-packages"))
    assert path.index(site) < path.index(str(b / "torch-ext")) and str(a / "torch-ext") not in path


def test_c_and_m_import_the_current_directorys_checkout(layout):
    tmp, a, b, python_a, other, elsewhere = layout
    assert _probe(python_a, b / "tools")[:2] == [str(b), "b"]
    assert _probe(python_a, a)[:2] == [str(a), "a"]
    # the nearest pyproject.toml decides: another project's folder is in no checkout of this one
    assert _probe(python_a, other)[:2] == [str(a), "a"]


def test_outside_any_checkout_the_venvs_own_checkout_as_reached(layout):
    tmp, a, b, python_a, other, elsewhere = layout
    assert _probe(python_a, elsewhere)[:2] == [str(a), "a"]
    assert _probe(b / ".venv" / "bin" / "python", elsewhere)[:2] == [str(b), "b"]  # through b's link


def test_a_venv_kept_elsewhere_falls_back_to_the_checkout_that_installed_it(layout):
    tmp, a, b, python_a, other, elsewhere = layout
    python = _venv(tmp / "venv-elsewhere", b)
    assert _probe(python, elsewhere)[:2] == [str(b), "b"]
    assert _probe(python, a)[:2] == [str(a), "a"]


def test_no_checkout_no_roots(layout, tmp_path):
    tmp, a, b, python_a, other, elsewhere = layout
    python = _venv(tmp_path / "venv", a)
    (a / "pyproject.toml").rename(a / "pyproject.toml.off")  # the installing checkout is gone
    try:
        r = subprocess.run([str(python), "-c", "import _relu_flydsl_dev_install as d, sys; print(d.CHECKOUT)"],
                           cwd=elsewhere, env=_env(), capture_output=True, text=True, timeout=60)
    finally:
        (a / "pyproject.toml.off").rename(a / "pyproject.toml")
    assert (r.returncode, r.stdout.strip()) == (0, "None"), r.stderr


def _chosen(python: Path, cwd: Path):
    r = subprocess.run([str(python), "-c", "import _relu_flydsl_dev_install as d; print(d.CHECKOUT)"],
                       cwd=cwd, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_link_whose_checkout_is_not_found_imports_no_other_checkout(layout):
    """b's .venv links a's, which a installed: a process of b's link started outside any checkout
    where b is not found (here its pyproject.toml is away) gets no roots, never a's files (the
    installing checkout of a shared .venv is whichever set up last)."""
    tmp, a, b, python_a, other, elsewhere = layout
    (b / "pyproject.toml").rename(b / "pyproject.toml.off")
    try:
        chosen = _chosen(b / ".venv" / "bin" / "python", elsewhere)
    finally:
        (b / "pyproject.toml.off").rename(b / "pyproject.toml")
    assert chosen == "None", f"a process of b's link imports {chosen}'s files"
    assert _chosen(b / ".venv" / "bin" / "python", elsewhere) == str(b)  # found: its own files
    assert _chosen(python_a, elsewhere) == str(a)  # a's own .venv, reached as a's


def test_this_checkouts_venv_imports_this_checkout(tmp_path):
    """The real install: from anywhere, the packages of the checkout whose .venv runs."""
    if Path(sys.prefix).parent != ROOT:
        pytest.skip(f"not run by this checkout's .venv ({sys.prefix}): tools/setup.sh installs the import path there")
    code = ("import importlib.util, json; print(json.dumps([importlib.util.find_spec(m).origin for m in "
            "('relu_flydsl', 'flash_relu_rocm', 'benchmarks', 'toolchain', 'vgpu', 'tools.noop_hip')]))")
    for cwd in (tmp_path, ROOT / "tests"):
        r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_env(), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        origins = [Path(o).resolve() for o in json.loads(r.stdout)]
        assert all(o.is_relative_to(ROOT) for o in origins), (cwd, origins)
