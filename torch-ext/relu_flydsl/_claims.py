"""Claims the card, the README, the docs and status() all repeat: one source each.

tests/release/test_figures.py holds every copy (the card, README.md, docs/*.md, CHANGELOG.md's
current entry) to these, and each claim to what it summarises: the code, a measurement's record,
or docs/benchmarks.md's model. A copy states a claim in these words (a sentence may add to them).
"""

# Where torch.compile is on by default (read in each stack's documentation, not run here).
COMPILE_DEFAULTS = "vLLM compiles by default, SGLang only with `--enable-torch-compile`"

# What the bit rule does to the special values (the kernels' rule; tests/reference.py, and the
# kernels on the virtual gfx950, hold it).
SPECIALS = ("NaN keeps its payload, -0.0 stays -0.0, +inf and positive denormals pass; "
            "-inf and negative denormals become +0.0")

# The general path's host time where the compiled entry does not load (torch 2.9.1, or
# RELU_FLYDSL_ENTRY=0): relu(x, out=y) / torch.clamp_min(out=) ("out") and relu(x) / torch.relu
# ("new"): the widest ranges over the runs of the newest releases/torch/v<N>.json, on the one
# machine it names, widened to one decimal; tools/torch_releases.py writes it, and
# tests/release/test_torch_releases.py holds it equal to the newest record's ranges.
NO_ENTRY_COST = {'out': (7.6, 9.9), 'new': (6.2, 8.5)}

# Below this much memory traffic a call's host time, not its device time, decides: the crossings
# of docs/benchmarks.md's model of this package's host path with the compiled entry (its "crossing
# now" column: relu(x, out=y) 40 MB, relu(x) 54 MB).
HOST_TIME_CROSSOVER_MB = (40, 54)

# The exit status of the check, the health check (`python -m relu_flydsl [check]`) and run.sh.
CHECK_EXITS = ("exit 0: passed; 1: a failure, named (a case failed, or a shipped file fails its sha256); "
               "4: a usage error; 5: nothing was tested (the reason named)")
