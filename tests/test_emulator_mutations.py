"""Emulator mutation score (issue 13 item 5): deliberately wrong semantics
patched into a copy of tools/vgpu/emulator.py must each be caught by the
checks the suite makes (vgpu_support.run_case: launch errors, device
violations, bits, written once, guards, input unchanged, exact grid, kernel
choice).

Each mutant is a textual patch (every `old` must match exactly once) executed
as a module of the vgpu package and installed in place of the real emulator
for one test (monkeypatch; the real module and file are never changed; its
launches do not count in `kernels executed`). It runs only the planner kernels
whose disassembly contains an instruction it breaks, through the public
relu(), and stops at the first case that fails. The unmutated copy must pass
every case. The count is printed in the terminal summary:
`emulator mutants caught: N/N`.
"""

import importlib
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

import vgpu_support as S

pytestmark = pytest.mark.vgpu


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    patches: tuple   # (old, new) on tools/vgpu/emulator.py
    uses: tuple      # regexes (re.search) of the mnemonics it breaks: selects the kernels to run


_SEL = "    c.vset(d, np.where(c.mask_get(m), c.vget(b), c.vget(a)))\n"


def _cndmask_form(form):
    return ((_SEL, f"    c.vset(d, np.where(c.mask_get(m), c.vget(a), c.vget(b)) if mn.endswith({form!r}) "
                   "else np.where(c.mask_get(m), c.vget(b), c.vget(a)))\n"),)


def _load_words(words):
    return (("        v = data_full[..., k]\n",
             f"        v = data_full[..., (words - 1 - k) if words == {words} else k]\n"),)


def _store_words(words):
    return (("        data = np.stack([c.vreg(d.reg + k)[ex] for k in range(words)], axis=1)\n",
             f"        data = np.stack([c.vreg(d.reg + k)[ex] for k in (range(words)[::-1] if words == {words} "
             "else range(words))], axis=1)\n"),
            ("        data = np.stack([c.vreg(d.reg + j) for j in range(words)], axis=-1)  # [n, 64, words]\n",
             f"        data = np.stack([c.vreg(d.reg + j) for j in (range(words)[::-1] if words == {words} "
             "else range(words))], axis=-1)\n"))


MUTANTS = (
    Mutant("cndmask-e32-operands", "v_cndmask_b32_e32 takes src0 where the mask is set",
           _cndmask_form("_e32"), ("v_cndmask_b32_e32",)),
    Mutant("cndmask-e64-operands", "v_cndmask_b32_e64 takes src0 where the mask is set",
           _cndmask_form("_e64"), ("v_cndmask_b32_e64",)),
    Mutant("cndmask-sdwa-operands", "v_cndmask_b32_sdwa takes src0 where the mask is set",
           (("        r = np.where(c.mask_get(m), y, x)\n", "        r = np.where(c.mask_get(m), x, y)\n"),),
           ("v_cndmask_b32_sdwa",)),
    Mutant("load-x2-dword-order", "8-byte loads return their two dwords swapped", _load_words(2),
           (r"^(global|buffer)_load_dwordx2",)),
    Mutant("load-x4-dword-order", "16-byte loads return their dwords reversed", _load_words(4),
           (r"^(global|buffer)_load_dwordx4",)),
    Mutant("store-x2-dword-order", "8-byte stores write their two dwords swapped", _store_words(2),
           (r"^(global|buffer)_store_dwordx2",)),
    Mutant("store-x4-dword-order", "16-byte stores write their dwords reversed", _store_words(4),
           (r"^(global|buffer)_store_dwordx4",)),
    Mutant("oob-stores-written", "buffer stores out of range are written",
           (("    addr = base[:, None, None] + soffset[..., None] + word_off\n",
             "    inr = np.ones_like(inr) if direction == 'store' else inr\n"
             "    addr = base[:, None, None] + soffset[..., None] + word_off\n"),), ("^buffer_store_",)),
    Mutant("num-records-as-elements", "num_records counted in access-sized elements, not bytes",
           (("    num_records = w[2]\n", "    num_records = w[2] * U64(nbytes)\n"),), ("^buffer_",)),
    Mutant("ngt-ordered", "v_cmp_ngt is computed as an ordered compare (false on NaN)",
           (('    "ngt": lambda a, b, u: ~((a > b) & ~u),', '    "ngt": lambda a, b, u: ~(a > b) & ~u,'),),
           ("v_cmp_ngt_f",)),
    Mutant("negative-zero-below-zero", "-0.0 compares below +0.0",
           (("    return np.where(sign == 1, -mag, mag), nan\n",
             "    return np.where(sign == 1, -mag - 1, mag), nan\n"),),
           ("v_cmp_ngt_f",)),
    Mutant("denormals-flushed", "compares flush denormal inputs whatever the kernel's FP mode",
           (("        return mode in (0, 2)\n", "        return True\n"),), ("v_cmp_ngt_f",)),
    Mutant("f16-compare-high-half", "f16 compares read bits [31:16] instead of [15:0]",
           (("        b = (bits.astype(U32) & U32(0xFFFF)).astype(I64)\n",
             "        b = ((bits.astype(U32) >> U32(16)) & U32(0xFFFF)).astype(I64)\n"),), ("v_cmp_ngt_f16",)),
    Mutant("sdwa-word-select", "SDWA WORD_0 and WORD_1 source selects swapped",
           (("    v = (x >> (width * int(k))) & ((1 << width) - 1)\n",
             "    v = (x >> (width * (int(k) ^ (kind == 'WORD')))) & ((1 << width) - 1)\n"),), ("_sdwa",)),
    Mutant("perm-operand-order", "v_perm_b32 takes bytes 0..3 from S0 instead of S1",
           (("    both = (s0 << U64(32)) | s1\n", "    both = (s1 << U64(32)) | s0\n"),), ("v_perm_b32",)),
    Mutant("exec-ignored-by-global", "global loads and stores access every lane, ignoring EXEC",
           (("def _active_lanes(c):\n    ex = c.exec\n", "def _active_lanes(c):\n    ex = np.ones_like(c.exec)\n"),),
           ("^global_",)),
    Mutant("branch-offset", "branch target PC + 4 * simm16 (the +4 of the next instruction dropped)",
           (("        tgt = ins.addr + 4 + 4 * simm\n", "        tgt = ins.addr + 4 * simm\n"),),
           ("^s_cbranch_", "^s_branch$")),
    Mutant("execz-inverted", "s_cbranch_execz jumps when some lane is active",
           (("H[\"s_cbranch_execz\"] = _branch(lambda c: ~c.exec.any(axis=1))",
             "H[\"s_cbranch_execz\"] = _branch(lambda c: c.exec.any(axis=1))"),), ("^s_cbranch_execz$",)),
    Mutant("smem-offset-ignored", "s_load ignores its immediate offset",
           (("            addr = addr + U64(off.value & 0xFFFFF)\n", "            addr = addr\n"),), ("^s_load_",)),
    Mutant("lshlrev-b64-operands", "v_lshlrev_b64 shifts the shift amount by the value",
           (('H["v_lshlrev_b64"] = _vop(2, lambda a, b: b << (a & U64(63)), 64, (64, 64))',
             'H["v_lshlrev_b64"] = _vop(2, lambda a, b: a << (b & U64(63)), 64, (64, 64))'),), ("v_lshlrev_b64",)),
)
CONTROL = Mutant("unmutated", "the copied emulator without a change", (), ("",))

EMULATOR = Path(importlib.import_module("vgpu.emulator").__file__)
_results = {}  # mutant name -> (killing case id or None, cases run, first problem)


def _variant(mutant):
    """A fresh module of the vgpu package from the patched emulator source."""
    src = EMULATOR.read_text()
    for old, new in mutant.patches:
        n = src.count(old)
        assert n == 1, f"{mutant.name}: patch matches {n} times: {old!r}"
        src = src.replace(old, new)
    mod = types.ModuleType(f"vgpu._emulator_{mutant.name.replace('-', '_')}")
    mod.__package__ = "vgpu"
    mod.__file__ = str(EMULATOR)
    exec(compile(src, f"<emulator mutant {mutant.name}>", "exec"), mod.__dict__)
    return mod


def _install(mod, dev, monkeypatch):
    """Every vgpu module's reference to a real emulator object now names the
    variant's; decoded Programs are dropped so the variant decodes again."""
    real = importlib.import_module("vgpu.emulator")
    names = {id(v): k for k, v in vars(real).items() if not k.startswith("__")}
    for modname, m in list(sys.modules.items()):
        if m is None or m is real or not (modname == "vgpu" or modname.startswith("vgpu.")) or modname.startswith(
                "vgpu._emulator_"):
            continue
        for attr, val in list(vars(m).items()):
            k = names.get(id(val))
            if k is not None and not attr.startswith("__") and hasattr(mod, k):
                monkeypatch.setattr(m, attr, getattr(mod, k))
    monkeypatch.setattr(dev, "programs", {})


def _kernels_using(dev, mutant):
    progs = S.loaded_kernels(dev)
    return [ident for ident, k in sorted(progs.items())
            if any(any(re.search(u, ln.mnemonic) for u in mutant.uses) for ln in k.lines)]


def _run(dev, monkeypatch, mutant):
    import relu_flydsl

    kernels = _kernels_using(dev, mutant)
    assert kernels, f"{mutant.name}: no shipped kernel uses {mutant.uses}"
    _install(_variant(mutant), dev, monkeypatch)
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


def test_unmutated_copy_passes_every_case(vgpu, monkeypatch):
    killer, cases, problem = _run(vgpu, monkeypatch, CONTROL)
    assert cases == 3 * len(S.planner_kernels())
    assert killer is None, f"the unchanged copy failed {killer}: {problem}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(vgpu, monkeypatch, mutant):
    killer, cases, problem = _run(vgpu, monkeypatch, mutant)
    _results[mutant.name] = (killer, cases, problem)
    print(f"{mutant.name}: {killer} after {cases} case(s): {str(problem)[:300]}")
    assert killer is not None, f"{mutant.name} ({mutant.what}) survived {cases} case(s)"


def test_mutation_score_in_summary():
    names = [m.name for m in MUTANTS]
    ran = [n for n in names if n in _results]
    caught = [n for n in ran if _results[n][0] is not None]
    line = f"emulator mutants caught: {len(caught)}/{len(names)}"
    if len(ran) < len(names):
        line += f" ({len(names) - len(ran)} not run)"
    survivors = [n for n in ran if _results[n][0] is None]
    if survivors:
        line += "; SURVIVED: " + ", ".join(survivors)
    S.SUMMARY_LINES.append(line)
    assert len(caught) == len(names), line
