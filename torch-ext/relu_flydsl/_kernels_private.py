"""The one place that uses the `kernels` library's private module `kernels._rust`.

kernels 0.17.2 has no public API for what relu-flydsl needs from it: validating
build.toml (`Build.open`), hashing a variant folder and comparing digests
(`Digest.hash_variant`, `Digest.validate`, `DigestValidationError`) and the
lock-file types (`KernelLocks`, ...). kernels' own loader and
`kernels verify-signature` use these same classes, so our digests are theirs.
`Metadata` is public (`kernels.Metadata`) and is taken from there.

Users: the shipped `_verify.py` (verify_digest), tools/build_variant.py,
tools/release.py and the tests. The tools load this file by path (it has no
relative imports), without importing the package and torch.

`load()` returns the classes or raises KernelsPrivateAPIChanged naming what is
missing; `check()` also exercises every call we make on a scratch variant.
tests/release/test_package.py runs `check()`, so a kernels upgrade that changes them
fails there, with that message, instead of deep inside a tool.
"""

import functools
import json
import tempfile
import types
from pathlib import Path

TESTED_WITH = "0.17.2"  # requirements.txt's pin
PRIVATE_NAMES = ("Build", "Digest", "DigestAlgorithm", "DigestValidationError",
                 "KernelDependency", "KernelLock", "KernelLocks", "KernelVersion")


class KernelsPrivateAPIChanged(ImportError):
    pass


def _changed(what: str) -> KernelsPrivateAPIChanged:
    try:
        import kernels

        installed = getattr(kernels, "__version__", "?")
    except ImportError:
        installed = "?"
    return KernelsPrivateAPIChanged(
        f"kernels {installed} changed its private API kernels._rust ({what}); relu_flydsl uses it "
        f"as of kernels {TESTED_WITH} in relu_flydsl/_kernels_private.py: pin kernels=={TESTED_WITH} "
        "or update that module"
    )


@functools.cache
def load() -> types.SimpleNamespace:
    """The kernels classes relu-flydsl uses, by name. ImportError when kernels is
    not installed; KernelsPrivateAPIChanged when it is but lacks one of them."""
    try:
        import kernels
    except ImportError as e:
        raise ImportError(f"the `kernels` library is needed here: {e} (pip install kernels=={TESTED_WITH})") from None
    try:
        from kernels import _rust
    except ImportError as e:
        raise _changed(f"cannot import kernels._rust: {e}") from None
    missing = [n for n in PRIVATE_NAMES if not hasattr(_rust, n)]
    if missing:
        raise _changed(f"kernels._rust has no {', '.join(missing)}")
    metadata = getattr(kernels, "Metadata", None) or getattr(_rust, "Metadata", None)
    if metadata is None:
        raise _changed("neither kernels.Metadata nor kernels._rust.Metadata exists")
    return types.SimpleNamespace(Metadata=metadata, **{n: getattr(_rust, n) for n in PRIVATE_NAMES})


def check(build_root=None) -> None:
    """Run every call relu-flydsl makes on a scratch variant (and on
    `build_root`/build.toml when given); raise KernelsPrivateAPIChanged naming
    the first one that no longer behaves as in kernels 0.17.2."""
    k = load()
    step = "?"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            variant = Path(tmp)
            (variant / "__init__.py").write_text("x = 1\n")
            step = "Digest.hash_variant(DigestAlgorithm.SHA256, folder).files / .algorithm"
            digest = k.Digest.hash_variant(k.DigestAlgorithm.SHA256, variant)
            files = dict(digest.files)
            assert list(files) == ["__init__.py"] and str(digest.algorithm).lower() == "sha256", (files, digest.algorithm)
            step = "Metadata.read_from_file / Metadata.from_bytes of the metadata.json tools/build_variant.py writes"
            meta = {"name": "probe", "id": "_probe_rocm_0000000", "version": 1, "license": "Apache-2.0",
                    "python-depends": [], "backend": {"type": "rocm", "archs": ["gfx950"]},
                    "digest": {"algorithm": "sha256", "files": files}}
            (variant / "metadata.json").write_text(json.dumps(meta))
            k.Metadata.read_from_file(str(variant / "metadata.json"))
            parsed = k.Metadata.from_bytes((variant / "metadata.json").read_bytes())
            assert parsed.version == 1 and parsed.digest is not None
            step = "Metadata.digest.validate(Digest) on intact files"
            parsed.digest.validate(k.Digest.hash_variant(parsed.digest.algorithm, variant))
            step = "DigestValidationError.violations naming a changed file"
            (variant / "__init__.py").write_text("x = 2\n")
            try:
                parsed.digest.validate(k.Digest.hash_variant(parsed.digest.algorithm, variant))
            except k.DigestValidationError as e:
                assert any("__init__.py" in str(v) for v in e.violations), e.violations
            else:
                raise AssertionError("a changed file passed validation")
            step = "KernelLocks.from_json with KernelDependency / KernelVersion.Version / KernelLock"
            lock = json.dumps([{"dependency": {"repo-id": "org/x", "version": 1}, "lock": {"commit": "0" * 40}}])
            assert k.KernelLocks.from_json(lock) == k.KernelLocks(
                {k.KernelDependency("org/x", k.KernelVersion.Version(1)): k.KernelLock("0" * 40)})
        if build_root is not None:
            step = f"Build.open({build_root})"
            k.Build.open(str(build_root))
    except KernelsPrivateAPIChanged:
        raise
    except Exception as e:
        raise _changed(f"{step} failed: {type(e).__name__}: {e}") from e
