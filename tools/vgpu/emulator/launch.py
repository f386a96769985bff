"""One launch of one kernel: the kernel descriptor's entry state (user SGPRs,
workgroup ids, work-item ids, EXEC), then the step loop. Waves run in batches
of up to `max_batch_waves`; each wave has its own PC and at each step the
waves at the lowest PC execute that instruction together, so divergent
branches are exact."""

from dataclasses import dataclass, field

import numpy as np

from ..disasm import EXEC, M0, VCC, Unsupported
from .errors import LaunchError
from .wave import LANES, POISON, U32, Ctx, Wavefronts, pair_from_mask

STRADDLE_MODELS = ("dword", "whole", "start")


@dataclass
class KernelRecord:
    """What one kernel did on this emulator in this process (all launches)."""
    launches: int = 0        # launches that ran to completion
    alignment: dict = field(default_factory=dict)  # instr address -> (text, bytes, smallest alignment seen)


KERNELS = {}  # kernel name -> KernelRecord, for every kernel launched in this process


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
        if prog.waitcnt_errors:
            raise LaunchError("waitcnt scoreboard: " + "; ".join(prog.waitcnt_errors))
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

    def _initial_state(self, b0, b1, wpb, threads, grid, block, nvgpr, kernarg_addr, layout):
        """Registers at kernel entry of blocks b0..b1-1, and each wave's global number."""
        kd = self.kd
        nb = b1 - b0
        st = Wavefronts(nb * wpb, nvgpr)
        blk = np.repeat(np.arange(b0, b1), wpb)               # block of each wave
        wib = np.tile(np.arange(wpb), nb)                      # wave index inside its block
        wave_ids = blk * wpb + wib                             # global wave number
        for name, s, n in layout:  # user SGPRs (only the kernarg pointer is accepted)
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
        st.S[:, EXEC], st.S[:, EXEC + 1] = pair_from_mask(t < threads)
        st.S[:, VCC] = 0
        st.S[:, VCC + 1] = 0
        st.S[:, M0] = POISON
        return st, wave_ids

    def _run_batch(self, *entry):
        prog = self.program
        st, wave_ids = self._initial_state(*entry)
        W = st.W
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
            h = prog.handlers[p]
            if h is None:
                raise Unsupported(f"instruction not implemented: {ins.text!r} at 0x{ins.addr:x}")
            res = h(Ctx(self, st, ws, ins, wave_ids[ws], p))
            self.executed += 1
            idx = np.flatnonzero(sel)
            if res is None:
                pc[idx] = p + 1
            elif res == "end":
                done[idx] = True
            else:
                _, tgt, cond = res
                pc[idx] = np.where(cond, tgt, p + 1)
