"""FlyDSL ReLU ladder for AMD gfx950 (MI350X / MI355X).

- `registry`: the rungs v1..v5 and their properties (no flydsl import)
- `plan`: vector width, exact grid and launch splitting (pure Python)
- `build`: the gfx950 code objects the package ships (build time only)
- `cache`: development only (the serve path never imports it): one JIT-compiled kernel
  per rung, dtype, vector width and device, for tools and tests
- `v1_naive` .. `v5_nontemporal`: one file per rung, each showing one idea
"""

from . import plan, registry
from .registry import DEFAULT_RUNG, DTYPES, RUNGS, Rung, get_rung

__all__ = ["DEFAULT_RUNG", "DTYPES", "RUNGS", "Rung", "get_rung", "plan", "registry"]
