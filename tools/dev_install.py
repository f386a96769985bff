"""The development install: puts a checkout's import roots (pyproject.toml's
[tool.relu-flydsl] import-path: the root, torch-ext/ and tools/) on the import
path of every process an interpreter runs, with no sys.path edit in the scripts.

    .venv/bin/python tools/dev_install.py      (tools/setup.sh runs it)

writes into that interpreter's site-packages this file, as _relu_flydsl_dev_install.py,
and a .pth file that calls activate() at every start. activate() appends the roots
(after site-packages, as any .pth does) of the checkout of what runs:

  1. a script (tools/release.py, .venv/bin/kernels): the checkout holding the script;
  2. -c, -m or the prompt: the checkout holding the current directory, which Python
     itself puts first on sys.path for those;
  3. where that finds none: the checkout whose .venv this is, as the interpreter was
     reached (a worktree whose .venv links another checkout's .venv gets its own files);
  4. where that finds none either: the checkout that installed it, for a virtual
     environment kept outside any checkout. Never for a checkout's own .venv: every
     checkout sharing it through a link installs into it, so "the checkout that installed
     it" is whichever set up last, another checkout's files for a process of a link
     whose checkout rule 3 did not find (a child started outside any checkout then
     imported them); such a process gets no roots.

A checkout is the nearest folder upwards with a pyproject.toml, when that file names
this project. So one .venv can serve several checkouts and each one's scripts import
its own files: an editable install records one checkout's path for all of them
(pyproject.toml's header says more). activate() reads at most a few small files.
"""

import os
import sys

MODULE = "_relu_flydsl_dev_install"


def _names_project(pyproject: str, name: str) -> bool:
    try:
        with open(pyproject, encoding="utf-8") as f:
            return any(line.strip() == f'name = "{name}"' for line in f)
    except (OSError, UnicodeDecodeError):
        return False


def checkout_of(folder: str, name: str):
    """The checkout holding `folder`, or None (the nearest pyproject.toml names another project, or none)."""
    folder = os.path.abspath(folder)
    while True:
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject):
            return folder if _names_project(pyproject, name) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def choose(name: str, installed_from: str, argv0: str, cwd, prefix: str):
    """The checkout whose roots a process gets (rules 1-4 above), or None."""
    if argv0 in ("", "-", "-c", "-m"):
        found = checkout_of(cwd, name) if cwd else None
    else:
        found = checkout_of(os.path.dirname(os.path.abspath(argv0)), name)
    if found is None:
        venv_parent = os.path.dirname(os.path.abspath(prefix))
        pyproject = os.path.join(venv_parent, "pyproject.toml")
        if _names_project(pyproject, name):
            found = venv_parent
    if found is None and _names_project(os.path.join(installed_from, "pyproject.toml"), name):
        real_parent = os.path.dirname(os.path.realpath(prefix))
        if not _names_project(os.path.join(real_parent, "pyproject.toml"), name):
            found = installed_from
    return found


CHECKOUT = None  # the checkout activate() chose for this process


def activate(name: str, roots, installed_from: str):
    """Runs from the .pth file at interpreter start."""
    global CHECKOUT
    argv = getattr(sys, "argv", None) or [""]
    try:
        cwd = os.getcwd()
    except OSError:  # the current directory was removed
        cwd = None
    CHECKOUT = choose(name, installed_from, argv[0], cwd, sys.prefix)
    if CHECKOUT is None:
        return
    for root in roots:
        path = os.path.normpath(os.path.join(CHECKOUT, root))
        if path not in sys.path:
            sys.path.append(path)


def install(checkout=None):
    """Install activate() into this interpreter's site-packages for `checkout`
    (default: the one holding this file); returns the .pth file's path."""
    import shutil
    import sysconfig
    import tomllib
    from pathlib import Path

    checkout = Path(checkout or Path(__file__).resolve().parent.parent)
    config = tomllib.loads((checkout / "pyproject.toml").read_text())
    name = config["project"]["name"]
    roots = tuple(config["tool"]["relu-flydsl"]["import-path"])
    site = Path(sysconfig.get_paths()["purelib"])
    shutil.copyfile(__file__, site / f"{MODULE}.py")
    pth = site / f"{MODULE}.pth"
    # a .pth line that starts with `import` is run by site.py
    pth.write_text(f"import {MODULE}; {MODULE}.activate({name!r}, {roots!r}, {str(checkout)!r})\n")
    return pth


def _probe(cwd):
    """Where a new process of this interpreter, started in `cwd` with -c, finds the packages."""
    import json
    import subprocess

    code = ("import importlib.util, json, _relu_flydsl_dev_install as d; "
            "print(json.dumps([d.CHECKOUT] + [importlib.util.find_spec(m).origin for m in "
            "('relu_flydsl', 'flash_relu_rocm', 'benchmarks', 'toolchain', 'vgpu')]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"dev_install: a new process does not find the packages:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def main(argv=None):
    import argparse
    from pathlib import Path

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    checkout = Path(__file__).resolve().parent.parent
    pth = install(checkout)
    chosen, *origins = _probe(checkout)  # rule 2: a process started in the checkout
    if chosen is None or Path(chosen).resolve() != checkout or \
            not all(Path(o).resolve().is_relative_to(checkout) for o in origins):
        sys.exit(f"dev_install: a new process started in {checkout} imports from {chosen} ({origins})")
    print(f"{pth}: each process imports relu_flydsl, flash_relu_rocm, benchmarks and the tools/ modules "
          f"from the checkout of what it runs (pyproject.toml [tool.relu-flydsl])")


if __name__ == "__main__":
    main()
