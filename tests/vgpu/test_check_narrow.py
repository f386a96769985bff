"""check() on the virtual gfx950 with narrow kernels: one of every rung and dtype that has a
kernel narrower than its widest (v1 has only x1), every narrow vector width of each dtype
among them. Every case must pass and launch exactly its own kernel on the device (the
check counts a rung and dtype; the vector width is seen here). test_check.py runs the widest."""

import pytest

import relu_flydsl
import vgpu_support as S
from relu_flydsl import _check
from relu_flydsl.flash_relu_rocm.registry import RUNGS
from test_check import declare_new_outputs

NARROW = ("v2/bfloat16/x1", "v2/float16/x2", "v2/float32/x2", "v2/int8/x8",
          "v3/bfloat16/x2", "v3/float16/x4", "v3/float32/x1", "v3/int8/x4",
          "v4/bfloat16/x4", "v4/float16/x1", "v4/float32/x2", "v4/int8/x2",
          "v5/bfloat16/x4", "v5/float16/x2", "v5/float32/x1", "v5/int8/x1")


def _narrow(kernels):
    return {k for k in kernels if k[2] < RUNGS[k[0]].max_vec(k[1])}


def test_the_selection_covers_every_narrow_rung_dtype_and_width():
    chosen = _check.kernels_of(list(NARROW))
    shipped = _narrow(_check.kernels_of())
    assert len(chosen) == len(NARROW) and set(chosen) <= shipped
    assert {(r, d) for r, d, _ in chosen} == {(r, d) for r, d, _ in shipped}
    assert {(d, v) for _, d, v in chosen} == {(d, v) for _, d, v in shipped}


@pytest.mark.vgpu
def test_check_passes_narrow_kernels_on_the_virtual_gfx950(vgpu, monkeypatch):
    monkeypatch.setattr(relu_flydsl, "relu", declare_new_outputs(vgpu, relu_flydsl.relu))
    launched, run_case = [], _check.run_case

    def each_case(case, *args):
        # the device's launches of this case (its buffers' launches are filed with the canaries')
        start = len(vgpu.launches), len(vgpu.canary_launches)
        why = run_case(case, *args)
        mine = vgpu.launches[start[0]:] + vgpu.canary_launches[start[1]:]
        launched.append((case, {S.kernel_identity(r.kernel) for r in mine}))
        return why

    monkeypatch.setattr(_check, "run_case", each_case)
    r = relu_flydsl.check(bandwidth=False, kernels=list(NARROW), progress=False)
    assert r.exit_code == 0 and r.tested == len(launched) > 0, r.text[-3000:]
    assert {c["kernel"] for c in r.report["cases"]} == set(NARROW)
    wrong = [f"{case.name}: launched {sorted(map(str, ids))}" for case, ids in launched
             if ids != {(case.rung, case.dtype, case.vec)}]
    assert not wrong, f"{len(wrong)} cases did not launch their own kernel; first: {wrong[:3]}"
    seen = {(c["layout"], c["out"]) for c in r.report["cases"]}
    assert {("contiguous", "out="), ("contiguous", "out=x"), ("contiguous", "a new output"),
            ("transposed", "out="), ("transposed", "a new output")} <= seen, seen
    assert any(c["offsets"] != [0, 0] for c in r.report["cases"])
