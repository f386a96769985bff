"""relu-flydsl: torch.relu for AMD MI350X/MI355X (gfx950) from the FlyDSL ladder.

    relu(x, out=None)       y = +0.0 if x < 0 else x, on the bits; a shipped gfx950 kernel
    layers.ReLU             the same as an nn.Module for kernels.kernelize
    dispatch_stats()        which path each call took (kernel rung or fallback + why)
    warmup(dtypes)          load kernels (and run their canaries) ahead of the first call
    verify_digest(path)     check an installed variant's files against its digest
                            (verify_variant: its deprecated version-1 name)

The kernels are prebuilt gfx950 code objects (code_objects/, checked against
their sha256 before loading): at run time nothing compiles, links or imports
FlyDSL; the package needs only the standard library, torch and the HIP
runtime ROCm torch has loaded.
"""

from . import _compiled_entry, layers
from ._dispatch import dispatch_stats, reset_dispatch_stats, warmup
from ._relu import relu
from ._version import __version__
from ._verify import verify_digest, verify_variant

_compiled_entry.load()  # the compiled entry, where it can load (_compiled_entry.status() says why not)

# The public API of versions 2 and 3 (releases/v2.json, v3.json): adding or removing a symbol needs a new
# version (tools/release.py). verify_variant, verify_digest's version-1 name, stays (it warns).
__all__ = ["__version__", "dispatch_stats", "layers", "relu", "reset_dispatch_stats", "verify_digest",
           "verify_variant", "warmup"]
