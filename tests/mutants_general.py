"""Mutants of the general path (_dispatch.py, _relu.py, _inputs.py, _launch.py, _objects.py, _hip.py, _state.py).

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)
from test_entry_memory import GENERAL_SCENARIOS
from test_general_contracts import SCENARIOS as _CONTRACTS

_D, _H, _I, _R, _S = "_dispatch.py", "_hip.py", "_inputs.py", "_relu.py", "_state.py"


def _m(name, why, rel, qualname, old, new, kill, count=1):
    return Mutant(name, why, ((rel, qualname, old, new) + ((count,) if count != 1 else ()),), (kill,))


_TANGENT_ASKED = "dual(x, out)"
_OUT_REFUSED = "FORWARD_AD._current_level >= 0 and _current_level() is None and dual(x, out)"
MUTANTS = (
    # version counters (tests/vgpu/test_general_contracts.py)
    _m("general-out-unbumped", "general path: a kernel write into the caller's out leaves its version counter",
       _D, "_launch_now", "_bump((written,))", "pass", "general_path_bumps_versions"),
    _m("serve-out-unbumped", "serve(): the caller's out handed to run() as a new output (never bumped)",
       _D, "serve", "run(x, out, rung, info, bump=True)", "run(x, out, rung, info)", "general_path_bumps_versions"),
    _m("fallback-always-bumps", "fallback: torch's bump also on a new output and on the op's out (twice there)",
       _D, "_fallback", "bump", "True", "general_path_bumps_versions"),
    _m("general-bumped-on-success-only", "general path: out's version not bumped after a failed launch (a split "
       "may have written part of out)", _D, "_launch_now", "written is not None", "written is not None and not error",
       "general_failed_launch_bumps_out"),
    # memory that is not there
    _m("general-null-data-launched", "memory_reason: storage at NULL (a ZeroTensor, a functional wrapper) launched",
       _D, "memory_reason", "not (xb and yb)", "False", "no_memory_on_the_general_path"),
    _m("general-null-out-launched", "memory_reason: out's storage at NULL not asked", _D, "memory_reason",
       "not (xb and yb)", "not xb", "no_memory_on_the_general_path"),
    _m("general-view-x-launched", "memory_reason: x's data pointer judged, not its storage's (a view of a ZeroTensor "
       "at its offset from NULL launched)", _D, "memory_reason", "xp - x.storage_offset() * size", "xp",
       "no_memory_on_the_general_path"),
    _m("general-view-out-launched", "memory_reason: out's data pointer judged, not its storage's (a view of a "
       "functional wrapper written at its offset from NULL)", _D, "memory_reason",
       "yp - out.storage_offset() * size", "yp", "no_memory_on_the_general_path"),
    _m("general-misaligned-launched", "memory_reason: data not aligned to its element size launched", _D,
       "memory_reason", "(xp | yp) % size", "0", "no_memory_on_the_general_path"),
    # forward AD
    _m("fwad-entry-unguarded", "relu(): the compiled entry asked with a forward-AD level active (it cannot see tangents)",
       _R, "relu", "_fwad._current_level < 0", "True", "dual_tensors_keep_their_tangent"),
    _m("fwad-tangent-unasked", "needs_torch: a dual tensor served by the kernel (its tangent lost)",
       _I, "needs_torch", _TANGENT_ASKED, "False", "dual_tensors_keep_their_tangent"),
    _m("fwad-out-written", "torch_relu: out= with a dual left to torch, which writes out before refusing",
       _I, "torch_relu", _OUT_REFUSED, "False",
       "dual_tensors_keep_their_tangent"),
    # settings and errors in flight
    _m("launch-settings-unchecked", "general path: the settings not re-read right before the launch",
       _D, "_launch_now", "STATE.current() is not settings", "False", "settings_reread_before_the_launch"),
    Mutant("restore-failure-swallowed", "on_device: a failed restore of the caller's device ignored",
           ((_H, "on_device.__exit__", "set_device(self.prev)",
             "try:\n    set_device(self.prev)\nexcept RuntimeError:\n    pass"),),
           ("general_path_failed_restore_raises",)),
    # what the package says
    _m("runtime-path-soname", "runtime_path(): the name the runtime was opened by (a bare SONAME)",
       _H, "runtime_path", "mapped_file(at) or _loader_file(at)", "getattr(_lib, '_name', None)",
       "runtime_path_is_the_mapped_file"),
    _m("serve-warning-says-fallback", "serve(): the warning without the compiled entry says calls take torch's fallback",
       _D, "serve", "False", "True", "entry_warning_says_what_happens"),
    _m("import-warning-at-bootstrap", "caller_stacklevel: the import machinery's frames counted (warnings skips them)",
       _S, "caller_stacklevel", "_skipped(back.f_code.co_filename)", "False", "import_warning_at_the_importers_line"),
)
SCENARIOS = {**_CONTRACTS, **GENERAL_SCENARIOS}
KNOWN_BUGS = {}

# The one decision's rules (_dispatch.decide, fallback_reason, memory_reason), each weakened in turn; relu() and
# explain() share the function, so each mutant must fail both tests of tests/vgpu/test_decide.py:
# relu()'s here, explain()'s in mutants_status.py. (rule as test_decide.RULES names it, function, old, new)
DECISION = (
    ("out device", "decide", "at is None or at.index != info.index", "False"),
    ("kill switch", "fallback_reason", "STATE.current().disabled", "False"),
    ("not a ROCm device", "fallback_reason", "info is None", "False"),
    ("arch", "fallback_reason", "info.arch != SUPPORTED_ARCH", "False"),
    ("dtype", "fallback_reason", "dtype is None", "False"),
    ("layout", "fallback_reason", "x.stride() != out.stride() or not dense(x)", "False"),
    ("neg bit", "fallback_reason", "x.is_neg() or out.is_neg()", "False"),
    ("no memory", "memory_reason", "not (xb and yb)", "False"),
    ("misaligned", "memory_reason", "(xp | yp) % size", "0"),
    ("empty", "decide", "None if n else 'empty tensor'", "None"),
    ("code objects", "decide", "_objects.unavailable()", "None"),
    ("hip runtime", "decide", "_hip.unavailable()", "None"),
    ("rung", "decide", "rung or settings.default_rung", "settings.default_rung"),
    ("vector width", "decide", "_entry(rung, rung or settings.default_rung, x.dtype, n, xp, yp, info.index, not look)",
     "_entry(rung, rung or settings.default_rung, x.dtype, n, xp, xp, info.index, not look)"),
)


def decision_mutants(suffix, kill):
    return tuple(CheckMutant(f"decide-{rule.replace(' ', '-')}{suffix}", f"decide(): the {rule} rule dropped",
                             "torch-ext/relu_flydsl/_dispatch.py", fn, old, new, ("test_decide", kill, {"rule": rule}))
                 for rule, fn, old, new in DECISION)


CHECK_MUTANTS = decision_mutants("", "test_relu_follows_each_rule") + (
    CheckMutant("overlap-by-storage", "relu(): out in x's storage refused as an overlap on disjoint bytes",
                "torch-ext/relu_flydsl/_relu.py", "_overlaps", "xa < yb and ya < xb", "True",
                ("test_general_contracts_cpu", "test_disjoint_views_of_one_storage_are_not_an_overlap",
                 {"general": True})),
)
