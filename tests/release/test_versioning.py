"""build.toml's [general] version is the single source of the release number:
metadata.json, the package's __version__, the card, CHANGELOG.md and the
newest releases/vN.json must all agree with it."""

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

import release
from flash_relu_rocm.dtypes import DTYPES

VERSION = int(tomllib.loads((ROOT / "build.toml").read_text())["general"]["version"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ver") / "relu-build"
    release.build_variant.build(out)
    return out


def test_every_place_follows_build_toml(built):
    assert release.version_problems(built) == []


def test_source_package_version_follows_build_toml():
    import relu_flydsl
    assert relu_flydsl.__version__ == str(VERSION)


def test_recorded_manifest_is_consistent():
    manifest = json.loads((ROOT / "releases" / f"v{VERSION}.json").read_text())
    assert manifest["version"] == VERSION and manifest["branch"] == f"v{VERSION}"
    assert manifest["repo_id"] == "org/relu-flydsl"
    assert manifest["digest_fingerprint"] == release.digest_fingerprint(manifest["digest"])
    assert manifest["digest_fingerprint"] in (ROOT / "CHANGELOG.md").read_text()


def test_card_front_matter_and_api(built):
    card = (built / "README.md").read_text()
    front = card.split("---")[1]
    assert "library_name: kernels" in front and "license: apache-2.0" in front and "tags:" in front
    for symbol in release.public_api(built / "build" / "torch-rocm"):
        assert f"`{symbol}`" in card, f"the card does not mention public symbol {symbol}"
    for dtype in DTYPES:
        assert dtype in card
    assert "RELU_FLYDSL_DISABLE" in card and "RELU_FLYDSL_RUNG" in card
    assert "`verify_digest`" in card and "`verify_variant`" in card
    # Version 2's runtime: prebuilt code objects, nothing compiled, no FlyDSL to install.
    assert "pip install flydsl" not in card and "flydsl==" not in card
    assert "code_objects/manifest.json" in card and "Nothing compiles or links" in card


def _render(template_text, variant, **drop):
    import jinja2

    config = release.build_variant.read_build_toml()
    variables = release.build_variant.card_variables(config, variant)
    for name in drop:
        del variables[name]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(template_text).render(**variables)


def test_card_is_a_jinja_template_rendered_by_the_build(built):
    """CARD.md.j2 renders with jinja2 (what minijinja-based card renderers understand):
    nothing left unrendered, the build's README.md is exactly that rendering, and a
    missing variable is an error rather than a silently empty field."""
    import jinja2

    template = (ROOT / "CARD.md.j2").read_text()
    variant = built / "build" / "torch-rocm"
    card = _render(template, variant)
    assert (built / "README.md").read_text() == card
    for leftover in ("{{", "}}", "{%", "%}", "{#", "#}", "{version}", "{card_body}"):
        assert leftover not in card, f"unrendered {leftover!r} in the card"
    with pytest.raises(jinja2.UndefinedError, match="source_url"):
        _render(template, variant, source_url=None)


def test_card_content(built):
    card = (built / "README.md").read_text()
    # The source repository, from the one constant that holds it.
    assert f"({release.build_variant.SOURCE_URL})" in card
    # Support table: gfx950 runs the kernels, another ROCm GPU needs check_arch=False and falls
    # back, CPU/CUDA cannot load the torch-rocm build through get_kernel.
    rows = {line.split("|")[1].strip(): line for line in card.splitlines() if line.startswith("| ")}
    gfx950 = next(v for k, v in rows.items() if "`gfx950`" in k)
    other = next(v for k, v in rows.items() if "another GPU" in k)
    cpu = next(v for k, v in rows.items() if "CPU" in k)
    assert "loads" in gfx950 and "FlyDSL" in gfx950
    assert "check_arch=False" in other and "torch's kernel" in other
    assert "cannot load" in cpu and "CUDA" in cpu
    assert "no hardware numbers yet; run `bash main.sh` on an mi350x" in card.lower()
    # The benchmark form that works with kernels 0.17.2: download the branch, benchmark the folder.
    assert f"hf download org/relu-flydsl --repo-type kernel --revision v{VERSION} --local-dir relu-flydsl-v{VERSION}" in card
    assert f"kernels benchmark ./relu-flydsl-v{VERSION}" in card
    assert "Rebuild the code objects" in card and "`cmp`" in card
    # The kernel's rule, not a claim to be torch.relu bit for bit.
    assert "y = +0.0 if x < 0 else x" in card
    assert "exact semantics" not in card and "identical" not in card
    assert "LICENSE" in card


@pytest.mark.parametrize("where", ["metadata", "changelog", "card", "manifest"])
def test_a_disagreement_is_reported(built, tmp_path, where):
    """The check is not vacuous: doctor one place and it names it."""
    out = tmp_path / "relu-build"
    shutil.copytree(built, out)
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(ROOT / "build.toml", root / "build.toml")
    shutil.copy(ROOT / "CHANGELOG.md", root / "CHANGELOG.md")
    shutil.copytree(ROOT / "releases", root / "releases")
    other = VERSION + 1
    if where == "metadata":
        meta = out / "build" / "torch-rocm" / "metadata.json"
        data = json.loads(meta.read_text())
        data["version"] = other
        meta.write_text(json.dumps(data))
    elif where == "changelog":
        (root / "CHANGELOG.md").write_text(f"# Changelog\n\n## v{other}\n\n" + (ROOT / "CHANGELOG.md").read_text())
    elif where == "card":
        readme = out / "README.md"
        readme.write_text(readme.read_text() + f'\nget_kernel("org/relu-flydsl", version={other})\n')
    else:
        data = json.loads((root / "releases" / f"v{VERSION}.json").read_text())
        (root / "releases" / f"v{other}.json").write_text(json.dumps(dict(data, version=other)))
    problems = release.version_problems(out, root)
    assert len(problems) >= 1, problems
    expected = {"metadata": "metadata.json", "changelog": "CHANGELOG", "card": "card", "manifest": "releases/"}[where]
    assert any(expected in p for p in problems), problems


V1_FINGERPRINT = "sha256:e0531f580f843ec21c0ea1aa21a45f3687beb18418232a4dd106a1bbbf5ce5ef"  # branch v1, as released


def test_every_recorded_release_is_consistent_with_its_changelog_entry():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for version, manifest in release.load_manifests(ROOT / "releases").items():
        assert manifest["version"] == version and manifest["branch"] == f"v{version}"
        assert manifest["digest_fingerprint"] == release.digest_fingerprint(manifest["digest"])
        entry = re.search(rf"^## v{version}\b.*?(?=^## v|\Z)", changelog, flags=re.M | re.S).group(0)
        assert f"Hub branch `v{version}`; variant `torch-rocm` digest {manifest['digest_fingerprint']}" in entry


def test_version_1_stays_as_released():
    """A new version never rewrites an earlier one: branch v1 keeps its files and API."""
    v1 = json.loads((ROOT / "releases" / "v1.json").read_text())
    assert v1["digest_fingerprint"] == V1_FINGERPRINT
    assert "verify_digest" not in v1["all"] and "verify_variant" in v1["all"]
    assert not any(path.startswith("code_objects/") for path in v1["digest"]["files"])
