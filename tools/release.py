"""Release relu-flydsl version N to branch `vN` of the Hub kernel repo.

    .venv/bin/python tools/release.py --dry-run      build, check, print branch + files; no network, writes only relu-build/
    .venv/bin/python tools/release.py --record-only  build, check, write CHANGELOG entry + releases/vN.json
    HF_TOKEN=... .venv/bin/python tools/release.py   the above, then upload to branch vN (and the card to main)

N is build.toml's [general] version (the single source); where the release lives is
build.toml's [general.hub] repo-id (the one setting: tools/release_identity.py derives the
repository's address, the branch and the source tree's address from it). Steps:
  1. build relu-build/ (tools/build_variant.py) for N;
  2. check the kernels versioning rules against the last recorded release
     (releases/v*.json): the public API is `__all__` of the variant's
     __init__.py, the supported dtypes (flash_relu_rocm/dtypes.py) and the
     ladder rungs (flash_relu_rocm/registry.py RUNGS, `relu(x, rung=...)`).
     Adding or removing a symbol, dtype or rung needs a new version; version 0
     is alpha and exempt; versions never go backwards or skip; a version must
     add the symbols promised for it (PROMISED_ADDITIONS);
  3. write the CHANGELOG.md entry for N (kept if present) and releases/vN.json
     (version, branch, __all__, dtypes, rungs, the variant digest from metadata.json);
  4. put the source tree into relu-build/source/: the files git carries (tracked, and
     untracked ones it does not ignore) as they are on disk, so the tree the variant was built
     from, with this release's record, travels with it; the card links there and nowhere else
     (every link is checked against the upload's files before anything is sent);
  5. upload with huggingface_hub's own steps, repo_type="kernel": create_repo and
     create_branch (exist_ok), then HfApi.upload_folder(revision=vN,
     allow_patterns=..., delete_patterns=...): build/torch-rocm/**, benchmarks/**,
     source/**, README.md (the card) and LICENSE, deleting files a previous upload left
     under build/torch-rocm/, benchmarks/ and source/; then HfApi.upload_file puts the card
     as README.md on main (the Hub page shows main; kernel-builder's `upload` does the same).
     With hf_xet installed, upload_folder may split a large folder into several commits.

--dry-run prints the operations those calls make, computed with huggingface_hub's
own pattern filter (`filter_repo_objects`) and the same patterns; the files that
delete_patterns removes are known only at upload time (they depend on the branch).
tests/release/test_release_tool.py runs the real upload_folder against a recording HfApi
and checks it sends exactly what --dry-run printed.
"""

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import re
import sys
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import build_variant
import release_identity

ROOT = build_variant.ROOT
RELEASES = ROOT / "releases"
CHANGELOG = ROOT / "CHANGELOG.md"
REPO_TYPE = "kernel"
MAIN_BRANCH = "main"
SOURCE = release_identity.SOURCE_DIR
# What upload_folder sends from relu-build/ (huggingface_hub's fnmatch patterns: `*` spans `/`).
ALLOW_PATTERNS = (f"build/{build_variant.VARIANT}/*", "benchmarks/*", f"{SOURCE}/*", "README.md", "LICENSE")
IGNORE_PATTERNS = ("*/__pycache__/*", "*.pyc")
# Folders of the version branch this tool owns: files in them that this build lacks are deleted.
DELETE_PATTERNS = (f"build/{build_variant.VARIANT}/*", "benchmarks/*", f"{SOURCE}/*")


class ReleaseError(RuntimeError):
    pass


# Symbols an earlier release promised for a version: that version must export them.
# verify_digest (version 1's verify_variant renamed) joins __all__ with version 2; version 4 adds the
# health check (status, explain) and makes the digest check's error public; version 5 ships the
# hardware check (check), which its card and README give as the post-upgrade check.
PROMISED_ADDITIONS = {2: ("verify_digest",), 4: ("VariantVerificationError", "explain", "status"), 5: ("check",)}
# What the versioning rules compare: manifest key -> what it is called in messages.
SURFACES = (("all", "public symbols"), ("dtypes", "dtypes"), ("rungs", "rungs"))


# ---- what a release contains ---------------------------------------------
public_api = build_variant.public_api          # `__all__`, read without importing
supported_dtypes = build_variant.supported_dtypes  # flash_relu_rocm/dtypes.py DTYPES


def ladder_rungs(variant: Path) -> list:
    """The rung names of the variant's flash_relu_rocm/registry.py (RUNGS),
    loaded as a package from the variant (it imports neither torch nor flydsl)."""
    package = variant / "flash_relu_rocm"
    name = f"_relu_release_ladder_{abs(hash(str(package)))}"
    spec = importlib.util.spec_from_file_location(name, package / "__init__.py", submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        return sorted(module.registry.RUNGS)
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def digest_fingerprint(digest: dict) -> str:
    """One sha256 over the variant's per-file digest: the package's own
    `_verify.digest_fingerprint`, the value `verify_digest()` returns (for a built
    variant folder: release_identity.fingerprint, which the card prints)."""
    spec = importlib.util.spec_from_file_location("_relu_release_verify", build_variant.PACKAGE / "_verify.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.digest_fingerprint(digest)


def manifest_for(out: Path) -> dict:
    """The release manifest of a built relu-build/ folder."""
    config = build_variant.read_build_toml()
    variant = out / "build" / build_variant.VARIANT
    metadata = json.loads((variant / "metadata.json").read_text())
    version = int(config["general"]["version"])
    if int(metadata["version"]) != version:
        raise ReleaseError(f"{variant}/metadata.json has version {metadata['version']}, build.toml has {version}: rebuild")
    return {
        "version": version,
        "repo_id": release_identity.repo_id(config),
        "branch": release_identity.branch(config),
        "variant": build_variant.VARIANT,
        "kernel_id": metadata["id"],
        "all": public_api(variant),
        "dtypes": supported_dtypes(variant),
        "rungs": ladder_rungs(variant),
        "backend": metadata["backend"],
        "digest_fingerprint": digest_fingerprint(metadata["digest"]),
        "digest": metadata["digest"],
    }


def load_manifests(releases: Path = RELEASES) -> dict:
    found = {}
    for path in releases.glob("v*.json"):
        m = re.fullmatch(r"v(\d+)\.json", path.name)
        if m:
            found[int(m.group(1))] = json.loads(path.read_text())
    return found


# ---- the versioning rules -------------------------------------------------
@dataclass
class Check:
    ok: bool
    messages: list = field(default_factory=list)


def surface_changes(new: dict, previous: dict) -> list:
    """(kind, added, removed) per compared surface: public symbols, dtypes, rungs.
    A release record without one of them cannot be compared: that is an error,
    not "no change"."""
    changes = []
    for key, what in SURFACES:
        for side, m in (("new", new), ("previous", previous)):
            if key not in m:
                raise ReleaseError(f"the {side} release record (v{m.get('version')}) has no {key!r}: re-record it")
        changes.append((what, sorted(set(new[key]) - set(previous[key])), sorted(set(previous[key]) - set(new[key]))))
    return changes


def check_versioning(new: dict, previous: dict | None) -> Check:
    """kernels' rules: a new or removed public symbol, dtype or rung needs a new
    version; version 0 is alpha and exempt. `previous` is the last recorded
    release (highest version), or None for the first release."""
    v = new["version"]
    msgs = []
    if v == 0:
        return Check(True, ["version 0 is alpha: API and dtype changes are allowed, not for production"])
    missing = sorted(set(PROMISED_ADDITIONS.get(v, ())) - set(new["all"]))
    if missing:
        return Check(False, [f"v{v} must export {missing} (promised for v{v}): add them to __all__ in __init__.py"])
    if previous is None:
        return Check(True, [f"first recorded release: v{v}"])
    pv = previous["version"]
    changes = []
    for what, added, removed in surface_changes(new, previous):
        if added:
            changes.append(f"new {what} {added}")
        if removed:
            changes.append(f"removed {what} {removed}")
    if v < pv:
        return Check(False, [f"version {v} is older than the last release v{pv}: set build.toml version to {pv} or {pv + 1}"])
    if v > pv + 1 and pv != 0:
        return Check(False, [f"version {v} skips versions after the last release v{pv}: use {pv + 1}"])
    if v == pv:
        if changes:
            return Check(False, [f"v{v} is already released and this build has {'; '.join(changes)}: "
                                 f"that needs a new version (set build.toml version = {pv + 1})"])
        same = new["digest_fingerprint"] == previous["digest_fingerprint"]
        msgs.append(f"same version v{v}, same public API, dtypes and rungs"
                    + ("; files identical to the recorded release" if same else "; files changed (a compatible fix on branch v%d)" % v))
        return Check(True, msgs)
    msgs.append(f"new version v{v} after v{pv}" + (f": {'; '.join(changes)}" if changes else ": API, dtypes and rungs unchanged"))
    return Check(True, msgs)


# ---- CHANGELOG and manifest ------------------------------------------------
def changelog_has(text: str, version: int) -> bool:
    return re.search(rf"^## v{version}\b", text, flags=re.M) is not None


def changelog_entry(new: dict, previous: dict | None, notes: str | None, date: str) -> str:
    lines = [f"## v{new['version']} ({date})", ""]
    if notes:
        lines += [f"- {line.strip()}" for line in notes.strip().splitlines() if line.strip()]
    if previous is None or previous["version"] == new["version"]:
        lines.append(f"- Public API: {', '.join(f'`{s}`' for s in new['all'])}")
        lines.append(f"- Dtypes: {', '.join(new['dtypes'])}; rungs: {', '.join(new['rungs'])}; devices: {', '.join(new['backend']['archs'])}")
    else:
        for what, added, removed in surface_changes(new, previous):
            for name in added:
                lines.append(f"- Added {what[:-1]} `{name}`")
            for name in removed:
                lines.append(f"- Removed {what[:-1]} `{name}` (breaking)")
    lines.append(f"- Hub branch `{new['branch']}`; variant `{new['variant']}` digest {new['digest_fingerprint']}")
    return "\n".join(lines) + "\n"


def write_changelog(entry: str, version: int, path: Path = CHANGELOG) -> bool:
    """Insert the entry for `version` above older entries; keep an existing one. Returns True if written."""
    text = path.read_text() if path.exists() else "# Changelog\n\nOne entry per Hub version branch `vN` (build.toml `version`).\n"
    if changelog_has(text, version):
        # Keep the entry, but its digest line follows the build (a re-recorded release).
        digest_line = next((l for l in entry.splitlines() if l.startswith("- Hub branch ")), None)
        if digest_line:
            updated = re.sub(rf"^- Hub branch `v{version}`;.*$", digest_line.replace("\\", "\\\\"), text, count=1, flags=re.M)
            if updated != text:
                path.write_text(updated)
        return False
    m = re.search(r"^## v\d+", text, flags=re.M)
    text = (text[: m.start()] + entry + "\n" + text[m.start():]) if m else text.rstrip("\n") + "\n\n" + entry
    path.write_text(text)
    return True


def write_manifest(manifest: dict, releases: Path = RELEASES) -> Path:
    releases.mkdir(exist_ok=True)
    path = releases / f"v{manifest['version']}.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def version_problems(out: Path, root: Path = ROOT) -> list:
    """Every place that states the release number, checked against build.toml:
    the variant's metadata.json, its _version.py reading (= __version__), the
    card (README.md), the CHANGELOG's newest entry, the newest releases/vN.json.
    Returns human-readable disagreements (empty when all follow build.toml)."""
    version = int(tomllib.loads((root / "build.toml").read_text())["general"]["version"])
    problems = []
    variant = out / "build" / build_variant.VARIANT
    meta = json.loads((variant / "metadata.json").read_text())["version"]
    if meta != version:
        problems.append(f"metadata.json says {meta}")
    spec = importlib.util.spec_from_file_location("_relu_release_version", variant / "_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.__version__ != str(version):
        problems.append(f"the variant's __version__ is {module.__version__!r}")
    card = (out / "README.md").read_text()
    if f"(version {version})" not in card:
        problems.append("the card's title does not say (version %d)" % version)
    pins = {int(v) for v in re.findall(r"\bversion\s*=\s*(\d+)", card)}
    if pins - {version}:
        problems.append(f"the card pins version(s) {sorted(pins - {version})}")
    changelog = root / "CHANGELOG.md"
    heads = [int(v) for v in re.findall(r"^## v(\d+)\b", changelog.read_text(), flags=re.M)] if changelog.exists() else []
    if not heads or heads[0] != version:
        problems.append(f"CHANGELOG.md's newest entry is {('v%d' % heads[0]) if heads else 'missing'}")
    manifests = load_manifests(root / "releases")
    if not manifests or max(manifests) != version or manifests[max(manifests)]["version"] != version:
        problems.append(f"the newest releases/vN.json is {('v%d' % max(manifests)) if manifests else 'missing'}")
    return [f"build.toml version is {version}, but {p}" for p in problems]


# ---- the source tree and the card's links ----------------------------------------
class SourceError(ReleaseError):
    pass


def source_files(root: Path = ROOT) -> list:
    """The files git carries in `root`: tracked and untracked-but-not-ignored, as on disk
    (a tracked file deleted on disk is left out). Symbolic links are left out: the Hub
    stores none (torch-ext/relu_flydsl/flash_relu_rocm is one; docs/development.md says so)."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise SourceError(f"{root} is not a git checkout: the source tree is what git carries there "
                          f"({detail.decode(errors='replace').strip() or e})") from e
    names = sorted({n for n in listing.decode().split("\0") if n})
    return [n for n in names if (root / n).is_file() and not (root / n).is_symlink()]


def export_source(out: Path, root: Path = ROOT) -> int:
    """Replace out/source/ by the source tree of `root` (source_files); returns the file count."""
    dest = out / SOURCE
    shutil.rmtree(dest, ignore_errors=True)
    files = source_files(root)
    for name in files:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, dest / name)
    return len(files)


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def card_link_problems(card: str, plan: "UploadPlan", config: dict) -> list:
    """Every link of the card must lead to what this release uploads to its version branch:
    `<repository>/tree/vN/<folder>` a folder holding uploaded files, `<repository>/blob/vN/<file>`
    an uploaded file. Any other address (another owner, branch or site) is a problem: the card
    is read where nothing else can be checked."""
    base = release_identity.repo_url(config)
    branch = release_identity.branch(config)
    sent = {op.path_in_repo for c in plan.commits if c.branch == branch for op in c.operations
            if type(op).__name__ == "CommitOperationAdd"}
    problems = []
    for target in LINK.findall(card):
        m = re.fullmatch(rf"{re.escape(base)}/(tree|blob)/{re.escape(branch)}/(.+?)/?", target.split("#")[0])
        if not m:
            problems.append(f"{target}: not a file or folder of {base} branch {branch}")
        elif m[1] == "blob" and m[2] not in sent:
            problems.append(f"{target}: the release uploads no file {m[2]}")
        elif m[1] == "tree" and not any(p.startswith(m[2] + "/") for p in sent):
            problems.append(f"{target}: the release uploads nothing under {m[2]}/")
    return problems


# ---- the upload plan --------------------------------------------------------
@dataclass
class Commit:
    branch: str
    operations: list  # huggingface_hub CommitOperationAdd / CommitOperationDelete
    message: str


@dataclass
class UploadPlan:
    repo_id: str
    version: int
    commits: list  # [Commit]: the version branch first, then the card on main

    @property
    def branch(self) -> str:
        return self.commits[0].branch


def _commit_message(manifest: dict) -> str:
    return f"relu-flydsl v{manifest['version']} ({manifest['variant']} {manifest['digest_fingerprint']})"


def plan_release(out: Path, manifest: dict, existing_files=()) -> UploadPlan:
    """The operations upload() makes, computed as upload_folder computes them:
    huggingface_hub's filter_repo_objects over the files of `out` with
    ALLOW_PATTERNS / IGNORE_PATTERNS (+ its default ignores), and over
    `existing_files` (the branch's files, known only at upload time; the dry
    run passes none) with DELETE_PATTERNS, minus re-added paths and .gitattributes."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    local = {p.relative_to(out).as_posix(): p for p in sorted(out.glob("**/*")) if p.is_file()}
    chosen = filter_repo_objects(local, allow_patterns=list(ALLOW_PATTERNS),
                                 ignore_patterns=list(IGNORE_PATTERNS) + list(DEFAULT_IGNORE_PATTERNS))
    adds = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=local[rel]) for rel in chosen]
    added = {op.path_in_repo for op in adds}
    deletes = [CommitOperationDelete(path_in_repo=p, is_folder=False)
               for p in filter_repo_objects(list(existing_files), allow_patterns=list(DELETE_PATTERNS))
               if p != ".gitattributes" and p not in added]
    version, branch = manifest["version"], manifest["branch"]
    card = [CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=out / "README.md")]
    return UploadPlan(
        repo_id=manifest["repo_id"],
        version=version,
        commits=[Commit(branch, deletes + adds, _commit_message(manifest)),
                 Commit(MAIN_BRANCH, card, f"relu-flydsl card for v{version}")],
    )


def describe_operation(op) -> str:
    from huggingface_hub import CommitOperationAdd

    if isinstance(op, CommitOperationAdd):
        sha = hashlib.sha256(Path(op.path_or_fileobj).read_bytes()).hexdigest()[:12]
        return f"add    {op.path_in_repo}  ({Path(op.path_or_fileobj).stat().st_size} bytes, sha256 {sha})"
    return f"delete {op.path_in_repo}"


def describe_plan(plan: UploadPlan) -> str:
    lines = [f"repo {plan.repo_id} (repo_type={REPO_TYPE})"]
    for commit in plan.commits:
        lines.append(f"branch {commit.branch}: {len(commit.operations)} operations, message {commit.message!r}")
        lines += [f"  {describe_operation(op)}" for op in commit.operations]
    lines.append("(at upload time, upload_folder's delete_patterns " + ", ".join(DELETE_PATTERNS)
                 + " also delete what a previous upload left there and this build lacks)")
    return "\n".join(lines)


def check_hub_client():
    """huggingface_hub must know repo_type="kernel" (added in 1.x; 2.4.0 has it)."""
    import huggingface_hub
    from huggingface_hub import constants

    kinds = getattr(constants, "REPO_TYPES_WITH_KERNEL", constants.REPO_TYPES)
    if REPO_TYPE not in kinds:
        raise ReleaseError(
            f"huggingface_hub {huggingface_hub.__version__} does not support repo_type='kernel': "
            "pip install -U huggingface_hub (kernels>=0.17 pulls a version that does)"
        )


def upload(api, out: Path, manifest: dict) -> list:
    """huggingface_hub's own steps: create the repo and the version branch if
    needed, upload_folder to the branch, upload_file the card to main.
    Returns the commit infos."""
    check_hub_client()
    repo_id, branch = manifest["repo_id"], manifest["branch"]
    api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
    api.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
    infos = [api.upload_folder(
        repo_id=repo_id, folder_path=out, repo_type=REPO_TYPE, revision=branch,
        commit_message=_commit_message(manifest),
        allow_patterns=list(ALLOW_PATTERNS), ignore_patterns=list(IGNORE_PATTERNS),
        delete_patterns=list(DELETE_PATTERNS),
    )]
    infos.append(api.upload_file(
        path_or_fileobj=out / "README.md", path_in_repo="README.md", repo_id=repo_id,
        repo_type=REPO_TYPE, revision=MAIN_BRANCH, commit_message=f"relu-flydsl card for v{manifest['version']}",
    ))
    return infos


# ---- the command -------------------------------------------------------------
def prepare(out: Path):
    """Build and check. Returns (manifest, previous manifest or None, Check)."""
    build_variant.build(out)
    manifest = manifest_for(out)
    manifests = load_manifests()
    previous = manifests[max(manifests)] if manifests else None
    return manifest, previous, check_versioning(manifest, previous)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "relu-build")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the branch and file list; no network, no writes")
    mode.add_argument("--record-only", action="store_true", help="write CHANGELOG + releases/vN.json, do not upload")
    parser.add_argument("--notes", help="lines for the CHANGELOG entry (only when the entry is new)")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args(argv)

    if not (args.dry_run or args.record_only) and not os.environ.get("HF_TOKEN"):
        print("HF_TOKEN is not set: use --dry-run or --record-only, or export a token with write access", file=sys.stderr)
        return 1
    out = args.out.resolve()
    manifest, previous, check = prepare(out)
    for message in check.messages:
        print(("ok: " if check.ok else "REFUSED: ") + message)
    if not check.ok:
        return 2

    config = build_variant.read_build_toml()
    if args.dry_run:
        try:
            print(f"source tree: {export_source(out)} files into {out.name}/{SOURCE}/")
        except SourceError as e:
            print(f"REFUSED: {e}", file=sys.stderr)
            return 2
        plan = plan_release(out, manifest)
        print(describe_plan(plan))
        # The upload re-checks every place that states the version after recording the
        # CHANGELOG entry and manifest; say now what it would find unless they are recorded.
        pending = [p for p in version_problems(out) if "CHANGELOG" not in p and "releases/" not in p]
        pending += [f"the card links {p}" for p in card_link_problems((out / "README.md").read_text(), plan, config)]
        for p in pending:
            print(f"the upload would REFUSE: {p}")
        print(f"variant digest {manifest['digest_fingerprint']}; dry run: only {out.name}/ was (re)built; "
              "no CHANGELOG, manifest or Hub change")
        return 2 if pending else 0

    wrote = write_changelog(changelog_entry(manifest, previous, args.notes, args.date), manifest["version"])
    print(f"CHANGELOG.md: {'entry for v%d written' % manifest['version'] if wrote else 'entry for v%d kept' % manifest['version']}")
    print(f"recorded {write_manifest(manifest).relative_to(ROOT)} (digest {manifest['digest_fingerprint']})")
    if args.record_only:
        return 0

    problems = version_problems(out)
    if problems:
        print("REFUSED: the release number disagrees:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        print(f"source tree: {export_source(out)} files into {out.name}/{SOURCE}/ (with this release's record)")
    except SourceError as e:
        print(f"REFUSED: {e}", file=sys.stderr)
        return 2
    links = card_link_problems((out / "README.md").read_text(), plan_release(out, manifest), config)
    if links:
        print("REFUSED: the card links what this release does not upload:\n  " + "\n  ".join(links), file=sys.stderr)
        return 2
    from huggingface_hub import HfApi

    infos = upload(HfApi(token=os.environ["HF_TOKEN"]), out, manifest)
    for info in infos:
        print(f"committed {getattr(info, 'oid', info)}: {getattr(info, 'commit_url', '')}")
    print(f"released {manifest['repo_id']} {manifest['branch']}: get_kernel({manifest['repo_id']!r}, version={manifest['version']}); "
          f"source tree {release_identity.source_url(config)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
