"""Build relu-build/: the Hub layout `kernels` loads and `kernels benchmark` runs.

    relu-build/
      build/torch-rocm/   the variant: torch-ext/relu_flydsl/** flat, with
                          flash_relu_rocm/ copied in (relative imports only),
                          _ops.py stamped with a unique id, metadata.json + digest
      benchmarks/         benchmark.py (kernels benchmark workloads)
      README.md           the card (CARD.md filled in)

Usage: python tools/build_variant.py [--out relu-build]
Validation and hashing are the kernels library's (kernels._rust).
"""

import argparse
import hashlib
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch-ext" / "relu_flydsl"
VARIANT = "torch-rocm"


def read_build_toml(root: Path = ROOT) -> dict:
    from kernels._rust import Build

    Build.open(str(root))  # the kernels library's own build.toml validation
    return tomllib.loads((root / "build.toml").read_text())


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


def write_metadata(variant: Path, config: dict, unique_id: str) -> dict:
    from kernels._rust import Digest, DigestAlgorithm, Metadata

    general = config["general"]
    digest = Digest.hash_variant(DigestAlgorithm.SHA256, variant)
    metadata = {
        "name": general["name"],
        "id": f"_{general['name'].replace('-', '_')}_rocm_{unique_id}",
        "version": general["version"],
        "license": general["license"],
        "python-depends": [],  # flydsl is not on kernels' allowlist: imported lazily, see README
        "backend": {"type": "rocm", "archs": list(config["torch-noarch"]["rocm_archs"])},
        "digest": {"algorithm": str(digest.algorithm).lower(), "files": dict(digest.files)},
    }
    path = variant / "metadata.json"
    path.write_text(json.dumps(metadata, indent=2) + "\n")
    Metadata.read_from_file(str(path))  # kernels must accept what we wrote
    return metadata


def render_card(version: int) -> str:
    body_path = ROOT / "docs" / "card_body.md"
    body = body_path.read_text() if body_path.exists() else ""
    # The body first, so `{version}` in docs/card_body.md follows build.toml too.
    return (ROOT / "CARD.md").read_text().replace("{card_body}", body).replace("{version}", str(version))


def build(out: Path) -> dict:
    config = read_build_toml()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    variant = tmp / "build" / VARIANT
    _copy_package(variant)
    unique_id = source_id(variant)
    stamp_ops(variant, unique_id)
    metadata = write_metadata(variant, config, unique_id)
    # Only what `kernels benchmark` discovers (benchmarks/benchmark*.py): the ladder
    # harness and host_overhead.py need this repository's tools/ and stay here.
    (tmp / "benchmarks").mkdir()
    for script in sorted((ROOT / "benchmarks").glob("benchmark*.py")):
        shutil.copy2(script, tmp / "benchmarks" / script.name)
    (tmp / "README.md").write_text(render_card(config["general"]["version"]))
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
