"""tests/hardware/run.sh's exit statuses, pytest's numbers as for `python -m relu_flydsl [check]`:
0 passed; 1 a failure (here a downloaded variant with an added file, which fails its release
digest); 4 a usage error, run.sh's own or pytest's; 5 nothing was tested
(tests/vgpu/test_hardware_suite.py tests 0 and 5). `run.sh --help` lists them."""

import shutil

import pytest

import hardware_vgpu
from test_hardware_suite import run_sh, shown


def test_run_sh_usage_errors_exit_4_and_help_lists_the_statuses(tmp_path):
    (tmp_path / "empty").mkdir()
    for args in (["--variant"], ["--variant", str(tmp_path / "absent")], ["--variant", str(tmp_path / "empty")]):
        r = run_sh(args)
        assert r.returncode == 4 and r.stderr.startswith("run.sh: --variant"), shown(r)
        assert r.stderr.rstrip().endswith("(see bash tests/hardware/run.sh --help)"), shown(r)
    # pytest's own usage error, passed through; PYTHON (setup.sh's base interpreter, exported by CI)
    # does not replace .venv's
    r = run_sh(["--no-such-pytest-option"], {"PYTHON": str(tmp_path / "no-such-python")})
    assert r.returncode == 4 and "unrecognized arguments: --no-such-pytest-option" in r.stderr, shown(r)
    r = run_sh(["--help"])
    said = " ".join(r.stdout.split())
    assert r.returncode == 0 and said.startswith("The hardware suite (tests/hardware/test_hardware.py)"), shown(r)
    assert "0 passed; 1 a test failed; 4 a usage error (run.sh's or pytest's); 5 nothing was tested" in said, said


@pytest.mark.vgpu
def test_run_sh_fails_a_variant_that_fails_its_digest(variant_build, vgpu_device, tmp_path):
    copy = tmp_path / "torch-rocm"
    shutil.copytree(variant_build / "build" / "torch-rocm", copy)
    (copy / "notes.txt").write_text("added\n")
    r = run_sh(["--variant", str(copy), "-k", "test_the_package_under_test"], {hardware_vgpu.ENV_TARGET: "vgpu"})
    assert r.returncode == 1 and "1 failed" in r.stdout, shown(r)
    assert "files differ from the release digest: Unknown file: notes.txt" in r.stdout, shown(r)
