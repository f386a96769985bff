"""Compile every rung for gfx950 on this machine and read its assembly.

    python tools/isa.py              the ladder table (each rung x dtype, widest vector)
    python tools/isa.py --all-vecs   every vector width the planner can choose
    python tools/isa.py --show v5 bfloat16   print one kernel's assembly

No GPU needed: FlyDSL compiles with COMPILE_ONLY=1 and dumps the final ISA
(FLYDSL_DEBUG_DUMP_ASM), which this module parses. tests/test_isa.py checks
each rung's defining property on the same parse.
"""

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import toolchain  # noqa: E402
from flash_relu_rocm.registry import DTYPES, ELEMENT_BYTES, RUNGS, Rung  # noqa: E402

# Full occupancy on CDNA3/CDNA4: 8 waves per SIMD share 512 VGPRs per lane.
FULL_OCCUPANCY_VGPRS = 64
MEMORY_WIDTH = {"byte": 1, "ubyte": 1, "sbyte": 1, "short": 2, "ushort": 2, "sshort": 2,
                "dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}
_MEM = re.compile(r"^(global|buffer|flat|scratch)_(load|store)_(\w+?)(?:_d16\w*)?$")


@dataclass
class MemOp:
    space: str   # global / buffer / flat / scratch
    kind: str    # load / store
    width: int   # bytes per lane
    text: str    # the full instruction line

    @property
    def modifiers(self) -> set:
        return set(self.text.replace(",", " ").split()[1:]) & {"nt", "sc0", "sc1", "offen", "off"}


@dataclass
class KernelISA:
    rung: str
    dtype: str
    vec: int
    name: str
    body: list                      # instruction lines, label to s_endpgm
    vgprs: int
    sgprs: int
    scratch_bytes: int
    memops: list = field(default_factory=list)

    @property
    def loads(self):
        return [m for m in self.memops if m.kind == "load"]

    @property
    def stores(self):
        return [m for m in self.memops if m.kind == "store"]

    def uses_exec_mask(self) -> bool:
        return any(i.startswith("s_and_saveexec_b64") for i in self.body)


def _dest(line: str):
    parts = line.replace(",", " ").split()
    return parts[1] if len(parts) > 1 else None


def _dest_range_has(line: str, reg: str) -> bool:
    parts = line.replace(",", " ").split()
    if len(parts) < 2 or line.startswith(("buffer_", "global_")):
        return False
    m = re.fullmatch(r"s\[(\d+):(\d+)\]", parts[1])
    return bool(m) and int(m.group(1)) <= int(reg[1:]) <= int(m.group(2))


def parse_isa(text: str, rung: str, dtype: str, vec: int) -> KernelISA:
    name = re.search(r"^(\w+):\s*$", text, re.M).group(1)
    body = []
    started = False
    for raw in text.splitlines():
        line = raw.split(";")[0].strip()
        if line == f"{name}:":
            started = True
            continue
        if not started or not line or line.startswith(".") or line.endswith(":"):
            continue
        body.append(line)
        if line.startswith("s_endpgm"):
            break

    def meta(key):
        m = re.search(rf"^\s*\.{key}:\s*(\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    isa = KernelISA(rung, dtype, vec, name, body, meta("vgpr_count"), meta("sgpr_count"),
                    meta("private_segment_fixed_size"))
    for line in body:
        m = _MEM.match(line.split()[0])
        if m:
            isa.memops.append(MemOp(m.group(1), m.group(2), MEMORY_WIDTH[m.group(3)], line))
    return isa


@contextlib.contextmanager
def _environ(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def compile_isa(rung: Rung, dtype: str, vec: int, dump_dir: str = None, launcher=None) -> KernelISA:
    """Compile one kernel for gfx950 (no launch, no GPU) and parse its ISA.
    `launcher` overrides rung.build(dtype, vec) (tests compile mutants)."""
    import torch
    import flydsl.compiler as flyc

    dump_dir = dump_dir or tempfile.mkdtemp(prefix="relu-isa-")
    env = toolchain.compile_env(compile_only=True)
    with _environ(**env, FLYDSL_DEBUG_DUMP_ASM="1", FLYDSL_DUMP_DIR=dump_dir), contextlib.redirect_stdout(io.StringIO()):
        launcher = launcher or rung.build(dtype, vec)
        ph = torch.empty(vec, dtype=getattr(torch, dtype))
        flyc.compile(launcher, ph, torch.empty_like(ph), 1, 0)
    files = sorted(Path(dump_dir).glob("*/22_final_isa.s"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise RuntimeError(f"FlyDSL wrote no ISA dump into {dump_dir}")
    return parse_isa(files[-1].read_text(), rung.name, dtype, vec)


def num_records_source(isa: KernelISA, access_line: str):
    """The kernarg byte offset whose value (an i32 numel) the descriptor of
    this buffer access takes its num_records from, via `s_lshl_b32 w, n,
    log2(element size)`; None if num_records is anything else (e.g. the
    0xFFFFFFFF of max_size=True)."""
    idx = isa.body.index(access_line)
    srd = re.search(r"s\[(\d+):(\d+)\]", access_line)
    word2 = f"s{int(srd.group(1)) + 2}"
    writer = next((p for p in reversed(isa.body[:idx]) if _dest(p) == word2 or _dest_range_has(p, word2)), None)
    shift = ELEMENT_BYTES[isa.dtype].bit_length() - 1
    m = writer and re.fullmatch(rf"s_lshl_b32 {word2}, (s\d+), {shift}", writer.replace("  ", " "))
    if not m:
        return None
    src = m.group(1)
    if src == word2:  # shifted in place: look further back for its load
        before = isa.body[: isa.body.index(writer)]
    else:
        before = isa.body[:idx]
    load = next((p for p in reversed(before) if _dest(p) == src), None)
    m = load and re.fullmatch(rf"s_load_dword {src}, s\[0:1\], (0x[0-9a-f]+|\d+)", load)
    return int(m.group(1), 0) if m else None


def violations(isa: KernelISA) -> list:
    """What is wrong with this kernel's assembly for the rung it belongs to
    (an empty list when the rung's defining property holds)."""
    rung = RUNGS[isa.rung]
    esize = ELEMENT_BYTES[isa.dtype]
    width = isa.vec * esize
    bad = []
    if len(isa.loads) != rung.unroll or len(isa.stores) != rung.unroll:
        bad.append(f"expected {rung.unroll} load(s) and store(s), got {len(isa.loads)} and {len(isa.stores)}")
    if any(m.width != width for m in isa.memops):
        bad.append(f"memory accesses must move vec x element = {width} bytes per lane: {_memory_summary(isa)}")
    space = "buffer" if rung.buffer else "global"
    if any(m.space != space for m in isa.memops):
        bad.append(f"{isa.rung} must use {space} instructions only: {_memory_summary(isa)}")
    if rung.buffer:
        if isa.uses_exec_mask():
            bad.append("buffer rungs need no predicate, but the kernel masks EXEC")
        sources = [num_records_source(isa, m.text) for m in isa.memops]
        if None in sources:
            bad.append("a buffer descriptor's num_records is not the tensor's byte size (max_size=True?)")
        elif [num_records_source(isa, m.text) for m in isa.loads] >= [num_records_source(isa, m.text) for m in isa.stores]:
            bad.append("loads must be bounded by X's numel and stores by Y's")
    elif not isa.uses_exec_mask():
        bad.append("global rungs must guard their accesses with an EXEC mask (the predicate)")
    if any("nt" in m.modifiers for m in isa.loads):
        bad.append("loads must stay cached (a non-temporal load cost 11% in the post)")
    if rung.nt_store and not all("nt" in m.modifiers for m in isa.stores):
        bad.append(f"{isa.rung} stores must be non-temporal (nt)")
    if not rung.nt_store and any("nt" in m.modifiers for m in isa.stores):
        bad.append(f"{isa.rung} stores must not be non-temporal")
    if isa.scratch_bytes or any(m.space == "scratch" for m in isa.memops):
        bad.append(f"uses scratch memory ({isa.scratch_bytes} bytes)")
    if isa.vgprs > FULL_OCCUPANCY_VGPRS:
        bad.append(f"{isa.vgprs} VGPRs > {FULL_OCCUPANCY_VGPRS}: below full occupancy")
    return bad


def vec_widths(rung: Rung, dtype: str):
    v = rung.max_vec(dtype)
    while v >= 1:
        yield v
        v //= 2


def collect(rungs=None, dtypes=DTYPES, all_vecs=False):
    out = []
    with tempfile.TemporaryDirectory(prefix="relu-isa-") as d:
        for name in rungs or RUNGS:
            rung = RUNGS[name]
            for dtype in dtypes:
                for vec in vec_widths(rung, dtype) if all_vecs else (rung.max_vec(dtype),):
                    sub = os.path.join(d, f"{name}-{dtype}-{vec}")
                    out.append(compile_isa(rung, dtype, vec, sub))
    return out


def _memory_summary(isa: KernelISA) -> str:
    groups = {}
    for m in isa.memops:
        mn = m.text.split()[0]
        extra = " nt" if "nt" in m.modifiers else ""
        groups[mn + extra] = groups.get(mn + extra, 0) + 1
    return ", ".join(f"{n}x {k}" for k, n in groups.items())


def table(isas) -> str:
    head = ("rung", "dtype", "vec", "instrs", "mem instrs", "bytes/lane/instr", "bytes/wave/instr",
            "VGPRs", "SGPRs", "scratch", "property", "memory instructions")
    rows = [head]
    for i in isas:
        widths = sorted({m.width for m in i.memops})
        rows.append((i.rung, i.dtype, str(i.vec), str(len(i.body)), str(len(i.memops)),
                     "/".join(map(str, widths)), "/".join(str(64 * w) for w in widths),
                     str(i.vgprs), str(i.sgprs), str(i.scratch_bytes),
                     "ok" if not violations(i) else "VIOLATED", _memory_summary(i)))
    cols = [max(len(r[c]) for r in rows) for c in range(len(head))]
    lines = ["  ".join(cell.ljust(cols[c]) for c, cell in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in cols))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all-vecs", action="store_true", help="every vector width, not only the widest")
    p.add_argument("--show", nargs=2, metavar=("RUNG", "DTYPE"), help="print one kernel's instructions")
    args = p.parse_args(argv)
    if args.show:
        rung, dtype = args.show
        isa = compile_isa(RUNGS[rung], dtype, RUNGS[rung].max_vec(dtype))
        print(f"{isa.name}: {len(isa.body)} instructions, {isa.vgprs} VGPRs, {isa.sgprs} SGPRs")
        print("\n".join("  " + line for line in isa.body))
        return
    print("gfx950 ISA of the ladder (compiled here, COMPILE_ONLY; memory widths per lane)")
    print(table(collect(all_vecs=args.all_vecs)))


if __name__ == "__main__":
    main()
