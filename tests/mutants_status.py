"""Mutants of the health check (_status.py: status(), explain()) and of the decision explain() renders.

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)
from mutants_general import decision_mutants

_S, _D = "torch-ext/relu_flydsl/_status.py", "torch-ext/relu_flydsl/_dispatch.py"
_NO_OBJECTS = ("test_status", "test_a_gfx950_without_usable_code_objects_is_not_served", {})
_CAPTURE = ("test_explain", "test_explain_inside_a_capture_is_what_relu_does", {})

MUTANTS = ()
SCENARIOS = {}
KNOWN_BUGS = {}
CHECK_MUTANTS = decision_mutants("-explained", "test_explain_says_each_rule") + (  # the decision, through explain()
    # a gfx950 whose code objects are missing: every call falls back, the kernel path is off
    CheckMutant("status-objects-missing-path-on", "status(): a gfx950's kernel path on with no usable code object",
                _S, "_device_reason", "all(k in objects['broken'] for k in kernels)", "False", _NO_OBJECTS),
    CheckMutant("status-manifest-missing-path-on", "status(): a gfx950's kernel path on without a manifest",
                _S, "_device_reason", "objects['count'] == 0", "False", _NO_OBJECTS),
    CheckMutant("status-unusable-object-no-problem", "status(): a serving kernel's unusable object not a problem",
                _S, "problems", "verdict.startswith(('failed', 'not run (object unusable'))",
                "verdict.startswith('failed')", _NO_OBJECTS),
    # the loader's verdicts on damaged objects are final; the disk alone is not the answer
    CheckMutant("status-loader-verdicts-forgotten", "status(): code objects re-checked on disk only",
                _S, "_code_objects", "broken = {_objects.key(*k): why for k, why in STATE.broken.items()}",
                "broken = {}", ("test_status", "test_the_loaders_verdicts_on_objects_stand", {})),
    # explain() inside a capture: _dispatch._ready's questions, asked with look=True (the capture before any load)
    CheckMutant("explain-capture-unchecked-canary-on", "_ready(look=True): the capture not asked with the canary on",
                _D, "_ready", "_capturing(info.stream)", "not canary and _capturing(info.stream)", _CAPTURE),
    CheckMutant("explain-unusable-before-capture", "_ready(look=True): a known unusable object named before the capture",
                _D, "_ready", "_capturing(info.stream)", "_unusable(vkey[:3]) is None and _capturing(info.stream)",
                _CAPTURE),
    # relu() asks the general path inside a forward-AD level: explain() must not promise the entry
    CheckMutant("explain-forward-ad-level-ignored", "explain(): the compiled entry promised inside a forward-AD level",
                _S, "_entry_leaves", "_inputs.FORWARD_AD._current_level >= 0", "False",
                ("test_explain", "test_explain_inside_a_forward_ad_level", {})),
    # the compiled entry stopped (unloaded or switched off) serves no device, whatever it remembers
    CheckMutant("status-entry-serving-after-stop", "status(): the entry's remembered devices counted after it stopped",
                _S, "_entry_there", "_compiled_entry.SERVE is None", "False",
                ("test_explain", "test_status_counts_the_devices_the_entry_serves", {})),
    # the Python path's cost named where the entry is not in use
    CheckMutant("status-no-entry-cost-dropped", "status(): the Python path's cost not named with the entry off",
                _S, "_entry", "None if in_use else no_entry_cost()", "None",
                ("test_status", "test_the_entry_off_names_the_python_paths_cost", {})),
    # explain(arch=): decide()'s read-only pointers (look=True)
    CheckMutant("explain-arch-x-alignment-only", "decide(look=True): the vector width planned from x's alignment only",
                _D, "decide", "_ALIGNED if out is None else _inputs.read_ptr(out)", "_inputs.read_ptr(x)",
                ("test_explain_arch", "test_explain_for_a_gfx950_is_what_the_virtual_gfx950_runs",
                 {"name": "out-offset-2-bytes"})),
    CheckMutant("explain-arch-split-replayed", "explain(arch=): a split launch promised to the compiled entry",
                _S, "_entry_leaves", "not single", "False",
                ("test_explain_arch", "test_explain_for_a_gfx950_plans_split_launches", {"name": "float16-5000-none"})),
)
