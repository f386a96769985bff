"""Helpers for the virtual-device suites: inputs, the bit rule, and the checks
every launch must pass (values, guards, reads/writes inside the allocations)."""

import re

import numpy as np
import torch

from reference import SPECIAL, UINT
from reference import relu_bits_u as relu_bits  # the bit rule on unsigned patterns

SINT = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
SENTINEL = 0xA5


def make_bits(kind, n, dtype, seed):
    """uint bit patterns: 'random' (normal numbers of both signs), 'special'
    (the special values, cycled), 'mixed' (random with specials every few elements)."""
    rng = np.random.default_rng(seed)
    ut = UINT[dtype]
    rand = torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 8).to(dtype)
    rand = rand.view(SINT[dtype]).numpy().view(ut).copy()
    special = np.array(SPECIAL[dtype], dtype=ut)
    if kind == "random":
        return rand
    if kind == "special":
        return rng.permutation(np.resize(special, n))
    if kind == "mixed":
        pos = rng.random(n) < 0.15
        rand[pos] = rng.choice(special, int(pos.sum()))
        # raw random bit patterns as well: every NaN payload and denormal is fair game
        raw = rng.random(n) < 0.1
        rand[raw] = rng.integers(0, np.iinfo(ut).max, int(raw.sum()), dtype=ut, endpoint=True)
        return rand
    raise ValueError(kind)


NP_SINT = {torch.float32: np.int32, torch.float16: np.int16, torch.bfloat16: np.int16}


def to_tensor(bits_u, dtype):
    return torch.from_numpy(np.ascontiguousarray(bits_u).view(NP_SINT[dtype])).view(dtype)


def tensor_bits(t):
    return t.contiguous().view(SINT[t.dtype]).numpy().view(UINT[t.dtype])


def guarded_input(dev, bits_u, dtype, offset_elems=0, name="x"):
    x, buf = dev.guarded((bits_u.size,), dtype, offset_elems=offset_elems, name=name)
    x.copy_(to_tensor(bits_u, dtype))
    return x, buf


def assert_guards(buf, view):
    """Every byte of `buf` outside `view` still holds the sentinel."""
    b = buf.numpy()
    start = view.data_ptr() - buf.data_ptr()
    stop = start + view.numel() * view.element_size()
    outside = np.concatenate([b[:start], b[stop:]])
    bad = np.flatnonzero(outside != SENTINEL)
    assert bad.size == 0, f"{bad.size} guard byte(s) overwritten; first at buffer offsets {bad[:8].tolist()}"


def assert_written_once(dev, y):
    lo, hi = dev.writes(y)
    bad = np.flatnonzero((lo != 1) | (hi != 1))
    assert bad.size == 0, (f"{bad.size} of {y.numel()} output elements not written exactly once; first "
                           f"{bad[:8].tolist()} counts {hi[bad[:8]].tolist()}")


def assert_bits(y, expect_u):
    got = tensor_bits(y)
    bad = np.flatnonzero(got != expect_u)
    assert bad.size == 0, (f"{bad.size} of {got.size} elements differ from the bit rule; first at "
                           f"{bad[:5].tolist()}: expected {[hex(v) for v in expect_u[bad[:5]]]} "
                           f"got {[hex(v) for v in got[bad[:5]]]}")


# A ladder kernel's name ends in _x<vec>_b<block>[_u<unroll>] (flash_relu_rocm._common.kernel_name).
_KERNEL_SHAPE = re.compile(r"_x(\d+)_b(\d+)(?:_u(\d+))?(?:_\d+)?$")


def assert_exact_grids(launches):
    """Every ladder launch ran on the exact grid ceil(numel / (block * vec * unroll)),
    numel being the launch's own X numel argument, vec/block/unroll read from the
    kernel's name. Nothing else sees an over-launch: the predicate (v1-v3) or the
    descriptor (v4/v5) masks the excess blocks, so values and memory stay right
    until an index overflows int32 (the ladder post's case 2)."""
    bad = []
    for r in launches:
        if not r.kernel.startswith("relu_"):
            continue  # not a ladder kernel
        m = _KERNEL_SHAPE.search(r.kernel)
        assert m is not None and len(r.args) >= 4, f"cannot read vec/block/numel of launch {r.kernel} {r.args}"
        vec, block, unroll = int(m[1]), int(m[2]), int(m[3] or 1)
        numel = r.args[1]
        expect = -(-numel // (block * vec * unroll))
        if tuple(r.grid) != (expect, 1, 1) or tuple(r.block) != (block, 1, 1):
            bad.append(f"{r.kernel} numel {numel}: grid {tuple(r.grid)} block {tuple(r.block)}, "
                       f"exact grid ({expect}, 1, 1) block ({block}, 1, 1)")
    assert not bad, f"{len(bad)} launch(es) not on the exact grid; first: {bad[0]}"


# Lines the terminal summary prints at the end of the run (tests/conftest.py), e.g.
# the mutation check's catch count: shown even under -q.
SUMMARY_LINES = []
