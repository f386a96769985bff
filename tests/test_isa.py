"""Assembly checks: every rung x dtype x vector width compiles for gfx950 on
this CPU machine, and its ISA shows the property the rung exists for.
The mutant tests prove the checks fail when a property is lost."""

import importlib

import pytest

import isa as isa_tool
from flash_relu_rocm.registry import DTYPES, RUNGS

pytestmark = pytest.mark.compile

CASES = [(r, d, v) for r in RUNGS for d in DTYPES for v in isa_tool.vec_widths(RUNGS[r], d)]


@pytest.fixture(scope="module")
def ladder_isa(tmp_path_factory):
    out = {}
    for rung, dtype, vec in CASES:
        d = tmp_path_factory.mktemp(f"{rung}-{dtype}-{vec}")
        out[(rung, dtype, vec)] = isa_tool.compile_isa(RUNGS[rung], dtype, vec, str(d))
    return out


@pytest.mark.parametrize("rung,dtype,vec", CASES, ids=[f"{r}-{d}-x{v}" for r, d, v in CASES])
def test_rung_property(ladder_isa, rung, dtype, vec):
    k = ladder_isa[(rung, dtype, vec)]
    assert k.body and k.body[-1].startswith("s_endpgm")
    assert isa_tool.violations(k) == []


@pytest.mark.parametrize("rung", ["v2", "v3", "v4", "v5"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_full_width_is_dwordx4(ladder_isa, rung, dtype):
    k = ladder_isa[(rung, dtype, RUNGS[rung].max_vec(dtype))]
    space = "buffer" if RUNGS[rung].buffer else "global"
    assert [m.text.split()[0] for m in k.memops] == [f"{space}_load_dwordx4", f"{space}_store_dwordx4"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_v1_is_element_wide_under_exec_mask(ladder_isa, dtype):
    k = ladder_isa[("v1", dtype, 1)]
    assert k.uses_exec_mask()
    first_mem = next(i for i, line in enumerate(k.body) if line.startswith("global_"))
    assert any(line.startswith("s_and_saveexec_b64") for line in k.body[:first_mem])
    assert {m.width for m in k.memops} == {2 if dtype != "float32" else 4}


@pytest.mark.parametrize("dtype", DTYPES)
def test_v5_differs_from_v4_only_in_the_store_policy(ladder_isa, dtype):
    vec = RUNGS["v5"].max_vec(dtype)
    v4, v5 = ladder_isa[("v4", dtype, vec)], ladder_isa[("v5", dtype, vec)]
    assert [line.replace(" nt", "") for line in v5.body] == v4.body
    assert "nt" in v5.stores[0].modifiers and "nt" not in v5.loads[0].modifiers


# ---- mutants: each check must be able to fail ---------------------------
def test_check_catches_max_size_descriptor(monkeypatch, tmp_path):
    """v4's first draft in the post: make_buffer_tensor's default max_size=True
    (num_records 0xFFFFFFFF) checks nothing."""
    import flydsl.expr as fx

    real = fx.rocdl.make_buffer_tensor
    monkeypatch.setattr(fx.rocdl, "make_buffer_tensor", lambda t, max_size=True, **kw: real(t, max_size=True, **kw))
    k = isa_tool.compile_isa(RUNGS["v4"], "bfloat16", 8, str(tmp_path))
    assert any("num_records" in v for v in isa_tool.violations(k))


def test_check_catches_nt_store_on_v4(tmp_path):
    v4 = importlib.import_module("flash_relu_rocm.v4_buffer")
    launcher = v4.build("float32", 4, block=128, store_cache=2)
    k = isa_tool.compile_isa(RUNGS["v4"], "float32", 4, str(tmp_path), launcher=launcher)
    assert any("must not be non-temporal" in v for v in isa_tool.violations(k))


def test_check_catches_narrow_accesses(ladder_isa):
    """A v2 kernel compiled at vec 2 moves 4-byte words: labelled as the
    full-width kernel, the width check must fire."""
    k = ladder_isa[("v2", "bfloat16", 2)]
    k_as_full = isa_tool.KernelISA("v2", "bfloat16", 8, k.name, k.body, k.vgprs, k.sgprs, k.scratch_bytes, k.memops)
    assert any("bytes per lane" in v for v in isa_tool.violations(k_as_full))


def test_check_catches_register_pressure(ladder_isa):
    k = ladder_isa[("v3", "bfloat16", 8)]
    fat = isa_tool.KernelISA(k.rung, k.dtype, k.vec, k.name, k.body, 65, k.sgprs, k.scratch_bytes, k.memops)
    assert any("occupancy" in v for v in isa_tool.violations(fat))


def test_unrolled_v3_issues_all_loads_first(tmp_path):
    """The unroll machinery the post swept: four predicated vectors per thread."""
    import dataclasses

    rung = dataclasses.replace(RUNGS["v3"], unroll=4)
    launcher = importlib.import_module("flash_relu_rocm.v3_tuned").build("bfloat16", 8, block=128, unroll=4)
    k = isa_tool.compile_isa(rung, "bfloat16", 8, str(tmp_path), launcher=launcher)
    kinds = [m.kind for m in k.memops]
    assert kinds == ["load"] * 4 + ["store"] * 4
    assert sum(line.startswith("s_and_saveexec_b64") for line in k.body) >= 4
    assert isa_tool.violations(dataclasses.replace(k, rung="v3")) != []  # registry's v3 is unroll 1


def test_report_table_lists_every_rung_and_dtype(ladder_isa):
    rows = [ladder_isa[(r, d, RUNGS[r].max_vec(d))] for r in RUNGS for d in DTYPES]
    text = isa_tool.table(rows)
    assert text.count("\n") == len(rows) + 1
    assert "VIOLATED" not in text and "buffer_store_dwordx4 nt" in text
