"""The consumer side of a release, offline: a serving stack loading this
version (build.toml's, N below) from the Hugging Face cache with the real
`kernels` loader.

The cache is laid out as huggingface_hub 2.4.0 leaves it after downloading
branch `vN` of the kernel repo (`snapshot_download(repo_id, repo_type="kernel",
revision="vN")`): `<HF_HUB_CACHE>/kernels--org--relu-flydsl/` with
`refs/vN` (the commit), `blobs/<git blob sha1>` (the bytes),
`snapshots/<commit>/<path>` (relative symlinks into blobs/) and
`trees/<commit>.json` (the branch's file listing). The files are exactly what
`tools/release.py` would upload to branch vN (its upload plan, built from a
fresh relu-build/).

Faking a ROCm system on CPU, only as far as the loader looks: `torch.version.hip`
(kernels picks the backend from it, so `build/torch-rocm` is chosen and the
package's `_ops` uses the rocm namespace) with `torch.version.cuda = None`
(kernels reads `torch.version.cuda` first: on a CUDA build of torch it would
pick the cuda backend), and `torch.cuda.is_available`,
`torch.cuda.current_device`, `torch.cuda.get_device_properties(...).gcnArchName`
(kernels' ArchValidator compares the device arch with metadata.json's
`backend.archs`; without `is_available()` it would skip the check). Tensors stay
on the CPU, so calls take the package's torch fallback. Every environment and
attribute change goes through monkeypatch, and socket connections fail, so the
tests also prove that nothing touches the network.
"""

import hashlib
import json
import os
import socket
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

import build_variant
import release

import kernels
import kernels.resolver
from huggingface_hub import constants
from huggingface_hub.file_download import repo_folder_name

_k = build_variant.kernels_private()  # kernels' private lock-file types, through the one module that uses them
KernelDependency, KernelLock, KernelLocks, KernelVersion = _k.KernelDependency, _k.KernelLock, _k.KernelLocks, _k.KernelVersion

REPO_ID = "org/relu-flydsl"
VARIANT = "build/torch-rocm/"
VERSION = int(build_variant.read_build_toml()["general"]["version"])
BRANCH = f"v{VERSION}"


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lay_out_cache(cache: Path, out: Path, manifest: dict, *, only_variant=False, with_ref=True):
    """Write the cache a download of branch vN leaves. only_variant/with_ref=False
    give what kernels' own online get_kernel(version=N) leaves instead: it
    downloads by commit (no refs/vN) and only build/torch-rocm/*."""
    storage = cache / repo_folder_name(repo_id=REPO_ID, repo_type="kernel")
    plan = release.plan_release(out, manifest)
    branch = plan.commits[0]
    assert branch.branch == BRANCH
    commit = hashlib.sha1(manifest["digest_fingerprint"].encode()).hexdigest()
    listing = {}
    for op in branch.operations:
        data = Path(op.path_or_fileobj).read_bytes()
        blob_id = _git_blob_id(data)
        listing[op.path_in_repo] = {"size": len(data), "blob_id": blob_id}
        if only_variant and not op.path_in_repo.startswith(VARIANT):
            continue
        blob = storage / "blobs" / blob_id
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = storage / "snapshots" / commit / op.path_in_repo
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if with_ref:
        (storage / "refs").mkdir(parents=True)
        (storage / "refs" / BRANCH).write_text(commit)
    (storage / "trees").mkdir(parents=True)
    (storage / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": listing}, indent=1))
    return storage, commit


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "relu-build"
    build_variant.build(out)
    return out, release.manifest_for(out)


@pytest.fixture(scope="module")
def cache_vn(built, tmp_path_factory):
    out, manifest = built
    cache = tmp_path_factory.mktemp("hf_cache")
    storage, commit = lay_out_cache(cache, out, manifest)
    return cache, storage, commit


def _offline_rocm(monkeypatch, cache: Path, arch="gfx950"):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("KERNELS_CACHE", raising=False)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    # huggingface_hub and kernels read these at import time: patch the values they use.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(kernels.resolver, "CACHE_DIR", None)
    monkeypatch.setattr(torch.version, "hip", "7.0.51831")
    monkeypatch.setattr(torch.version, "cuda", None)  # kernels checks CUDA before HIP
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index=0: types.SimpleNamespace(gcnArchName=f"{arch}:sramecc+:xnack-")
    )

    def no_network(self, *args, **kwargs):
        raise AssertionError(f"network access attempted offline: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)


@pytest.fixture
def offline(monkeypatch, cache_vn):
    _offline_rocm(monkeypatch, cache_vn[0])
    return cache_vn


def test_faking_rocm_hides_cuda(monkeypatch, cache_vn):
    """On a CUDA build of torch kernels would choose the cuda backend and refuse
    the torch-rocm variant: the fake must hide CUDA too. Checked as if this
    torch were a CUDA build (torch.version.cuda set, as on torch+cu130)."""
    from kernels.backends import _backend

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    _offline_rocm(monkeypatch, cache_vn[0])
    assert _backend().name == "rocm", _backend()
    module = kernels.get_kernel(REPO_ID, version=VERSION, trust_remote_code=True)
    assert Path(module.__file__).parent.name == "torch-rocm"


def test_get_kernel_loads_the_cached_release(offline, built):
    cache, storage, commit = offline
    _, manifest = built
    module = kernels.get_kernel(REPO_ID, version=VERSION, trust_remote_code=True)

    variant = storage / "snapshots" / commit / "build" / "torch-rocm"
    assert Path(module.__file__) == variant / "__init__.py"
    assert module.__version__ == str(VERSION)
    assert sorted(module.__all__) == manifest["all"]
    # The package's own check, run on its own folder: symlinks into blobs/ are followed
    # for reading but the folder stays the snapshot's.
    assert module.verify_digest() == manifest["digest_fingerprint"]
    with pytest.warns(DeprecationWarning, match=r"verify_variant\(\) is deprecated.*verify_digest"):
        assert module.verify_variant() == manifest["digest_fingerprint"]  # version 1's name still works
    module.reset_dispatch_stats()
    x = torch.tensor([-1.5, -0.0, 0.0, 2.0, float("nan")])
    y = module.relu(x)
    assert torch.equal(y.view(torch.int32)[:4], torch.tensor([0.0, -0.0, 0.0, 2.0]).view(torch.int32))
    assert y[4].isnan()
    assert module.dispatch_stats() == {"fallback/not a ROCm device": 1}


def test_missing_version_gives_the_librarys_error(offline):
    with pytest.raises(ValueError, match=rf"Version {VERSION + 1} not found, available versions: {VERSION}"):
        kernels.get_kernel(REPO_ID, version=VERSION + 1, trust_remote_code=True)


def test_arch_check_refuses_other_amd_devices(monkeypatch, cache_vn):
    _offline_rocm(monkeypatch, cache_vn[0], arch="gfx942")
    with pytest.raises(RuntimeError, match=r"ROCm arch gfx942 .* not supported .*gfx950"):
        kernels.get_kernel(REPO_ID, version=VERSION, trust_remote_code=True)


def _lockfile(path: Path, commit: str) -> Path:
    # The format `kernels lock` writes (KernelLocks.to_json), spelled out.
    text = json.dumps([{"dependency": {"repo-id": REPO_ID, "version": VERSION}, "lock": {"commit": commit}}], indent=2)
    assert KernelLocks.from_json(text) == KernelLocks(
        {KernelDependency(REPO_ID, KernelVersion.Version(VERSION)): KernelLock(commit)}
    )
    path.write_text(text)
    return path


def test_lockfile_pinning_the_release_loads(offline, tmp_path):
    cache, storage, commit = offline
    module = kernels.load_kernel(REPO_ID, lockfile=_lockfile(tmp_path / "kernels.lock", commit))
    assert Path(module.__file__) == storage / "snapshots" / commit / "build" / "torch-rocm" / "__init__.py"
    assert module.__version__ == str(VERSION)


def test_lockfile_pinning_another_commit_is_refused(offline, tmp_path):
    other = "0" * 40
    with pytest.raises(FileNotFoundError, match=r"Cannot find a local snapshot for org/relu-flydsl \(revision: 0{40}\)"):
        kernels.load_kernel(REPO_ID, lockfile=_lockfile(tmp_path / "kernels.lock", other))


def test_tampered_file_in_the_cache_is_detected(monkeypatch, built, tmp_path):
    out, manifest = built
    storage, commit = lay_out_cache(tmp_path / "cache", out, manifest)
    _offline_rocm(monkeypatch, tmp_path / "cache")
    # Where the loader would import from, resolved by kernels itself (no import).
    variant = kernels.install_kernel(REPO_ID, version=VERSION, local_files_only=True)
    assert variant == storage / "snapshots" / commit / "build" / "torch-rocm"
    monkeypatch.undo()  # the check itself needs no fake ROCm

    from relu_flydsl._verify import VariantVerificationError, verify_digest

    assert verify_digest(variant) == manifest["digest_fingerprint"]
    assert verify_digest(variant, expected=manifest["digest_fingerprint"]) == manifest["digest_fingerprint"]
    with pytest.raises(VariantVerificationError, match="not the pinned"):
        verify_digest(variant, expected="sha256:" + "0" * 64)

    target = variant / "flash_relu_rocm" / "plan.py"
    assert target.is_symlink()
    target.write_text(target.read_text() + "\n# patched\n")  # writes the blob, as an attacker would
    with pytest.raises(VariantVerificationError, match=r"flash_relu_rocm/plan\.py"):
        verify_digest(variant)

    target.unlink()
    (variant / "extra.py").write_text("print('hi')\n")
    with pytest.raises(VariantVerificationError) as error:
        verify_digest(variant)
    assert "flash_relu_rocm/plan.py" in str(error.value) and "extra.py" in str(error.value)


def test_offline_needs_the_full_branch_download(monkeypatch, built, tmp_path):
    """What kernels 0.17.2 + huggingface_hub 2.4.0 do with the cache an online
    get_kernel(version=N) leaves (download by commit, build/torch-rocm only):
    offline, version=N is unknown (no refs/vN) and even a lock on the right
    commit is refused (the cached listing names files never downloaded). This
    is why docs/releases.md says to pre-fetch the whole branch; if a future
    library version changes this, this test fails and the doc must follow."""
    out, manifest = built
    storage, commit = lay_out_cache(tmp_path / "cache", out, manifest, only_variant=True, with_ref=False)
    _offline_rocm(monkeypatch, tmp_path / "cache")
    with pytest.raises(ValueError, match="not available in the local cache"):
        kernels.get_kernel(REPO_ID, version=VERSION, trust_remote_code=True)
    with pytest.raises(FileNotFoundError, match="Cannot find a local snapshot") as error:
        kernels.load_kernel(REPO_ID, lockfile=_lockfile(tmp_path / "kernels.lock", commit))
    assert "incomplete" in str(error.value.__cause__)
