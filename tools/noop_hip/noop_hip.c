/* A no-op libamdhip64.so.7: FlyDSL's real host launch path, no device.
 *
 * Exports the HIP entry points libfly_jit_runtime.so links (symbol version
 * hip_4.2, see noop_hip.map). Every call succeeds and does nothing: kernels
 * are not run, so outputs are never written. Used to measure host overhead
 * and to check what the host path does (stream, synchronizations,
 * allocations) on a CPU machine. Values are the virtual device's job
 * (tools/vgpu/).
 *
 * Records (read with the noop_hip_* functions): launches (those made through
 * hipDrvLaunchKernelEx also counted apart), the stream and
 * grid of the last launches, synchronizations, device allocations, module
 * loads, hipSetDevice calls and capture queries. noop_hip_fail_launches(n, code)
 * makes the next n launches fail; noop_hip_set_devices(n) sets the device count.
 * Devices: the current device is per host thread (as HIP), default 0. Streams
 * never capture: hipStreamIsCapturing answers hipStreamCaptureStatusNone.
 */
#include <stdint.h>
#include "../hip_launch_config.h"
#include <stddef.h>

typedef int hipError_t;
#define HIP_OK 0
#define RING 1024

static uint64_t n_launch, n_launch_ex, n_sync, n_malloc, n_load, n_get_function, n_memcpy, n_set_device, n_capture_query;
static int n_devices = 1;
static __thread int current_device;
static uint64_t ring_stream[RING];
static uint32_t ring_grid[RING];
static int fail_left;
static hipError_t fail_code = 719; /* hipErrorLaunchFailure */
static hipError_t last_error;
static char token; /* any non-null handle points here */

/* ---- recording interface (version NOOP_HIP) ---- */
uint64_t noop_hip_launch_count(void) { return n_launch; }
uint64_t noop_hip_launch_ex_count(void) { return n_launch_ex; }
uint64_t noop_hip_sync_count(void) { return n_sync; }
uint64_t noop_hip_malloc_count(void) { return n_malloc; }
uint64_t noop_hip_memcpy_count(void) { return n_memcpy; }
uint64_t noop_hip_load_count(void) { return n_load; }
uint64_t noop_hip_get_function_count(void) { return n_get_function; }
uint64_t noop_hip_launch_stream(uint64_t i) { return i < n_launch && n_launch - i <= RING ? ring_stream[i % RING] : 0; }
uint32_t noop_hip_launch_grid(uint64_t i) { return i < n_launch && n_launch - i <= RING ? ring_grid[i % RING] : 0; }
uint64_t noop_hip_set_device_calls(void) { return n_set_device; }
uint64_t noop_hip_capture_query_count(void) { return n_capture_query; }
void noop_hip_fail_launches(int count, int code) { fail_left = count; fail_code = code; }
int noop_hip_set_devices(int n) { if (n < 1) return -1; n_devices = n; return 0; }
void noop_hip_reset(void) {
    n_launch = n_launch_ex = n_sync = n_malloc = n_load = n_get_function = n_memcpy = n_set_device = n_capture_query = 0;
    fail_left = 0;
}

/* ---- HIP (version hip_4.2) ---- */
hipError_t hipModuleLoadData(void **module, const void *image) { (void)image; n_load++; *module = &token; return HIP_OK; }
hipError_t hipModuleUnload(void *module) { (void)module; return HIP_OK; }
hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    (void)module; (void)name; n_get_function++; *function = &token; return HIP_OK;
}
hipError_t hipModuleLaunchKernel(void *f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                                 uint32_t bz, uint32_t shmem, void *stream, void **params, void **extra) {
    (void)f; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)params; (void)extra;
    /* launches from threads that released the GIL (ctypes) may race: the count is atomic */
    uint64_t i = __atomic_fetch_add(&n_launch, 1, __ATOMIC_RELAXED);
    ring_stream[i % RING] = (uint64_t)(uintptr_t)stream;
    ring_grid[i % RING] = gx;
    if (fail_left > 0) { fail_left--; last_error = fail_code; return fail_code; }
    return HIP_OK;
}

/* The same launch as hipModuleLaunchKernel with the config's values (counted there too). */
hipError_t hipDrvLaunchKernelEx(const HIP_LAUNCH_CONFIG *c, void *f, void **params, void **extra) {
    if (!c || c->numAttrs) return last_error = 1; /* hipErrorInvalidValue */
    __atomic_fetch_add(&n_launch_ex, 1, __ATOMIC_RELAXED);
    return hipModuleLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                                 c->sharedMemBytes, c->hStream, params, extra);
}
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block, size_t shmem) {
    (void)f; (void)block; (void)shmem; *n = 1; return HIP_OK;
}
hipError_t hipGetDeviceCount(int *count) { if (!count) return 1; *count = n_devices; return HIP_OK; }
hipError_t hipGetDevice(int *device) { if (!device) return 1; *device = current_device; return HIP_OK; }
hipError_t hipSetDevice(int device) {
    n_set_device++;
    if (device < 0 || device >= n_devices) return last_error = 101; /* hipErrorInvalidDevice */
    current_device = device;
    return HIP_OK;
}
hipError_t hipStreamIsCapturing(void *s, int *status) {
    (void)s; n_capture_query++;
    if (!status) return 1; /* hipErrorInvalidValue */
    *status = 0;           /* hipStreamCaptureStatusNone */
    return HIP_OK;
}
hipError_t hipStreamGetCaptureInfo(void *s, int *status, unsigned long long *id) {
    (void)s; n_capture_query++;
    if (!status) return 1;
    *status = 0;
    if (id) *id = 0;
    return HIP_OK;
}
hipError_t hipGetLastError(void) { hipError_t e = last_error; last_error = HIP_OK; return e; }
const char *hipGetErrorName(hipError_t e) { return e == HIP_OK ? "hipSuccess" : "hipErrorNoopStub"; }

hipError_t hipDeviceSynchronize(void) { n_sync++; return HIP_OK; }
hipError_t hipStreamSynchronize(void *s) { (void)s; n_sync++; return HIP_OK; }
hipError_t hipEventSynchronize(void *e) { (void)e; n_sync++; return HIP_OK; }
hipError_t hipStreamCreate(void **s) { *s = &token; return HIP_OK; }
hipError_t hipStreamDestroy(void *s) { (void)s; return HIP_OK; }
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; return HIP_OK; }
hipError_t hipEventCreateWithFlags(void **e, unsigned flags) { (void)flags; *e = &token; return HIP_OK; }
hipError_t hipEventRecord(void *e, void *s) { (void)e; (void)s; return HIP_OK; }
hipError_t hipEventDestroy(void *e) { (void)e; return HIP_OK; }

/* Memory: the no-op device has none. Allocation is counted and refused. */
hipError_t hipMalloc(void **p, size_t size) { (void)size; n_malloc++; *p = NULL; return 2; /* hipErrorOutOfMemory */ }
hipError_t hipFree(void *p) { (void)p; return HIP_OK; }
hipError_t hipHostRegister(void *p, size_t size, unsigned flags) { (void)p; (void)size; (void)flags; return HIP_OK; }
hipError_t hipHostUnregister(void *p) { (void)p; return HIP_OK; }
hipError_t hipHostGetDevicePointer(void **d, void *h, unsigned flags) { (void)flags; *d = h; return HIP_OK; }
hipError_t hipMemcpy(void *d, const void *s, size_t n, int kind) { (void)d; (void)s; (void)n; (void)kind; n_memcpy++; return HIP_OK; }
hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, int kind, void *st) {
    (void)d; (void)s; (void)n; (void)kind; (void)st; n_memcpy++; return HIP_OK;
}
hipError_t hipMemset(void *d, int v, size_t n) { (void)d; (void)v; (void)n; return HIP_OK; }
hipError_t hipMemsetD16Async(void *d, unsigned short v, size_t n, void *s) { (void)d; (void)v; (void)n; (void)s; return HIP_OK; }
hipError_t hipMemsetD32Async(void *d, int v, size_t n, void *s) { (void)d; (void)v; (void)n; (void)s; return HIP_OK; }
