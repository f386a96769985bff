"""tools/torch_releases.py, the maintainer command that checks the built variant on each torch
release from the package index: which releases it picks, the record it keeps, and the record
committed for this version (releases/torch/v<N>.json). Nothing is downloaded here; one test
runs the tool's probe and host time on this process's own torch."""

import json
import math
import sys

import pytest

import torch_releases as tr

PIP_ANSWER = """WARNING: pip index is currently an experimental command.
torch (2.15.0)
Available versions: 2.15.0, 2.14.1, 2.14.0, 2.13.0+cpu, 2.13.0, 2.12.1, 2.12.0, 2.11.0, 2.10.0, 2.9.1, 2.9.0, 2.8.0
  INSTALLED: 2.13.0+cpu
  LATEST:    2.15.0
"""


def test_pip_answer_is_read():
    assert tr.index_versions(PIP_ANSWER)[:4] == ["2.15.0", "2.14.1", "2.14.0", "2.13.0+cpu"]
    assert len(tr.index_versions(PIP_ANSWER)) == 12
    with pytest.raises(ValueError, match="Available versions"):
        tr.index_versions("ERROR: No matching distribution found for torch\n")


def test_only_final_public_releases_count():
    assert tr.parse_version("2.12.1") == (2, 12, 1)
    assert tr.parse_version("2.10.10") == (2, 10, 10)
    for v in ("2.13.0+cpu", "2.14.0rc1", "2.15.0.dev20260101", "2.13", "v2.13.0"):
        assert tr.parse_version(v) is None, v


def test_the_newest_patch_of_each_minor_from_2_10_and_of_2_9():
    assert tr.select(tr.index_versions(PIP_ANSWER)) == ["2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1",
                                                        "2.15.0"]
    # numbers, not strings: 2.10 is newer than 2.9, patch 10 newer than patch 9; order of the input does not matter
    assert tr.select(["2.10.9", "2.9.0", "2.10.10", "2.16.0rc2", "2.16.0+cpu", "1.13.1"]) == ["2.9.0", "2.10.10"]
    assert tr.select(["2.8.0", "2.9.1"], also=()) == []


def result(release, loaded=True, **more):
    return {"release": release, "torch": release, "loaded": loaded, "bit_exact": True, "entry_served": loaded,
            "reason": None if loaded else "why", "allocation": "torch's C shim" if loaded else None,
            "host": {tr.PAIRS[0]: 0.3, tr.PAIRS[1]: 0.7}, **more}


def test_a_new_run_replaces_its_releases_and_keeps_the_others_in_version_order():
    old = {"releases": [result("2.10.0"), result("2.9.1", loaded=False), result("2.15.0")]}
    new = [result("2.10.0", bit_exact=False), {"release": "2.11.0", "error": "pip install torch==2.11.0 failed"}]
    merged = tr.merge(old, new)
    assert [r["release"] for r in merged] == ["2.9.1", "2.10.0", "2.11.0", "2.15.0"]
    assert merged[1]["bit_exact"] is False  # the new result, not the old one
    assert tr.merge(None, new) == [new[0], new[1]]


def test_the_table_has_a_row_per_release_and_says_what_failed():
    record = {"releases": [result("2.9.1", loaded=False), {"release": "2.11.0", "error": "pip failed\nmore"},
                           result("2.12.1", bit_exact=False, host={tr.PAIRS[0]: 0.31, tr.PAIRS[1]: 1.06,
                                                                    tr.SHIM_PAIR: 0.68})]}
    lines = tr.table(record).splitlines()
    assert len(lines) == 4
    assert lines[1].split()[:3] == ["2.9.1", "no", "yes"] and lines[1].endswith("why")
    assert lines[2].split()[:3] == ["2.11.0", "?", "?"] and lines[2].endswith("pip failed")
    assert lines[3].split()[:6] == ["2.12.1", "loads", "NO", "0.31", "1.06", "0.68"]


def test_the_record_names_its_package_version_and_binary(variant_build):
    variant = variant_build / "build" / "torch-rocm"
    record = tr.make_record(None, [result("2.13.0")], ["2.13.0"], "cmd", variant=variant)
    assert record["version"] == tr.package_version()
    manifest = json.loads((variant / "code_objects" / "manifest.json").read_text())
    assert record["entry_sha256"] == manifest["entry"]["sha256"]
    assert record["variant"] == json.loads((variant / "metadata.json").read_text())["id"]
    assert record["releases"][0]["release"] == "2.13.0" and record["index_versions"] == ["2.13.0"]


# ---------------------------------------------------------------- the committed record
@pytest.fixture(scope="module")
def committed():
    path = tr.record_path()
    if not path.exists():
        pytest.fail(f"no {path.relative_to(tr.ROOT)} for version {tr.package_version()}: run "
                    "`.venv/bin/python tools/torch_releases.py` (downloads each torch release)", pytrace=False)
    return json.loads(path.read_text())


def test_the_committed_record_names_every_release_it_found(committed):
    assert committed["version"] == tr.package_version()
    manifest = json.loads((tr.ROOT / "torch-ext" / "relu_flydsl" / "code_objects" / "manifest.json").read_text())
    assert committed["entry_sha256"] == manifest["entry"]["sha256"], "the record is of another compiled entry: run it again"
    found = committed["index_versions"]
    assert found, "the record does not say which releases the index listed"
    wanted = tr.select(found)
    assert tr.parse_version(wanted[0])[:2] == tr.NOT_LOADING and len(wanted) >= 2, wanted
    assert [r["release"] for r in committed["releases"]] == wanted, "releases checked are not the index's releases"
    newest = max(tr.parse_version(v) for v in found if tr.parse_version(v))
    assert tr.parse_version(wanted[-1]) == newest


def test_each_release_loads_or_says_why_is_bit_exact_and_has_its_ratios(committed):
    for r in committed["releases"]:
        where = f"torch {r['release']}"
        assert "error" not in r, f"{where}: {r.get('error')}"
        assert r["torch"].split("+")[0] == r["release"], where  # the environment held the release asked for
        assert r["bit_exact"] is True and r["cases"] > 0 and r["failures"] == [], where
        host = r["host"]
        for pair in tr.PAIRS:
            assert isinstance(host[pair], float) and math.isfinite(host[pair]) and host[pair] > 0, (where, pair)
        if tr.parse_version(r["release"])[:2] >= tr.LOWEST:
            assert r["loaded"] is True and r["loaded_after"] is True, f"{where}: {r['reason']}"
            assert r["entry_served"] is True, where
            assert r["allocation"], where
            # relu(x) through torch's C shim; where torch has named tensors, a named x kept its names
            assert r["allocation"].startswith("torch's C shim"), (where, r["allocation"])
            assert r["named_tensors"] == ("named_probe" in r), where
            if r["named_tensors"]:
                named = r["named_probe"]
                assert named["bit_exact"] and named["entry_served"] and not named["failures"], (where, named)
            assert host[tr.PAIRS[1]] <= 1.0, f"{where}: relu(x) costs {host[tr.PAIRS[1]]}x torch.relu"
        else:
            assert r["loaded"] is False and r["reason"], where
            assert host["path"].startswith("Python path"), where


# ---------------------------------------------------------------- the tool on this torch
def test_the_tool_checks_this_interpreter(variant_build, capsys):
    """The probe (virtual gfx950) and host time (no-op HIP) end to end on the installed torch,
    nothing downloaded and nothing recorded."""
    from conftest import _vgpu_unavailable

    why = _vgpu_unavailable()
    if why:
        pytest.skip(f"the probe runs on the virtual gfx950: {why}")
    variant = variant_build / "build" / "torch-rocm"
    r = tr.check_release(sys.executable, variant, rounds=3, calls=200)
    assert r["torch"] == __import__("torch").__version__
    assert r["bit_exact"] is True and r["failures"] == [] and r["cases"] == 12, r["failures"]
    assert r["loaded"] is True and r["entry_served"] is True, r["reason"]
    assert set(tr.PAIRS) <= set(r["host"]), r["host"]
    # every served dtype took the kernels: 3 sizes x 4 calls each
    assert all(n == 12 for n in r["stats"].values()) and len(r["stats"]) == 4, r["stats"]
    # the libtorch symbols the entry binds are exported where it loaded
    assert all(lib for s, lib in r["exports"].items() if s not in tr.CANDIDATES), r["exports"]
    out = capsys.readouterr().out
    assert "probe: loaded True" in out and "host time:" in out
