"""The mutation check: the suite must catch each of the ladder post's four
ways a kernel passed an output check and was still wrong, an off-by-one
predicate, and dispatch, launch, code-object, planner and fast-path edits
(mutation_support.DISPATCH_MUTANTS). Each mutant is a patched copy of the
package (kernel mutants with their code objects rebuilt from the patched
source, C mutants with their entry built at mutation_support.ENTRY_OPT) run
through its public relu() on the virtual gfx950: kernel mutants under the vgpu
suites' checks until a case fails with the checks EXPECTED_CATCHERS names, the
others against test_hot_path's scenarios (the first that fails catches it). The
unmutated copy (its entry built as the C mutants') must pass every case.
The catch count is printed in the terminal summary. The first-use canary
(RELU_FLYDSL_CANARY) is off in the copies: this measures the suite, not the
canary. Check mutants (mutation_support.CHECK_MUTANTS) weaken one check of the
tree in place and run the one real test that must then fail (it passes
unmutated). Every patch is anchored by syntax tree inside a named function:
test_patches_survive_reformatting applies each to its file reformatted."""

import ast
import functools

import pytest

import mutation_support as M
import vgpu_support as S

pytestmark = pytest.mark.vgpu

_results = {}  # mutant name -> Result, shared by the per-mutant tests and the count


def _result(vgpu, monkeypatch, root, name):
    if name not in _results:
        mutant = M.BY_NAME[name]
        monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
        pkg = M.import_copy(mutant, root)
        dispatch = pkg._dispatch
        # what the vgpu fixture does for the real package: CPU tensors are the
        # memory of the virtual device holding their allocation
        from vgpu.serve import device_info_for, present_cpu

        monkeypatch.setattr(dispatch, "device_info", device_info_for(vgpu, dispatch))
        present_cpu(vgpu, pkg._compiled_entry)  # and to the copy's compiled entry
        vgpu.errors_expected = True  # the mutants' violations are recorded per case, then reset
        if mutant.kill:
            _results[name] = M.run_scenarios(vgpu, pkg, mutant, mutant.kill)
        else:
            _results[name] = M.run_mutant(vgpu, pkg, mutant, EXPECTED_CATCHERS.get(name, ()))
            if mutant is M.UNMUTATED:  # and every scenario but the known bugs' (expected to fail)
                scenarios = [s for s in M.scenarios() if s not in M.known_bugs()]
                _results["unmutated-scenarios"] = M.run_scenarios(vgpu, pkg, mutant, scenarios, first_only=False)
    return _results[name]


def test_patches_change_the_copy_not_the_tree(mutant_root):
    """Every patch finds its function and matches its snippet as often as it
    says, it changes that function in the copy, and only the copy changes."""
    tree = list((M.ROOT / "flash_relu_rocm").glob("*.py")) + list(M.PACKAGE.glob("*.py"))
    before = {p: p.read_bytes() for p in tree}
    assert not M.TEXT_ANCHORED, f"text-anchored mutants: {M.TEXT_ANCHORED}"
    for mutant in M.ALL_MUTANTS:
        name = M.copy_of(mutant, mutant_root, build_entry=False)  # the copy the run imports; unbuilt if not yet
        for rel, qualname, *_ in mutant.patches:
            if rel.endswith(".c"):  # the compiled entry: the function's text changed
                src, copy = (M.PACKAGE / rel).read_text(), (mutant_root / name / rel).read_text()
                assert copy[slice(*M.c_anchor.function_body(copy, qualname))] != \
                    src[slice(*M.c_anchor.function_body(src, qualname))], (mutant.name, rel, qualname)
                continue
            src = ast.parse((M.PACKAGE / rel).read_text())
            copy = ast.parse((mutant_root / name / rel).read_text())
            assert M._dump(M.find_function(copy, qualname)) != M._dump(M.find_function(src, qualname)), \
                (mutant.name, rel, qualname)
    after = {p: p.read_bytes() for p in before}
    assert before == after
    # a target that is gone fails the run, never a silent skip
    with pytest.raises(AssertionError, match="matches 0 times"):
        M.make_copy(M.Mutant("stale", "", (("flash_relu_rocm/plan.py", "plan", "no_such_name", "x"),)), mutant_root)
    with pytest.raises(AssertionError, match="not found"):
        M.make_copy(M.Mutant("gone", "", (("flash_relu_rocm/plan.py", "no_such_function", "n", "x"),)), mutant_root)
    with pytest.raises(AssertionError, match="matches 1 times"):  # a stated count that no longer holds
        M.make_copy(M.Mutant("count", "", (("_dispatch.py", "_launch_entry", "entry.hit()", "pass", 2),)), mutant_root)
    with pytest.raises(AssertionError, match="matches 0 times"):  # the same for the compiled entry's C
        M.make_copy(M.Mutant("stale-c", "", (("_compiled_entry.c", "serve", "no_such_name", "x"),)), mutant_root)
    with pytest.raises(AssertionError, match="not found"):
        M.make_copy(M.Mutant("gone-c", "", (("_compiled_entry.c", "no_such_function", "n", "x"),)), mutant_root)


def test_patches_survive_reformatting():
    """Every AST patch (catalogue and check mutants) still applies, with the
    same effect, to its file reformatted: comments dropped, lines re-wrapped,
    quotes changed (ast.unparse), and blank lines and comments inserted."""
    patches = [(M.PACKAGE / p[0], p[1:]) for m in M.ALL_MUTANTS for p in m.patches if not p[0].endswith(".c")]
    patches += [(M.ROOT / c.file, (c.qualname, c.old, c.new)) for c in M.CHECK_MUTANTS]
    @functools.lru_cache(maxsize=None)
    def reformat(text):
        return ast.unparse(M.parse(text)).replace("\n    ", "\n\n    # moved\n    ")

    for path, (qualname, old, new, *count) in sorted(patches, key=lambda p: str(p[0])):  # a file's parse reused
        text = path.read_text()
        assert reformat(text) != text
        patched = M.ast_patch(text, qualname, old, new, str(path), *count)
        patched_reformatted = M.ast_patch(reformat(text), qualname, old, new, str(path), *count)
        assert M._dump(ast.parse(reformat(patched))) == M._dump(M.parse(patched_reformatted)), \
            (path.name, qualname, old)


def test_c_patches_survive_reformatting():
    """Every patch of the compiled entry's C still applies, with the same effect, to the
    source reformatted: comments dropped, every run of whitespace one space or a newline."""
    import re

    def reformat(text):
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        return "\n".join(re.sub(r"\s+", " ", line) for line in text.splitlines()).replace(";", ";\n")

    def squash(text):
        return re.sub(r"\s+", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))

    for m in M.ALL_MUTANTS:
        for rel, qualname, old, new, *count in m.patches:
            if not rel.endswith(".c"):
                continue
            text = (M.PACKAGE / rel).read_text()
            patched = M.c_anchor.c_patch(text, qualname, old, new, *count)
            again = M.c_anchor.c_patch(reformat(text), qualname, old, new, *count)
            assert squash(patched) == squash(again) != squash(text), (m.name, qualname, old)


def test_unmutated_copy_passes(vgpu, monkeypatch, mutant_root):
    """The harness itself is sound: the copy without a mutation passes every case."""
    r = _result(vgpu, monkeypatch, mutant_root, "unmutated")
    assert r.cases > 100
    assert not r.failing, f"unmutated copy failed {len(r.failing)} case(s); first: {next(iter(r.failing.items()))}"
    s = _results["unmutated-scenarios"]
    assert s.cases == len(M.scenarios()) - len(M.known_bugs()) and not s.failing, s.failing


@pytest.mark.parametrize("name", [m.name for m in M.ALL_MUTANTS])
def test_mutant_is_caught(vgpu, monkeypatch, mutant_root, name):
    r = _result(vgpu, monkeypatch, mutant_root, name)
    assert r.caught, f"mutant {name} ({r.mutant.post}) passed all {r.cases} cases"


# which checks must be among the catchers: the post's "caught by" column
EXPECTED_CATCHERS = {
    "straddling-predicate": {"device", "guards"},   # guard region
    "over-launch": {"grid"},                        # only the exact-grid check sees it
    "max-size-default": {"device"},                 # guard region; now the emulator's descriptor check stops it first
    "buffer-straddle": {"bits", "written-once"},    # value comparison (dropped whole)
    "off-by-one": {"device", "guards"},
}


def test_mutation_check_catches_every_mutant(vgpu, monkeypatch, mutant_root):
    results = [_result(vgpu, monkeypatch, mutant_root, m.name) for m in M.ALL_MUTANTS]
    caught = [r for r in results if r.caught]
    kernel = [r for r in results if not r.mutant.kill]
    missed = [r.mutant.name for r in results if not r.caught]
    lines = [f"mutation check: {len(caught)}/{len(results)} mutants caught"
             + (f"; NOT caught: {', '.join(missed)}" if missed else ""),
             f"  kernel mutants ({len(kernel)}), cases caught / run and by which check:"]
    lines += [f"    {r.describe()}" for r in kernel]
    lines.append(f"  dispatch mutants ({len(results) - len(kernel)}): each run against its test_hot_path scenario")
    S.SUMMARY_LINES.extend(lines)
    print("\n".join(lines))
    assert len(caught) == len(results), "\n".join(lines)
    for r in results:
        # a dispatch mutant must be caught by the scenario written for it
        missing = EXPECTED_CATCHERS.get(r.mutant.name, set(r.mutant.kill[:1])) - set(r.by_check())
        assert not missing, f"{r.mutant.name}: expected {sorted(missing)} among its catchers; {r.describe()}"


# ---- check mutants: a weakened check, one real test of the suite must fail --
from test_code_objects import copies, manifest  # noqa: E402,F401  (fixtures of the kill tests)
from test_graphs import cap  # noqa: E402,F401
from test_launch_streams import two_streams  # noqa: E402,F401

_check_results = {}  # name -> (caught, what the kill test said)


def _run_check_mutant(cm, request, monkeypatch, mutate=True):
    if cm.child:  # damaged native code is never loaded into this process: a crash fails this test, by name
        return M.run_in_child(cm, mutate)
    fn, params, fixtures = M.kill_test(cm)
    args = dict(params)
    for p in fixtures:
        args[p] = monkeypatch if p == "monkeypatch" else request.getfixturevalue(p)
    if "vgpu" in request.fixturenames or any(p in ("cap", "vgpu", "two", "two_streams") for p in fixtures):
        request.getfixturevalue("vgpu").errors_expected = True
    if mutate:
        assert M.apply_live(cm, monkeypatch.setattr) > 0
    try:
        fn(**args)
    except (Exception, pytest.fail.Exception) as e:  # noqa: BLE001 - any failure of the test catches it
        return True, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"
    return False, "passed"


@pytest.fixture(scope="module", autouse=True)
def _check_mutants_summary():
    """The check mutants' count in the terminal summary, written after the module's
    last test whatever order its tests ran in (each per-mutant test asserts its own catch)."""
    yield
    if not _check_results:
        return
    missed = [n for n, caught in _check_results.items() if not caught]
    S.SUMMARY_LINES.append(
        f"check mutants: {len(_check_results) - len(missed)}/{len(_check_results)} caught, each by one real test"
        + (f" ({len(M.CHECK_MUTANTS) - len(_check_results)} not run)" if len(_check_results) < len(M.CHECK_MUTANTS) else "")
        + (f"; NOT caught: {', '.join(missed)}" if missed else ""))


@pytest.mark.filterwarnings("ignore:relu_flydsl:RuntimeWarning")  # a mutant's own canary or fallback warnings
@pytest.mark.parametrize("name", [m.name for m in M.CHECK_MUTANTS])
def test_check_mutant_is_caught(request, monkeypatch, name):
    cm = M.CHECK_BY_NAME[name]
    caught, said = _run_check_mutant(cm, request, monkeypatch)
    _check_results[name] = caught
    assert caught, f"check mutant {name} ({cm.post}) passed {cm.kill[0]}::{cm.kill[1]}"


@pytest.mark.parametrize("name", [m.name for m in M.CHECK_MUTANTS])
def test_check_mutant_kill_test_passes_unmutated(request, monkeypatch, name):
    cm = M.CHECK_BY_NAME[name]
    failed, said = _run_check_mutant(cm, request, monkeypatch, mutate=False)
    assert not failed, f"{cm.kill[0]}::{cm.kill[1]} fails without the mutation: {said}"
