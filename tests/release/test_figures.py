"""Figures and claims repeated across the docs agree with their one source.

Claims: torch-ext/relu_flydsl/_claims.py (where torch.compile is the default, what the bit rule
does to the special values, the no-entry cost, where host time decides, what the check's exit
status means). Each copy states the claim in its words; a sentence or table row on the claim's
topic that does not is stale (the topics: CLAIM_TOPICS). Each claim is held to what it
summarises: the kernels (on the virtual gfx950), docs/benchmarks.md's model, the torch-release
record. The no-entry cost is also a figure (below).

Figures: docs/benchmarks.md's `## Current numbers` table (host-time ratios: the H200 fallback,
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


def table_ratios():
    """{(setting, call): (lo, hi)} of docs/benchmarks.md's `## Current numbers` table."""
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


def source_ratios():
    """{(setting, call): (lo, hi)}: the Current numbers table, but the no-entry cost is
    _claims.NO_ENTRY_COST's (the table's row is one of its copies)."""
    from relu_flydsl import _claims

    out = table_ratios()
    out[("without the entry", "relu(x, out=y)")] = tuple(_claims.NO_ENTRY_COST["out"])
    out[("without the entry", "relu(x)")] = tuple(_claims.NO_ENTRY_COST["new"])
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
    assert {("without the entry", "relu(x, out=y)"), ("without the entry", "relu(x)")} <= found["the card"]
    assert {("without the entry", "relu(x, out=y)"), ("no-op HIP", "relu(x)")} <= found["README.md"]
    changelog = {(f.setting, f.call) for f in ratios((ROOT / "CHANGELOG.md").read_text())}  # every entry
    assert {("H200", "relu(x, out=y)"), ("no-op HIP", "relu(x, out=y)")} <= changelog, changelog
    post_tables = [t for t in tables(files["README.md"]) if "post" in " ".join(t[0]).lower()]
    assert post_tables and len(post_tables[0][1]) == 5, post_tables  # the ladder table, v1..v5


def test_the_card_quotes_no_host_time_measured_where_it_cannot_load(files):
    """The variant loads only on ROCm: a host-time figure from an NVIDIA machine (the H200 torch
    fallback) is not one a reader of the card can meet, so it stays in docs/benchmarks.md."""
    assert [f.text for f in ratios(files["the card"]) if f.setting == "H200"] == []
    assert "H200" not in files["the card"]


STALE = """On an NVIDIA H200 the fallback costs: relu(x, out=y) 1.28-1.30x torch.clamp_min(x, 0, out=y).

Where it landed, as the reference post reports:

| shape (bf16) | v1 | v2 | v3 | v4 | v5 | torch |
|---|---|---|---|---|---|---|
| 8192 x 8192 | 2865 | 6793 | 6855 | 7075 | 7131 | 6830 |

| rung | the reference post, bf16 8192² |
|---|---|
| v5 | 7132 GB/s, 1.04x torch |

On the no-op HIP library relu(x) costs 0.95x torch.relu(x). The post reaches 7113 GB/s at 8192².

With the entry (no-op HIP library on CPU) relu(x, out=y) 0.38-0.40x and relu(x) 0.87x torch's own call.

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
            "On the no-op HIP library relu(x) was 3.25x torch.relu, now relu(x) 0.72x torch.relu(x).")
    assert ratio_problems(fine, source) == [] and len(ratios(fine)) == 2
    assert ratio_problems("```\nH200: relu(x, out=y) 1.30x torch.clamp_min\n```", source) == []


# ---- claims (torch-ext/relu_flydsl/_claims.py) ------------------------------------------------
def claims():
    from relu_flydsl import _claims

    lo, hi = _claims.HOST_TIME_CROSSOVER_MB
    return {
        "COMPILE_DEFAULTS": normalize(_claims.COMPILE_DEFAULTS),
        "SPECIALS": normalize(_claims.SPECIALS),
        "HOST_TIME_CROSSOVER_MB": f"{lo}-{hi} MB",
        "CHECK_EXITS": normalize(_claims.CHECK_EXITS),
    }


# The sentences and table rows that state a claim's topic (normalized text, lower case): each must
# hold the claim in its words. Keyed on what a stale copy would say, so that one is caught.
CLAIM_TOPICS = {
    # torch.compile's default in a serving stack (not SGLang's graph capture without compiling)
    "COMPILE_DEFAULTS": lambda u: "sglang" in u and re.search(r"torch\.compile|compiles|enable-torch-compile", u),
    # what the rule does to infinities and denormals (not a list of the special patterns a check
    # feeds in, such as the canary's, nor gradients)
    "SPECIALS": lambda u: re.search(r"(?:inf|denormal)s?\b[^.;]*?\b(?:pass|passes|unchanged|kept|stay|stays|"
                                    r"become|becomes|through)\b", u)
                          and not re.search(r"gradient|canary|pattern", u),
    # below how much traffic this package's host time decides (the post's own figure, named as the
    # post's, and torch's own relu measured host-bound on an H200 are other facts)
    "HOST_TIME_CROSSOVER_MB": lambda u: re.search(r"\d\s*mb\b", u) and re.search(
        r"host time[^.]*\bdecide|costs its host time", u) and "post" not in u and "h200" not in u,
    # the exit status of the check and the health check (version 5's code for "nothing tested",
    # 2, is argparse's for a usage error: a copy saying a check exits 2 is stale)
    "CHECK_EXITS": lambda u: "nothing was tested" in u or (re.search(r"\bcheck\b", u)
                                                            and re.search(r"\bexits?\s+(?:status\s+)?2\b", u)),
}


def claim_problems(text: str, wanted=None) -> list:
    """(claim, unit) for each unit on a claim's topic that does not state the claim."""
    wanted = wanted or claims()
    problems = []
    for unit in units(text):
        low = " ".join(unit.split()).lower()
        for name, on_topic in CLAIM_TOPICS.items():
            if on_topic(low) and wanted[name].lower() not in low:
                problems.append((name, unit.strip()[:240]))
    return problems


def claim_copies(text: str, wanted=None) -> set:
    wanted = wanted or claims()
    flat = " ".join(normalize(without_fences(text)).split()).lower()
    return {name for name, claim in wanted.items() if claim.lower() in flat}


def test_every_copy_of_a_claim_states_it(files):
    problems = {name: claim_problems(text) for name, text in files.items()}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, problems


def test_the_claims_have_their_copies(files):
    """Guards the scan: the places that must state each claim do (a claim dropped from a page
    would otherwise pass as 'nothing stale')."""
    import relu_flydsl

    where = {"README.md": {"COMPILE_DEFAULTS", "SPECIALS", "HOST_TIME_CROSSOVER_MB"},
             "the card": {"COMPILE_DEFAULTS", "SPECIALS", "HOST_TIME_CROSSOVER_MB"},
             "docs/serving.md": {"COMPILE_DEFAULTS"},
             "docs/semantics.md": {"SPECIALS"},
             "docs/benchmarks.md": {"HOST_TIME_CROSSOVER_MB"}}
    if "check" in relu_flydsl.__all__:  # the check ships: its exit status is on the card and README, in
        for page in ("README.md", "the card", "docs/verification.md"):  # brief, and in detail in one place
            where[page] = where.get(page, set()) | {"CHECK_EXITS"}
    missing = {page: sorted(names - claim_copies(files[page])) for page, names in where.items()}
    assert not {k: v for k, v in missing.items() if v}, missing


STALE_CLAIMS = """Under torch.compile (vLLM's and SGLang's default), a compiled graph runs torch's relu.

NaN keeps its payload, -0.0 stays -0.0, ±inf and denormals pass: a compare and a select.

The kernels keep NaN bits, `-0.0` stays `-0.0`, `±inf` and denormals pass through.

Below about 200 MB of traffic, host time decides a call, not bandwidth.

Below about 30-60 MB of traffic a relu call costs its host time.

It exits 2 when the check found no device.

The check's exit status: exit 0: every case it ran passed; 1: a case failed (named); 2: nothing was tested (the reason named).
"""


def test_the_claim_checker_catches_stale_copies():
    found = [name for name, _ in claim_problems(STALE_CLAIMS)]
    assert found == ["COMPILE_DEFAULTS", "SPECIALS", "SPECIALS", "HOST_TIME_CROSSOVER_MB", "HOST_TIME_CROSSOVER_MB",
                     "CHECK_EXITS", "CHECK_EXITS"], found
    fine = ("Under torch.compile (vLLM compiles by default, SGLang only with --enable-torch-compile) it fuses. "
            "On the bits: NaN keeps its payload, -0.0 stays -0.0, +inf and positive denormals pass; -inf and "
            "negative denormals become +0.0. The canary holds ±inf and denormals unchanged in its guards. "
            "Below about 40-54 MB of traffic host time decides a call. "
            "The reference post's launch overhead decided below about 200 MB. "
            "Graphs captured without compiling (SGLang's default decode graphs) run the kernel.")
    assert claim_problems(fine) == [], claim_problems(fine)
    assert claim_copies(fine) == {"COMPILE_DEFAULTS", "SPECIALS", "HOST_TIME_CROSSOVER_MB"}


def test_the_crossover_claim_is_the_models_crossing():
    """HOST_TIME_CROSSOVER_MB is the model's crossing with the compiled entry, for both calls."""
    from relu_flydsl import _claims

    model = section(SOURCE.read_text(), "Host time per call")
    (header, rows, _), = [t for t in tables(model) if "crossing now (traffic)" in t[0]]
    col = header.index("crossing now (traffic)")
    crossings = [float(re.match(rf"({NUMBER})\s*MB", row[col])[1]) for row in rows]
    assert len(crossings) == 2, rows
    assert (min(crossings), max(crossings)) == tuple(_claims.HOST_TIME_CROSSOVER_MB), (crossings, _claims.HOST_TIME_CROSSOVER_MB)


def test_the_no_entry_cost_claim_is_the_current_numbers_row():
    """docs/benchmarks.md's Current numbers rows state the claim (test_torch_releases.py holds the
    claim to the newest torch-release record)."""
    from relu_flydsl import _claims

    table = table_ratios()
    assert table[("without the entry", "relu(x, out=y)")] == tuple(_claims.NO_ENTRY_COST["out"]), table
    assert table.get(("without the entry", "relu(x)")) == tuple(_claims.NO_ENTRY_COST["new"]), table


@pytest.mark.vgpu
def test_the_specials_claim_is_what_the_kernels_do(vgpu):
    """SPECIALS, run: each served float dtype's NaNs (quiet, signalling, negative), ±0.0, ±inf and the
    smallest denormals of both signs through relu() on the virtual gfx950, the kernel path."""
    import torch

    import relu_flydsl
    from relu_flydsl import _claims

    assert normalize(_claims.SPECIALS) == ("NaN keeps its payload, -0.0 stays -0.0, +inf and positive denormals "
                                           "pass; -inf and negative denormals become +0.0"), "the claim changed: restate the cases"
    patterns = {  # dtype: (int view, bits of +inf, of the smallest positive denormal, sign bit, quiet NaN with a payload, signalling NaN)
        torch.float32: (torch.int32, 0x7F800000, 0x00000001, 1 << 31, 0x7FC00123, 0x7F800123),
        torch.float16: (torch.int16, 0x7C00, 0x0001, 1 << 15, 0x7E21, 0x7C21),
        torch.bfloat16: (torch.int16, 0x7F80, 0x0001, 1 << 15, 0x7FC1, 0x7F81),
    }
    for dtype, (view, inf, denorm, sign, qnan, snan) in patterns.items():
        width = torch.iinfo(view).bits
        signed = lambda u: u - (1 << width) if u >= 1 << (width - 1) else u  # noqa: E731
        cases = {  # input bits: output bits, as the claim says
            qnan: qnan, snan: snan, qnan | sign: qnan | sign,  # NaN keeps its payload (and sign)
            sign: sign,                                       # -0.0 stays -0.0
            inf: inf, denorm: denorm, 0x10 * denorm: 0x10 * denorm,  # +inf and positive denormals pass
            inf | sign: 0, denorm | sign: 0, (0x10 * denorm) | sign: 0,  # -inf and negative denormals become +0.0
        }
        x = torch.tensor([signed(u) for u in cases], dtype=view).view(dtype)
        out = torch.empty_like(x)
        for t in (x, out):
            vgpu.register(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), name="tensor")
        relu_flydsl.reset_dispatch_stats()
        try:
            relu_flydsl.relu(x, out=out)
            vgpu.check()
        finally:
            vgpu.reset()
        assert [p for p, n in relu_flydsl.dispatch_stats().items() if n] == [f"flydsl/v5/{str(dtype)[6:]}"]
        got = [u & ((1 << width) - 1) for u in out.view(view).tolist()]
        assert got == list(cases.values()), (dtype, [hex(u) for u in got], [hex(u) for u in cases.values()])
