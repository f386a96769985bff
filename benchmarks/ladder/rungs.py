"""Where the gpu mode's rungs come from (`--rungs-from`): the one seam between the harness
and the kernels. Everything the gpu mode asks of the kernels goes through a RungSource:

    device()        (True, device name) where its rungs can run here, else (False, why not);
                    the gpu mode refuses to start without it
    load(variant)   an object with relu(x, out=, rung=) and dispatch_stats(), as relu_flydsl
    gfx950          True: the rungs are the ladder's kernels on the device they are built for
                    (MI350X peak line and cache marks); False: the device's own peak, no marks

Sources:
  relu_flydsl  the shipped gfx950 kernels (the repo's source, or a built --variant folder) on a
               gfx950 device: the ladder itself, and the default.
  stand-in     every rung as torch ops that obey the bit rule, y = +0.0 if x < 0 else x on the
               bits (torch.where keeps -0.0 and NaN payloads; torch.relu/clamp on CUDA turn
               -0.0 into +0.0 and would fail the rungs' check), on any GPU torch sees; its
               calls are counted on flydsl/<rung>/<dtype>, the path the real rung's calls are
               counted on. So the correctness checks, the dispatch-path checks, timing,
               crossings, table, CSV and plot all run for real off gfx950. Its numbers are
               torch's elementwise kernels (a compare, then a select), not the ladder's; it
               imports neither flydsl, kernels nor relu_flydsl.
"""

from dataclasses import dataclass
from typing import Callable, Optional

from flash_relu_rocm.dtypes import DTYPES
from flash_relu_rocm.registry import RUNGS

DEFAULT = "relu_flydsl"
STAND_IN = "stand-in"


@dataclass(frozen=True)
class RungSource:
    name: str
    what: str                                   # how the report names where the rungs came from
    gfx950: bool
    device: Callable[[], tuple]
    load: Callable[[Optional[str]], object]
    needs: str                                  # what device() must find, for the refusal


class StandInRelu:
    """relu_flydsl's interface as the gpu mode uses it: relu(x, out=None, rung=...) and
    dispatch_stats(), with each rung implemented by torch ops under the bit rule."""

    def __init__(self):
        self._stats = {}
        self._zero = {}  # (dtype, device) -> 0-dim zero: torch.where takes no scalar with out=

    def relu(self, x, out=None, rung="v5"):
        import torch

        if rung not in RUNGS:
            raise ValueError(f"unknown rung {rung!r}; choose one of {sorted(RUNGS)}")
        dtype = str(x.dtype).removeprefix("torch.")
        key = f"flydsl/{rung}/{dtype}" if dtype in DTYPES else f"fallback/stand-in: {dtype} is not served"
        self._stats[key] = self._stats.get(key, 0) + 1
        zero = self._zero.get((x.dtype, x.device))
        if zero is None:
            zero = self._zero[(x.dtype, x.device)] = x.new_zeros(())
        if out is None:
            return torch.where(x < 0, zero, x)
        return torch.where(x < 0, zero, x, out=out)

    def dispatch_stats(self):
        return dict(self._stats)


def _gfx950_device():
    from . import gpu

    return gpu.gfx950_device()


def _load_relu_flydsl(variant=None):
    from . import gpu

    return gpu.load_relu(variant)


def _any_gpu():
    from . import gpu

    return gpu.any_gpu()


def _load_stand_in(variant=None):
    if variant:
        raise ValueError("--variant names built kernels; the stand-in has none")
    return StandInRelu()


SOURCES = {
    DEFAULT: RungSource(DEFAULT, "relu_flydsl (the shipped gfx950 kernels)", True, _gfx950_device,
                        _load_relu_flydsl, "a gfx950 device"),
    STAND_IN: RungSource(STAND_IN, "stand-in rungs (torch.where under the bit rule; not the gfx950 kernels)",
                         False, _any_gpu, _load_stand_in, "a GPU torch sees (CUDA or ROCm)"),
}


def source(name=DEFAULT):
    try:
        return SOURCES[name]
    except KeyError:
        raise ValueError(f"unknown rung source {name!r}; choose one of {sorted(SOURCES)}") from None
