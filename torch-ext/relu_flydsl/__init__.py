"""relu-flydsl: torch.relu for AMD MI350X/MI355X (gfx950) from the FlyDSL ladder.

    relu(x, out=None)       y = +0.0 if x < 0 else x, on the bits; a shipped gfx950 kernel
    layers.ReLU             the same as an nn.Module for kernels.kernelize
    status()                the health check: per device whether the kernels serve it and why
                            not, the HIP runtime, the code objects, the compiled entry, each
                            kernel's canary verdict, the settings in force (a dict; also
                            the package run with -m, e.g. `.venv/bin/python -m relu_flydsl`,
                            which says OK only where a gfx950 is served, exits 1 when a
                            shipped file fails its sha256 or a gfx950 is present and not
                            served, and with --require-gfx950 exits 5 where none is served)
    explain(x, out=None)    which path that call would take and why, without running it
    dispatch_stats()        which path each call took (kernel rung or fallback + why)
    warmup(dtypes)          load kernels and run their canaries ahead of the first call;
                            returns what is ready on each device, and why the rest is not
    check(bandwidth=True)   the hardware check, for after an install or upgrade: on each visible
                            gfx950 every shipped kernel through relu(), bit for bit with guard
                            regions, then a short bandwidth sweep; a CheckResult (.ok, .tested,
                            .failed, .exit_code, .report; str() the verdict). Also
                            `python -m relu_flydsl check`, and `python FOLDER check` for the
                            folder `kernels` downloads
    verify_digest(path)     check an installed variant's files against its digest
                            (verify_variant: its deprecated version-1 name)
    VariantVerificationError  what verify_digest raises

The kernels are prebuilt gfx950 code objects (code_objects/, checked against
their sha256 before loading): at run time nothing compiles, links or imports
FlyDSL; the package needs only the standard library, torch and the HIP
runtime ROCm torch has loaded.
"""

from . import _compiled_entry, layers
from ._check import check
from ._dispatch import dispatch_stats, reset_dispatch_stats, warmup
from ._relu import relu
from ._status import explain, status
from ._verify import VariantVerificationError, verify_digest, verify_variant
from ._version import __version__

_compiled_entry.load()  # the compiled entry, where it can load (status()["entry"] says why not)

# The public API (releases/vN.json records each version's): adding or removing a symbol needs a new
# version (tools/release.py). Version 4 adds status, explain and VariantVerificationError.
# verify_variant, verify_digest's version-1 name, stays (it warns). Version 5 adds check.
__all__ = ["VariantVerificationError", "__version__", "check", "dispatch_stats", "explain", "layers", "relu",
           "reset_dispatch_stats", "status", "verify_digest", "verify_variant", "warmup"]
