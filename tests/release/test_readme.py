"""The code blocks of README.md and of the docs pages it leads to, extracted at collection
time, so the docs cannot drift from what runs; and the promises those pages make about
themselves (the README's first screen and length, the version they pin, their links, the
settings table, the assembly rows they quote).

The pages: README.md, docs/semantics.md, docs/serving.md, docs/verification.md,
docs/development.md, docs/releases.md. A block is a fenced block (``` + language). What
happens to it is decided by its language and by an optional marker, an HTML comment on the
last non-blank line before its opening fence (invisible on GitHub and the Hub):

    ```python, ```bash (sh, shell)   run, each block alone in a fresh process, from the
                                     repository root; python blocks with this test's
                                     interpreter, bash blocks with `bash -euo pipefail`
                                     and this interpreter's folder first on PATH. No
                                     network: HF_HUB_OFFLINE=1 and an empty HF cache.
    ```toml, ```json                 parsed (must be valid)
    ``` (no language), ```text       output shown in the page: not code, not run

    <!-- test: skip (REASON) -->     not run; reported as a pytest skip with REASON
                                     (for blocks that cannot run on a CPU machine, or
                                     are this suite itself). REASON is required.
    <!-- test: hub -->               run (python) on a simulated ROCm gfx950 machine with
                                     the current release (build.toml's version) already in an offline
                                     HF cache (laid out as tests/release/test_release_consumer.py
                                     does, from a fresh build), in a folder holding a
                                     kernels.lock that pins it; tensors stay on the CPU, so
                                     relu() takes its torch fallback (`device="cuda"` in
                                     the block becomes `device="cpu"`). For the get_kernel
                                     examples: the loader, the lock file and the package
                                     API run for real, only the device is simulated.

A bash block that runs the set-up, the suite or CI (test.sh, main.sh, tools/setup.sh,
.ci/run) must carry a skip marker: it fails without running, since running it from
here would run this suite inside itself.

A marker that is not one of these, or that does not stand right before a fence, fails
test_markers_are_well_placed. To check a draft README: RELU_FLYDSL_README=path pytest ...
"""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = Path(os.environ.get("RELU_FLYDSL_README", ROOT / "README.md"))
DOCS = ("docs/semantics.md", "docs/serving.md", "docs/verification.md", "docs/development.md", "docs/releases.md")
PAGES = {"README.md": README, **{name: ROOT / name for name in DOCS}}
VERSION = tomllib.loads((ROOT / "build.toml").read_text())["general"]["version"]
README_MAX_LINES = 250
FIRST_SCREEN = 45  # lines: what a reader sees before scrolling, the quickstart included

RUN = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
PARSE = {"toml", "json"}
OUTPUT = {"", "text"}
MARKER = re.compile(r"^<!--\s*test:\s*(?P<kind>[a-z-]+)\s*(?:\((?P<reason>.*)\))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)\s*$")


def blocks(text):
    """[(line of the opening fence, language, marker line or None, code)]."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, fence, lang = i, m.group("fence"), m.group("lang").lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and set(lines[j].strip()) <= {fence[0]}):
            j += 1
        prev = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker = prev if prev.startswith("<!--") and "test:" in prev else None
        indent = len(m.group("indent"))
        code = [line[indent:] if line[:indent].isspace() else line for line in lines[start + 1:j]]
        found.append((start + 1, lang, marker, "\n".join(code) + "\n"))
        i = j + 1
    return found


TEXTS = {name: path.read_text() for name, path in PAGES.items()}
BLOCKS = [(name, *b) for name, text in TEXTS.items() for b in blocks(text)]
RUNNABLE = [b for b in BLOCKS if b[2] in RUN]


def _id(block):
    return f"{block[0]}:L{block[1]}-{block[2] or 'output'}"


def _marker(block):
    if block[3] is None:
        return None, None
    m = MARKER.match(block[3])
    assert m, f"{block[0]} line {block[1]}: unreadable marker {block[3]!r}"
    return m.group("kind"), (m.group("reason") or "").strip()


@pytest.mark.parametrize("page", PAGES)
def test_markers_are_well_placed(page):
    """Every marker is a known one, stands right before a fence, and a skip says why."""
    lines = TEXTS[page].splitlines()
    fence_markers = {b[1]: b[3] for b in BLOCKS if b[0] == page and b[3]}
    for n, line in enumerate(lines, 1):
        if "<!--" in line and "test:" in line:
            m = MARKER.match(line.strip())
            assert m, f"{page} line {n}: marker not in the form <!-- test: KIND (REASON) -->: {line!r}"
            assert m.group("kind") in ("skip", "hub"), f"{page} line {n}: unknown marker kind {m.group('kind')!r}"
            if m.group("kind") == "skip":
                assert (m.group("reason") or "").strip(), f"{page} line {n}: a skip must give its reason"
            following = next((k for k in range(n, len(lines)) if lines[k].strip()), None)
            assert following is not None and FENCE.match(lines[following]), (
                f"{page} line {n}: a marker must stand right before a code fence")
            assert fence_markers.get(following + 1) == line.strip()


def test_every_block_has_a_known_language():
    unknown = [_id(b) for b in BLOCKS if b[2] not in set(RUN) | PARSE | OUTPUT]
    assert not unknown, f"blocks with a language this test does not handle (add it here): {unknown}"


def test_the_readme_has_runnable_blocks():
    # Guards the extraction itself: a README whose fences stopped matching would pass vacuously.
    run = [b for b in RUNNABLE if b[0] == "README.md" and _marker(b)[0] != "skip"]
    assert len(run) >= 2, [(_id(b), b[3]) for b in BLOCKS if b[0] == "README.md"]


DATA = [b for b in BLOCKS if b[2] in PARSE]


@pytest.mark.parametrize("block", DATA, ids=_id)
def test_data_block_parses(block):
    page, line, lang, _, code = block
    try:
        tomllib.loads(code) if lang == "toml" else json.loads(code)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        pytest.fail(f"{page} line {line}: invalid {lang}: {e}")


def test_trust_remote_code_says_to_replace_org():
    """The README's first block that loads org/relu-flydsl with trust_remote_code=True tells the
    reader (in the block or the six lines before it) to replace `org`."""
    lines = TEXTS["README.md"].splitlines()
    first = next((b for b in BLOCKS if b[0] == "README.md" and "trust_remote_code=True" in b[4]), None)
    if first is None:
        pytest.skip("README.md has no block with trust_remote_code=True")
    context = "\n".join(lines[max(0, first[1] - 7):first[1] - 1]) + "\n" + first[4]
    assert re.search(r"replace\s+`?org`?", context, re.I), (
        f"README.md line {first[1]}: say next to trust_remote_code=True to replace `org` with the real owner")


# ---- what the README promises about itself ---------------------------------------------
def test_the_readme_is_read_in_two_minutes():
    n = len(TEXTS["README.md"].splitlines())
    assert n <= README_MAX_LINES, (f"README.md has {n} lines (at most {README_MAX_LINES}): move the detail to a "
                                   f"docs/ page and link it")


def test_the_first_screen_answers_the_first_questions():
    """What it is, its status, the expected gain (the reference post's, named), the quickstart
    at the current version, and how to check it works: all before the reader scrolls."""
    screen = "\n".join(TEXTS["README.md"].splitlines()[:FIRST_SCREEN])
    flat = " ".join(screen.split())
    wanted = {
        "what it is (gfx950)": "gfx950" in screen,
        "its status: checked on an emulated gfx950": re.search(r"emulated gfx950", flat) is not None,
        "its status: no MI350X measurement yet": re.search(r"no MI350X[^.]*(?:measured|yet)", flat) is not None,
        "the reference post, by title": "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels" in flat,
        "the expected gain, named as the post's": re.search(r"reference post's[^.]*figures", flat) is not None,
        f"the quickstart at version {VERSION}":
            re.search(rf'get_kernel\("org/relu-flydsl", version={VERSION}\b', screen) is not None,
        "the health check status()": "status()" in screen,
        "explain(x)": "explain(x" in screen,
        "the command-line check": "-m relu_flydsl" in screen,
        "torch.compile's default": "torch.compile" in screen,
    }
    missing = [what for what, ok in wanted.items() if not ok]
    assert not missing, f"README.md's first {FIRST_SCREEN} lines do not say: {missing}"


PINS = (
    r'get_kernel\("org/relu-flydsl",[^)\n]*?version=(\d+)',
    r'"version": (\d+)',
    r'"org/relu-flydsl" = (\d+)',
    r"--revision v(\d+)",
    r'revision="v(\d+)"',
    r"--version (\d+)",
    r"verify-signature\s+org/relu-flydsl (\d+)",
    r"relu-flydsl-v(\d+)",
    r"refs/v(\d+)",                            # the cache's ref the lookup reads
    r"resolves `?v(\d+)",                      # what an online get_kernel(version=N) resolves
    r"Version (\d+) of 'org/relu-flydsl'",     # the offline lookup's error, quoted
)


@pytest.mark.parametrize("page", PAGES)
def test_examples_pin_the_current_version(page):
    """Every example that loads, locks, downloads or benchmarks a release names the current
    one (build.toml's version): an upgrade cannot leave an example on the previous release."""
    text = re.sub(r"\s+", " ", TEXTS[page])
    found = {m.group(0): int(m.group(1)) for pattern in PINS for m in re.finditer(pattern, text)}
    stale = {example: v for example, v in found.items() if v != VERSION}
    assert not stale, f"{page}: examples for another version than build.toml's {VERSION}: {stale}"
    if page == "README.md":
        assert found, "README.md loads no release (get_kernel(..., version=N))"


# ---- links ---------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m.group(1).replace("`", "")) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def _markdown_files():
    skip = {".git", ".venv", "relu-build", "results", "build", "node_modules"}
    return [p for p in sorted(ROOT.rglob("*.md")) if not skip & set(p.relative_to(ROOT).parts[:-1])]


def test_the_markdown_links_resolve():
    """Every relative link of every Markdown file in the repository names a file that exists;
    a link from the README or its docs pages into a Markdown file names a heading that exists."""
    ours = {path.resolve() for path in PAGES.values()}
    problems = []
    for page in _markdown_files():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page.resolve()
            where = f"{page.relative_to(ROOT)} -> {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
            elif anchor and page.resolve() in ours and dest.suffix == ".md" and anchor not in _anchors(dest):
                problems.append(f"{where}: no such heading in {dest.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A `b` c\n\n[x](p.md#a-b-c) [y](p.md#nope)\n")
    assert _anchors(page) == {"a-b-c"}
    assert [t for t in LINK.findall(page.read_text()) if t.partition("#")[2] not in _anchors(page)] == ["p.md#nope"]


# ---- the settings table (docs/serving.md) ------------------------------------------------
PACKAGE = ROOT / "torch-ext" / "relu_flydsl"
# Where each variable is read decides when: the dispatch state compares them on every call, the
# compiled entry reads its switch once at import, torch.compile's tracing reads its own.
WHEN = {"_state.py": "every call", "_compiled_entry.py": "at import", "_relu.py": "when torch.compile traces a graph"}


def settings_table():
    """[(variable, values, when read, what it does)] of docs/serving.md's "## Settings" table."""
    text = TEXTS["docs/serving.md"]
    assert "\n## Settings\n" in text, "docs/serving.md has no '## Settings' section"
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header == ["variable", "values", "when read", "what it does"], header
    return [tuple(c.strip() for c in row.strip().strip("|").split("|")) for row in rows[2:]]


def read_variables():
    """{variable: the file that reads it} for every RELU_FLYDSL_* variable the package reads
    (os.environ.get of a constant naming it)."""
    found, texts = {}, {path.name: path.read_text() for path in sorted(PACKAGE.glob("*.py"))}
    names = {}  # a constant may be defined in one module (_state.py) and read in another
    for text in texts.values():
        names.update(re.findall(r'^(ENV_\w+)\s*=\s*"(RELU_FLYDSL_\w+)"', text, re.M))
    for name, text in texts.items():
        for const in re.findall(r"os\.environ\.get\((ENV_\w+)", text):
            if const in names:
                found[names[const]] = name
    return found


def test_the_settings_table_lists_every_variable_and_when_it_is_read():
    table = {row[0].strip("`"): row for row in settings_table()}
    read = read_variables()
    assert len(read) >= 5, read  # guards the scan
    assert set(table) == set(read), (f"docs/serving.md's settings table lists {sorted(table)}; "
                                     f"the package reads {sorted(read)}")
    wrong = {name: (table[name][2], WHEN[file]) for name, file in read.items()
             if not table[name][2].startswith(WHEN[file])}
    assert not wrong, f"'when read' (table, where the package reads it): {wrong}"


def _plain(cell):
    return " ".join(str(cell).replace("`", "").split()).lower()


def test_the_settings_table_is_the_packages_list():
    """The table and relu_flydsl._state.SETTINGS (what status() reports) say the same."""
    import relu_flydsl._state as state

    settings = state.SETTINGS
    table = [tuple(_plain(c) for c in row) for row in settings_table()]
    code = [tuple(_plain(c) for c in row) for row in settings]
    expected = "\n".join("| " + " | ".join(f"`{c}`" if i == 0 else str(c) for i, c in enumerate(row)) + " |"
                         for row in settings)
    assert table == code, f"docs/serving.md's settings rows differ from _state.SETTINGS; its rows:\n{expected}"


# ---- the assembly rows docs/verification.md quotes ----------------------------------------
def test_the_quoted_isa_rows_are_the_tools_output():
    import toolchain

    try:
        toolchain.find_tool("llvm-objdump")
    except Exception as e:  # noqa: BLE001 - whatever says the tool is missing
        pytest.skip(f"no LLVM 22 llvm-objdump (tools/isa_report.py disassembles with it): {e}")
    quoted = [b for b in BLOCKS if b[0] == "docs/verification.md" and b[2] == "text" and "relu VALU/16B" in b[4]]
    assert len(quoted) == 1, "docs/verification.md quotes no tools/isa_report.py table"
    r = subprocess.run([sys.executable, "tools/isa_report.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = {" ".join(line.split()) for line in r.stdout.splitlines()}
    rows = [line for line in quoted[0][4].splitlines() if line.strip()]
    assert len(rows) >= 2
    differ = [line for line in rows if " ".join(line.split()) not in out]
    assert not differ, f"docs/verification.md rows not in tools/isa_report.py's output:\n" + "\n".join(differ)


# ---- running the blocks ---------------------------------------------------------------
@pytest.fixture(scope="module")
def hub_dir(tmp_path_factory):
    """An offline HF cache holding the current release (from a fresh build) and a folder with
    a kernels.lock pinning it."""
    import build_variant
    import release
    from test_release_consumer import _lockfile, lay_out_cache

    base = tmp_path_factory.mktemp("readme_hub")
    out = base / "relu-build"
    build_variant.build(out)
    manifest = release.manifest_for(out)
    cache = base / "hf_cache"
    _, commit = lay_out_cache(cache, out, manifest)
    work = base / "work"
    work.mkdir()
    _lockfile(work / "kernels.lock", commit)
    return cache, work


# Run before a `hub` block: what kernels' loader reads to pick the torch-rocm build and
# check its arch (as tests/release/test_release_consumer.py), and no sockets.
HUB_PRELUDE = """
import socket as _socket, types as _types, torch
torch.version.hip = "7.0.51831"
torch.version.cuda = None  # kernels reads torch.version.cuda before hip: a CUDA build must not show
torch.cuda.is_available = lambda: True
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_properties = lambda index=0: _types.SimpleNamespace(gcnArchName="gfx950:sramecc+:xnack-")
def _no_network(self, *args, **kwargs):
    raise AssertionError(f"README block tried the network: {args}")
_socket.socket.connect = _no_network
"""


def _env(cache):
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_KERNELS", "KERNELS_CACHE", "HF_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf_home"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    return env


def run_block(block, tmp_path, hub=None):
    """Run one block as the module docstring says; hub: (cache, folder) for `hub` blocks."""
    page, line, lang, _, code = block
    kind, reason = _marker(block)
    if kind == "skip":
        pytest.skip(f"{page} line {line}: {reason}")
    where = f"{page} line {line} ({lang})"
    if kind == "hub":
        assert RUN[lang] == "python", f"{where}: `hub` blocks must be python"
        cache, cwd = hub()
        cmd = [sys.executable, "-c", HUB_PRELUDE + code.replace('device="cuda"', 'device="cpu"')]
    else:
        cache, cwd = tmp_path / "hf_cache", ROOT
        cache.mkdir()
        if RUN[lang] == "python":
            cmd = [sys.executable, "-c", code]
        else:
            itself = [c for c in ("test.sh", "main.sh", "tools/setup.sh", ".ci/run") if c in code]
            assert not itself, (f"{where} runs {', '.join(itself)}: not run from inside the suite; "
                                "mark it <!-- test: skip (REASON) -->")
            if ".venv/" in code and not (ROOT / ".venv" / "bin" / "python").exists():
                pytest.skip(f"{where} uses .venv, which is not made in this checkout (bash tools/setup.sh makes it)")
            cmd = ["bash", "-euo", "pipefail", "-c", code]
    r = subprocess.run(cmd, cwd=cwd, env=_env(cache), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{where} failed (exit {r.returncode}):\n{code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"


@pytest.mark.parametrize("block", RUNNABLE, ids=_id)
def test_block_runs(block, tmp_path, request):
    run_block(block, tmp_path, hub=lambda: request.getfixturevalue("hub_dir"))


@pytest.mark.parametrize("code, lang", [("raise SystemExit(3)", "python"), ("exit 3", "bash")])
def test_a_broken_block_fails(code, lang, tmp_path):
    """The runner itself: a block that fails makes its test fail."""
    (block,) = [("p.md", *b) for b in blocks(f"x\n\n```{lang}\n{code}\n```\n")]
    with pytest.raises(AssertionError, match="exit 3"):
        run_block(block, tmp_path)


def test_the_hardware_command_prints_each_skip_reason():
    """The hardware-suite command the docs give, run here as printed: where the suite is skipped
    (CPU, a CUDA GPU, a ROCm GPU that is not gfx950) its output names the reason in full,
    not `SKIPPED (nee...)` nor a bare `351 skipped`."""
    import shlex

    text = TEXTS["README.md"] + TEXTS["docs/verification.md"]
    commands = re.findall(r"`([^`]*pytest -m hardware[^`]*)`", text)
    assert commands, "README.md and docs/verification.md document no hardware-suite command (`... pytest -m hardware ...`)"
    import test_hardware

    if test_hardware.DEVICE is not None:
        pytest.skip("a gfx950 is present: the hardware suite runs here instead of being skipped")
    for command in sorted(set(commands)):
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/python", command
        r = subprocess.run([sys.executable, *argv[1:], "-p", "no:cacheprovider"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"`{command}` exited {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-1000:]}"
        reason = f"needs a gfx950 GPU (MI350X/MI355X): {test_hardware.WHY}"
        assert re.search(r"SKIPPED \[\d+\] tests/hardware/test_hardware\.py:\d+: " + re.escape(reason), r.stdout), (
            f"`{command}` does not print why the hardware tests were skipped ({reason!r}):\n{r.stdout[-1500:]}")
