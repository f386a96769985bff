/* Stand-in libamdhip64.so.7 for the virtual gfx950 device (tests only).
 *
 * Exports the HIP entry points FlyDSL's libfly_jit_runtime.so links (symbol
 * version hip_4.2). Device memory is host memory. Code objects and launches
 * are handed to Python callbacks (set with vgpu_set_callbacks) which run the
 * emulator. The stub itself never interprets a kernel.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorInvalidImage = 200,
    hipErrorNotFound = 500,
    hipErrorLaunchFailure = 719,
};

typedef int64_t (*vgpu_load_cb)(const void *image, uint64_t size);
typedef int (*vgpu_launch_cb)(int64_t module, const char *name,
                              uint32_t gx, uint32_t gy, uint32_t gz,
                              uint32_t bx, uint32_t by, uint32_t bz,
                              uint32_t shmem, uint64_t stream,
                              void **params, void **extra);

static vgpu_load_cb g_load;
static vgpu_launch_cb g_launch;
static hipError_t g_last_error;

/* failure injection: the next g_fail_count launches return g_fail_code */
static int g_fail_count;
static hipError_t g_fail_code = hipErrorLaunchFailure;

/* every launch attempt (including failed ones): stream handles, in order */
#define VGPU_MAX_RECORDS 4096
static uint64_t g_streams[VGPU_MAX_RECORDS];
static int g_results[VGPU_MAX_RECORDS];
static uint64_t g_launches;
static uint64_t g_calls_get_function, g_calls_load;

struct vgpu_module { int64_t id; };
struct vgpu_function { int64_t module; char name[256]; };
#define VGPU_MAX_FUNCS 1024
static struct vgpu_function g_funcs[VGPU_MAX_FUNCS];
static int g_nfuncs;

void vgpu_set_callbacks(vgpu_load_cb load, vgpu_launch_cb launch) { g_load = load; g_launch = launch; }
void vgpu_fail_launches(int count, int code) { g_fail_count = count; g_fail_code = code; }
int vgpu_fail_pending(void) { return g_fail_count; }
uint64_t vgpu_launch_count(void) { return g_launches; }
uint64_t vgpu_load_count(void) { return g_calls_load; }
uint64_t vgpu_get_function_count(void) { return g_calls_get_function; }
uint64_t vgpu_launch_stream(uint64_t i) { return i < VGPU_MAX_RECORDS ? g_streams[i] : 0; }
int vgpu_launch_result(uint64_t i) { return i < VGPU_MAX_RECORDS ? g_results[i] : -1; }
void vgpu_reset_records(void) { g_launches = 0; g_calls_get_function = 0; g_calls_load = 0; }

static uint64_t elf_size(const unsigned char *p) {
    /* ELF64: the file ends at the last of the section header table and the sections */
    if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2) return 0;
    uint64_t shoff, phoff; uint16_t shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, p + 0x20, 8); memcpy(&shoff, p + 0x28, 8);
    memcpy(&phentsize, p + 0x36, 2); memcpy(&phnum, p + 0x38, 2);
    memcpy(&shentsize, p + 0x3a, 2); memcpy(&shnum, p + 0x3c, 2);
    uint64_t end = shoff + (uint64_t)shentsize * shnum;
    uint64_t pend = phoff + (uint64_t)phentsize * phnum;
    if (pend > end) end = pend;
    for (uint16_t i = 0; i < shnum; i++) {
        const unsigned char *sh = p + shoff + (uint64_t)i * shentsize;
        uint32_t type; uint64_t off, size;
        memcpy(&type, sh + 4, 4); memcpy(&off, sh + 0x18, 8); memcpy(&size, sh + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = off + size;
    }
    return end;
}

hipError_t hipModuleLoadData(void **module, const void *image) {
    g_calls_load++;
    if (!module || !image) return g_last_error = hipErrorInvalidValue;
    uint64_t size = elf_size((const unsigned char *)image);
    if (!size || !g_load) return g_last_error = hipErrorInvalidImage;
    int64_t id = g_load(image, size);
    if (id < 0) return g_last_error = hipErrorInvalidImage;
    struct vgpu_module *m = malloc(sizeof *m);
    if (!m) return g_last_error = hipErrorOutOfMemory;
    m->id = id;
    *module = m;
    return hipSuccess;
}

hipError_t hipModuleUnload(void *module) { free(module); return hipSuccess; }

hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    g_calls_get_function++;
    if (!function || !module || !name || strlen(name) >= 256) return g_last_error = hipErrorInvalidValue;
    int64_t id = ((struct vgpu_module *)module)->id;
    for (int i = 0; i < g_nfuncs; i++)
        if (g_funcs[i].module == id && strcmp(g_funcs[i].name, name) == 0) { *function = &g_funcs[i]; return hipSuccess; }
    if (g_nfuncs >= VGPU_MAX_FUNCS) return g_last_error = hipErrorOutOfMemory;
    g_funcs[g_nfuncs].module = id;
    strcpy(g_funcs[g_nfuncs].name, name);
    *function = &g_funcs[g_nfuncs++];
    return hipSuccess;
}

hipError_t hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                 void *stream, void **params, void **extra) {
    uint64_t n = g_launches++;
    hipError_t rc;
    if (n < VGPU_MAX_RECORDS) g_streams[n] = (uint64_t)(uintptr_t)stream;
    if (g_fail_count > 0) {
        g_fail_count--;
        rc = g_fail_code;
    } else if (!f || !g_launch) {
        rc = hipErrorInvalidValue;
    } else {
        struct vgpu_function *fn = f;
        rc = g_launch(fn->module, fn->name, gx, gy, gz, bx, by, bz, shmem,
                      (uint64_t)(uintptr_t)stream, params, extra);
    }
    if (n < VGPU_MAX_RECORDS) g_results[n] = rc;
    if (rc) g_last_error = rc;
    return rc;
}

hipError_t hipGetLastError(void) { hipError_t e = g_last_error; g_last_error = hipSuccess; return e; }

const char *hipGetErrorName(hipError_t e) {
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorNotFound: return "hipErrorNotFound";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    default: return "hipErrorUnknown";
    }
}

/* device management: one device, id 0 */
hipError_t hipGetDevice(int *d) { if (d) *d = 0; return hipSuccess; }
hipError_t hipSetDevice(int d) { return d == 0 ? hipSuccess : (g_last_error = hipErrorInvalidValue); }
hipError_t hipDeviceSynchronize(void) { return hipSuccess; }

/* memory: device memory is host memory */
hipError_t hipMalloc(void **p, size_t size) {
    if (!p) return hipErrorInvalidValue;
    *p = aligned_alloc(256, (size + 255) & ~(size_t)255);
    return *p || !size ? hipSuccess : (g_last_error = hipErrorOutOfMemory);
}
hipError_t hipFree(void *p) { free(p); return hipSuccess; }
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; memmove(dst, src, n); return hipSuccess; }
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s) { (void)kind; (void)s; memmove(dst, src, n); return hipSuccess; }
hipError_t hipMemset(void *dst, int v, size_t n) { memset(dst, v, n); return hipSuccess; }
hipError_t hipMemsetD32Async(void *dst, int v, size_t count, void *s) {
    (void)s; uint32_t *d = dst; for (size_t i = 0; i < count; i++) d[i] = (uint32_t)v; return hipSuccess;
}
hipError_t hipMemsetD16Async(void *dst, unsigned short v, size_t count, void *s) {
    (void)s; uint16_t *d = dst; for (size_t i = 0; i < count; i++) d[i] = v; return hipSuccess;
}
hipError_t hipHostRegister(void *p, size_t n, unsigned flags) { (void)p; (void)n; (void)flags; return hipSuccess; }
hipError_t hipHostUnregister(void *p) { (void)p; return hipSuccess; }
hipError_t hipHostGetDevicePointer(void **dev, void *host, unsigned flags) { (void)flags; if (dev) *dev = host; return hipSuccess; }

/* streams and events: everything is synchronous */
static char g_handles[64];
static int g_next_handle;
hipError_t hipStreamCreate(void **s) { if (s) *s = &g_handles[(g_next_handle++) % 64]; return hipSuccess; }
hipError_t hipStreamDestroy(void *s) { (void)s; return hipSuccess; }
hipError_t hipStreamSynchronize(void *s) { (void)s; return hipSuccess; }
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; return hipSuccess; }
hipError_t hipEventCreateWithFlags(void **e, unsigned flags) { (void)flags; if (e) *e = &g_handles[(g_next_handle++) % 64]; return hipSuccess; }
hipError_t hipEventDestroy(void *e) { (void)e; return hipSuccess; }
hipError_t hipEventRecord(void *e, void *s) { (void)e; (void)s; return hipSuccess; }
hipError_t hipEventSynchronize(void *e) { (void)e; return hipSuccess; }

hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block, size_t shmem) {
    (void)f; (void)shmem;
    if (n) *n = block > 0 ? (2048 / block > 0 ? 2048 / block : 1) : 0;
    return hipSuccess;
}
