"""relu-flydsl: torch.relu for AMD MI350X/MI355X (gfx950) from the FlyDSL ladder.

    relu(x, out=None)       torch.relu's exact semantics; FlyDSL kernel on gfx950
    layers.ReLU             the same as an nn.Module for kernels.kernelize
    dispatch_stats()        which path each call took (kernel rung or fallback + why)
    warmup(dtypes)          compile kernels ahead of the first call
    verify_variant(path)    check an installed variant against its digest

flydsl is imported only when the FlyDSL path first runs.
"""

from . import layers
from ._dispatch import dispatch_stats, reset_dispatch_stats, warmup
from ._relu import relu
from ._version import __version__
from ._verify import verify_variant

__all__ = ["__version__", "dispatch_stats", "layers", "relu", "reset_dispatch_stats", "verify_variant", "warmup"]
