"""Vector ALU instructions (VOP1/VOP2/VOP3/VOPC, SDWA where implemented).

Each VALU mnemonic is entered in the table with its encodings (`_e32`, `_e64`
and the bare name); SDWA only where the handler reads the SDWA modifiers.
VALU results are written to EXEC lanes only. 16-bit operations work on bits
[15:0] of their sources and zero bits [31:16] of the result (GFX9 behaviour:
LLVM's GCNSubtarget::zeroesHigh16BitsOfDest lists V_ASHRREV_I16 and V_MAX_I16,
e32 and e64, as zeroing on GFX9, the generation gfx950 belongs to)."""

import numpy as np

from ..disasm import VCC, Unsupported
from .scalar import INT_COMPARES
from .wave import I64, LANES, M32, U32, U64, as_i32, check_nops, no_mods

ENCODINGS = ("", "_e32", "_e64")


def vop(nsrc, fn, width=32, srcw=None, f16=False):
    srcw = srcw or (width,) * nsrc

    def f(c):
        check_nops(c, 1 + nsrc)
        no_mods(c)
        d = c.ins.ops[0]
        srcs = [c.vget(o, w, f16) for o, w in zip(c.ins.ops[1:], srcw)]
        c.vset(d, fn(*srcs), width=width)
    return f


PERM_SIGN_BITS = (15, 31, 47, 63)  # selectors 8..11: the sign bits of bytes 1, 3, 5, 7 of {S0, S1}


def perm_bytes(s0, s1, sel):
    """v_perm_b32: bytes of {S0, S1} (S1 is bytes 0..3) chosen by the four selector bytes."""
    s0, s1, sel = np.broadcast_arrays(s0.astype(U64), s1.astype(U64), sel.astype(U32))
    both = (s0 << U64(32)) | s1
    out = np.zeros(s0.shape, dtype=U32)
    byte = ((both[..., None] >> (8 * np.arange(8, dtype=U64))) & U64(0xFF)).astype(U32)  # [.., 8]
    # 8..11: sign of bytes 1, 3, 5, 7 replicated; 12: 0x00; 13..15 (and above): 0xFF
    signs = [((both >> U64(s)) & U64(1)).astype(U32) * U32(0xFF) for s in PERM_SIGN_BITS]
    for k in range(4):
        b = ((sel >> U32(8 * k)) & U32(0xFF)).astype(I64)
        picked = np.take_along_axis(byte, np.minimum(b, 7)[..., None], axis=-1)[..., 0]
        v = np.where(b < 8, picked, 0)
        for j in range(4):
            v = np.where(b == 8 + j, signs[j], v)
        v = np.where(b == 12, 0, v)
        v = np.where(b >= 13, 0xFF, v)
        out |= v.astype(U32) << U32(8 * k)
    return out


VOP = {  # mnemonic: (sources, result, result width, source widths)
    "v_mov_b32": (1, lambda a: a),
    "v_not_b32": (1, lambda a: ~a),
    "v_and_b32": (2, lambda a, b: a & b),
    "v_or_b32": (2, lambda a, b: a | b),
    "v_xor_b32": (2, lambda a, b: a ^ b),
    "v_add_u32": (2, lambda a, b: a + b),
    "v_sub_u32": (2, lambda a, b: a - b),
    "v_subrev_u32": (2, lambda a, b: b - a),
    "v_mul_lo_u32": (2, lambda a, b: (a.astype(U64) * b & U64(M32)).astype(U32)),
    "v_lshlrev_b32": (2, lambda a, b: b << (a & U32(31))),
    "v_lshrrev_b32": (2, lambda a, b: b >> (a & U32(31))),
    "v_ashrrev_i32": (2, lambda a, b: (as_i32(b) >> as_i32(a & U32(31))).view(U32)),
    "v_lshl_or_b32": (3, lambda a, b, s: (a << (b & U32(31))) | s),
    "v_and_or_b32": (3, lambda a, b, s: (a & b) | s),
    "v_or3_b32": (3, lambda a, b, s: a | b | s),
    "v_lshl_add_u32": (3, lambda a, b, s: (a << (b & U32(31))) + s),
    "v_add_lshl_u32": (3, lambda a, b, s: (a + b) << (s & U32(31))),
    "v_lshlrev_b64": (2, lambda a, b: b << (a & U64(63)), 64, (64, 64)),
    "v_lshrrev_b64": (2, lambda a, b: b >> (a & U64(63)), 64, (64, 64)),
    # gfx940+: D.u64 = (S0.u64 << S1.u[2:0]) + S2.u64
    "v_lshl_add_u64": (3, lambda a, b, s: (a << (b & U64(7))) + s, 64, (64, 64, 64)),
    "v_perm_b32": (3, lambda a, b, s: perm_bytes(a, b, s)),
}


def bitop3_bits(table, s0, s1, s2):
    """v_bitop3_b32: each result bit is bit (S0 << 2 | S1 << 1 | S2) of the 8-bit
    truth table (LLVM AMDGPUGlobalISelUtils.h BitOp3_Op: S0, S1, S2 are the
    columns 0xf0, 0xcc, 0xaa)."""
    s0, s1, s2 = np.broadcast_arrays(s0.astype(U32), s1.astype(U32), s2.astype(U32))
    out = np.zeros(s0.shape, dtype=U32)
    for k in range(8):
        if (table >> k) & 1:
            out |= (s0 if k & 4 else ~s0) & (s1 if k & 2 else ~s1) & (s2 if k & 1 else ~s2)
    return out


def v_bitop3_b32(c):
    check_nops(c, 4)
    no_mods(c, ("bitop3",))
    d, a, b, s = c.ins.ops
    table = c.ins.mods.get("bitop3", 0)  # LLVM prints no bitop3: for table 0
    if not 0 <= table <= 0xFF:
        raise Unsupported(f"bitop3 table {table} in {c.ins.text}")
    c.vset(d, bitop3_bits(table, c.vget(a), c.vget(b), c.vget(s)))


# ---- 16-bit integer operations: sources' bits [15:0], result zero-extended
def sext16(x):
    return ((x.astype(I64) & 0xFFFF) ^ 0x8000) - 0x8000


INT16_OPS = {  # D.i16 = op(S0, S1); looked up when the instruction runs
    "v_ashrrev_i16": lambda a, b: sext16(b) >> (a.astype(I64) & 15),   # S1.i16 >> S0[3:0]
    "v_max_i16": lambda a, b: np.maximum(sext16(a), sext16(b)),
}


def vop16(name):
    def f(c):
        check_nops(c, 3)
        no_mods(c)
        d, a, b = c.ins.ops
        c.vset(d, (INT16_OPS[name](c.vget(a), c.vget(b)) & 0xFFFF).astype(U32))
    return f


# ---- compares
def float_key(bits, kind, flush):
    """Ordered key of IEEE bits for compares, exact and independent of the host FP
    mode: returns (key int64, is_nan). -0.0 and +0.0 get the same key."""
    if kind == 32:
        b = bits.astype(U32).astype(I64)
        sign, mag = b >> 31, b & 0x7FFFFFFF
        nan = mag > 0x7F800000
        if flush:
            mag = np.where(mag < 0x800000, 0, mag)
    else:
        b = (bits.astype(U32) & U32(0xFFFF)).astype(I64)
        sign, mag = b >> 15, b & 0x7FFF
        nan = mag > 0x7C00
        if flush:
            mag = np.where(mag < 0x400, 0, mag)
    return np.where(sign == 1, -mag, mag), nan


# ordered predicates are false on NaN (u: either side NaN); n* predicates are their negation
FLOAT_COMPARES = {
    "f": lambda a, b, u: np.zeros_like(u), "tru": lambda a, b, u: np.ones_like(u),
    "lt": lambda a, b, u: (a < b) & ~u, "eq": lambda a, b, u: (a == b) & ~u, "le": lambda a, b, u: (a <= b) & ~u,
    "gt": lambda a, b, u: (a > b) & ~u, "lg": lambda a, b, u: (a != b) & ~u, "ge": lambda a, b, u: (a >= b) & ~u,
    "o": lambda a, b, u: ~u, "u": lambda a, b, u: u,
    "nge": lambda a, b, u: ~((a >= b) & ~u), "nlg": lambda a, b, u: ~((a != b) & ~u),
    "ngt": lambda a, b, u: ~((a > b) & ~u), "nle": lambda a, b, u: ~((a <= b) & ~u),
    "neq": lambda a, b, u: ~((a == b) & ~u), "nlt": lambda a, b, u: ~((a < b) & ~u),
}
FLOAT_TYPES, INT_TYPES = ("f32", "f16"), ("i32", "u32", "i16", "u16")


def vcmp(cond, ty, encoding):
    """v_cmp_<cond>_<ty>: D (a lane mask) = cond(S0, S1) on EXEC lanes, 0 elsewhere."""
    f16 = ty == "f16"

    def f(c):
        no_mods(c)
        check_nops(c, 3)
        d, a, b = c.ins.ops
        if encoding == "_e32" and not (d.kind == "s" and d.reg == VCC and d.n == 2):
            raise Unsupported(f"VOPC destination {d.text} in {c.ins.text}")
        x, y = c.vget(a, f16=f16), c.vget(b, f16=f16)
        if ty[0] == "f":
            bits = 16 if f16 else 32
            flush = c.emu.flush_denorm_inputs(bits)
            kx, nx = float_key(x, bits, flush)
            ky, ny = float_key(y, bits, flush)
            r = FLOAT_COMPARES[cond](kx, ky, nx | ny)
        else:
            if ty.endswith("16"):
                x, y = x & U32(0xFFFF), y & U32(0xFFFF)
                if ty[0] == "i":
                    x = (x.astype(I64) ^ 0x8000) - 0x8000
                    y = (y.astype(I64) ^ 0x8000) - 0x8000
            elif ty[0] == "i":
                x, y = as_i32(x), as_i32(y)
            r = INT_COMPARES[cond](x, y)
        c.mask_set(d, np.broadcast_to(r, (c.n, LANES)) & c.exec)
    return f


# ---- SDWA
def sdwa_select(x, sel, sext):
    """SDWA operand select -> int64 value (zero or sign extended)."""
    x = x.astype(I64) & M32
    if sel == "DWORD":
        return np.where(x >= 2**31, x - 2**32, x) if sext else x
    kind, k = sel.split("_")
    width = 8 if kind == "BYTE" else 16
    v = (x >> (width * int(k))) & ((1 << width) - 1)
    if sext:
        v = np.where(v >= 1 << (width - 1), v - (1 << width), v)
    return v


def sdwa_dst(r, sel, unused, old):
    """The SDWA result dword: r placed at dst_sel, the rest padded with 0,
    sign-extended or preserved from `old`."""
    r = r.astype(I64) & M32
    if sel == "DWORD":
        return r.astype(U32)
    kind, k = sel.split("_")
    width = 8 if kind == "BYTE" else 16
    shift = width * int(k)
    field_mask = ((1 << width) - 1) << shift
    v = (r & ((1 << width) - 1)) << shift
    if unused == "UNUSED_PAD":
        out = v
    elif unused == "UNUSED_PRESERVE":
        out = (old & ~field_mask & M32) | v
    elif unused == "UNUSED_SEXT":
        sign = (r >> (width - 1)) & 1
        high = (M32 << (shift + width)) & M32
        out = v | np.where(sign == 1, high, 0)
    else:
        raise Unsupported(f"dst_unused:{unused}")
    return (out & M32).astype(U32)


def sdwa_mods(c):
    """(dst_sel, dst_unused, src0_sel, src1_sel); any other modifier is Unsupported."""
    mods = dict(c.ins.mods)
    out = (mods.pop("dst_sel", "DWORD"), mods.pop("dst_unused", "UNUSED_PAD"), mods.pop("src0_sel", "DWORD"),
           mods.pop("src1_sel", "DWORD"))
    if mods:
        raise Unsupported(f"SDWA modifier(s) {sorted(mods)} in {c.ins.text}")
    return out


def sdwa_vop2(op, bits):
    """A VOP2 operation in SDWA form: sources selected (and extended) by
    src0_sel/src1_sel, the result (bits wide) placed by dst_sel/dst_unused."""
    def f(c):
        check_nops(c, 3)
        d, a, b = c.ins.ops
        dst_sel, dst_unused, s0, s1 = sdwa_mods(c)
        r = op()(sdwa_select(c.vget(a), s0, a.sext), sdwa_select(c.vget(b), s1, b.sext))
        if bits == 16:
            r = r & 0xFFFF
        c.vset(d, sdwa_dst(r, dst_sel, dst_unused, c.vreg(d.reg).astype(I64)))
    return f


SDWA_VOP2 = {  # mnemonic: (the operation, looked up when the instruction runs; result bits)
    "v_max_i16_sdwa": (lambda: INT16_OPS["v_max_i16"], 16),
    "v_or_b32_sdwa": (lambda: lambda a, b: a | b, 32),
}


# ---- v_cndmask_b32: D = mask ? S1 : S0
def cndmask(encoding):
    def f(c):
        check_nops(c, 4)
        d, a, b, m = c.ins.ops
        if encoding == "_sdwa":
            dst_sel, dst_unused, s0, s1 = sdwa_mods(c)
            if m.kind != "s" or m.reg != VCC:
                raise Unsupported(f"SDWA mask {m.text} in {c.ins.text}")
            x = sdwa_select(c.vget(a), s0, a.sext)
            y = sdwa_select(c.vget(b), s1, b.sext)
            r = np.where(c.mask_get(m), y, x)
            c.vset(d, sdwa_dst(r, dst_sel, dst_unused, c.vreg(d.reg).astype(I64)))
            return
        no_mods(c)
        if encoding == "_e32" and not (m.kind == "s" and m.reg == VCC):
            raise Unsupported(f"VOP2 mask {m.text} in {c.ins.text}")
        c.vset(d, np.where(c.mask_get(m), c.vget(b), c.vget(a)))
    return f


def handlers():
    table = {}
    for mn, spec in VOP.items():
        h = vop(*spec)
        table.update({mn + e: h for e in ENCODINGS})
    for e in ENCODINGS + ("_sdwa",):
        table["v_cndmask_b32" + e] = cndmask(e)
    for name in INT16_OPS:
        table.update({name + e: vop16(name) for e in ENCODINGS})
    table.update({mn: sdwa_vop2(*spec) for mn, spec in SDWA_VOP2.items()})
    table.update({"v_bitop3_b32" + e: v_bitop3_b32 for e in ("", "_e64")})  # VOP3 only
    for types, conds in ((FLOAT_TYPES, FLOAT_COMPARES), (INT_TYPES, INT_COMPARES)):
        for ty in types:
            for cond in conds:
                for e in ENCODINGS:
                    table[f"v_cmp_{cond}_{ty}{e}"] = vcmp(cond, ty, e)
    return table
