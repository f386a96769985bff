/* HIP_LAUNCH_CONFIG, the first argument of hipDrvLaunchKernelEx, as ROCm's
 * hip_runtime_api.h declares it (x86-64: seven unsigned ints at 0..27, hStream
 * at 32, attrs at 40, numAttrs at 48; 56 bytes). Shared by the two HIP stand-ins
 * (tools/noop_hip, tools/vgpu); torch-ext/relu_flydsl/_launch.py builds the same
 * layout with ctypes. */
#ifndef RELU_FLYDSL_HIP_LAUNCH_CONFIG_H
#define RELU_FLYDSL_HIP_LAUNCH_CONFIG_H
#include <stdint.h>

typedef struct {
    uint32_t gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream;
    void *attrs; /* hipLaunchAttribute *: not modelled, numAttrs must be 0 */
    uint32_t numAttrs;
} HIP_LAUNCH_CONFIG;

_Static_assert(sizeof(HIP_LAUNCH_CONFIG) == 56, "HIP_LAUNCH_CONFIG is 56 bytes");
#endif
