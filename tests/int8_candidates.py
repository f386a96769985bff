"""Three int8 relu kernels (one global access of `vec` bytes per thread, written
like the v2 rung; 16 x int8 = one 128-bit access), one per instruction form
LLVM can emit for `y = 0 if x < 0 else x` on gfx950:

  smax      (x < 0).select(0, x) on <16 x i8>: LLVM emits v_max_i16_sdwa with
            byte selects, v_ashrrev_i16, v_or_b32_sdwa (39 VALU per dwordx4)
  signmask  per dword w: m = w & 0x80808080; y = w & ~((m - (m >> 7)) | m):
            v_and_b32, v_lshrrev_b32, v_sub_u32, v_bitop3_b32 (16 VALU)
  perm      per dword w: the sign byte masks from v_perm_b32(w, w << 8,
            0x0B090A08) (selectors 8..11 replicate a byte's sign), y = w & ~mask:
            v_lshlrev_b32, v_perm_b32, v_bitop3_b32 (12 VALU)

  (smax at 1 and 2 bytes: global_load_sbyte + v_max_i16_e32, global_load_ushort
  + v_max_i16_sdwa; the other two forms need whole dwords: vec 4, 8, 16)

The rungs' own int8 kernels (`rung_kernels()`: the perm form from 4 bytes,
v_max_i16 below) run through the same checks (`run(dev, ("rung", "v5"), ...)`).
Together they exercise every int8 instruction the emulator has in compiled
code; imports flydsl (vgpu tests only)."""

import functools

import flydsl.compiler as flyc
import flydsl.expr as fx

FORMS = ("smax", "signmask", "perm")
MARKERS = {"smax": "v_max_i16_sdwa", "signmask": "v_bitop3_b32", "perm": "v_perm_b32"}
VEC, BLOCK = 16, 256  # the widest access; the block of every form
PERM_SIGN_SELECTOR = 0x0B090A08  # bytes 0..3 <- sign of bytes 1, 5, 3, 7 of {w, w << 8} = sign of w's bytes 0..3


def kernel_name(form, vec=VEC):
    return f"relu_int8cand_{form}_int8_x{vec}_b{BLOCK}"


def _relu(form, v):
    if form == "smax":
        zero = fx.full_like(v, 0)
        return (v < zero).select(zero, v)
    w = v.bitcast(fx.Uint32)
    if form == "signmask":
        m = w & fx.full_like(w, 0x80808080)
        return (w & ~((m - (m >> fx.full_like(w, 7))) | m)).bitcast(fx.Int8)
    from flydsl.expr import rocdl

    sh = w << fx.full_like(w, 8)
    words = [w[i] & ~fx.Uint32(rocdl.perm_b32(w[i], sh[i], fx.Uint32(PERM_SIGN_SELECTOR))) for i in range(w.numel)]
    return fx.Vector.from_elements(words, fx.Uint32).bitcast(fx.Int8)


@functools.lru_cache(maxsize=None)
def build(form, vec=VEC):
    """The @flyc.jit launcher (X, Y, grid, stream) of one form; numel must be a multiple of vec."""
    assert form in FORMS and (form == "smax" or vec % 4 == 0), (form, vec)

    @flyc.kernel(name=kernel_name(form, vec))
    def relu_int8(X: fx.Tensor, Y: fx.Tensor):
        bid = fx.block_idx.x
        tid = fx.thread_idx.x
        numel = X.shape.unpack()
        in_bounds = fx.make_rmem_tensor(1, fx.Boolean)
        in_bounds[0] = (bid * BLOCK + tid) * vec < numel
        tile = fx.make_layout(BLOCK * vec, 1)
        one = fx.make_layout(vec, 1)
        eX = fx.logical_divide(fx.slice(fx.logical_divide(X, tile), (None, bid)), one)
        eY = fx.logical_divide(fx.slice(fx.logical_divide(Y, tile), (None, bid)), one)
        atom = fx.make_copy_atom(fx.UniversalCopy(vec * 8), fx.Int8)
        rX = fx.make_rmem_tensor(vec, fx.Int8)
        rY = fx.make_rmem_tensor(vec, fx.Int8)
        fx.copy_atom_call(atom, fx.slice(eX, (None, tid)), rX, pred=in_bounds)
        fx.memref_store_vec(_relu(form, fx.memref_load_vec(rX)), rY)
        fx.copy_atom_call(atom, rY, fx.slice(eY, (None, tid)), pred=in_bounds)

    @flyc.jit
    def launch(X: fx.Tensor, Y: fx.Tensor, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        relu_int8(X, Y).launch(grid=(grid, 1, 1), block=(BLOCK, 1, 1), stream=stream)

    return launch


SPECIAL = (-128, -1, 0, 1, 127, -127, 126, -2, 2, 64, -64)


def rung_kernels():
    """(rung, vec) of every int8 kernel the rungs build (vec: powers of two up to the rung's widest)."""
    from relu_flydsl.flash_relu_rocm.registry import RUNGS

    out = []
    for rung in RUNGS.values():
        vec = 1
        while vec <= rung.max_vec("int8"):
            out.append((rung.name, vec))
            vec *= 2
    return out


def rung_launcher(rung, vec):
    """The shipped int8 kernel of a rung (compiled like every ladder kernel) and its block."""
    from relu_flydsl.flash_relu_rocm import cache, registry

    r = registry.RUNGS[rung]
    return cache.compiled(r, "int8", vec), r.block


def run(dev, form, n, seed=0, values="mixed", vec=VEC):
    """Launch one form (a candidate name, or ("rung", name) for a shipped
    rung's int8 kernel) over n int8 elements inside guards; return the problems
    found (device errors or violations, bits, guards, written once, input)."""
    import numpy as np
    import torch

    import vgpu_support as S

    assert n % vec == 0
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 128, n, dtype=np.int16).astype(np.int8)
    if values in ("special", "mixed"):
        pos = np.arange(n) if values == "special" else np.flatnonzero(rng.random(n) < 0.3)
        xs[pos] = np.resize(np.array(SPECIAL, np.int8), pos.size)
    x, xbuf = dev.guarded((n,), torch.int8, name="x")
    x.copy_(torch.from_numpy(xs))
    y, ybuf = dev.guarded((n,), torch.int8, name="out")
    problems = []
    try:
        fn, block = rung_launcher(form[1], vec) if isinstance(form, tuple) else (build(form, vec), BLOCK)
        fn(x, y, -(-n // (block * vec)), 0)
        if dev.errors:
            problems.append(f"device: {type(dev.errors[0]).__name__}: {str(dev.errors[0])[:300]}")
        if dev.memory.violations:
            problems.append(f"violation: {dev.memory.violations[0]}")
        expect = np.where(xs < 0, 0, xs).astype(np.int8)
        got = y.numpy()
        bad = np.flatnonzero(got != expect)
        if bad.size:
            problems.append(f"{bad.size} of {n} bytes differ from relu; first at {bad[:4].tolist()}: x "
                            f"{xs[bad[:4]].tolist()} expected {expect[bad[:4]].tolist()} got {got[bad[:4]].tolist()}")
        for check in (lambda: S.assert_guards(ybuf, y), lambda: S.assert_guards(xbuf, x),
                      lambda: S.assert_written_once(dev, y)):
            try:
                check()
            except AssertionError as e:
                problems.append(str(e))
        if not np.array_equal(x.numpy(), xs):
            problems.append("input modified")
    finally:
        dev.reset()
    return problems


def loaded(dev, form, vec=VEC):
    """The form's codeobj.Kernel as the virtual device received it (one launch loads it);
    a rung's int8 kernel is its shipped object, never a same-named unshipped build another
    test loaded (v3 at unroll 4: relu_v3_tuned_int8_x16_b128_u4)."""
    if isinstance(form, tuple):
        import vgpu_support as S

        return S.shipped_kernel(dev, form[1], "int8", vec)

    def find():
        for co in dev.modules.values():
            for k in co.kernels.values():
                if k.name == kernel_name(form, vec):
                    return k
        return None

    if find() is None:
        assert run(dev, form, vec, vec=vec) == [], f"{form} x{vec}: first launch failed"
    return find()
