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
        return any(i.split()[0] in ("s_and_saveexec_b64", "s_and_b64") and "exec" in i for i in self.body) or any(
            i.startswith("s_and_saveexec_b64") for i in self.body
        )

    def descriptor_num_records_sources(self) -> list:
        """For each buffer access, the instruction that last wrote word 2
        (num_records) of its descriptor before the access."""
        sources = []
        for idx, line in enumerate(self.body):
            if not line.startswith("buffer_"):
                continue
            srd = re.search(r"s\[(\d+):(\d+)\]", line)
            word2 = f"s{int(srd.group(1)) + 2}"
            writer = next(
                (prev for prev in reversed(self.body[:idx]) if _dest(prev) in (word2,) or _dest_range_has(prev, word2)),
                None,
            )
            sources.append(writer)
        return sources


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


def compile_isa(rung: Rung, dtype: str, vec: int, dump_dir: str = None) -> KernelISA:
    """Compile one kernel for gfx950 (no launch, no GPU) and parse its ISA."""
    import torch
    import flydsl.compiler as flyc

    dump_dir = dump_dir or tempfile.mkdtemp(prefix="relu-isa-")
    env = toolchain.compile_env(compile_only=True)
    with _environ(**env, FLYDSL_DEBUG_DUMP_ASM="1", FLYDSL_DUMP_DIR=dump_dir):
        launcher = rung.build(dtype, vec)
        ph = torch.empty(vec, dtype=getattr(torch, dtype))
        flyc.compile(launcher, ph, torch.empty_like(ph), 1, 0)
    files = sorted(Path(dump_dir).glob("*/22_final_isa.s"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise RuntimeError(f"FlyDSL wrote no ISA dump into {dump_dir}")
    return parse_isa(files[-1].read_text(), rung.name, dtype, vec)


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
            "VGPRs", "SGPRs", "scratch", "memory instructions")
    rows = [head]
    for i in isas:
        widths = sorted({m.width for m in i.memops})
        rows.append((i.rung, i.dtype, str(i.vec), str(len(i.body)), str(len(i.memops)),
                     "/".join(map(str, widths)), "/".join(str(64 * w) for w in widths),
                     str(i.vgprs), str(i.sgprs), str(i.scratch_bytes), _memory_summary(i)))
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
