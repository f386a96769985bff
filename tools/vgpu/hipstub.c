/* Stand-in libamdhip64.so.7 for the virtual gfx950 devices (tests only).
 *
 * Exports the HIP entry points FlyDSL's libfly_jit_runtime.so links (symbol
 * version hip_4.2) plus the device, stream-capture and graph calls the
 * dispatcher uses. Device memory is host memory. Code objects and launches
 * are handed to Python callbacks (vgpu_set_callbacks) which run the emulator;
 * the stub itself never interprets a kernel.
 *
 * What it models, following ROCm's clr (hipamd/src: hip_module.cpp,
 * hip_graph.cpp, hip_stream.cpp, hip_internal.hpp), see tools/vgpu/README.md:
 * - N devices (vgpu_set_device_count), the current device per host thread;
 * - a module belongs to the device current at hipModuleLoadData; a launch
 *   goes to its stream's device (NULL stream: the current device), which must
 *   be the current device (else hipErrorInvalidResourceHandle), and the
 *   function's module must be loaded on it (else hipErrorInvalidDevice);
 * - stream capture: launches on a capturing stream are recorded (argument
 *   bytes copied) into a graph; hipGraphLaunch replays them in order;
 *   allocation and synchronisation during capture fail and invalidate it.
 */
#include <pthread.h>
#include <stdint.h>
#include "../hip_launch_config.h"
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200,
    hipErrorInvalidResourceHandle = 400,
    hipErrorIllegalState = 401,
    hipErrorNotFound = 500,
    hipErrorContextIsDestroyed = 709,
    hipErrorLaunchFailure = 719,
    hipErrorStreamCaptureUnsupported = 900,
    hipErrorStreamCaptureInvalidated = 901,
    hipErrorStreamCaptureImplicit = 906,
    hipErrorStreamCaptureWrongThread = 908,
};
enum { CaptureNone = 0, CaptureActive = 1, CaptureInvalidated = 2 };           /* hipStreamCaptureStatus */
enum { ModeGlobal = 0, ModeThreadLocal = 1, ModeRelaxed = 2 };                  /* hipStreamCaptureMode */

typedef int64_t (*vgpu_load_cb)(const void *image, uint64_t size);
typedef int (*vgpu_launch_cb)(int64_t module, const char *name,
                              uint32_t gx, uint32_t gy, uint32_t gz,
                              uint32_t bx, uint32_t by, uint32_t bz,
                              uint32_t shmem, uint64_t stream,
                              void **params, void **extra, int device);
/* sizes of a kernel's explicit arguments, from its metadata; returns their count or -1 */
typedef int (*vgpu_args_cb)(int64_t module, const char *name, uint32_t *sizes, int max);

static vgpu_load_cb g_load;
static vgpu_launch_cb g_launch;
static vgpu_args_cb g_args;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;  /* every registry below; never held across a callback */
static hipError_t g_last_error;

#define VGPU_MAX_DEVICES 16
static int g_device_count = 1;
/* strict mode (vgpu_refuse_loads_during_capture): hipModuleLoadData is refused
 * during a global-mode capture as the unsafe calls are. clr does not refuse it;
 * the tests turn this on to prove the dispatcher never loads a module inside one. */
static int g_strict_loads;
static __thread int t_device;      /* current device of this host thread (HIP: per thread, default 0) */
static __thread char t_self;       /* &t_self identifies the thread that began a capture */

/* failure injection, per call (vgpu_fail_calls): call k lets its next g_fail_after[k] calls
 * through, then its next g_fail_count[k] calls return g_fail_code[k] (and set the pending error,
 * as a real failure does). Launches count only outside a capture. */
enum { FailLaunch, FailSetDevice, FailGetDevice, FailCalls };
static int g_fail_after[FailCalls], g_fail_count[FailCalls];
static hipError_t g_fail_code[FailCalls] = {hipErrorLaunchFailure, hipErrorInvalidDevice, hipErrorInvalidValue};

/* The error this call of `call` fails with by injection, or hipSuccess. */
static hipError_t injected(int call) {
    hipError_t hit = hipSuccess;
    pthread_mutex_lock(&g_lock);
    if (g_fail_after[call] > 0) {
        g_fail_after[call]--;
    } else if (g_fail_count[call] > 0) {
        g_fail_count[call]--;
        hit = g_fail_code[call];
    }
    pthread_mutex_unlock(&g_lock);
    return hit;
}

/* every launch attempt (including failed and captured ones), in order */
#define VGPU_MAX_RECORDS 4096
static uint64_t g_rec_stream[VGPU_MAX_RECORDS];
static int g_rec_result[VGPU_MAX_RECORDS];
static int g_rec_device[VGPU_MAX_RECORDS];
static uint64_t g_launches, g_calls_get_function, g_calls_load, g_calls_foreign_get_function;

struct vgpu_module { int64_t id; int device; };
struct vgpu_function { int64_t module; int device; char name[256]; };
#define VGPU_MAX_FUNCS 65536 /* one process runs the whole suite: about 1700 functions today, each reset reloading */
static struct vgpu_function g_funcs[VGPU_MAX_FUNCS];
static int g_nfuncs;

/* ------------------------------------------------------------------ graphs */
#define VGPU_MAX_PARAMS 64
struct vgpu_node {
    struct vgpu_function *f;
    uint32_t grid[3], block[3], shmem;
    int nparams;
    void *params[VGPU_MAX_PARAMS];  /* copies of the argument bytes, taken at capture */
};
struct vgpu_graph { int device; int n, cap; struct vgpu_node *nodes; };

/* Argument copies carry their size in the 8 bytes before the argument. */
static void *arg_copy(const void *src, uint64_t size) {
    char *p = malloc(size + 8);
    if (!p) return NULL;
    memcpy(p, &size, 8);
    memcpy(p + 8, src, size);
    return p + 8;
}
static uint64_t arg_size(const void *arg) { uint64_t s; memcpy(&s, (const char *)arg - 8, 8); return s; }
static void arg_free(void *arg) { free((char *)arg - 8); }

static void node_free_params(struct vgpu_node *node) {
    for (int j = 0; j < node->nparams; j++) arg_free(node->params[j]);
    node->nparams = 0;
}

static void graph_free(struct vgpu_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) node_free_params(&g->nodes[i]);
    free(g->nodes);
    free(g);
}

static int graph_append(struct vgpu_graph *g, const struct vgpu_node *node) {
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        struct vgpu_node *p = realloc(g->nodes, cap * sizeof *p);
        if (!p) return -1;
        g->nodes = p;
        g->cap = cap;
    }
    g->nodes[g->n++] = *node;
    return 0;
}

static struct vgpu_graph *graph_copy(const struct vgpu_graph *src) {
    struct vgpu_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->device = src->device;
    for (int i = 0; i < src->n; i++) {
        struct vgpu_node node = src->nodes[i];
        node.nparams = 0;
        for (int j = 0; j < src->nodes[i].nparams; j++) {
            const void *a = src->nodes[i].params[j];
            if (!(node.params[j] = arg_copy(a, arg_size(a)))) { node_free_params(&node); graph_free(g); return NULL; }
            node.nparams = j + 1;
        }
        if (graph_append(g, &node)) { node_free_params(&node); graph_free(g); return NULL; }
    }
    return g;
}

/* ------------------------------------------------------------------ streams */
struct vgpu_stream {
    int device;
    int status;                   /* CaptureNone / Active / Invalidated */
    int mode;                     /* capture mode while capturing */
    void *owner;                  /* &t_self of the thread that began the capture */
    uint64_t capture_id;
    struct vgpu_graph *graph;     /* graph being captured */
};
#define VGPU_MAX_STREAMS 65536
static struct vgpu_stream *g_stream_reg[VGPU_MAX_STREAMS];
static int g_nstreams;            /* slots in use are below this */
static uint64_t g_capture_ids;

/* A stream this stub created, or NULL (the null stream, or a handle a test made up:
 * both are treated as streams of the current device that never capture). Lock held. */
static struct vgpu_stream *stream_find(const void *h) {
    if (!h) return NULL;
    for (int i = 0; i < g_nstreams; i++)
        if (g_stream_reg[i] == h) return g_stream_reg[i];
    return NULL;
}

/* clr's CHECK_STREAM_CAPTURE_SUPPORTED (hipMalloc, hipFree, hipHostRegister, hipModuleUnload),
 * for a thread in global capture mode: a capture begun by this thread (global or thread-local
 * mode) or any global-mode capture is invalidated and the call fails. Lock held. */
static int capture_forbids_unsafe_call(void) {
    int hit = 0;
    for (int i = 0; i < g_nstreams; i++) {
        struct vgpu_stream *s = g_stream_reg[i];
        if (!s || s->status != CaptureActive) continue;
        if ((s->owner == &t_self && s->mode != ModeRelaxed) || s->mode == ModeGlobal) {
            s->status = CaptureInvalidated;
            hit = 1;
        }
    }
    return hit;
}

/* clr's CHECK_SUPPORTED_DURING_CAPTURE / CHECK_STREAM_CAPTURING: every capture is invalidated. */
static int invalidate_all_captures(void) {
    int hit = 0;
    for (int i = 0; i < g_nstreams; i++) {
        struct vgpu_stream *s = g_stream_reg[i];
        if (s && s->status == CaptureActive) { s->status = CaptureInvalidated; hit = 1; }
    }
    return hit;
}

static int any_capture_active(void) {
    for (int i = 0; i < g_nstreams; i++)
        if (g_stream_reg[i] && g_stream_reg[i]->status == CaptureActive) return 1;
    return 0;
}

static hipError_t fail(hipError_t e) { g_last_error = e; return e; }

/* ------------------------------------------------------------------ test controls (vgpu_*) */
void vgpu_set_callbacks(vgpu_load_cb load, vgpu_launch_cb launch, vgpu_args_cb args) {
    g_load = load; g_launch = launch; g_args = args;
}
void vgpu_refuse_loads_during_capture(int on) { g_strict_loads = on; }
int vgpu_set_device_count(int n) {
    if (n < 1 || n > VGPU_MAX_DEVICES) return -1;
    g_device_count = n;
    return 0;
}
int vgpu_stream_device(void *s) {
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *st = stream_find(s);
    int d = st ? st->device : -1;  /* -1: not a stream this stub created */
    pthread_mutex_unlock(&g_lock);
    return d;
}
int vgpu_graph_node_count(void *g) { return g ? ((struct vgpu_graph *)g)->n : -1; }
/* The next `count` calls of `call` (0 hipModuleLaunchKernel, 1 hipSetDevice, 2 hipGetDevice)
 * after the next `after` ones return `code`; -1 for an unknown call. */
int vgpu_fail_calls(int call, int after, int count, int code) {
    if (call < 0 || call >= FailCalls || after < 0 || count < 0) return -1;
    pthread_mutex_lock(&g_lock);
    g_fail_after[call] = after;
    g_fail_count[call] = count;
    g_fail_code[call] = code;
    pthread_mutex_unlock(&g_lock);
    return 0;
}
/* Injected failures still to come for `call` (-1: unknown call). */
int vgpu_fail_calls_pending(int call) {
    if (call < 0 || call >= FailCalls) return -1;
    pthread_mutex_lock(&g_lock);
    int n = g_fail_count[call];
    pthread_mutex_unlock(&g_lock);
    return n;
}
/* The calling thread's current device, as torch's current_device() knows it: no HIP call,
 * so no injected failure. */
int vgpu_current_device(void) { return t_device; }
void vgpu_fail_launches(int count, int code) { vgpu_fail_calls(FailLaunch, 0, count, code); }
int vgpu_fail_pending(void) { return vgpu_fail_calls_pending(FailLaunch); }
uint64_t vgpu_launch_count(void) { return g_launches; }
uint64_t vgpu_load_count(void) { return g_calls_load; }
uint64_t vgpu_get_function_count(void) { return g_calls_get_function; }
/* hipModuleGetFunction calls made while the module's device was not current: ROCm 6.x
 * (clr DynCO::getDynFunc, CheckDeviceIdMatch) aborts the process on these. */
uint64_t vgpu_foreign_get_function_count(void) { return g_calls_foreign_get_function; }
uint64_t vgpu_launch_stream(uint64_t i) { return i < VGPU_MAX_RECORDS ? g_rec_stream[i] : 0; }
int vgpu_launch_result(uint64_t i) { return i < VGPU_MAX_RECORDS ? g_rec_result[i] : -1; }
int vgpu_launch_device(uint64_t i) { return i < VGPU_MAX_RECORDS ? g_rec_device[i] : -1; }
/* Abandon every capture (a test that failed mid-capture must not leak it into the next). */
int vgpu_abort_captures(void) {
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nstreams; i++) {
        struct vgpu_stream *s = g_stream_reg[i];
        if (s && s->status != CaptureNone) {
            graph_free(s->graph);
            s->graph = NULL;
            s->status = CaptureNone;
            s->owner = NULL;
            n++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}
void vgpu_reset_records(void) {
    pthread_mutex_lock(&g_lock);
    g_launches = 0; g_calls_get_function = 0; g_calls_load = 0; g_calls_foreign_get_function = 0;
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------ devices */
hipError_t hipGetDeviceCount(int *n) {
    if (!n) return fail(hipErrorInvalidValue);
    *n = g_device_count;
    return hipSuccess;
}
hipError_t hipGetDevice(int *d) {
    if (!d) return fail(hipErrorInvalidValue);
    hipError_t e = injected(FailGetDevice);
    if (e) return fail(e);
    *d = t_device;
    return hipSuccess;
}
hipError_t hipSetDevice(int d) {
    if (d < 0 || d >= g_device_count) return fail(hipErrorInvalidDevice);
    hipError_t e = injected(FailSetDevice);
    if (e) return fail(e);
    t_device = d;
    return hipSuccess;
}
hipError_t hipDeviceSynchronize(void) {
    pthread_mutex_lock(&g_lock);
    int hit = invalidate_all_captures();
    pthread_mutex_unlock(&g_lock);
    return hit ? fail(hipErrorStreamCaptureUnsupported) : hipSuccess;
}

/* ------------------------------------------------------------------ modules */
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

/* Loads on the current device. clr checks no capture state here (hip_module.cpp);
 * in strict mode a global-mode capture refuses it (900) and is invalidated. */
hipError_t hipModuleLoadData(void **module, const void *image) {
    pthread_mutex_lock(&g_lock);
    g_calls_load++;
    int refused = g_strict_loads && capture_forbids_unsafe_call();
    pthread_mutex_unlock(&g_lock);
    if (refused) return fail(hipErrorStreamCaptureUnsupported);
    if (!module || !image) return fail(hipErrorInvalidValue);
    uint64_t size = elf_size((const unsigned char *)image);
    if (!size || !g_load) return fail(hipErrorInvalidImage);
    int64_t id = g_load(image, size);
    if (id < 0) return fail(hipErrorInvalidImage);
    struct vgpu_module *m = malloc(sizeof *m);
    if (!m) return fail(hipErrorOutOfMemory);
    m->id = id;
    m->device = t_device;
    *module = m;
    return hipSuccess;
}

hipError_t hipModuleUnload(void *module) {
    if (!module) return fail(hipErrorInvalidResourceHandle);
    pthread_mutex_lock(&g_lock);
    int hit = capture_forbids_unsafe_call();
    pthread_mutex_unlock(&g_lock);
    if (hit) return fail(hipErrorStreamCaptureUnsupported);
    free(module);  /* function handles stay valid: FlyDSL unloads only at teardown */
    return hipSuccess;
}

/* ROCm 7 clr returns the handle whatever the current device (the launch checks it). */
hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    if (!function || !name || !*name || strlen(name) >= 256) return fail(hipErrorInvalidValue);
    if (!module) return fail(hipErrorInvalidResourceHandle);
    struct vgpu_module *m = module;
    hipError_t rc = hipSuccess;
    pthread_mutex_lock(&g_lock);
    g_calls_get_function++;
    if (m->device != t_device) g_calls_foreign_get_function++;
    int i;
    for (i = 0; i < g_nfuncs; i++)
        if (g_funcs[i].module == m->id && strcmp(g_funcs[i].name, name) == 0) break;
    if (i == g_nfuncs) {
        if (g_nfuncs >= VGPU_MAX_FUNCS) {
            rc = hipErrorOutOfMemory;
        } else {
            g_funcs[i].module = m->id;
            g_funcs[i].device = m->device;
            strcpy(g_funcs[i].name, name);
            g_nfuncs++;
        }
    }
    if (!rc) *function = &g_funcs[i];
    pthread_mutex_unlock(&g_lock);
    return rc ? fail(rc) : hipSuccess;
}

/* Record a launch on a capturing stream (clr capturehipModuleLaunchKernel ->
 * GraphKernelNode::copyParams: validated against the current device, each argument's
 * bytes copied now). */
static hipError_t capture_launch(struct vgpu_stream *s, struct vgpu_function *fn, const uint32_t *grid,
                                 const uint32_t *block, uint32_t shmem, void **params) {
    if (fn->device != t_device) return hipErrorInvalidDevice;
    uint32_t sizes[VGPU_MAX_PARAMS];
    int n = g_args ? g_args(fn->module, fn->name, sizes, VGPU_MAX_PARAMS) : -1;
    if (n < 0) return hipErrorInvalidValue;
    if (n > 0 && !params) return hipErrorInvalidValue;
    struct vgpu_node node = {.f = fn, .shmem = shmem, .nparams = 0};
    memcpy(node.grid, grid, sizeof node.grid);
    memcpy(node.block, block, sizeof node.block);
    for (int i = 0; i < n; i++) {
        node.params[i] = arg_copy(params[i], sizes[i]);
        if (!node.params[i]) { node_free_params(&node); return hipErrorOutOfMemory; }
        node.nparams = i + 1;
    }
    pthread_mutex_lock(&g_lock);
    int ok = s->status == CaptureActive && graph_append(s->graph, &node) == 0;
    hipError_t rc = ok ? hipSuccess
                       : (s->status == CaptureInvalidated ? hipErrorStreamCaptureInvalidated : hipErrorOutOfMemory);
    pthread_mutex_unlock(&g_lock);
    if (!ok) node_free_params(&node);
    return rc;
}

/* A launch on device `device` that passed the checks: the emulator runs it. */
static hipError_t run_launch(struct vgpu_function *fn, const uint32_t *grid, const uint32_t *block, uint32_t shmem,
                             uint64_t stream, void **params, void **extra, int device) {
    if (!g_launch) return hipErrorInvalidValue;
    return g_launch(fn->module, fn->name, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem,
                    stream, params, extra, device);
}

hipError_t hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                 void *stream, void **params, void **extra) {
    const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    struct vgpu_function *fn = f;
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_launches++;
    struct vgpu_stream *s = stream_find(stream);
    int device = s ? s->device : t_device;  /* hip::Stream::DeviceId: NULL stream = current device */
    int status = s ? s->status : CaptureNone;
    pthread_mutex_unlock(&g_lock);
    hipError_t inject = status == CaptureNone ? injected(FailLaunch) : hipSuccess;
    if (n < VGPU_MAX_RECORDS) { g_rec_stream[n] = (uint64_t)(uintptr_t)stream; g_rec_device[n] = device; }

    hipError_t rc;
    if (status == CaptureActive) {           /* clr STREAM_CAPTURE comes before every device check */
        rc = !fn ? hipErrorInvalidResourceHandle : capture_launch(s, fn, grid, block, shmem, params);
    } else if (status == CaptureInvalidated) {
        rc = hipErrorStreamCaptureInvalidated;
    } else if (inject) {
        rc = inject;
    } else if (!fn) {
        rc = hipErrorInvalidResourceHandle;
    } else if (device != t_device) {         /* clr ihipModuleLaunchKernel: stream's device != current */
        rc = hipErrorInvalidResourceHandle;
    } else if (fn->device != device) {       /* clr ihipLaunchKernel_validate: no kernel for that device */
        rc = hipErrorInvalidDevice;
    } else {
        rc = run_launch(fn, grid, block, shmem, (uint64_t)(uintptr_t)stream, params, extra, device);
    }
    if (n < VGPU_MAX_RECORDS) g_rec_result[n] = rc;
    if (rc) g_last_error = rc;
    return rc;
}


/* clr hipDrvLaunchKernelEx without attributes: hipModuleLaunchKernel's launch with the
 * config's values (ROCm's current runtimes capture it the same way; the package uses it
 * on the null stream only, which never captures). */
hipError_t hipDrvLaunchKernelEx(const HIP_LAUNCH_CONFIG *c, void *f, void **params, void **extra) {
    if (!f) return fail(hipErrorInvalidResourceHandle);
    if (!c || c->numAttrs) return fail(hipErrorInvalidValue);
    return hipModuleLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                                 c->sharedMemBytes, c->hStream, params, extra);
}

hipError_t hipGetLastError(void) { hipError_t e = g_last_error; g_last_error = hipSuccess; return e; }

const char *hipGetErrorName(hipError_t e) {
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorInvalidResourceHandle: return "hipErrorInvalidResourceHandle";
    case hipErrorIllegalState: return "hipErrorIllegalState";
    case hipErrorNotFound: return "hipErrorNotFound";
    case hipErrorContextIsDestroyed: return "hipErrorContextIsDestroyed";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    case hipErrorStreamCaptureUnsupported: return "hipErrorStreamCaptureUnsupported";
    case hipErrorStreamCaptureInvalidated: return "hipErrorStreamCaptureInvalidated";
    case hipErrorStreamCaptureImplicit: return "hipErrorStreamCaptureImplicit";
    case hipErrorStreamCaptureWrongThread: return "hipErrorStreamCaptureWrongThread";
    default: return "hipErrorUnknown";
    }
}

/* ------------------------------------------------------------------ memory: device memory is host memory */
static hipError_t unsafe_during_capture(void) {
    pthread_mutex_lock(&g_lock);
    int hit = capture_forbids_unsafe_call();
    pthread_mutex_unlock(&g_lock);
    return hit ? fail(hipErrorStreamCaptureUnsupported) : hipSuccess;
}
static hipError_t sync_during_capture(void) {
    pthread_mutex_lock(&g_lock);
    int hit = invalidate_all_captures();
    pthread_mutex_unlock(&g_lock);
    return hit ? fail(hipErrorStreamCaptureImplicit) : hipSuccess;
}
/* async copies/sets on a capturing stream would become graph nodes: not modelled, refused */
static hipError_t async_on_capturing(void *stream) {
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(stream);
    int st = s ? s->status : CaptureNone;
    pthread_mutex_unlock(&g_lock);
    return st == CaptureNone ? hipSuccess : fail(hipErrorStreamCaptureUnsupported);
}

hipError_t hipMalloc(void **p, size_t size) {
    if (!p) return fail(hipErrorInvalidValue);
    if (unsafe_during_capture()) return hipErrorStreamCaptureUnsupported;
    *p = aligned_alloc(256, (size + 255) & ~(size_t)255);
    return *p || !size ? hipSuccess : fail(hipErrorOutOfMemory);
}
hipError_t hipFree(void *p) {
    if (unsafe_during_capture()) return hipErrorStreamCaptureUnsupported;
    free(p);
    return hipSuccess;
}
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) {
    (void)kind;
    if (sync_during_capture()) return hipErrorStreamCaptureImplicit;
    memmove(dst, src, n);
    return hipSuccess;
}
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s) {
    (void)kind;
    if (async_on_capturing(s)) return hipErrorStreamCaptureUnsupported;
    memmove(dst, src, n);
    return hipSuccess;
}
hipError_t hipMemset(void *dst, int v, size_t n) {
    if (sync_during_capture()) return hipErrorStreamCaptureImplicit;
    memset(dst, v, n);
    return hipSuccess;
}
hipError_t hipMemsetD32Async(void *dst, int v, size_t count, void *s) {
    if (async_on_capturing(s)) return hipErrorStreamCaptureUnsupported;
    uint32_t *d = dst; for (size_t i = 0; i < count; i++) d[i] = (uint32_t)v;
    return hipSuccess;
}
hipError_t hipMemsetD16Async(void *dst, unsigned short v, size_t count, void *s) {
    if (async_on_capturing(s)) return hipErrorStreamCaptureUnsupported;
    uint16_t *d = dst; for (size_t i = 0; i < count; i++) d[i] = v;
    return hipSuccess;
}
hipError_t hipHostRegister(void *p, size_t n, unsigned flags) {
    (void)p; (void)n; (void)flags;
    return unsafe_during_capture() ? hipErrorStreamCaptureUnsupported : hipSuccess;
}
hipError_t hipHostUnregister(void *p) { (void)p; return hipSuccess; }
hipError_t hipHostGetDevicePointer(void **dev, void *host, unsigned flags) { (void)flags; if (dev) *dev = host; return hipSuccess; }

/* ------------------------------------------------------------------ streams and events (synchronous) */
hipError_t hipStreamCreate(void **out) {
    if (!out) return fail(hipErrorInvalidValue);
    struct vgpu_stream *s = calloc(1, sizeof *s);
    if (!s) return fail(hipErrorOutOfMemory);
    s->device = t_device;
    pthread_mutex_lock(&g_lock);
    int i;
    for (i = 0; i < g_nstreams && g_stream_reg[i]; i++) {}
    if (i < VGPU_MAX_STREAMS) g_stream_reg[i] = s;
    if (i == g_nstreams && i < VGPU_MAX_STREAMS) g_nstreams++;
    pthread_mutex_unlock(&g_lock);
    if (i == VGPU_MAX_STREAMS) { free(s); return fail(hipErrorOutOfMemory); }
    *out = s;
    return hipSuccess;
}
hipError_t hipStreamDestroy(void *h) {
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(h);
    if (s) {
        for (int i = 0; i < g_nstreams; i++) if (g_stream_reg[i] == s) g_stream_reg[i] = NULL;
        graph_free(s->graph);
        free(s);
    }
    pthread_mutex_unlock(&g_lock);
    return hipSuccess;
}
/* clr hipStreamSynchronize_common: a capturing stream, or (global mode) any global capture,
 * is invalidated and the call fails; the null stream is not checked. */
hipError_t hipStreamSynchronize(void *h) {
    if (!h) return hipSuccess;
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(h);
    int hit = 0;
    if (s && s->status != CaptureNone) {
        s->status = CaptureInvalidated;
        hit = 1;
    } else {
        for (int i = 0; i < g_nstreams; i++) {
            struct vgpu_stream *o = g_stream_reg[i];
            if (o && o->status == CaptureActive && o->mode == ModeGlobal) { o->status = CaptureInvalidated; hit = 1; }
        }
    }
    pthread_mutex_unlock(&g_lock);
    return hit ? fail(hipErrorStreamCaptureUnsupported) : hipSuccess;
}
static char g_events[64];
static int g_next_event;
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; return hipSuccess; }
hipError_t hipEventCreateWithFlags(void **e, unsigned flags) { (void)flags; if (e) *e = &g_events[(g_next_event++) % 64]; return hipSuccess; }
hipError_t hipEventDestroy(void *e) { (void)e; return hipSuccess; }
hipError_t hipEventRecord(void *e, void *s) { (void)e; return async_on_capturing(s); }
hipError_t hipEventSynchronize(void *e) { (void)e; return hipSuccess; }

/* ------------------------------------------------------------------ stream capture (clr hip_graph.cpp) */
hipError_t hipStreamBeginCapture(void *h, int mode) {
    if (!h) return fail(hipErrorStreamCaptureUnsupported);  /* never on the null stream */
    if (mode < ModeGlobal || mode > ModeRelaxed) return fail(hipErrorInvalidValue);
    struct vgpu_graph *g = calloc(1, sizeof *g);
    if (!g) return fail(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(h);
    hipError_t rc = hipSuccess;
    if (!s) {
        rc = hipErrorContextIsDestroyed;         /* hip::isValid fails: not a stream */
    } else if (s->status == CaptureActive) {
        rc = hipErrorIllegalState;
    } else {
        graph_free(s->graph);
        g->device = s->device;
        s->graph = g;
        s->status = CaptureActive;
        s->mode = mode;
        s->owner = &t_self;
        s->capture_id = ++g_capture_ids;
        g = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    graph_free(g);
    return rc ? fail(rc) : hipSuccess;
}

/* The null stream while any capture is active: clr returns hipErrorStreamCaptureImplicit. */
hipError_t hipStreamGetCaptureInfo(void *h, int *status, unsigned long long *id) {
    if (!status) return fail(hipErrorInvalidValue);
    hipError_t rc = hipSuccess;
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(h);
    if (!h && any_capture_active()) {
        rc = hipErrorStreamCaptureImplicit;
    } else {
        *status = s ? s->status : CaptureNone;
        if (id) *id = s && s->status != CaptureNone ? s->capture_id : 0;
    }
    pthread_mutex_unlock(&g_lock);
    return rc ? fail(rc) : hipSuccess;
}
hipError_t hipStreamIsCapturing(void *h, int *status) { return hipStreamGetCaptureInfo(h, status, NULL); }

hipError_t hipStreamEndCapture(void *h, void **graph) {
    if (!graph) return fail(hipErrorInvalidValue);
    if (!h) return fail(hipErrorIllegalState);
    hipError_t rc = hipSuccess;
    struct vgpu_graph *dead = NULL;
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(h);
    if (!s) {
        rc = hipErrorContextIsDestroyed;
    } else if (s->status == CaptureNone) {
        rc = hipErrorIllegalState;
    } else if (s->mode != ModeRelaxed && s->owner != &t_self) {
        rc = hipErrorStreamCaptureWrongThread;
    } else {
        if (s->status == CaptureInvalidated) {
            *graph = NULL;
            dead = s->graph;
            rc = hipErrorStreamCaptureInvalidated;
        } else {
            *graph = s->graph;
        }
        s->graph = NULL;
        s->status = CaptureNone;
        s->owner = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    graph_free(dead);
    return rc ? fail(rc) : hipSuccess;
}

hipError_t hipGraphDestroy(void *g) {
    if (!g) return fail(hipErrorInvalidValue);
    graph_free(g);
    return hipSuccess;
}

/* The executable graph is a copy: the graph may be destroyed after instantiation. */
hipError_t hipGraphInstantiate(void **exec, void *graph, void *error_node, char *log, size_t log_size) {
    (void)error_node;
    if (log && log_size) log[0] = 0;
    if (!exec || !graph) return fail(hipErrorInvalidValue);
    struct vgpu_graph *copy = graph_copy(graph);
    if (!copy) return fail(hipErrorOutOfMemory);
    *exec = copy;
    return hipSuccess;
}
hipError_t hipGraphExecDestroy(void *exec) {
    if (!exec) return fail(hipErrorInvalidValue);
    graph_free(exec);
    return hipSuccess;
}

/* Replays the recorded launches in order on the stream's device (clr GraphKernelNode::CreateCommand
 * validates each function against that device); stops at the first failure. */
hipError_t hipGraphLaunch(void *exec, void *stream) {
    if (!exec) return fail(hipErrorInvalidValue);
    struct vgpu_graph *g = exec;
    pthread_mutex_lock(&g_lock);
    struct vgpu_stream *s = stream_find(stream);
    int device = s ? s->device : t_device;
    int status = s ? s->status : CaptureNone;
    pthread_mutex_unlock(&g_lock);
    if (status != CaptureNone) return fail(hipErrorStreamCaptureUnsupported);  /* graph-in-graph: not modelled */
    for (int i = 0; i < g->n; i++) {
        struct vgpu_node *node = &g->nodes[i];
        pthread_mutex_lock(&g_lock);
        uint64_t n = g_launches++;
        pthread_mutex_unlock(&g_lock);
        hipError_t rc = node->f->device != device
                            ? hipErrorInvalidDevice
                            : run_launch(node->f, node->grid, node->block, node->shmem,
                                         (uint64_t)(uintptr_t)stream, node->params, NULL, device);
        if (n < VGPU_MAX_RECORDS) {
            g_rec_stream[n] = (uint64_t)(uintptr_t)stream;
            g_rec_device[n] = device;
            g_rec_result[n] = rc;
        }
        if (rc) return fail(rc);
    }
    return hipSuccess;
}

hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block, size_t shmem) {
    (void)f; (void)shmem;
    if (n) *n = block > 0 ? (2048 / block > 0 ? 2048 / block : 1) : 0;
    return hipSuccess;
}
