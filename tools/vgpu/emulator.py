"""A functional emulator of the gfx950 (CDNA4) instruction subset the ladder
kernels compile to. Wave64, numpy-vectorized over the 64 lanes and over every
wave of a launch batch (kernels without LDS or barriers have no cross-wave
interaction). Waves carry their own PC: at each step the waves at the lowest PC
execute that instruction together, so divergent branches are exact.

An instruction, operand form or modifier that is not implemented raises
`Unsupported` naming it: nothing is skipped silently.
"""

from dataclasses import dataclass, field

import numpy as np

from . import hazards as _hazards
from .isa import EXEC, M0, NUM_SGPRS, VCC, Instr, Op, Unsupported, parse_line
from .memory import Violation

U32, U64, I64 = np.uint32, np.uint64, np.int64
POISON = 0xBADC0DE5  # initial value of registers the hardware does not initialise
STRADDLE_MODELS = ("dword", "whole", "start")
ACCEPTED_CACHE_BITS = {"sc0", "sc1", "nt"}
LANES = 64


class LaunchError(Exception):
    pass


class Hazard(Exception):
    """A register read or overwritten before the s_waitcnt covering its load."""


class DescriptorError(LaunchError):
    """A buffer resource the emulator does not accept (names the field)."""


@dataclass
class KernelRecord:
    """What one kernel did on this emulator in this process (all launches)."""
    launches: int = 0        # launches that ran to completion
    alignment: dict = field(default_factory=dict)  # instr address -> (text, bytes, smallest alignment seen)


KERNELS = {}  # kernel name -> KernelRecord, for every kernel launched in this process


# --------------------------------------------------------------------------- program
class Program:
    """A kernel's instructions, decoded once from the disassembly."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.instrs = []
        self.decode_errors = {}
        for ln in kernel.lines:
            try:
                ins = parse_line(ln)
            except Unsupported as e:
                ins = Instr(ln.addr, 4 * len(ln.words), ln.mnemonic, f"{ln.mnemonic} {ln.operands}", [], {})
                self.decode_errors[ln.addr] = str(e)
            self.instrs.append(ins)
        self.index = {ins.addr: i for i, ins in enumerate(self.instrs)}
        if not self.instrs or self.instrs[0].addr != kernel.entry:
            raise LaunchError(f"{kernel.name}: no code at entry 0x{kernel.entry:x}")
        self.unimplemented = sorted({i.mnemonic for i in self.instrs if _handler(i.mnemonic) is None}
                                    | {self.instrs[self.index[a]].mnemonic for a in self.decode_errors})
        self.hazards = scoreboard(self)
        # s_nop wait states (tools/vgpu/hazards.py): checked once per kernel, fails every launch
        self.nop_hazards = _hazards.check(self.instrs, self.branch_target,
                                          _hazards.xnack_enabled(getattr(kernel, "target", "")))

    def branch_target(self, i):
        ins = self.instrs[i]
        simm = ins.ops[0].value if ins.ops and ins.ops[0].kind == "imm" else None
        if simm is None:
            raise Unsupported(f"branch operand in {ins.text}")
        simm = simm - 0x10000 if simm >= 0x8000 else simm
        tgt = ins.addr + 4 + 4 * simm
        if tgt not in self.index:
            raise LaunchError(f"branch target 0x{tgt:x} of {ins.text} is not an instruction of {self.kernel.name}")
        return self.index[tgt]


# --------------------------------------------------------------------------- state
class Wavefronts:
    """Registers of a batch of waves: S [W, 128] u32, SCC [W], V [NV, W, 64] u32."""

    def __init__(self, nwaves, nvgpr):
        self.W = nwaves
        self.S = np.full((nwaves, NUM_SGPRS), POISON, dtype=U32)
        self.SCC = np.zeros(nwaves, dtype=bool)
        self.V = np.full((nvgpr, nwaves, LANES), POISON, dtype=U32)
        self.nvgpr = nvgpr


_BITS = np.arange(32, dtype=U32)


def _mask_from_pair(lo, hi):
    """u32 [n] x2 -> bool [n, 64]"""
    return np.concatenate([((lo[:, None] >> _BITS) & 1).astype(bool), ((hi[:, None] >> _BITS) & 1).astype(bool)], axis=1)


def _pair_from_mask(m):
    w = (m.astype(U64) << np.arange(64, dtype=U64)).sum(axis=1, dtype=U64)
    return (w & U64(0xFFFFFFFF)).astype(U32), (w >> U64(32)).astype(U32)


class Ctx:
    """Everything one instruction's execution sees."""

    def __init__(self, emu, st, ws, ins, wave_ids):
        self.emu, self.st, self.ws, self.ins = emu, st, ws, ins
        self.wave_ids = wave_ids  # global wave numbers of the selected waves [n]
        self.n = len(wave_ids)
        self._exec = None
        self.lane_wave = None     # per access: global wave, lane (set by memory ops)
        self.lane_lane = None

    # ---------------- scalar
    def sreg(self, r, n=1):
        if r + n > NUM_SGPRS:
            raise Unsupported(f"SGPR s{r} out of range in {self.ins.text}")
        if n == 1:
            return self.st.S[self.ws, r].copy()
        lo = self.st.S[self.ws, r].astype(U64)
        hi = self.st.S[self.ws, r + 1].astype(U64)
        return lo | (hi << U64(32))

    def sget(self, op: Op, width=32):
        """A scalar source as u32 [n] (width 32) or u64 [n] (width 64)."""
        if op.kind == "s":
            if width == 64:
                if op.n != 2:
                    raise Unsupported(f"64-bit operand {op.text} in {self.ins.text}")
                return self.sreg(op.reg, 2)
            if op.n != 1:
                raise Unsupported(f"32-bit operand {op.text} in {self.ins.text}")
            return self.sreg(op.reg)
        if op.kind == "imm":
            v = op.value
            if width == 64:
                return np.full(self.n, v & 0xFFFFFFFFFFFFFFFF, dtype=U64)
            if not -(2**31) <= v < 2**32:
                raise Unsupported(f"literal {op.text} in {self.ins.text}")
            return np.full(self.n, v & 0xFFFFFFFF, dtype=U32)
        if op.kind == "fimm":
            if width == 64:
                raise Unsupported(f"64-bit float constant in {self.ins.text}")
            return np.full(self.n, op.value[0], dtype=U32)
        raise Unsupported(f"scalar operand {op.text} in {self.ins.text}")

    def sset(self, op: Op, val, width=32):
        if op.kind != "s" or op.n != width // 32:
            raise Unsupported(f"scalar destination {op.text} in {self.ins.text}")
        if width == 32:
            self.st.S[self.ws, op.reg] = val.astype(U32)
        else:
            val = val.astype(U64)
            self.st.S[self.ws, op.reg] = (val & U64(0xFFFFFFFF)).astype(U32)
            self.st.S[self.ws, op.reg + 1] = (val >> U64(32)).astype(U32)

    def set_scc(self, cond):
        self.st.SCC[self.ws] = cond

    # ---------------- masks
    @property
    def exec(self):
        if self._exec is None:
            self._exec = _mask_from_pair(self.st.S[self.ws, EXEC], self.st.S[self.ws, EXEC + 1])
        return self._exec

    def mask_get(self, op: Op):
        if op.kind != "s" or op.n != 2:
            raise Unsupported(f"lane mask operand {op.text} in {self.ins.text}")
        return _mask_from_pair(self.st.S[self.ws, op.reg], self.st.S[self.ws, op.reg + 1])

    def mask_set(self, op: Op, m):
        if op.kind != "s" or op.n != 2:
            raise Unsupported(f"lane mask destination {op.text} in {self.ins.text}")
        lo, hi = _pair_from_mask(m)
        self.st.S[self.ws, op.reg] = lo
        self.st.S[self.ws, op.reg + 1] = hi
        if op.reg == EXEC:
            self._exec = None

    # ---------------- vector
    def vreg(self, r):
        if r >= self.st.nvgpr:
            raise Unsupported(f"VGPR v{r} beyond the kernel's {self.st.nvgpr} VGPRs in {self.ins.text}")
        return self.st.V[r, self.ws]

    def vget(self, op: Op, width=32, f16=False):
        """A vector source as u32 [n, 64] (or broadcastable), u64 for width 64."""
        if op.kind == "v":
            if width == 64:
                if op.n != 2:
                    raise Unsupported(f"64-bit operand {op.text} in {self.ins.text}")
                return self.vreg(op.reg).astype(U64) | (self.vreg(op.reg + 1).astype(U64) << U64(32))
            if op.n != 1:
                raise Unsupported(f"32-bit operand {op.text} in {self.ins.text}")
            return self.vreg(op.reg).copy()
        if op.kind == "fimm":
            if width == 64:
                raise Unsupported(f"64-bit float constant in {self.ins.text}")
            return np.full((self.n, 1), op.value[1] if f16 else op.value[0], dtype=U32)
        if op.kind == "imm" and width == 64:
            v = op.value
            if not -16 <= v <= 64:
                raise Unsupported(f"64-bit literal {op.text} in {self.ins.text}")
            return np.full((self.n, 1), v & 0xFFFFFFFFFFFFFFFF, dtype=U64)
        return self.sget(op, width)[:, None]

    def vset(self, op: Op, val, mask=None, width=32):
        if op.kind != "v" or op.n != width // 32:
            raise Unsupported(f"vector destination {op.text} in {self.ins.text}")
        m = self.exec if mask is None else mask
        if width == 64:
            val = np.broadcast_to(val, (self.n, LANES)).astype(U64)
            parts = [(val & U64(0xFFFFFFFF)).astype(U32), (val >> U64(32)).astype(U32)]
        else:
            parts = [np.broadcast_to(val, (self.n, LANES)).astype(U32)]
        for k, p in enumerate(parts):
            r = op.reg + k
            if r >= self.st.nvgpr:
                raise Unsupported(f"VGPR v{r} beyond the kernel's {self.st.nvgpr} VGPRs in {self.ins.text}")
            self.st.V[r, self.ws] = np.where(m, p, self.st.V[r, self.ws])

    def violation(self, kind, k, addr, size, region=""):
        return Violation(kind, self.ins.text, self.ins.addr, int(self.lane_wave[k]), int(self.lane_lane[k]),
                         addr, size, region)


# --------------------------------------------------------------------------- helpers
def _i32(x):
    return x.astype(U32).view(np.int32) if isinstance(x, np.ndarray) else np.int32(x)


def _float_key(bits, kind, flush):
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


_FCMP = {
    "f": lambda a, b, u: np.zeros_like(u), "tru": lambda a, b, u: np.ones_like(u),
    "lt": lambda a, b, u: (a < b) & ~u, "eq": lambda a, b, u: (a == b) & ~u, "le": lambda a, b, u: (a <= b) & ~u,
    "gt": lambda a, b, u: (a > b) & ~u, "lg": lambda a, b, u: (a != b) & ~u, "ge": lambda a, b, u: (a >= b) & ~u,
    "o": lambda a, b, u: ~u, "u": lambda a, b, u: u,
    "nge": lambda a, b, u: ~((a >= b) & ~u), "nlg": lambda a, b, u: ~((a != b) & ~u),
    "ngt": lambda a, b, u: ~((a > b) & ~u), "nle": lambda a, b, u: ~((a <= b) & ~u),
    "neq": lambda a, b, u: ~((a == b) & ~u), "nlt": lambda a, b, u: ~((a < b) & ~u),
}
_ICMP = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
         "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal,
         "lg": np.not_equal, "ge": np.greater_equal}


def _sel(x, sel, sext):
    """SDWA operand select -> int64 value (zero or sign extended)."""
    x = x.astype(I64) & 0xFFFFFFFF
    if sel == "DWORD":
        return np.where(x >= 2**31, x - 2**32, x) if sext else x
    kind, k = sel.split("_")
    width = 8 if kind == "BYTE" else 16
    v = (x >> (width * int(k))) & ((1 << width) - 1)
    if sext:
        v = np.where(v >= 1 << (width - 1), v - (1 << width), v)
    return v


# --------------------------------------------------------------------------- semantics
H = {}


def op(*names):
    def deco(f):
        for n in names:
            H[n] = f
        return f
    return deco


def _handler(mn):
    if mn in H:
        return H[mn]
    base = mn
    for suf in ("_e32", "_e64", "_sdwa"):
        if base.endswith(suf):
            base = base[: -len(suf)]
            break
    if base in H and mn.endswith(("_e32", "_e64", "_sdwa")):
        return H[base]
    if base.startswith("v_cmp_") and base != mn:
        return _vcmp if _cmp_kind(base) else None
    if base.startswith("v_cmp_"):
        return _vcmp if _cmp_kind(base) else None
    if base.startswith("s_cmp_"):
        return _scmp if _scmp_kind(base) else None
    return None


def _no_mods(c, allowed=()):
    extra = set(c.ins.mods) - set(allowed)
    if extra:
        raise Unsupported(f"modifier(s) {sorted(extra)} in {c.ins.text}")


def _check_nops(c, k):
    if len(c.ins.ops) != k:
        raise Unsupported(f"{len(c.ins.ops)} operands in {c.ins.text}")


# ---- program control
@op("s_endpgm")
def _endpgm(c):
    return "end"


@op("s_nop", "s_waitcnt")
def _nop(c):
    # Functional no-ops; waits are checked statically by `scoreboard`.
    return None


def _branch(cond_fn):
    def f(c):
        cond = cond_fn(c)
        return ("branch", c.emu.program.branch_target(c.pc_index), cond)
    return f


H["s_branch"] = _branch(lambda c: np.ones(c.n, bool))
H["s_cbranch_execz"] = _branch(lambda c: ~c.exec.any(axis=1))
H["s_cbranch_execnz"] = _branch(lambda c: c.exec.any(axis=1))
H["s_cbranch_vccz"] = _branch(lambda c: (c.sreg(VCC) | c.sreg(VCC + 1)) == 0)
H["s_cbranch_vccnz"] = _branch(lambda c: (c.sreg(VCC) | c.sreg(VCC + 1)) != 0)
H["s_cbranch_scc0"] = _branch(lambda c: ~c.st.SCC[c.ws])
H["s_cbranch_scc1"] = _branch(lambda c: c.st.SCC[c.ws].copy())


# ---- scalar ALU
def _sop2(fn, width=32, scc=None):
    def f(c):
        _check_nops(c, 3)
        _no_mods(c)
        d, a, b = c.ins.ops
        x, y = c.sget(a, width), c.sget(b, width)
        r = fn(x, y, c)
        if scc is not None:
            c.set_scc(scc(x, y, r))
        c.sset(d, r, width)
    return f


_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
_nz = lambda x, y, r: r != 0
H["s_and_b32"] = _sop2(lambda x, y, c: x & y, 32, _nz)
H["s_or_b32"] = _sop2(lambda x, y, c: x | y, 32, _nz)
H["s_xor_b32"] = _sop2(lambda x, y, c: x ^ y, 32, _nz)
H["s_andn2_b32"] = _sop2(lambda x, y, c: x & ~y, 32, _nz)
H["s_and_b64"] = _sop2(lambda x, y, c: x & y, 64, _nz)
H["s_or_b64"] = _sop2(lambda x, y, c: x | y, 64, _nz)
H["s_xor_b64"] = _sop2(lambda x, y, c: x ^ y, 64, _nz)
H["s_andn2_b64"] = _sop2(lambda x, y, c: x & ~y, 64, _nz)
H["s_lshl_b32"] = _sop2(lambda x, y, c: x << (y & U32(31)), 32, _nz)
H["s_lshr_b32"] = _sop2(lambda x, y, c: x >> (y & U32(31)), 32, _nz)
H["s_ashr_i32"] = _sop2(lambda x, y, c: (_i32(x) >> _i32(y & U32(31))).view(U32), 32, _nz)
H["s_lshl_b64"] = _sop2(lambda x, y, c: x << (y & U64(63)), 64, _nz)
H["s_lshr_b64"] = _sop2(lambda x, y, c: x >> (y & U64(63)), 64, _nz)
H["s_add_u32"] = _sop2(lambda x, y, c: x + y, 32, lambda x, y, r: (x.astype(U64) + y) > _M32)
H["s_sub_u32"] = _sop2(lambda x, y, c: x - y, 32, lambda x, y, r: y > x)
H["s_add_i32"] = _sop2(lambda x, y, c: x + y, 32,
                       lambda x, y, r: ((x >> 31) == (y >> 31)) & ((r >> 31) != (x >> 31)))
H["s_mul_i32"] = _sop2(lambda x, y, c: (x.astype(U64) * y & U64(_M32)).astype(U32), 32, None)
H["s_min_u32"] = _sop2(lambda x, y, c: np.minimum(x, y), 32, lambda x, y, r: x < y)
H["s_max_u32"] = _sop2(lambda x, y, c: np.maximum(x, y), 32, lambda x, y, r: x > y)


@op("s_addc_u32")
def _s_addc(c):
    _check_nops(c, 3)
    d, a, b = c.ins.ops
    x, y = c.sget(a).astype(U64), c.sget(b).astype(U64)
    r = x + y + c.st.SCC[c.ws].astype(U64)
    c.set_scc(r > _M32)
    c.sset(d, (r & U64(_M32)).astype(U32))


def _smov(width):
    def f(c):
        _check_nops(c, 2)
        _no_mods(c)
        c.sset(c.ins.ops[0], c.sget(c.ins.ops[1], width), width)
    return f


H["s_mov_b32"] = _smov(32)
H["s_mov_b64"] = _smov(64)


@op("s_movk_i32")
def _s_movk(c):
    _check_nops(c, 2)
    v = c.ins.ops[1].value & 0xFFFF
    v = v - 0x10000 if v >= 0x8000 else v
    c.sset(c.ins.ops[0], np.full(c.n, v & _M32, dtype=U32))


def _saveexec(fn):
    def f(c):
        _check_nops(c, 2)
        _no_mods(c)
        d, s = c.ins.ops
        src = c.sget(s, 64)
        old = c.sreg(EXEC, 2)
        new = fn(src, old)
        c.sset(d, old, 64)
        c.st.S[c.ws, EXEC] = (new & U64(_M32)).astype(U32)
        c.st.S[c.ws, EXEC + 1] = (new >> U64(32)).astype(U32)
        c._exec = None
        c.set_scc(new != 0)
    return f


H["s_and_saveexec_b64"] = _saveexec(lambda s, e: s & e)
H["s_or_saveexec_b64"] = _saveexec(lambda s, e: s | e)
H["s_andn2_saveexec_b64"] = _saveexec(lambda s, e: s & ~e)


def _scmp_kind(base):
    parts = base.split("_")
    return len(parts) == 4 and parts[2] in ("eq", "lg", "gt", "ge", "lt", "le") and parts[3] in ("i32", "u32")


def _scmp(c):
    _check_nops(c, 2)
    _no_mods(c)
    _, _, cond, ty = c.ins.mnemonic.split("_")
    a, b = c.sget(c.ins.ops[0]), c.sget(c.ins.ops[1])
    if ty == "i32":
        a, b = _i32(a), _i32(b)
    c.set_scc(_ICMP[cond](a, b))


@op("s_cselect_b32", "s_cselect_b64")
def _s_cselect(c):
    w = 64 if c.ins.mnemonic.endswith("64") else 32
    d, a, b = c.ins.ops
    c.sset(d, np.where(c.st.SCC[c.ws], c.sget(a, w), c.sget(b, w)), w)


# ---- scalar memory
def _s_load(words):
    def f(c):
        _check_nops(c, 3)
        _no_mods(c, ("glc",))
        d, base, off = c.ins.ops
        if d.kind != "s" or d.n != words:
            raise Unsupported(f"destination {d.text} in {c.ins.text}")
        addr = c.sget(base, 64)
        if off.kind == "imm":
            addr = addr + U64(off.value & 0xFFFFF)
        else:
            addr = addr + c.sget(off).astype(U64)
        addr = addr & ~U64(3)  # SMEM ignores the two low address bits
        c.lane_wave, c.lane_lane = c.wave_ids, np.full(c.n, -1)
        data = c.emu.memory.read(addr, 4 * words, c)
        for k in range(words):
            c.st.S[c.ws, d.reg + k] = data[:, k]
    return f


for _w, _s in ((1, ""), (2, "x2"), (4, "x4"), (8, "x8"), (16, "x16")):
    H[f"s_load_dword{_s}"] = _s_load(_w)


# ---- vector ALU
def _vop(nsrc, fn, width=32, srcw=None, f16=False):
    srcw = srcw or (width,) * nsrc

    def f(c):
        _check_nops(c, 1 + nsrc)
        _no_mods(c)
        d = c.ins.ops[0]
        srcs = [c.vget(o, w, f16) for o, w in zip(c.ins.ops[1:], srcw)]
        c.vset(d, fn(*srcs), width=width)
    return f


H["v_mov_b32"] = _vop(1, lambda a: a)
H["v_not_b32"] = _vop(1, lambda a: ~a)
H["v_and_b32"] = _vop(2, lambda a, b: a & b)
H["v_or_b32"] = _vop(2, lambda a, b: a | b)
H["v_xor_b32"] = _vop(2, lambda a, b: a ^ b)
H["v_add_u32"] = _vop(2, lambda a, b: a + b)
H["v_sub_u32"] = _vop(2, lambda a, b: a - b)
H["v_subrev_u32"] = _vop(2, lambda a, b: b - a)
H["v_mul_lo_u32"] = _vop(2, lambda a, b: (a.astype(U64) * b & U64(_M32)).astype(U32))
H["v_lshlrev_b32"] = _vop(2, lambda a, b: b << (a & U32(31)))
H["v_lshrrev_b32"] = _vop(2, lambda a, b: b >> (a & U32(31)))
H["v_ashrrev_i32"] = _vop(2, lambda a, b: (_i32(b) >> _i32(a & U32(31))).view(U32))
H["v_lshl_or_b32"] = _vop(3, lambda a, b, s: (a << (b & U32(31))) | s)
H["v_and_or_b32"] = _vop(3, lambda a, b, s: (a & b) | s)
H["v_or3_b32"] = _vop(3, lambda a, b, s: a | b | s)
H["v_lshl_add_u32"] = _vop(3, lambda a, b, s: (a << (b & U32(31))) + s)
H["v_add_lshl_u32"] = _vop(3, lambda a, b, s: (a + b) << (s & U32(31)))
H["v_lshlrev_b64"] = _vop(2, lambda a, b: b << (a & U64(63)), 64, (64, 64))
H["v_lshrrev_b64"] = _vop(2, lambda a, b: b >> (a & U64(63)), 64, (64, 64))
# gfx940+: D.u64 = (S0.u64 << S1.u[2:0]) + S2.u64
H["v_lshl_add_u64"] = _vop(3, lambda a, b, s: (a << (b & U64(7))) + s, 64, (64, 64, 64))


def _perm(s0, s1, sel):
    """v_perm_b32: bytes of {S0, S1} (S1 is bytes 0..3) chosen by the four selector bytes."""
    s0, s1, sel = np.broadcast_arrays(s0.astype(U64), s1.astype(U64), sel.astype(U32))
    both = (s0 << U64(32)) | s1
    out = np.zeros(s0.shape, dtype=U32)
    for k in range(4):
        b = ((sel >> U32(8 * k)) & U32(0xFF)).astype(I64)
        byte = ((both[..., None] >> (8 * np.arange(8, dtype=U64))) & U64(0xFF)).astype(U32)  # [.., 8]
        picked = np.take_along_axis(byte, np.minimum(b, 7)[..., None], axis=-1)[..., 0]
        # 8..11: sign of bytes 1, 3, 5, 7; 12: 0x00; 13..15 (and above): 0xFF
        signs = [(both >> U64(15)) & U64(1), (both >> U64(31)) & U64(1), (both >> U64(47)) & U64(1),
                 (both >> U64(63)) & U64(1)]
        v = np.where(b < 8, picked, 0)
        for j in range(4):
            v = np.where(b == 8 + j, signs[j].astype(U32) * U32(0xFF), v)
        v = np.where(b == 12, 0, v)
        v = np.where(b >= 13, 0xFF, v)
        out |= v.astype(U32) << U32(8 * k)
    return out


H["v_perm_b32"] = _vop(3, _perm)


def _cmp_kind(base):
    parts = base.split("_")  # v cmp ngt f32
    if len(parts) != 4:
        return None
    cond, ty = parts[2], parts[3]
    if ty in ("f32", "f16") and cond in _FCMP:
        return cond, ty
    if ty in ("i32", "u32", "i16", "u16") and cond in _ICMP:
        return cond, ty
    return None


def _vcmp(c):
    mn = c.ins.mnemonic
    if mn.endswith("_sdwa"):
        raise Unsupported(f"SDWA compare {c.ins.text}")
    _no_mods(c)
    _check_nops(c, 3)
    base = mn.rsplit("_", 1)[0] if mn.endswith(("_e32", "_e64")) else mn
    cond, ty = _cmp_kind(base)
    d, a, b = c.ins.ops
    if mn.endswith("_e32") and not (d.kind == "s" and d.reg == VCC and d.n == 2):
        raise Unsupported(f"VOPC destination {d.text} in {c.ins.text}")
    f16 = ty == "f16"
    x, y = c.vget(a, f16=f16), c.vget(b, f16=f16)
    if ty[0] == "f":
        flush = c.emu.flush_denorm_inputs(16 if f16 else 32)
        kx, nx = _float_key(x, 16 if f16 else 32, flush)
        ky, ny = _float_key(y, 16 if f16 else 32, flush)
        r = _FCMP[cond](kx, ky, nx | ny)
    else:
        if ty.endswith("16"):
            x, y = x & U32(0xFFFF), y & U32(0xFFFF)
            if ty[0] == "i":
                x = (x.astype(I64) ^ 0x8000) - 0x8000
                y = (y.astype(I64) ^ 0x8000) - 0x8000
        elif ty[0] == "i":
            x, y = _i32(x), _i32(y)
        r = _ICMP[cond](x, y)
    # lanes outside EXEC get 0 in the mask
    c.mask_set(d, np.broadcast_to(r, (c.n, LANES)) & c.exec)


@op("v_cndmask_b32")
def _v_cndmask(c):
    mn = c.ins.mnemonic
    _check_nops(c, 4)
    d, a, b, m = c.ins.ops
    if mn.endswith("_sdwa"):
        mods = dict(c.ins.mods)
        dst_sel = mods.pop("dst_sel", "DWORD")
        dst_unused = mods.pop("dst_unused", "UNUSED_PAD")
        s0 = mods.pop("src0_sel", "DWORD")
        s1 = mods.pop("src1_sel", "DWORD")
        if mods:
            raise Unsupported(f"SDWA modifier(s) {sorted(mods)} in {c.ins.text}")
        if m.kind != "s" or m.reg != VCC:
            raise Unsupported(f"SDWA mask {m.text} in {c.ins.text}")
        x = _sel(c.vget(a), s0, a.sext)
        y = _sel(c.vget(b), s1, b.sext)
        r = np.where(c.mask_get(m), y, x)
        old = c.vreg(d.reg).astype(I64)
        c.vset(d, _sdwa_dst(r, dst_sel, dst_unused, old))
        return
    _no_mods(c)
    if mn.endswith("_e32") and not (m.kind == "s" and m.reg == VCC):
        raise Unsupported(f"VOP2 mask {m.text} in {c.ins.text}")
    c.vset(d, np.where(c.mask_get(m), c.vget(b), c.vget(a)))


def _sdwa_dst(r, sel, unused, old):
    r = r.astype(I64) & 0xFFFFFFFF
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
        out = (old & ~field_mask & 0xFFFFFFFF) | v
    elif unused == "UNUSED_SEXT":
        sign = (r >> (width - 1)) & 1
        high = (0xFFFFFFFF << (shift + width)) & 0xFFFFFFFF
        out = v | np.where(sign == 1, high, 0)
    else:
        raise Unsupported(f"dst_unused:{unused}")
    return (out & 0xFFFFFFFF).astype(U32)


# ---- vector memory
_MEM_BYTES = {"ubyte": 1, "sbyte": 1, "ushort": 2, "sshort": 2, "short": 2, "byte": 1,
              "dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}


def _mem_kind(mn):
    # global_load_dwordx4 / buffer_store_short -> ("load", "dwordx4")
    parts = mn.split("_", 2)
    if len(parts) != 3 or parts[1] not in ("load", "store") or parts[2] not in _MEM_BYTES:
        return None
    return parts[1], parts[2]


def _cache_bits(c, allowed):
    bits = {k for k in c.ins.mods if k in ACCEPTED_CACHE_BITS}
    extra = set(c.ins.mods) - ACCEPTED_CACHE_BITS - set(allowed)
    if extra:
        raise Unsupported(f"modifier(s) {sorted(extra)} in {c.ins.text}")
    c.emu.note_cache_bits(c.ins, bits)


def _active_lanes(c):
    ex = c.exec
    wv = np.broadcast_to(c.wave_ids[:, None], ex.shape)[ex]
    ln = np.broadcast_to(np.arange(LANES), ex.shape)[ex]
    return ex, wv, ln


def _load_result(c, d, kind, data_full):
    """data_full: u32 [n, 64, words] of loaded words (zero for dropped ones)."""
    words = data_full.shape[-1]
    if d.kind != "v" or d.n != words:
        raise Unsupported(f"destination {d.text} in {c.ins.text}")
    for k in range(words):
        v = data_full[..., k]
        if kind == "sbyte":
            v = ((v & U32(0xFF)).astype(I64) ^ 0x80) - 0x80
        elif kind == "sshort":
            v = ((v & U32(0xFFFF)).astype(I64) ^ 0x8000) - 0x8000
        c.vset(Op("v", d.reg + k, 1), (v & 0xFFFFFFFF).astype(U32) if v.dtype == I64 else v)


def _natural(nbytes):
    return nbytes if nbytes in (1, 2, 4, 8, 16) else 4


def _note_alignment(c, addr, nbytes, waves, lanes):
    """Record the smallest alignment of this instruction's accesses (addr: u64
    [N], one per lane that accesses memory) and a `misaligned` violation for
    the first lane whose address is not a multiple of the access size."""
    if addr.size == 0:
        return
    orv = int(np.bitwise_or.reduce(addr))
    align = 16 if orv % 16 == 0 else orv & -orv
    c.emu.note_alignment(c.ins, nbytes, align)
    need = _natural(nbytes)
    if align < need:
        k = int(np.flatnonzero(addr % U64(need))[0])
        c.emu.memory.violations.append(Violation("misaligned", c.ins.text, c.ins.addr, int(waves[k]), int(lanes[k]),
                                                 int(addr[k]), nbytes, f"needs {need}-byte alignment"))


def _global(c):
    direction, kind = _mem_kind(c.ins.mnemonic)
    nbytes = _MEM_BYTES[kind]
    _cache_bits(c, ("offset",))
    ops = c.ins.ops
    if direction == "load":
        _check_nops(c, 3)
        d, vaddr, saddr = ops
    else:
        _check_nops(c, 3)
        vaddr, d, saddr = ops
    off = c.ins.mods.get("offset", 0)
    if saddr.kind == "off":
        addr = c.vget(vaddr, 64)
    else:
        addr = c.sget(saddr, 64)[:, None] + c.vget(vaddr).astype(U64)
    addr = np.broadcast_to(addr + U64(off & _M64), (c.n, LANES))
    ex, wv, ln = _active_lanes(c)
    c.lane_wave, c.lane_lane = wv, ln
    _note_alignment(c, addr[ex], nbytes, wv, ln)
    words = max(1, nbytes // 4)
    if direction == "load":
        got = c.emu.memory.read(addr[ex], nbytes, c)
        full = np.zeros((c.n, LANES, words), dtype=U32)
        full[ex] = got
        _load_result(c, d, kind, full)
    else:
        if d.kind != "v" or d.n != words:
            raise Unsupported(f"store data {d.text} in {c.ins.text}")
        data = np.stack([c.vreg(d.reg + k)[ex] for k in range(words)], axis=1)
        c.emu.memory.write(addr[ex], nbytes, data, c)


def _buffer(c):
    direction, kind = _mem_kind(c.ins.mnemonic)
    nbytes = _MEM_BYTES[kind]
    _cache_bits(c, ("offset", "offen", "idxen"))
    _check_nops(c, 4)
    d, vaddr, srsrc, soff = c.ins.ops
    if c.ins.mods.get("idxen"):
        raise Unsupported(f"idxen (structured buffer) in {c.ins.text}")
    if srsrc.kind != "s" or srsrc.n != 4:
        raise Unsupported(f"resource {srsrc.text} in {c.ins.text}")
    w = [c.sreg(srsrc.reg + k).astype(U64) for k in range(4)]
    _check_resource(c, w, srsrc)
    base = w[0] | ((w[1] & U64(0xFFFF)) << U64(32))
    num_records = w[2]
    inst_off = c.ins.mods.get("offset", 0)
    voff = c.vget(vaddr).astype(U64) if c.ins.mods.get("offen") else np.zeros((c.n, 1), U64)
    # range-check offset: inst_offset + voffset, 32-bit; soffset is not part of the check
    offset = (voff + U64(inst_off)) & U64(_M32)
    soffset = c.sget(soff).astype(U64)[:, None]
    words = max(1, nbytes // 4)
    wbytes = min(4, nbytes)
    k = np.arange(words, dtype=U64)
    offset = np.broadcast_to(offset, (c.n, LANES))
    word_off = offset[..., None] + U64(4) * k                       # [n, 64, words]
    nr = num_records[:, None, None]
    model = c.emu.straddle
    if model == "dword":
        inr = word_off < nr
    elif model == "whole":
        inr = np.broadcast_to((offset + U64(nbytes) <= num_records[:, None])[..., None], word_off.shape)
    elif model == "start":
        inr = np.broadcast_to((offset < num_records[:, None])[..., None], word_off.shape)
    else:
        raise LaunchError(f"unknown straddle model {model!r}")
    addr = base[:, None, None] + soffset[..., None] + word_off
    ex = c.exec
    act = inr & ex[..., None]
    c.emu.note_range_check(int((ex[..., None] & ~inr).sum()))
    touching = act.any(axis=-1)  # lanes with at least one word in range: they access memory
    start = (base[:, None] + soffset + offset)[touching]
    _note_alignment(c, start, nbytes, np.broadcast_to(c.wave_ids[:, None], touching.shape)[touching],
                    np.broadcast_to(np.arange(LANES), touching.shape)[touching])
    wv = np.broadcast_to(c.wave_ids[:, None, None], act.shape)[act]
    ln = np.broadcast_to(np.arange(LANES)[None, :, None], act.shape)[act]
    c.lane_wave, c.lane_lane = wv, ln
    if direction == "load":
        got = c.emu.memory.read(addr[act], wbytes, c)
        full = np.zeros((c.n, LANES, words), dtype=U32)
        full[act] = got[:, 0]
        _load_result(c, d, kind, full)
    else:
        if d.kind != "v" or d.n != words:
            raise Unsupported(f"store data {d.text} in {c.ins.text}")
        data = np.stack([c.vreg(d.reg + j) for j in range(words)], axis=-1)  # [n, 64, words]
        c.emu.memory.write(addr[act], wbytes, data[act][:, None], c)


# Buffer resource (V#) fields, CDNA/GFX9 layout (gem5 VegaISA BufferRsrcDescriptor;
# LLVM SIDefines.h MTBUFFormat). Raw (untyped) buffer instructions ignore the
# formats, but DATA_FORMAT 0 is INVALID (stores reported dropped on gfx942) and
# MLIR's AMDGPUToROCDL says both format fields must be nonzero; 15 and 6 are reserved.
ACCEPTED_DATA_FORMATS = frozenset(range(1, 15))      # word3 [18:15]
ACCEPTED_NUM_FORMATS = frozenset({1, 2, 3, 4, 5, 7})  # word3 [14:12]
_WORD3_ZERO_FIELDS = (("[20:19] ELEMENT_SIZE", 19, 2), ("[22:21] INDEX_STRIDE", 21, 2), ("[23] ADD_TID_ENABLE", 23, 1),
                      ("[29:24] (ATC/HASH/HEAP/MTYPE, non-volatile)", 24, 6), ("[31:30] TYPE", 30, 2))


def _check_resource(c, w, srsrc):
    """Validate every distinct buffer resource the selected waves hold; stop
    the launch with DescriptorError naming the first bad field."""
    uniq = np.unique(np.stack(w, axis=1), axis=0)
    for w0, w1, w2, w3 in (tuple(int(v) for v in row) for row in uniq):
        where = f"buffer resource {srsrc.text} = [0x{w0:08x}, 0x{w1:08x}, 0x{w2:08x}, 0x{w3:08x}] of {c.ins.text!r}"
        base = w0 | (w1 & 0xFFFF) << 32
        if (w1 >> 16) & 0x3FFF:
            raise DescriptorError(f"{where}: word1 [29:16] STRIDE {(w1 >> 16) & 0x3FFF}: raw buffers need 0")
        if (w1 >> 30) & 3:
            raise DescriptorError(f"{where}: word1 [31:30] CACHE_SWIZZLE/SWIZZLE_ENABLE {(w1 >> 30) & 3}: must be 0")
        dfmt, nfmt = (w3 >> 15) & 0xF, (w3 >> 12) & 7
        if dfmt not in ACCEPTED_DATA_FORMATS:
            raise DescriptorError(f"{where}: word3 [18:15] DATA_FORMAT {dfmt} not accepted for raw buffers "
                                  f"(accepted 1..14; 0 is INVALID, 15 reserved)")
        if nfmt not in ACCEPTED_NUM_FORMATS:
            raise DescriptorError(f"{where}: word3 [14:12] NUM_FORMAT {nfmt} not accepted for raw buffers "
                                  f"(accepted {sorted(ACCEPTED_NUM_FORMATS)})")
        for name, bit, width in _WORD3_ZERO_FIELDS:
            v = (w3 >> bit) & ((1 << width) - 1)
            if v:
                raise DescriptorError(f"{where}: word3 {name} {v}: must be 0")
        if w2 == 0:
            continue  # every access is out of range: nothing to bound
        region = c.emu.memory.find(base)
        if region is None or region.guard:
            raise DescriptorError(f"{where}: BASE 0x{base:x} is not inside a live allocation"
                                  + (f" (it is in {region.name})" if region is not None else ""))
        if base + w2 > region.end:
            raise DescriptorError(f"{where}: word2 NUM_RECORDS {w2} bytes runs {base + w2 - region.end} bytes "
                                  f"past the end of allocation {region.name}")


for _dir in ("load", "store"):
    for _kind in _MEM_BYTES:
        if _dir == "load" and _kind in ("short", "byte"):
            continue
        if _dir == "store" and _kind in ("ubyte", "sbyte", "ushort", "sshort"):
            continue
        H[f"global_{_dir}_{_kind}"] = _global
        H[f"buffer_{_dir}_{_kind}"] = _buffer


# --------------------------------------------------------------------------- scoreboard
def _reads_writes(ins):
    """(reads, writes, counter) of an instruction for the waitcnt scoreboard.
    counter: 'vm' / 'lgkm' for memory ops (writes are then pending), else None."""
    mn, ops = ins.mnemonic, ins.ops
    regs = lambda os_: {r for o in os_ for r in o.regs}
    if mn.startswith("s_load"):
        return regs(ops[1:]), regs(ops[:1]), "lgkm"
    if mn.startswith(("global_load", "buffer_load")):
        return regs(ops[1:]) | {("s", EXEC), ("s", EXEC + 1)}, regs(ops[:1]), "vm"
    if mn.startswith(("global_store", "buffer_store")):
        return regs(ops) | {("s", EXEC), ("s", EXEC + 1)}, set(), "vm"
    if mn.startswith(("s_cbranch_exec",)):
        return {("s", EXEC), ("s", EXEC + 1)}, set(), None
    if mn.startswith("s_cbranch_vcc"):
        return {("s", VCC), ("s", VCC + 1)}, set(), None
    if mn in ("s_waitcnt", "s_nop", "s_endpgm", "s_branch") or mn.startswith("s_cbranch"):
        return set(), set(), None
    if "saveexec" in mn:
        return regs(ops[1:]) | {("s", EXEC), ("s", EXEC + 1)}, regs(ops[:1]) | {("s", EXEC), ("s", EXEC + 1)}, None
    if mn.startswith("s_cmp"):
        return regs(ops), set(), None
    extra = {("s", EXEC), ("s", EXEC + 1)} if mn.startswith("v_") else set()
    return regs(ops[1:]) | extra, regs(ops[:1]), None


def scoreboard(program, max_paths=2000):
    """Walk every path through the kernel and report each register read or
    overwritten while a load into it is still outstanding (not covered by an
    s_waitcnt). VMEM returns in order; SMEM may return out of order, so only
    lgkmcnt(0) retires scalar loads. Returns a list of messages."""
    ins = program.instrs
    info = [_reads_writes(i) for i in ins]
    problems = []
    seen = set()
    stack = [(0, (), ())]
    paths = 0
    while stack and paths < max_paths:
        pc, vm, lgkm = stack.pop()
        while True:
            key = (pc, vm, lgkm)
            if key in seen or pc >= len(ins):
                break
            seen.add(key)
            i = ins[pc]
            reads, writes, counter = info[pc]
            pending = set().union(*[set(p) for p in vm], *[set(p) for p in lgkm]) if (vm or lgkm) else set()
            for r in sorted((reads | writes) & pending):
                problems.append(f"{i.text} at 0x{i.addr:x} uses {r[0]}{r[1]} before the s_waitcnt for its load")
            if i.mnemonic == "s_waitcnt":
                n = i.mods.get("vmcnt", 63)
                vm = vm[len(vm) - n:] if len(vm) > n else vm
                n = i.mods.get("lgkmcnt", 15)
                lgkm = () if n == 0 else lgkm
            if counter == "vm":
                vm = vm + (tuple(sorted(writes)),)
            elif counter == "lgkm":
                lgkm = lgkm + (tuple(sorted(writes)),)
            mn = i.mnemonic
            if mn == "s_endpgm":
                paths += 1
                break
            if mn.startswith("s_cbranch") or mn == "s_branch":
                try:
                    tgt = program.branch_target(pc)
                except Exception:
                    break
                stack.append((tgt, vm, lgkm))
                if mn == "s_branch":
                    break
            pc += 1
    return sorted(set(problems))


# --------------------------------------------------------------------------- launch
class Emulator:
    """Runs one launch of one kernel over the given memory."""

    def __init__(self, program, memory, straddle="dword", max_batch_waves=4096):
        if straddle not in STRADDLE_MODELS:
            raise LaunchError(f"straddle model {straddle!r} not in {STRADDLE_MODELS}")
        self.program = program
        self.memory = memory
        self.straddle = straddle
        self.max_batch_waves = max_batch_waves
        self.kd = program.kernel.kd
        self.cache_bits = {}        # instruction text -> set of cache bits seen
        self.range_dropped = 0      # buffer words dropped by the range check
        self.executed = 0           # instructions executed (per wave group)
        self.alignment = {}         # instr address -> (text, bytes, smallest alignment seen)

    def flush_denorm_inputs(self, bits):
        # FLOAT_DENORM_MODE: 0 flush src+dst, 1 flush dst, 2 flush src, 3 none
        mode = self.kd.denorm_mode_32 if bits == 32 else self.kd.denorm_mode_16_64
        return mode in (0, 2)

    def note_cache_bits(self, ins, bits):
        self.cache_bits.setdefault(ins.text, set()).update(bits)

    def note_range_check(self, n):
        self.range_dropped += n

    def note_alignment(self, ins, nbytes, align):
        prev = self.alignment.get(ins.addr)
        self.alignment[ins.addr] = (ins.text, nbytes, min(align, prev[2]) if prev else align)

    def run(self, grid, block, kernarg_addr):
        record = KERNELS.setdefault(self.program.kernel.name, KernelRecord())
        try:
            if self._run(grid, block, kernarg_addr):
                record.launches += 1
        finally:
            for addr, (text, nbytes, align) in self.alignment.items():
                prev = record.alignment.get(addr)
                record.alignment[addr] = (text, nbytes, min(align, prev[2]) if prev else align)

    def _run(self, grid, block, kernarg_addr):
        kd, prog = self.kd, self.program
        if prog.hazards:
            raise LaunchError("waitcnt scoreboard: " + "; ".join(prog.hazards))
        # an instruction the emulator lacks stops the run as Unsupported when reached, not here
        nop = [h for h in prog.nop_hazards
               if not (h.startswith("unchecked:") and h.split(" for ", 1)[1].split(" ", 1)[0] in prog.unimplemented)]
        if nop:
            raise LaunchError(f"hazard check ({len(nop)}): " + "; ".join(nop[:8]))
        if kd.wave32:
            raise Unsupported("wave32 kernel")
        if kd.private_segment or kd.private_segment_fixed_size:
            raise Unsupported("kernel uses a private (scratch) segment")
        if kd.workgroup_info:
            raise Unsupported("kernel wants the workgroup info SGPR")
        layout = kd.user_sgpr_layout()
        for name, _, _ in layout:
            if name != "kernarg_segment_ptr":
                raise Unsupported(f"user SGPR {name}")
        if kd.kernarg_preload:
            raise Unsupported("kernarg preload")
        if sum(n for _, _, n in layout) != kd.user_sgpr_count:
            raise LaunchError(f"user SGPR count {kd.user_sgpr_count} does not match the enabled user SGPRs {layout}")
        gx, gy, gz = grid
        bx, by, bz = block
        threads = bx * by * bz
        meta = prog.kernel.meta
        if threads == 0 or gx * gy * gz == 0:
            return False
        maxwg = meta.get(".max_flat_workgroup_size", 1024)
        if threads > maxwg:
            raise LaunchError(f"block of {threads} threads exceeds .max_flat_workgroup_size {maxwg}")
        reqd = meta.get(".reqd_workgroup_size")
        if reqd and list(reqd) != [bx, by, bz]:
            raise LaunchError(f"block {block} differs from .reqd_workgroup_size {reqd}")
        wpb = -(-threads // LANES)
        nblocks = gx * gy * gz
        blocks_per_batch = max(1, self.max_batch_waves // wpb)
        nvgpr = kd.vgpr_granules * 8
        for b0 in range(0, nblocks, blocks_per_batch):
            b1 = min(nblocks, b0 + blocks_per_batch)
            self._run_batch(b0, b1, wpb, threads, (gx, gy, gz), (bx, by, bz), nvgpr, kernarg_addr, layout)
        return True

    def _run_batch(self, b0, b1, wpb, threads, grid, block, nvgpr, kernarg_addr, layout):
        kd, prog = self.kd, self.program
        nb = b1 - b0
        W = nb * wpb
        st = Wavefronts(W, nvgpr)
        blk = np.repeat(np.arange(b0, b1), wpb)               # block of each wave
        wib = np.tile(np.arange(wpb), nb)                      # wave index inside its block
        wave_ids = blk * wpb + wib                             # global wave number
        # user SGPRs
        for name, s, n in layout:
            st.S[:, s] = kernarg_addr & 0xFFFFFFFF
            st.S[:, s + 1] = kernarg_addr >> 32
        s = kd.user_sgpr_count
        gx, gy, gz = grid
        ids = (blk % gx, (blk // gx) % gy, blk // (gx * gy))
        for dim, en in enumerate(kd.workgroup_id_enable):
            if en:
                st.S[:, s] = ids[dim]
                s += 1
            elif ids[dim].any():
                raise Unsupported(f"grid dimension {dim} > 1 but workgroup id {dim} is not enabled")
        # work-item ids: gfx950 packs x, y, z into v0 (10 bits each)
        t = wib[:, None] * LANES + np.arange(LANES)[None, :]  # flat thread id in block
        bx, by, bz = block
        tx, ty, tz = t % bx, (t // bx) % by, t // (bx * by)
        nid = kd.workitem_id_vgprs
        if nid < 1 and (ty.any() and (t < threads).any() and by > 1):
            raise Unsupported("block y > 1 but work-item id y is not enabled")
        if nid < 2 and bz > 1:
            raise Unsupported("block z > 1 but work-item id z is not enabled")
        st.V[0] = (tx | (ty << 10) | (tz << 20)).astype(U32) if nid else tx.astype(U32)
        live = t < threads
        lo, hi = _pair_from_mask(live)
        st.S[:, EXEC], st.S[:, EXEC + 1] = lo, hi
        st.S[:, VCC] = 0
        st.S[:, VCC + 1] = 0
        st.S[:, M0] = POISON
        pc = np.zeros(W, dtype=np.int64)
        done = np.zeros(W, dtype=bool)
        ninstr = len(prog.instrs)
        while not done.all():
            p = int(pc[~done].min())
            sel = (pc == p) & ~done
            ws = slice(None) if sel.all() else np.flatnonzero(sel)
            if p >= ninstr:
                raise LaunchError(f"{prog.kernel.name}: execution ran past the end of the kernel code")
            ins = prog.instrs[p]
            if ins.addr in prog.decode_errors:
                raise Unsupported(f"{prog.decode_errors[ins.addr]} in {ins.text!r} at 0x{ins.addr:x}")
            h = _handler(ins.mnemonic)
            if h is None:
                raise Unsupported(f"instruction not implemented: {ins.text!r} at 0x{ins.addr:x}")
            c = Ctx(self, st, ws, ins, wave_ids[ws])
            c.pc_index = p
            res = h(c)
            self.executed += 1
            idx = np.flatnonzero(sel)
            if res is None:
                pc[idx] = p + 1
            elif res == "end":
                done[idx] = True
            else:
                _, tgt, cond = res
                pc[idx] = np.where(cond, tgt, p + 1)
