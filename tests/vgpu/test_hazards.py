"""The static s_nop hazard check (tools/vgpu/hazards.py).

Each rule is shown firing below its wait-state threshold and quiet at it, on
small instruction sequences in the disassembler's syntax; then every shipped
kernel, as the virtual gfx950 received its code object, passes the check, and
the same kernels with their s_nops removed fail it (and fail to launch)."""

import dataclasses

import pytest

from vgpu import hazards
from vgpu.codeobj import Line
from vgpu.disasm import parse_line


def _check(*text, xnack=True):
    """hazards.check over instructions given as 'mnemonic operands' strings."""
    instrs, addr = [], 0x100
    for t in text:
        mn, _, ops = t.partition(" ")
        words = (0, 0) if ("0x" in ops and not mn.startswith("s_cbranch")) or mn.startswith(("global_", "buffer_")) \
            or mn.endswith(("_e64", "_sdwa")) or mn == "v_perm_b32" else (0,)
        instrs.append(parse_line(Line(addr, mn, ops, words)))
        addr += 4 * len(words)
    index = {i.addr: n for n, i in enumerate(instrs)}

    def target(n):
        simm = instrs[n].ops[0].value
        return index[instrs[n].addr + 4 + 4 * (simm - 0x10000 if simm >= 0x8000 else simm)]

    return hazards.check(instrs, target, xnack)


def _rules(problems):
    return sorted({p.split(":")[0] for p in problems})


CMP_VCC = "v_cmp_ngt_f32_e32 vcc, 0, v1"
SEL_VCC = "v_cndmask_b32_e32 v2, 0, v1, vcc"


@pytest.mark.parametrize("nop,expect", [(None, ["valu-sgpr-valu"]), ("s_nop 0", ["valu-sgpr-valu"]), ("s_nop 1", [])])
def test_valu_write_sgpr_then_valu_read(nop, expect):
    seq = [CMP_VCC] + ([nop] if nop else []) + [SEL_VCC, "s_endpgm"]
    assert _rules(_check(*seq)) == expect


def test_valu_write_sgpr_e64_mask_and_independent_instructions_count():
    assert _rules(_check("v_cmp_ngt_f32_e64 s[0:1], 0, v1", "v_cndmask_b32_e64 v2, 0, v1, s[0:1]", "s_endpgm")) \
        == ["valu-sgpr-valu"]
    # two unrelated instructions in between are the two wait states
    assert _check(CMP_VCC, "v_mov_b32_e32 v5, 0", "v_mov_b32_e32 v6, 0", SEL_VCC, "s_endpgm") == []
    # a SALU write in between does not hide the VALU write (LLVM looks for the VALU def)
    assert _rules(_check(CMP_VCC, "s_mov_b32 s9, 0", SEL_VCC, "s_endpgm")) == ["valu-sgpr-valu"]


@pytest.mark.parametrize("nop,expect", [("s_nop 3", ["valu-sgpr-vmem"]), ("s_nop 4", [])])
def test_valu_write_sgpr_then_vmem_read(nop, expect):
    seq = ["v_cmp_ngt_f32_e64 s[4:5], 0, v1", nop, "buffer_load_dword v0, v1, s[4:7], 0 offen", "s_endpgm"]
    assert _rules(_check(*seq, xnack=False)) == expect


@pytest.mark.parametrize("store,nop,expect", [
    ("global_store_dwordx4 v[4:5], v[0:3], off", None, ["store-data-valu"]),
    ("global_store_dwordx4 v[4:5], v[0:3], off", "s_nop 0", ["store-data-valu"]),
    ("global_store_dwordx4 v[4:5], v[0:3], off", "s_nop 1", []),
    ("global_store_dwordx2 v[4:5], v[0:1], off", None, []),           # 8 bytes: no hazard
    ("buffer_store_dwordx4 v[0:3], v4, s[8:11], 0 offen", None, ["store-data-valu"]),
    ("buffer_store_dwordx4 v[0:3], v4, s[8:11], s2 offen", None, []),  # soffset register: no hazard
])
def test_wide_store_data_then_valu_write(store, nop, expect):
    seq = [store] + ([nop] if nop else []) + ["v_mov_b32_e32 v1, 0", "s_endpgm"]
    assert _rules(_check(*seq, xnack=False)) == expect


@pytest.mark.parametrize("dst_sel,nop,expect", [("WORD_1", None, ["sdwa-dst-forward"]), ("WORD_1", "s_nop 0", []),
                                                 ("DWORD", None, [])])
def test_sdwa_partial_write_then_read(dst_sel, nop, expect):
    sdwa = (f"v_cndmask_b32_sdwa v3, v5, v3, vcc dst_sel:{dst_sel} dst_unused:UNUSED_PRESERVE "
            "src0_sel:DWORD src1_sel:WORD_1")
    seq = [sdwa] + ([nop] if nop else []) + ["v_mov_b32_e32 v1, v3", "s_endpgm"]
    assert _rules(_check(*seq)) == expect


def test_soft_clauses_under_xnack():
    smem = ("s_load_dword s3, s[0:1], 0x8", "s_load_dwordx2 s[0:1], s[0:1], 0x0", "s_endpgm")
    assert _rules(_check(*smem)) == ["smem-clause"]
    assert _check(*smem, xnack=False) == []
    assert _check("s_load_dword s3, s[0:1], 0x8", "s_nop 0", "s_load_dwordx2 s[0:1], s[0:1], 0x0", "s_endpgm") == []
    vmem = ("global_load_dword v1, v[2:3], off", "global_store_dword v[2:3], v1, off", "s_endpgm")
    assert _rules(_check(*vmem)) == ["vmem-clause"]
    assert hazards.xnack_enabled("amdgcn-amd-amdhsa--gfx950") and not hazards.xnack_enabled("amdgcn--gfx950:xnack-")


def test_hazard_across_a_branch():
    # the branch (1 wait state) falls through or jumps to the same read: both paths are short
    assert _rules(_check(CMP_VCC, "s_cbranch_execz 0", SEL_VCC, "s_endpgm")) == ["valu-sgpr-valu"]
    assert _check(CMP_VCC, "s_cbranch_execz 1", "s_nop 0", SEL_VCC, "s_endpgm") != []  # taken path skips the nop


def test_instruction_without_implemented_rules_is_reported():
    assert _rules(_check("v_readlane_b32 s0, v1, 0", "s_endpgm")) == ["unchecked"]


# ---- the shipped kernels ----------------------------------------------------
@pytest.mark.vgpu
def test_shipped_kernels_pass_and_fail_without_their_nops(vgpu):
    import vgpu_support as S
    from vgpu.emulator import Program

    kernels = S.loaded_kernels(vgpu)
    assert len(kernels) == len(S.planner_kernels())
    stripped_total, with_nops, float_with_nops = 0, 0, 0
    for ident, k in sorted(kernels.items()):
        assert Program(k).nop_hazards == [], (ident, Program(k).nop_hazards)
        nops = [ln for ln in k.lines if ln.mnemonic == "s_nop"]
        found = Program(dataclasses.replace(k, lines=[ln for ln in k.lines if ln.mnemonic != "s_nop"])).nop_hazards
        if nops:
            with_nops += 1
            float_with_nops += S.TORCH_DTYPES[ident[1]].is_floating_point
            assert found, f"{ident}: removing its {len(nops)} s_nop(s) went unnoticed"
        else:
            assert not found
        stripped_total += len(found)
    # a float kernel's compare writes vcc for its select: all but four need s_nops; int8's
    # v_perm/v_bitop3 and v_max_i16 write no SGPR, so only its x2 kernels carry any
    floats = sum(S.TORCH_DTYPES[ident[1]].is_floating_point for ident in kernels)
    assert float_with_nops >= floats - 4 and stripped_total > with_nops
    S.SUMMARY_LINES.append(f"s_nop hazard check: {len(kernels)} kernels clean; with their s_nops removed "
                           f"{with_nops}/{with_nops} fail ({stripped_total} hazards)")


@pytest.mark.vgpu
def test_kernel_without_its_nops_fails_to_launch(vgpu, monkeypatch):
    import relu_flydsl
    import vgpu_support as S
    from vgpu.emulator import Program

    vgpu.errors_expected = True
    case = S.Case("v1", "bfloat16", 1, "size", "special")
    assert S.run_case(vgpu, relu_flydsl.relu, case) == []
    for key, prog in list(vgpu.programs.items()):
        if S.kernel_identity(key[1]) == ("v1", "bfloat16", 1):
            k = prog.kernel
            monkeypatch.setitem(vgpu.programs, key, Program(dataclasses.replace(
                k, lines=[ln for ln in k.lines if ln.mnemonic != "s_nop"])))
    problems = S.run_case(vgpu, relu_flydsl.relu, case)
    assert len(problems) == 1 and "hazard check" in problems[0] and "valu-sgpr-valu" in problems[0], problems
