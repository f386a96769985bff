"""Mutants of the compiled entry (_compiled_entry.c, _compiled_entry.py): torch's contracts, layouts.

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)

import test_entry_contracts
import test_entry_memory
import test_entry_rules

_C, _PY = "_compiled_entry.c", "_compiled_entry.py"


def _m(name, why, file, function, old, new, *kill):
    return Mutant(name, why, ((file, function, old, new),), kill)


# libtorch's answers are checked against torch's before the entry loads, which refuses a mutated
# torch_decides: these mutants skip that check too (as mutation_support's guard mutants do).
_ANSWERS_UNCHECKED = (_PY, "_check_answers", "got != want", "False")
_X_STORAGE = 'if (is_zero(xt) || is_functional(xt)) return "x has no memory of its own";'
_OUT_STORAGE = 'if (is_zero(yt) || is_functional(yt)) return "out has no memory of its own";'


def _unasked(name, why, *patches):
    """A mutant of torch_decides' no-storage rule (with other patches): killed by no_memory_on_the_entry."""
    return Mutant(name, why, tuple(patches) + (_ANSWERS_UNCHECKED,), ("no_memory_on_the_entry",))


MUTANTS = (
    # version counters
    _m("entry-version-unbumped", "compiled entry: out's version counter not bumped after the kernel wrote it",
       _C, "serve", "if (!fresh) bump_version(tensor_of(out));", "", "entry_bumps_versions_as_torch"),
    _m("entry-fresh-output-bumped", "compiled entry: relu(x)'s new output bumped too (torch.relu's starts at 0)",
       _C, "serve", "if (!fresh) bump_version(tensor_of(out));", "bump_version(tensor_of(out));",
       "entry_bumps_versions_as_torch"),
    _m("entry-fallback-bumps-again", "compiled entry: out bumped after torch's fallback, which bumps it itself",
       _C, "fallback", "r = out;", "r = out; bump_version(tensor_of(out));", "entry_fallback_bumps_once"),
    _m("entry-bumped-on-success-only", "compiled entry: out's version not bumped after a failed launch (it may "
       "have written part of out)", _C, "serve", "if (!fresh) bump_version(tensor_of(out));",
       "if (!fresh && !err) bump_version(tensor_of(out));", "entry_failed_launch_bumps_out"),
    # memory that is not there
    _unasked("entry-no-storage-x-unasked", "compiled entry: a ZeroTensor or functional x not left to the general "
             "path (a view of one launched at its offset from NULL)", (_C, "torch_decides", _X_STORAGE, "")),
    _unasked("entry-no-storage-out-unasked", "compiled entry: a ZeroTensor or functional out not left to the general "
             "path (a view of one written at its offset from NULL)", (_C, "torch_decides", _OUT_STORAGE, "")),
    # the NULL check behind it: what no-storage does not know (here ZeroTensors and functional tensors, unasked)
    _unasked("entry-null-x-launched", "compiled entry: x with a NULL data pointer launched",
             (_C, "torch_decides", _X_STORAGE, ""), (_C, "serve", "|| !xp ||", "||")),
    _unasked("entry-null-out-launched", "compiled entry: out with a NULL data pointer launched",
             (_C, "torch_decides", _OUT_STORAGE, ""), (_C, "serve", "|| (!yp && out != Py_None)", "")),
    _m("entry-misaligned-entry-added", "add(): an entry for pointers not aligned to the element size made ready",
       _C, "add", "|| ((v[4] | v[5]) & (v[2] / 8 - 1))", "", "no_memory_on_the_entry"),
    # out's device, the settings in flight, unload()
    _m("entry-out-device-type-unchecked", "compiled entry: out's device compared by index, not type (a host out)",
       _C, "serve", "if (yt.device.device_type != xt.device.device_type) goto general;", "", "out_on_the_host"),
    _m("entry-settings-not-read-before-launch", "compiled entry: the settings not read again after the allocation",
       _C, "serve", "if ((python_ran && !env_current()) || seen != generation) { Py_DecRef(out); goto undecided; }", "",
       "settings_read_again_before_the_launch"),
    _m("entry-generation-unchecked", "compiled entry: a refresh by another call during the allocation not seen",
       _C, "serve", "|| seen != generation", "", "settings_read_again_before_the_launch"),
    _m("entry-env-not-read-before-launch", "compiled entry: the environment not read again before the launch",
       _C, "serve", "python_ran && !env_current()", "0", "settings_read_again_after_a_callback"),
    _m("entry-unload-counted-disabled", "unload(): a call in flight counted under the kill switch",
       _PY, "unload", "_module.clear(STATE.env, STATE.settings.disabled, 1)", "_module.clear(STATE.env, True, 1)",
       "unload_in_flight"),
    _m("entry-unload-devices-kept", "unload(): status() keeps the devices the entry served",
       _PY, "unload", "devices.clear()", "pass", "unload_in_flight"),
    _m("entry-restore-failure-swallowed", "compiled entry: a failed switch back to the caller's device not raised",
       _C, "serve", "if (restore_error) {", "if (0) {", "entry_failed_restore"),
    # the free-threading gate, the probes
    _m("entry-free-threading-by-gil-state", "gate: a free-threaded build recognised by the GIL's state, not its build",
       _PY, "_why_not_here", "sysconfig.get_config_var('Py_GIL_DISABLED')",
       "getattr(sys, '_is_gil_enabled', lambda: True)() is False", "free_threaded_build_not_loaded"),
    _m("entry-bump-unprobed", "load: bump_version trusted without comparing it with torch's in-place op",
       _PY, "_check_bump", "moved[0] != moved[1]", "False", "bump_version_checked_before_load"),
    _m("entry-shim-unprobed", "allocation: torch's C shim and THPVariable_Wrap used without their probe",
       _PY, "_allocate_with", "why_not = _allocation_differs(module)", "why_not = None", "shim_checked_before_use"),
    _m("entry-layer-stack-convention-unprobed", "queries(): getDynamicLayerStack's return convention not probed",
       _C, "queries", "if (((void *(*)(void *))p[1])(scratch) == (void *)scratch) {", "if (0) {",
       "layer_stack_convention_checked"),
    # the C error paths
    _m("fallback-counter-leaked", "compiled entry: fallback() keeps its counter reference when an allocation fails",
       _C, "fallback", "Py_XDECREF(kw); Py_DecRef(hit); return NULL;", "Py_XDECREF(kw); return NULL;",
       "fallback_counter_on_failed_allocations"),
    _m("entry-clear-truth-unchecked", "clear(): PyObject_IsTrue's -1 not checked", _C, "clear",
       "if (off < 0) return NULL;", "", "truth_errors_raised"),
    _m("entry-device-truth-unchecked", "device(): PyObject_IsTrue's -1 not checked", _C, "device",
       "if (gfx950 < 0) return NULL;", "", "truth_errors_raised"),
    # the null stream, relu(x)'s output, the stand-down warning
    _m("entry-null-stream-config-from-slot", "compiled entry: hipDrvLaunchKernelEx given the table slot's config",
       _C, "serve", "launch_ex(&config, function, params, NULL)", "launch_ex(&found->config, function, params, NULL)",
       "null_stream_launch_from_the_copy"),
    _m("entry-null-stream-query-trusted", "device(): a stream query answering the null stream taken as torch's",
       _C, "device", "if ((uint64_t)(uintptr_t)s != torch_stream)",
       "if (s != NULL && (uint64_t)(uintptr_t)s != torch_stream)", "null_stream_query_not_trusted"),
    _m("entry-misaligned-output-leaked", "compiled entry: relu(x)'s misaligned output kept when the call goes back",
       _C, "serve", "if (yp & 15) { Py_DecRef(out);", "if (yp & 15) {", "misaligned_fresh_output_freed"),
    _m("entry-stand-down-warned-per-reason", "learn(): the stand-down warning keyed by the reason only",
       _PY, "_stand_down", "('entry device', index, why)", "('entry device', why)", "stand_down_warned_per_device"),
    # dense layouts
    _m("entry-span-without-strides", "compiled entry: a dense x and out of other strides replayed as one span",
       _C, "dense_spans", "if (y != NULL && (!same_shape(x, y) || !same_strides(x, y))) return;", "",
       "dense_noncontiguous_x"),
    _m("entry-span-not-dense", "compiled entry: x and out of equal strides replayed as one span, dense or not",
       _C, "dense_spans", "if (!dense(x)) return;", "", "dense_layouts_replayed"),
    _m("entry-new-output-layouts-left", "compiled entry: relu(x) of a dense non-contiguous x left to the general path",
       _C, "serve", "dense_spans(&xt, NULL, x_span, y_span);", "", "dense_layouts_replayed"),
    _m("entry-dense-unsorted", "compiled entry: dense() takes the dimensions in their order, not by stride",
       _C, "dense", "while (i > 0 && t->strides[order[i - 1]] > t->strides[d]) {", "while (0) {",
       "dense_layouts_replayed"),
    _m("entry-same-address-other-strides", "compiled entry: out at x's address in other strides taken as in place",
       _C, "serve", "if (xp == yp && !same_strides(&xs, &ys)) {", "if (0) {", "same_address_other_strides"),
    # rules of docs/compiled-entry.md no other scenario drove (tests/vgpu/test_entry_rules.py)
    _m("entry-arch-out-device-unchecked", "compiled entry: out on another device than an other-arch x served by torch",
       _C, "serve", "if (out != Py_None && device_of(&yt) != device) goto general; "
       "return fallback(x, out, disabled ? disabled_hit : devices[device].arch_hit);",
       "return fallback(x, out, disabled ? disabled_hit : devices[device].arch_hit);", "out_device_on_another_arch"),
    _m("entry-allocation-error-to-general", "compiled entry: relu(x)'s allocation error swallowed (the general path retries)",
       _C, "serve", "if (out == NULL) goto failed;", "if (out == NULL) goto general;", "allocation_error_raised"),
    _m("entry-null-stream-without-launch-ex", "compiled entry: the null stream launched through hipModuleLaunchKernel",
       _C, "serve", "if (stream == NULL && launch_ex != NULL) {", "if (0) {", "null_stream_launches_through_launch_ex"),
)
SCENARIOS = {**test_entry_contracts.SCENARIOS, **test_entry_memory.ENTRY_SCENARIOS, **test_entry_rules.SCENARIOS}
KNOWN_BUGS = {}
CHECK_MUTANTS = ()
