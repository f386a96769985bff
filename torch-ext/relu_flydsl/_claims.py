"""Claims the card, the README, the docs and status() all repeat: one source each.

tests/release/test_card.py holds every copy to these. A number here is a measurement's
summary; the record it comes from is named beside it.
"""

# Where torch.compile is on by default (read in each stack's documentation, not run here).
COMPILE_DEFAULTS = "vLLM compiles by default, SGLang only with `--enable-torch-compile`"

# What the bit rule does to the special values (one sentence, as the docs say it).
SPECIALS = ("NaN keeps its payload, -0.0 stays -0.0, +inf and positive denormals pass; "
            "-inf and negative denormals become +0.0")

# The general path's host time where the compiled entry does not load (torch 2.9.1, or
# RELU_FLYDSL_ENTRY=0): relu(x, out=y) / torch.clamp_min(out=), relu(x) / torch.relu, as ranges
# over runs (releases/torch/, tools/torch_releases.py).
NO_ENTRY_COST = {"out": (6.5, 7.6), "new": (5.8, 6.8)}

# Below this much memory traffic a call's host time, not its device time, decides
# (docs/benchmarks.md's model of this package's host path).
HOST_TIME_CROSSOVER_MB = (40, 66)
