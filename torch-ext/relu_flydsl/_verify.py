"""Check an installed variant's files against the digest in its metadata.json.

Loading a kernel does not check its files; a serving stack can call this at
startup: `relu_flydsl.verify_digest()` (this package's own folder) or
`verify_digest(path)`. Uses the `kernels` library's own digest functions
(`Digest.hash_variant` + `metadata.digest.validate`, via _kernels_private).

It returns the release fingerprint ("sha256:..."), the value recorded for the
release in releases/vN.json and the CHANGELOG, so a stack can also pin it.

A digest check, not a signature check. `kernels verify-signature REPO VERSION`
(kernels.verify.verify_variant) first checks a sigstore signature of
metadata.json (`metadata.json.sigstore`, made by a publisher its policies
trust, kernels-community's CI by default) and only then this same digest.
relu-flydsl releases are not signed, so that command answers "signature not
found" for them. verify_digest finds changed, added or missing files (a
corrupted or edited cache); it cannot tell who published metadata.json, since
whoever can rewrite the files can rewrite it too. `expected=` with the
fingerprint from the source repository's CHANGELOG anchors it to a release.
"""

import hashlib
import json
import os
import warnings
from pathlib import Path


class VariantVerificationError(RuntimeError):
    pass


def digest_fingerprint(digest: dict) -> str:
    """One sha256 over a metadata.json digest (algorithm + sorted per-file hashes)."""
    canonical = json.dumps(
        {"algorithm": str(digest["algorithm"]).lower(), "files": dict(sorted(digest["files"].items()))},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _own_variant() -> Path:
    # abspath, not resolve(): a Hub cache snapshot links each file into blobs/, which has no metadata.json
    return Path(os.path.dirname(os.path.abspath(__file__)))


def verify_digest(path=None, expected: str = None) -> str:
    """Rehash the variant folder and compare with metadata.json's digest.

    path: the variant folder (default: the folder this package was loaded from).
    expected: optional release fingerprint to pin (e.g. "sha256:..." from the
        CHANGELOG); a different release raises even when its files are intact.
    Returns the release fingerprint on success; raises VariantVerificationError
    naming every changed, added or missing file otherwise."""
    from ._kernels_private import load

    try:
        k = load()
    except ImportError as e:  # the package runs without kernels; checking needs it
        raise VariantVerificationError(f"verify_digest: {e}") from None
    Digest, DigestValidationError, Metadata = k.Digest, k.DigestValidationError, k.Metadata

    variant = Path(path) if path is not None else _own_variant()
    metadata_path = variant / "metadata.json"
    if not metadata_path.is_file():
        raise VariantVerificationError(f"{variant}: no metadata.json (not a built variant)")
    raw = metadata_path.read_bytes()
    try:
        metadata = Metadata.from_bytes(raw)
    except (OSError, ValueError) as e:
        raise VariantVerificationError(f"{metadata_path}: unreadable metadata: {e}") from None
    if metadata.digest is None:
        raise VariantVerificationError(f"{metadata_path}: has no digest")
    current = Digest.hash_variant(metadata.digest.algorithm, variant)
    try:
        metadata.digest.validate(current)
    except DigestValidationError as e:
        problems = "; ".join(str(v) for v in e.violations)
        raise VariantVerificationError(f"{variant}: files differ from the release digest: {problems}") from None
    fingerprint = digest_fingerprint(json.loads(raw)["digest"])
    if expected is not None and fingerprint != expected:
        raise VariantVerificationError(
            f"{variant}: intact, but it is release {fingerprint}, not the pinned {expected}"
        )
    return fingerprint


def verify_variant(path=None, expected: str = None) -> str:
    """Deprecated name of verify_digest() (version 1's name; same arguments and result)."""
    warnings.warn(
        "relu_flydsl.verify_variant() is deprecated: it is a digest check, now named verify_digest() "
        "(same arguments); it is not kernels' signature check (`kernels verify-signature`)",
        DeprecationWarning,
        stacklevel=2,
    )
    return verify_digest(path, expected)
