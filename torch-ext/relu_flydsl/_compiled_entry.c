/* The compiled entry: relu(x, out, rung) replayed from what the Python general path decided.
 *
 * The general path (_dispatch.run) validates a call, chooses its path, plans it, loads the
 * module, runs the canary and launches; for a single-launch kernel it then adds a ready entry
 * here, keyed by (rung as asked, dtype, numel, x & 15, out & 15, device). A later call with the
 * same key is served by serve() alone: it reads the tensors' memory description through torch's
 * DLPack C exchange API (no Python attribute calls), checks what it can see there, finds the
 * entry and makes one launch on the tensor's device and its current stream, then bumps out's
 * version counter as torch's out= ops do (autograd's check on saved tensors). The layout is not in
 * the key: the general path serves contiguous x and out, or any dense layout with out of x's
 * strides, with the launch it makes for a contiguous tensor of that size (relu is elementwise: one
 * span of numel elements from the data pointer); serve() checks the same rule on every call and
 * describes such a span as 1-D. Before all that it asks libtorch what the memory description does
 * not say (torch_decides: subclasses, torch.func transforms, dispatch modes, autograd, neg bits, an
 * inference-tensor out); tracing (where Dynamo sees it) and forward AD are asked in Python before
 * the call (_relu.relu). Anything else returns None: the general path takes the call and gives the
 * same answer, result, error and count. Each check made per call is tagged with its rule's name
 * ("rule: name"); docs/compiled-entry.md lists the rules, why, and the test of each.
 *
 * Off the kernel path (CPU, CUDA, a ROCm device of another arch) it serves torch's fallback
 * as the general path would (torch.relu, or torch.clamp_min into out) and counts it.
 *
 * CPython limited API 3.10 (one binary for 3.10-3.13), no library linked but libc; the HIP
 * entry points are the runtime's that the Python side found loaded (_hip.py), passed in as
 * addresses. Built by flash_relu_rocm/build.py, checked against its sha256 before it loads
 * (_compiled_entry.py). Everything here runs with the GIL held; serve() never releases it, but
 * what it calls may run Python (torch.empty_like releases the GIL; a garbage collection, a ctypes
 * callback of the virtual device): another thread can then add, clear or replace entries. So no
 * pointer into the table or the devices outlives a call that can run Python: serve() copies the
 * entry it found and holds its own references.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- DLPack 1.x: the parts of dlpack.h used here (a stable C ABI) ---- */
enum { kDLCPU = 1, kDLROCM = 10 };
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape, *strides; /* strides NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct {
    DLPackVersion version;
    void *prev_api;
    void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync, *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} DLPackExchangeAPI;

/* ---- HIP: hip_runtime_api.h's HIP_LAUNCH_CONFIG (x86-64, as _launch.LaunchConfig) ---- */
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream, *attrs;
    unsigned numAttrs;
} LaunchConfig;
_Static_assert(sizeof(LaunchConfig) == 56 && offsetof(LaunchConfig, hStream) == 32, "HIP_LAUNCH_CONFIG layout");
typedef int (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                            void **, void **);
typedef int (*LaunchEx)(const LaunchConfig *, void *, void **, void **);
typedef int (*GetDevice)(int *);
typedef int (*SetDevice)(int);
typedef int (*GetLastError)(void);

/* ---- torch's allocation for relu(x), without torch.empty_like's Python argument parsing ----
 * aoti_torch_empty_strided, aoti_torch_get_data_ptr and aoti_torch_delete_tensor_object: libtorch's
 * stable C shim (an AtenTensorHandle is an at::Tensor *); THPVariable_Wrap(const at::TensorBase &):
 * libtorch_python's exported wrapper every C++ extension returns tensors through, found by its
 * mangled name, which encodes the argument type. _compiled_entry.py finds all four; where one is
 * missing, relu(x) allocates with torch.empty_like(x). */
typedef int32_t (*EmptyStrided)(int64_t ndim, const int64_t *sizes, const int64_t *strides, int32_t dtype,
                                int32_t device_type, int32_t device_index, void **handle);
typedef int32_t (*DeleteTensor)(void *handle);
typedef int32_t (*DataPtr)(void *handle, void **data);
typedef PyObject *(*WrapTensor)(const void *tensor);

/* ---- what the memory description does not say, asked of libtorch ----
 * Whether torch would hand the call elsewhere (a subclass, a torch.func transform, a dispatch mode),
 * record autograd (an operand requiring grad) or refuse to write out (an inference tensor), and
 * whether an operand is a neg-bit view (its memory holds -x) or has no memory of its own (a ZeroTensor,
 * a functional tensor: a view of one has its offset from NULL as its data pointer, as DLPack gives it).
 * Seven exported libtorch functions whose arguments and results are C types and pointers, found by their
 * mangled names, and the at::Tensor inside torch's tensor object (THPVariable: PyObject_HEAD, then the
 * at::Tensor). Each is a few instructions; the same questions asked through torch's Python API cost
 * 0.36-0.8 us a call. An eighth, torch::autograd::impl::bump_version(const at::Tensor &), bumps the
 * version counter of an out the kernel wrote (torch's ADInplaceOrView kernel does it for clamp_min's
 * out=): it throws only for an undefined or an inference tensor, which torch_decides leaves to the
 * general path. _compiled_entry.py binds them only after they gave torch's own answers on probe
 * tensors; where one is missing or answers otherwise, the entry does not load. */
typedef int64_t (*ModeCount)(void);              /* c10::impl::TorchDispatchModeTLS::stack_len() */
typedef void *const *(*LayerStack)(void);        /* at::functorch::getDynamicLayerStack(): its std::vector */
typedef _Bool (*TensorFlag)(const void *tensor); /* is_neg, is_inference, _is_zerotensor, isFunctionalTensor */
typedef _Bool (*ImplFlag)(const void *impl);     /* c10::TensorImpl::requires_grad() const */
typedef void (*Bump)(const void *tensor);        /* torch::autograd::impl::bump_version(const at::Tensor &) */

static PyObject *tensor_type; /* torch.Tensor itself: a subclass may override anything */
static Py_ssize_t tensor_at;      /* where a torch.Tensor object holds its at::Tensor */
static ModeCount dispatch_modes;
static LayerStack functorch_layers;
static TensorFlag is_neg, is_inference, is_zero, is_functional;
static ImplFlag requires_grad;
static Bump bump_version;

static const void *tensor_of(PyObject *t) { return (const char *)t + tensor_at; } /* an at::Tensor * */
static const void *impl_of(const void *tensor) { return *(void *const *)tensor; } /* its TensorImpl * */

/* Why the general path must take relu(x, out), or NULL: asked in this order, so that the object
 * is an exact torch.Tensor before its at::Tensor is read. */
static const char *torch_decides(PyObject *x, PyObject *out) {
    if (tensor_type == NULL) return "libtorch's answers not bound"; /* rule: torch */
    if ((PyObject *)Py_TYPE(x) != tensor_type || (out != Py_None && (PyObject *)Py_TYPE(out) != tensor_type))
        return "not an exact torch.Tensor"; /* rule: torch */
    if (dispatch_modes() != 0) return "a dispatch mode"; /* rule: torch */
    void *const *layers = functorch_layers(); /* std::vector: begin, end, end of storage */
    if (layers[0] != layers[1]) return "a torch.func transform"; /* rule: torch */
    const void *xt = tensor_of(x);
    if (requires_grad(impl_of(xt))) return "x requires grad"; /* rule: grad */
    if (is_neg(xt)) return "x is a neg-bit view"; /* rule: neg */
    if (is_zero(xt) || is_functional(xt)) return "x has no memory of its own"; /* rule: no-storage */
    if (out != Py_None) {
        const void *yt = tensor_of(out);
        if (requires_grad(impl_of(yt))) return "out requires grad"; /* rule: grad */
        if (is_neg(yt)) return "out is a neg-bit view"; /* rule: neg */
        if (is_zero(yt) || is_functional(yt)) return "out has no memory of its own"; /* rule: no-storage */
        if (is_inference(yt)) return "out is an inference tensor"; /* rule: inference */
    }
    return NULL;
}

/* ---- the table of ready entries ---- */
typedef struct {
    int64_t numel;  /* 0: empty slot (no entry has numel 0) */
    int32_t device;
    uint16_t dtype; /* DLDataType code << 8 | bits */
    uint8_t rung;   /* 0: the default rung, i: the i-th rung name */
    uint8_t align;  /* (x & 15) << 4 | (out & 15) */
} Key;
typedef struct {
    Key key;
    void *function;
    LaunchConfig config; /* grid and block; hStream set per launch */
    PyObject *hit;       /* its dispatch_stats() counter's hit() */
    PyObject *what;      /* "rung v5, bfloat16": for the launch error */
} Entry;

#define SLOTS 8192 /* a power of two, twice the most entries _state.ENTRIES_MAX allows */
#define DEVICES 64

typedef struct {
    int known, gfx950;
    PyObject *arch_hit; /* its fallback counter when not a gfx950 */
} Device;

static Entry table[SLOTS];
static int n_entries, entries_max; /* past entries_max (_state.ENTRIES_MAX) the table starts over */
static Device devices[DEVICES];

static const DLPackExchangeAPI *api;
static LaunchKernel launch_kernel;
static LaunchEx launch_ex; /* NULL: the runtime has no hipDrvLaunchKernelEx */
static GetDevice get_device;
static SetDevice set_device;
static GetLastError get_last_error;

#define ALLOC_DTYPES 4
static EmptyStrided empty_strided; /* NULL: torch.empty_like(x) */
static DeleteTensor delete_tensor;
static DataPtr data_ptr;
static WrapTensor wrap_tensor;
static ImplFlag has_names;         /* at::impl::has_names (torches with named tensors), else NULL */
static int32_t shim_cpu, shim_cuda; /* the shim's device types */
static int alloc_dtype[ALLOC_DTYPES];  /* DLPack dtype keys ... */
static int32_t shim_dtype[ALLOC_DTYPES]; /* ... and the shim's codes for them */

/* The stand-in devices of the virtual gfx950 and the host-time benchmark: CPU tensors count as
 * device memory. describe() turns their memory description into a ROCm one (device from
 * seam_device_of, NULL: device 0; a negative answer: host memory, left a CPU tensor), so everything
 * after it runs the ROCm branches; only the stream
 * (seam_stream_of, NULL: torch's CPU stream) and the allocation's device (presented_empty_strided:
 * torch's CPU, the device asked recorded for the tests) are stood in for. */
static int present_cpu;
static int (*seam_device_of)(uint64_t pointer);
static uint64_t (*seam_stream_of)(int device);
static int32_t asked_device[2] = {-1, -1}; /* the shim's device type and index new_like asked last */

static PyObject *env_data, *env_keys[3], *env_seen[3]; /* os.environ._data, the three keys, their values */
static int disabled;                                    /* the kill switch, as the settings read it */
/* Changed by every clear(), hip() and present_cpu(): a call that saw another generation before it
 * ran Python (an allocation, a callback) was decided under settings or a runtime since replaced. */
static uint64_t generation;
static PyObject *rung_names;                            /* ("v1", ..., "v5") */
static PyObject *torch_relu, *torch_clamp_min, *torch_empty_like, *zero;
static PyObject *off_hit, *disabled_hit, *overlap_message;

static uint64_t key_hash(const Key *k) {
    uint64_t h = (uint64_t)k->numel * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)k->device << 32 | (uint64_t)k->dtype << 16 | (uint64_t)k->rung << 8 | k->align) * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 29);
}

static int key_equal(const Key *a, const Key *b) {
    return a->numel == b->numel && a->device == b->device && a->dtype == b->dtype && a->rung == b->rung &&
           a->align == b->align;
}

static Entry *find(const Key *k) {
    for (uint64_t i = key_hash(k) & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
        Entry *e = &table[i];
        if (e->key.numel == 0) return NULL;
        if (key_equal(&e->key, k)) return e;
    }
}

static void clear_table(void) {
    for (int i = 0; i < SLOTS; i++) {
        if (table[i].key.numel) {
            Py_DecRef(table[i].hit);
            Py_DecRef(table[i].what);
        }
    }
    memset(table, 0, sizeof table);
    n_entries = 0;
}

static void clear_devices(void) {
    for (int i = 0; i < DEVICES; i++) Py_XDECREF(devices[i].arch_hit);
    memset(devices, 0, sizeof devices);
}

/* ---- what serve() reads of a tensor ---- */
static uint64_t address(const DLTensor *t) { return (uint64_t)(uintptr_t)t->data + t->byte_offset; }

/* The tensor's memory description (0), or non-zero where torch has none (sparse, nested, ...). */
static int describe(PyObject *tensor, DLTensor *t) {
    if (api->dltensor_from_py_object_no_sync(tensor, t) != 0) return -1;
    if (present_cpu && t->device.device_type == kDLCPU) {
        int device = seam_device_of ? seam_device_of(address(t)) : 0;
        if (device >= 0) { /* device memory of the stand-in */
            t->device.device_type = kDLROCM;
            t->device.device_id = device;
        }
    }
    return 0;
}

static int dtype_key(DLDataType t) { return t.lanes == 1 ? t.code << 8 | t.bits : -1; }

static int64_t numel_of(const DLTensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* torch's is_contiguous(): row-major strides, size-1 dimensions ignored, empty tensors contiguous. */
static int contiguous(const DLTensor *t) {
    if (t->strides == NULL || numel_of(t) == 0) return 1;
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (t->strides[d] != expected) return 0;
        expected *= t->shape[d];
    }
    return 1;
}

static int same_shape(const DLTensor *a, const DLTensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Every stride equal, size-1 dimensions' too (torch's x.stride() == out.stride()); shapes equal. */
static int same_strides(const DLTensor *a, const DLTensor *b) {
    if (a->strides == NULL || b->strides == NULL) return a->strides == b->strides;
    for (int d = 0; d < a->ndim; d++)
        if (a->strides[d] != b->strides[d]) return 0;
    return 1;
}

/* _dispatch.dense(): non-overlapping and dense in some dimension order (size-1 dimensions
 * ignored), so its elements fill exactly numel slots from the data pointer on. */
static int dense(const DLTensor *t) {
    if (t->strides == NULL) return 1;
    if (t->ndim > 64) return 0;
    int order[64], n = 0;
    for (int d = 0; d < t->ndim; d++) { /* dimensions of size > 1, by stride (insertion sort) */
        if (t->shape[d] == 1) continue;
        int i = n++;
        while (i > 0 && t->strides[order[i - 1]] > t->strides[d]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = d;
    }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[order[i]] != expected) return 0;
        expected *= t->shape[order[i]];
    }
    return 1;
}

/* Describes t as the 1-D span of its numel elements (span: numel, then stride 1): what the kernel
 * sees of a dense layout, and of out with exactly its strides. */
static void as_span(DLTensor *t, int64_t span[2]) {
    span[0] = numel_of(t);
    span[1] = 1;
    t->ndim = 1;
    t->shape = &span[0];
    t->strides = &span[1];
}

/* fallback_reason's rule beyond contiguous x and out: any dense layout (a transpose, channels_last,
 * any dense permutation), out (y; NULL for relu(x), whose output gets x's strides) with exactly
 * x's strides, size-1 dimensions' too. Such x and y are described as their spans; others are
 * left as they are (serve() then leaves them to the general path unless both are contiguous). */
static void dense_spans(DLTensor *x, DLTensor *y, int64_t x_span[2], int64_t y_span[2]) {
    if (contiguous(x) && (y == NULL || contiguous(y))) return; /* as they are */
    if (y != NULL && (!same_shape(x, y) || !same_strides(x, y))) return;
    if (!dense(x)) return;
    as_span(x, x_span);
    if (y != NULL) as_span(y, y_span);
}

/* dtypes the fallback hands to torch's relu here: float16/32/64, bfloat16, uint8, int8/16/32/64;
 * any other goes the general path (which raises for bool and complex). */
static int plain_dtype(int dt) {
    switch (dt) {
    case 2 << 8 | 16: case 2 << 8 | 32: case 2 << 8 | 64: case 4 << 8 | 16: case 1 << 8 | 8:
    case 0 << 8 | 8: case 0 << 8 | 16: case 0 << 8 | 32: case 0 << 8 | 64:
        return 1;
    }
    return 0;
}

/* The rung as asked: 0 for None, i for the i-th name, -1 for anything else. */
static int rung_index(PyObject *rung) {
    if (rung == Py_None) return 0;
    if (!PyUnicode_CheckExact(rung)) return -1;
    Py_ssize_t n = PyTuple_Size(rung_names);
    for (Py_ssize_t i = 0; i < n; i++) {
        int c = PyUnicode_Compare(rung, PyTuple_GetItem(rung_names, i));
        if (c == 0) return (int)i + 1;
        if (c == -1 && PyErr_Occurred()) PyErr_Clear();
    }
    return -1;
}

/* The settings are those the general path read last: any change goes back to it (it re-reads
 * them and clears this table). */
static int env_current(void) {
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyDict_GetItem(env_data, env_keys[i]); /* borrowed, NULL if unset */
        if (v == env_seen[i]) continue;
        if (v == NULL || env_seen[i] == NULL) return 0;
        int eq = PyObject_RichCompareBool(v, env_seen[i], Py_EQ);
        if (eq != 1) {
            if (eq < 0) PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Counts a served call: steals the caller's references to hit and result. */
static PyObject *count(PyObject *hit, PyObject *result) {
    PyObject *r = PyObject_CallNoArgs(hit);
    Py_DecRef(hit);
    if (r == NULL) {
        Py_DecRef(result);
        return NULL;
    }
    Py_DecRef(r);
    return result;
}

/* torch's kernel, as the general path's fallback runs it; None when torch refuses before writing
 * (autograd, a partial overlap, mkldnn: RuntimeError), so the general path says why. torch may
 * release the GIL and another thread clear the devices: it holds its own reference to hit. torch
 * bumps out's version counter itself here. */
static PyObject *fallback(PyObject *x, PyObject *out, PyObject *counter) {
    PyObject *r, *hit = counter;
    Py_IncRef(hit);
    if (out == Py_None) {
        r = PyObject_CallFunctionObjArgs(torch_relu, x, NULL);
    } else {
        PyObject *args = PyTuple_Pack(2, x, zero), *kw = PyDict_New();
        if (args == NULL || kw == NULL || PyDict_SetItemString(kw, "out", out) < 0) {
            Py_XDECREF(args);
            Py_XDECREF(kw);
            Py_DecRef(hit);
            return NULL;
        }
        r = PyObject_Call(torch_clamp_min, args, kw);
        Py_DecRef(args);
        Py_DecRef(kw);
        if (r != NULL) {
            Py_DecRef(r);
            Py_IncRef(out);
            r = out;
        }
    }
    if (r == NULL) {
        Py_DecRef(hit);
        if (out != Py_None && PyErr_ExceptionMatches(PyExc_RuntimeError)) { /* rule: refused */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return NULL;
    }
    return count(hit, r);
}

static int device_of(const DLTensor *t) { return t->device.device_id; }

static void *stream_of(int device) {
    if (present_cpu && seam_stream_of) return (void *)(uintptr_t)seam_stream_of(device);
    void *s = NULL;
    if (api->current_work_stream(present_cpu ? kDLCPU : kDLROCM, device, &s) != 0) return (void *)-1;
    return s;
}

/* The general path's error (_hip._check) for a failed runtime call: the error taken, then raised.
 * index: hipSetDevice's argument, or -1. */
static PyObject *hip_failed(const char *what, int index, int err) {
    get_last_error();
    if (index < 0)
        PyErr_Format(PyExc_RuntimeError, "relu_flydsl: %s failed with HIP error %d", what, err);
    else
        PyErr_Format(PyExc_RuntimeError, "relu_flydsl: %s(%d) failed with HIP error %d", what, index, err);
    return NULL;
}

/* The shim's allocation for presented CPU tensors: on torch's CPU, whatever device new_like asked
 * for, which it records (allocated_on() returns it). */
static int32_t presented_empty_strided(int64_t ndim, const int64_t *sizes, const int64_t *strides, int32_t dtype,
                                       int32_t device_type, int32_t device_index, void **handle) {
    asked_device[0] = device_type;
    asked_device[1] = device_index;
    return empty_strided(ndim, sizes, strides, dtype, shim_cpu, 0, handle);
}

/* A new tensor as torch.empty_like(x) makes it for a dense x (x's sizes and strides, dtype and
 * device; ROCm devices are "cuda" to torch), its address in *data: through the shim where bound and
 * x has no names (empty_like keeps them; has_names bound only on torches with named tensors), else
 * empty_like itself (also where the shim fails, so that torch raises its own error, out of memory
 * included). x is an exact torch.Tensor (torch_decides). presented: CPU tensors stand for device
 * memory (the allocation is recorded); *via_shim: whether the shim made it. */
static PyObject *new_like(PyObject *x, const DLTensor *t, int dt, uint64_t *data, int presented, int *via_shim) {
    int i = 0;
    *via_shim = 0;
    while (i < ALLOC_DTYPES && alloc_dtype[i] != dt) i++;
    if (empty_strided != NULL && i < ALLOC_DTYPES && t->ndim <= 64 &&
        (has_names == NULL || !has_names(impl_of(tensor_of(x))))) { /* rule: alloc */
        int64_t compact[64], size_one = 1;
        const int64_t *strides = t->strides;
        if (strides == NULL) { /* compact row-major, as DLPack leaves it implicit */
            int64_t s = 1;
            for (int d = t->ndim - 1; d >= 0; d--) {
                compact[d] = s;
                s *= t->shape[d];
            }
            strides = compact;
        }
        void *handle = NULL, *p = NULL;
        EmptyStrided allocate = presented ? presented_empty_strided : empty_strided;
        if (allocate(t->ndim, t->ndim ? t->shape : &size_one, t->ndim ? strides : &size_one, shim_dtype[i],
                     t->device.device_type == kDLCPU ? shim_cpu : shim_cuda, t->device.device_id, &handle) == 0) {
            PyObject *y = data_ptr(handle, &p) == 0 ? wrap_tensor(handle) : NULL;
            delete_tensor(handle);
            if (y != NULL) {
                *data = (uint64_t)(uintptr_t)p;
                *via_shim = 1;
            }
            if (y != NULL || PyErr_Occurred()) return y;
        }
    }
    PyObject *empty_like = torch_empty_like, *y;
    Py_IncRef(empty_like); /* init() may replace it while it runs */
    y = PyObject_CallFunctionObjArgs(empty_like, x, NULL);
    Py_DecRef(empty_like);
    DLTensor yt;
    if (y != NULL && describe(y, &yt) != 0) {
        Py_DecRef(y);
        return NULL;
    }
    if (y != NULL) *data = address(&yt);
    return y;
}

/* serve(x, out, rung): the result, or None where the general path must take the call. */
static PyObject *serve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "serve(x, out, rung)");
        return NULL;
    }
    PyObject *x = args[0], *out = args[1];
    uint64_t seen = generation; /* the settings and runtime this call is decided under */
    if (torch_decides(x, out) != NULL || !env_current()) Py_RETURN_NONE; /* rule: settings */
    DLTensor xt, yt, xs, ys; /* xs, ys: as described (relu(x)'s allocation, the in-place check) */
    int64_t x_span[2], y_span[2];
    if (describe(x, &xt) != 0) goto general; /* rule: memory (sparse, nested, ...) */
    xs = ys = xt;
    int dt = dtype_key(xt.dtype);
    if (out != Py_None) {
        if (describe(out, &yt) != 0) goto general; /* rule: memory */
        if (yt.device.device_type != xt.device.device_type) goto general; /* rule: host-out (indices alike) */
        ys = yt;
        dense_spans(&xt, &yt, x_span, y_span); /* rule: layout */
        if (dtype_key(yt.dtype) != dt || !same_shape(&xt, &yt) || !contiguous(&xt) || !contiguous(&yt))
            goto general; /* rule: match, layout */
    } else { /* relu(x)'s output gets x's strides (torch.empty_like's) */
        dense_spans(&xt, NULL, x_span, y_span); /* rule: layout */
    }
    int rung = rung_index(args[2]);
    if (rung < 0) goto general; /* rule: rung (the general path raises, or names why torch serves) */
    if (xt.device.device_type != kDLROCM) { /* rule: off-rocm */
        if (!plain_dtype(dt)) goto general; /* rule: plain */
        if (out != Py_None && (yt.device.device_type != xt.device.device_type || /* rule: out-device */
                               yt.device.device_id != xt.device.device_id))
            goto general;
        return fallback(x, out, disabled ? disabled_hit : off_hit); /* rule: kill */
    }
    int device = device_of(&xt);
    if (device < 0 || device >= DEVICES || !devices[device].known) goto general; /* rule: device */
    if (!devices[device].gfx950) { /* rule: arch */
        if (!plain_dtype(dt)) goto general; /* rule: plain */
        if (out != Py_None && device_of(&yt) != device) goto general; /* rule: out-device */
        return fallback(x, out, disabled ? disabled_hit : devices[device].arch_hit); /* rule: kill */
    }
    if (disabled || dt < 0) goto general; /* rule: kill, key */
    if (out == Py_None ? !contiguous(&xt) : device_of(&yt) != device) goto general; /* rule: layout, out-device */
    int64_t numel = numel_of(&xt);
    uint64_t xp = address(&xt), yp = out == Py_None ? 0 : address(&yt);
    Key k = {numel, device, (uint16_t)dt, (uint8_t)rung, (uint8_t)((xp & 15) << 4 | (yp & 15))};
    if (numel <= 0 || !xp || (!yp && out != Py_None)) goto general; /* rule: null (ZeroTensor, functional wrapper) */
    Entry *found = find(&k);
    if (found == NULL) goto general; /* rule: key */
    /* what the launch needs, copied: allocating, asking the stream or launching may run Python,
     * and another thread may then clear the table or reuse the slot for another key */
    void *function = found->function;
    LaunchConfig config = found->config;
    PyObject *hit = found->hit, *what = found->what;
    Py_IncRef(hit);
    Py_IncRef(what);
    int fresh = out == Py_None; /* relu(x): a new output, no version to bump */
    int via_shim = 0;
    if (fresh) {
        out = new_like(x, &xs, dt, &yp, present_cpu, &via_shim);
        if (out == NULL) goto failed; /* rule: alloc */
        if (yp & 15) { /* rule: fresh-align (not the entry's alignment: the general path plans this one) */
            Py_DecRef(out);
            goto undecided;
        }
    } else {
        uint64_t nbytes = (uint64_t)numel * (xt.dtype.bits / 8);
        if (xp != yp && xp < yp + nbytes && yp < xp + nbytes) { /* rule: overlap (dense ranges) */
            PyErr_SetObject(PyExc_ValueError, overlap_message);
            goto failed;
        }
        if (xp == yp && !same_strides(&xs, &ys)) { /* rule: overlap (x's memory in other strides) */
            PyErr_SetObject(PyExc_ValueError, overlap_message);
            goto failed;
        }
        Py_IncRef(out);
    }
    /* the kernarg segment (_launch.KERNARG): X ptr @0, X numel @8, Y ptr @16, Y numel @24 */
    uint64_t kernarg[4] = {xp, (uint32_t)numel, yp, (uint32_t)numel};
    void *params[4] = {&kernarg[0], &kernarg[1], &kernarg[2], &kernarg[3]};
    void *stream = stream_of(device); /* rule: stream */
    int current, err;
    if (stream == (void *)-1) { /* rule: stream */
        Py_DecRef(out);
        goto failed; /* torch's stream query raised */
    }
    /* Where the allocation or the stream query ran Python (torch.empty_like, which releases the GIL;
     * the stand-in's callbacks), the settings are read again before the launch, as the general path
     * reads them after its allocation. Elsewhere (out given, or the shim's allocation: C++, the GIL
     * held; torch's own DLPack and stream queries) only a garbage collection can run Python: another
     * thread's call that read changed settings meanwhile changed the generation, and a change no
     * call has read yet is one made after this call read them. */
    int python_ran = (fresh && !via_shim) || (present_cpu && (seam_device_of != NULL || seam_stream_of != NULL));
    if ((python_ran && !env_current()) || seen != generation) { /* rule: reread */
        Py_DecRef(out);
        goto undecided;
    }
    if ((err = get_device(&current)) != 0) { /* rule: switch */
        Py_DecRef(out);
        hip_failed("hipGetDevice", -1, err);
        goto failed;
    }
    if (current != device && (err = set_device(device)) != 0) { /* rule: switch (launches go to the current device) */
        Py_DecRef(out);
        hip_failed("hipSetDevice", device, err);
        goto failed;
    }
    if (stream == NULL && launch_ex != NULL) { /* rule: null-stream (hipDrvLaunchKernelEx: _launch.py says why) */
        err = launch_ex(&config, function, params, NULL);
    } else {
        err = launch_kernel(function, config.gridDimX, 1, 1, config.blockDimX, 1, 1, 0, stream, params, NULL);
    }
    if (err) get_last_error(); /* rule: launch-error (taken: torch's next launch check must not see it) */
    /* out written, or maybe (a failed launch may have run in part): its version counter bumped,
     * as torch's out= and in-place ops do, so autograd refuses a saved tensor it overwrote */
    if (!fresh) bump_version(tensor_of(out)); /* rule: bump */
    int restore_error = 0;
    if (current != device && set_device(current) != 0) { /* rule: switch */
        restore_error = get_last_error(); /* taken; it says which */
        if (restore_error == 0) restore_error = -1;
    }
    if (restore_error) { /* rule: switch (the caller's device not current again: raised, as the general path does) */
        Py_DecRef(out);
        hip_failed("hipSetDevice", current, restore_error);
        goto failed;
    }
    if (err) { /* rule: launch-error */
        Py_DecRef(out);
        PyErr_Format(PyExc_RuntimeError,
                     "relu_flydsl: kernel launch failed with HIP error %d (%U, numel %lld); the output is not valid",
                     err, what, (long long)numel);
        goto failed;
    }
    Py_DecRef(what);
    return count(hit, out);
failed:
    Py_DecRef(hit);
    Py_DecRef(what);
    return NULL;
undecided: /* decided again by the general path (its out, if made here, released) */
    Py_DecRef(hit);
    Py_DecRef(what);
general:
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* ---- set-up, from _compiled_entry.py ---- */
static void *address_arg(PyObject *o) { return o == Py_None ? NULL : PyLong_AsVoidPtr(o); }

static void set_ref(PyObject **slot, PyObject *value) {
    Py_XINCREF(value);
    Py_XDECREF(*slot);
    *slot = value;
}

/* init(api_capsule, env_data, env_keys, rung_names, relu, clamp_min, empty_like, off_hit,
 *      disabled_hit, overlap_message) */
static PyObject *init(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10 || !PyTuple_Check(args[2]) || PyTuple_Size(args[2]) != 3) {
        PyErr_SetString(PyExc_TypeError, "init() takes 10 arguments, the environment keys as a 3-tuple");
        return NULL;
    }
    const DLPackExchangeAPI *a = PyCapsule_GetPointer(args[0], "dlpack_exchange_api");
    if (a == NULL) return NULL;
    if (a->version.major != 1 || a->dltensor_from_py_object_no_sync == NULL || a->current_work_stream == NULL) {
        PyErr_Format(PyExc_RuntimeError, "torch's DLPack exchange API %u.%u lacks what the entry uses",
                     a->version.major, a->version.minor);
        return NULL;
    }
    api = a;
    set_ref(&env_data, args[1]);
    for (int i = 0; i < 3; i++) set_ref(&env_keys[i], PyTuple_GetItem(args[2], i));
    set_ref(&rung_names, args[3]);
    set_ref(&torch_relu, args[4]);
    set_ref(&torch_clamp_min, args[5]);
    set_ref(&torch_empty_like, args[6]);
    set_ref(&off_hit, args[7]);
    set_ref(&disabled_hit, args[8]);
    set_ref(&overlap_message, args[9]);
    if (zero == NULL) zero = PyLong_FromLong(0);
    Py_RETURN_NONE;
}

/* hip(launch_kernel, launch_ex, get_device, set_device, get_last_error): the addresses of the
 * loaded runtime's entry points (launch_ex None where it has no hipDrvLaunchKernelEx). */
static PyObject *hip(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hip() takes 5 addresses");
        return NULL;
    }
    void *p[5];
    for (int i = 0; i < 5; i++) p[i] = address_arg(args[i]);
    if (PyErr_Occurred()) return NULL;
    if (!p[0] || !p[2] || !p[3] || !p[4]) {
        PyErr_SetString(PyExc_ValueError, "hip(): hipModuleLaunchKernel, hipGetDevice, hipSetDevice and "
                                          "hipGetLastError are needed");
        return NULL;
    }
    launch_kernel = (LaunchKernel)p[0];
    launch_ex = (LaunchEx)p[1];
    get_device = (GetDevice)p[2];
    set_device = (SetDevice)p[3];
    get_last_error = (GetLastError)p[4];
    generation++;
    clear_table(); /* entries hold functions of the runtime they were loaded on */
    clear_devices();
    Py_RETURN_NONE;
}

/* allocator(empty_strided, data_ptr, delete_tensor, wrap, shim_cpu, shim_cuda, dtypes, has_names): the
 * shim's and the wrapper's addresses (empty_strided None: torch.empty_like) and its codes; dtypes holds
 * (DLPack code, bits, shim dtype) triples; has_names: at::impl::has_names' address where torch has
 * named tensors (a named x then allocates with empty_like), else None. */
static PyObject *allocator(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8 || !PyTuple_Check(args[6]) || PyTuple_Size(args[6]) > ALLOC_DTYPES) {
        PyErr_SetString(PyExc_TypeError,
                        "allocator(empty_strided, data_ptr, delete_tensor, wrap, cpu, cuda, dtypes, has_names)");
        return NULL;
    }
    void *names = address_arg(args[7]);
    void *p[4];
    for (int i = 0; i < 4; i++) p[i] = address_arg(args[i]);
    long cpu = PyLong_AsLong(args[4]), cuda = PyLong_AsLong(args[5]);
    int keys[ALLOC_DTYPES];
    int32_t codes[ALLOC_DTYPES];
    Py_ssize_t n = PyTuple_Size(args[6]);
    for (Py_ssize_t i = 0; i < ALLOC_DTYPES; i++) {
        keys[i] = -2; /* matches no dtype_key() */
        codes[i] = 0;
        if (i >= n) continue;
        PyObject *t = PyTuple_GetItem(args[6], i);
        if (t == NULL || !PyTuple_Check(t) || PyTuple_Size(t) != 3) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "allocator(): dtypes are (code, bits, shim) triples");
            return NULL;
        }
        keys[i] = (int)(PyLong_AsLong(PyTuple_GetItem(t, 0)) << 8 | PyLong_AsLong(PyTuple_GetItem(t, 1)));
        codes[i] = (int32_t)PyLong_AsLong(PyTuple_GetItem(t, 2));
    }
    if (PyErr_Occurred()) return NULL;
    if (p[0] != NULL && (p[1] == NULL || p[2] == NULL || p[3] == NULL)) {
        PyErr_SetString(PyExc_ValueError, "allocator(): the shim needs its data_ptr, its delete and the wrapper");
        return NULL;
    }
    empty_strided = (EmptyStrided)p[0];
    has_names = (ImplFlag)names;
    data_ptr = (DataPtr)p[1];
    delete_tensor = (DeleteTensor)p[2];
    wrap_tensor = (WrapTensor)p[3];
    shim_cpu = (int32_t)cpu;
    shim_cuda = (int32_t)cuda;
    memcpy(alloc_dtype, keys, sizeof keys);
    memcpy(shim_dtype, codes, sizeof codes);
    Py_RETURN_NONE;
}

/* queries(tensor_type, tensor_at, dispatch_modes, functorch_layers, is_neg, is_inference, requires_grad,
 *         is_zero, is_functional, bump_version): torch.Tensor, the offset of its at::Tensor, the eight
 *         functions' addresses. _compiled_entry.py then checks their answers against torch's. */
static PyObject *queries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "queries(tensor_type, tensor_at, eight addresses)");
        return NULL;
    }
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    void *p[8];
    int missing = 0;
    for (int i = 0; i < 8; i++) missing |= !(p[i] = address_arg(args[i + 2]));
    if (PyErr_Occurred()) return NULL;
    if (at < (Py_ssize_t)sizeof(PyObject) || missing) {
        PyErr_SetString(PyExc_ValueError, "queries(): an offset past the object header and eight addresses");
        return NULL;
    }
    /* getDynamicLayerStack returns a reference to its vector (a pointer). Had it come to return the
     * vector by value, its caller would pass the result's place first (x86-64 sret) and get it back:
     * asked with a scratch place there, which a function taking no argument ignores. */
    void *scratch[4] = {NULL, NULL, NULL, NULL};
    if (((void *(*)(void *))p[1])(scratch) == (void *)scratch) {
        PyErr_SetString(PyExc_ValueError, "queries(): getDynamicLayerStack returns its stack by value, not a "
                                          "reference (another torch's convention)");
        return NULL;
    }
    set_ref(&tensor_type, args[0]);
    tensor_at = at;
    dispatch_modes = (ModeCount)p[0];
    functorch_layers = (LayerStack)p[1];
    is_neg = (TensorFlag)p[2];
    is_inference = (TensorFlag)p[3];
    requires_grad = (ImplFlag)p[4];
    is_zero = (TensorFlag)p[5];
    is_functional = (TensorFlag)p[6];
    bump_version = (Bump)p[7];
    Py_RETURN_NONE;
}

/* An exact, non-inference torch.Tensor t (the check before bump_version and new_like are probed). */
static int probe_tensor(PyObject *t) {
    if (tensor_type == NULL || (PyObject *)Py_TYPE(t) != tensor_type || is_inference(tensor_of(t))) {
        PyErr_SetString(PyExc_TypeError, "an exact torch.Tensor, not an inference tensor, queries() bound");
        return 0;
    }
    return 1;
}

/* bumped(t): bump_version on t, as serve() bumps the out it wrote (_compiled_entry.py's probe). */
static PyObject *bumped(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1 || !probe_tensor(args[0])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bumped(t)");
        return NULL;
    }
    bump_version(tensor_of(args[0]));
    Py_RETURN_NONE;
}

/* allocate(x): relu(x)'s output for a CPU tensor x as serve() makes it, (tensor, its address,
 * whether the shim made it): _compiled_entry.py's probe of the shim and THPVariable_Wrap. */
static PyObject *allocate(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1 || !probe_tensor(args[0])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "allocate(x)");
        return NULL;
    }
    DLTensor t;
    if (api == NULL || api->dltensor_from_py_object_no_sync(args[0], &t) != 0 || t.device.device_type != kDLCPU) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "allocate(x): x a strided CPU tensor");
        return NULL;
    }
    uint64_t data = 0;
    int via_shim = 0;
    PyObject *y = new_like(args[0], &t, dtype_key(t.dtype), &data, 0, &via_shim);
    if (y == NULL) return NULL;
    return Py_BuildValue("(NKi)", y, (unsigned long long)data, via_shim);
}

/* decides(x, out): torch_decides' answer, a str, or None where the entry may serve the call. */
static PyObject *decides(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decides(x, out)");
        return NULL;
    }
    const char *why = torch_decides(args[0], args[1]);
    if (why == NULL) Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

/* takes_layout(x, out): whether serve() replays a call of this layout once its entry is ready
 * (dense_spans, then its contiguity checks; out None: relu(x)): explain()'s answer. */
static PyObject *takes_layout(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "takes_layout(x, out)");
        return NULL;
    }
    DLTensor xt, yt;
    int64_t x_span[2], y_span[2];
    int has_out = args[1] != Py_None;
    if (api == NULL || api->dltensor_from_py_object_no_sync(args[0], &xt) != 0 ||
        (has_out && api->dltensor_from_py_object_no_sync(args[1], &yt) != 0)) {
        PyErr_Clear();
        Py_RETURN_FALSE; /* no memory description: the general path's */
    }
    dense_spans(&xt, has_out ? &yt : NULL, x_span, y_span);
    return PyBool_FromLong(contiguous(&xt) && (!has_out || (same_shape(&xt, &yt) && contiguous(&yt))));
}

/* named(x): has_names' answer for an exact torch.Tensor x (None where not bound): the check before the
 * shim is used on a torch with named tensors. */
static PyObject *named(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1 || tensor_type == NULL || (PyObject *)Py_TYPE(args[0]) != tensor_type) {
        PyErr_SetString(PyExc_TypeError, "named(x): x an exact torch.Tensor, queries() bound");
        return NULL;
    }
    if (has_names == NULL) Py_RETURN_NONE;
    return PyBool_FromLong(has_names(impl_of(tensor_of(args[0]))));
}

/* clear(env, disabled, entries_max): the settings the general path read (env: the three raw
 * values, None where unset) and the bound on entries; every entry and device dropped. A call in
 * flight sees the new generation before it launches, and goes to the general path. */
static PyObject *clear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyTuple_Check(args[0]) || PyTuple_Size(args[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "clear(env: 3-tuple, disabled, entries_max)");
        return NULL;
    }
    long most = PyLong_AsLong(args[2]);
    if (most < 1 || most > SLOTS / 2) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "entries_max %ld not in 1..%d", most, SLOTS / 2);
        return NULL;
    }
    int off = PyObject_IsTrue(args[1]);
    if (off < 0) return NULL;
    entries_max = (int)most;
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyTuple_GetItem(args[0], i);
        set_ref(&env_seen[i], v == Py_None ? NULL : v);
    }
    disabled = off;
    generation++;
    clear_table();
    clear_devices();
    Py_RETURN_NONE;
}

/* device(index, gfx950, arch_hit, torch_stream): what the general path learned of a device, kept
 * only where the stream serve() would launch on there is torch_stream, torch's current stream;
 * returns that stream. A query answering the null stream is kept only where torch's stream is
 * the null stream too: elsewhere launches there are not ordered with torch's work. */
static PyObject *device(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "device(index, gfx950, arch_hit, torch_stream)");
        return NULL;
    }
    uint64_t torch_stream = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    long index = PyLong_AsLong(args[0]);
    if (index < 0 || index >= DEVICES) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "device index %ld out of range", index);
        return NULL;
    }
    int gfx950 = PyObject_IsTrue(args[1]);
    if (gfx950 < 0) return NULL;
    if (gfx950 && launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "device(): no HIP runtime bound (hip() first)");
        return NULL;
    }
    void *s = stream_of((int)index);
    if (s == (void *)-1) return NULL;
    if ((uint64_t)(uintptr_t)s != torch_stream) return PyLong_FromUnsignedLongLong((uint64_t)(uintptr_t)s);
    devices[index].known = 1;
    devices[index].gfx950 = gfx950;
    set_ref(&devices[index].arch_hit, args[2]);
    return PyLong_FromUnsignedLongLong((uint64_t)(uintptr_t)s);
}

/* add(rung, dtype_code, dtype_bits, numel, x_align, out_align, device, function, grid, block, hit, what) */
static PyObject *add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "add() takes 12 arguments");
        return NULL;
    }
    long v[7];
    for (int i = 0; i < 7; i++) v[i] = PyLong_AsLong(args[i]);
    void *function = PyLong_AsVoidPtr(args[7]);
    long grid = PyLong_AsLong(args[8]), block = PyLong_AsLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    if (v[3] <= 0 || v[3] >= (1L << 31) || v[6] < 0 || v[6] >= DEVICES || !devices[v[6]].known || !function ||
        grid <= 0 || block <= 0 || ((v[4] | v[5]) & (v[2] / 8 - 1))) { /* pointers aligned to the element size */
        PyErr_SetString(PyExc_ValueError, "add(): not a ready single-launch entry of a known device");
        return NULL;
    }
    if (n_entries >= entries_max) clear_table();
    Key k = {v[3], (int32_t)v[6], (uint16_t)(v[1] << 8 | v[2]), (uint8_t)v[0], (uint8_t)((v[4] & 15) << 4 | (v[5] & 15))};
    Entry *e = find(&k);
    if (e == NULL) {
        uint64_t i = key_hash(&k) & (SLOTS - 1);
        while (table[i].key.numel) i = (i + 1) & (SLOTS - 1);
        e = &table[i];
        n_entries++;
    } else {
        Py_DecRef(e->hit);
        Py_DecRef(e->what);
    }
    e->key = k;
    e->function = function;
    memset(&e->config, 0, sizeof e->config);
    e->config.gridDimX = (unsigned)grid;
    e->config.gridDimY = e->config.gridDimZ = 1;
    e->config.blockDimX = (unsigned)block;
    e->config.blockDimY = e->config.blockDimZ = 1;
    Py_IncRef(args[10]);
    e->hit = args[10];
    Py_IncRef(args[11]);
    e->what = args[11];
    Py_RETURN_NONE;
}

/* present_cpu(on, device_of, stream_of): CPU tensors as device memory (the virtual gfx950, the
 * host-time benchmark); the two C functions' addresses, or None (device_of answering < 0: host
 * memory). */
static PyObject *present(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "present_cpu(on, device_of, stream_of)");
        return NULL;
    }
    int on = PyObject_IsTrue(args[0]);
    if (on < 0) return NULL;
    void *d = address_arg(args[1]), *s = address_arg(args[2]);
    if (PyErr_Occurred()) return NULL;
    present_cpu = on;
    seam_device_of = (int (*)(uint64_t))d;
    seam_stream_of = (uint64_t(*)(int))s;
    generation++;
    clear_table();
    clear_devices();
    Py_RETURN_NONE;
}

/* has(rung, dtype_code, dtype_bits, numel, x_align, out_align, device): is that entry ready? */
static PyObject *has(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "has() takes 7 arguments");
        return NULL;
    }
    long v[7];
    for (int i = 0; i < 7; i++) v[i] = PyLong_AsLong(args[i]);
    if (PyErr_Occurred()) return NULL;
    Key k = {v[3], (int32_t)v[6], (uint16_t)(v[1] << 8 | v[2]), (uint8_t)v[0], (uint8_t)((v[4] & 15) << 4 | (v[5] & 15))};
    return PyBool_FromLong(v[3] > 0 && find(&k) != NULL);
}

/* allocated_on(): (device type, index) that relu(x)'s allocation last asked the shim for while
 * CPU tensors are presented ((-1, -1): none yet): the tests' view of new_like's device. */
static PyObject *allocated_on(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(ii)", (int)asked_device[0], (int)asked_device[1]);
}

static PyObject *entries(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(n_entries);
}

static PyMethodDef methods[] = {
    {"serve", (PyCFunction)(void (*)(void))serve, METH_FASTCALL, "serve(x, out, rung) -> result or None"},
    {"init", (PyCFunction)(void (*)(void))init, METH_FASTCALL, "bind torch's DLPack API and the fallback"},
    {"hip", (PyCFunction)(void (*)(void))hip, METH_FASTCALL, "bind the HIP runtime's entry points"},
    {"allocator", (PyCFunction)(void (*)(void))allocator, METH_FASTCALL, "bind torch's C shim for relu(x)'s output"},
    {"queries", (PyCFunction)(void (*)(void))queries, METH_FASTCALL, "bind libtorch's answers for torch_decides"},
    {"decides", (PyCFunction)(void (*)(void))decides, METH_FASTCALL, "decides(x, out) -> why the general path, or None"},
    {"named", (PyCFunction)(void (*)(void))named, METH_FASTCALL, "named(x) -> has_names' answer, or None"},
    {"bumped", (PyCFunction)(void (*)(void))bumped, METH_FASTCALL, "bumped(t): bump_version on t (its probe)"},
    {"takes_layout", (PyCFunction)(void (*)(void))takes_layout, METH_FASTCALL,
     "takes_layout(x, out) -> whether serve() replays this layout once its entry is ready"},
    {"allocate", (PyCFunction)(void (*)(void))allocate, METH_FASTCALL,
     "allocate(x) -> (relu(x)'s output as the entry makes it, its address, whether the shim made it)"},
    {"clear", (PyCFunction)(void (*)(void))clear, METH_FASTCALL, "clear(env, disabled, max): drop every entry"},
    {"device", (PyCFunction)(void (*)(void))device, METH_FASTCALL,
     "device(index, gfx950, arch_hit, torch_stream) -> stream"},
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL, "add a ready single-launch entry"},
    {"present_cpu", (PyCFunction)(void (*)(void))present, METH_FASTCALL, "CPU tensors as device memory"},
    {"has", (PyCFunction)(void (*)(void))has, METH_FASTCALL, "whether an entry is ready"},
    {"entries", entries, METH_NOARGS, "how many entries are ready"},
    {"allocated_on", allocated_on, METH_NOARGS, "the device the presented allocation was asked for"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_relu_flydsl_entry", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__relu_flydsl_entry(void) { return PyModule_Create(&module); }
