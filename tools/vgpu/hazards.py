"""Static check of gfx950 (CDNA4, a GFX940-family target) data hazards that
the hardware does not interlock and the compiler covers with `s_nop` (or with
independent instructions placed in between).

The rules are those LLVM's GCNHazardRecognizer (llvm/lib/Target/AMDGPU/
GCNHazardRecognizer.cpp, read at llvm-project d18555214fea) applies to a
GFX940-family subtarget, restricted to the instruction classes the ladder
kernels contain. The code here is written from the rules' statements, not
copied. Each rule names where it comes from:

  valu-sgpr-valu   checkVALUHazards, hasVDecCoExecHazard (GFX940): a VALU that
                   reads an SGPR (explicit operand, or VCC) needs 2 wait states
                   after a VALU wrote that SGPR.
  valu-sgpr-vmem   checkVMEMHazards, hasVMEMReadSGPRVALUDefHazard (VI and
                   later): a VMEM instruction reading an SGPR (resource,
                   soffset, saddr) needs 5 wait states after a VALU wrote it.
  store-data-valu  checkVALUHazardsHelper / createsVALUHazard,
                   has12DWordStoreHazard (all but SI): a VMEM store of more
                   than 8 bytes (MUBUF only without an soffset register) keeps
                   its data VGPRs; a VALU writing them needs 2 wait states on
                   GFX940 (1 before).
  sdwa-dst-forward checkVALUHazards, hasDstSelForwardingHazard (GFX940): a VALU
                   reading a VGPR written by an SDWA instruction with dst_sel
                   other than DWORD needs 1 wait state.
  smem-clause      checkSoftClauseHazards / checkSMRDHazards (XNACK on or
                   "any"): consecutive SMEM loads form a soft clause that may
                   replay; no instruction of it may write a register another
                   one of it reads or writes.
  vmem-clause      the same for consecutive VMEM instructions; a store may not
                   join a clause that already has a load.

Wait states: every instruction counts 1, `s_nop N` counts N + 1
(SIInstrInfo::getNumWaitStates). Every path through the kernel is walked, so
a hazard across a branch is seen too. An instruction class with hazard rules
not implemented here (DPP, v_readlane/v_writelane/v_readfirstlane,
v_div_fmas, transcendental VALU, MFMA, s_setreg/s_getreg, s_movrel, LDS, v_cmpx
writing EXEC, carry-out VALU) is reported, so a kernel that uses one fails
the check instead of passing unchecked.
"""

import re

from .disasm import EXEC

VALU_SGPR_VALU = 2
VALU_SGPR_VMEM = 5
STORE_DATA_VALU = 2
SDWA_DST_FORWARD = 1
WINDOW = 16  # instructions of history kept per path (clauses; every rule needs <= 5 wait states)

_UNCHECKED = re.compile(
    r"^(v_readlane|v_writelane|v_readfirstlane|v_div_fmas|v_div_scale|v_(exp|log|rcp|rsq|sqrt|sin|cos)_|"
    r"v_mfma|v_smfma|v_accvgpr|v_permlane|v_cmpx_|v_add_co|v_sub_co|v_subrev_co|v_addc|v_subb|v_movrel|"
    r"s_setreg|s_getreg|s_movrel|s_sendmsg|ds_|flat_|scratch_|buffer_.*lds|global_.*lds|v_interp|s_dcache|"
    r"s_setpc|s_swappc|s_getpc|s_cbranch_(cdbg|g_fork|join)|s_set_gpr_idx|s_rfe)")
_DPP = re.compile(r"_dpp$")


def _regs(ops):
    return {r for o in ops for r in o.regs}


def _sgprs(regs):
    return {r for r in regs if r[0] == "s"}


def _vgprs(regs):
    return {r for r in regs if r[0] == "v"}


class Info:
    """What one instruction means for the rules."""

    def __init__(self, ins):
        mn, ops = ins.mnemonic, ins.ops
        self.ins = ins
        self.waits = (ins.ops[0].value + 1) if mn == "s_nop" and ins.ops and ins.ops[0].kind == "imm" else 1
        self.valu = mn.startswith("v_")
        self.vmem = mn.startswith(("global_", "buffer_"))
        self.smem = mn.startswith("s_load") or mn.startswith("s_buffer_load")
        self.store = self.vmem and "_store_" in mn
        self.unchecked = bool(_UNCHECKED.match(mn) or _DPP.search(mn))
        self.defs, self.uses = set(), set()
        self.big_store_data = set()  # data VGPRs of a > 8-byte store that keeps them (store-data-valu)
        self.sdwa_partial_def = set()
        if self.valu:
            self.defs = _regs(ops[:1])
            self.uses = _regs(ops[1:])
            if mn.endswith("_sdwa") and ins.mods.get("dst_sel", "DWORD") != "DWORD":
                self.sdwa_partial_def = _vgprs(self.defs)
            if ins.mods.get("op_sel") not in (None, "[0,0]", "[0,0,0]", "[0,0,0,0]"):
                self.unchecked = True  # op_sel dst forwarding is not modelled here
        elif self.vmem:
            if self.store:
                # global_store vaddr, vdata, saddr/off; buffer_store vdata, vaddr, srsrc, soffset
                data = ops[1] if mn.startswith("global_") else ops[0]
                self.uses = _regs(ops)
                width = 4 * data.n
                soff_reg = mn.startswith("buffer_") and len(ops) > 3 and ops[3].kind == "s"
                if width > 8 and not soff_reg:
                    self.big_store_data = _vgprs(data.regs)
            else:
                self.defs = _regs(ops[:1])
                self.uses = _regs(ops[1:])
        elif self.smem:
            self.defs = _regs(ops[:1])
            self.uses = _regs(ops[1:])
        else:  # SALU / SOPP
            if mn.startswith(("s_cmp", "s_bitcmp")) or mn in ("s_nop", "s_waitcnt", "s_endpgm", "s_branch") \
                    or mn.startswith("s_cbranch"):
                self.uses = _regs(ops)
            else:
                self.defs = _regs(ops[:1])
                self.uses = _regs(ops[1:])
            if "saveexec" in mn:
                self.defs |= {("s", EXEC), ("s", EXEC + 1)}
        # SGPR operands read (VCC read by v_cndmask_b32_e32 / SDWA is printed as an operand)
        read_ops = ops if (self.store or not (self.valu or self.vmem or self.smem)) else ops[1:]
        self.sgpr_read_ops = [o for o in read_ops if o.kind == "s"]


def _since(history, pred):
    """Wait states between the newest instruction in `history` matching pred
    and the instruction being checked; None if none within the history."""
    w = 0
    for info in reversed(history):
        if pred(info):
            return w
        w += info.waits
    return None


def _valu_sgpr_reads(info, history, where, rule, needs):
    """`rule` for each SGPR operand info reads fewer than `needs` wait states after a VALU wrote it."""
    out = []
    for o in info.sgpr_read_ops:
        w = _since(history, lambda i, o=o: i.valu and set(o.regs) & i.defs)
        if w is not None and w < needs:
            out.append(f"{rule}: {where} reads {o.text} {w} wait state(s) after a VALU wrote it (needs {needs})")
    return out


def _check_one(info, history):
    out = []
    ins = info.ins
    where = f"{ins.text} at 0x{ins.addr:x}"
    if info.unchecked:
        out.append(f"unchecked: no hazard rule implemented here for {ins.mnemonic} ({where})")
    if info.valu:
        out += _valu_sgpr_reads(info, history, where, "valu-sgpr-valu", VALU_SGPR_VALU)
        for r in sorted(_vgprs(info.defs)):
            w = _since(history, lambda i, r=r: r in i.big_store_data)
            if w is not None and w < STORE_DATA_VALU:
                out.append(f"store-data-valu: {where} writes v{r[1]} {w} wait state(s) after a >8-byte store "
                           f"read it as data (needs {STORE_DATA_VALU})")
        for r in sorted(_vgprs(info.uses)):
            w = _since(history, lambda i, r=r: r in i.sdwa_partial_def)
            if w is not None and w < SDWA_DST_FORWARD:
                out.append(f"sdwa-dst-forward: {where} reads v{r[1]} {w} wait state(s) after an SDWA "
                           f"partial write (needs {SDWA_DST_FORWARD})")
    if info.vmem:
        out += _valu_sgpr_reads(info, history, where, "valu-sgpr-vmem", VALU_SGPR_VMEM)
    if info.smem or info.vmem:
        kind = "smem" if info.smem else "vmem"
        clause = []
        for prev in reversed(history):
            if (prev.smem if info.smem else prev.vmem) and prev.ins.mnemonic != "s_nop":
                clause.append(prev)
            else:
                break
        defs = set().union(*[c.defs for c in clause]) if clause else set()
        uses = set().union(*[c.uses for c in clause]) if clause else set()
        if defs:
            if info.store:
                out.append(f"{kind}-clause: {where} is a store right after a load clause (needs a break)")
            elif (defs | info.defs) & (uses | info.uses):
                bad = sorted((defs | info.defs) & (uses | info.uses))
                out.append(f"{kind}-clause: {where} joins a soft clause in which {bad[0][0]}{bad[0][1]} is "
                           "written and read (needs a break)")
    return out


def check(instrs, branch_target, xnack=True):
    """Every hazard on every path through `instrs` (disasm.Instr, in address
    order). branch_target(i) -> index of the branch target of instruction i.
    Returns sorted, de-duplicated messages (empty: no hazard)."""
    infos = [Info(i) for i in instrs]
    problems = set()
    seen = set()
    stack = [(0, ())]
    while stack:
        pc, hist = stack.pop()
        while 0 <= pc < len(infos):
            key = (pc, tuple(id(h) for h in hist))
            if key in seen:
                break
            seen.add(key)
            info = infos[pc]
            for p in _check_one(info, hist):
                if xnack or "-clause" not in p:
                    problems.add(p)
            hist = (hist + (info,))[-WINDOW:]
            mn = info.ins.mnemonic
            if mn == "s_endpgm":
                break
            if mn == "s_branch" or mn.startswith("s_cbranch"):
                try:
                    stack.append((branch_target(pc), hist))
                except Exception as e:  # noqa: BLE001 - reported, the walk goes on
                    problems.add(f"branch: {info.ins.text} at 0x{info.ins.addr:x}: {e}")
                if mn == "s_branch":
                    break
            pc += 1
    return sorted(problems)


def xnack_enabled(target: str) -> bool:
    """XNACK is on or "any" unless the target ID says xnack-."""
    return ":xnack-" not in target
