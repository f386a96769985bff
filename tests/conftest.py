"""Shared test setup. Sections are owned by topic; append, don't rewrite."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "torch-ext", ROOT / "tools"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def pytest_configure(config):
    config.addinivalue_line("markers", "hardware: needs a real gfx950 GPU (skipped elsewhere, with the reason)")
    config.addinivalue_line("markers", "compile: compiles kernels for gfx950 (CPU only, needs lld-22)")
    config.addinivalue_line("markers", "vgpu: runs compiled kernels on the virtual gfx950 device")


@pytest.fixture(scope="session")
def repo_root():
    return ROOT
