"""Check an installed variant against the digest in its metadata.json.

Loading a kernel does not check its files; a serving stack can call this at
startup: `relu_flydsl.verify_variant()` (this package's own folder) or
`verify_variant(path)`. Uses the `kernels` library's own digest functions.
"""

from pathlib import Path


class VariantVerificationError(RuntimeError):
    pass


def verify_variant(path=None) -> str:
    """Rehash the variant folder and compare with metadata.json's digest.
    Returns the digest on success; raises VariantVerificationError naming
    every changed, added or missing file otherwise."""
    from kernels._rust import Digest, DigestValidationError, Metadata

    variant = Path(path) if path is not None else Path(__file__).resolve().parent
    metadata_path = variant / "metadata.json"
    if not metadata_path.is_file():
        raise VariantVerificationError(f"{variant}: no metadata.json (not a built variant)")
    metadata = Metadata.from_bytes(metadata_path.read_bytes())
    if metadata.digest is None:
        raise VariantVerificationError(f"{metadata_path}: has no digest")
    current = Digest.hash_variant(metadata.digest.algorithm, variant)
    try:
        metadata.digest.validate(current)
    except DigestValidationError as e:
        problems = "; ".join(str(v) for v in e.violations)
        raise VariantVerificationError(f"{variant}: files differ from the release digest: {problems}") from None
    return str(metadata.digest)
