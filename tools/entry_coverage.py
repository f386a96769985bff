"""Which lines and branches of the compiled entry's C the entry's tests reach: how
tools/sanitized_entry.py's run (its tests() less LEFT_OUT) is chosen, and the check that it
still reaches all that every candidate test does.

    .venv/bin/python tools/entry_coverage.py            # every candidate, then the sanitizer's run
    .venv/bin/python tools/entry_coverage.py ARGS...    # these pytest arguments only

copies the checkout as tools/sanitized_entry.py does, builds the entry there with gcc's
--coverage at -O0 (never shipped, loaded only in that copy) and runs the tests in one pytest
process that writes the counters after each test (a test's child processes, the thread tests',
write into that test's). It prints each test's time and what it alone reaches, a cheap set that
reaches it all (greedy), and without ARGS what the sanitizer's run misses: it exits 1 if any.
What runs outside a test (imports) counts for any set alike. Needs gcc and gcov.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import sanitized_entry as SE

FLAGS = ("-O0", "--coverage")
# libgcov's own functions, reachable from the test process only through an exported one
FLUSH = ('\nextern void __gcov_dump(void);\nextern void __gcov_reset(void);\n'
         '__attribute__((visibility("default"))) void entry_coverage_flush(void) { __gcov_dump(); __gcov_reset(); }\n')
PLUGIN, OPTION, ENV = "entry_coverage", "--entry-coverage-out", "RELU_FLYDSL_ENTRY_COVERAGE_GCDA"


def build_copy(dst: Path) -> Path:
    """The checkout at `dst`, its entry built with coverage; returns where its counters land."""
    from flash_relu_rocm import build

    with mock.patch.object(build, "SANITIZE_FLAGS", FLAGS):  # the sanitized build's slot, these flags
        entry = SE.make_copy(dst, (SE.ROOT / SE.ENTRY_C).read_text() + FLUSH)
    return dst / SE.OBJECTS / f"{entry['file']}-{SE.ENTRY_C.stem}.gcda"


def reached(gcno: Path, gcda: Path, source: Path, lines: int) -> set:
    """{("line", n)} and {("branch", n, i)} the counters show taken, in the first `lines` lines."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(gcno, Path(tmp) / "e.gcno")
        shutil.copy(gcda, Path(tmp) / "e.gcda")
        subprocess.run(["gcov", "-j", "-b", "-o", str(Path(tmp) / "e.o"), str(source)], cwd=tmp,
                       capture_output=True, check=True, timeout=120)
        data = json.loads(gzip.decompress(next(Path(tmp).glob("*.gcov.json.gz")).read_bytes()))
    found = set()
    for f in data["files"]:
        for ln in f["lines"]:
            n = ln["line_number"]
            if n <= lines and ln["count"]:
                found.add(("line", n))
                found.update(("branch", n, i) for i, b in enumerate(ln["branches"]) if b["count"])
    return found


def measure(args: list) -> tuple:
    """({test: what it reaches}, {test: seconds}) of one pytest run of `args` in a fresh copy."""
    with tempfile.TemporaryDirectory(prefix="relu-flydsl-coverage-") as tmp:
        dst, out = Path(tmp) / "checkout", Path(tmp) / "counters"
        out.mkdir()
        gcda = build_copy(dst)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-p", PLUGIN, f"{OPTION}={out}", *args]
        r = subprocess.run(cmd, cwd=dst, env=dict(os.environ, **{ENV: str(gcda)}), capture_output=True, text=True)
        print((r.stdout + r.stderr).strip().splitlines()[-1])
        if r.returncode != 0:
            print(r.stdout[-4000:] + r.stderr[-4000:])
            raise SystemExit(f"the tests failed in the coverage build (exit {r.returncode})")
        lines = len((SE.ROOT / SE.ENTRY_C).read_text().splitlines())
        times = json.loads((out / "times.json").read_text())
        units = {t: reached(gcda.with_suffix(".gcno"), out / f"{i}.gcda", dst / SE.ENTRY_C, lines)
                 for i, t in enumerate(times) if (out / f"{i}.gcda").exists()}
    return units, times


def cover(units: dict, cost: dict) -> list:
    """Greedy set cover: the unit cheapest per newly reached point first, until all are reached."""
    left, chosen = set().union(*units.values()), []
    while left:
        best = min((u for u in units if units[u] & left), key=lambda u: cost[u] / len(units[u] & left))
        chosen.append(best)
        left -= units[best]
    return chosen


def _count(points: set) -> str:
    return f"{sum(p[0] == 'line' for p in points)} lines and {sum(p[0] == 'branch' for p in points)} branch outcomes"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=".venv/bin/python tools/entry_coverage.py",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER,
                        help="only these pytest arguments (after --, for options such as -k)")
    args = [a for a in parser.parse_args(argv).pytest_args if a != "--"]
    units, times = measure(args or SE.candidates())
    everything = set().union(*units.values())
    print(f"{len(units)} tests ({sum(times.values()):.1f} s) reach {_count(everything)} of {SE.ENTRY_C.name}")
    for t in sorted(units, key=lambda t: -times[t]):
        alone = units[t] - set().union(*(v for u, v in units.items() if u != t))
        print(f"{times[t]:7.2f} s  {len(units[t]):4d} reached, {len(alone):3d} by it alone  {t}")
    chosen = cover(units, times)
    print(f"{len(chosen)} of them reach it all in {sum(times[t] for t in chosen):.1f} s:")
    print("\n".join(f"  {t}" for t in sorted(chosen)))
    if args:
        return 0
    run, run_times = measure(SE.tests())
    missed = everything - set().union(*run.values())
    print(f"the sanitizer's run: {len(run)} tests ({sum(run_times.values()):.1f} s) reach "
          f"{_count(everything - missed)}; it misses {_count(missed)}: {sorted(missed)}")
    return 1 if missed else 0


# ---------------------------------------------------------------- the child's pytest plugin
_seen = {}  # node id -> seconds (setup + call + teardown)


def pytest_addoption(parser):
    parser.addoption(OPTION, help="the folder for each test's coverage counters")


def _flush(config, name):
    import ctypes

    from relu_flydsl import _compiled_entry

    out = config.getoption(OPTION)
    if not out:
        return
    if _compiled_entry._memfd is not None:  # the entry this process loaded (its counters)
        ctypes.CDLL(f"/proc/self/fd/{_compiled_entry._memfd}").entry_coverage_flush()
    gcda = Path(os.environ[ENV])
    if gcda.exists() and name is not None:
        gcda.rename(Path(out) / f"{list(_seen).index(name)}.gcda")
    elif gcda.exists():
        gcda.unlink()  # between tests: counted for every set of tests alike


def pytest_runtest_logreport(report):
    _seen[report.nodeid] = _seen.get(report.nodeid, 0.0) + report.duration


def pytest_runtest_setup(item):
    _flush(item.config, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    _flush(item.config, item.nodeid)


def pytest_sessionfinish(session):
    out = session.config.getoption(OPTION)
    if out:
        (Path(out) / "times.json").write_text(json.dumps(_seen))


if __name__ == "__main__":
    raise SystemExit(main())
