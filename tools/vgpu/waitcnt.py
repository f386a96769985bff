"""Static s_waitcnt check: every path through a kernel is walked with a
scoreboard of outstanding loads. VMEM returns in order and counts loads and
stores in vmcnt; SMEM may return out of order, so only lgkmcnt(0) retires
scalar loads. A register read or overwritten while a load into it is still
outstanding is reported (and fails every launch of the kernel)."""

from .disasm import EXEC, VCC

_EXEC_REGS = {("s", EXEC), ("s", EXEC + 1)}


def reads_writes(ins):
    """(reads, writes, counter) of an instruction. counter: 'vm' / 'lgkm' for
    memory instructions (their writes are then pending), else None."""
    mn, ops = ins.mnemonic, ins.ops
    regs = lambda os_: {r for o in os_ for r in o.regs}
    if mn.startswith("s_load"):
        return regs(ops[1:]), regs(ops[:1]), "lgkm"
    if mn.startswith(("global_load", "buffer_load")):
        return regs(ops[1:]) | _EXEC_REGS, regs(ops[:1]), "vm"
    if mn.startswith(("global_store", "buffer_store")):
        return regs(ops) | _EXEC_REGS, set(), "vm"
    if mn.startswith("s_cbranch_exec"):
        return set(_EXEC_REGS), set(), None
    if mn.startswith("s_cbranch_vcc"):
        return {("s", VCC), ("s", VCC + 1)}, set(), None
    if mn in ("s_waitcnt", "s_nop", "s_endpgm", "s_branch") or mn.startswith("s_cbranch"):
        return set(), set(), None
    if "saveexec" in mn:
        return regs(ops[1:]) | _EXEC_REGS, regs(ops[:1]) | _EXEC_REGS, None
    if mn.startswith("s_cmp"):
        return regs(ops), set(), None
    extra = _EXEC_REGS if mn.startswith("v_") else set()
    return regs(ops[1:]) | extra, regs(ops[:1]), None


def scoreboard(instrs, branch_target, max_paths=2000):
    """Each register read or overwritten before the s_waitcnt covering its
    load, on any path (instrs: disasm.Instr in address order; branch_target(i)
    -> index). Returns sorted messages (empty: none)."""
    info = [reads_writes(i) for i in instrs]
    problems = set()
    seen = set()
    stack = [(0, (), ())]
    paths = 0
    while stack and paths < max_paths:
        pc, vm, lgkm = stack.pop()
        while True:
            key = (pc, vm, lgkm)
            if key in seen or pc >= len(instrs):
                break
            seen.add(key)
            i = instrs[pc]
            reads, writes, counter = info[pc]
            pending = set().union(*[set(p) for p in vm], *[set(p) for p in lgkm]) if (vm or lgkm) else set()
            for r in sorted((reads | writes) & pending):
                problems.add(f"{i.text} at 0x{i.addr:x} uses {r[0]}{r[1]} before the s_waitcnt for its load")
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
                    tgt = branch_target(pc)
                except Exception:  # noqa: BLE001 - a bad branch fails the launch itself
                    break
                stack.append((tgt, vm, lgkm))
                if mn == "s_branch":
                    break
            pc += 1
    return sorted(problems)
