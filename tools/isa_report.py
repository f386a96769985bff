"""The gfx950 ISA report: the shipped code objects, disassembled and checked.

    .venv/bin/python tools/isa_report.py                  the ladder table (each rung x dtype, widest vector)
    .venv/bin/python tools/isa_report.py --all-vecs       every vector width the planner can choose
    .venv/bin/python tools/isa_report.py --pending        also the dtypes built but not yet served (flash_relu_rocm/dtypes.py's PENDING)
    .venv/bin/python tools/isa_report.py --show v5 bfloat16 [--vec N]   one kernel's instructions
    .venv/bin/python tools/isa_report.py --int8-forms     the int8 relu candidates, VALU per dwordx4

It reads torch-ext/relu_flydsl/code_objects/ (the files flash_relu_rocm/build.py
writes and the package ships) and disassembles them with LLVM 22's
llvm-objdump; it refuses objects that are missing or stale (built from other
sources or another toolchain): run `.venv/bin/python -m flash_relu_rocm.build`
first. Pending dtypes have no shipped objects yet: they are built into a temporary
folder by the same build function. No GPU needed. tests/vgpu/test_isa.py checks
each rung's defining property on the same parse.

"relu VALU/16B" counts the VALU instructions on the data path (those reading,
transitively, what the load returned, up to the store) per 16 bytes a thread
moves: per dwordx4 at full width. Address arithmetic is not counted.

The cache-policy rule (loads stay cached) comes from the reference post,
"Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels":
on MI350X a non-temporal load cost 11%.
"""

import argparse
import contextlib
import importlib.util
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import toolchain
from flash_relu_rocm import build as objects
from flash_relu_rocm.dtypes import ALL_ELEMENT_BYTES, DTYPES, PENDING_DTYPES
from flash_relu_rocm.registry import RUNGS, Rung

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path):
    """A module by its path: the code-object reader, without the vgpu package."""
    spec = importlib.util.spec_from_file_location(f"_isa_report_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


codeobj = _load(ROOT / "tools" / "vgpu" / "codeobj.py")

# Full occupancy on CDNA3/CDNA4: 8 waves per SIMD share 512 VGPRs per lane.
FULL_OCCUPANCY_VGPRS = 64
MEMORY_WIDTH = {"byte": 1, "ubyte": 1, "sbyte": 1, "short": 2, "ushort": 2, "sshort": 2,
                "dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}
_MEM = re.compile(r"^(global|buffer|flat|scratch)_(load|store)_(\w+?)(?:_d16\w*)?$")


class ObjectsError(RuntimeError):
    """The shipped code objects are missing or stale."""


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
    body: list                      # instruction lines, entry to s_endpgm
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

    @property
    def valu(self):
        return [line for line in self.body if line.startswith("v_")]

    def uses_exec_mask(self) -> bool:
        return any(i.startswith("s_and_saveexec_b64") for i in self.body)


# ---------------------------------------------------------------- parsing
def from_lines(lines, rung: str, dtype: str, vec: int, name: str, vgprs: int, sgprs: int, scratch: int) -> KernelISA:
    body = []
    for line in lines:
        line = line.split(";")[0].split("//")[0].strip()
        if not line:
            continue
        body.append(line)
        if line.startswith("s_endpgm"):
            break
    isa = KernelISA(rung, dtype, vec, name, body, vgprs, sgprs, scratch)
    for line in body:
        m = _MEM.match(line.split()[0])
        if m:
            isa.memops.append(MemOp(m.group(1), m.group(2), MEMORY_WIDTH[m.group(3)], line))
    return isa


def parse_code_object(data: bytes, rung: str, dtype: str, vec: int) -> KernelISA:
    """Disassemble one code object (one kernel) and read its register counts
    from the AMDGPU metadata."""
    co = codeobj.CodeObject(data, toolchain.find_tool("llvm-objdump"), toolchain.ARCH)
    if len(co.kernels) != 1:
        raise ObjectsError(f"{rung}/{dtype}/x{vec}: {len(co.kernels)} kernels in one code object")
    (k,) = co.kernels.values()
    lines = [f"{ln.mnemonic} {ln.operands}".strip() for ln in k.lines]
    return from_lines(lines, rung, dtype, vec, k.name, k.meta.get(".vgpr_count", 0),
                      k.meta.get(".sgpr_count", 0), k.meta.get(".private_segment_fixed_size", 0))


# ---------------------------------------------------------------- where the bytes come from
def shipped(objects_dir: Path = objects.OBJECTS_DIR, check_stale: bool = True) -> dict:
    """{(rung, dtype, vec): KernelISA} of every code object in the folder, after
    checking it is complete and built from these sources with this toolchain."""
    objects_dir = Path(objects_dir)
    if check_stale:
        reason = objects.stale(objects_dir)
        if reason is not None:
            raise ObjectsError(f"the code objects are stale or missing ({reason}): "
                               f"run `.venv/bin/python -m flash_relu_rocm.build`")
    manifest = objects.read_manifest(objects_dir)
    out = {}
    for key, e in manifest["kernels"].items():
        data = (objects_dir / e["file"]).read_bytes()
        out[(e["rung"], e["dtype"], e["vec"])] = parse_code_object(data, e["rung"], e["dtype"], e["vec"])
    return out


def built(specs, out_dir) -> dict:
    """Build (rung, dtype, vec) triples with the build's own compile into
    `out_dir` (for dtypes not shipped yet) and parse them."""
    objects.build_objects(Path(out_dir), specs=[(RUNGS[r], d, v) for r, d, v in specs])
    return shipped(out_dir, check_stale=False)


def kernel_isas(dtypes=DTYPES, objects_dir: Path = objects.OBJECTS_DIR, scratch_dir=None) -> dict:
    """Every planner kernel of `dtypes`: shipped ones from the code objects,
    pending ones (dtypes.PENDING_DTYPES) built into `scratch_dir`."""
    served = [d for d in dtypes if d not in PENDING_DTYPES]
    pending = [d for d in dtypes if d in PENDING_DTYPES]
    out = {}
    if served:
        have = shipped(objects_dir)
        missing = [s for s in specs(served) if s not in have]
        if missing:
            raise ObjectsError(f"no shipped code object for {missing[:4]}: "
                               f"run `.venv/bin/python -m flash_relu_rocm.build`")
        out.update({s: have[s] for s in specs(served)})
    if pending:
        with contextlib.ExitStack() as stack:
            where = scratch_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="relu-isa-"))
            out.update(built(specs(pending), Path(where) / "pending"))
    return out


@contextlib.contextmanager
def _environ(**values):
    saved = dict(os.environ)
    os.environ.pop("COMPILE_ONLY", None)  # the compile must hand back its artifact
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def compile_launcher(rung: Rung, dtype: str, vec: int, launcher=None) -> KernelISA:
    """Compile one launcher for gfx950 (no launch, no GPU, no cache) and parse
    its code object: for variants that do not ship (mutants, candidate forms).
    `launcher` defaults to rung.build(dtype, vec)."""
    import flydsl.compiler as flyc
    import torch

    with _environ(**toolchain.compile_env(), FLYDSL_RUNTIME_ENABLE_CACHE="0"):
        launcher = launcher or rung.build(dtype, vec)
        ph = torch.empty(vec, dtype=getattr(torch, dtype))
        fn = flyc.compile(launcher, ph, torch.empty_like(ph), 1, 0)
        data = objects.code_object_bytes(fn)
    return parse_code_object(data, rung.name, dtype, vec)


# ---------------------------------------------------------------- data-path VALU
_REG_RANGE = re.compile(r"\b([vs])\[(\d+):(\d+)\]")
_REG = re.compile(r"\b([vs])(\d+)\b")


def _regs(text: str) -> set:
    out = {f"{k}{i}" for k, a, b in _REG_RANGE.findall(text) for i in range(int(a), int(b) + 1)}
    out |= {f"{k}{n}" for k, n in _REG.findall(_REG_RANGE.sub(" ", text))}
    if re.search(r"\bvcc(_lo|_hi)?\b", text):
        out.add("vcc")
    return out


def data_path(isa: KernelISA) -> list:
    """The VALU instructions that read, directly or through earlier ones, a
    register a load wrote: the relu arithmetic, without address math."""
    tainted, path = set(), []
    for line in isa.body:
        mnemonic, _, rest = line.partition(" ")
        ops = [o.strip() for o in rest.split(",")] if rest else []
        m = _MEM.match(mnemonic)
        if m and m.group(2) == "load":
            tainted |= _regs(ops[0])
            continue
        if m or not ops:
            continue
        ndest = 2 if "_co_" in mnemonic or mnemonic.startswith(("v_addc", "v_subb")) else 1
        dest = set().union(*(_regs(o) for o in ops[:ndest]))
        reads = set().union(set(), *(_regs(o) for o in ops[ndest:]))
        if reads & tainted:
            tainted |= dest
            if mnemonic.startswith("v_"):
                path.append(line)
        else:
            tainted -= dest
    return path


def valu_per_16_bytes(isa: KernelISA) -> float:
    moved = sum(m.width for m in isa.loads)
    return len(data_path(isa)) * 16 / moved if moved else float("nan")


# ---------------------------------------------------------------- checks
def _dest(line: str):
    parts = line.replace(",", " ").split()
    return parts[1] if len(parts) > 1 else None


def _dest_range_has(line: str, reg: str) -> bool:
    parts = line.replace(",", " ").split()
    if len(parts) < 2 or line.startswith(("buffer_", "global_")):
        return False
    m = re.fullmatch(r"s\[(\d+):(\d+)\]", parts[1])
    return bool(m) and int(m.group(1)) <= int(reg[1:]) <= int(m.group(2))


def _kernarg_load(lines, reg):
    load = next((p for p in reversed(lines) if _dest(p) == reg), None)
    m = load and re.fullmatch(rf"s_load_dword {reg}, s\[0:1\], (0x[0-9a-f]+|\d+)", " ".join(load.split()))
    return int(m.group(1), 0) if m else None


def num_records_source(isa: KernelISA, access_line: str):
    """The kernarg byte offset whose value (an i32 numel) the descriptor of
    this buffer access takes its num_records from: loaded as is for 1-byte
    elements, else via `s_lshl_b32 w, n, log2(element size)`; None if
    num_records is anything else (e.g. the 0xFFFFFFFF of max_size=True)."""
    idx = isa.body.index(access_line)
    srd = re.search(r"s\[(\d+):(\d+)\]", access_line)
    word2 = f"s{int(srd.group(1)) + 2}"
    before = isa.body[:idx]
    writer = next((p for p in reversed(before) if _dest(p) == word2 or _dest_range_has(p, word2)), None)
    if writer is None:
        return None
    shift = ALL_ELEMENT_BYTES[isa.dtype].bit_length() - 1
    if shift == 0:
        return _kernarg_load(before, word2) if writer.startswith("s_load_dword ") else None
    m = re.fullmatch(rf"s_lshl_b32 {word2}, (s\d+), {shift}", " ".join(writer.split()))
    if not m:
        return None
    src = m.group(1)
    return _kernarg_load(isa.body[: isa.body.index(writer)] if src == word2 else before, src)


def violations(isa: KernelISA) -> list:
    """What is wrong with this kernel's assembly for the rung it belongs to
    (an empty list when the rung's defining property holds)."""
    rung = RUNGS[isa.rung]
    width = isa.vec * ALL_ELEMENT_BYTES[isa.dtype]
    bad = []
    per_thread = rung.tile(isa.vec) // (rung.block * isa.vec)  # vectors each thread moves
    if len(isa.loads) != per_thread or len(isa.stores) != per_thread:
        bad.append(f"expected {per_thread} load(s) and store(s), got {len(isa.loads)} and {len(isa.stores)}")
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
        bad.append("loads must stay cached (a non-temporal load cost 11% in the reference post)")
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


def specs(dtypes, rungs=None, all_vecs=True):
    return [(r, d, v) for r in rungs or RUNGS for d in dtypes
            for v in (vec_widths(RUNGS[r], d) if all_vecs else (RUNGS[r].max_vec(d),))]


def collect(rungs=None, dtypes=DTYPES, all_vecs=False) -> list:
    """KernelISA of each rung x dtype (the widest vector, or every width), in
    registry order, from the shipped code objects (pending dtypes built)."""
    isas = kernel_isas(dtypes)
    return [isas[s] for s in specs(dtypes, rungs, all_vecs)]


# ---------------------------------------------------------------- int8 forms
def int8_forms() -> dict:
    """The candidate int8 relu forms, each as its own arithmetic on a 16 x i8
    vector; the shipped kernel uses the one with the fewest VALU."""
    import flydsl.expr as fx

    from flash_relu_rocm import _common

    def smax(x):  # arith.maxsi on <16 x i8>
        return fx.max(x, fx.full_like(x, 0))

    def sign_multiply(x):  # each byte's sign bit times 0xFF, then and-not
        u = x.bitcast(fx.Uint32)
        mask = ((u >> 7) & 0x01010101) * 0xFF
        return (u & ~mask).bitcast(fx.Int8)

    return {"smax (arith.maxsi)": smax, "compare/select": _common.relu_select,
            "sign mask by multiply": sign_multiply, "v_perm_b32 sign mask (shipped)": _common.relu_int8_dwords}


def int8_form_counts() -> list:
    """(form, data-path VALU per dwordx4, the data-path mnemonics) for each
    candidate, compiled into the v2 kernel at 16 x int8."""
    from flash_relu_rocm import v2_vectorized

    rows = []
    for name, form in int8_forms().items():
        saved = v2_vectorized.relu_for
        v2_vectorized.relu_for = lambda dtype, vec, form=form: form
        try:
            k = compile_launcher(RUNGS["v2"], "int8", 16, v2_vectorized.build("int8", 16, block=RUNGS["v2"].block))
        finally:
            v2_vectorized.relu_for = saved
        path = data_path(k)
        counts = {}
        for line in path:
            counts[line.split()[0]] = counts.get(line.split()[0], 0) + 1
        rows.append((name, valu_per_16_bytes(k), counts))
    return rows


# ---------------------------------------------------------------- report
def _memory_summary(isa: KernelISA) -> str:
    groups = {}
    for m in isa.memops:
        mn = m.text.split()[0]
        extra = " nt" if "nt" in m.modifiers else ""
        groups[mn + extra] = groups.get(mn + extra, 0) + 1
    return ", ".join(f"{n}x {k}" for k, n in groups.items())


def _format(rows) -> str:
    cols = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(cols[c]) for c, cell in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in cols))
    return "\n".join(lines)


def table(isas) -> str:
    head = ("rung", "dtype", "vec", "instrs", "VALU", "relu VALU/16B", "mem instrs", "bytes/lane/instr",
            "bytes/wave/instr", "VGPRs", "SGPRs", "scratch", "property", "memory instructions")
    rows = [head]
    for i in isas:
        widths = sorted({m.width for m in i.memops})
        rows.append((i.rung, i.dtype, str(i.vec), str(len(i.body)), str(len(i.valu)), f"{valu_per_16_bytes(i):g}",
                     str(len(i.memops)), "/".join(map(str, widths)), "/".join(str(64 * w) for w in widths),
                     str(i.vgprs), str(i.sgprs), str(i.scratch_bytes),
                     "ok" if not violations(i) else "VIOLATED", _memory_summary(i)))
    return _format(rows)


def forms_table(rows) -> str:
    out = [("int8 relu form (v2, 16 x int8)", "VALU/dwordx4", "data-path instructions")]
    for name, n, counts in rows:
        out.append((name, f"{n:g}", ", ".join(f"{c}x {m}" for m, c in counts.items())))
    return _format(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all-vecs", action="store_true", help="every vector width, not only the widest")
    p.add_argument("--pending", action="store_true", help=f"also the dtypes built but not served (now: {', '.join(PENDING_DTYPES) or 'none'})")
    p.add_argument("--show", nargs=2, metavar=("RUNG", "DTYPE"), help="print one kernel's instructions")
    p.add_argument("--vec", type=int, help="with --show: this vector width (default: the widest)")
    p.add_argument("--int8-forms", action="store_true", help="compile the int8 relu candidates and count VALU")
    args = p.parse_args(argv)
    dtypes = DTYPES + (PENDING_DTYPES if args.pending else ())
    try:
        if args.int8_forms:
            print("int8 relu candidates on gfx950 (compiled here, data-path VALU per dwordx4)")
            print(forms_table(int8_form_counts()))
            return 0
        if args.show:
            rung, dtype = args.show
            vec = args.vec or RUNGS[rung].max_vec(dtype)
            isa = kernel_isas((dtype,))[(rung, dtype, vec)]
            print(f"{isa.name}: {len(isa.body)} instructions ({len(isa.valu)} VALU, "
                  f"{len(data_path(isa))} on the data path), {isa.vgprs} VGPRs, {isa.sgprs} SGPRs")
            print("\n".join("  " + line for line in isa.body))
            return 0
        isas = kernel_isas(dtypes)
    except ObjectsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    wanted = specs(dtypes, all_vecs=args.all_vecs)
    print(f"gfx950 ISA of the ladder ({objects.OBJECTS_DIR.relative_to(ROOT)}"
          + (", pending dtypes built here" if args.pending else "") + "; memory widths per lane)")
    print(table([isas[s] for s in wanted]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
