"""Launch planning, pure Python: no flydsl, no device, nothing allocated."""

import pytest

from flash_relu_rocm import plan as planner
from flash_relu_rocm.registry import DTYPES, ELEMENT_BYTES, RUNGS

SIZES = [1, 7, 8, 1023, 1024, 4257, 65536, 100000, 1048576, 1048583]
HUGE = {
    "2^31-1": 2**31 - 1,
    "2^31": 2**31,
    "2^31+8": 2**31 + 8,
    "6GiB-bf16": 6 * 2**30 // 2,
}


def check_plan(p, rung, dtype, numel, x_addr, y_addr, limits=planner.LIMITS):
    esize = ELEMENT_BYTES[dtype]
    assert numel % p.vec == 0, "a vector must never straddle the end"
    for addr in (x_addr, y_addr):
        assert addr % (p.vec * esize) == 0, "every vector access must be aligned to its width"
    assert p.vec <= rung.max_vec(dtype)
    covered = 0
    for launch in p.launches:
        assert launch.start == covered, "launches must tile the tensor in order, without gaps or overlap"
        assert launch.start % p.tile == 0, "chunk boundaries at tile multiples keep width and alignment"
        assert launch.grid == -(-launch.numel // p.tile), "grid must be exact (no over-launch)"
        last_index = launch.grid * p.tile - p.vec
        assert launch.numel <= limits.max_index and last_index <= limits.max_index
        if rung.buffer:
            assert launch.numel * esize <= limits.max_buffer_bytes
            assert (last_index + p.vec) * esize - 1 <= limits.max_buffer_bytes
        covered += launch.numel
    assert covered == numel


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("numel", SIZES)
def test_plan_sizes(rung, dtype, numel):
    r = RUNGS[rung]
    p = planner.plan(r, dtype, numel, 0x7F0000000000, 0x7F0000100000)
    check_plan(p, r, dtype, numel, 0x7F0000000000, 0x7F0000100000)
    assert len(p.launches) == 1
    if numel % r.max_vec(dtype) == 0 and r.vectorized:
        assert p.vec == r.max_vec(dtype), "dense, aligned tensors get the full 128-bit width"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset_elems", [0, 1, 2, 3, 4, 5, 6, 7])
def test_views_at_odd_offsets_get_narrower_vectors(dtype, offset_elems):
    esize = ELEMENT_BYTES[dtype]
    base = 0x7F0000000000
    x_addr = base + offset_elems * esize
    r = RUNGS["v5"]
    p = planner.plan(r, dtype, 4096, x_addr, base)
    check_plan(p, r, dtype, 4096, x_addr, base)
    # The widest power of two that keeps the x view aligned:
    expect = r.max_vec(dtype)
    while (offset_elems * esize) % (expect * esize):
        expect //= 2
    assert p.vec == expect


def test_vector_width_follows_the_post_rule():
    # pick_vec_width from the reference post, "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels":
    # halve until it divides numel
    assert planner.pick_vec(100000, "bfloat16", 8) == 8
    assert planner.pick_vec(4257, "bfloat16", 8) == 1
    assert planner.pick_vec(1022, "bfloat16", 8) == 2
    assert planner.pick_vec(1020, "bfloat16", 8) == 4
    assert planner.pick_vec(1020, "float32", 4) == 4


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("label", HUGE)
def test_huge_tensors_are_split_within_limits(rung, dtype, label):
    numel = HUGE[label]
    r = RUNGS[rung]
    p = planner.plan(r, dtype, numel, 0, 0)
    check_plan(p, r, dtype, numel, 0, 0)
    nbytes = numel * ELEMENT_BYTES[dtype]
    if numel > 2**31 - 1 or (r.buffer and nbytes > 2**32 - 1):
        assert len(p.launches) > 1


def test_largest_single_launch():
    # Documented in docs/semantics.md (large tensors): what one launch serves.
    assert len(planner.plan(RUNGS["v3"], "float32", 2**31 - 1, 0, 0).launches) == 1
    assert len(planner.plan(RUNGS["v3"], "float32", 2**31, 0, 0).launches) == 2
    # Buffer rungs: one descriptor spans < 4 GiB.
    v5 = RUNGS["v5"]
    assert len(planner.plan(v5, "bfloat16", 2**31 - 8, 0, 0).launches) == 1
    assert len(planner.plan(v5, "bfloat16", 2**31 + 8, 0, 0).launches) == 2
    assert len(planner.plan(v5, "float32", 2**30 - 4, 0, 0).launches) == 1
    assert len(planner.plan(v5, "float32", 2**30, 0, 0).launches) == 2
    assert len(planner.plan(v5, "bfloat16", 2**31 - 1, 0, 0).launches) == 1  # docs/semantics.md's numbers
    assert len(planner.plan(v5, "float32", 2**30 - 1, 0, 0).launches) == 1


@pytest.mark.parametrize("rung", RUNGS)
def test_lowered_limits_force_splits(rung):
    r = RUNGS[rung]
    for dtype in DTYPES:
        # room for one tile at least (v2's int8 tile is 256 x 16 = 4096 elements), below 4257
        limits = planner.LaunchLimits(max_index=max(3000, r.tile(r.max_vec(dtype))), max_buffer_bytes=6000)
        for numel in (4257, 100000):
            p = planner.plan(r, dtype, numel, 0, 0, limits)
            check_plan(p, r, dtype, numel, 0, 0, limits)
            assert len(p.launches) > 1


def test_limits_too_small_for_one_tile_are_an_error():
    with pytest.raises(ValueError, match="no room for one tile"):
        planner.plan(RUNGS["v5"], "float32", 100000, 0, 0, planner.LaunchLimits(max_index=100))


def test_empty_tensor_has_no_launch():
    assert planner.plan(RUNGS["v5"], "float32", 0, 0, 0).launches == ()
