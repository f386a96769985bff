"""Mutants of the compiled entry (_compiled_entry.c, _compiled_entry.py): torch's contracts, layouts.

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)

MUTANTS = ()
SCENARIOS = {}
KNOWN_BUGS = {}
CHECK_MUTANTS = ()
