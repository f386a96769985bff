"""Build relu-build/: the Hub layout `kernels` loads and `kernels benchmark` runs.

    relu-build/
      build/torch-rocm/   the variant: torch-ext/relu_flydsl/** flat, with
                          flash_relu_rocm/ copied in (relative imports only),
                          code_objects/ (gfx950 .co files + manifest.json,
                          rebuilt first when stale), LICENSE, _ops.py stamped
                          with a unique id, metadata.json + digest
      benchmarks/         benchmark.py (kernels benchmark workloads)
      README.md           the card (CARD.md.j2 rendered with jinja2)
      LICENSE             Apache-2.0

Usage: .venv/bin/python tools/build_variant.py [--out relu-build]
Validation and hashing are the kernels library's, through the package's
_kernels_private.py (the one user of the private kernels._rust).
"""

import argparse
import ast
import functools
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import release_identity
from flash_relu_rocm import build as objects  # rungs -> code objects

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch-ext" / "relu_flydsl"
VARIANT = "torch-rocm"
BUILDER = "tools/build_variant.py"
LICENSE = ROOT / "LICENSE"
CARD_TEMPLATE = ROOT / "CARD.md.j2"
# The source tree the release carries on its Hub branch (the card links to it, metadata.json
# records it): derived from build.toml's repo-id and version, the one setting (release_identity).
SOURCE_URL = release_identity.source_url(tomllib.loads((ROOT / "build.toml").read_text()))


def _load_by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def kernels_private():
    """The kernels classes from the package's _kernels_private.py, loaded by path
    (no package import, so no torch import)."""
    return _load_by_path("_relu_flydsl_kernels_private", PACKAGE / "_kernels_private.py").load()


def read_build_toml(root: Path = ROOT) -> dict:
    kernels_private().Build.open(str(root))  # the kernels library's own build.toml validation
    return tomllib.loads((root / "build.toml").read_text())


def public_api(variant: Path) -> list:
    """`__all__` of the package's __init__.py, read without importing."""
    tree = ast.parse((variant / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return sorted(ast.literal_eval(node.value))
    raise RuntimeError(f"{variant}/__init__.py has no literal __all__: the public API must be explicit")


def supported_dtypes(variant: Path) -> list:
    """DTYPES of the variant's flash_relu_rocm/dtypes.py, the one dtype table
    (loaded standalone: it imports no torch/flydsl)."""
    return sorted(_load_by_path("_relu_flydsl_dtypes", variant / "flash_relu_rocm" / "dtypes.py").DTYPES)


def _copy_package(dst: Path):
    def ignore(folder, names):
        return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]

    # symlinks=False: the flash_relu_rocm link becomes a real copy in the variant
    shutil.copytree(PACKAGE, dst, symlinks=False, ignore=ignore)


def source_id(variant: Path) -> str:
    """Short hash of the variant's sources: the op namespace's unique id."""
    h = hashlib.sha256()
    for path in sorted(p for p in variant.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(variant)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:7]


def stamp_ops(variant: Path, unique_id: str):
    ops = variant / "_ops.py"
    text, n = re.subn(r'^_UNIQUE_ID = ".*"$', f'_UNIQUE_ID = "{unique_id}"', ops.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{ops}: expected one _UNIQUE_ID line")
    ops.write_text(text)


def stamp_version(variant: Path, version: int):
    """Write the release number into the variant's _version.py: the shipped
    package then reads no build.toml (and needs no tomllib, Python 3.11+)."""
    path = variant / "_version.py"
    text, n = re.subn(r"^_STAMPED = None\b.*$", f"_STAMPED = {int(version)}", path.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{path}: expected one `_STAMPED = None` line")
    path.write_text(text)


def git_state(root: Path = ROOT):
    """{"commit", "dirty"} of the source checkout (dirty: uncommitted changes to
    tracked files, as kernels defines it), or None outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit, "dirty": dirty}


def provenance(root: Path = ROOT) -> dict:
    """kernels' `provenance` block. kernels requires a `kernel-builder` entry;
    this variant is built by tools/build_variant.py, not by kernel-builder, and
    says so in the version field (no builder commit is claimed)."""
    block = {"kernel-builder": {"version": f"none: {BUILDER}"}}
    state = git_state(root)
    if state is not None:
        block["kernel"] = state
    return block


def write_metadata(variant: Path, config: dict, unique_id: str) -> dict:
    k = kernels_private()
    general = config["general"]
    digest = k.Digest.hash_variant(k.DigestAlgorithm.SHA256, variant)
    metadata = {
        "name": general["name"],
        "id": f"_{general['name'].replace('-', '_')}_rocm_{unique_id}",
        "version": general["version"],
        "license": general["license"],
        "source": release_identity.source_url(config),
        "python-depends": [],  # the variant imports only the standard library, torch and itself
        "backend": {"type": "rocm", "archs": list(config["torch-noarch"]["rocm_archs"])},
        "digest": {"algorithm": str(digest.algorithm).lower(), "files": dict(digest.files)},
        "provenance": provenance(),
    }
    path = variant / "metadata.json"
    path.write_text(json.dumps(metadata, indent=2) + "\n")
    k.Metadata.read_from_file(str(path))  # kernels must accept what we wrote
    return metadata


def render_card(config: dict, variant: Path, template: Path = CARD_TEMPLATE) -> str:
    """The card: CARD.md.j2 rendered with jinja2 (an unknown variable is an error)."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.from_string(template.read_text()).render(**card_variables(config, variant))


def entry_pythons(variant: Path) -> str:
    """_compiled_entry.PYTHONS ("3.10-3.13"), read without importing (it imports torch)."""
    tree = ast.parse((variant / "_compiled_entry.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PYTHONS" for t in node.targets):
            (lo, hi) = ast.literal_eval(node.value)
            return f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}"
    raise RuntimeError(f"{variant}/_compiled_entry.py has no literal PYTHONS")


def shipped(variant: Path) -> dict:
    """What code_objects/manifest.json says ships: the code objects and the compiled entry, with
    the toolchain that built each (the card's "What ships")."""
    manifest = json.loads((variant / "code_objects" / "manifest.json").read_text())
    tools, entry = manifest["toolchain"], manifest["entry"]
    return {
        "objects": len(manifest["kernels"]),
        "objects_toolchain": f"FlyDSL {tools['flydsl']}, {tools['llvm']}",
        "entry_file": entry["file"],
        "entry_abi": entry["abi"],
        "entry_toolchain": f"{entry['toolchain']['cc']}, CPython {entry['toolchain']['python_headers']} headers",
    }


def card_variables(config: dict, variant: Path) -> dict:
    general = config["general"]
    return {
        "version": general["version"],
        "repo_id": general["hub"]["repo-id"],
        "source_url": release_identity.source_url(config),
        "fingerprint": release_identity.fingerprint(variant),
        "public_api": public_api(variant),
        "dtypes": supported_dtypes(variant),
        "archs": list(config["torch-noarch"]["rocm_archs"]),
        "entry_pythons": entry_pythons(variant),
        **shipped(variant),
    }


def build(out: Path) -> dict:
    config = read_build_toml()
    rebuilt = objects.ensure_objects(objects.OBJECTS_DIR)
    if rebuilt is not None:
        print(f"rebuilt the code objects ({rebuilt})")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    variant = tmp / "build" / VARIANT
    _copy_package(variant)
    stamp_version(variant, config["general"]["version"])
    shutil.copy2(LICENSE, variant / "LICENSE")  # hashed with the variant: get_kernel downloads only build/
    shutil.copy2(LICENSE, tmp / "LICENSE")
    unique_id = source_id(variant)
    stamp_ops(variant, unique_id)
    metadata = write_metadata(variant, config, unique_id)
    # Only what `kernels benchmark` discovers (benchmarks/benchmark*.py): the ladder
    # harness and host_overhead.py need this repository's tools/ and stay here.
    (tmp / "benchmarks").mkdir()
    for script in sorted((ROOT / "benchmarks").glob("benchmark*.py")):
        shutil.copy2(script, tmp / "benchmarks" / script.name)
    (tmp / "README.md").write_text(render_card(config, variant))
    # Replace the old build only once the new one is complete.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return metadata


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "relu-build")
    args = parser.parse_args(argv)
    metadata = build(args.out.resolve())
    files = len(metadata["digest"]["files"])
    print(f"built {args.out}/build/{VARIANT}: {metadata['name']} v{metadata['version']} id {metadata['id']}, {files} files hashed")


if __name__ == "__main__":
    sys.exit(main())
