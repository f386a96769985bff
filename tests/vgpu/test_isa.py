"""Assembly checks on the code objects that ship: every rung x dtype x vector
width, disassembled from torch-ext/relu_flydsl/code_objects/ (stale or missing
objects fail here), shows the property the rung exists for. Dtypes built but
not yet served (dtypes.PENDING, none today) are built by the same build function
and checked the same way. The mutant tests prove the checks fail when a property is lost."""

import dataclasses
import importlib
import shutil

import numpy as np
import pytest

import isa_report as R
from flash_relu_rocm.dtypes import ALL_DTYPES, ALL_ELEMENT_BYTES, PENDING_DTYPES
from flash_relu_rocm.registry import RUNGS

pytestmark = pytest.mark.compile

CASES = R.specs(ALL_DTYPES)
VECTORIZED = [name for name, r in RUNGS.items() if r.vectorized]


@pytest.fixture(scope="module")
def ladder_isa(tmp_path_factory):
    return R.kernel_isas(ALL_DTYPES, scratch_dir=tmp_path_factory.mktemp("pending"))


def test_every_planner_kernel_is_checked(ladder_isa):
    assert sorted(ladder_isa) == sorted(CASES)
    assert all(d in {k[1] for k in CASES} for d in PENDING_DTYPES)


@pytest.mark.parametrize("rung,dtype,vec", CASES, ids=[f"{r}-{d}-x{v}" for r, d, v in CASES])
def test_rung_property(ladder_isa, rung, dtype, vec):
    k = ladder_isa[(rung, dtype, vec)]
    assert k.body and k.body[-1].startswith("s_endpgm")
    assert R.violations(k) == []


@pytest.mark.parametrize("rung", VECTORIZED)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_full_width_is_dwordx4(ladder_isa, rung, dtype):
    k = ladder_isa[(rung, dtype, RUNGS[rung].max_vec(dtype))]
    space = "buffer" if RUNGS[rung].buffer else "global"
    assert [m.text.split()[0] for m in k.memops] == [f"{space}_load_dwordx4", f"{space}_store_dwordx4"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_v1_is_element_wide_under_exec_mask(ladder_isa, dtype):
    k = ladder_isa[("v1", dtype, 1)]
    assert k.uses_exec_mask()
    first_mem = next(i for i, line in enumerate(k.body) if line.startswith("global_"))
    assert any(line.startswith("s_and_saveexec_b64") for line in k.body[:first_mem])
    assert {m.width for m in k.memops} == {ALL_ELEMENT_BYTES[dtype]}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_v5_differs_from_v4_only_in_the_store_policy(ladder_isa, dtype):
    vec = RUNGS["v5"].max_vec(dtype)
    v4, v5 = ladder_isa[("v4", dtype, vec)], ladder_isa[("v5", dtype, vec)]
    assert [line.replace(" nt", "") for line in v5.body] == v4.body
    assert "nt" in v5.stores[0].modifiers and "nt" not in v5.loads[0].modifiers


# ---- int8: the arithmetic the kernels ship -------------------------------
def _bitop3(a, b, c, table):
    """v_bitop3_b32: each result bit is bit {a,b,c} (a the high index bit) of
    the 8-bit truth table (LLVM: 0xF0 = a, 0xCC = b, 0xAA = c)."""
    out = np.zeros_like(a)
    for idx in range(8):
        if (table >> idx) & 1:
            sa, sb, sc = [(m if (idx >> s) & 1 else ~m) for m, s in ((a, 2), (b, 1), (c, 0))]
            out |= sa & sb & sc
    return out


def _perm(s0, s1, sel):
    """v_perm_b32 (CDNA4 ISA): byte k of the result is chosen from {S0, S1}
    (S1 = bytes 0..3) by selector byte k: 0..7 a byte; 8..11 0xFF/0x00 from
    the sign of byte 1, 3, 5, 7; 12 0x00; 13 and above 0xFF."""
    both = (s0.astype(np.uint64) << np.uint64(32)) | s1.astype(np.uint64)
    out = np.zeros_like(s1)
    for k in range(4):
        b = (int(sel) >> (8 * k)) & 0xFF
        if b < 8:
            v = (both >> np.uint64(8 * b)) & np.uint64(0xFF)
        elif b < 12:
            v = ((both >> np.uint64(15 + 16 * (b - 8))) & np.uint64(1)) * np.uint64(0xFF)
        else:
            v = np.full_like(both, 0 if b == 12 else 0xFF)
        out |= v.astype(np.uint32) << np.uint32(8 * k)
    return out


def _value(regs, op):
    if op[0] in "vs" and op[1:].isdigit():
        return regs[op]
    return np.uint32(int(op, 0) & 0xFFFFFFFF)


def run_data_path(k, words: np.ndarray) -> np.ndarray:
    """Evaluate an int8 kernel's load-to-store arithmetic from its disassembly
    on `words` (lanes x dwords): only the instructions the word form compiles
    to; anything else on the data path is an error, not a guess."""
    regs = {}
    load, store = k.loads[0].text, k.stores[0].text
    dest = sorted(R._regs(load.split(None, 1)[1].split(",")[0]), key=lambda r: int(r[1:]))
    for i, r in enumerate(dest):
        regs[r] = words[:, i].copy()
    path = set(R.data_path(k))
    for line in k.body:
        mn, _, rest = line.partition(" ")
        ops = [o.strip() for o in rest.split(",")]
        if mn == "s_mov_b32" and ops[1].startswith("0x"):
            regs[ops[0]] = np.uint32(int(ops[1], 16))
        elif line not in path:
            continue
        elif mn == "v_lshlrev_b32_e32":
            regs[ops[0]] = _value(regs, ops[2]) << np.uint32(int(ops[1], 0) & 31)
        elif mn == "v_perm_b32":
            regs[ops[0]] = _perm(_value(regs, ops[1]), _value(regs, ops[2]), _value(regs, ops[3]))
        elif mn == "v_bitop3_b32":
            last, table = ops[3].split()
            regs[ops[0]] = _bitop3(_value(regs, ops[1]), _value(regs, ops[2]), _value(regs, last),
                                   int(table.split(":")[1], 0))
        else:
            raise AssertionError(f"no model for data-path instruction {line!r}")
    data_op = store.split(None, 1)[1].split(",")[0 if store.startswith("buffer_") else 1]
    out = sorted(R._regs(data_op), key=lambda r: int(r[1:]))
    return np.stack([np.broadcast_to(regs[r], words[:, 0].shape) for r in out], axis=1)


def _int8_words(dwords):
    """Every byte value in every byte position, plus random words."""
    every = np.arange(256, dtype=np.uint32) * np.uint32(0x01010101)
    mixed = np.random.default_rng(0).integers(0, 2**32, size=4096, dtype=np.uint64).astype(np.uint32)
    lanes = np.concatenate([every, mixed])
    return np.stack([np.roll(lanes, 7 * i) for i in range(dwords)], axis=1)


def _relu_int8_bits(words):
    b = words.view(np.int8)
    return np.where(b < 0, 0, b).astype(np.int8).view(np.uint32).reshape(words.shape)


WORD_CASES = [(r, v) for r in VECTORIZED for v in (16, 8, 4)]  # the widths of whole dwords


@pytest.mark.parametrize("rung,vec", WORD_CASES, ids=[f"{r}-x{v}" for r, v in WORD_CASES])
def test_int8_word_form_is_the_bit_rule(ladder_isa, rung, vec):
    """The shipped int8 arithmetic, run from its own disassembly with the ISA's
    v_perm_b32 and v_bitop3 semantics: y = 0 if x < 0 else x, on every byte."""
    k = ladder_isa[(rung, "int8", vec)]
    words = _int8_words(vec // 4)
    assert np.array_equal(run_data_path(k, words), _relu_int8_bits(words))


def test_int8_check_catches_a_wrong_selector(ladder_isa):
    """The same kernel with one selector byte pointing at the wrong sign."""
    k = ladder_isa[("v2", "int8", 16)]
    wrong = [line.replace("0x90b080a", "0x90b0808") for line in k.body]
    bad = dataclasses.replace(k, body=wrong)
    words = _int8_words(4)
    assert not np.array_equal(run_data_path(bad, words), _relu_int8_bits(words))


def test_int8_uses_the_fewest_valu_form(ladder_isa):
    """The shipped full-width int8 data path is no longer than any candidate
    form's (tools/isa_report.py --int8-forms prints the counts)."""
    shipped = R.valu_per_16_bytes(ladder_isa[("v2", "int8", 16)])
    counts = {name: n for name, n, _ in R.int8_form_counts()}
    assert shipped == 12 and shipped == min(counts.values()), counts


# ---- the shipped files themselves -----------------------------------------
def test_stale_or_missing_objects_are_refused(tmp_path):
    with pytest.raises(R.ObjectsError, match="stale or missing"):
        R.shipped(tmp_path / "nothing-here")
    copy = tmp_path / "code_objects"
    shutil.copytree(R.objects.OBJECTS_DIR, copy)
    R.shipped(copy)  # an exact copy is fine
    victim = next(copy.glob("*.co"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(R.ObjectsError, match="sha256"):
        R.shipped(copy)


# ---- mutants: each check must be able to fail ---------------------------
def test_check_catches_max_size_descriptor(monkeypatch):
    """v4's first draft in the reference post ("Beating torch.relu with FlyDSL: A
    Hands-On Guide to Bandwidth-Bound Kernels"): make_buffer_tensor's default max_size=True
    (num_records 0xFFFFFFFF) checks nothing."""
    import flydsl.expr as fx

    real = fx.rocdl.make_buffer_tensor
    monkeypatch.setattr(fx.rocdl, "make_buffer_tensor", lambda t, max_size=True, **kw: real(t, max_size=True, **kw))
    for dtype, vec in (("bfloat16", 8), ("int8", 16)):
        k = R.compile_launcher(RUNGS["v4"], dtype, vec)
        assert any("num_records" in v for v in R.violations(k)), dtype


def test_check_catches_nt_store_on_v4():
    v4 = importlib.import_module("flash_relu_rocm.v4_buffer")
    for dtype, vec in (("float32", 4), ("int8", 16)):
        launcher = v4.build_buffer_kernel("v4_buffer", dtype, vec, 128, store_cache=v4.CACHE_NONTEMPORAL)
        k = R.compile_launcher(RUNGS["v4"], dtype, vec, launcher=launcher)
        assert any("must not be non-temporal" in v for v in R.violations(k)), dtype


def test_check_catches_cached_store_on_v5(ladder_isa):
    """v5 labelled on v4's object (the store lost its nt)."""
    k = dataclasses.replace(ladder_isa[("v4", "int8", 16)], rung="v5")
    assert any("must be non-temporal" in v for v in R.violations(k))


def test_check_catches_narrow_accesses(ladder_isa):
    """A kernel compiled at a narrower vector moves fewer bytes: labelled as
    the full-width kernel, the width check must fire."""
    for dtype, narrow, full in (("bfloat16", 2, 8), ("int8", 8, 16)):
        k = dataclasses.replace(ladder_isa[("v2", dtype, narrow)], vec=full)
        assert any("bytes per lane" in v for v in R.violations(k)), dtype


def test_check_catches_scratch(ladder_isa):
    k = dataclasses.replace(ladder_isa[("v5", "int8", 16)], scratch_bytes=16)
    assert any("scratch" in v for v in R.violations(k))


def test_check_catches_register_pressure(ladder_isa):
    fat = dataclasses.replace(ladder_isa[("v3", "bfloat16", 8)], vgprs=65)
    assert any("occupancy" in v for v in R.violations(fat))


def test_unrolled_v3_issues_all_loads_first():
    """The unroll machinery the reference post swept: four predicated vectors per thread."""
    rung = importlib.import_module("flash_relu_rocm.v3_tuned").unrolled(4)
    k = R.compile_launcher(rung, "bfloat16", 8)
    kinds = [m.kind for m in k.memops]
    assert kinds == ["load"] * 4 + ["store"] * 4
    assert sum(line.startswith("s_and_saveexec_b64") for line in k.body) >= 4
    assert k.name.endswith("_u4")
    assert R.violations(dataclasses.replace(k, rung="v3")) != []  # registry's v3 is unroll 1


def test_data_path_leaves_out_address_math(ladder_isa):
    """float32 v2: one compare and one select per element, nothing else."""
    path = R.data_path(ladder_isa[("v2", "float32", 4)])
    assert sorted(line.split()[0] for line in path) == ["v_cmp_ngt_f32_e32"] * 4 + ["v_cndmask_b32_e32"] * 4


def test_report_table_lists_every_rung_and_dtype(ladder_isa):
    rows = [ladder_isa[(r, d, RUNGS[r].max_vec(d))] for r in RUNGS for d in ALL_DTYPES]
    text = R.table(rows)
    assert text.count("\n") == len(rows) + 1
    assert "VIOLATED" not in text and "buffer_store_dwordx4 nt" in text
    assert "relu VALU/16B" in text.splitlines()[0]
