"""The virtual device must catch what is wrong: bad launches of the real
kernels (straddling vectors, over-large launches, unregistered memory), a
missing s_waitcnt, an unimplemented instruction, and a failed launch."""

import dataclasses

import numpy as np
import pytest
import torch

import vgpu_support as S
from flash_relu_rocm.registry import RUNGS

pytestmark = pytest.mark.vgpu


def _compiled(rung, dtype, vec):
    from relu_flydsl.flash_relu_rocm import cache, registry

    return cache.compiled(registry.RUNGS[rung], dtype, vec)


def _problems(dev, y, obuf, expect):
    """Every way the checker can see the launch went wrong."""
    found = []
    if dev.memory.violations:
        found.append("violation: " + str(dev.memory.violations[0]))
    if dev.errors:
        found.append("error: " + str(dev.errors[0]))
    try:
        S.assert_guards(obuf, y)
    except AssertionError as e:
        found.append(f"guard: {e}")
    try:
        S.assert_written_once(dev, y)
    except AssertionError as e:
        found.append(f"writes: {e}")
    try:
        S.assert_bits(y, expect)
    except AssertionError as e:
        found.append(f"values: {e}")
    return found


@pytest.mark.parametrize("model", ["dword", "whole", "start"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_buffer_rung_with_straddling_vector_is_caught(vgpu, model, dtype):
    """v4 called with the widest vector on a size it does not divide: the last
    vector straddles the end of both buffers."""
    vgpu.errors_expected = True
    vgpu.straddle = model
    tdt = getattr(torch, dtype)
    vec = RUNGS["v4"].max_vec(dtype)
    n = 1000 * vec + vec // 2 + 1
    xbits = S.make_bits("random", n, tdt, seed=9)
    x, xbuf = S.guarded_input(vgpu, xbits, tdt)
    y, obuf = vgpu.guarded((n,), tdt, name="out")
    fn = _compiled("v4", dtype, vec)
    fn(x, y, -(-n // RUNGS["v4"].tile(vec)), 0)
    found = _problems(vgpu, y, obuf, S.relu_bits(xbits, tdt))
    if dtype == "float32" and model == "dword":
        # per-dword range checking masks a straddling f32 vector exactly: each f32 is one word
        assert not found, found
        assert vgpu.launches[-1].range_dropped > 0
        return
    assert found, f"straddling launch under model {model} went unnoticed"
    if model == "whole":
        # the straddling access is dropped: the tail is never written
        assert any(f.startswith("writes") for f in found), found
    else:
        # the in-range start of the last vector reaches past the end: guard write/read
        assert any("guard-" in f for f in found), found


def test_global_rung_with_straddling_vector_is_caught(vgpu):
    vgpu.errors_expected = True
    n = 1003
    xbits = S.make_bits("random", n, torch.bfloat16, seed=10)
    x, xbuf = S.guarded_input(vgpu, xbits, torch.bfloat16)
    y, obuf = vgpu.guarded((n,), torch.bfloat16, name="out")
    _compiled("v2", "bfloat16", 8)(x, y, 1, 0)
    v = vgpu.memory.violations
    assert any(k.kind == "guard-read" and "global_load_dwordx4" in k.instruction for k in v), v
    assert any(k.kind == "guard-write" and "global_store_dwordx4" in k.instruction for k in v), v
    with pytest.raises(Exception, match="invalid memory access"):
        vgpu.check()


def test_over_large_launch_is_caught(vgpu):
    """A global rung launched over more elements than the output holds (x larger
    than out, grid for x): the writes past out land in its guard."""
    vgpu.errors_expected = True
    n = 5000
    xbits = S.make_bits("random", n, torch.float32, seed=11)
    x, xbuf = S.guarded_input(vgpu, xbits, torch.float32)
    y, obuf = vgpu.guarded((n - 100,), torch.float32, guard_bytes=1024, name="out")
    _compiled("v3", "float32", 4)(x, y, -(-n // 512) + 3, 0)
    kinds = {v.kind for v in vgpu.memory.violations}
    assert "guard-write" in kinds, vgpu.memory.violations
    with pytest.raises(AssertionError):
        S.assert_guards(obuf, y)


def test_unregistered_memory_stops_the_launch_naming_lane_address_instruction(vgpu):
    vgpu.errors_expected = True
    n = 300
    xbits = S.make_bits("random", n, torch.float32, seed=12)
    x, _ = S.guarded_input(vgpu, xbits, torch.float32)
    y = torch.zeros(n, dtype=torch.float32)  # never registered
    _compiled("v1", "float32", 1)(x, y, 2, 0)
    assert vgpu.errors, "the launch into unregistered memory was not stopped"
    msg = str(vgpu.errors[0])
    assert "unmapped" in msg and "global_store" in msg and "lane" in msg and f"0x{y.data_ptr():x}" in msg, msg
    assert vgpu.launches[-1].result != 0
    assert (y == 0).all(), "nothing may be written once an access is outside the allocations"
    # the failed launch left its error pending in the HIP runtime: take it, so the next launch
    # does not inherit it
    assert vgpu.lib.hipGetLastError() != 0


def test_relu_raises_when_the_launch_fails(vgpu):
    import relu_flydsl

    vgpu.errors_expected = True
    vgpu.stream = 0x5EED
    x, _ = S.guarded_input(vgpu, S.make_bits("random", 64, torch.float32, seed=13), torch.float32)
    out, _ = vgpu.guarded((64,), torch.float32, name="out")
    relu_flydsl.relu(x, out=out, rung="v5")  # first use (and any first-use canary) passes
    vgpu.check()
    vgpu.fail_launches(1)
    with pytest.raises(RuntimeError):
        relu_flydsl.relu(x, out=out, rung="v5")
    attempts = vgpu.launch_attempts
    assert attempts and attempts[-1] == (0x5EED, 719), attempts
    # the next launch succeeds and records the stream it was given
    relu_flydsl.relu(x, out=out, rung="v5")
    vgpu.check()
    assert vgpu.launches[-1].stream == 0x5EED


def _program(dev, rung="v4", dtype="float32", vec=4):
    """The Program of a shipped kernel, as the virtual device received it: its
    shipped code object, never a same-named kernel another test loaded (a mutated
    copy's rebuild, whose v4 fails its descriptor check before any v_sin is reached)."""
    from vgpu.emulator import Program

    return Program(S.shipped_kernel(dev, rung, dtype, vec))


def test_scoreboard_catches_a_missing_waitcnt(vgpu):
    from vgpu.emulator import Program

    prog = _program(vgpu)
    assert prog.waitcnt_errors == []
    k = prog.kernel
    lines = [ln for ln in k.lines if not (ln.mnemonic == "s_waitcnt" and "vmcnt" in ln.operands)]
    assert len(lines) < len(k.lines)
    bad = Program(dataclasses.replace(k, lines=lines))
    assert any("before the s_waitcnt" in h for h in bad.waitcnt_errors), bad.waitcnt_errors


def test_unimplemented_instruction_stops_the_run(vgpu):
    from vgpu.codeobj import Line
    from vgpu.emulator import Emulator, Program
    from vgpu.disasm import Unsupported

    prog = _program(vgpu)
    k = prog.kernel
    lines = list(k.lines)
    i = next(j for j, ln in enumerate(lines) if ln.mnemonic.startswith("v_cndmask"))
    lines[i] = Line(lines[i].addr, "v_sin_f32_e32", "v1, v2", lines[i].words)
    bad = Program(dataclasses.replace(k, lines=lines))
    assert "v_sin_f32_e32" in bad.unimplemented
    x = torch.zeros(4, dtype=torch.float32)
    vgpu.register(x, name="x")
    kernarg = np.zeros(32, dtype=np.uint8)
    vgpu.register(kernarg.ctypes.data, 32, name="kernarg", writable=False, owner=kernarg)
    kernarg[0:8] = np.frombuffer(x.data_ptr().to_bytes(8, "little"), np.uint8)
    kernarg[8:12] = np.frombuffer((4).to_bytes(4, "little"), np.uint8)
    kernarg[16:24] = kernarg[0:8]
    kernarg[24:28] = kernarg[8:12]
    with pytest.raises(Unsupported, match="v_sin_f32"):
        Emulator(bad, vgpu.memory).run((1, 1, 1), (128, 1, 1), kernarg.ctypes.data)


# ---- buffer resources ---------------------------------------------------------
def _patch_program(vgpu, monkeypatch, kernel, edit):
    """Replace the loaded Program of `kernel` ((rung, dtype, vec)) by one whose
    disassembly lines went through edit(lines) -> lines."""
    from vgpu.emulator import Program

    keys = [k for k, p in vgpu.programs.items() if S.kernel_identity(k[1]) == kernel]
    assert keys, f"{kernel} is not loaded"
    patched = 0
    for key in keys:  # also modules of other package copies (mutants) with the same kernel name
        k = vgpu.programs[key].kernel
        lines = edit(list(k.lines))
        if lines is not None:  # a mutant's build may lack the instruction: leave it alone
            monkeypatch.setitem(vgpu.programs, key, Program(dataclasses.replace(k, lines=lines)))
            patched += 1
    assert patched, f"no loaded {kernel} has the instruction to patch"


def _replace_line(pattern, mnemonic, operands):
    """An edit replacing the first line whose 'mnemonic operands' matches pattern."""
    import re

    from vgpu.codeobj import Line

    def edit(lines):
        i = next((j for j, ln in enumerate(lines) if re.fullmatch(pattern, f"{ln.mnemonic} {ln.operands}")), None)
        if i is None:
            return None
        old = lines[i]
        m = re.fullmatch(pattern, f"{old.mnemonic} {old.operands}")
        lines[i] = Line(old.addr, mnemonic, operands.format(*m.groups()), old.words)
        return lines
    return edit


_WORD3 = r"s_mov_b32 (s\d+), 0x27000"
_WORD1 = r"s_and_b32 (s\d+), (s\d+), 0xffff"
_WORD2 = r"s_lshl_b32 (s\d+), (s\d+), 2"
BAD_RESOURCES = {
    "data-format-0": (_WORD3, "s_mov_b32", "{0}, 0x7000", "word3 [18:15] DATA_FORMAT 0"),
    "data-format-15": (_WORD3, "s_mov_b32", "{0}, 0x7f000", "word3 [18:15] DATA_FORMAT 15"),
    "num-format-6": (_WORD3, "s_mov_b32", "{0}, 0x26000", "word3 [14:12] NUM_FORMAT 6"),
    "num-format-0": (_WORD3, "s_mov_b32", "{0}, 0x20000", "word3 [14:12] NUM_FORMAT 0"),
    "add-tid": (_WORD3, "s_mov_b32", "{0}, 0x827000", "word3 [23] ADD_TID_ENABLE"),
    "type": (_WORD3, "s_mov_b32", "{0}, 0x40027000", "word3 [31:30] TYPE"),
    "stride": (_WORD1, "s_or_b32", "{0}, {1}, 0x40000", "word1 [29:16] STRIDE 4"),
    "swizzle": (_WORD1, "s_or_b32", "{0}, {1}, 0x80000000", "word1 [31:30] CACHE_SWIZZLE/SWIZZLE_ENABLE"),
    "base": (_WORD1, "s_mov_b32", "{0}, 0x7fff", "is not inside a live allocation"),
    "num-records": (_WORD2, "s_lshl_b32", "{0}, {1}, 3", "NUM_RECORDS"),
}


@pytest.mark.parametrize("bad", sorted(BAD_RESOURCES))
def test_bad_buffer_resource_fails_the_suite(vgpu, monkeypatch, bad):
    """v4 float32 x4 with one descriptor-building instruction of its real
    disassembly changed: relu() raises (the launch fails) and the device's
    error names the field. The unchanged kernel passes the same case."""
    import relu_flydsl

    vgpu.errors_expected = True
    case = S.Case("v4", "float32", 4, "size", "mixed")
    assert S.run_case(vgpu, relu_flydsl.relu, case) == []  # loads the kernel; the real descriptors pass
    pattern, mnemonic, operands, field = BAD_RESOURCES[bad]
    _patch_program(vgpu, monkeypatch, ("v4", "float32", 4), _replace_line(pattern, mnemonic, operands))
    problems = S.run_case(vgpu, relu_flydsl.relu, case)
    assert len(problems) == 1 and problems[0].startswith("relu raised RuntimeError"), problems
    assert "device: DescriptorError" in problems[0] and field in problems[0], problems


def test_descriptor_checker_agrees_with_the_layout_on_every_bit_of_every_field():
    """Direct calls of the buffer-resource check, one per case of
    buffer_resource_spec (the word 1 / word 3 layout written apart from the
    emulator's field table): every refused value of every checked field is
    refused, naming the field; every accepted value and every free bit passes.
    The emulator mutation catalogue runs the same cases against the check with
    each word-3 field narrowed by one bit (word3-*-top/-bottom)."""
    import buffer_resource_spec as spec
    from vgpu.emulator import DescriptorError, memory_ops

    assert spec.every_bit_exercised() == []
    cases = spec.cases()
    assert sum(not ok for _, _, ok, _ in cases) >= 90  # 95 refused, 59 accepted
    wrong = spec.disagreements(lambda w: memory_ops.check_buffer_resource(w, None, "case"), DescriptorError)
    assert wrong == [], wrong[:5]
