"""The stand-in HIP library of the virtual gfx950 (tools/vgpu/hipstub.c), called
directly: several devices, per-device modules and streams, per-device memory,
stream capture and graph replay. The kernel is the shipped v4 float32 x4 code
object, launched through the package's launch function or by raw
hipModuleLaunchKernel; the return codes are those of ROCm's clr (see the README)."""

import ctypes
import threading

import pytest
import torch

import vgpu_support as S

pytestmark = pytest.mark.vgpu

N = 1000          # two blocks of 512, the last one partial
GRID = 2
SUCCESS, INVALID_DEVICE, INVALID_HANDLE, LAUNCH_FAILURE = 0, 101, 400, 719
CAPTURE_UNSUPPORTED, CAPTURE_INVALIDATED, CAPTURE_IMPLICIT = 900, 901, 906


def _package_function():
    """v4/float32/x4 loaded the way relu() loads it (sha256 checked, on device 0)."""
    from relu_flydsl import _objects

    return _objects.function("v4", "float32", 4, 0)


def _hip(vgpu):
    """Our own ctypes view of the stand-in (argtypes set here, not on the device's)."""
    hip = ctypes.CDLL(vgpu.lib_path)
    P, U = ctypes.c_void_p, ctypes.c_uint
    hip.hipModuleLaunchKernel.argtypes = [P, U, U, U, U, U, U, U, P, P, P]
    hip.hipModuleLoadData.argtypes = [ctypes.POINTER(P), P]
    hip.hipModuleGetFunction.argtypes = [ctypes.POINTER(P), P, ctypes.c_char_p]
    hip.hipMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t]
    hip.hipFree.argtypes = [P]
    hip.hipMemcpy.argtypes = [P, P, ctypes.c_size_t, ctypes.c_int]
    hip.hipStreamSynchronize.argtypes = [P]
    hip.hipStreamIsCapturing.argtypes = [P, ctypes.POINTER(ctypes.c_int)]
    return hip


_IMAGE = []


def _image(vgpu):
    """The shipped v4/float32/x4 code object and its kernel name."""
    from relu_flydsl import _objects

    return _objects.read_verified("v4", "float32", 4), _objects.entry("v4", "float32", 4)["symbol"]


def _load(hip, image, name):
    """hipModuleLoadData + hipModuleGetFunction on the current device."""
    buf = ctypes.create_string_buffer(image, len(image))
    m, f = ctypes.c_void_p(), ctypes.c_void_p()
    assert hip.hipModuleLoadData(ctypes.byref(m), buf) == SUCCESS
    assert hip.hipModuleGetFunction(ctypes.byref(f), m, name.encode()) == SUCCESS
    return f


def _launch(hip, f, x, y, stream=None):
    """hipModuleLaunchKernel with kernelParams pointing at each argument; returns (code, argument storage)."""
    args = (ctypes.c_uint64(x.data_ptr()), ctypes.c_int32(x.numel()),
            ctypes.c_uint64(y.data_ptr()), ctypes.c_int32(y.numel()))
    params = (ctypes.c_void_p * 4)(*(ctypes.addressof(a) for a in args))
    return hip.hipModuleLaunchKernel(f, GRID, 1, 1, 128, 1, 1, 0, stream, params, None), args


def _pair_on(vgpu, device, seed, tag=""):
    """Input (mixed bits) and guarded output, both registered on `device`."""
    bits = S.make_bits("mixed", N, torch.float32, seed=seed)
    x, xbuf = vgpu.guarded((N,), torch.float32, name="x" + tag, device=device)
    x.copy_(S.to_tensor(bits, torch.float32))
    y, ybuf = vgpu.guarded((N,), torch.float32, name="y" + tag, device=device)
    return bits, x, y, ybuf


def _capturing(vgpu, device, seed):
    """The shipped kernel loaded on the current device, a pair on `device` and a new stream
    of the current device, capturing: (hip, function, stream, (bits, x, y, ybuf))."""
    hip = _hip(vgpu)
    image, name = _image(vgpu)
    f = _load(hip, image, name)
    s = vgpu.create_stream()
    pair = _pair_on(vgpu, device, seed=seed)
    vgpu.begin_capture(s)
    return hip, f, s, pair


def _untouched(ybuf):
    assert (ybuf.numpy() == S.SENTINEL).all(), "the output buffer was written"


# ---------------------------------------------------------------------------- devices
def test_device_count_and_current_device_per_thread(vgpu):
    hip = ctypes.CDLL(vgpu.lib_path)
    count = ctypes.c_int()
    assert hip.hipGetDeviceCount(ctypes.byref(count)) == SUCCESS and count.value == 1  # the default
    vgpu.set_device_count(3)
    assert hip.hipGetDeviceCount(ctypes.byref(count)) == SUCCESS and count.value == 3
    assert vgpu.get_device() == 0
    vgpu.set_device(2)
    seen = {}

    def other():
        seen["start"] = vgpu.get_device()  # a new host thread starts on device 0
        vgpu.set_device(1)
        seen["after"] = vgpu.get_device()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"start": 0, "after": 1}
    assert vgpu.get_device() == 2, "another thread's hipSetDevice changed this thread's device"
    for bad in (3, -1):
        assert hip.hipSetDevice(bad) == INVALID_DEVICE
    assert vgpu.get_device() == 2
    s = vgpu.create_stream(1)
    assert vgpu.stream_device(s) == 1 and vgpu.get_device() == 2
    assert vgpu.stream_device(0x5EED) == -1  # not a stream the stub made


def test_module_runs_only_on_its_device(vgpu):
    """A function is usable only on the device current at its module's load: on
    another device (NULL stream) hipErrorInvalidDevice; a stream of another device
    than the current one: hipErrorInvalidResourceHandle. Neither reaches the emulator."""
    hip = _hip(vgpu)
    image, name = _image(vgpu)
    vgpu.set_device_count(2)
    f0 = _load(hip, image, name)                      # device 0
    vgpu.set_device(1)
    before = vgpu.counts()["foreign_get_function"]
    f1 = _load(hip, image, name)                      # device 1
    assert vgpu.counts()["foreign_get_function"] == before
    bits, x, y, ybuf = _pair_on(vgpu, 1, seed=2)
    ran = len(vgpu.launches)

    code, _ = _launch(hip, f0, x, y)                  # device 1 current, function of device 0
    assert code == INVALID_DEVICE
    s0 = vgpu.create_stream(0)
    code, _ = _launch(hip, f1, x, y, s0)              # device 1 current, stream of device 0
    assert code == INVALID_HANDLE
    assert len(vgpu.launches) == ran, "a refused launch reached the emulator"
    _untouched(ybuf)
    assert [(a.result, a.device) for a in vgpu.attempts()[-2:]] == [(INVALID_DEVICE, 1), (INVALID_HANDLE, 0)]

    s1 = vgpu.create_stream(1)
    code, _ = _launch(hip, f1, x, y, s1)
    assert code == SUCCESS
    S.assert_bits(y, S.relu_bits(bits, torch.float32))
    assert (vgpu.launches[-1].device, vgpu.launches[-1].stream) == (1, s1)
    vgpu.set_device(0)
    code, _ = _launch(hip, f1, x, y, s1)              # stream of device 1 while device 0 is current
    assert code == INVALID_HANDLE


def test_get_function_off_its_modules_device_is_counted(vgpu):
    """hipModuleGetFunction while the module's device is not current (ROCm 6.x
    aborts the process there; ROCm 7 allows it) is counted, so the package's
    tests can show it never does that."""
    hip = _hip(vgpu)
    image, name = _image(vgpu)
    vgpu.set_device_count(2)
    vgpu.set_device(1)
    buf = ctypes.create_string_buffer(image, len(image))
    m, f = ctypes.c_void_p(), ctypes.c_void_p()
    assert hip.hipModuleLoadData(ctypes.byref(m), buf) == SUCCESS
    vgpu.set_device(0)
    foreign = vgpu.counts()["foreign_get_function"]
    assert hip.hipModuleGetFunction(ctypes.byref(f), m, name.encode()) == SUCCESS
    assert vgpu.counts()["foreign_get_function"] == foreign + 1


def test_touching_another_devices_allocation_is_an_access_violation(vgpu):
    vgpu.errors_expected = True
    hip = _hip(vgpu)
    image, name = _image(vgpu)
    vgpu.set_device_count(2)
    f0 = _load(hip, image, name)
    bits = S.make_bits("random", N, torch.float32, seed=5)
    x, _ = vgpu.guarded((N,), torch.float32, name="x-of-device-1", device=1)
    x.copy_(S.to_tensor(bits, torch.float32))
    y, ybuf = vgpu.guarded((N,), torch.float32, name="y", device=0)
    assert (vgpu.device_of(x.data_ptr()), vgpu.device_of(y.data_ptr()), vgpu.device_of(1)) == (1, 0, None)
    vgpu.errors.clear()
    code, _ = _launch(hip, f0, x, y)
    assert code == LAUNCH_FAILURE
    assert vgpu.launches[-1].error is not None and vgpu.launches[-1].device == 0
    msg = str(vgpu.errors[0])  # the emulator's error, naming the other device's allocation
    assert "'x-of-device-1' of device 1, not of device 0" in msg, msg
    _untouched(ybuf)
    with pytest.raises(Exception, match="virtual device"):
        vgpu.check()


def test_regions_of_two_devices_cannot_overlap(vgpu):
    vgpu.set_device_count(2)
    t = torch.zeros(16, dtype=torch.float32)
    vgpu.register(t, device=1)
    with pytest.raises(ValueError, match="of device 1"):
        vgpu.register(t[4:], device=0)
    with pytest.raises(ValueError, match="does not exist"):
        vgpu.register(torch.zeros(4), device=2)


# ---------------------------------------------------------------------------- capture
def test_capture_records_launches_and_replay_runs_them_with_the_captured_arguments(vgpu):
    """Through the package's launch function (_launch.launch): launches on a
    capturing stream are recorded, not run; the launch function then reuses its
    argument buffer for another call, yet every replay uses the pointers and
    sizes captured (copied at capture, as HIP does)."""
    from relu_flydsl import _launch

    fn = _package_function()                          # module loaded before the capture
    s = vgpu.create_stream(0)
    half = N // 2
    _, x, y, ybuf = _pair_on(vgpu, 0, seed=6)
    _, xo, yo, _ = _pair_on(vgpu, 0, seed=7, tag="-other")

    def launch(xv, yv, grid, stream):
        return _launch.launch(fn, grid, 128, _launch.config(grid, 128), xv.data_ptr(), yv.data_ptr(), xv.numel(),
                              stream)

    assert launch(xo, yo, GRID, 0) == SUCCESS
    ran = len(vgpu.launches)

    vgpu.begin_capture(s)
    assert vgpu.is_capturing(s) == 1
    assert launch(x[:half], y[:half], 1, s) == SUCCESS  # a split launch: two captured nodes
    assert launch(x[half:], y[half:], 1, s) == SUCCESS
    graph = vgpu.end_capture(s)
    assert vgpu.is_capturing(s) == 0
    assert len(vgpu.launches) == ran, "a captured launch ran"
    _untouched(ybuf)
    assert vgpu.graph_nodes(graph) == 2
    assert launch(xo, yo, GRID, 0) == SUCCESS         # overwrites the launch function's argument buffer
    exe = vgpu.instantiate(graph)
    vgpu.destroy_graph(graph)                          # the executable graph is a copy

    for seed in (8, 9, 10):                           # new data before every replay
        bits = S.make_bits("mixed", N, torch.float32, seed=seed)
        x.copy_(S.to_tensor(bits, torch.float32))
        vgpu.replay(exe, s)
        S.assert_bits(y, S.relu_bits(bits, torch.float32))
        S.assert_guards(ybuf, y)
        last = vgpu.launches[-2:]
        assert [(r.stream, r.device, r.args[1]) for r in last] == [(s, 0, half), (s, 0, N - half)]
    vgpu.destroy_exec(exe)


def test_raw_capture_copies_the_argument_bytes(vgpu):
    hip, f, s, (bits, x, y, ybuf) = _capturing(vgpu, 0, seed=11)
    code, args = _launch(hip, f, x, y, s)
    assert code == SUCCESS
    for a in args:                                    # the caller reuses its storage
        a.value = 0
    exe = vgpu.instantiate(vgpu.end_capture(s))
    _untouched(ybuf)
    vgpu.replay(exe, s)
    S.assert_bits(y, S.relu_bits(bits, torch.float32))


def test_graph_replays_on_its_streams_device(vgpu):
    """A graph captured on device 1 replays on a device-1 stream whatever the current
    device; replayed on a device-0 stream its function has no kernel there (101)."""
    vgpu.set_device_count(2)
    vgpu.set_device(1)
    hip, f1, s1, (bits, x, y, _) = _capturing(vgpu, 1, seed=12)
    assert _launch(hip, f1, x, y, s1)[0] == SUCCESS
    exe = vgpu.instantiate(vgpu.end_capture(s1))
    vgpu.set_device(0)
    vgpu.replay(exe, s1)
    S.assert_bits(y, S.relu_bits(bits, torch.float32))
    assert vgpu.launches[-1].device == 1
    s0 = vgpu.create_stream(0)
    ran = len(vgpu.launches)
    with pytest.raises(Exception) as e:
        vgpu.replay(exe, s0)
    assert e.value.code == INVALID_DEVICE and len(vgpu.launches) == ran


def _alloc(hip, s):
    p = ctypes.c_void_p()
    return hip.hipMalloc(ctypes.byref(p), 64)


FORBIDDEN = {
    # call during a global-mode capture on stream s -> the code clr returns
    "hipMalloc": (lambda hip, s: _alloc(hip, s), CAPTURE_UNSUPPORTED),
    "hipFree": (lambda hip, s: hip.hipFree(None), CAPTURE_UNSUPPORTED),
    "hipDeviceSynchronize": (lambda hip, s: hip.hipDeviceSynchronize(), CAPTURE_UNSUPPORTED),
    "hipStreamSynchronize": (lambda hip, s: hip.hipStreamSynchronize(s), CAPTURE_UNSUPPORTED),
    "hipMemcpy": (lambda hip, s: hip.hipMemcpy(None, None, 0, 0), CAPTURE_IMPLICIT),
}


@pytest.mark.parametrize("call", sorted(FORBIDDEN))
def test_forbidden_call_during_capture_fails_and_invalidates_it(vgpu, call):
    hip, f, s, (_, x, y, ybuf) = _capturing(vgpu, 0, seed=13)
    do, code = FORBIDDEN[call]
    assert do(hip, s) == code
    assert vgpu.is_capturing(s) == 2                  # invalidated
    assert _launch(hip, f, x, y, s)[0] == CAPTURE_INVALIDATED
    with pytest.raises(Exception) as e:
        vgpu.end_capture(s)
    assert e.value.code == CAPTURE_INVALIDATED
    assert vgpu.is_capturing(s) == 0 and do(hip, s) == SUCCESS  # capture over: allowed again
    _untouched(ybuf)


def test_strict_mode_refuses_a_module_load_during_capture(vgpu):
    """clr loads modules during a capture; the stand-in's stricter mode refuses
    them (900) and invalidates the capture. The relu capture tests run in this
    mode, so a module load inside a capture would fail them."""
    hip = _hip(vgpu)
    image, _ = _image(vgpu)
    s = vgpu.create_stream()
    vgpu.refuse_loads_during_capture()
    vgpu.begin_capture(s)
    buf = ctypes.create_string_buffer(image, len(image))
    m = ctypes.c_void_p()
    assert hip.hipModuleLoadData(ctypes.byref(m), buf) == CAPTURE_UNSUPPORTED
    assert vgpu.is_capturing(s) == 2                  # invalidated
    with pytest.raises(Exception) as e:
        vgpu.end_capture(s)
    assert e.value.code == CAPTURE_INVALIDATED
    assert hip.hipModuleLoadData(ctypes.byref(m), buf) == SUCCESS  # capture over: allowed again
    vgpu.reset()                                      # reset() turns strict mode off
    vgpu.begin_capture(s)
    assert hip.hipModuleLoadData(ctypes.byref(m), buf) == SUCCESS and vgpu.is_capturing(s) == 1
    vgpu.end_capture(s)


def test_capture_rules_hip_documents(vgpu):
    """What clr allows and refuses around a capture, as modelled."""
    hip = _hip(vgpu)
    image, name = _image(vgpu)
    s = vgpu.create_stream()
    status = ctypes.c_int(-1)
    with pytest.raises(Exception) as e:
        vgpu.begin_capture(0)                         # never on the null stream
    assert e.value.code == CAPTURE_UNSUPPORTED
    vgpu.begin_capture(s)
    with pytest.raises(Exception) as e:
        vgpu.begin_capture(s)                         # already capturing: hipErrorIllegalState
    assert e.value.code == 401
    assert hip.hipStreamIsCapturing(None, ctypes.byref(status)) == CAPTURE_IMPLICIT
    f = _load(hip, image, name)                       # hipModuleLoadData: no capture check in clr
    bits, x, y, _ = _pair_on(vgpu, 0, seed=14)
    assert _launch(hip, f, x, y, None)[0] == SUCCESS  # the null stream is not captured: it runs
    S.assert_bits(y, S.relu_bits(bits, torch.float32))
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("e", _end_capture_code(vgpu, s)))
    t.start()
    t.join()
    assert box["e"] == 908                            # global mode: end on the thread that began
    assert vgpu.is_capturing(s) == 1
    assert vgpu.graph_nodes(vgpu.end_capture(s)) == 0
    vgpu.begin_capture(s, mode=2)                     # relaxed mode: allocation is allowed
    assert _alloc(hip, s) == SUCCESS and vgpu.is_capturing(s) == 1
    vgpu.end_capture(s)
    vgpu.begin_capture(s)
    vgpu.reset()                                      # a test's teardown abandons its capture
    assert vgpu.is_capturing(s) == 0 and _alloc(hip, s) == SUCCESS


def _end_capture_code(vgpu, s):
    try:
        vgpu.end_capture(s)
    except Exception as e:
        return e.code
    return 0
