"""tools/setup.sh's decisions that can be checked cheaply: which torch the base
interpreter has (tools/base_torch.py: a ROCm torch is kept, anything else gets the
pinned CPU wheel in .venv), and that everything installs into .venv only.
The set-up itself was run on stock Debian python (see the set-up's commit notes)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fake_torch(site: Path, hip_line: str):
    """A torch package whose version.py is the installed torch's, with its hip line replaced."""
    import torch

    real = (Path(torch.__file__).parent / "version.py").read_text()
    assert re.search(r"^hip\b.*$", real, re.M), "torch's version.py no longer has a `hip` line"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('base_torch must not import torch')\n")
    (site / "torch" / "version.py").write_text(re.sub(r"^hip\b.*$", hip_line, real, count=1, flags=re.M))


def _base_torch(pythonpath):
    # -S: no site-packages, so only the fake (or no) torch is visible.
    r = subprocess.run([sys.executable, "-S", str(ROOT / "tools" / "base_torch.py")], capture_output=True, text=True,
                       env={"PYTHONPATH": str(pythonpath)}, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("hip_line", ["hip: Optional[str] = '6.4.43482-0f2d60242'", 'hip = "6.4.43482-0f2d60242"'])
def test_a_rocm_torch_is_found_with_its_folder(tmp_path, hip_line):
    _fake_torch(tmp_path, hip_line)
    assert _base_torch(tmp_path) == f"rocm {tmp_path} 6.4.43482-0f2d60242"


def test_a_cpu_torch_or_none_gets_the_pinned_wheel(tmp_path):
    _fake_torch(tmp_path / "cpu", "hip: Optional[str] = None")
    assert _base_torch(tmp_path / "cpu") == "cpu"
    assert _base_torch(tmp_path / "empty") == "cpu"


def test_the_installed_torch_is_read_as_its_build():
    import torch

    r = subprocess.run([sys.executable, str(ROOT / "tools" / "base_torch.py")], capture_output=True, text=True, timeout=60)
    assert r.stdout.split()[0] == ("rocm" if torch.version.hip else "cpu")


def test_everything_installs_into_the_venv_only():
    setup = (ROOT / "tools" / "setup.sh").read_text()
    pip_lines = [line for line in setup.splitlines() if "pip install" in line and not line.lstrip().startswith(("#", "echo", "say ", "took "))]
    assert pip_lines and all('"$VPY" -m pip install' in line for line in pip_lines), pip_lines
    assert "/.venv/" in (ROOT / ".gitignore").read_text().split()
    for script in ("test.sh", "main.sh"):
        text = (ROOT / script).read_text()
        assert "bash tools/setup.sh" in text and ".venv/bin/python" in text and "python3" not in text, script
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("bash main.sh") < ci.index("bash test.sh")


# ---- what the set-up prints: each step with its elapsed time, pip's progress on a terminal
FAKE_BASE = """#!/usr/bin/env bash
# A base interpreter that answers setup.sh's questions and makes a fake .venv.
case "$1" in
  -c) case "$2" in *sys.executable*) echo "$0" ;; esac; exit 0 ;;
  --version) echo "Python 3.11.2" ;;
  -m) [ "$2" = venv ] && mkdir -p "$3/bin" && cp "$(dirname "$0")/fake-venv-python" "$3/bin/python" ;;
  *) [[ "$1" == *base_torch.py ]] && echo cpu ;;
esac
"""
FAKE_VENV_PYTHON = """#!/usr/bin/env bash
# .venv's python: records pip's arguments; answers the version line.
if [ "$1" = -m ] && [ "$2" = pip ]; then echo "PIP-ARGS: $*"; exit 0; fi
echo "torch 0, flydsl 0, kernels 0"
"""


def _run_setup(tmp_path, tty, python=True):
    import os
    import pty

    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True, exist_ok=True)
    for rel in ("tools/setup.sh", "tools/base_torch.py", "tools/dev_install.py", "requirements.txt", "pyproject.toml"):
        (repo / rel).write_bytes((ROOT / rel).read_bytes())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("python-base", FAKE_BASE), ("fake-venv-python", FAKE_VENV_PYTHON),
                       ("dpkg", "#!/bin/sh\nexit 0\n"), ("sudo", '#!/bin/sh\nexec "$@"\n')):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(bin_dir / "python-base"), "HOME": str(tmp_path)}
    if not python:  # the second run of a checkout: PYTHON not given again
        del env["PYTHON"]
    if not tty:
        r = subprocess.run(["bash", "tools/setup.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout + r.stderr
    leader, follower = pty.openpty()
    p = subprocess.Popen(["bash", "tools/setup.sh"], cwd=repo, env=env, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return p.wait(timeout=120), b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("tty", [False, True], ids=["not-a-terminal", "terminal"])
def test_setup_prints_each_step_with_its_elapsed_time(tmp_path, tty):
    if not Path("/usr/lib/llvm-22/bin/llvm-objdump").exists():
        pytest.skip("llvm-22 is not installed (the set-up's last line reports its llvm-objdump)")
    rc, out = _run_setup(tmp_path, tty)
    assert rc == 0, out
    assert re.search(r"setup: creating \.venv from .*\n.*setup:   done: \.venv created \(\d+ s since the start\)", out), out
    assert re.search(r"setup: pip install -r requirements.txt into \.venv \(.*about 3 minutes", out), out
    assert re.search(r"setup:   done: pip install \(\d+ s since the start\)", out), out
    assert re.search(r"setup: \.venv ready after \d+ s: torch", out), out
    pip = re.search(r"PIP-ARGS: (.*)", out).group(1)
    if tty:
        assert "--progress-bar on" in pip and " -q" not in pip, pip  # pip shows its progress
    else:
        assert " -q" in pip and "not a terminal" in out, (pip, out)  # quiet, and says so


def test_ci_runs_the_linter_configured_in_pyproject():
    import tomllib

    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("bash main.sh") < ci.index(".venv/bin/ruff check .") < ci.index("bash test.sh")
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert "ruff" in pins, "requirements.txt must pin ruff (.ci/run runs .venv/bin/ruff)"
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"E9", "F63", "F7", "F82", "F401"} <= set(lint["select"])


def test_ci_sets_up_from_debians_python_and_keeps_pyenv_for_the_other_pythons(tmp_path):
    """.ci/run makes .venv from /usr/bin/python3, as a newcomer's Debian 12 does, whatever python3
    comes first on PATH (a pyenv shim on the CI machine); tools/other_pythons.sh still runs."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / ".ci" / "run").write_bytes((ROOT / ".ci" / "run").read_bytes())
    log = tmp_path / "log"
    record = f'#!/usr/bin/env bash\necho "$0 PYTHON=${{PYTHON:-unset}} $*" >> {log}\n'
    for rel in ("main.sh", "test.sh", "tools/other_pythons.sh", ".venv/bin/ruff", "shims/python3"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(record)
        (repo / rel).chmod(0o755)
    env = {"PATH": f"{repo / 'shims'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", ".ci/run"], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [line.split(" ", 2) for line in log.read_text().splitlines()]
    assert [(cmd, python) for cmd, python, *_ in runs] == [
        ("main.sh", "PYTHON=/usr/bin/python3"), (".venv/bin/ruff", "PYTHON=/usr/bin/python3"),
        ("tools/other_pythons.sh", "PYTHON=/usr/bin/python3"), ("test.sh", "PYTHON=/usr/bin/python3")], runs
    assert "ci: .venv from PYTHON=/usr/bin/python3" in r.stdout, r.stdout


def test_a_later_run_without_python_keeps_the_interpreter_venv_was_made_from(tmp_path):
    """PYTHON given once (PYTHON=/usr/bin/python3 on a machine whose PATH has another python3):
    test.sh and main.sh, which run the set-up without it, keep that .venv rather than remaking it."""
    if not Path("/usr/lib/llvm-22/bin/llvm-objdump").exists():
        pytest.skip("llvm-22 is not installed (the set-up's last line reports its llvm-objdump)")
    rc, out = _run_setup(tmp_path, False)
    assert rc == 0 and "creating .venv from" in out, out
    rc, out = _run_setup(tmp_path, False, python=False)
    assert rc == 0 and "recreating" not in out and "setup: .venv up to date" in out, out
