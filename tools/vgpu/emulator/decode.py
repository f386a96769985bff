"""Decoding: a kernel's disassembly -> instructions, each with its handler
looked up once in HANDLERS (mnemonic as printed, encoding suffix included ->
handler), plus the static checks run once per kernel."""

from .. import hazards, waitcnt
from ..disasm import Instr, Unsupported, parse_line
from . import memory_ops, scalar, vector
from .errors import LaunchError


def build_handlers():
    """{mnemonic: handler} over the instruction groups; a mnemonic has one group."""
    table = {}
    for group in (scalar, vector, memory_ops):
        part = group.handlers()
        twice = sorted(set(part) & set(table))
        if twice:
            raise AssertionError(f"mnemonics in two instruction groups: {twice}")
        table.update(part)
    return table


HANDLERS = build_handlers()


def branch_destination(addr, simm16):
    """s_branch / s_cbranch_*: PC of the next instruction + 4 * simm16 (signed)."""
    simm = simm16 - 0x10000 if simm16 >= 0x8000 else simm16
    return addr + 4 + 4 * simm


class Program:
    """A kernel's instructions and their handlers, decoded once from the
    disassembly. Static checks: `waitcnt_errors` (the waitcnt scoreboard) and
    `nop_hazards` (s_nop wait states); either fails every launch."""

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
        self.handlers = [HANDLERS.get(ins.mnemonic) for ins in self.instrs]
        self.index = {ins.addr: i for i, ins in enumerate(self.instrs)}
        if not self.instrs or self.instrs[0].addr != kernel.entry:
            raise LaunchError(f"{kernel.name}: no code at entry 0x{kernel.entry:x}")
        self.unimplemented = sorted({i.mnemonic for i, h in zip(self.instrs, self.handlers) if h is None}
                                    | {self.instrs[self.index[a]].mnemonic for a in self.decode_errors})
        self.waitcnt_errors = waitcnt.scoreboard(self.instrs, self.branch_target)
        self.nop_hazards = hazards.check(self.instrs, self.branch_target,
                                         hazards.xnack_enabled(getattr(kernel, "target", "")))

    def branch_target(self, i):
        """Index of the instruction branch i jumps to."""
        ins = self.instrs[i]
        if not (ins.ops and ins.ops[0].kind == "imm"):
            raise Unsupported(f"branch operand in {ins.text}")
        tgt = branch_destination(ins.addr, ins.ops[0].value)
        if tgt not in self.index:
            raise LaunchError(f"branch target 0x{tgt:x} of {ins.text} is not an instruction of {self.kernel.name}")
        return self.index[tgt]
