"""The compiled entry under AddressSanitizer and UndefinedBehaviorSanitizer (tools/sanitized_entry.py):
built a second time from the same source with -fsanitize=address,undefined into a copy of the
checkout, the entry's tests (sanitized_entry.tests(): those that reach every line and branch of
its C that any of them reaches) pass there with no report, and the entry they load is that build.
The same run fails with a fault injected into the C source, and its check tells an uninstrumented
entry apart. One copy of the checkout serves the module; each test builds the entry it needs.
Skipped, with the reason, where gcc has no sanitizer runtime."""

import re

import pytest
import sanitized_entry
from c_anchor import c_patch


@pytest.fixture(scope="module")
def runtimes():
    try:
        return sanitized_entry.runtimes()
    except sanitized_entry.Unavailable as e:
        pytest.skip(f"no sanitizer build here: {e}")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return tmp_path_factory.mktemp("sanitized") / "checkout"


def _show(result) -> str:
    return "\n".join(result["problems"]) + "\n--- output (end) ---\n" + result["output"][-6000:]


def test_entry_tests_pass_clean_under_sanitizers(runtimes, checkout):
    result = sanitized_entry.check(checkout)
    assert result["problems"] == [], _show(result)
    record = result["record"]
    assert record["start"]["status"]["loaded"] and record["start"]["loaded_sha256"] == result["entry"]["sha256"]
    print(f"sanitized entry: {len(sanitized_entry.candidates())} test files clean in {result['seconds']:.1f} s")


_SOURCE = sanitized_entry.ROOT / sanitized_entry.ENTRY_C
# (what each fault does, function, snippet, replacement, what the report must say)
FAULTS = {
    "heap-use-after-free": ("numel_of", "int64_t n = 1;",  # volatile: the load after free() stays
                            "volatile int64_t *cell = malloc(sizeof *cell); *cell = 1; free((void *)cell);"
                            " int64_t n = *cell;",
                            r"ERROR: AddressSanitizer: heap-use-after-free.*\n(.*\n){0,3}.*in numel_of "),
    "global-overflow-memset": ("clear_table", "memset(table, 0, sizeof table);",
                               "memset(table, 0, sizeof table + 1);",
                               r"ERROR: AddressSanitizer: global-buffer-overflow(.*\n){0,6}.*in clear_table "),
    "index-out-of-bounds": ("clear_devices", "i < DEVICES", "i <= DEVICES",
                            r"runtime error: index \d+ out of bounds for type 'Device(.*\n){0,2}.*in clear_devices "),
    "signed-overflow": ("numel_of", "n *= t->shape[d];", "n *= t->shape[d] + INT64_MAX;",
                        r"runtime error: signed integer overflow(.*\n){0,2}.*in numel_of "),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_in_the_entry_fails_the_run(runtimes, checkout, fault):
    function, old, new, report = FAULTS[fault]
    faulty = c_patch(_SOURCE.read_text(), function, old, new)  # a copy of the text; the file stays as it is
    # the clean run's own tests: each fault fires within a few calls, and the report stops the run
    result = sanitized_entry.check(checkout, source_text=faulty, timeout=300)
    assert result["returncode"] != 0 and result["reports"], _show(result)
    assert re.search(report, result["output"]), _show(result)
    assert any(p.startswith("sanitizer report:") for p in result["problems"])


def test_the_check_tells_an_uninstrumented_entry_apart(runtimes, checkout):
    """The same run with the shipped (uninstrumented) build in the copy's manifest: the check
    finds the loaded bytes are not the sanitized build's, and the binary has no ASan."""
    from flash_relu_rocm import build

    dst = checkout
    sanitized = sanitized_entry.make_copy(dst)
    plain = build.update_entry(dst / sanitized_entry.OBJECTS, dst / sanitized_entry.ENTRY_C)["entry"]
    assert plain["sha256"] != sanitized["sha256"]
    result = sanitized_entry.run(dst, runtimes, ["tests/cpu/test_compiled_entry.py::test_the_shipped_binary_is_the_manifests"])
    assert result["returncode"] == 0 and result["record"]["start"]["loaded_sha256"] == plain["sha256"], _show(result)
    found = sanitized_entry.problems(result, plain, dst)
    assert any("is not instrumented" in p for p in found), found
    assert any("libasan/libubsan not mapped" in p for p in found), found  # libubsan comes only with an instrumented entry
    assert any("not the sanitized build" in p for p in sanitized_entry.problems(result, sanitized, dst))
