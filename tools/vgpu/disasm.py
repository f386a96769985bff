"""llvm-objdump (LLVM 22) gfx950 disassembly text -> instructions: mnemonic,
operands (registers, constants) and modifiers. The emulator, the hazard check
and the waitcnt scoreboard all read instructions in this form."""

import re
import struct
from dataclasses import dataclass, field

# hardware SGPR numbers of the named scalar registers
SPECIAL = {"vcc": (106, 2), "vcc_lo": (106, 1), "vcc_hi": (107, 1), "exec": (126, 2),
           "exec_lo": (126, 1), "exec_hi": (127, 1), "m0": (124, 1)}
EXEC, VCC, M0 = 126, 106, 124
NUM_SGPRS = 128

# inline float constants as printed by LLVM -> f32 / f16 bit patterns
FLOAT_CONSTS = {"0.5": (0x3F000000, 0x3800), "-0.5": (0xBF000000, 0xB800), "1.0": (0x3F800000, 0x3C00),
                "-1.0": (0xBF800000, 0xBC00), "2.0": (0x40000000, 0x4000), "-2.0": (0xC0000000, 0xC000),
                "4.0": (0x40800000, 0x4400), "-4.0": (0xC0800000, 0xC400), "0.15915494": (0x3E22F983, 0x3118)}


class Unsupported(Exception):
    """An instruction, operand or modifier the emulator does not implement."""


@dataclass
class Op:
    kind: str          # 's' sgpr, 'v' vgpr, 'imm' integer, 'fimm' inline float, 'off'
    reg: int = 0
    n: int = 1         # registers spanned
    value: int = 0     # imm: integer value; fimm: (f32 bits, f16 bits)
    text: str = ""
    sext: bool = False  # SDWA sext() modifier

    @property
    def regs(self):
        return [(self.kind, self.reg + k) for k in range(self.n)] if self.kind in "sv" else []


_REG = re.compile(r"^([sv])(\d+)$")
_RANGE = re.compile(r"^([sv])\[(\d+):(\d+)\]$")
_INT = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")


def parse_operand(t: str) -> Op:
    t = t.strip()
    if t.startswith("sext(") and t.endswith(")"):
        op = parse_operand(t[5:-1])
        op.sext = True
        return op
    if t in SPECIAL:
        r, n = SPECIAL[t]
        return Op("s", r, n, text=t)
    if t == "off":
        return Op("off", text=t)
    m = _REG.match(t)
    if m:
        return Op(m.group(1), int(m.group(2)), 1, text=t)
    m = _RANGE.match(t)
    if m:
        lo, hi = int(m.group(2)), int(m.group(3))
        return Op(m.group(1), lo, hi - lo + 1, text=t)
    if _INT.match(t):
        return Op("imm", value=int(t, 0), text=t)
    if t in FLOAT_CONSTS:
        return Op("fimm", value=FLOAT_CONSTS[t], text=t)
    raise Unsupported(f"operand {t!r}")


@dataclass
class Instr:
    addr: int
    size: int
    mnemonic: str
    text: str
    ops: list
    mods: dict = field(default_factory=dict)   # name -> value (True for flags)

    def __str__(self):
        return self.text


_MOD = re.compile(r"^([a-z_0-9]+)(?::(.*))?$")


def parse_line(line) -> Instr:
    """line: codeobj.Line. Operands are comma separated; modifiers follow the last
    operand, space separated (offset:16, offen, sc0, nt, dst_sel:WORD_1, ...)."""
    mn, rest = line.mnemonic, line.operands
    text = f"{mn} {rest}".strip()
    size = 4 * len(line.words)
    ops, mods = [], {}
    if mn == "s_waitcnt":
        for part in rest.replace("&", " ").split():
            m = re.match(r"^(vmcnt|expcnt|lgkmcnt)\((\d+)\)$", part)
            if not m:
                if _INT.match(part):  # raw simm16
                    v = int(part, 0)
                    mods.update(vmcnt=(v & 0xF) | ((v >> 10) & 0x30), expcnt=(v >> 4) & 7, lgkmcnt=(v >> 8) & 0xF)
                    continue
                raise Unsupported(f"s_waitcnt operand {part!r}")
            mods[m.group(1)] = int(m.group(2))
        return Instr(line.addr, size, mn, text, ops, mods)
    if rest:
        pieces = [p.strip() for p in rest.split(",")]
        last = pieces[-1].split()
        pieces[-1] = last[0] if last else ""
        tail = last[1:]
        # a trailing modifier list can also follow an operand-less form ("off sc0")
        for p in pieces:
            if p:
                ops.append(parse_operand(p))
        for t in tail:
            m = _MOD.match(t)
            if not m:
                raise Unsupported(f"modifier {t!r} in {text!r}")
            v = m.group(2)
            if v is None:
                mods[m.group(1)] = True
            else:
                mods[m.group(1)] = int(v, 0) if _INT.match(v) else v
    return Instr(line.addr, size, mn, text, ops, mods)


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]
