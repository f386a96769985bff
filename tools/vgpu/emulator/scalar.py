"""Scalar instructions: program control (SOPP), SALU (SOP1/SOP2/SOPC/SOPK).

`handlers()` returns {mnemonic: handler}; a handler takes the instruction's
Ctx and returns None (next instruction), "end", or ("branch", target index,
per-wave condition)."""

import numpy as np

from ..disasm import EXEC, VCC
from .wave import M32, U32, U64, as_i32, check_nops, no_mods

INT_COMPARES = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
                "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
                "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal,
                "lg": np.not_equal, "ge": np.greater_equal}
SCALAR_COMPARES = ("eq", "lg", "gt", "ge", "lt", "le")


# ---- program control
def endpgm(c):
    return "end"


def no_op(c):
    # s_nop, s_waitcnt: functional no-ops; wait states and waits are checked statically
    return None


def branch(cond_fn):
    def f(c):
        return ("branch", c.emu.program.branch_target(c.pc_index), cond_fn(c))
    return f


BRANCH_CONDITIONS = {
    "s_branch": lambda c: np.ones(c.n, bool),
    "s_cbranch_execz": lambda c: ~c.exec.any(axis=1),
    "s_cbranch_execnz": lambda c: c.exec.any(axis=1),
    "s_cbranch_vccz": lambda c: (c.sreg(VCC) | c.sreg(VCC + 1)) == 0,
    "s_cbranch_vccnz": lambda c: (c.sreg(VCC) | c.sreg(VCC + 1)) != 0,
    "s_cbranch_scc0": lambda c: ~c.st.SCC[c.ws],
    "s_cbranch_scc1": lambda c: c.st.SCC[c.ws].copy(),
}


# ---- SALU
def sop2(fn, width=32, scc=None):
    def f(c):
        check_nops(c, 3)
        no_mods(c)
        d, a, b = c.ins.ops
        x, y = c.sget(a, width), c.sget(b, width)
        r = fn(x, y)
        if scc is not None:
            c.set_scc(scc(x, y, r))
        c.sset(d, r, width)
    return f


def _nonzero(x, y, r):
    return r != 0


SOP2 = {  # mnemonic: (result, width, SCC)
    "s_and_b32": (lambda x, y: x & y, 32, _nonzero),
    "s_or_b32": (lambda x, y: x | y, 32, _nonzero),
    "s_xor_b32": (lambda x, y: x ^ y, 32, _nonzero),
    "s_andn2_b32": (lambda x, y: x & ~y, 32, _nonzero),
    "s_and_b64": (lambda x, y: x & y, 64, _nonzero),
    "s_or_b64": (lambda x, y: x | y, 64, _nonzero),
    "s_xor_b64": (lambda x, y: x ^ y, 64, _nonzero),
    "s_andn2_b64": (lambda x, y: x & ~y, 64, _nonzero),
    "s_lshl_b32": (lambda x, y: x << (y & U32(31)), 32, _nonzero),
    "s_lshr_b32": (lambda x, y: x >> (y & U32(31)), 32, _nonzero),
    "s_ashr_i32": (lambda x, y: (as_i32(x) >> as_i32(y & U32(31))).view(U32), 32, _nonzero),
    "s_lshl_b64": (lambda x, y: x << (y & U64(63)), 64, _nonzero),
    "s_lshr_b64": (lambda x, y: x >> (y & U64(63)), 64, _nonzero),
    "s_add_u32": (lambda x, y: x + y, 32, lambda x, y, r: (x.astype(U64) + y) > M32),
    "s_sub_u32": (lambda x, y: x - y, 32, lambda x, y, r: y > x),
    "s_add_i32": (lambda x, y: x + y, 32, lambda x, y, r: ((x >> 31) == (y >> 31)) & ((r >> 31) != (x >> 31))),
    "s_mul_i32": (lambda x, y: (x.astype(U64) * y & U64(M32)).astype(U32), 32, None),
    "s_min_u32": (lambda x, y: np.minimum(x, y), 32, lambda x, y, r: x < y),
    "s_max_u32": (lambda x, y: np.maximum(x, y), 32, lambda x, y, r: x > y),
}


def s_addc_u32(c):
    check_nops(c, 3)
    d, a, b = c.ins.ops
    x, y = c.sget(a).astype(U64), c.sget(b).astype(U64)
    r = x + y + c.st.SCC[c.ws].astype(U64)
    c.set_scc(r > M32)
    c.sset(d, (r & U64(M32)).astype(U32))


def smov(width):
    def f(c):
        check_nops(c, 2)
        no_mods(c)
        c.sset(c.ins.ops[0], c.sget(c.ins.ops[1], width), width)
    return f


def s_movk_i32(c):
    check_nops(c, 2)
    v = c.ins.ops[1].value & 0xFFFF
    v = v - 0x10000 if v >= 0x8000 else v
    c.sset(c.ins.ops[0], np.full(c.n, v & M32, dtype=U32))


def saveexec(fn):
    """sdst = EXEC; EXEC = fn(src, EXEC); SCC = EXEC != 0."""
    def f(c):
        check_nops(c, 2)
        no_mods(c)
        d, s = c.ins.ops
        src = c.sget(s, 64)
        old = c.sreg(EXEC, 2)
        new = fn(src, old)
        c.sset(d, old, 64)
        c.set_exec(new)
        c.set_scc(new != 0)
    return f


SAVEEXEC = {"s_and_saveexec_b64": lambda s, e: s & e, "s_or_saveexec_b64": lambda s, e: s | e,
            "s_andn2_saveexec_b64": lambda s, e: s & ~e}


def scmp(cond, signed):
    def f(c):
        check_nops(c, 2)
        no_mods(c)
        a, b = c.sget(c.ins.ops[0]), c.sget(c.ins.ops[1])
        if signed:
            a, b = as_i32(a), as_i32(b)
        c.set_scc(INT_COMPARES[cond](a, b))
    return f


def cselect(width):
    def f(c):
        d, a, b = c.ins.ops
        c.sset(d, np.where(c.st.SCC[c.ws], c.sget(a, width), c.sget(b, width)), width)
    return f


def handlers():
    table = {"s_endpgm": endpgm, "s_nop": no_op, "s_waitcnt": no_op,
             "s_addc_u32": s_addc_u32, "s_mov_b32": smov(32), "s_mov_b64": smov(64), "s_movk_i32": s_movk_i32,
             "s_cselect_b32": cselect(32), "s_cselect_b64": cselect(64)}
    table.update({mn: branch(cond) for mn, cond in BRANCH_CONDITIONS.items()})
    table.update({mn: sop2(*spec) for mn, spec in SOP2.items()})
    table.update({mn: saveexec(fn) for mn, fn in SAVEEXEC.items()})
    table.update({f"s_cmp_{cond}_{ty}": scmp(cond, ty == "i32") for cond in SCALAR_COMPARES for ty in ("i32", "u32")})
    return table
