"""tools/setup.sh's decisions that can be checked cheaply: which torch the base
interpreter has (tools/base_torch.py: a ROCm torch is kept, anything else gets the
pinned CPU wheel in .venv), and that everything installs into .venv only.
The set-up itself was run on stock Debian python (see the set-up's commit notes)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    pip_lines = [line for line in setup.splitlines() if "pip install" in line and not line.lstrip().startswith(("#", "echo"))]
    assert pip_lines and all('"$VPY" -m pip install' in line for line in pip_lines), pip_lines
    assert "/.venv/" in (ROOT / ".gitignore").read_text().split()
    for script in ("test.sh", "main.sh"):
        text = (ROOT / script).read_text()
        assert "bash tools/setup.sh" in text and ".venv/bin/python" in text and "python3" not in text, script
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("bash main.sh") < ci.index("bash test.sh")
