"""Virtual gfx950 device for tests: a stand-in libamdhip64.so.7 plus a wave64
emulator of the instructions the ladder kernels compile to. See README.md."""

from .build import BuildUnavailable, build_stub
from .device import DeviceError, LaunchRecord, VirtualGPU, device
from .emulator import STRADDLE_MODELS, LaunchError
from .isa import Unsupported
from .memory import OutOfBounds

__all__ = ["BuildUnavailable", "DeviceError", "LaunchError", "LaunchRecord", "OutOfBounds", "STRADDLE_MODELS",
           "Unsupported", "VirtualGPU", "build_stub", "device"]
