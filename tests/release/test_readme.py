"""README.md's code blocks, extracted from README.md at collection time, so the
README cannot drift from what runs.

A block is a fenced block (``` + language). What happens to it is decided by its
language and by an optional marker, an HTML comment on the last non-blank line
before its opening fence (invisible on GitHub and the Hub):

    ```python, ```bash (sh, shell)   run, each block alone in a fresh process, from the
                                     repository root; python blocks with this test's
                                     interpreter, bash blocks with `bash -euo pipefail`
                                     and this interpreter's folder first on PATH. No
                                     network: HF_HUB_OFFLINE=1 and an empty HF cache.
    ```toml, ```json                 parsed (must be valid)
    ``` (no language), ```text       output shown in the README: not code, not run

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
                                     API run for real, only the device is simulated;
                                     FlyDSL compiles for gfx950 with Debian's lld-22
                                     (tools/toolchain.py), so warmup() really compiles.

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
        found.append((start + 1, lang, marker, "\n".join(lines[start + 1:j]) + "\n"))
        i = j + 1
    return found


BLOCKS = blocks(README.read_text())
RUNNABLE = [b for b in BLOCKS if b[1] in RUN]


def _id(block):
    return f"L{block[0]}-{block[1] or 'output'}"


def _marker(block):
    if block[2] is None:
        return None, None
    m = MARKER.match(block[2])
    assert m, f"README.md line {block[0]}: unreadable marker {block[2]!r}"
    return m.group("kind"), (m.group("reason") or "").strip()


def test_markers_are_well_placed():
    """Every marker is a known one, stands right before a fence, and a skip says why."""
    text = README.read_text()
    fence_markers = {b[0]: b[2] for b in BLOCKS if b[2]}
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if "<!--" in line and "test:" in line:
            m = MARKER.match(line.strip())
            assert m, f"README.md line {n}: marker not in the form <!-- test: KIND (REASON) -->: {line!r}"
            assert m.group("kind") in ("skip", "hub"), f"README.md line {n}: unknown marker kind {m.group('kind')!r}"
            if m.group("kind") == "skip":
                assert (m.group("reason") or "").strip(), f"README.md line {n}: a skip must give its reason"
            following = next((k for k in range(n, len(lines)) if lines[k].strip()), None)
            assert following is not None and FENCE.match(lines[following]), (
                f"README.md line {n}: a marker must stand right before a code fence")
            assert fence_markers.get(following + 1) == line.strip()


def test_every_block_has_a_known_language():
    unknown = [(b[0], b[1]) for b in BLOCKS if b[1] not in set(RUN) | PARSE | OUTPUT]
    assert not unknown, f"README.md blocks with a language this test does not handle (add it here): {unknown}"


def test_the_readme_has_runnable_blocks():
    # Guards the extraction itself: a README whose fences stopped matching would pass vacuously.
    assert len(RUNNABLE) >= 2, [(_id(b), b[2]) for b in BLOCKS]


DATA = [b for b in BLOCKS if b[1] in PARSE] or [
    pytest.param(None, marks=pytest.mark.skip(reason="README.md has no toml or json block to parse"))]


@pytest.mark.parametrize("block", DATA, ids=lambda b: _id(b) if b else "none")
def test_data_block_parses(block):
    line, lang, _, code = block
    try:
        tomllib.loads(code) if lang == "toml" else json.loads(code)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        pytest.fail(f"README.md line {line}: invalid {lang}: {e}")


def test_trust_remote_code_says_to_replace_org():
    """The first block that loads org/relu-flydsl with trust_remote_code=True tells the
    reader (in the block or the six lines before it) to replace `org`."""
    lines = README.read_text().splitlines()
    first = next((b for b in BLOCKS if "trust_remote_code=True" in b[3]), None)
    if first is None:
        pytest.skip("README.md has no block with trust_remote_code=True")
    context = "\n".join(lines[max(0, first[0] - 7):first[0] - 1]) + "\n" + first[3]
    assert re.search(r"replace\s+`?org`?", context, re.I), (
        f"README.md line {first[0]}: say next to trust_remote_code=True to replace `org` with the real owner")


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


@pytest.mark.parametrize("block", RUNNABLE, ids=_id)
def test_readme_block_runs(block, tmp_path, request):
    line, lang, _, code = block
    kind, reason = _marker(block)
    if kind == "skip":
        pytest.skip(f"README.md line {line}: {reason}")
    where = f"README.md line {line} ({lang})"
    if kind == "hub":
        assert RUN[lang] == "python", f"{where}: `hub` blocks must be python"
        cache, cwd = request.getfixturevalue("hub_dir")
        cmd = [sys.executable, "-c", HUB_PRELUDE + code.replace('device="cuda"', 'device="cpu"')]
        import toolchain

        extra = toolchain.compile_env()
    else:
        cache, cwd, extra = tmp_path / "hf_cache", ROOT, {}
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
    r = subprocess.run(cmd, cwd=cwd, env={**_env(cache), **extra}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{where} failed (exit {r.returncode}):\n{code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"


def test_the_hardware_command_prints_each_skip_reason():
    """The README's hardware-suite command, run here as printed: where the suite is skipped
    (CPU, a CUDA GPU, a ROCm GPU that is not gfx950) its output names the reason in full,
    not `SKIPPED (nee...)` nor a bare `351 skipped`."""
    import shlex

    commands = re.findall(r"`([^`]*pytest -m hardware[^`]*)`", README.read_text())
    assert commands, "README.md documents no hardware-suite command (`... pytest -m hardware ...`)"
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
