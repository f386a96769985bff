"""Present CPU tensors to a relu_flydsl package as gfx950 memory on the
virtual device: the one place that substitutes the package's two device hooks.

    restore = serve(dev, relu_flydsl)   # tests' vgpu fixture, the ladder's no-GPU
    ...                                 # report, the kernels-CLI runner
    restore()

- `_dispatch.device_info`: a CPU tensor lives on the virtual device holding
  its registered allocation (device 0 for unregistered memory), on stream
  `dev.stream` (an int for every device, or a dict device -> stream);
- `_canary.device_memory`: the first-use canary's buffer is CPU memory
  registered on the canary's device as ONE region (so the canary's own
  sentinels, not the memory checker, judge guard writes, as on hardware);
  its launches move from `dev.launches` to `dev.canary_launches`, so callers
  that count launches see only the calls they make.
"""

import importlib
from contextlib import contextmanager


def _current_device(dev) -> int:
    get = getattr(dev, "get_device", None)
    return get() if callable(get) else 0


def device_info_for(dev, dispatch):
    """`_dispatch.device_info` of the virtual gfx950 for one package's dispatcher."""

    def device_info(x):
        if x.device.type != "cpu":
            return None
        index = dev.device_of(x.data_ptr(), 0)
        stream = dev.stream.get(index, 0) if isinstance(dev.stream, dict) else dev.stream
        return dispatch.DeviceInfo("gfx950", stream, index == _current_device(dev), index)

    return device_info


def canary_memory_for(dev):
    """`_canary.device_memory` of the virtual gfx950."""
    import torch

    @contextmanager
    def device_memory(nbytes, device):
        buf = torch.empty(nbytes, dtype=torch.uint8)
        region = dev.register(buf, name=f"canary-{device}", device=device)
        lo, hi = buf.data_ptr(), buf.data_ptr() + nbytes
        try:
            yield buf
        finally:
            dev.memories[device].remove(region)
            mine = [r for r in dev.launches if r.args and lo <= r.args[0] < hi]
            for r in mine:
                dev.launches.remove(r)
            dev.canary_launches.extend(mine)

    return device_memory


def serve(dev, package, setattr_=None):
    """Install both hooks on `package` (the relu_flydsl module or a loaded
    variant). `setattr_` defaults to plain setattr; pass pytest's
    monkeypatch.setattr to have pytest undo it. Returns a function restoring
    the package's own hooks."""
    dispatch = importlib.import_module(f"{package.__name__}._dispatch")
    canary = importlib.import_module(f"{package.__name__}._canary")
    if not hasattr(dev, "canary_launches"):
        dev.canary_launches = []
    if not hasattr(dev, "stream"):
        dev.stream = 0
    saved = [(dispatch, "device_info", dispatch.device_info), (canary, "device_memory", canary.device_memory)]
    put = setattr_ or setattr
    put(dispatch, "device_info", device_info_for(dev, dispatch))
    put(canary, "device_memory", canary_memory_for(dev))

    def restore():
        for module, name, value in saved:
            setattr(module, name, value)

    return restore
