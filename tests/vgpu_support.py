"""Helpers for the virtual-device suites: inputs, the bit rule, and the checks
every launch must pass (values, guards, reads/writes inside the allocations)."""

import re

import numpy as np
import torch

from flash_relu_rocm import dtypes as _dtypes
from reference import INT_VIEW as SINT  # torch dtype -> its signed integer view (dtypes.py)
from reference import SPECIAL, UINT
from reference import relu_bits_u as relu_bits  # the bit rule on unsigned patterns

SENTINEL = 0xA5


def make_bits(kind, n, dtype, seed):
    """uint bit patterns: 'random' (normal numbers of both signs), 'special'
    (the special values, cycled), 'mixed' (random with specials every few elements)."""
    rng = np.random.default_rng(seed)
    ut = UINT[dtype]
    rand = torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 8).to(dtype)
    rand = rand.view(SINT[dtype]).numpy().view(ut).copy()
    special = np.array(SPECIAL[dtype], dtype=ut)
    if kind == "random":
        return rand
    if kind == "special":
        return rng.permutation(np.resize(special, n))
    if kind == "mixed":
        pos = rng.random(n) < 0.15
        rand[pos] = rng.choice(special, int(pos.sum()))
        # raw random bit patterns as well: every NaN payload and denormal is fair game
        raw = rng.random(n) < 0.1
        rand[raw] = rng.integers(0, np.iinfo(ut).max, int(raw.sum()), dtype=ut, endpoint=True)
        return rand
    raise ValueError(kind)


NP_SINT = {getattr(torch, name): np.dtype(d.int_view).type for name, d in _dtypes.ALL.items()}


def to_tensor(bits_u, dtype):
    return torch.from_numpy(np.ascontiguousarray(bits_u).view(NP_SINT[dtype])).view(dtype)


def tensor_bits(t):
    return t.contiguous().view(SINT[t.dtype]).numpy().view(UINT[t.dtype])


def guarded_input(dev, bits_u, dtype, offset_elems=0, name="x"):
    x, buf = dev.guarded((bits_u.size,), dtype, offset_elems=offset_elems, name=name)
    x.copy_(to_tensor(bits_u, dtype))
    return x, buf


def odd_float32(dev, values, name="x-odd"):
    """A float32 tensor of `values` at an odd byte address (public API: set_() on a storage sliced
    by one byte), its memory registered; `.raw` keeps that memory alive as long as the tensor."""
    raw = torch.empty(4 * values.numel() + 4, dtype=torch.uint8)
    dev.register(raw, name=name)
    t = torch.empty(0).set_(raw.untyped_storage()[1:], 0, tuple(values.shape), (1,))
    assert t.data_ptr() == raw.data_ptr() + 1
    t.raw = raw
    return t.copy_(values)


def two_devices(dev):
    """dev presenting two gfx950s, each with a current stream of its own (dev.stream, by
    device), device 0 current."""
    dev.set_device_count(2)
    dev.stream = {0: dev.create_stream(0), 1: dev.create_stream(1)}
    dev.set_device(0)
    return dev


def hot_path_pair(dev):
    """x (4096 random float32 elements) and y = empty_like(x), registered on dev, after
    relu(x, out=y) twice: the next relu(x, out=y) takes the fast path's cached launch entry."""
    import relu_flydsl

    x = torch.randn(4096)
    y = torch.empty_like(x)
    dev.register(x, name="x")
    dev.register(y, name="y")
    relu_flydsl.relu(x, out=y)
    relu_flydsl.relu(x, out=y)
    return x, y


def assert_guards(buf, view):
    """Every byte of `buf` outside `view` still holds the sentinel."""
    b = buf.numpy()
    start = view.data_ptr() - buf.data_ptr()
    stop = start + view.numel() * view.element_size()
    outside = np.concatenate([b[:start], b[stop:]])
    bad = np.flatnonzero(outside != SENTINEL)
    assert bad.size == 0, f"{bad.size} guard byte(s) overwritten; first at buffer offsets {bad[:8].tolist()}"


def assert_written_once(dev, y):
    lo, hi = dev.writes(y)
    bad = np.flatnonzero((lo != 1) | (hi != 1))
    assert bad.size == 0, (f"{bad.size} of {y.numel()} output elements not written exactly once; first "
                           f"{bad[:8].tolist()} counts {hi[bad[:8]].tolist()}")


def assert_bits(y, expect_u):
    got = tensor_bits(y)
    bad = np.flatnonzero(got != expect_u)
    assert bad.size == 0, (f"{bad.size} of {got.size} elements differ from the bit rule; first at "
                           f"{bad[:5].tolist()}: expected {[hex(v) for v in expect_u[bad[:5]]]} "
                           f"got {[hex(v) for v in got[bad[:5]]]}")


# A ladder kernel's name ends in _x<vec>_b<block>[_u<unroll>] (flash_relu_rocm._common.kernel_name).
_KERNEL_SHAPE = re.compile(r"_x(\d+)_b(\d+)(?:_u(\d+))?(?:_\d+)?$")


def assert_exact_grids(launches):
    """Every ladder launch ran on the exact grid ceil(numel / (block * vec * unroll)),
    numel being the launch's own X numel argument, vec/block/unroll read from the
    kernel's name. Nothing else sees an over-launch: the predicate (v1-v3) or the
    descriptor (v4/v5) masks the excess blocks, so values and memory stay right
    until an index overflows int32 (case 2 of the reference post,
    "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels")."""
    bad = []
    for r in launches:
        if not r.kernel.startswith("relu_"):
            continue  # not a ladder kernel
        m = _KERNEL_SHAPE.search(r.kernel)
        assert m is not None and len(r.args) >= 4, f"cannot read vec/block/numel of launch {r.kernel} {r.args}"
        vec, block, unroll = int(m[1]), int(m[2]), int(m[3] or 1)
        numel = r.args[1]
        expect = -(-numel // (block * vec * unroll))
        if tuple(r.grid) != (expect, 1, 1) or tuple(r.block) != (block, 1, 1):
            bad.append(f"{r.kernel} numel {numel}: grid {tuple(r.grid)} block {tuple(r.block)}, "
                       f"exact grid ({expect}, 1, 1) block ({block}, 1, 1)")
    assert not bad, f"{len(bad)} launch(es) not on the exact grid; first: {bad[0]}"


# Lines the terminal summary prints at the end of the run (tests/conftest.py), e.g.
# the mutation check's catch count: shown even under -q.
SUMMARY_LINES = []


# ---- every kernel the planner can choose ------------------------------------
# relu_<rung>_<idea>_<dtype>_x<vec>_b<block> (flash_relu_rocm._common.kernel_name), [_u<unroll>] on v3_tuned.unrolled(n)
# the served dtypes (dtypes.DTYPES): a pending dtype's kernels are no planner kernels
_KERNEL_ID = re.compile(rf"^relu_(v\d+)_\w*?_({'|'.join(_dtypes.DTYPES)})_x(\d+)_b\d+(?:_u\d+)?(?:_\d+)?$")
TORCH_DTYPES = {name: getattr(torch, name) for name in _dtypes.DTYPES}


def kernel_identity(name):
    """(rung, dtype, vec) of a ladder kernel's name, or None."""
    m = _KERNEL_ID.match(name)
    return (m[1], m[2], int(m[3])) if m else None


_PLANNER_KERNELS = None


def planner_kernels():
    """Every (rung, dtype, vec) relu() can launch, asked of the planner itself:
    plan.plan() for every registry rung and dtype, sizes 1..2*max_vec and every
    element-aligned pair of pointer offsets within 32 bytes (the plan depends on
    numel's divisibility and each pointer's alignment within 16 bytes only)."""
    global _PLANNER_KERNELS
    if _PLANNER_KERNELS is None:
        from relu_flydsl.flash_relu_rocm import plan, registry

        out = set()
        for r in registry.RUNGS.values():
            for d in registry.DTYPES:
                e = registry.ELEMENT_BYTES[d]
                for n in range(1, 2 * r.max_vec(d) + 1):
                    for xa in range(0, 32, e):
                        for ya in range(0, 32, e):
                            out.add((r.name, d, plan.plan(r, d, n, 4096 + xa, 4096 + ya).vec))
        _PLANNER_KERNELS = sorted(out)
    return _PLANNER_KERNELS


def executed_kernels():
    """(rung, dtype, vec) -> completed launches on the virtual gfx950 in this
    process (the emulator's own record; mutant emulators keep theirs apart)."""
    import sys

    emu = sys.modules.get("vgpu.emulator")
    out = {}
    for name, rec in (getattr(emu, "KERNELS", None) or {}).items():
        ident = kernel_identity(name)
        if ident and rec.launches:
            out[ident] = out.get(ident, 0) + rec.launches
    return out


def session_summary():
    """Terminal-summary lines computed at the end of the run (conftest hook)."""
    import sys

    emu = sys.modules.get("vgpu.emulator")
    if emu is None or not getattr(emu, "KERNELS", None):
        return []  # the virtual device did not run in this pytest run
    want = planner_kernels()
    ran = executed_kernels()
    missing = [k for k in want if k not in ran]
    line = (f"kernels executed: {len(want) - len(missing)}/{len(want)} "
            "(rung x dtype x vector width the planner can choose, counted from the virtual gfx950's launches)")
    if missing:
        line += "; NOT executed: " + ", ".join(f"{r}/{d}/x{v}" for r, d, v in missing[:12])
        line += ", ..." if len(missing) > 12 else ""
    return [line]


# ---- one checked relu() call on a planner-chosen kernel ---------------------
class Case:
    """relu(x, out=y) on guarded views whose offsets and size make the real
    planner choose `vec` for (rung, dtype): x or y `offset` elements into a
    16-byte-aligned buffer, or a size that is an odd multiple of vec; numel
    never a multiple of the tile (a partial last block)."""

    def __init__(self, rung, dtype, vec, how, values):
        from relu_flydsl.flash_relu_rocm import registry

        r = registry.RUNGS[rung]
        maxv = r.max_vec(dtype)
        tile = r.tile(vec)
        self.rung, self.dtype, self.vec, self.how, self.values = rung, dtype, vec, how, values
        narrow = vec < maxv
        self.x_off = vec if (how == "x-offset" and narrow) else 0
        self.y_off = vec if (how == "y-offset" and narrow) else 0
        if how == "x-offset":
            self.numel = 2 * tile + 3 * maxv      # a multiple of every width: alignment decides
        elif how == "y-offset":
            self.numel = tile + 5 * maxv
        else:  # "size": an odd multiple of vec (of maxv when vec is the widest)
            self.numel = (vec if narrow else maxv) * (r.block + 7)
        assert self.numel % tile, "every case needs a partial last tile"

    @property
    def id(self):
        return f"{self.rung}-{self.dtype}-x{self.vec}-{self.how}-{self.values}"


def kernel_cases(rung, dtype, vec):
    return [Case(rung, dtype, vec, "x-offset", "special"), Case(rung, dtype, vec, "y-offset", "mixed"),
            Case(rung, dtype, vec, "size", "mixed")]


def run_case(dev, relu, case, seed=None):
    """Run one case through relu() on the virtual device with every check the
    suite makes; returns the list of problems (empty: the case passed).
    Leaves the device reset. The inputs' seed defaults to one fixed per case."""
    import zlib

    dtype = TORCH_DTYPES[case.dtype]
    problems = []
    dev.reset()
    try:
        seed = zlib.crc32(case.id.encode()) if seed is None else seed
        xbits = make_bits(case.values, case.numel, dtype, seed=seed)
        x, xbuf = guarded_input(dev, xbits, dtype, offset_elems=case.x_off)
        out, obuf = dev.guarded((case.numel,), dtype, offset_elems=case.y_off, name="out")
        try:
            y = relu(x, out=out, rung=case.rung)
        except Exception as e:  # noqa: BLE001 - a failed launch is a finding
            cause = f"; device: {type(dev.errors[0]).__name__}: {dev.errors[0]}" if dev.errors else ""
            return [f"relu raised {type(e).__name__}: {e}{cause}"]
        try:
            dev.check()
        except Exception as e:  # noqa: BLE001
            problems.append(str(e))
        mine = [r for r in dev.launches if len(r.args) >= 4 and r.args[0] == x.data_ptr()]
        if not mine:
            import relu_flydsl

            took = sorted(k for k in relu_flydsl.dispatch_stats() if k.startswith("fallback/"))
            problems.append(f"relu() did not launch a kernel on the virtual device ({took or 'no fallback recorded'})")
        ids = {kernel_identity(r.kernel) for r in mine}
        if ids != {(case.rung, case.dtype, case.vec)}:
            problems.append(f"expected kernel {(case.rung, case.dtype, case.vec)}, launched {sorted(map(str, ids))}")
        if any(r.error is not None for r in dev.launches):
            problems.append(f"launch error: {next(r.error for r in dev.launches if r.error is not None)}")
        for check in (lambda: assert_exact_grids(dev.launches), lambda: assert_bits(y, relu_bits(xbits, dtype)),
                      lambda: assert_written_once(dev, out), lambda: assert_guards(obuf, out),
                      lambda: assert_guards(xbuf, x)):
            try:
                check()
            except AssertionError as e:
                problems.append(str(e))
        if not (tensor_bits(x) == xbits).all():
            problems.append("input modified")
    finally:
        dev.reset()
    return problems


def _shipped_sha256():
    """{sha256: (rung, dtype, vec)} of the code objects the package ships (its manifest)."""
    from relu_flydsl import _objects

    return {e["sha256"]: (e["rung"], e["dtype"], e["vec"]) for e in _objects.read_manifest()["kernels"].values()}


def _shipped_loaded(dev, shipped):
    """{(rung, dtype, vec): codeobj.Kernel} of the shipped objects the device holds. Only
    those: the device keeps every module loaded in the process (a mutated copy's rebuilt
    kernels, an unshipped compile), under the same kernel names."""
    import hashlib

    out = {}
    for co in dev.modules.values():
        ident = shipped.get(hashlib.sha256(co.data).hexdigest())
        if ident is None:
            continue
        for k in co.kernels.values():
            if kernel_identity(k.name) == ident:
                out[ident] = k
    return out


def shipped_kernel(dev, rung, dtype, vec):
    """The shipped code object of (rung, dtype, vec) as the virtual device received it
    (codeobj.Kernel), loaded the way relu() loads it if it is not loaded yet (sha256
    checked, hipModuleLoadData on device 0). Never a kernel of the same name from
    another module: a test finding "the loaded kernel" by name finds whichever module
    an earlier test loaded first."""
    from relu_flydsl import _objects

    shipped = _shipped_sha256()
    k = _shipped_loaded(dev, shipped).get((rung, dtype, vec))
    if k is None:
        _objects.function(rung, dtype, vec, 0)
        dev.check()
        k = _shipped_loaded(dev, shipped).get((rung, dtype, vec))
    assert k is not None, f"the shipped {rung}/{dtype}/x{vec} did not load"
    return k


def loaded_kernels(dev):
    """{(rung, dtype, vec): codeobj.Kernel} for every planner kernel, as the
    virtual device received it (its shipped code object, disassembled). A
    kernel not loaded yet is loaded the way relu() loads it (sha256 checked,
    hipModuleLoadData on device 0)."""
    from relu_flydsl import _objects

    shipped = _shipped_sha256()
    have = _shipped_loaded(dev, shipped)
    for rung, dtype, vec in planner_kernels():
        if (rung, dtype, vec) not in have:
            _objects.function(rung, dtype, vec, 0)
            dev.check()
    have = _shipped_loaded(dev, shipped)
    missing = [k for k in planner_kernels() if k not in have]
    assert not missing, f"not loaded: {missing}"
    return have
