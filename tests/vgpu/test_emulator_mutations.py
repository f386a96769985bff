"""Emulator mutation score: deliberately wrong semantics installed in the
emulator must each be caught by the checks the suite makes
(vgpu_support.run_case: launch errors, device violations, bits, written once,
guards, input unchanged, exact grid, kernel choice), and a weakened buffer-
resource check by the descriptor cases of buffer_resource_spec.

A mutant names what it changes, not source text: entries of the handler table
(`decode.HANDLERS`, by mnemonic), or a named function or table of an
instruction group (e.g. `vector.float_key`, `memory_ops.buffer_in_range`,
`memory_ops.WORD3_FIELDS`). Each edit is applied with monkeypatch for one
test and must find its target (a rename fails the test, it does not retire the
mutant). Decoded programs are dropped so kernels decode against the mutated
table; the mutant's launches go to their own KERNELS record (they do not count
in `kernels executed`). A kernel mutant runs only the planner kernels whose
disassembly contains an instruction it breaks, through the public relu(), and
stops at the first case that fails. The unmutated emulator must pass every
case. The count is printed in the terminal summary: `emulator mutants caught: N/N`.
"""

import dataclasses
import re
from dataclasses import dataclass

import numpy as np
import pytest

import buffer_resource_spec
import vgpu_support as S
from vgpu.disasm import Op
from vgpu.emulator import DescriptorError, decode, launch, memory_ops, scalar, vector

pytestmark = pytest.mark.vgpu
GROUPS = {"decode": decode, "launch": launch, "memory_ops": memory_ops, "scalar": scalar, "vector": vector}


@dataclass(frozen=True)
class Handlers:
    """Replace the handler of every mnemonic matching `pattern` (re.fullmatch) by wrap(handler)."""
    pattern: str
    wrap: object

    def apply(self, monkeypatch):
        names = [mn for mn in decode.HANDLERS if re.fullmatch(self.pattern, mn)]
        assert names, f"no handler table entry matches {self.pattern!r}"
        for mn in names:
            monkeypatch.setitem(decode.HANDLERS, mn, self.wrap(decode.HANDLERS[mn]))


@dataclass(frozen=True)
class Hook:
    """Replace a named function or table `group.attr` (attr may be Class.method) by wrap(original)."""
    group: str
    attr: str
    wrap: object

    def apply(self, monkeypatch):
        owner = GROUPS[self.group]
        *path, name = self.attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        assert hasattr(owner, name), f"{self.group}.{self.attr} does not exist"
        monkeypatch.setattr(owner, name, self.wrap(getattr(owner, name)))


@dataclass(frozen=True)
class Entry:
    """Replace item `key` of the named dict `group.table` by wrap(original)."""
    group: str
    table: str
    key: str
    wrap: object

    def apply(self, monkeypatch):
        table = getattr(GROUPS[self.group], self.table)
        assert self.key in table, f"{self.group}.{self.table} has no {self.key!r}"
        monkeypatch.setitem(table, self.key, self.wrap(table[self.key]))


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    edits: tuple
    uses: tuple              # regexes (re.search) of the mnemonics it breaks: selects the kernels to run
    judge: str = "kernels"   # "kernels": run_case over those kernels; "descriptor": the descriptor cases;
    #                          "int8": the int8 relu forms of tests/int8_candidates.py that use the mnemonics


# ---- edits by meaning
def swapped_sources(h):
    """The handler run with src0 and src1 exchanged (SDWA source selects with them)."""
    def f(c):
        ops = list(c.ins.ops)
        ops[1], ops[2] = ops[2], ops[1]
        mods = dict(c.ins.mods)
        if c.ins.mnemonic.endswith("_sdwa"):
            mods["src0_sel"], mods["src1_sel"] = mods.get("src1_sel", "DWORD"), mods.get("src0_sel", "DWORD")
        c.ins = dataclasses.replace(c.ins, ops=ops, mods=mods)
        return h(c)
    return f


def loaded_dwords_reversed(h):
    def f(c):
        res = h(c)
        d = c.ins.ops[0]
        vals = [c.st.V[d.reg + k, c.ws].copy() for k in range(d.n)]
        for k in range(d.n):
            c.st.V[d.reg + k, c.ws] = np.where(c.exec, vals[d.n - 1 - k], vals[k])
        return res
    return f


def stored_dwords_reversed(h):
    def f(c):
        d = c.ins.ops[1 if c.ins.mnemonic.startswith("global_") else 0]
        vals = [c.st.V[d.reg + k, c.ws].copy() for k in range(d.n)]
        for k in range(d.n):
            c.st.V[d.reg + k, c.ws] = vals[d.n - 1 - k]
        try:
            return h(c)
        finally:
            for k in range(d.n):
                c.st.V[d.reg + k, c.ws] = vals[k]
    return f


def exec_all_lanes(h):
    def f(c):
        saved = c.sreg(126, 2)
        c.set_exec(np.full(c.n, 0xFFFFFFFFFFFFFFFF, dtype=np.uint64))
        try:
            return h(c)
        finally:
            c.set_exec(saved)
    return f


def immediate_offset_zero(h):
    def f(c):
        ops = list(c.ins.ops)
        if ops[2].kind == "imm":
            ops[2] = Op("imm", value=0, text="0")
        c.ins = dataclasses.replace(c.ins, ops=ops)
        return h(c)
    return f


def negative_zero_below(orig):
    def f(bits, kind, flush):
        key, nan = orig(bits, kind, flush)
        b = bits.astype(np.uint32)
        sign = (b >> np.uint32(31)) if kind == 32 else ((b & np.uint32(0xFFFF)) >> np.uint32(15))
        return np.where(sign == 1, key - 1, key), nan
    return f


def high_half_f16(orig):
    return lambda bits, kind, flush: orig(bits.astype(np.uint32) >> np.uint32(16) if kind == 16 else bits, kind, flush)


def word_selects_swapped(orig):
    swap = {"WORD_0": "WORD_1", "WORD_1": "WORD_0"}
    return lambda x, sel, sext: orig(x, swap.get(sel, sel), sext)


def stores_never_out_of_range(orig):
    def f(model, direction, offset, nbytes, num_records, word_off):
        if direction == "store":
            return np.ones(word_off.shape, bool)
        return orig(model, direction, offset, nbytes, num_records, word_off)
    return f


def records_as_elements(orig):
    return lambda model, direction, offset, nbytes, num_records, word_off: orig(
        model, direction, offset, nbytes, num_records * np.uint64(nbytes), word_off)


def narrowed(field, end):
    """The word-3 field table with `field` read one bit narrower (its top or bottom bit unchecked)."""
    def wrap(fields):
        out = []
        for name, low, width, accepted in fields:
            if name == field:
                low, width = (low, width - 1) if end == "top" else (low + 1, width - 1)
                if width == 0:
                    continue
            out.append((name, low, width, accepted))
        assert len(out) < len(fields) or out != list(fields), f"no word-3 field {field!r}"
        return tuple(out)
    return wrap


KERNEL_MUTANTS = (
    Mutant("cndmask-e32-operands", "v_cndmask_b32_e32 takes src0 where the mask is set",
           (Handlers("v_cndmask_b32_e32", swapped_sources),), ("v_cndmask_b32_e32",)),
    Mutant("cndmask-e64-operands", "v_cndmask_b32_e64 takes src0 where the mask is set",
           (Handlers("v_cndmask_b32_e64", swapped_sources),), ("v_cndmask_b32_e64",)),
    Mutant("cndmask-sdwa-operands", "v_cndmask_b32_sdwa takes src0 where the mask is set",
           (Handlers("v_cndmask_b32_sdwa", swapped_sources),), ("v_cndmask_b32_sdwa",)),
    Mutant("load-x2-dword-order", "8-byte loads return their two dwords swapped",
           (Handlers("(global|buffer)_load_dwordx2", loaded_dwords_reversed),), (r"^(global|buffer)_load_dwordx2",)),
    Mutant("load-x4-dword-order", "16-byte loads return their dwords reversed",
           (Handlers("(global|buffer)_load_dwordx4", loaded_dwords_reversed),), (r"^(global|buffer)_load_dwordx4",)),
    Mutant("store-x2-dword-order", "8-byte stores write their two dwords swapped",
           (Handlers("(global|buffer)_store_dwordx2", stored_dwords_reversed),),
           (r"^(global|buffer)_store_dwordx2",)),
    Mutant("store-x4-dword-order", "16-byte stores write their dwords reversed",
           (Handlers("(global|buffer)_store_dwordx4", stored_dwords_reversed),),
           (r"^(global|buffer)_store_dwordx4",)),
    Mutant("oob-stores-written", "buffer stores out of range are written",
           (Hook("memory_ops", "buffer_in_range", stores_never_out_of_range),), ("^buffer_store_",)),
    Mutant("num-records-as-elements", "num_records counted in access-sized elements, not bytes",
           (Hook("memory_ops", "buffer_in_range", records_as_elements),), ("^buffer_",)),
    Mutant("ngt-ordered", "v_cmp_ngt is computed as an ordered compare (false on NaN)",
           (Entry("vector", "FLOAT_COMPARES", "ngt", lambda f: lambda a, b, u: ~(a > b) & ~u),), ("v_cmp_ngt_f",)),
    Mutant("negative-zero-below-zero", "-0.0 compares below +0.0",
           (Hook("vector", "float_key", negative_zero_below),), ("v_cmp_ngt_f",)),
    Mutant("denormals-flushed", "compares flush denormal inputs whatever the kernel's FP mode",
           (Hook("launch", "Emulator.flush_denorm_inputs", lambda f: lambda self, bits: True),), ("v_cmp_ngt_f",)),
    Mutant("f16-compare-high-half", "f16 compares read bits [31:16] instead of [15:0]",
           (Hook("vector", "float_key", high_half_f16),), ("v_cmp_ngt_f16",)),
    Mutant("sdwa-word-select", "SDWA WORD_0 and WORD_1 source selects swapped",
           (Hook("vector", "sdwa_select", word_selects_swapped),), ("_sdwa",)),
    Mutant("perm-operand-order", "v_perm_b32 takes bytes 0..3 from S0 instead of S1",
           (Handlers("v_perm_b32(_e64)?", swapped_sources),), ("v_perm_b32",)),
    Mutant("exec-ignored-by-global", "global loads and stores access every lane, ignoring EXEC",
           (Handlers("global_(load|store)_.*", exec_all_lanes),), ("^global_",)),
    Mutant("branch-offset", "branch target PC + 4 * simm16 (the +4 of the next instruction dropped)",
           (Hook("decode", "branch_destination", lambda f: lambda addr, simm: f(addr, simm) - 4),),
           ("^s_cbranch_", "^s_branch$")),
    Mutant("execz-inverted", "s_cbranch_execz jumps when some lane is active",
           (Handlers("s_cbranch_execz", lambda h: scalar.branch(scalar.BRANCH_CONDITIONS["s_cbranch_execnz"])),),
           ("^s_cbranch_execz$",)),
    Mutant("smem-offset-ignored", "s_load ignores its immediate offset",
           (Handlers("s_load_dword.*", immediate_offset_zero),), ("^s_load_",)),
    Mutant("lshlrev-b64-operands", "v_lshlrev_b64 shifts the shift amount by the value",
           (Handlers("v_lshlrev_b64(_e32|_e64)?", swapped_sources),), ("v_lshlrev_b64",)),
)

INT8_MUTANTS = (
    Mutant("bitop3-index-reversed", "v_bitop3_b32 reads its truth table with S2 as the high index bit",
           (Hook("vector", "bitop3_bits", lambda f: lambda table, a, b, s: f(table, s, b, a)),), ("v_bitop3_b32",),
           judge="int8"),
    Mutant("bitop3-operands", "v_bitop3_b32 takes S1 as S0 and S0 as S1",
           (Handlers("v_bitop3_b32(_e64)?", swapped_sources),), ("v_bitop3_b32",), judge="int8"),
    Mutant("max-i16-unsigned", "v_max_i16 compares its 16-bit sources unsigned",
           (Entry("vector", "INT16_OPS", "v_max_i16",
                  lambda f: lambda a, b: np.maximum(a.astype(np.int64) & 0xFFFF, b.astype(np.int64) & 0xFFFF)),),
           ("v_max_i16",), judge="int8"),
    Mutant("ashrrev-i16-logical", "v_ashrrev_i16 shifts in zeros (a logical shift)",
           (Entry("vector", "INT16_OPS", "v_ashrrev_i16",
                  lambda f: lambda a, b: (b.astype(np.int64) & 0xFFFF) >> (a.astype(np.int64) & 15)),),
           ("v_ashrrev_i16",), judge="int8"),
    Mutant("sdwa-sext-ignored", "SDWA sources zero-extended even with sext()",
           (Hook("vector", "sdwa_select", lambda f: lambda x, sel, sext: f(x, sel, False)),), ("v_max_i16_sdwa",),
           judge="int8"),
    Mutant("sdwa-byte1-at-byte0", "SDWA dst_sel:BYTE_1 writes byte 0",
           (Hook("vector", "sdwa_dst", lambda f: lambda r, sel, unused, old: f(
               r, "BYTE_0" if sel == "BYTE_1" else sel, unused, old)),), ("v_max_i16_sdwa",), judge="int8"),
    Mutant("sdwa-pad-as-preserve", "SDWA dst_unused:UNUSED_PAD keeps the destination's other bits",
           (Hook("vector", "sdwa_dst", lambda f: lambda r, sel, unused, old: f(
               r, sel, "UNUSED_PRESERVE" if unused == "UNUSED_PAD" else unused, old)),), ("v_or_b32_sdwa",),
           judge="int8"),
    Mutant("perm-sign-of-even-bytes", "v_perm_b32 selectors 8..11 take the sign of bytes 0, 2, 4, 6",
           (Hook("vector", "PERM_SIGN_BITS", lambda bits: tuple(b - 8 for b in bits)),), ("v_perm_b32",),
           judge="int8"),
)

_CHECKED_WORD3 = [f[0] for f in memory_ops.WORD3_FIELDS if f[3] is not None]
DESCRIPTOR_MUTANTS = tuple(
    Mutant(f"word3-{field.split('/')[0].lower().replace('_', '-')}-{end}",
           f"the buffer-resource check reads word3 {field} without its {end} bit",
           (Hook("memory_ops", "WORD3_FIELDS", narrowed(field, end)),), ("^buffer_",), judge="descriptor")
    for field in _CHECKED_WORD3
    for end in (("top", "bottom") if dict((f[0], f[2]) for f in memory_ops.WORD3_FIELDS)[field] > 1 else ("top",)))
MUTANTS = KERNEL_MUTANTS + DESCRIPTOR_MUTANTS + INT8_MUTANTS
CONTROL = Mutant("unmutated", "the emulator without a change", (), ("",))

_results = {}  # mutant name -> (killing case id or None, cases run, first problem)


def _install(mutant, dev, monkeypatch):
    for edit in mutant.edits:
        edit.apply(monkeypatch)
    monkeypatch.setattr(launch, "KERNELS", {})  # the mutant's launches keep their own record
    monkeypatch.setattr(dev, "programs", {})    # decode again, against the mutated table


def _kernels_using(dev, mutant):
    progs = S.loaded_kernels(dev)
    return [ident for ident, k in sorted(progs.items())
            if any(any(re.search(u, ln.mnemonic) for u in mutant.uses) for ln in k.lines)]


def _descriptor_verdicts():
    check = lambda words: memory_ops.check_buffer_resource(words, None, "descriptor case")
    return buffer_resource_spec.disagreements(check, DescriptorError)


def _int8_forms_using(dev, mutant):
    """(form, vec) of the int8 kernels whose disassembly has a mnemonic the
    mutant breaks: the rungs' own int8 kernels first, then the candidate forms."""
    import int8_candidates as C

    targets = [(("rung", r), v) for r, v in C.rung_kernels()] + [(f, C.VEC) for f in C.FORMS]
    return [(form, vec) for form, vec in targets
            if any(any(re.search(u, ln.mnemonic) for u in mutant.uses) for ln in C.loaded(dev, form, vec).lines)]


INT8_CASES = ((1, "special", 1), (4096 + 48, "mixed", 2))  # sizes in vectors


def _run(dev, monkeypatch, mutant):
    import relu_flydsl

    if mutant.judge == "int8":
        import int8_candidates as C

        forms = _int8_forms_using(dev, mutant)
        assert forms, f"{mutant.name}: no int8 form uses {mutant.uses}"
        _install(mutant, dev, monkeypatch)
        dev.errors_expected = True
        cases = 0
        for form, vec in forms:
            for n, values, seed in INT8_CASES:
                cases += 1
                problems = C.run(dev, form, n * vec, seed, values, vec)
                if problems:
                    return f"{'-'.join(form) if isinstance(form, tuple) else form}-x{vec}-{n * vec}-{values}", \
                        cases, problems[0]
        return None, cases, None
    kernels = _kernels_using(dev, mutant)
    assert kernels, f"{mutant.name}: no shipped kernel uses {mutant.uses}"
    _install(mutant, dev, monkeypatch)
    if mutant.judge == "descriptor":
        wrong = _descriptor_verdicts()
        return (wrong[0][0] if wrong else None), len(buffer_resource_spec.cases()), \
            (": ".join(wrong[0]) if wrong else None)
    # the suite's checks judge the kernel's launch: the dispatcher's first-use
    # canary (which would also reject a wrong kernel and fall back) stays off
    import relu_flydsl._dispatch as dispatch

    monkeypatch.setenv(getattr(dispatch, "ENV_CANARY", "RELU_FLYDSL_CANARY"), "0")
    dev.errors_expected = True  # findings are collected per case, then the device is reset
    cases = 0
    for kernel in kernels:
        for case in S.kernel_cases(*kernel):
            cases += 1
            problems = S.run_case(dev, relu_flydsl.relu, case)
            if problems:
                return case.id, cases, problems[0]
    return None, cases, None


def test_unmutated_emulator_passes_every_case(vgpu, monkeypatch):
    killer, cases, problem = _run(vgpu, monkeypatch, CONTROL)
    assert cases == 3 * len(S.planner_kernels())
    assert killer is None, f"the unchanged emulator failed {killer}: {problem}"
    assert _descriptor_verdicts() == []
    import int8_candidates as C

    killer, cases, problem = _run(vgpu, monkeypatch, dataclasses.replace(CONTROL, judge="int8"))
    assert cases == (len(C.rung_kernels()) + len(C.FORMS)) * len(INT8_CASES), cases
    assert killer is None, f"the unchanged emulator failed {killer}: {problem}"


def test_mutant_names_are_unique():
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(vgpu, monkeypatch, mutant):
    killer, cases, problem = _run(vgpu, monkeypatch, mutant)
    _results[mutant.name] = (killer, cases, problem)
    print(f"{mutant.name}: {killer} after {cases} case(s): {str(problem)[:300]}")
    assert killer is not None, f"{mutant.name} ({mutant.what}) survived {cases} case(s)"


@pytest.fixture(scope="module", autouse=True)
def _mutation_score_in_summary():
    """The emulator mutants' count in the terminal summary, written after the
    module's last test whatever order its tests ran in (each test_mutant_is_caught
    asserts its own catch)."""
    yield
    names = [m.name for m in MUTANTS]
    ran = [n for n in names if n in _results]
    if not ran:
        return
    caught = [n for n in ran if _results[n][0] is not None]
    line = f"emulator mutants caught: {len(caught)}/{len(names)}"
    if len(ran) < len(names):
        line += f" ({len(names) - len(ran)} not run)"
    survivors = [n for n in ran if _results[n][0] is None]
    if survivors:
        line += "; SURVIVED: " + ", ".join(survivors)
    S.SUMMARY_LINES.append(line)
