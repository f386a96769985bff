"""verify_digest(expected=...) pins one release: the whole fingerprint, not
a prefix of it (a shortened pin would accept every release sharing it)."""

import pytest

from relu_flydsl._verify import VariantVerificationError, verify_digest


def test_a_pin_is_the_whole_fingerprint(variant_build):
    variant = variant_build / "build" / "torch-rocm"  # the variant folder a Hub download holds
    fingerprint = verify_digest(variant)
    assert fingerprint.startswith("sha256:") and len(fingerprint) == len("sha256:") + 64
    assert verify_digest(variant, expected=fingerprint) == fingerprint
    for pin in (fingerprint[:-1], fingerprint[:len("sha256:") + 8], "sha256:", "", fingerprint + "0"):
        with pytest.raises(VariantVerificationError, match="not the pinned"):
            verify_digest(variant, expected=pin)
