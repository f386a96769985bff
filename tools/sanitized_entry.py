"""The compiled entry under AddressSanitizer and UndefinedBehaviorSanitizer.

    .venv/bin/python tools/sanitized_entry.py [pytest arguments]

copies the checkout (its files; not .git, not .venv) into a temporary folder, builds there the
entry from the same source with the same flags plus flash_relu_rocm/build.py's SANITIZE_FLAGS
(`build.update_entry(..., sanitize=True)`) into the copy's code_objects/, whose manifest.json then
lists that binary's sha256 (the loader's sha256 check runs unchanged), and runs the entry's tests
(tests(); pytest arguments replace them) in the copy with gcc's sanitizer runtimes preloaded. It
exits 0 only when they pass, no sanitizer report was printed, and the entry the tests loaded is
the sanitized binary (this module is also their pytest plugin: it records `status()`, the sha256
of the bytes loaded and the runtimes mapped). tests/release/test_sanitizers.py runs it, and shows
it failing on copies with a fault injected.

Only the entry is instrumented: CPython and torch are not, so memory the entry reads in torch's
objects is checked only where torch's allocator gave ASan's malloc its bounds. LeakSanitizer is
off: CPython and torch keep memory for the life of the process, which it reports as leaks.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY_C = Path("torch-ext") / "relu_flydsl" / "_compiled_entry.c"
OBJECTS = Path("torch-ext") / "relu_flydsl" / "code_objects"
# The entry's tests: its own, the hot path and its fallback, and every tests/*/test_entry_*.py
# (threads, devices, switches through the entry; a new one joins by its name), less LEFT_OUT:
# tests that reach no line or branch of the C that the others do not, as tools/entry_coverage.py
# counts (rerun it when the C or these tests change). The thread stress tests are most of it: one
# reaches every path they do, and under the sanitizers each takes seconds. Kept whatever coverage says:
# the allocation that restarts the table mid-call, the use-after-free window ASan is there to watch.
TESTS = ("tests/cpu/test_compiled_entry.py", "tests/vgpu/test_hot_path.py", "tests/vgpu/test_fast_fallback.py")
TESTS_GLOB = "tests/*/test_entry_*.py"
LEFT_OUT = tuple(f"tests/vgpu/test_entry_threads.py::{t}" for t in (
    "test_threads_replaying_while_the_table_restarts[vgpu-shim]",
    "test_threads_replaying_while_the_table_restarts[vgpu-empty_like]",
    "test_threads_replaying_while_the_table_restarts[noop-empty_like]")) + (
    "tests/vgpu/test_fast_fallback.py::test_fast_fallback[new_out_like_the_general_path]",
    "tests/cpu/test_compiled_entry.py::test_the_entrys_questions_get_torchs_answers[FakeTensorMode]",
    "tests/vgpu/test_entry_switches.py::test_entry_switches[canary_switch_as_the_general_path]",
    "tests/vgpu/test_entry_switches.py::test_entry_switches[kill_switch_spellings]")
# What a sanitizer prints when it finds something (UBSan: "<file>:<line>: runtime error: ...").
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "AddressSanitizer: CHECK failed",
           "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer", "ERROR: LeakSanitizer")
# Not copied: version control, the environment (linked instead), caches, build outputs.
_SKIP_TOP = {".git", ".venv", ".pytest_cache", "relu-build", "results"}
_SKIP_ANY = ("__pycache__", "*.pyc", "code_objects.tmp", "*.egg-info")
PLUGIN = "sanitized_entry"  # this module, as the child pytest's plugin (-p): tools/ is on its path
OPTION = "--sanitized-entry-record"


class Unavailable(Exception):
    """No gcc sanitizer runtime here: the reason."""


def candidates(root: Path = ROOT) -> list:
    """The test files of the entry."""
    found = sorted(str(Path(p).relative_to(root)) for p in glob.glob(str(root / TESTS_GLOB)))
    return [t for t in TESTS if (root / t).exists()] + [t for t in found if t not in TESTS]


def tests(root: Path = ROOT) -> list:
    """pytest's arguments for the run: the files, LEFT_OUT deselected."""
    return candidates(root) + [f"--deselect={t}" for t in LEFT_OUT]


def runtimes() -> dict:
    """{"asan", "ubsan", "stdcxx"}: the runtimes' paths, as gcc links them. libasan goes first in
    LD_PRELOAD (it must see malloc before anything else); libstdc++ goes with it, so ASan's
    __cxa_throw interceptor finds the real one when libtorch throws (else: "CHECK failed:
    asan_interceptors.cpp ... real___cxa_throw")."""
    cc = shutil.which("gcc")
    if cc is None:
        raise Unavailable("no gcc on PATH (the sanitized entry is built with gcc's -fsanitize)")
    found = {}
    for key, name in (("asan", "libasan.so"), ("ubsan", "libubsan.so"), ("stdcxx", "libstdc++.so.6")):
        path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True,
                              timeout=60).stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):  # gcc echoes a name it does not have
            raise Unavailable(f"gcc has no {name} (Debian: apt-get install gcc, which brings libasan8 "
                              "and libubsan1)")
        found[key] = os.path.realpath(path)
    return found


def make_copy(dst: Path, source_text: str = None) -> dict:
    """The checkout copied to `dst` (unless a copy is there) with a sanitized entry in its
    code_objects/ (built from the checkout's source, or from `source_text`, which replaces the
    copy's _compiled_entry.c); returns the manifest's entry block. Needs the checkout's code
    objects built."""
    from flash_relu_rocm import build

    dst = Path(dst)
    if not (ROOT / OBJECTS / build.MANIFEST).exists():
        raise RuntimeError(f"no {OBJECTS / build.MANIFEST}: run `.venv/bin/python -m flash_relu_rocm.build` first")
    skip_any = shutil.ignore_patterns(*_SKIP_ANY)

    def skip(folder, names):
        top = {n for n in names if n in _SKIP_TOP} if Path(folder) == ROOT else set()
        return top | set(skip_any(folder, names))

    if not (dst / OBJECTS / build.MANIFEST).exists():  # else a copy made before: only its entry changes
        shutil.copytree(ROOT, dst, ignore=skip, symlinks=True)
        if (ROOT / ".venv").exists():  # what names .venv/bin/... finds the same interpreter
            (dst / ".venv").symlink_to((ROOT / ".venv").resolve(), target_is_directory=True)
    (dst / ENTRY_C).write_text((ROOT / ENTRY_C).read_text() if source_text is None else source_text)
    # strict only for the real source: a faulty copy may well warn
    manifest = build.update_entry(dst / OBJECTS, dst / ENTRY_C, strict=source_text is None, sanitize=True)
    return manifest["entry"]


def environment(libs: dict, log_dir: Path) -> dict:
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join([libs["asan"], libs["stdcxx"], *filter(None, [env.get("LD_PRELOAD")])])
    # abort_on_error: a report stops the process (exit status 134) where it happened. The ODR
    # check and the link-order check are CPython's and torch's business, not the entry's.
    # log_path: ASan's report also lands in a file, whichever process (a test's child) it hit.
    # handle_segv/handle_sigbus=0: a crash stays a signal (a test's child that is meant to crash
    # exits as it would without ASan), and faulthandler names the test.
    env["ASAN_OPTIONS"] = ":".join(("detect_leaks=0", "abort_on_error=1", "detect_odr_violation=0",
                                    "verify_asan_link_order=0", "handle_segv=0", "handle_sigbus=0",
                                    f"log_path={log_dir}/asan"))
    # UBSan (libubsan, loaded with the entry) writes to stderr whatever log_path says: the child
    # runs with --capture=sys, so its stderr reaches the output read here.
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    return env


def run(copy: Path, libs: dict, args=None, timeout: float = 600) -> dict:
    """The tests (or pytest `args`) in the copy under the sanitizers: {"returncode", "output",
    "reports": [sanitizer report lines], "record": what the plugin recorded, or None, "seconds"}."""
    copy = Path(copy)
    log_dir = Path(tempfile.mkdtemp(prefix="sanitizer-logs-", dir=copy))
    record = copy / "sanitized-entry-record.json"
    record.unlink(missing_ok=True)  # a run of a copy made before left one
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--capture=sys", "-p", PLUGIN, f"{OPTION}={record}", *(args or tests(copy))]
    start = time.monotonic()
    # cwd: the development install gives a `-m` process the checkout it runs in, the copy
    with subprocess.Popen(cmd, cwd=copy, env=environment(libs, log_dir), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as child:
        try:
            output, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            output = child.communicate()[0] + f"\n(killed after {timeout} s)"
    seconds = time.monotonic() - start
    # The test process's own report file counts; a process a test starts answers to that test
    # (its exit status), so a child that is meant to fail is not a report here.
    for log in sorted(log_dir.iterdir()):
        own = log.name == f"asan.{child.pid}"
        output += f"\n[{log.name}]\n" + (log.read_text(errors="replace") if own else "(a test's child process)\n")
    reports = [line for line in output.splitlines() if any(r in line for r in REPORTS)]
    return {"returncode": child.returncode, "output": output, "reports": reports, "seconds": seconds,
            "record": json.loads(record.read_text()) if record.exists() else None}


def problems(result: dict, entry: dict, copy: Path) -> list:
    """Why the run does not show a clean sanitized entry: [] when it does."""
    found = []
    if result["returncode"] != 0:
        found.append(f"pytest exited with {result['returncode']}")
    found += [f"sanitizer report: {line}" for line in result["reports"][:5]]
    binary = copy / OBJECTS / entry["file"]
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(binary)], capture_output=True, text=True,
                             timeout=60).stdout.split()
    if "__asan_init" not in symbols or not any(s.startswith("__ubsan_handle_") for s in symbols):
        found.append(f"{binary.name} is not instrumented (no __asan_init / __ubsan_handle_* in nm -D)")
    record = result["record"]
    if record is None:
        found.append("the child recorded nothing (no sanitized-entry record)")
        return found
    for when in ("start", "finish"):
        seen = record[when]
        if seen["status"].get("sha256") != entry["sha256"] or seen["loaded_sha256"] != entry["sha256"]:
            found.append(f"at session {when} the loaded entry is not the sanitized build {entry['sha256'][:16]}: "
                         f"status {seen['status']}, loaded bytes {seen['loaded_sha256']}")
        if not seen["asan_mapped"] or not seen["ubsan_mapped"]:
            found.append(f"at session {when} libasan/libubsan not mapped in the child: {seen}")
    return found


def check(dst: Path, args=None, source_text: str = None, timeout: float = 600) -> dict:
    """make_copy + run + problems: the run's dict with "entry" and "problems" added."""
    libs = runtimes()
    entry = make_copy(dst, source_text)
    result = run(dst, libs, args, timeout)
    result["entry"] = entry
    result["problems"] = problems(result, entry, Path(dst))
    return result


# ---------------------------------------------------------------- the child's pytest plugin
def pytest_addoption(parser):
    parser.addoption(OPTION, help="where to write which compiled entry this process loaded (JSON)")


def _seen() -> dict:
    from relu_flydsl import _compiled_entry

    fd = _compiled_entry._memfd  # the bytes this process imported (the loader's memfd)
    loaded = None
    if fd is not None:
        with open(f"/proc/self/fd/{fd}", "rb") as f:
            loaded = hashlib.sha256(f.read()).hexdigest()
    with open("/proc/self/maps") as f:
        maps = f.read()
    return {"status": _compiled_entry.status(), "loaded_sha256": loaded,
            "asan_mapped": "/libasan.so" in maps, "ubsan_mapped": "/libubsan.so" in maps}


def pytest_sessionstart(session):
    path = session.config.getoption(OPTION)
    if path:
        session.config._sanitized_entry = {"start": _seen()}


def pytest_sessionfinish(session):
    path = session.config.getoption(OPTION)
    seen = getattr(session.config, "_sanitized_entry", None)
    if path and seen is not None:
        seen["finish"] = _seen()
        Path(path).write_text(json.dumps(seen, indent=1))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    try:
        libs = runtimes()
    except Unavailable as e:
        print(f"sanitized entry: cannot run here: {e}", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="relu-flydsl-sanitized-") as tmp:
        dst = Path(tmp) / "checkout"
        entry = make_copy(dst, None)
        print(f"sanitized entry: {entry['file']} sha256 {entry['sha256']} ({' '.join(libs.values())})", flush=True)
        result = run(dst, libs, argv or None)
        print(result["output"])
        if result["record"]:
            print(f"sanitized entry: the tests' process loaded {result['record']['start']}")
        found = problems(result, entry, dst)
    took = time.monotonic() - start
    for p in found:
        print(f"sanitized entry: FAILED: {p}")
    if not found:
        print(f"sanitized entry: clean: {len(argv or candidates())} test files passed under ASan+UBSan, the loaded "
              f"entry is the sanitized build ({took:.1f} s, tests {result['seconds']:.1f} s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
