"""Every command the tools print as a hint, and every command line of README.md and of the
docs pages for a checkout, works when pasted into a fresh shell in the repository root.

Where the hints come from:
  - the string literals of the repository's Python sources (messages, and the module
    docstrings that each tool's --help prints), outside tests/;
  - the `echo`/`printf` lines of its shell scripts;
  - results/nogpu.json, the no-GPU report `bash main.sh` writes (CI runs main.sh before
    this suite), whose sections quote the commands they ran;
  - README.md and DOC_PAGES (the docs pages about a checkout; docs/releases.md speaks to a
    serving machine without one, and tests/release/test_release_tool.py checks its kernels
    and hf commands against the CLI): their bash blocks and their inline `code` spans.
A hint is a command form: `python ... X.py`, `python -m MOD`, `bash X.sh`, `kernels SUB`,
`hf SUB`, each optionally under `.venv/bin/`.

How each form is checked, from `env -i` (a fresh shell: the system PATH, no .venv on it,
like a new terminal on stock Debian, which has `python3` but no `python`):
  - the program must be `.venv/bin/...` or `bash` (the README's rule: commands run in
    .venv; bare `python`, `pytest`, `kernels` are not on a fresh shell's PATH), except the
    package's own command line, `python -m relu_flydsl ...` (INSTALLED): it addresses the
    interpreter that has the package installed (a serving machine's), and is checked with
    this checkout's (`.venv/bin/python -m relu_flydsl --help`, the development install);
  - python scripts and modules, kernels and hf subcommands run with `--help`: exit 0;
  - `bash X` is syntax-checked (`bash -n X`: the file exists and parses). Running them
    would run the set-up, the suite or CI from inside the suite.

A `kernels` command of these pages is also checked against the installed CLI: its
subcommand exists and every option it passes is one that subcommand's --help lists.
"""

import ast
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_PAGES = ("README.md", "docs/semantics.md", "docs/serving.md", "docs/verification.md", "docs/development.md")
SKIP_DIRS = {".git", ".venv", "tests", "releases", "results", "relu-build", "build", "__pycache__"}

KERNELS_SUBS = ("check", "download", "info", "versions", "lock", "benchmark", "verify-signature")
HF_SUBS = ("download", "upload", "auth", "cache", "repo", "env", "version")
PROGRAM = r"(?:\.venv/bin/)?(?:python3?(?:\.\d+)?|pytest|kernels|hf|bash|sh)"
# A command form: a program and what makes it a command rather than prose.
COMMAND = re.compile(
    rf"(?<![\w./-])(?P<prog>{PROGRAM})[ \t]+"
    r"(?P<target>-m[ \t]+[\w.]+|[\w./-]+\.(?:py|sh)\b|\.ci/run\b|"
    rf"(?:{'|'.join(KERNELS_SUBS + HF_SUBS)})\b)"
    r"(?P<rest>[^\n`\]\"'|;)]*)"
)
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Forms that name the installed package, run by whichever interpreter has it: checked with .venv's.
INSTALLED = {"-m relu_flydsl"}


def installed_form(form):
    prog, target = form.split(" ", 1)
    return prog in ("python", "python3") and target in INSTALLED


def _python_strings(path):
    """(line, text) of every string literal, f-strings' literal parts included."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _shell_messages(path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if re.match(r"\s*(?:.*[;&|]\s*)?(?:echo|printf)\b", line):
            yield n, line


def _json_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


def _readme_command_text():
    """(page, line, text) of the pages' bash-block lines and inline code spans."""
    for page in DOC_PAGES:
        in_fence = in_bash = False
        for n, line in enumerate((ROOT / page).read_text().splitlines(), 1):
            fence = re.match(r"\s{0,3}```(\w*)", line)
            if fence:
                in_fence = not in_fence
                in_bash = in_fence and fence.group(1) in ("bash", "sh", "shell")
                continue
            if in_bash:
                yield page, n, line.split("#", 1)[0]
            elif not in_fence:
                for span in re.findall(r"``?([^`]+)``?", line):
                    yield page, n, span


def _is_kernels_prose(prog, target, rest):
    # "kernels benchmark workloads", "kernels lock refuses ...": prose, not a command,
    # when the program is bare and words, not arguments, follow.
    if prog not in ("kernels", "hf"):
        return False
    first = rest.split()[0] if rest.split() else ""
    return not first or not re.match(r"^(?:[./-]|org/|\w+/\w)", first)


def found_hints():
    """{command form: [where it is printed]}."""
    hints = {}

    def add(where, text, line=None):
        for m in COMMAND.finditer(text):
            prog, target, rest = m.group("prog"), " ".join(m.group("target").split()), m.group("rest")
            if _is_kernels_prose(prog, target, rest):
                continue
            at = where if line is None else f"{where}:{line + text.count(chr(10), 0, m.start())}"
            hints.setdefault(f"{prog} {target}", []).append(at)

    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if not path.is_file() or SKIP_DIRS & set(rel.parts[:-1]):
            continue
        if path.suffix == ".py":
            for line, text in _python_strings(path):
                add(str(rel), text, line)
        elif path.suffix == ".sh" or str(rel) == ".ci/run":
            for line, text in _shell_messages(path):
                add(str(rel), text, line)
    report = ROOT / "results" / "nogpu.json"
    if report.exists():
        for text in _json_strings(json.loads(report.read_text())):
            add("results/nogpu.json", text)
    for page, line, text in _readme_command_text():
        add(page, text, line)
    return hints


HINTS = found_hints()


def fresh_shell(command, timeout=300):
    env = {"PATH": FRESH_PATH, "HOME": str(Path.home()), "LANG": "C.UTF-8", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "-c", command],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def check_form(form):
    """The command that checks `form` ("prog target"), as typed in a fresh shell."""
    prog, target = form.split(" ", 1)
    if prog.endswith(("bash", "sh")):
        return f"{prog} -n {shlex.quote(target)}"
    if installed_form(form):
        prog = ".venv/bin/python"
    return f"{prog} {target} --help"


def test_the_scan_finds_hints():
    """Guards the scanner: without these it would pass by finding nothing."""
    assert "bash main.sh" in HINTS, sorted(HINTS)
    assert "python -m relu_flydsl" in HINTS, sorted(HINTS)  # the installed package's check, in the README
    assert sum(f.startswith(".venv/bin/python ") for f in HINTS) >= 5, sorted(HINTS)
    assert any(f.startswith(".venv/bin/kernels ") for f in HINTS), sorted(HINTS)
    sources = {where.split(":")[0] for wheres in HINTS.values() for where in wheres}
    assert "README.md" in sources and any(s.endswith(".py") for s in sources), sources


def test_the_installed_package_exception_is_narrow():
    assert installed_form("python -m relu_flydsl") and installed_form("python3 -m relu_flydsl")
    assert check_form("python -m relu_flydsl") == ".venv/bin/python -m relu_flydsl --help"
    for form in ("python tools/release.py", "python -m benchmarks.ladder", "pytest -m hardware", "kernels benchmark"):
        assert not installed_form(form), form


def test_the_no_gpu_report_was_scanned():
    if not (ROOT / "results" / "nogpu.json").exists():
        pytest.skip("results/nogpu.json not written in this checkout (bash main.sh writes it; CI runs main.sh first)")
    assert any("results/nogpu.json" in where for wheres in HINTS.values() for where in wheres)


@pytest.mark.parametrize("form", sorted(HINTS))
def test_hint_works_in_a_fresh_shell(form):
    where = ", ".join(sorted(set(HINTS[form]))[:6])
    prog = form.split(" ", 1)[0]
    assert prog.startswith(".venv/bin/") or prog == "bash" or installed_form(form), (
        f"`{form}` (printed at {where}) does not run from a fresh shell: `{prog}` is not on its PATH "
        f"(stock Debian has no `python`); write `.venv/bin/{prog.rsplit('/', 1)[-1]}` or `bash`")
    command = check_form(form)
    r = fresh_shell(command)
    assert r.returncode == 0, (f"`{command}` (the form printed at {where}) exited {r.returncode} in a fresh shell "
                               f"in the repository root:\n{(r.stderr or r.stdout)[-1500:]}")


# ---- README.md's kernels commands against the installed CLI -------------------------
def readme_kernels_commands():
    found = []
    for page, line, text in _readme_command_text():
        for m in re.finditer(rf"(?<![\w./-])(?:\.venv/bin/)?kernels[ \t]+(?P<sub>{'|'.join(KERNELS_SUBS)}|[a-z][\w-]*)"
                             r"(?P<args>(?:[ \t]+[^\s`#]+)*)", text):
            args = m.group("args").split()
            if not args or not re.match(r"^(?:[./-]|org/|\w+/\w)", args[0]):
                continue  # a heading or prose ("kernels benchmark workloads", "kernels executed: 68/68")
            found.append((f"{page}:{line}", m.group("sub"), args))
    return found


KERNELS_COMMANDS = readme_kernels_commands()


def test_the_readme_documents_kernels_commands():
    assert len(KERNELS_COMMANDS) >= 2, KERNELS_COMMANDS


@pytest.fixture(scope="module")
def kernels_help():
    cache = {}

    def get(sub):
        if sub not in cache:
            cache[sub] = fresh_shell(f".venv/bin/kernels {shlex.quote(sub)} --help", timeout=120)
        return cache[sub]

    return get


@pytest.mark.parametrize("line,sub,args", KERNELS_COMMANDS, ids=[f"{c[0]}-{c[1]}" for c in KERNELS_COMMANDS])
def test_readme_kernels_command_matches_the_cli(line, sub, args, kernels_help):
    r = kernels_help(sub)
    assert r.returncode == 0, f"{line}: `kernels {sub}` is not a subcommand of the installed kernels:\n{r.stderr[-800:]}"
    options = set(re.findall(r"(?<![\w-])(--?[\w][\w-]*)", r.stdout))
    unknown = [a.split("=", 1)[0] for a in args if a.startswith("-") and a.split("=", 1)[0] not in options]
    assert not unknown, f"{line}: `kernels {sub}` has no option {unknown} (its --help lists {sorted(options)})"
