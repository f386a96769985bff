"""The Hub package: build.toml, public API, lazy flydsl import, the built
variant loading through the kernels library."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "torch-ext" / "relu_flydsl"
sys.path.insert(0, str(ROOT / "tools"))

import build_variant  # noqa: E402

KP = build_variant._load_by_path("_kp_under_test", PKG / "_kernels_private.py")  # the one user of kernels._rust


def test_build_toml_is_accepted_by_kernels():
    build_variant.kernels_private().Build.open(str(ROOT))  # raises on an invalid build.toml
    import tomllib

    cfg = tomllib.loads((ROOT / "build.toml").read_text())
    assert cfg["general"]["name"] == "relu-flydsl" and cfg["general"]["edition"] == 5
    assert cfg["general"]["backends"] == ["rocm"]
    assert cfg["torch-noarch"]["rocm_archs"] == ["gfx950"]
    assert cfg["general"]["hub"]["repo-id"] == "org/relu-flydsl"


def test_kernels_rejects_a_broken_build_toml(tmp_path):
    (tmp_path / "build.toml").write_text((ROOT / "build.toml").read_text().replace("rocm_archs", "rocm-archs"))
    with pytest.raises(Exception):
        build_variant.kernels_private().Build.open(str(tmp_path))


def test_kernels_private_api_still_works():
    """Every call into the private kernels._rust, exercised. If this fails after a kernels
    upgrade, its message names the call that changed and the module to update."""
    KP.check(ROOT)


def test_a_changed_private_api_is_named(monkeypatch):
    """The check is not vacuous: a kernels without Digest, or whose Digest.hash_variant
    behaves differently, fails with a message naming it and the tested kernels version."""
    from kernels import _rust

    KP.load.cache_clear()
    monkeypatch.delattr(_rust, "Digest")
    with pytest.raises(KP.KernelsPrivateAPIChanged, match=r"kernels._rust has no Digest.*kernels==0\.17\.2"):
        KP.load()
    monkeypatch.undo()
    KP.load.cache_clear()

    class Digest:
        @staticmethod
        def hash_variant(algorithm, path):
            raise TypeError("hash_variant() takes 1 positional argument")

    monkeypatch.setattr(_rust, "Digest", Digest)
    with pytest.raises(KP.KernelsPrivateAPIChanged, match=r"Digest.hash_variant.*failed: TypeError"):
        KP.check()
    monkeypatch.undo()
    KP.load.cache_clear()


def test_only_one_module_uses_kernels_private_api():
    """kernels._rust appears in code only in _kernels_private.py (tools and tests included)."""
    users = []
    for folder in ("torch-ext", "tools", "tests", "benchmarks", "flash_relu_rocm"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            if f.is_symlink() or "__pycache__" in f.parts or f.name == "_kernels_private.py" or f == Path(__file__):
                continue
            tree = ast.parse(f.read_text())
            for node in ast.walk(tree):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module
                        else [])
                if any(m == "kernels._rust" or m.startswith("kernels._rust.") for m in mods):
                    users.append(str(f.relative_to(ROOT)))
    assert users == [], f"import the kernels private API through relu_flydsl/_kernels_private.py, not in {users}"


def test_public_api():
    import relu_flydsl

    assert {"relu", "layers"} <= set(relu_flydsl.__all__)
    for name in relu_flydsl.__all__:
        assert hasattr(relu_flydsl, name)
    layer = relu_flydsl.layers.ReLU
    assert issubclass(layer, torch.nn.Module)
    assert "__init__" not in vars(layer) and "forward" in vars(layer)
    x = torch.tensor([-1.0, -0.0, 2.0])
    assert torch.equal(layer()(x), torch.relu(x))


def _package_sources():
    files = sorted(Path(d) / f for d, _, fs in os.walk(PKG, followlinks=True) for f in fs if f.endswith(".py"))
    assert any(f.parent.name == "flash_relu_rocm" for f in files), "flash_relu_rocm must be inside the package"
    return files


def test_imports_are_relative():
    """A Hub kernel is imported under a generated module name: only relative
    imports of its own modules work."""
    own = {"relu_flydsl", "flash_relu_rocm"}
    for f in _package_sources():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module.split(".")[0]]
            else:
                continue
            assert not own & set(names), f"{f}: absolute import of {names}"


def _run(code, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=ROOT)


def test_flydsl_is_not_imported_at_package_import():
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'torch-ext')!r}); import relu_flydsl, torch; "
            "relu_flydsl.relu(torch.ones(4)); print('flydsl' in sys.modules, 'torch._dynamo' in sys.modules)")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    # neither flydsl nor torch._dynamo (~1 s: the cold start's package import) is loaded by an eager call
    assert r.stdout.strip() == "False False"


def test_missing_flydsl_is_reported_once_with_the_install_command():
    """A gfx950 tensor with flydsl not installed: results stay correct (torch
    fallback), one warning names the exact pip command, stats say why."""
    code = f"""
import sys, warnings
sys.modules['flydsl'] = None  # makes `import flydsl` raise ImportError
sys.path.insert(0, {str(ROOT / 'torch-ext')!r})
import torch, relu_flydsl
from relu_flydsl import _dispatch
_dispatch.device_info = lambda x: _dispatch.DeviceInfo('gfx950', 0)
x = torch.tensor([-1.0, -0.0, 3.0])
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter('always')
    y1 = relu_flydsl.relu(x); y2 = relu_flydsl.relu(x)
msgs = [str(m.message) for m in w]
assert len(msgs) == 1, msgs
print(msgs[0])
assert torch.equal(y1, torch.relu(x)) and torch.equal(torch.signbit(y1), torch.signbit(torch.relu(x)))
print(relu_flydsl.dispatch_stats())
"""
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert "pip install flydsl==0.5.0" in r.stdout
    assert "'fallback/flydsl is not installed (pip install flydsl==0.5.0)': 2" in r.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build") / "relu-build"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_variant.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def test_built_variant_layout(built):
    k = build_variant.kernels_private()
    Digest, DigestAlgorithm, Metadata = k.Digest, k.DigestAlgorithm, k.Metadata
    variant = built / "build" / "torch-rocm"
    meta = Metadata.read_from_file(str(variant / "metadata.json"))
    assert meta.version == 1 and meta.backend.archs == ["gfx950"]
    Digest.hash_variant(DigestAlgorithm.SHA256, variant)
    meta.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, variant))
    assert (variant / "flash_relu_rocm" / "v5_nontemporal.py").is_file()
    assert not (variant / "flash_relu_rocm").is_symlink(), "the variant must be self-contained"
    assert (built / "benchmarks" / "benchmark.py").is_file()
    assert json.loads((variant / "metadata.json").read_text())["id"].startswith("_relu_flydsl_rocm_")
    # The licence ships with the variant (hashed with it: get_kernel downloads only build/) and at the root.
    license_text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in license_text and b"Version 2.0, January 2004" in license_text
    assert (variant / "LICENSE").read_bytes() == license_text and (built / "LICENSE").read_bytes() == license_text
    assert "LICENSE" in meta.digest.files


def test_variant_loads_with_kernels_and_runs(built):
    import kernels

    k = kernels.get_local_kernel(built / "build" / "torch-rocm")
    k.reset_dispatch_stats()
    x = torch.tensor([-2.0, -0.0, float("inf"), 1.5])
    y = k.relu(x)
    assert torch.equal(y, torch.relu(x)) and torch.equal(torch.signbit(y), torch.signbit(torch.relu(x)))
    assert k.__version__ == "1"
    assert k.dispatch_stats() == {"fallback/not a ROCm device": 1}
