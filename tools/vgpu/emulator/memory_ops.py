"""Memory instructions: scalar loads (SMEM), global and raw-buffer loads and
stores (VMEM), and the buffer-resource (V#) checks made before every buffer
access. Every access goes through `Memory.read` / `Memory.write` (bounds,
guards, per-byte write counts); alignment is checked here."""

import numpy as np

from ..disasm import Op, Unsupported
from ..memory import Violation
from .errors import DescriptorError, LaunchError
from .wave import I64, LANES, M32, M64, U32, U64, check_nops, no_mods

ACCEPTED_CACHE_BITS = {"sc0", "sc1", "nt"}
ACCESS_BYTES = {"ubyte": 1, "sbyte": 1, "ushort": 2, "sshort": 2, "short": 2, "byte": 1,
                "dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}
LOAD_KINDS = ("ubyte", "sbyte", "ushort", "sshort", "dword", "dwordx2", "dwordx3", "dwordx4")
STORE_KINDS = ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4")


# ---- scalar memory
def s_load(words):
    def f(c):
        check_nops(c, 3)
        no_mods(c, ("glc",))
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


# ---- shared by global and buffer accesses
def note_cache_bits(c, allowed):
    bits = {k for k in c.ins.mods if k in ACCEPTED_CACHE_BITS}
    extra = set(c.ins.mods) - ACCEPTED_CACHE_BITS - set(allowed)
    if extra:
        raise Unsupported(f"modifier(s) {sorted(extra)} in {c.ins.text}")
    c.emu.note_cache_bits(c.ins, bits)


def write_load_result(c, d, kind, data_full):
    """data_full: u32 [n, 64, words] of loaded words (zero for dropped ones);
    sbyte/sshort are sign-extended, ubyte/ushort zero-extended."""
    words = data_full.shape[-1]
    if d.kind != "v" or d.n != words:
        raise Unsupported(f"destination {d.text} in {c.ins.text}")
    for k in range(words):
        v = data_full[..., k]
        if kind == "sbyte":
            v = ((v & U32(0xFF)).astype(I64) ^ 0x80) - 0x80
        elif kind == "sshort":
            v = ((v & U32(0xFFFF)).astype(I64) ^ 0x8000) - 0x8000
        c.vset(Op("v", d.reg + k, 1), (v & M32).astype(U32) if v.dtype == I64 else v)


def _natural(nbytes):
    return nbytes if nbytes in (1, 2, 4, 8, 16) else 4


def note_alignment(c, addr, nbytes, waves, lanes):
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


# ---- global: address = vaddr (64-bit, saddr `off`) or saddr + vaddr (32-bit), plus offset:
def global_access(direction, kind):
    nbytes = ACCESS_BYTES[kind]
    words = max(1, nbytes // 4)

    def f(c):
        note_cache_bits(c, ("offset",))
        check_nops(c, 3)
        if direction == "load":
            d, vaddr, saddr = c.ins.ops
        else:
            vaddr, d, saddr = c.ins.ops
        off = c.ins.mods.get("offset", 0)
        if saddr.kind == "off":
            addr = c.vget(vaddr, 64)
        else:
            addr = c.sget(saddr, 64)[:, None] + c.vget(vaddr).astype(U64)
        addr = np.broadcast_to(addr + U64(off & M64), (c.n, LANES))
        ex = c.exec
        wv = np.broadcast_to(c.wave_ids[:, None], ex.shape)[ex]
        ln = np.broadcast_to(np.arange(LANES), ex.shape)[ex]
        c.lane_wave, c.lane_lane = wv, ln
        note_alignment(c, addr[ex], nbytes, wv, ln)
        if direction == "load":
            got = c.emu.memory.read(addr[ex], nbytes, c)
            full = np.zeros((c.n, LANES, words), dtype=U32)
            full[ex] = got
            write_load_result(c, d, kind, full)
        else:
            if d.kind != "v" or d.n != words:
                raise Unsupported(f"store data {d.text} in {c.ins.text}")
            data = np.stack([c.vreg(d.reg + k)[ex] for k in range(words)], axis=1)
            c.emu.memory.write(addr[ex], nbytes, data, c)
    return f


# ---- raw buffers
def buffer_in_range(model, direction, offset, nbytes, num_records, word_off):
    """Which words of each lane's access pass the range check ([n, 64, words]
    bool). offset: inst_offset + voffset [n, 64]; word_off: each word's offset.
    Out-of-range load words return 0, out-of-range store words are not
    written (the same test for both directions)."""
    if model == "dword":
        return word_off < num_records[:, None, None]
    if model == "whole":
        return np.broadcast_to((offset + U64(nbytes) <= num_records[:, None])[..., None], word_off.shape)
    if model == "start":
        return np.broadcast_to((offset < num_records[:, None])[..., None], word_off.shape)
    raise LaunchError(f"unknown straddle model {model!r}")


def buffer_access(direction, kind):
    nbytes = ACCESS_BYTES[kind]
    words = max(1, nbytes // 4)
    wbytes = min(4, nbytes)

    def f(c):
        note_cache_bits(c, ("offset", "offen", "idxen"))
        check_nops(c, 4)
        d, vaddr, srsrc, soff = c.ins.ops
        if c.ins.mods.get("idxen"):
            raise Unsupported(f"idxen (structured buffer) in {c.ins.text}")
        if srsrc.kind != "s" or srsrc.n != 4:
            raise Unsupported(f"resource {srsrc.text} in {c.ins.text}")
        w = [c.sreg(srsrc.reg + k).astype(U64) for k in range(4)]
        check_resources(c, w, srsrc)
        base = w[0] | ((w[1] & U64(0xFFFF)) << U64(32))
        num_records = w[2]
        inst_off = c.ins.mods.get("offset", 0)
        voff = c.vget(vaddr).astype(U64) if c.ins.mods.get("offen") else np.zeros((c.n, 1), U64)
        # range-check offset: inst_offset + voffset, 32-bit; soffset is not part of the check
        offset = np.broadcast_to((voff + U64(inst_off)) & U64(M32), (c.n, LANES))
        soffset = c.sget(soff).astype(U64)[:, None]
        word_off = offset[..., None] + U64(4) * np.arange(words, dtype=U64)  # [n, 64, words]
        inr = buffer_in_range(c.emu.straddle, direction, offset, nbytes, num_records, word_off)
        addr = base[:, None, None] + soffset[..., None] + word_off
        ex = c.exec
        act = inr & ex[..., None]
        c.emu.note_range_check(int((ex[..., None] & ~inr).sum()))
        touching = act.any(axis=-1)  # lanes with at least one word in range: they access memory
        start = (base[:, None] + soffset + offset)[touching]
        note_alignment(c, start, nbytes, np.broadcast_to(c.wave_ids[:, None], touching.shape)[touching],
                       np.broadcast_to(np.arange(LANES), touching.shape)[touching])
        c.lane_wave = np.broadcast_to(c.wave_ids[:, None, None], act.shape)[act]
        c.lane_lane = np.broadcast_to(np.arange(LANES)[None, :, None], act.shape)[act]
        if direction == "load":
            got = c.emu.memory.read(addr[act], wbytes, c)
            full = np.zeros((c.n, LANES, words), dtype=U32)
            full[act] = got[:, 0]
            write_load_result(c, d, kind, full)
        else:
            if d.kind != "v" or d.n != words:
                raise Unsupported(f"store data {d.text} in {c.ins.text}")
            data = np.stack([c.vreg(d.reg + j) for j in range(words)], axis=-1)  # [n, 64, words]
            c.emu.memory.write(addr[act], wbytes, data[act][:, None], c)
    return f


# ---- buffer resource (V#) checks
# Fields of words 1 and 3, CDNA/GFX9 layout: (name, low bit, width, accepted values;
# None: any value). Raw (untyped) buffer instructions ignore the formats, but
# DATA_FORMAT 0 is INVALID and both format fields must be nonzero (MLIR's
# AMDGPUToROCDL); DATA_FORMAT 15 and NUM_FORMAT 6 are reserved on GFX9 (LLVM SIDefines.h).
ACCEPTED_NUM_FORMATS = frozenset({1, 2, 3, 4, 5, 7})
ACCEPTED_DATA_FORMATS = frozenset(range(1, 15))
ZERO = frozenset({0})
WORD1_FIELDS = (("BASE_HI", 0, 16, None), ("STRIDE", 16, 14, ZERO), ("CACHE_SWIZZLE/SWIZZLE_ENABLE", 30, 2, ZERO))
WORD3_FIELDS = (
    ("DST_SEL", 0, 12, None),  # raw instructions ignore it
    ("NUM_FORMAT", 12, 3, ACCEPTED_NUM_FORMATS),
    ("DATA_FORMAT", 15, 4, ACCEPTED_DATA_FORMATS),
    ("ELEMENT_SIZE", 19, 2, ZERO),
    ("INDEX_STRIDE", 21, 2, ZERO),
    ("ADD_TID_ENABLE", 23, 1, ZERO),
    ("ATC/HASH/HEAP/MTYPE", 24, 6, ZERO),  # non-volatile bits, 0 on CDNA
    ("TYPE", 30, 2, ZERO),
)


def bits_label(low, width):
    return f"[{low}]" if width == 1 else f"[{low + width - 1}:{low}]"


def field_problem(word_name, word, fields):
    """The first field of `word` holding a value not accepted, as a message; None if all are accepted."""
    for name, low, width, accepted in fields:
        v = (word >> low) & ((1 << width) - 1)
        if accepted is not None and v not in accepted:
            allowed = "0" if accepted == ZERO else (f"{min(accepted)}..{max(accepted)}" if len(accepted) > 6
                                                    else str(sorted(accepted)))
            return f"{word_name} {bits_label(low, width)} {name} {v}: not accepted for raw buffers (accepted {allowed})"
    return None


def check_buffer_resource(words, memory, where):
    """Validate one buffer resource (four ints); raise DescriptorError naming
    the first bad field. BASE must lie inside one live (registered, non-guard)
    allocation and BASE + NUM_RECORDS not past its end; NUM_RECORDS 0 bounds
    nothing, so its BASE is not looked up."""
    w0, w1, w2, w3 = words
    for problem in (field_problem("word1", w1, WORD1_FIELDS), field_problem("word3", w3, WORD3_FIELDS)):
        if problem:
            raise DescriptorError(f"{where}: {problem}")
    if w2 == 0:
        return
    base = w0 | (w1 & 0xFFFF) << 32
    region = memory.find(base)
    if region is None or region.guard:
        raise DescriptorError(f"{where}: BASE 0x{base:x} is not inside a live allocation"
                              + (f" (it is in {region.name})" if region is not None else ""))
    if base + w2 > region.end:
        raise DescriptorError(f"{where}: word2 NUM_RECORDS {w2} bytes runs {base + w2 - region.end} bytes "
                              f"past the end of allocation {region.name}")


def check_resources(c, w, srsrc):
    """Every distinct buffer resource the selected waves hold."""
    for row in np.unique(np.stack(w, axis=1), axis=0):
        words = tuple(int(v) for v in row)
        where = (f"buffer resource {srsrc.text} = [{', '.join(f'0x{v:08x}' for v in words)}] "
                 f"of {c.ins.text!r}")
        check_buffer_resource(words, c.emu.memory, where)


def handlers():
    table = {f"s_load_dword{s}": s_load(n) for n, s in ((1, ""), (2, "x2"), (4, "x4"), (8, "x8"), (16, "x16"))}
    for direction, kinds in (("load", LOAD_KINDS), ("store", STORE_KINDS)):
        for kind in kinds:
            table[f"global_{direction}_{kind}"] = global_access(direction, kind)
            table[f"buffer_{direction}_{kind}"] = buffer_access(direction, kind)
    return table
