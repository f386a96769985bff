"""What relu() refuses to launch, and launches it must still make, on the
virtual gfx950, through the public relu(): code-object manifests and entries
the runtime cannot trust (no sha256, a mismatch later repaired on disk,
another arch, another kernel-argument layout), a fresh output that
torch.empty_like allocates misaligned, and a HIP runtime without
hipDrvLaunchKernelEx on the null stream.

Each scenario is a function of test_hot_path's `Ctx` (a package and the
virtual device), so tests/test_mutations.py runs them against mutated copies
of the package too (mutation_support.scenarios())."""

import ctypes
import json
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import vgpu_support as S
from test_hot_path import BF16, F32, STREAM, Ctx, _vec

pytestmark = pytest.mark.vgpu
N = 1024
KEY = "v5/float32/x4"  # the kernel relu(x, out=, rung="v5") of N aligned float32 elements takes


@contextmanager
def objects_copy(c):
    """The package serving a copy of its code_objects/ (yielded, to damage), from a fresh state."""
    objects = c.pkg._objects
    shipped = objects.OBJECTS_DIR
    tmp = Path(tempfile.mkdtemp(prefix="relu-objects-"))
    try:
        shutil.copytree(shipped, tmp / "code_objects")
        objects.OBJECTS_DIR = tmp / "code_objects"
        c.state.reset()
        yield tmp / "code_objects"
    finally:
        objects.OBJECTS_DIR = shipped
        c.state.reset()
        shutil.rmtree(tmp, ignore_errors=True)


def edit_manifest(objects_dir, edit):
    path = objects_dir / "manifest.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))


def refused(c, seeds=(1, 2), rung="v5"):
    """relu(x, out=) of N float32 elements, each seed a call: torch's result,
    guards intact, nothing launched. Returns the RuntimeWarnings said and the
    fallback counts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in seeds:
            _, x, _, out, obuf = c.tensors(N, seed=seed)
            launches = len(c.dev.launches)
            assert c.relu(x, out=out, rung=rung) is out
            assert c.dev.launches[launches:] == [], "a kernel the runtime must not trust was launched"
            assert torch.equal(out, torch.relu(x))
            S.assert_guards(obuf, out)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    fallbacks = {k: n for k, n in c.pkg.dispatch_stats().items() if k.startswith("fallback/")}
    return said, fallbacks


# ---- the code objects' manifest --------------------------------------------
def entry_without_sha256(c):
    """A manifest entry with no sha256, or an empty one, is never loaded:
    torch's result, one warning naming its file; an intact kernel still serves."""
    for how in ("missing", "empty"):
        with objects_copy(c) as objects_dir:
            def edit(m):
                if how == "missing":
                    del m["kernels"][KEY]["sha256"]
                else:
                    m["kernels"][KEY]["sha256"] = ""
            edit_manifest(objects_dir, edit)
            name = c.pkg._objects.entry("v5", "float32", 4)["file"]
            said, fallbacks = refused(c)
            assert len(said) == 1 and name in said[0] and "sha256" in said[0], (how, said)
            assert list(fallbacks.values()) == [2] and name in next(iter(fallbacks)), (how, fallbacks)
            c.call(N, BF16, rung="v5")  # v5/bfloat16/x8 keeps its sha256: it serves


def sha256_mismatch_is_remembered(c):
    """A code object that does not match its sha256 is refused for the life of
    the process: repaired on disk afterwards, it is still not loaded (no second
    warning either), since what was checked is not what a later read returns."""
    with objects_copy(c) as objects_dir:
        path = objects_dir / c.pkg._objects.entry("v5", "float32", 4)["file"]
        good = path.read_bytes()
        bad = bytearray(good)
        bad[len(bad) // 2] ^= 0x01
        path.write_bytes(bytes(bad))
        said, _ = refused(c, seeds=(3,))
        assert len(said) == 1 and path.name in said[0], said
        path.write_bytes(good)
        said, fallbacks = refused(c, seeds=(4, 5))
        assert said == [], said
        assert list(fallbacks.values()) == [3] and path.name in next(iter(fallbacks)), fallbacks


def manifest_for_another_arch(c):
    """A manifest whose arch is not gfx950 is not used: every kernel takes
    torch's result, the reason names the manifest."""
    with objects_copy(c) as objects_dir:
        edit_manifest(objects_dir, lambda m: m.update(arch="gfx942"))
        _, fallbacks = refused(c, rung="v5")
        said, more = refused(c, seeds=(6,), rung=None)  # the default rung too
        assert list(more) == list(fallbacks) and "manifest.json" in next(iter(more)) and "gfx950" in next(iter(more)), more


def kernel_arguments_not_the_runtimes(c):
    """An entry whose kernel-argument segment is not the 28 bytes the runtime
    packs, or that lists a fifth argument, is refused: torch's result, a
    warning naming its file; an intact kernel still serves."""
    fifth = {"offset": 28, "size": 4}
    for label, edit in (("kernarg_size 32", lambda e: e.update(kernarg_size=32)),
                        ("kernarg_size 24", lambda e: e.update(kernarg_size=24)),
                        ("a fifth argument", lambda e: e["args"].append(dict(fifth)))):
        with objects_copy(c) as objects_dir:
            edit_manifest(objects_dir, lambda m: edit(m["kernels"][KEY]))
            name = json.loads((objects_dir / "manifest.json").read_text())["kernels"][KEY]["file"]
            said, fallbacks = refused(c)
            assert len(said) == 1 and name in said[0] and "kernel arguments" in said[0], (label, said)
            assert list(fallbacks.values()) == [2], (label, fallbacks)
            c.call(N, BF16, rung="v5")


# ---- relu(x): the fresh output's alignment ----------------------------------
@contextmanager
def empty_like_at(c, offset_elems):
    """torch.empty_like on CPU tensors (the virtual device's memory) returns a
    tensor `offset_elems` past a 16-byte boundary, inside a guarded buffer of
    device 0 (registered, as a ROCm allocation would be); yields the (view,
    buffer) pairs it made, kept alive."""
    made = []

    def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        view, buf = c.dev.guarded(tuple(self.shape), dtype or self.dtype, offset_elems=offset_elems, name="fresh")
        made.append((view, buf))
        return view

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("empty_like", empty_like, "CPU")
    try:
        yield made
    finally:
        lib._destroy()


def fresh_out_misaligned(c):
    """relu(x) with x's aligned entry warm, when torch.empty_like gives a
    misaligned output: the launch suits that output's alignment (each pointer
    a multiple of the vector), bit-exact, guards intact, the grid exact. The compiled entry
    allocates with torch.empty_like here: its C-shim allocation of CPU memory bypasses torch's
    dispatcher (no kernel to override), and the alignment check after either is the same code."""
    assert c.entry.use_shim(False).startswith("torch.empty_like")
    try:
        _fresh_out_misaligned(c)
    finally:
        c.entry.use_shim(True)


def _fresh_out_misaligned(c):
    for dtype, off in ((F32, 1), (BF16, 2)):
        esize = torch.empty((), dtype=dtype).element_size()
        with empty_like_at(c, 0):
            for seed in (1, 2):  # relu(x)'s entry for aligned pointers, then its fast path
                xbits, x, _, _, _ = c.tensors(N, dtype, seed=seed)
                S.assert_bits(c.relu(x), S.relu_bits(xbits, dtype))
        with empty_like_at(c, off) as made:
            xbits, x, xbuf, _, _ = c.tensors(N, dtype, seed=3, kind="mixed")
            before = len(c.dev.launches)
            y = c.relu(x)
            # (the first use of the narrower kernel's canary allocates through it too)
            ybuf = next(buf for view, buf in made if view.data_ptr() == y.data_ptr())
            assert y.data_ptr() % 16 == off * esize, "test set-up"
            c.dev.check()
            launched = c.dev.launches[before:]
            assert launched, "a dense gfx950 tensor must take the kernel path"
            S.assert_exact_grids(launched)
            for r in launched:
                vec = _vec(r)
                assert r.args[0] % (vec * esize) == 0 and r.args[2] % (vec * esize) == 0, r.kernel
            S.assert_bits(y, S.relu_bits(xbits, dtype))
            S.assert_written_once(c.dev, y)
            S.assert_guards(ybuf, y)
            S.assert_guards(xbuf, x)


# ---- a HIP runtime without hipDrvLaunchKernelEx -----------------------------
@contextmanager
def runtime_without_launch_ex(c):
    """The package bound to the loaded HIP runtime as a ROCm 6 runtime shows
    it (no hipDrvLaunchKernelEx), every hipModuleLaunchKernel call counted
    (yielded: the functions launched)."""
    hip, launch = c.pkg._hip, c.pkg._launch
    real = hip.lib()
    calls = []

    class WithoutLaunchEx:
        def __getattr__(self, name):
            if name == "hipDrvLaunchKernelEx":
                raise AttributeError(name)
            value = getattr(real, name)
            if name == "hipModuleLaunchKernel":
                return counted
            return value

    real_launch = real.hipModuleLaunchKernel
    real_launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3

    # a C function pointer, so the compiled entry, which calls the runtime by address, counts too
    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_void_p)
    def counted(*args):
        calls.append(args[0])
        return real_launch(*args)

    saved = hip._lib, launch.launch_kernel, launch.launch_ex
    hip._lib = WithoutLaunchEx()
    launch.bind()  # the launch functions, bound from this runtime
    launch.THREAD.state[1] = None  # nothing prepared for the old binding is reused
    try:
        assert launch.launch_ex is None
        yield calls
    finally:
        hip._lib, launch.launch_kernel, launch.launch_ex = saved
        launch.THREAD.state[1] = None
        real_launch.argtypes = None  # as _hip binds it: called with ready C values


def null_stream_without_launch_ex(c):
    """On the null stream, with a runtime that has no hipDrvLaunchKernelEx,
    the first call and its fast-path repeat launch through
    hipModuleLaunchKernel: bit-exact, guards intact, the plan's grid."""
    c.stream = c.dev.stream = 0
    try:
        with runtime_without_launch_ex(c) as calls:
            n = 8 * 4257
            grid = c.plan.plan(c.pkg._dispatch.get_rung("v5"), "float32", n, 0, 0).launches[0].grid
            for hot in (False, True):
                before = len(calls)
                launched = c.call(n, seed=40 + hot, hot=hot, rung="v5")
                assert [r.grid for r in launched] == [(grid, 1, 1)], [r.grid for r in launched]
                assert len(calls) - before >= len(launched), "launched other than through hipModuleLaunchKernel"
    finally:
        c.stream = c.dev.stream = STREAM


SCENARIOS = {f.__name__: f for f in (
    entry_without_sha256, sha256_mismatch_is_remembered, manifest_for_another_arch,
    kernel_arguments_not_the_runtimes, fresh_out_misaligned, null_stream_without_launch_ex,
)}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(vgpu, monkeypatch, name):
    import relu_flydsl

    monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    monkeypatch.delenv("RELU_FLYDSL_RUNG", raising=False)
    try:
        SCENARIOS[name](Ctx(relu_flydsl, vgpu, monkeypatch))
    finally:
        relu_flydsl._state.STATE.reset()
