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

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "torch-ext" / "relu_flydsl"

import build_variant

KP = build_variant._load_by_path("_kp_under_test", PKG / "_kernels_private.py")  # the one user of kernels._rust
VERSION = int(build_variant.read_build_toml()["general"]["version"])


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
    code = ("import sys, relu_flydsl, torch; "
            "relu_flydsl.relu(torch.ones(4)); print('flydsl' in sys.modules, 'torch._dynamo' in sys.modules)")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    # neither flydsl nor torch._dynamo (~1 s: the cold start's package import) is loaded by an eager call
    assert r.stdout.strip() == "False False"


def test_gfx950_without_hip_falls_back_once_without_flydsl():
    """A gfx950 device but no HIP runtime in the process, flydsl not installed
    (serving never needs it: the kernels are prebuilt): results stay correct
    (torch fallback), one warning names the reason, the stats count it."""
    code = f"""
import sys, warnings
sys.modules['flydsl'] = None  # makes `import flydsl` raise ImportError
import torch, relu_flydsl
from relu_flydsl import _dispatch
from vgpu.serve import present_cpu_as
present_cpu_as(relu_flydsl)  # CPU tensors as a gfx950, for both device hooks
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
    assert "no HIP runtime (libamdhip64)" in r.stdout and "pip install flydsl" not in r.stdout
    assert "'fallback/no HIP runtime (libamdhip64) is loaded in this process': 2" in r.stdout


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
    assert meta.version == VERSION and meta.backend.archs == ["gfx950"]
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
    # Every code object and the manifest are hashed with the variant.
    objects = sorted(p.name for p in (variant / "code_objects").iterdir())
    assert "manifest.json" in objects and sum(n.endswith(".co") for n in objects) == 68
    assert all(f"code_objects/{n}" in meta.digest.files for n in objects)


def test_metadata_records_source_and_provenance(built):
    """kernels' `source` (the source tree the release carries on its Hub branch, derived from
    build.toml's repo-id and version: release_identity) and `provenance` (the kernel's commit
    and whether the tree had uncommitted changes)."""
    variant = built / "build" / "torch-rocm"
    raw = json.loads((variant / "metadata.json").read_text())
    meta = build_variant.kernels_private().Metadata.read_from_file(str(variant / "metadata.json"))
    import release_identity

    config = build_variant.read_build_toml()
    assert "source" not in config["general"], "the source address is derived from repo-id, not a second setting"
    assert meta.source == raw["source"] == build_variant.SOURCE_URL == release_identity.source_url(config)
    assert raw["source"].endswith(f"{config['general']['hub']['repo-id']}/tree/v{config['general']['version']}/source")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        assert "kernel" not in raw["provenance"]  # not a git checkout: no commit is claimed
        return
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout.strip())
    assert meta.provenance.kernel.commit == raw["provenance"]["kernel"]["commit"] == head.stdout.strip()
    assert meta.provenance.kernel.dirty is raw["provenance"]["kernel"]["dirty"] is dirty
    assert raw["provenance"]["kernel-builder"]["version"].startswith("none: ")  # kernel-builder did not build it


def test_provenance_follows_the_checkouts_state(tmp_path):
    """The dirty flag is read, not assumed: a fresh repository, clean then edited."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    clean = build_variant.provenance(repo)["kernel"]
    assert clean["dirty"] is False and len(clean["commit"]) == 40
    (repo / "untracked.py").write_text("")
    assert build_variant.provenance(repo)["kernel"]["dirty"] is False  # untracked files do not count (kernels' rule)
    (repo / "a.py").write_text("x = 2\n")
    assert build_variant.provenance(repo)["kernel"] == {"commit": clean["commit"], "dirty": True}
    assert "kernel" not in build_variant.provenance(tmp_path / "not-a-repo")


# Standard-library modules and names that Python 3.10 lacks (the variant supports 3.10+).
NEW_MODULES = {"tomllib": "3.11", "wsgiref.types": "3.11", "dbm.sqlite3": "3.13", "annotationlib": "3.14",
               "compression": "3.14", "concurrent.interpreters": "3.14", "string.templatelib": "3.14"}
NEW_NAMES = {
    "typing": {"Self", "LiteralString", "Never", "assert_never", "assert_type", "reveal_type", "TypeVarTuple",
               "Unpack", "Required", "NotRequired", "dataclass_transform", "get_overloads", "clear_overloads",
               "override", "TypeAliasType", "ReadOnly", "TypeIs", "NoDefault"},
    "enum": {"StrEnum", "ReprEnum", "EnumCheck", "FlagBoundary", "verify", "member", "nonmember", "global_enum"},
    "datetime": {"UTC"}, "hashlib": {"file_digest"}, "contextlib": {"chdir"}, "operator": {"call"},
    "itertools": {"batched"}, "asyncio": {"TaskGroup", "Runner", "timeout"},
}
NEW_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup"}


def py310_problems(source: str, name: str) -> list:
    """Why `source` would not run on Python 3.10: syntax newer than 3.10, or a
    standard-library module or name added later."""
    try:
        tree = ast.parse(source, filename=name, feature_version=(3, 10))
    except SyntaxError as e:
        return [f"{name}:{e.lineno}: not Python 3.10 syntax ({e.msg})"]
    problems = []
    aliases = {}
    for node in ast.walk(tree):
        line = f"{name}:{getattr(node, 'lineno', '?')}"
        if type(node).__name__ in ("TryStar", "TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple"):
            problems.append(f"{line}: {type(node).__name__} is newer than Python 3.10")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in NEW_MODULES or a.name.split(".")[0] in NEW_MODULES:
                    problems.append(f"{line}: import {a.name} (Python {NEW_MODULES.get(a.name, '3.11+')})")
                aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in NEW_MODULES:
                problems.append(f"{line}: from {node.module} import (Python {NEW_MODULES[node.module]})")
            for a in node.names:
                if f"{node.module}.{a.name}" in NEW_MODULES or a.name in NEW_NAMES.get(node.module, ()):
                    problems.append(f"{line}: from {node.module} import {a.name} (newer than Python 3.10)")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module and node.attr in NEW_NAMES.get(module, ()):
                problems.append(f"{line}: {module}.{node.attr} (newer than Python 3.10)")
        elif isinstance(node, ast.Name) and node.id in NEW_BUILTINS:
            problems.append(f"{line}: {node.id} (Python 3.11)")
    return problems


@pytest.mark.parametrize("snippet, words", [
    ("import tomllib", "import tomllib"),
    ("from tomllib import loads", "from tomllib import"),
    ("from typing import Self", "typing import Self"),
    ("import datetime\nx = datetime.UTC", "datetime.UTC"),
    ("try:\n    pass\nexcept* ValueError:\n    pass", "3.10"),
    ("raise ExceptionGroup('x', [])", "ExceptionGroup"),
    ("import wsgiref.types", "wsgiref.types"),
])
def test_the_python_310_check_finds_newer_code(snippet, words):
    problems = py310_problems(snippet, "x.py")
    assert problems and words in problems[0], problems


def test_variant_is_python_310_code(built):
    """Every file of the shipped variant parses as Python 3.10 and imports
    nothing the 3.10 standard library lacks (kernels supports Python 3.10+)."""
    variant = built / "build" / "torch-rocm"
    files = sorted(variant.rglob("*.py"))
    assert any(f.name == "_version.py" for f in files) and len(files) > 10
    problems = [p for f in files for p in py310_problems(f.read_text(), str(f.relative_to(variant)))]
    assert problems == []


def test_the_variants_version_is_stamped(built):
    """The variant reads its version from its own _version.py, no file and no TOML parser."""
    path = built / "build" / "torch-rocm" / "_version.py"
    assert f"_STAMPED = {VERSION}" in path.read_text()
    code = (f"import sys; sys.modules['tomllib'] = None; import importlib.util as u; "
            f"s = u.spec_from_file_location('v', {str(path)!r}); m = u.module_from_spec(s); s.loader.exec_module(m); "
            "print(m.__version__)")
    r = _run(code)
    assert r.returncode == 0 and r.stdout.strip() == str(VERSION), r.stderr


def test_variant_loads_with_kernels_and_runs(built):
    import kernels

    k = kernels.get_local_kernel(built / "build" / "torch-rocm")
    k.reset_dispatch_stats()
    x = torch.tensor([-2.0, -0.0, float("inf"), 1.5])
    y = k.relu(x)
    assert torch.equal(y, torch.relu(x)) and torch.equal(torch.signbit(y), torch.signbit(torch.relu(x)))
    assert k.__version__ == str(VERSION)
    assert k.dispatch_stats() == {"fallback/not a ROCm device": 1}
