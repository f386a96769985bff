"""Mutants of the release tooling (tools/release.py, tools/release_identity.py,
tools/torch_releases.py): each a CheckMutant killed by one real test.

See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)

MUTANTS = ()
SCENARIOS = {}
KNOWN_BUGS = {}

_TR, _REL, _ID = "tools/torch_releases.py", "tools/release.py", "tools/release_identity.py"
_TRT, _RT = "test_torch_releases", "test_release_tool"
CHECK_MUTANTS = (
    CheckMutant("torch-releases-unloaded-entry-passes",
                "torch_releases: a supported torch where the entry did not load is not reported", _TR, "problems",
                "found.append(f\"{where}: the compiled entry did not load: {r['reason']}\")", "pass",
                (_TRT, "test_a_supported_torch_where_the_entry_does_not_load_is_named_with_its_reason", {})),
    CheckMutant("torch-releases-exit-zero", "torch_releases: exit status 0 whatever it found", _TR, "main",
                "return 1 if bad else 0", "return 0",
                (_TRT, "test_the_tool_exits_non_zero_naming_the_release_and_reason", {})),
    CheckMutant("torch-releases-2-10-unsupported", "torch_releases: torch 2.10 not counted as supported", _TR,
                "supported", "t[:2] >= LOWEST", "t[:2] > LOWEST",
                (_TRT, "test_a_supported_torch_where_the_entry_does_not_load_is_named_with_its_reason", {})),
    CheckMutant("torch-releases-range-first-run", "torch_releases: a ratio's range is the first run's ratio", _TR,
                "summarise", '[min(d["ratios"][pair] for d in done), max(d["ratios"][pair] for d in done)]',
                '[done[0]["ratios"][pair]] * 2',
                (_TRT, "test_a_run_ratio_is_its_medians_ratio_and_the_range_spans_the_runs", {})),
    CheckMutant("torch-releases-stale-variant-recorded", "torch_releases: a build this tree no longer makes is recorded",
                _TR, "stale_variant", "measured == tree_id", "True",
                (_TRT, "test_a_build_this_tree_no_longer_makes_is_not_recorded", {})),
    CheckMutant("torch-releases-variant-not-renamed", "torch_releases: the record names the variant measured, not the one that ships",
                _TR, "name_shipped_variant", 'record = dict(record, variant=shipped, measured_variant=record["variant"])', "pass",
                (_TRT, "test_the_record_names_the_variant_that_ships_with_the_claim_it_gives", {})),
    CheckMutant("torch-releases-merge-other-variant", "torch_releases: an old record of another variant is merged",
                _TR, "merge", '(variant is None or old.get("variant") == variant)', "True",
                (_TRT, "test_a_new_run_replaces_its_releases_and_keeps_the_others_in_version_order", {})),
    CheckMutant("release-tree-link-prefix", "release: a card's tree link passes where an uploaded path only begins with its name",
                _REL, "card_link_problems", 'p.startswith(m[2] + "/")', "p.startswith(m[2])",
                (_RT, "test_a_tree_link_needs_an_uploaded_path_under_that_folder", {})),
    CheckMutant("release-source-tracked-only", "release: the source tree is the tracked files only", _REL,
                "source_files", '["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]',
                '["git", "ls-files", "-z", "--cached"]', (_RT, "test_the_source_tree_is_what_git_carries", {})),
    CheckMutant("release-url-prefix-dropped", "release: the Hub address of a kernel repository without kernels/",
                _ID, "URL_PREFIX", '"kernels/"', '""', (_RT, "test_one_setting_names_where_the_release_lives", {})),
)
