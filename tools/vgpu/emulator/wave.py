"""Registers of a batch of waves and the operand access every handler uses.

A batch holds W waves: SGPRs S [W, 128] u32, SCC [W], VGPRs V [NV, W, 64] u32.
One instruction runs on the selected waves `ws` (those at the lowest PC) through
a `Ctx`, which reads and writes operands in the disassembler's form (`Op`)."""

import numpy as np

from ..disasm import EXEC, NUM_SGPRS, Op, Unsupported
from ..memory import Violation

U32, U64, I64 = np.uint32, np.uint64, np.int64
M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
POISON = 0xBADC0DE5  # initial value of registers the hardware does not initialise
LANES = 64


class Wavefronts:
    """Registers of a batch of waves: S [W, 128] u32, SCC [W], V [NV, W, 64] u32."""

    def __init__(self, nwaves, nvgpr):
        self.W = nwaves
        self.S = np.full((nwaves, NUM_SGPRS), POISON, dtype=U32)
        self.SCC = np.zeros(nwaves, dtype=bool)
        self.V = np.full((nvgpr, nwaves, LANES), POISON, dtype=U32)
        self.nvgpr = nvgpr


_BITS = np.arange(32, dtype=U32)


def mask_from_pair(lo, hi):
    """u32 [n] x2 -> bool [n, 64]"""
    return np.concatenate([((lo[:, None] >> _BITS) & 1).astype(bool), ((hi[:, None] >> _BITS) & 1).astype(bool)], axis=1)


def pair_from_mask(m):
    w = (m.astype(U64) << np.arange(64, dtype=U64)).sum(axis=1, dtype=U64)
    return (w & U64(M32)).astype(U32), (w >> U64(32)).astype(U32)


def as_i32(x):
    return x.astype(U32).view(np.int32) if isinstance(x, np.ndarray) else np.int32(x)


def no_mods(c, allowed=()):
    extra = set(c.ins.mods) - set(allowed)
    if extra:
        raise Unsupported(f"modifier(s) {sorted(extra)} in {c.ins.text}")


def check_nops(c, k):
    if len(c.ins.ops) != k:
        raise Unsupported(f"{len(c.ins.ops)} operands in {c.ins.text}")


class Ctx:
    """Everything one instruction's execution sees."""

    def __init__(self, emu, st, ws, ins, wave_ids, pc_index):
        self.emu, self.st, self.ws, self.ins = emu, st, ws, ins
        self.wave_ids = wave_ids  # global wave numbers of the selected waves [n]
        self.n = len(wave_ids)
        self.pc_index = pc_index  # index of `ins` in the program
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
                return np.full(self.n, v & M64, dtype=U64)
            if not -(2**31) <= v < 2**32:
                raise Unsupported(f"literal {op.text} in {self.ins.text}")
            return np.full(self.n, v & M32, dtype=U32)
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
            self.st.S[self.ws, op.reg] = (val & U64(M32)).astype(U32)
            self.st.S[self.ws, op.reg + 1] = (val >> U64(32)).astype(U32)

    def set_scc(self, cond):
        self.st.SCC[self.ws] = cond

    # ---------------- masks
    @property
    def exec(self):
        if self._exec is None:
            self._exec = mask_from_pair(self.st.S[self.ws, EXEC], self.st.S[self.ws, EXEC + 1])
        return self._exec

    def set_exec(self, value_u64):
        self.st.S[self.ws, EXEC] = (value_u64 & U64(M32)).astype(U32)
        self.st.S[self.ws, EXEC + 1] = (value_u64 >> U64(32)).astype(U32)
        self._exec = None

    def mask_get(self, op: Op):
        if op.kind != "s" or op.n != 2:
            raise Unsupported(f"lane mask operand {op.text} in {self.ins.text}")
        return mask_from_pair(self.st.S[self.ws, op.reg], self.st.S[self.ws, op.reg + 1])

    def mask_set(self, op: Op, m):
        if op.kind != "s" or op.n != 2:
            raise Unsupported(f"lane mask destination {op.text} in {self.ins.text}")
        lo, hi = pair_from_mask(m)
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
            return np.full((self.n, 1), v & M64, dtype=U64)
        return self.sget(op, width)[:, None]

    def vset(self, op: Op, val, mask=None, width=32):
        if op.kind != "v" or op.n != width // 32:
            raise Unsupported(f"vector destination {op.text} in {self.ins.text}")
        m = self.exec if mask is None else mask
        if width == 64:
            val = np.broadcast_to(val, (self.n, LANES)).astype(U64)
            parts = [(val & U64(M32)).astype(U32), (val >> U64(32)).astype(U32)]
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
