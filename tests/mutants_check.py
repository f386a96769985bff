"""Mutants of the shipped check (_check.py, __main__.py, the judge it shares with the canary)
and the hardware gate (tests/hardware/run.sh's environment and gate, in tests/hardware_vgpu.py).

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)

MUTANTS = ()
SCENARIOS = {}
KNOWN_BUGS = {}

_K, _C = "torch-ext/relu_flydsl/_check.py", "torch-ext/relu_flydsl/_canary.py"
_M, _HV = "torch-ext/relu_flydsl/__main__.py", "tests/hardware_vgpu.py"
CHECK_MUTANTS = (
    CheckMutant("check-exit-0-on-nothing", "check: exit 0 (passed) when nothing was tested",
                _K, "check", "NOT_TESTED if tested == 0 else PASSED", "PASSED",
                ("test_check", "test_check_on_the_cpu_tests_nothing_and_says_why", {})),
    CheckMutant("check-out-guards-skipped", "check: the guards around an out= output (its own buffer) not judged",
                _C, "Canary._regions", "self.out == APART", "False",
                ("test_check", "test_check_catches_a_write_past_the_output", {})),
    CheckMutant("check-case-unjudged", "check: a case's output, guards and input never judged",
                _K, "run_case", "frame.judge(output=output)", "None",
                ("test_check", "test_check_catches_a_write_past_the_output", {})),
    CheckMutant("check-path-unchecked", "check: a call that took torch's fallback passes on torch's bits",
                _K, "_path_problem", "delta == {want: 1}", "True",
                ("test_check", "test_check_fails_every_case_its_kernel_did_not_serve", {})),
    CheckMutant("health-ok-without-gfx950", "python -m relu_flydsl: OK where no gfx950 is served",
                _M, "render", "bool(serves)", "True",
                ("test_check", "test_the_health_check_says_ok_only_where_a_gfx950_is_served", {})),
    CheckMutant("run-sh-passes-on-nothing", "run.sh: exit 0 when no hardware test ran",
                _HV, "gate", "allow_no_gpu", "True",
                ("test_hardware_suite", "test_run_sh_environment_and_gate", {})),
    CheckMutant("run-sh-keeps-a-stale-variant", "run.sh without --variant: a stale RELU_FLYDSL_HARDWARE_VARIANT kept",
                _HV, "suite_env", "env.pop(ENV_VARIANT, None)", "None",
                ("test_hardware_suite", "test_run_sh_environment_and_gate", {})),
)

# The check's sizing (cases_for, _fit): a case laid out for another kernel than it names fails
# on a healthy gfx950; test_check_plan plans every case of every kernel as the dispatcher does.
_PLAN = ("test_check_plan", "test_every_case_of_every_kernel_is_served_by_its_kernel", {})
CHECK_MUTANTS += (
    CheckMutant("check-fit-parity-flipped", "check: sizes rounded to an odd multiple of the vector where it must be even",
                _K, "_fit", "(n // vec) % 2 == 0", "(n // vec) % 2 == 1", _PLAN),
    CheckMutant("check-fit-every-kernel-widest", "check: every kernel sized as its rung's widest (even multiples)",
                _K, "cases_for", "rung.max_vec(dtype)", "vec", _PLAN),
    CheckMutant("check-offset-view-aligned", "check: the offset view's pointers one widest vector off, not one of its own",
                _K, "cases_for", "Case(rung_name, dtype, vec, (n,), x_offset=vec, out_offset=3 * vec)",
                "Case(rung_name, dtype, vec, (n,), x_offset=widest, out_offset=3 * widest)", _PLAN),
    CheckMutant("check-layouts-on-the-widest", "check: every dense layout case given to the rung's widest kernel",
                _K, "cases_for", "_plan.pick_vec(math.prod(shape), dtype, widest, 0, 0)", "widest", _PLAN),
)
# the gates on a broken download, and the exit statuses (pytest's numbers)
CHECK_MUTANTS += (
    CheckMutant("check-digest-failure-dropped", "check: a variant failing its digest passes (or says nothing tested)",
                _K, "check", 'failed.append("variant digest")', "pass",
                ("test_check", "test_a_broken_download_fails_both_gates_in_this_process", {})),
    CheckMutant("health-ignores-digest", "python FOLDER: exit 0 where the variant's files fail their digest",
                _M, "problems", 'st["package"]["digest"].startswith("FAILED")', "False",
                ("test_check", "test_a_broken_download_fails_both_gates_in_this_process", {})),
    CheckMutant("health-ignores-object-sha256", "python -m relu_flydsl: exit 0 where a code object fails its sha256",
                _M, "problems", 'co["broken"]', "{}",
                ("test_check", "test_a_broken_download_fails_both_gates_in_this_process", {})),
    CheckMutant("cli-usage-error-exits-2", "check / health check: a usage error exits 2, as argparse does",
                _M, "_Parser.error", "_check.USAGE", "2",
                ("test_check", "test_exit_statuses_and_help_of_the_installed_package", {})),
)
