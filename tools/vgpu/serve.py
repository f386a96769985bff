"""Present CPU tensors to a relu_flydsl package as gfx950 memory on the
virtual device: the one place that substitutes the package's two device hooks.

    restore = serve(dev, relu_flydsl)   # tests' vgpu fixture, the ladder's no-GPU
    ...                                 # report, the kernels-CLI runner
    restore()

- `_dispatch.device_info`: a CPU tensor lives on the virtual device holding
  its registered allocation (device 0 for unregistered memory), on stream
  `dev.stream` (an int for every device, or a dict device -> stream);
- the compiled entry (`_compiled_entry.present_cpu`): CPU tensors count as device memory
  there too, their device and stream asked from the same answers through two C callbacks,
  so repeated calls run the compiled entry itself, as on hardware;
- `_canary.device_memory`: the first-use canary's buffer is CPU memory
  registered on the canary's device as ONE region (so the canary's own
  sentinels, not the memory checker, judge guard writes, as on hardware);
  its launches move from `dev.launches` to `dev.canary_launches`, so callers
  that count launches see only the calls they make.
"""

import ctypes
import importlib
from contextlib import contextmanager

DEVICE_OF = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)   # pointer -> device
STREAM_OF = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_int)   # device -> raw stream


def _current_device(dev) -> int:
    get = getattr(dev, "current_device", None) or getattr(dev, "get_device", None)
    return get() if callable(get) else 0


def _stream(dev, index):
    return dev.stream.get(index, 0) if isinstance(dev.stream, dict) else dev.stream


def device_info_for(dev, dispatch):
    """`_dispatch.device_info` of the virtual gfx950 for one package's dispatcher."""

    def device_info(x):
        if x.device.type != "cpu":
            return None
        index = dev.device_of(dispatch._inputs.read_ptr(x), 0)  # read-only: a copy-on-write x stays one, as on a real device
        return dispatch.DeviceInfo("gfx950", _stream(dev, index), index == _current_device(dev), index)

    return device_info


def present_cpu(dev, entry):
    """The compiled entry module `entry` (a package's _compiled_entry) sees CPU tensors as the
    virtual device's memory: the same device and stream answers as device_info_for. Returns
    a function that turns it off. A no-op where the compiled entry did not load."""
    device_of = DEVICE_OF(lambda pointer: dev.device_of(pointer, 0))
    stream_of = STREAM_OF(lambda index: _stream(dev, index))
    address = ctypes.cast(device_of, ctypes.c_void_p).value, ctypes.cast(stream_of, ctypes.c_void_p).value
    entry.present_cpu(True, *address)
    entry.presenting = (device_of, stream_of)  # the callbacks live as long as they are installed

    def off():  # whoever presented last (a scenario may present again): CPU tensors are host memory again
        entry.present_cpu(False)
        entry.presenting = None

    return off


def present_cpu_as(package, arch="gfx950", stream=0, setattr_=None):
    """Without the virtual device (the no-op HIP library, or no HIP runtime at all): CPU
    tensors are device 0, a `arch`, on `stream` (an int, or a function returning the current
    one), for both device hooks of `package`: the dispatcher's device_info and the compiled
    entry. Stream 0 leaves the compiled entry torch's own stream query (NULL for the CPU
    device: the query the host-time benchmark models). Returns a function undoing both."""
    dispatch = importlib.import_module(f"{package.__name__}._dispatch")
    entry = importlib.import_module(f"{package.__name__}._compiled_entry")
    current = stream if callable(stream) else (lambda: stream)
    saved = dispatch.device_info, getattr(dispatch, "device_archs", None)
    (setattr_ or setattr)(dispatch, "device_info",
                          lambda t: dispatch.DeviceInfo(arch, current()) if t.device.type == "cpu" else None)
    if saved[1] is not None:  # status()'s devices: device 0, that arch
        (setattr_ or setattr)(dispatch, "device_archs", lambda: {0: arch})
    stream_of = STREAM_OF(lambda index: current()) if callable(stream) or stream else None
    entry.present_cpu(True, None, ctypes.cast(stream_of, ctypes.c_void_p).value if stream_of else None)
    entry.presenting = (stream_of,)

    def restore():
        entry.present_cpu(False)
        entry.presenting = None
        setattr(dispatch, "device_info", saved[0])
        if saved[1] is not None:
            setattr(dispatch, "device_archs", saved[1])

    return restore


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
    """Install the hooks on `package` (the relu_flydsl module or a loaded
    variant). `setattr_` defaults to plain setattr; pass pytest's
    monkeypatch.setattr to have pytest undo the two attributes. Returns a
    function restoring the package's own hooks (the compiled entry's too: call it)."""
    dispatch = importlib.import_module(f"{package.__name__}._dispatch")
    canary = importlib.import_module(f"{package.__name__}._canary")
    if not hasattr(dev, "canary_launches"):
        dev.canary_launches = []
    if not hasattr(dev, "stream"):
        dev.stream = 0
    saved = [(dispatch, "device_info", dispatch.device_info), (canary, "device_memory", canary.device_memory)]
    put = setattr_ or setattr
    put(dispatch, "device_info", device_info_for(dev, dispatch))
    if hasattr(dispatch, "device_archs"):  # status()'s devices: every virtual device, a gfx950
        saved.append((dispatch, "device_archs", dispatch.device_archs))
        put(dispatch, "device_archs", lambda: {i: "gfx950" for i in range(dev.device_count)})
    put(canary, "device_memory", canary_memory_for(dev))
    entry_off = present_cpu(dev, importlib.import_module(f"{package.__name__}._compiled_entry"))

    def restore():
        entry_off()
        for module, name, value in saved:
            setattr(module, name, value)

    return restore
