"""docs/compiled-entry.md's table of the compiled entry's per-call rules against the code: every
`/* rule: name */` tag in _compiled_entry.c has a row and every row a tag, every exit of serve()
to the general path or to an error (and every answer of torch_decides) carries a tag, and every
test a row names is collected under that name. A rule not in the table is not in the code."""

import re
import subprocess
import sys
from pathlib import Path

from c_anchor import function_body

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compiled-entry.md"
SOURCE = ROOT / "torch-ext" / "relu_flydsl" / "_compiled_entry.c"
_TAG = re.compile(r"/\*\s*rule:\s*([a-z-]+(?:,\s*[a-z-]+)*)")
_EXIT = re.compile(r"\bgoto (?:general|undecided|failed)\b|\breturn fallback\(|\bPy_RETURN_NONE\b")


def rows(doc: str) -> dict:
    """rule -> the test node ids its row names."""
    table = {}
    for line in doc.splitlines():
        m = re.match(r"\|\s*`([a-z-]+)`\s*\|", line)
        if m:
            table[m[1]] = re.findall(r"`([^`\s]+\.py::[^`\s]+)`", line.rsplit("|", 2)[-2])
    return table


def tags(source: str) -> dict:
    """rule -> the lines (1-based) whose comment names it."""
    found = {}
    for number, line in enumerate(source.splitlines(), 1):
        for m in _TAG.finditer(line):
            for name in re.split(r",\s*", m[1]):
                found.setdefault(name, []).append(number)
    return found


def untagged(source: str) -> list:
    """Lines of serve() that leave it (to the general path, an error or torch's fallback) with no
    tag between the condition (the last line holding `if (`) and the exit, and answers of
    torch_decides with no tag on their line."""
    lines, bad = source.splitlines(), []

    def numbered(function):
        start, end = function_body(source, function)
        first = source.count("\n", 0, start)
        return list(enumerate(lines[first:source.count("\n", 0, end) + 1], first + 1))

    condition = None
    for number, line in numbered("serve"):
        if re.match(r"\s*\w+:", line) and not line.strip().startswith(("case", "default")):
            break  # the labels the exits jump to
        if "if (" in line:
            condition = number
        if _EXIT.search(line):
            window = lines[(condition or number) - 1:number]
            if not any(_TAG.search(w) for w in window):
                bad.append(f"_compiled_entry.c:{number} serve() exits without a rule tag: {line.strip()}")
    for number, line in numbered("torch_decides"):
        if re.search(r'\breturn "', line) and not _TAG.search(line):
            bad.append(f"_compiled_entry.c:{number} torch_decides answers without a rule tag: {line.strip()}")
    return bad


def problems(doc: str, source: str, collected=None) -> list:
    """What disagrees between the table and the code; collected: the node ids pytest collects
    from the files the table names (None: not asked)."""
    table, found = rows(doc), tags(source)
    out = [f"tag {name!r} (_compiled_entry.c:{found[name][0]}) has no row in docs/compiled-entry.md"
           for name in found if name not in table]
    out += [f"row {name!r} has no tag in _compiled_entry.c" for name in table if name not in found]
    out += [f"row {name!r} names no test" for name, tests in table.items() if not tests]
    out += untagged(source)
    if collected is not None:
        out += [f"row {name!r}: {test} is not collected" for name, tests in table.items() for test in tests
                if test not in collected]
    return out


def collect(tests) -> set:
    """The node ids pytest collects from the files of `tests`."""
    files = sorted({t.split("::")[0] for t in tests})
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
                          "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"collecting {files} failed:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    return {line.strip() for line in run.stdout.splitlines() if "::" in line}


def test_the_table_and_the_tags_agree():
    doc, source = DOC.read_text(), SOURCE.read_text()
    assert len(rows(doc)) >= 20, f"docs/compiled-entry.md's table has {len(rows(doc))} rows"
    assert problems(doc, source) == []


def test_every_test_the_table_names_is_collected():
    doc = DOC.read_text()
    named = [t for tests in rows(doc).values() for t in tests]
    collected = collect(named)
    missing = [t for t in named if t not in collected]
    assert missing == [], f"docs/compiled-entry.md names tests pytest does not collect: {missing}"


def test_each_kind_of_drift_is_caught():
    """A tag without a row, a row without a tag, an exit without a tag, and a named test that is not
    collected: each reported (the check is not vacuous)."""
    doc, source = DOC.read_text(), SOURCE.read_text()
    rule = "bump"
    assert f"/* rule: {rule} */" in source and f"| `{rule}` |" in doc
    row = next(line for line in doc.splitlines() if line.startswith(f"| `{rule}` |"))
    test = rows(doc)[rule][0]
    assert problems(doc.replace(row + "\n", ""), source) == [
        f"tag {rule!r} (_compiled_entry.c:{tags(source)[rule][0]}) has no row in docs/compiled-entry.md"]
    assert problems(doc, source.replace(f" /* rule: {rule} */", "")) == [f"row {rule!r} has no tag in _compiled_entry.c"]
    exit_line = "if (found == NULL) goto general; /* rule: key */"
    assert exit_line in source
    got = problems(doc, source.replace(exit_line, "if (found == NULL) goto general;"))
    assert len(got) == 1 and "serve() exits without a rule tag: if (found == NULL) goto general;" in got[0], got
    answer = 'return "a dispatch mode"; /* rule: torch */'
    assert answer in source
    got = problems(doc, source.replace(answer, 'return "a dispatch mode";'))
    assert len(got) == 1 and "torch_decides answers without a rule tag" in got[0], got
    collected = {t for tests in rows(doc).values() for t in tests}
    assert problems(doc, source, collected - {test}) == [f"row {rule!r}: {test} is not collected"]
