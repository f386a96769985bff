"""Figures repeated across the docs agree with their one source, docs/benchmarks.md.

The source: docs/benchmarks.md's `## Current numbers` table (host-time ratios: the H200 fallback,
the compiled entry on the no-op HIP library, the Python path without the entry) and its
`## The reference post's tables` (the post's ladder table, its "Where it landed" table, its cache
band). Checked copies: README.md, the rendered Hub card, CHANGELOG.md (the entry of build.toml's
version and an `## Unreleased` one) and docs/*.md but docs/benchmarks-history.md. Fenced code
blocks (verbatim outputs) are not read.

Keyed on how a figure is written, not on where (docs/benchmarks.md, "How repeated figures are
written", says how):
- a host-time ratio is CALL RATIOx BASELINE in one sentence or table row, CALL `relu(x, out=y)` or
  `relu(x)`, BASELINE `torch.clamp_min...` or `torch.relu...`; its setting is named in the same
  sentence: `without the entry` (or `RELU_FLYDSL_ENTRY=0`, `torch 2.9`), else `H200`, else
  `no-op HIP` (or `no-op library`). A past value is written `(1.72x before)`, `from 1.72x` or
  `was 1.72x` and is skipped.
- the post's figures: rows of a table whose header, or the paragraph before it, names the post,
  keyed by rung (`v1`..`v5`), by the post's shapes or by cache-band traffic; and `NNNN GB/s` in a
  sentence naming the post.
"""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "docs" / "benchmarks.md"
HISTORY = ROOT / "docs" / "benchmarks-history.md"


# ---- reading markdown -------------------------------------------------------------------------
def normalize(text: str) -> str:
    text = text.replace("`", "").replace("×", "x").replace("\u2212", "-")
    return re.sub(r"(?<=\d)\s*[\u2013\u2014]\s*(?=\d)", "-", text)


def without_fences(text: str) -> str:
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)


def blocks(text: str):
    """Paragraphs (blank-line separated) of the text outside fenced blocks."""
    return [b for b in re.split(r"\n\s*\n", without_fences(text)) if b.strip()]


def units(text: str):
    """Sentences and table rows: a table row is one unit, a paragraph's lines are joined and cut
    at sentence ends."""
    out = []

    def flush(prose):
        if prose:
            out.extend(re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<!vs\.)(?<=[.!?])\s+", " ".join(prose)))

    for block in blocks(text):
        prose = []
        for line in block.splitlines():
            if line.lstrip().startswith("|"):
                out.append(line)
            elif re.match(r"\s*(?:[-*]|\d+\.)\s", line):  # a new list item
                flush(prose)
                prose = [line]
            else:
                prose.append(line)
        flush(prose)
    return [normalize(u) for u in out]


def tables(text: str):
    """(header cells, rows of cells, the paragraph before) of each markdown table."""
    found = []
    previous = ""
    for block in blocks(text):
        lines = block.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("|") and i + 1 < len(lines)
                  and re.match(r"^\|[\s:|-]+\|$", lines[i + 1].strip())]
        for i in starts:
            cells = lambda line: [normalize(c).strip() for c in line.strip().strip("|").split("|")]  # noqa: E731
            rows = []
            for line in lines[i + 2:]:
                if not line.startswith("|"):
                    break
                rows.append(cells(line))
            before = " ".join(lines[:i]) if i else previous
            found.append((cells(lines[i]), rows, normalize(before)))
        previous = block
    return found


def section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert m, f"docs/benchmarks.md has no section '## {title}'"
    return m.group(1)


# ---- host-time ratios -------------------------------------------------------------------------
@dataclass
class Figure:
    setting: str
    call: str
    values: tuple  # the written numbers, as written
    text: str


NUMBER = r"\d+(?:\.\d+)?"
CALL = r"(?<![\w.])(?P<call>relu\(x, out=y\)|relu\(x\))"
# (a ratio to something else than torch's call, "0.95x the host time of ...", is not one of these)
VALUE = rf"(?P<about>about\s+)?(?P<value>{NUMBER}(?:\s*-\s*{NUMBER})?)\s*x\b(?!\s*before)(?!\s+(?:the|of|its|that)\b)"
# prose: CALL, at most 30 characters with no number and no other call, the ratio (a baseline may follow)
RATIO = re.compile(rf"{CALL}(?P<gap>(?:(?!relu\()[^0-9|]){{0,30}}?){VALUE}")
# a table row: a cell naming CALL (e.g. `relu(x) / torch.relu(x)`), then a cell that is the ratio
CELL_CALL = re.compile(rf"^{CALL}(?:\s*(?:/|vs\.?)\s*\S.*)?$")
CELL_VALUE = re.compile(rf"^\**{VALUE}(?:\s*\(.*\))?\**$")
SETTINGS = (("without the entry", ("without the entry", "relu_flydsl_entry=0", "torch 2.9")),
            ("H200", ("h200",)),
            ("no-op HIP", ("no-op hip", "no-op library")))


def setting_of(unit: str):
    low = unit.lower()
    return next((name for name, keys in SETTINGS if any(k in low for k in keys)), None)


def ratios(text: str):
    """The host-time figures of `text` (a document or a sentence)."""
    found = []
    for unit in units(text):
        setting = setting_of(unit)
        if setting is None:
            continue
        if unit.lstrip().startswith("|"):
            cells = [c.strip() for c in unit.strip().strip("|").split("|")]
            for i, cell in enumerate(cells[:-1]):
                call, value = CELL_CALL.match(cell), CELL_VALUE.match(cells[i + 1])
                if call and value:
                    found.append(Figure(setting, call["call"], tuple(re.findall(NUMBER, value["value"])), unit.strip()))
        for m in RATIO.finditer(unit):
            if re.search(r"\b(?:was|were|from)\s*$", m["gap"]):
                continue
            found.append(Figure(setting, m["call"], tuple(re.findall(NUMBER, m["value"])), unit.strip()))
    return found


def source_ratios():
    """{(setting, call): (lo, hi)} from docs/benchmarks.md's `## Current numbers` table."""
    current = section(SOURCE.read_text(), "Current numbers")
    (header, rows, _), = [t for t in tables(current) if t[0][:2] == ["metric", "value"]]
    out = {}
    for row in rows:
        metric, value = row[0], row[1]
        setting = setting_of(metric)
        call = "relu(x, out=y)" if "relu(x, out=y)" in metric else "relu(x)" if re.search(r"(?<![\w.])relu\(x\)", metric) else None
        if setting is None or call is None:
            continue
        nums = [float(v) for v in re.findall(NUMBER, value.split("x")[0])]
        out[(setting, call)] = (min(nums), max(nums))
    return out


def agrees(written: str, lo: float, hi: float) -> bool:
    """Some value in [lo, hi] rounds to `written` at its precision."""
    decimals = len(written.split(".")[1]) if "." in written else 0
    half = 0.5 * 10 ** -decimals + 1e-9
    return float(written) - half <= hi and float(written) + half >= lo


# ---- the reference post ----------------------------------------------------------------------
SHAPES = {"8192 x 8192": "8192 x 8192", "8192²": "8192 x 8192", "8192x8192": "8192 x 8192",
          "16384 x 8192": "16384 x 8192", "32768 x 8192": "32768 x 8192", "4096 x 14336": "4096 x 14336"}


def shape_of(cell: str):
    key = re.sub(r"\s*[x*]\s*", " x ", cell.replace("(bf16)", "").strip())
    return SHAPES.get(key) or SHAPES.get(cell.strip())


def source_post():
    """The post's tables as docs/benchmarks.md quotes them: {"ladder": {rung: (GB/s, vs torch)},
    "landed": {shape: [numbers]}, "band": {MB: [numbers]}}."""
    text = section(SOURCE.read_text(), "The reference post's tables")
    post = {"ladder": {}, "landed": {}, "band": {}}
    for header, rows, _ in tables(text):
        if header[0] == "rung":
            col_gbs, col_vs = header.index("GB/s"), header.index("vs torch")
            for row in rows:
                post["ladder"][row[0]] = (row[col_gbs], row[col_vs].rstrip("x") if row[col_vs] != "-" else None)
        elif header[0] == "shape (bf16)":
            for row in rows:
                post["landed"][shape_of(row[0])] = re.findall(NUMBER, " ".join(row[1:]))
        elif header[0] == "total traffic":
            for row in rows:
                post["band"][row[0]] = re.findall(NUMBER, " ".join(row[1:]))
    return post


def post_numbers(post):
    numbers = {v for gbs, _ in post["ladder"].values() for v in (gbs,)}
    numbers |= {v for row in post["landed"].values() for v in row}
    numbers |= {v for row in post["band"].values() for v in row}
    return numbers | {"8000"}  # the peak the post grades against


def post_problems(text: str, post) -> list:
    problems = []
    for header, rows, before in tables(text):
        if "post" not in " ".join(header).lower() and "post" not in before.lower():
            continue
        for row in rows:
            first = row[0].strip()
            rest = " ".join(row[1:])
            if re.fullmatch(r"v[1-5]", first) and first in post["ladder"]:
                gbs, vs = post["ladder"][first]
                for v in re.findall(r"(\d{4}) GB/s", rest):
                    if v != gbs:
                        problems.append(f"{first}: {v} GB/s, the post's ladder table says {gbs}: {row}")
                for v in re.findall(rf"({NUMBER})x torch", rest):
                    if vs is not None and float(v) != float(vs):
                        problems.append(f"{first}: {v}x torch, the post's ladder table says {vs}x: {row}")
            elif shape_of(first) in post["landed"]:
                numbers = re.findall(NUMBER, rest)
                if len([n for n in numbers if len(n) == 4]) >= 3:
                    want = post["landed"][shape_of(first)]
                    if [float(n) for n in numbers] != [float(n) for n in want[:len(numbers)]]:
                        problems.append(f"{first}: {numbers}, the post's 'Where it landed' row is {want}")
            elif first in post["band"]:
                numbers = re.findall(NUMBER, rest)
                want = post["band"][first]
                if [float(n) for n in numbers] != [float(n) for n in want[:len(numbers)]]:
                    problems.append(f"{first}: {numbers}, the post's cache band row is {want}")
    allowed = post_numbers(post)
    for unit in units(text):
        if "post" not in unit.lower() or unit.lstrip().startswith("|"):
            continue
        for v in re.findall(r"(\d{4})(?=(?:\s*(?:->|→)\s*\d{4})*\s*GB/s)", unit):
            if v not in allowed:
                problems.append(f"{v} GB/s is none of the post's figures: {unit.strip()[:200]}")
    return problems


# ---- the checked files ------------------------------------------------------------------------
def changelog_scope(text: str) -> str:
    """The CHANGELOG entries that state today's figures: `## Unreleased...` and build.toml's version."""
    version = tomllib.loads((ROOT / "build.toml").read_text())["general"]["version"]
    entries = re.findall(r"^## .*?(?=^## |\Z)", text, flags=re.M | re.S)
    return "\n".join(e for e in entries if e.startswith(("## Unreleased", f"## v{version} ")))


def checked_files(card_path: Path):
    files = {"README.md": (ROOT / "README.md").read_text(), "the card": card_path.read_text(),
             "CHANGELOG.md": changelog_scope((ROOT / "CHANGELOG.md").read_text())}
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path != HISTORY:
            files[f"docs/{path.name}"] = path.read_text()
    return files


@pytest.fixture(scope="module")
def files(variant_build):
    return checked_files(variant_build / "README.md")


def ratio_problems(text: str, source) -> list:
    problems = []
    for f in ratios(text):
        want = source.get((f.setting, f.call))
        if want is None:
            problems.append(f"{f.call} in setting {f.setting}: no such row in docs/benchmarks.md's Current numbers")
        elif not all(agrees(v, *want) for v in f.values):
            span = f"{want[0]}" if want[0] == want[1] else f"{want[0]}-{want[1]}"
            problems.append(f"{f.setting}: {f.call} {'-'.join(f.values)}x, the source says {span}x: {f.text[:240]}")
    return problems


# ---- tests ------------------------------------------------------------------------------------
def test_the_sources_parse():
    source = source_ratios()
    assert {("H200", "relu(x, out=y)"), ("H200", "relu(x)"), ("no-op HIP", "relu(x, out=y)"),
            ("no-op HIP", "relu(x)"), ("without the entry", "relu(x, out=y)")} <= set(source), source
    post = source_post()
    assert sorted(post["ladder"]) == ["torch.relu", "v1", "v2", "v3", "v4", "v5"], post["ladder"]
    assert sorted(post["landed"]) == sorted(set(SHAPES.values())) and len(post["band"]) == 7, post
    # the post's two 8192 x 8192 runs differ: each copy must say which it quotes
    assert post["ladder"]["v5"][0] != post["landed"]["8192 x 8192"][4]


def test_the_current_numbers_link_to_their_output():
    text = SOURCE.read_text()
    slugs = set()
    for title in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        slugs.add(slug)
    (header, rows, _), = [t for t in tables(section(text, "Current numbers")) if t[0][:2] == ["metric", "value"]]
    assert header == ["metric", "value", "device", "command", "output"], header
    for row in rows:
        links = re.findall(r"\]\(([^)]*)\)", row[4])
        assert links, f"no link to the output: {row}"
        for link in links:
            path, _, anchor = link.partition("#")
            target = (SOURCE.parent / path) if path else SOURCE
            assert target.exists(), link
            if anchor:
                titles = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.M)
                ok = {re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-") for t in titles}
                assert anchor in ok, f"{link}: no such heading"


def test_host_time_figures_agree_with_the_source(files):
    source = source_ratios()
    problems = {name: ratio_problems(text, source) for name, text in files.items()}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_the_reference_posts_figures_agree_with_the_source(files):
    post = source_post()
    problems = {name: post_problems(text, post) for name, text in files.items()}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_the_scan_finds_the_figures(files):
    """Guards the extractor: without these it would pass by finding nothing."""
    found = {name: {(f.setting, f.call) for f in ratios(text)} for name, text in files.items()}
    assert {("H200", "relu(x, out=y)"), ("H200", "relu(x)"), ("without the entry", "relu(x, out=y)")} <= found["the card"]
    changelog = {(f.setting, f.call) for f in ratios((ROOT / "CHANGELOG.md").read_text())}  # every entry
    assert {("H200", "relu(x, out=y)"), ("no-op HIP", "relu(x, out=y)")} <= changelog, changelog
    post_tables = [t for t in tables(files["the card"]) if "post" in t[2].lower()]
    assert post_tables and len(post_tables[0][1]) == 4


STALE = """On an NVIDIA H200 the fallback costs: relu(x, out=y) 1.28-1.30x torch.clamp_min(x, 0, out=y).

Where it landed, as the reference post reports:

| shape (bf16) | v1 | v2 | v3 | v4 | v5 | torch |
|---|---|---|---|---|---|---|
| 8192 x 8192 | 2865 | 6793 | 6855 | 7075 | 7131 | 6830 |

| rung | the reference post, bf16 8192² |
|---|---|
| v5 | 7132 GB/s, 1.04x torch |

On the no-op HIP library relu(x) costs 0.95x torch.relu(x). The post reaches 7113 GB/s at 8192².

With the entry (no-op HIP library on CPU) relu(x, out=y) 0.30-0.31x and relu(x) 0.87x torch's own call.

| call | host time | where |
|---|---|---|
| `relu(x, out=y)` / `torch.clamp_min(x, 0, out=y)` | 1.30x | H200, not gfx950 |
| `relu(x)` / `torch.relu(x)` | 1.06x | H200, not gfx950 |
"""


def test_the_checker_catches_stale_copies():
    source, post = source_ratios(), source_post()
    problems = ratio_problems(STALE, source)
    assert len(problems) == 4 and sum("1.30" in p for p in problems) == 2 and any("0.87" in p for p in problems), problems
    assert len(ratios(STALE)) == 6, ratios(STALE)  # the right ones are found too
    problems = post_problems(STALE, post)
    assert any("8192 x 8192" in p for p in problems) and any(p.startswith("v5: 7132") for p in problems)
    assert any("7113" in p for p in problems), problems
    fine = ("On an NVIDIA H200 relu(x, out=y) costs 1.12x torch.clamp_min(out=) (1.72x before). "
            "On the no-op HIP library relu(x, out=y) costs 0.95x the host time of the previous release. "
            "On the no-op HIP library relu(x) was 3.25x torch.relu, now relu(x) 0.79x torch.relu(x).")
    assert ratio_problems(fine, source) == [] and len(ratios(fine)) == 2
    assert ratio_problems("```\nH200: relu(x, out=y) 1.30x torch.clamp_min\n```", source) == []
