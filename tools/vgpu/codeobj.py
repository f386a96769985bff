"""Read an AMDGPU code object: ELF symbols, kernel descriptors, metadata note,
and the disassembly of each kernel from llvm-objdump (LLVM 22, --mcpu=gfx950).

Nothing here is hard-coded for the ReLU ladder: kernarg layout, user SGPRs,
VGPR budget and FP mode all come from the code object itself.
"""

import os
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field


class CodeObjectError(Exception):
    pass


# ---------------------------------------------------------------- msgpack
def _msgpack(buf, i=0):
    """Minimal msgpack decoder (the AMDGPU metadata note is msgpack)."""
    b = buf[i]
    if b <= 0x7F:
        return b, i + 1
    if 0x80 <= b <= 0x8F:
        return _mp_map(buf, i + 1, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _mp_arr(buf, i + 1, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return buf[i + 1:i + 1 + n].decode(), i + 1 + n
    if b >= 0xE0:
        return b - 0x100, i + 1
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], i + 1
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
             0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if b in fixed:
        fmt = fixed[b]
        n = struct.calcsize(fmt)
        return struct.unpack_from(fmt, buf, i + 1)[0], i + 1 + n
    lens = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if b in lens:
        fmt = lens[b]
        h = struct.calcsize(fmt)
        n = struct.unpack_from(fmt, buf, i + 1)[0]
        s = buf[i + 1 + h:i + 1 + h + n]
        return (s.decode() if b >= 0xD9 else bytes(s)), i + 1 + h + n
    if b in (0xDC, 0xDD):
        fmt = ">H" if b == 0xDC else ">I"
        n = struct.unpack_from(fmt, buf, i + 1)[0]
        return _mp_arr(buf, i + 1 + struct.calcsize(fmt), n)
    if b in (0xDE, 0xDF):
        fmt = ">H" if b == 0xDE else ">I"
        n = struct.unpack_from(fmt, buf, i + 1)[0]
        return _mp_map(buf, i + 1 + struct.calcsize(fmt), n)
    raise CodeObjectError(f"msgpack byte 0x{b:02x} not supported")


def _mp_arr(buf, i, n):
    out = []
    for _ in range(n):
        v, i = _msgpack(buf, i)
        out.append(v)
    return out, i


def _mp_map(buf, i, n):
    out = {}
    for _ in range(n):
        k, i = _msgpack(buf, i)
        v, i = _msgpack(buf, i)
        out[k] = v
    return out, i


# ---------------------------------------------------------------- ELF
@dataclass
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int


def _elf(data: bytes):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CodeObjectError("not a little-endian ELF64 code object")
    e_machine = struct.unpack_from("<H", data, 0x12)[0]
    if e_machine != 224:  # EM_AMDGPU
        raise CodeObjectError(f"e_machine {e_machine} is not EM_AMDGPU")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for k in range(shnum):
        name, typ, _flags, addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + k * shentsize)
        link, = struct.unpack_from("<I", data, shoff + k * shentsize + 0x28)
        raw.append((name, typ, addr, off, size, link))
    strtab = raw[shstrndx]

    def cstr(off, base):
        end = data.index(b"\0", base + off)
        return data[base + off:end].decode()

    secs = [Section(cstr(r[0], strtab[3]), r[1], r[2], r[3], r[4]) for r in raw]
    symbols = {}
    for k, r in enumerate(raw):
        if r[1] != 2:  # SHT_SYMTAB
            continue
        strsec = raw[r[5]]
        for j in range(r[4] // 24):
            st_name, st_info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, r[3] + j * 24)
            if st_name:
                symbols[cstr(st_name, strsec[3])] = (value, size, st_info & 0xF, shndx)
    return secs, symbols


# ---------------------------------------------------------------- kernel descriptor
@dataclass
class KernelDescriptor:
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    code_properties: int
    kernarg_preload: int

    @classmethod
    def parse(cls, b: bytes):
        g, p, k = struct.unpack_from("<III", b, 0)
        entry, = struct.unpack_from("<q", b, 16)
        r3, r1, r2 = struct.unpack_from("<III", b, 44)
        props, preload = struct.unpack_from("<HH", b, 56)
        return cls(g, p, k, entry, r1, r2, r3, props, preload)

    # rsrc1
    @property
    def vgpr_granules(self):
        return (self.rsrc1 & 0x3F) + 1

    @property
    def denorm_mode_32(self):
        return (self.rsrc1 >> 16) & 3

    @property
    def denorm_mode_16_64(self):
        return (self.rsrc1 >> 18) & 3

    @property
    def round_mode_32(self):
        return (self.rsrc1 >> 12) & 3

    @property
    def round_mode_16_64(self):
        return (self.rsrc1 >> 14) & 3

    @property
    def dx10_clamp(self):
        return (self.rsrc1 >> 21) & 1

    @property
    def ieee_mode(self):
        return (self.rsrc1 >> 23) & 1

    # rsrc2
    @property
    def user_sgpr_count(self):
        return (self.rsrc2 >> 1) & 0x1F

    @property
    def private_segment(self):
        return self.rsrc2 & 1

    @property
    def workgroup_id_enable(self):
        return tuple((self.rsrc2 >> b) & 1 for b in (7, 8, 9))

    @property
    def workgroup_info(self):
        return (self.rsrc2 >> 10) & 1

    @property
    def workitem_id_vgprs(self):
        return (self.rsrc2 >> 11) & 3

    # kernel_code_properties: bit -> user SGPR block (in hardware order)
    USER_SGPRS = (("private_segment_buffer", 0, 4), ("dispatch_ptr", 1, 2), ("queue_ptr", 2, 2),
                  ("kernarg_segment_ptr", 3, 2), ("dispatch_id", 4, 2), ("flat_scratch_init", 5, 2),
                  ("private_segment_size", 6, 1))

    def user_sgpr_layout(self):
        out, s = [], 0
        for name, bit, n in self.USER_SGPRS:
            if (self.code_properties >> bit) & 1:
                out.append((name, s, n))
                s += n
        return out

    @property
    def wave32(self):
        return (self.code_properties >> 10) & 1


# ---------------------------------------------------------------- disassembly
_LINE = re.compile(r"^\s+(\S+)(.*?)\s*//\s*([0-9A-Fa-f]+):\s*((?:[0-9A-Fa-f]{8}\s*)+)(<.*>)?\s*$")


@dataclass
class Line:
    addr: int
    mnemonic: str
    operands: str
    words: tuple


def disassemble(elf_path: str, objdump: str, mcpu: str = "gfx950"):
    out = subprocess.run([objdump, "-d", f"--mcpu={mcpu}", elf_path],
                         check=True, capture_output=True, text=True).stdout
    lines = []
    for raw in out.splitlines():
        m = _LINE.match(raw)
        if m:
            lines.append(Line(int(m.group(3), 16), m.group(1), m.group(2).strip(),
                              tuple(int(w, 16) for w in m.group(4).split())))
        elif raw.startswith("\t") and raw.strip() and not raw.strip().startswith("//"):
            raise CodeObjectError(f"cannot parse disassembly line {raw!r}")
    return lines


# ---------------------------------------------------------------- the code object
@dataclass
class Kernel:
    name: str
    kd: KernelDescriptor
    entry: int
    code_size: int
    meta: dict
    lines: list = field(default_factory=list)
    target: str = ""  # amdhsa.target, e.g. amdgcn-amd-amdhsa--gfx950 (xnack "any" without a suffix)

    @property
    def args(self):
        return self.meta.get(".args", [])

    @property
    def kernarg_size(self):
        return self.meta.get(".kernarg_segment_size", self.kd.kernarg_size)


class CodeObject:
    def __init__(self, data: bytes, objdump: str, mcpu: str = "gfx950"):
        self.data = bytes(data)
        secs, syms = _elf(self.data)
        self.sections = secs
        self.meta = self._metadata(secs)
        target = self.meta.get("amdhsa.target", "")
        if mcpu not in target:
            raise CodeObjectError(f"code object target {target!r} is not {mcpu}")
        fd, path = tempfile.mkstemp(suffix=".co")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.data)
            lines = disassemble(path, objdump, mcpu)
        finally:
            os.unlink(path)
        self.kernels = {}
        for km in self.meta.get("amdhsa.kernels", []):
            name = km[".name"]
            kd_sym = syms.get(km.get(".symbol", name + ".kd"))
            code_sym = syms.get(name)
            if kd_sym is None or code_sym is None:
                raise CodeObjectError(f"kernel {name}: symbol or descriptor missing")
            kd = KernelDescriptor.parse(self._bytes_at(kd_sym[0], 64))
            entry = kd_sym[0] + kd.entry_offset
            if entry != code_sym[0]:
                raise CodeObjectError(f"kernel {name}: descriptor entry 0x{entry:x} != symbol 0x{code_sym[0]:x}")
            # The function symbol's size is the code; .text is padded with s_nop after it.
            body = [ln for ln in lines if entry <= ln.addr < entry + code_sym[1]]
            self.kernels[name] = Kernel(name, kd, entry, code_sym[1], km, body, target)

    def _bytes_at(self, vaddr, n):
        for s in self.sections:
            if s.type != 8 and s.addr <= vaddr and vaddr + n <= s.addr + s.size and s.addr:
                off = s.offset + vaddr - s.addr
                return self.data[off:off + n]
        raise CodeObjectError(f"address 0x{vaddr:x} not in any loaded section")

    def _metadata(self, secs):
        for s in secs:
            if s.type != 7:  # SHT_NOTE
                continue
            i, end = s.offset, s.offset + s.size
            while i + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", self.data, i)
                name = self.data[i + 12:i + 12 + namesz].rstrip(b"\0")
                d = i + 12 + ((namesz + 3) & ~3)
                if name == b"AMDGPU" and ntype == 32:  # NT_AMDGPU_METADATA
                    meta, _ = _msgpack(self.data[d:d + descsz])
                    return meta
                i = d + ((descsz + 3) & ~3)
        raise CodeObjectError("no AMDGPU metadata note")
