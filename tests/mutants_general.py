"""Mutants of the general path (_dispatch.py, _relu.py, _inputs.py, _launch.py, _objects.py, _hip.py, _state.py).

MUTANTS: mutation_support.Mutant copies, each killed by a scenario of SCENARIOS (or an older
scenario table); CHECK_MUTANTS: mutation_support.CheckMutant. See tests/mutation_support.py.
"""

from mutant_types import CheckMutant, Mutant  # noqa: F401  (the kinds this catalogue holds)

MUTANTS = ()
SCENARIOS = {}
KNOWN_BUGS = {}
CHECK_MUTANTS = ()
