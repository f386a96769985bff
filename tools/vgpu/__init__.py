"""Virtual gfx950 devices for tests: a stand-in libamdhip64.so.7 (several devices,
streams, stream capture and graph replay) plus a wave64 emulator of the
instructions the ladder kernels compile to. See README.md."""

from .build import BuildUnavailable, build_stub
from .device import (CAPTURE_ACTIVE, CAPTURE_INVALIDATED, CAPTURE_MODE_GLOBAL, CAPTURE_MODE_RELAXED,
                     CAPTURE_MODE_THREAD_LOCAL, CAPTURE_NONE, HIP_ERROR_INVALID_DEVICE,
                     HIP_ERROR_INVALID_RESOURCE_HANDLE, HIP_ERROR_LAUNCH_FAILURE,
                     HIP_ERROR_STREAM_CAPTURE_IMPLICIT, HIP_ERROR_STREAM_CAPTURE_INVALIDATED,
                     HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED, HIP_SUCCESS, Attempt, DeviceError, HipError, LaunchRecord,
                     VirtualGPU, device)
from .emulator import STRADDLE_MODELS, LaunchError
from .disasm import Unsupported
from .memory import OutOfBounds

__all__ = ["Attempt", "BuildUnavailable", "CAPTURE_ACTIVE", "CAPTURE_INVALIDATED", "CAPTURE_MODE_GLOBAL",
           "CAPTURE_MODE_RELAXED", "CAPTURE_MODE_THREAD_LOCAL", "CAPTURE_NONE", "DeviceError",
           "HIP_ERROR_INVALID_DEVICE", "HIP_ERROR_INVALID_RESOURCE_HANDLE", "HIP_ERROR_LAUNCH_FAILURE",
           "HIP_ERROR_STREAM_CAPTURE_IMPLICIT", "HIP_ERROR_STREAM_CAPTURE_INVALIDATED",
           "HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED", "HIP_SUCCESS", "HipError", "LaunchError", "LaunchRecord",
           "OutOfBounds", "STRADDLE_MODELS", "Unsupported", "VirtualGPU", "build_stub", "device"]
