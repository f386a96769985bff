"""The health check runs from the built variant (the folder `kernels` and `hf download`
give): `python -m torch-rocm` in its build/ folder runs the variant's own __main__.py
(relative imports only), and the variant's status() and explain() answer; so does its
hardware check (`check`), which has nothing to test here and says so (exit 5), and whose
--help names the command that ran it.
tests/vgpu/test_check.py runs the check as `python FOLDER check`, on the CPU and on the
virtual gfx950."""

import json
import os
import shlex
import subprocess
import sys


def _run(args, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ""})  # the variant comes from cwd only


def test_python_dash_m_from_the_variant(variant_build, tmp_path):
    variant = variant_build / "build" / "torch-rocm"
    assert (variant / "__main__.py").is_file() and (variant / "_status.py").is_file()
    r = _run(["-m", "torch-rocm", "--json"], variant.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    st = json.loads(r.stdout)
    assert st["code_objects"]["verified"] and st["devices"] == []
    probe = _run(["-c", "import importlib, torch; m = importlib.import_module('torch-rocm'); print(m.__file__); "
                  "print(m.explain(torch.randn(3)))"], variant.parent)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines()[0] == str(variant / "__init__.py")  # the variant, not the checkout
    assert "counted as: fallback/not a ROCm device" in probe.stdout
    report = tmp_path / "check.json"
    r = _run(["-m", "torch-rocm", "check", "--no-bandwidth", "-o", str(report)], variant.parent)
    assert r.returncode == 5 and r.stdout.splitlines()[-1].startswith("relu_flydsl check NOT TESTED"), r.stdout + r.stderr
    assert json.loads(report.read_text())["package"]["folder"] == str(variant)
    r = _run(["-m", "torch-rocm", "check", "--help"], variant.parent)
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {shlex.quote(sys.executable)} -m torch-rocm check"), \
        r.stdout + r.stderr
