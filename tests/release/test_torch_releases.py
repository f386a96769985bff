"""tools/torch_releases.py, the maintainer command that checks the built variant on each torch
release from the package index: which releases it picks, the record it keeps, and the record
committed for this version (releases/torch/v<N>.json). Nothing is downloaded here; one test
runs the tool's probe and host time on this process's own torch."""

import json
import shutil
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


def runs(out_ratio, new_ratio, n=3):
    """n runs' medians whose ratios are out_ratio and new_ratio (spread a little)."""
    return [{"median_us": {"relu(x, out=y)": round(out_ratio * (1 + i / 50), 3), "torch.clamp_min(x, 0, out=y)": 1.0,
                           "relu(x)": round(new_ratio * 0.9 * (1 - i / 50), 3), "torch.relu(x)": 0.9}} for i in range(n)]


def result(release, loaded=True, **more):
    host = {"host": tr.summarise("compiled entry" if loaded else "Python path (no compiled entry)",
                                 runs(0.3, 0.7) if loaded else runs(7.0, 6.0))}
    if loaded:
        host["host_entry_off"] = tr.summarise("Python path (RELU_FLYDSL_ENTRY=0)", runs(6.5, 5.9))
    return {"release": release, "torch": release, "loaded": loaded, "bit_exact": True, "entry_served": loaded,
            "reason": None if loaded else "why", "allocation": "torch's C shim" if loaded else None,
            "loaded_after": loaded, "failures": [], **host, **more}


def assert_consistent(host, runs_required=1):
    """Each run's ratios are its medians' ratios (within the rounding to 3 decimals) and each
    ratio's range is the smallest one holding every run's."""
    assert len(host["runs"]) >= runs_required, f"{len(host['runs'])} runs"
    for pair in tr.PAIRS:
        a, b = pair.split(" / ")
        for run in host["runs"]:
            m = run["median_us"]
            assert m[a] > 0 and m[b] > 0, (pair, m)
            assert abs(run["ratios"][pair] - m[a] / m[b]) <= 0.0005 + 1e-9, (pair, run)
        lo, hi = host["ratios"][pair]
        every = [run["ratios"][pair] for run in host["runs"]]
        assert lo == min(every) and hi == max(every), (pair, host["ratios"][pair], every)


def test_a_run_ratio_is_its_medians_ratio_and_the_range_spans_the_runs():
    host = tr.summarise("p", [{"median_us": {"relu(x, out=y)": 8.5, "torch.clamp_min(x, 0, out=y)": 1.25,
                                              "relu(x)": 7.0, "torch.relu(x)": 1.0, "extra": 3.0}},
                              {"median_us": {"relu(x, out=y)": 9.0, "torch.clamp_min(x, 0, out=y)": 1.2,
                                             "relu(x)": 7.7, "torch.relu(x)": 1.1}},
                              {"median_us": {"relu(x, out=y)": 8.0, "torch.clamp_min(x, 0, out=y)": 1.0,
                                             "relu(x)": 6.3, "torch.relu(x)": 0.9}}])
    assert [r["ratios"][tr.PAIRS[0]] for r in host["runs"]] == [6.8, 7.5, 8.0]
    assert [r["ratios"][tr.PAIRS[1]] for r in host["runs"]] == [7.0, 7.0, 7.0]
    assert host["ratios"] == {tr.PAIRS[0]: [6.8, 8.0], tr.PAIRS[1]: [7.0, 7.0]}
    assert set(host["runs"][0]["median_us"]) == set(tr.ROWS)  # the rows the ratios come from, no others
    assert_consistent(host, 3)
    bad = json.loads(json.dumps(host))
    bad["runs"][1]["ratios"][tr.PAIRS[0]] = 5.17  # not what its medians give
    with pytest.raises(AssertionError):
        assert_consistent(bad)
    bad = json.loads(json.dumps(host))
    bad["ratios"][tr.PAIRS[0]] = [6.8, 7.5]  # a run outside the range
    with pytest.raises(AssertionError):
        assert_consistent(bad)


def test_the_no_entry_cost_is_every_no_entry_range_widened_to_one_decimal():
    record = {"releases": [result("2.9.1", loaded=False), result("2.13.0"), {"release": "2.14.1", "error": "x"}]}
    assert [name for name, _ in tr.no_entry_runs(record)] == ["2.9.1", "2.13.0, RELU_FLYDSL_ENTRY=0"]
    # 2.9.1: out= 7.0-7.28, new 5.76-6.0; 2.13.0 switched off: out= 6.5-6.76, new 5.664-5.9
    assert tr.no_entry_cost(record) == {"out": (6.5, 7.3), "new": (5.6, 6.0)}
    with pytest.raises(ValueError, match="no host time"):
        tr.no_entry_cost({"releases": [{k: v for k, v in result("2.13.0").items() if k != "host_entry_off"}]})


def test_a_supported_torch_where_the_entry_does_not_load_is_named_with_its_reason():
    assert tr.problems([result("2.9.1", loaded=False), result("2.10.0"), result("2.15.0")]) == []
    found = tr.problems([result("2.9.1", loaded=False),
                         result("2.12.1", loaded=False, reason="TypeError: the shim answered 3")])
    assert found == ["torch 2.12.1: the compiled entry did not load: TypeError: the shim answered 3"]
    # an interpreter checked with --env: its torch names the release (a local build counts by its version)
    assert tr.problems([result(None, loaded=False, torch="2.13.0+cpu")]) == \
        ["torch 2.13.0+cpu: the compiled entry did not load: why"]
    assert tr.supported("2.10.0") and tr.supported("2.13.0+cpu") and not tr.supported("2.9.1")


def test_every_other_unexpected_result_is_named_too():
    cases = {
        "torch 2.11.0: failed: pip install torch===2.11.0 failed": {"release": "2.11.0", "error": "pip install torch===2.11.0 failed\nmore"},
        "torch 2.10.0: not bit-exact (int8 x 777: boom)": result("2.10.0", bit_exact=False,
                                                                 failures=[{"case": "int8 x 777", "error": "boom"}]),
        "torch 2.10.0: the compiled entry loaded but did not serve the repeated calls": result("2.10.0", entry_served=False),
        "torch 2.10.0: the compiled entry unloaded while probed: gone": result("2.10.0", loaded_after=False,
                                                                                reason_after="gone"),
        "torch 2.12.1: a named tensor: bit-exact True, entry served False": result(
            "2.12.1", named_probe={"bit_exact": True, "entry_served": False}),
        "torch 2.9.1: the compiled entry loaded on a torch without the DLPack C exchange API": result("2.9.1"),
    }
    for line, r in cases.items():
        assert tr.problems([r]) == [line], line
    slow = result("2.13.0")
    slow["host"]["path"] = "Python path (no compiled entry)"
    assert tr.problems([slow]) == ["torch 2.13.0: host time was not the compiled entry's (Python path (no compiled entry))"]


def test_the_tool_exits_non_zero_naming_the_release_and_reason(variant_build, monkeypatch, capsys):
    """main()'s exit status from what a release's check found (the check itself is the fake here)."""
    variant = str(variant_build / "build" / "torch-rocm")
    seen = []

    def fake(python, variant, runs, rounds, calls):
        seen.append((python, runs))
        return result(None, loaded=seen[-1][0] == "good", torch="2.14.1+cu130", reason="the shim answered 3")

    monkeypatch.setattr(tr, "check_release", fake)
    assert tr.main(["--env", "bad", "--variant", variant, "--no-record", "--runs", "1"]) == 1
    out = capsys.readouterr().out
    assert "not as expected: torch 2.14.1: the compiled entry did not load: the shim answered 3" in out, out
    assert tr.main(["--env", "good", "--variant", variant, "--no-record", "--runs", "1"]) == 0
    assert seen == [("bad", 1), ("good", 1)]


def test_a_new_run_replaces_its_releases_and_keeps_the_others_in_version_order():
    old = {"entry_sha256": "e", "releases": [result("2.10.0"), result("2.9.1", loaded=False), result("2.15.0")]}
    new = [result("2.10.0", bit_exact=False), {"release": "2.11.0", "error": "pip install torch==2.11.0 failed"}]
    merged = tr.merge(old, new, "e")
    assert [r["release"] for r in merged] == ["2.9.1", "2.10.0", "2.11.0", "2.15.0"]
    assert merged[1]["bit_exact"] is False  # the new result, not the old one
    assert tr.merge(None, new, "e") == [new[0], new[1]]
    # a record of another compiled entry keeps none of its releases
    assert [r["release"] for r in tr.merge(old, new, "f")] == ["2.10.0", "2.11.0"]
    # nor one of another variant (the same binary, other Python files)
    assert [r["release"] for r in tr.merge(dict(old, variant="_a"), new, "e", "_b")] == ["2.10.0", "2.11.0"]
    assert len(tr.merge(dict(old, variant="_a"), new, "e", "_a")) == 4
    # nor one measured the old way (one run, no ranges)
    old["releases"][0]["host"] = {"path": "compiled entry", tr.PAIRS[0]: 0.25, tr.PAIRS[1]: 0.7}
    assert [r["release"] for r in tr.merge(old, new, "e")] == ["2.10.0", "2.11.0"]


def test_a_build_this_tree_no_longer_makes_is_not_recorded(variant_build, tmp_path, monkeypatch):
    """A record names the variant it measured: a stale relu-build is refused before anything runs."""
    variant = tmp_path / "torch-rocm"
    shutil.copytree(variant_build / "build" / "torch-rocm", variant)
    meta = json.loads((variant / "metadata.json").read_text())
    (variant / "metadata.json").write_text(json.dumps(dict(meta, id="_relu_flydsl_rocm_0000000")))
    monkeypatch.setattr(tr, "check_release", lambda *a: pytest.fail("a stale build was measured"))
    with pytest.raises(SystemExit, match="_relu_flydsl_rocm_0000000, but this tree builds " + meta["id"]):
        tr.main(["--releases", "2.13.0", "--variant", str(variant), "--out", str(tmp_path / "v.json")])
    assert tr.stale_variant(variant_build / "build" / "torch-rocm") is None


def test_the_record_names_the_variant_that_ships_with_the_claim_it_gives(tmp_path):
    """_claims.NO_ENTRY_COST ships in the variant and comes from the record: the tool writes it,
    and the record names the rebuilt variant (the measured one as measured_variant)."""
    claims = tmp_path / "_claims.py"
    shutil.copy(tr.CLAIMS, claims)
    before = claims.read_text()
    releases = [result("2.9.1", loaded=False), result("2.13.0")]
    cost = tr.no_entry_cost({"releases": releases})
    assert tr.claimed_cost(claims) != cost, "the fake results give the real claim: pick others"
    named = tr.name_shipped_variant({"variant": "_measured", "releases": releases}, claims, rebuild=lambda: "_shipped")
    assert (named["variant"], named["measured_variant"]) == ("_shipped", "_measured")
    written = {}
    exec(compile(claims.read_text(), str(claims), "exec"), written)
    assert written["NO_ENTRY_COST"] == cost and tr.claimed_cost(claims) == cost
    assert [a for a, b in zip(before.splitlines(), claims.read_text().splitlines()) if a != b] == \
        [line for line in before.splitlines() if line.startswith("NO_ENTRY_COST = ")]  # that line only
    # the claim already the record's: nothing written or rebuilt, the measured variant is the one that ships
    again = tr.name_shipped_variant({"variant": "_shipped", "releases": releases}, claims,
                                    rebuild=lambda: pytest.fail("rebuilt for nothing"))
    assert again["variant"] == "_shipped" and "measured_variant" not in again


def test_a_released_versions_record_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "releases").mkdir()
    out = tmp_path / "releases" / "torch" / "v4.json"
    assert tr.refuse_overwrite(out, None, tmp_path) is None
    assert tr.refuse_overwrite(out, {"version": 4}, tmp_path) is None  # not released yet
    (tmp_path / "releases" / "v4.json").write_text("{}")
    assert "release v4" in tr.refuse_overwrite(out, {"version": 4}, tmp_path)
    # this tree: build.toml's version is released or not; where it is, the tool stops before anything runs
    if (tr.ROOT / "releases" / f"v{tr.package_version()}.json").exists() and tr.record_path().exists():
        with pytest.raises(SystemExit, match="kept as it is"):
            tr.main(["--releases", "2.13.0", "--variant", str(tr.ROOT)])


def test_a_kept_environment_is_reused_and_another_torch_is_not(tmp_path, monkeypatch, capsys):
    """The environments persist (--envs): one whose torch is the release is used as it is."""
    python = tr.env_dir(tmp_path, "2.12.1") / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho 2.12.1\n")  # what importlib.metadata says of its torch
    python.chmod(0o755)
    made = []
    monkeypatch.setattr(tr, "make_env", lambda base, where, version: made.append(version))
    monkeypatch.setattr(tr, "share_files", lambda envs: None)
    assert tr.ensure_env(sys.executable, tmp_path, "2.12.1") == str(python) and made == []
    assert "(kept)" in capsys.readouterr().out
    assert tr.ensure_env(sys.executable, tmp_path, "2.12.1", reinstall=True) == str(python) and made == ["2.12.1"]
    assert tr.ensure_env(sys.executable, tmp_path, "2.13.0") and made == ["2.12.1", "2.13.0"]
    assert tr.ENVS.parts[-2:] == ("relu-flydsl", "torch-envs") and not tr.ENVS.is_relative_to(tr.ROOT)


def test_the_table_has_a_row_per_release_and_says_what_failed():
    record = {"releases": [result("2.9.1", loaded=False), {"release": "2.11.0", "error": "pip failed\nmore"},
                           result("2.12.1", bit_exact=False)]}
    lines = tr.table(record).splitlines()
    assert len(lines) == 4
    assert lines[1].split()[:5] == ["2.9.1", "no", "yes", "7.00-7.28", "5.76-6.00"] and lines[1].endswith("why")
    assert lines[2].split()[:3] == ["2.11.0", "?", "?"] and lines[2].endswith("pip failed")
    assert lines[3].split()[:7] == ["2.12.1", "loads", "NO", "0.30-0.31", "0.67-0.70", "6.50-6.76", "5.66-5.90"]


def test_the_record_names_its_package_version_and_binary(variant_build):
    variant = variant_build / "build" / "torch-rocm"
    record = tr.make_record(None, [result("2.13.0")], ["2.13.0"], "cmd", variant=variant)
    assert record["version"] == tr.package_version()
    manifest = json.loads((variant / "code_objects" / "manifest.json").read_text())
    assert record["entry_sha256"] == manifest["entry"]["sha256"]
    assert record["variant"] == json.loads((variant / "metadata.json").read_text())["id"]
    assert record["releases"][0]["release"] == "2.13.0" and record["index_versions"] == ["2.13.0"]
    assert (record["runs"], record["rounds"], record["calls"]) == (tr.RUNS, tr.ROUNDS, tr.CALLS)


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


def test_the_committed_record_names_the_variant_built_here(committed, variant_build):
    """The record is of the variant that ships: the name the build gives this tree, not only its
    compiled entry's hash (a record of older Python files names another variant)."""
    built = json.loads((variant_build / "build" / "torch-rocm" / "metadata.json").read_text())["id"]
    assert committed["variant"] == built, (f"{tr.record_path().relative_to(tr.ROOT)} was measured on "
                                           f"{committed['variant']}; this tree builds {built}: record it again")


def test_each_release_loads_or_says_why_is_bit_exact_and_has_its_ratios(committed):
    assert committed.get("runs", 1) >= tr.RUNS, f"{committed.get('runs', 1)} runs per release: a range needs {tr.RUNS} at least"
    for r in committed["releases"]:
        where = f"torch {r['release']}"
        assert "error" not in r, f"{where}: {r.get('error')}"
        assert r["torch"].split("+")[0] == r["release"], where  # the environment held the release asked for
        assert r["bit_exact"] is True and r["cases"] > 0 and r["failures"] == [], where
        host = r["host"]
        assert len(host["runs"]) == committed["runs"], where
        assert_consistent(host, tr.RUNS)
        if tr.supported(r["release"]):
            assert r["loaded"] is True and r["loaded_after"] is True, f"{where}: {r['reason']}"
            assert r["entry_served"] is True and host["path"] == "compiled entry", where
            assert r["allocation"], where
            # relu(x) through torch's C shim; where torch has named tensors, a named x kept its names
            assert r["allocation"].startswith("torch's C shim"), (where, r["allocation"])
            assert r["named_tensors"] == ("named_probe" in r), where
            if r["named_tensors"]:
                named = r["named_probe"]
                assert named["bit_exact"] and named["entry_served"] and not named["failures"], (where, named)
            worst = host["ratios"][tr.PAIRS[1]][1]
            assert worst <= 1.0, f"{where}: relu(x) costs up to {worst}x torch.relu"
            # the general path a user gets with the entry switched off, measured beside it
            off = r["host_entry_off"]
            assert off["path"] == "Python path (RELU_FLYDSL_ENTRY=0)" and len(off["runs"]) == committed["runs"], where
            assert_consistent(off, tr.RUNS)
        else:
            assert r["loaded"] is False and r["reason"], where
            assert host["path"] == "Python path (no compiled entry)", where
        assert tr.problems([r]) == []


def test_the_no_entry_cost_everyone_quotes_is_the_newest_records():
    """_claims.NO_ENTRY_COST (the card and status() print it) is the newest record's measured
    cost of the general path without the compiled entry, widened to one decimal."""
    from relu_flydsl import _claims

    newest = tr.records()[-1]
    try:
        cost = tr.no_entry_cost(json.loads(newest.read_text()))
    except (KeyError, ValueError) as e:
        pytest.fail(f"{newest.relative_to(tr.ROOT)} gives no no-entry ranges ({type(e).__name__}: {e}): record it "
                    "with `.venv/bin/python tools/torch_releases.py`", pytrace=False)
    assert _claims.NO_ENTRY_COST == cost, f"{newest.relative_to(tr.ROOT)} measured {cost}"


# ---------------------------------------------------------------- the tool on this torch
def test_the_tool_checks_this_interpreter(variant_build, capsys):
    """The probe (virtual gfx950) and host time (no-op HIP) end to end on the installed torch,
    nothing downloaded and nothing recorded."""
    from conftest import _vgpu_unavailable

    why = _vgpu_unavailable()
    if why:
        pytest.skip(f"the probe runs on the virtual gfx950: {why}")
    variant = variant_build / "build" / "torch-rocm"
    r = tr.check_release(sys.executable, variant, runs=1, rounds=3, calls=200)
    assert r["torch"] == __import__("torch").__version__
    assert r["bit_exact"] is True and r["failures"] == [] and r["cases"] == 12, r["failures"]
    assert r["loaded"] is True and r["entry_served"] is True, r["reason"]
    # every served dtype took the kernels: 3 sizes x 4 calls each
    assert all(n == 12 for n in r["stats"].values()) and len(r["stats"]) == 4, r["stats"]
    # the libtorch symbols the entry binds are exported where it loaded
    assert all(lib for s, lib in r["exports"].items() if s not in tr.CANDIDATES), r["exports"]
    # host time: the entry served the timed calls as shipped, and not with it switched off
    assert r["host"]["path"] == "compiled entry" and r["host_entry_off"]["path"].startswith("Python path"), r["host"]
    assert_consistent(r["host"]) or assert_consistent(r["host_entry_off"])  # (no timing is judged here)
    assert 0 <= min(r["load_average"])
    assert tr.problems([r | {"release": r["torch"]}]) == []
    out = capsys.readouterr().out
    assert "probe: loaded True" in out and "host time:" in out
