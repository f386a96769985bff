"""What names a release: where it lives on the Hub and its fingerprint.

One setting, build.toml's `[general.hub] repo-id` (owner/name), and the version give every
address: the kernel repository's page, the version branch `vN`, and the source tree the release
carries on that branch under `source/` (tools/release.py uploads it). The card links only there,
and tests/release/test_release_tool.py checks each link against what the upload sends.
Standard library only: tools/build_variant.py imports this before torch or huggingface_hub.
"""

import importlib.util
import json
from pathlib import Path

ENDPOINT = "https://huggingface.co"
# huggingface_hub.constants.REPO_TYPES_URL_PREFIXES["kernel"] (a test holds the two equal)
URL_PREFIX = "kernels/"
SOURCE_DIR = "source"  # the folder of a version branch holding the source tree it was built from


def repo_id(config: dict) -> str:
    return config["general"]["hub"]["repo-id"]


def branch(config: dict) -> str:
    return f"v{int(config['general']['version'])}"


def repo_url(config: dict) -> str:
    """The kernel repository's page on the Hub."""
    return f"{ENDPOINT}/{URL_PREFIX}{repo_id(config)}"


def source_url(config: dict) -> str:
    """The source tree of this version: a folder of branch vN (metadata.json `source`, the card)."""
    return f"{repo_url(config)}/tree/{branch(config)}/{SOURCE_DIR}"


def fingerprint(variant: Path) -> str:
    """The release fingerprint of a built variant folder, the value `verify_digest()` returns and
    `verify_digest(expected=...)` takes: its own _verify.py over its metadata.json digest."""
    spec = importlib.util.spec_from_file_location("_relu_release_identity_verify", Path(variant) / "_verify.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.digest_fingerprint(json.loads((Path(variant) / "metadata.json").read_text())["digest"])
