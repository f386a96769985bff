"""The first-use canary on the virtual gfx950, through the public
relu(): correct kernels pass once per (kernel, device); each kernel mutant of
the mutation catalogue is caught by its canary (torch's result returned, one
warning with the evidence, the stats say why); never inside a capture; eight
threads run each canary once; RELU_FLYDSL_CANARY=0 turns it off."""

import threading
import warnings

import numpy as np
import pytest
import torch

import vgpu_support as S
from flash_relu_rocm.build import kernel_specs
from flash_relu_rocm.registry import RUNGS as _RUNGS
from reference import SERVED as DTYPES  # the served dtypes (flash_relu_rocm/dtypes.py)
from vgpu.serve import serve

pytestmark = pytest.mark.vgpu


def _pkg():
    import relu_flydsl
    from relu_flydsl import _canary, _dispatch

    return relu_flydsl, _dispatch, _canary


def _call(dev, relu, dtype, n, rung=None, seed=0, kind="mixed", check_bits=True):
    xbits = S.make_bits(kind, n, dtype, seed)
    x, xbuf = S.guarded_input(dev, xbits, dtype)
    out, obuf = dev.guarded((n,), dtype, name="out")
    assert relu(x, out=out, rung=rung) is out
    if check_bits:
        S.assert_bits(out, S.relu_bits(xbits, dtype))
    S.assert_guards(obuf, out)
    S.assert_guards(xbuf, x)
    assert (S.tensor_bits(x) == xbits).all(), "input modified"
    return x, out


# ---- the canary's own pieces (CPU) -------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_canary_input_and_bit_rule(dtype):
    """The packaged special values and bit rule agree with the test suite's
    reference, and the input holds every special pattern, in the tail too."""
    from relu_flydsl import _canary
    from relu_flydsl.flash_relu_rocm import dtypes as _dtypes
    from relu_flydsl.flash_relu_rocm.registry import RUNGS

    import reference

    name = str(dtype)[6:]
    special = _dtypes.get(name).special
    assert sorted(special) == sorted(reference.SPECIAL[dtype])
    rung = RUNGS["v5"]
    vec = rung.max_vec(name)
    n = _canary.length(rung, vec)
    tile = rung.block * vec
    assert tile < n < 2 * tile and n % vec == 0  # a full tile, then a partial block
    bits = _canary.input_bits(name, vec, n)
    u = bits.numpy().view(reference.UINT[dtype])
    assert set(special) <= set(u.tolist())
    assert set(special) <= set(u[-len(special) * vec:].tolist())
    expect = _canary.expected_bits(bits, name).numpy().view(reference.UINT[dtype])
    assert np.array_equal(expect, reference.relu_bits_u(u, dtype))
    raw = np.random.default_rng(1).integers(0, np.iinfo(u.dtype).max, 5000, dtype=u.dtype, endpoint=True)
    signed = torch.from_numpy(raw.view(np.dtype(f"int{u.itemsize * 8}")).copy())
    assert np.array_equal(_canary.expected_bits(signed, name).numpy().view(u.dtype), reference.relu_bits_u(raw, dtype))


def lane_gaps(input_bits, rung, dtype: str, vec: int):
    """(special value, lane) pairs of a canary input where that special value
    never sits at that lane position of a `vec`-wide vector: [] when every
    special value visits every lane, at the start of x and in its last block."""
    from relu_flydsl import _canary
    from relu_flydsl.flash_relu_rocm import dtypes as _dtypes

    d = _dtypes.get(dtype)
    n = _canary.length(rung, vec)
    u = input_bits(dtype, vec, n).to(torch.int64) & ((1 << d.width) - 1)
    tail = rung.block * vec  # the partial last block
    gaps = []
    for part in (u[:n - tail], u[n - (n % tail or tail):]):
        lanes = torch.arange(part.numel()) % vec
        for value in d.special:
            seen = set(lanes[part == value].tolist())
            gaps += [(hex(value), lane) for lane in range(vec) if lane not in seen]
    return gaps


def test_every_special_value_sits_at_every_lane_position():
    """For every rung, dtype and vector width the canary serves, each special
    value sits at every lane position, both in the full tiles and in the
    partial last block; a weakened input (specials at lane 1 of each group of
    4, as before) fails the same check."""
    from relu_flydsl import _canary
    from relu_flydsl.flash_relu_rocm import dtypes as _dtypes
    from relu_flydsl.flash_relu_rocm.registry import DTYPES, RUNGS

    for r in RUNGS.values():
        for dtype in DTYPES:
            vec = 1
            while vec <= r.max_vec(dtype):
                assert lane_gaps(_canary.input_bits, r, dtype, vec) == [], (r.name, dtype, vec)
                vec *= 2

    def weakened(dtype, vec, n):
        d = _dtypes.get(dtype)
        bits = torch.zeros(n, dtype=getattr(torch, d.int_view))
        special = torch.tensor([_dtypes.signed(v, d.width) for v in d.special], dtype=bits.dtype)
        every = torch.arange(n) % 4 == 1
        bits[every] = special.repeat(-(-n // special.numel()))[: int(every.sum())]
        return bits

    assert lane_gaps(weakened, RUNGS["v5"], "float32", 4), "the check must see lanes 0, 2, 3 missed"
    assert lane_gaps(weakened, RUNGS["v5"], "bfloat16", 8)


def test_expected_bits_for_integer_dtypes():
    """expected_bits takes integer dtypes too: y = 0 where x < 0, else x."""
    from relu_flydsl import _canary

    bits = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)  # an independent oracle, not dtypes.py's row
    assert _canary.expected_bits(bits, "int8").tolist() == [0, 0, 0, 1, 127]


# ---- a correct kernel passes, once per (kernel, device) -------------------------
def test_correct_kernels_pass_once(vgpu):
    relu_flydsl, dispatch, canary = _pkg()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a correct kernel never warns
        for _ in range(2):
            _call(vgpu, relu_flydsl.relu, torch.bfloat16, 4096, seed=1)       # v5/bf16/x8
            _call(vgpu, relu_flydsl.relu, torch.bfloat16, 1000, seed=2)       # same kernel, another size
            _call(vgpu, relu_flydsl.relu, torch.float32, 4097, rung="v1")     # v1/f32/x1
    assert dispatch.STATE.canary_runs == {("v5", "bfloat16", 8, 0): 1, ("v1", "float32", 1, 0): 1}
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/bfloat16": 4, "flydsl/v1/float32": 2}
    # the canary launches ran on the device, each on its canary length, on the exact grid
    from relu_flydsl.flash_relu_rocm.registry import RUNGS

    got = sorted((r.kernel.split("_")[1], r.args[1]) for r in vgpu.canary_launches)
    assert got == sorted([("v1", canary.length(RUNGS["v1"], 1)), ("v5", canary.length(RUNGS["v5"], 8))])
    assert len(vgpu.launches) == 6  # the calls' own launches only


def test_every_kernel_passes_its_canary_through_warmup(vgpu):
    """warmup() runs the canary of every kernel it loads: every rung x dtype
    x vector width, all passing on the virtual gfx950."""
    relu_flydsl, dispatch, _ = _pkg()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for r, dtype, vec in kernel_specs():  # the build's table: every shipped kernel
            relu_flydsl.warmup(dtype, rungs=r.name, vecs=vec)
    expected = {(r.name, dtype, vec, 0) for r, dtype, vec in kernel_specs()}
    assert dispatch.STATE.canary_runs == {k: 1 for k in expected}
    assert all(dispatch.STATE.verdicts[k] is None for k in expected)
    launches = len(vgpu.canary_launches)
    _call(vgpu, relu_flydsl.relu, torch.float16, 4096, rung="v3")  # warmed: no canary now
    assert len(vgpu.canary_launches) == launches and len(vgpu.launches) == 1


# ---- each kernel mutant is caught by its canary -----------------------------
# calls that reach each rung with sizes a vector divides and sizes it does not
_MUTANT_CALLS = [(rung, dtype, n) for rung in _RUNGS
                 for dtype in (torch.float32, torch.bfloat16) for n in (4096, 7)]


def _import_mutant(name, root, vgpu, monkeypatch):
    import mutation_support as M

    pkg = M.import_copy(M.BY_NAME[name], root)
    serve(vgpu, pkg, monkeypatch.setattr)
    monkeypatch.delenv("RELU_FLYDSL_CANARY", raising=False)
    return pkg


def _kernel_mutants():
    import mutation_support as M

    return [m.name for m in M.MUTANTS]


@pytest.mark.parametrize("name", _kernel_mutants())
def test_mutant_is_caught_by_its_canary(vgpu, monkeypatch, mutant_root, name):
    """Every call returns torch's bits (the canary stops the broken kernel
    before its first real launch), each failed kernel warns once with its
    evidence, and the stats show the canary fallback."""
    pkg = _import_mutant(name, mutant_root, vgpu, monkeypatch)
    vgpu.errors_expected = True  # the broken kernels' canary launches may touch guards
    keep = []  # live tensors: no address is reused by a later registration
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rung, dtype, n in _MUTANT_CALLS * 2:  # twice: the second round warns no more
            x, out = _call(vgpu, pkg.relu, dtype, n, rung=rung, seed=n, kind="random")
            assert torch.equal(out, torch.relu(x))
            keep.append((x, out))
    failed = {k: v for k, v in pkg._dispatch.STATE.verdicts.items() if v is not None}
    assert failed, f"mutant {name}: no canary failed"
    msgs = [str(w.message) for w in caught if "canary failed" in str(w.message)]
    assert len(msgs) == len(failed), msgs  # once per failed kernel
    for msg in msgs:
        assert any(word in msg for word in ("element", "guard", "planner", "HIP error")), msg
    stats = pkg.dispatch_stats()
    for rung, dtype, vec, device in failed:
        assert stats.get(f"fallback/canary failed {rung}/{dtype}/x{vec} on device {device}", 0) >= 1, stats
    # no real launch of a failed kernel ever reached the device
    for rec in vgpu.launches:
        assert not any(rec.kernel.startswith(f"relu_{r}_") and f"_{d}_x{v}_" in rec.kernel
                       for r, d, v, _ in failed), rec.kernel


def test_unmutated_copy_passes_every_canary(vgpu, monkeypatch, mutant_root):
    pkg = _import_mutant("unmutated", mutant_root, vgpu, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rung, dtype, n in _MUTANT_CALLS:
            _call(vgpu, pkg.relu, dtype, n, rung=rung, seed=n)
    assert pkg._dispatch.STATE.verdicts and all(v is None for v in pkg._dispatch.STATE.verdicts.values())
    assert not any(k.startswith("fallback/") for k in pkg.dispatch_stats())


def _failed_canary(vgpu, monkeypatch, edit, dtype, n, match):
    """relu(x, out=) on n random elements of dtype, with edit(canary) run on each canary after its
    launch and before its judgement (a wrong kernel, simulated): it warns `match`. Returns (x, out)."""
    relu_flydsl, _, canary = _pkg()
    judge = canary.Canary.judge

    def tampered(self):
        edit(self)
        return judge(self)

    monkeypatch.setattr(canary.Canary, "judge", tampered)
    with pytest.warns(RuntimeWarning, match=match):
        return _call(vgpu, relu_flydsl.relu, dtype, n, kind="random")


def test_evidence_names_the_first_differing_element(vgpu, monkeypatch):
    """A kernel whose output is wrong (simulated: the canary's launch is
    followed by one flipped output element) is failed with that element's
    input, output and expected bits."""
    relu_flydsl = _pkg()[0]

    def flip(canary):
        canary.views()[1].view(torch.int32)[5] ^= 1  # element 5 of a float32 canary

    x, out = _failed_canary(vgpu, monkeypatch, flip, torch.float32, 4096,
                            r"canary failed v5/float32/x4 on device 0: element 5 of \d+ "
                            r"\(1 differ\): input 0x[0-9A-F]{8}, output 0x[0-9A-F]{8}, expected")
    assert torch.equal(out, torch.relu(x))
    assert relu_flydsl.dispatch_stats() == {"fallback/canary failed v5/float32/x4 on device 0": 1}
    assert vgpu.launches == []  # the failed kernel never ran on the call's tensors


@pytest.mark.parametrize("lane", [None, 0, 15], ids=["all-lanes", "lane-0", "lane-15"])
def test_int8_negatives_passed_through_are_caught(vgpu, monkeypatch, lane):
    """An int8 kernel that returns x unchanged (simulated after the canary's
    launch), everywhere or in one byte lane of its 16-byte vectors only, is
    failed with the evidence (the specials -128 and -1 come first, at every lane)."""
    relu_flydsl = _pkg()[0]

    def pass_through(canary):
        x, out = canary.views()
        at = slice(None) if lane is None else slice(lane, None, 16)
        out[at] = x[at]

    x, out = _failed_canary(vgpu, monkeypatch, pass_through, torch.int8, 4096,
                            r"canary failed v5/int8/x16 on device 0: element \d+ of \d+ "
                            r"\(\d+ differ\): input 0x(80|FF), output 0x(80|FF), expected 0x00")
    assert torch.equal(out, torch.relu(x))
    assert relu_flydsl.dispatch_stats() == {"fallback/canary failed v5/int8/x16 on device 0": 1}
    assert vgpu.launches == []


def test_guard_write_is_reported(vgpu, monkeypatch):
    relu_flydsl = _pkg()[0]

    def past_the_end(canary):
        canary.buffer[canary.out_at + canary.nbytes + 3] = 0  # 3 bytes past the output's end

    _failed_canary(vgpu, monkeypatch, past_the_end, torch.bfloat16, 64,
                   "guard after the output written at byte 3 past the output's end")
    assert relu_flydsl.dispatch_stats() == {"fallback/canary failed v5/bfloat16/x8 on device 0": 1}


# ---- never inside a capture --------------------------------------------------
def test_first_call_inside_capture_falls_back(vgpu):
    relu_flydsl, dispatch, _ = _pkg()
    stream = vgpu.create_stream()
    vgpu.stream = stream
    vgpu.refuse_loads_during_capture()  # a module load inside the capture would invalidate it
    xbits = S.make_bits("random", 4096, torch.bfloat16, 3)
    x, _ = S.guarded_input(vgpu, xbits, torch.bfloat16)
    out, obuf = vgpu.guarded((4096,), torch.bfloat16, name="out")
    vgpu.begin_capture(stream)
    relu_flydsl.relu(x, out=out)
    assert vgpu.is_capturing(stream) == 1, "the capture must stay valid"
    graph = vgpu.end_capture(stream)
    assert vgpu.graph_nodes(graph) == 0  # torch's kernel ran (on the CPU here), nothing of ours captured
    vgpu.destroy_graph(graph)
    assert dispatch.STATE.canary_runs == {} and vgpu.canary_launches == [] and vgpu.launches == []
    assert relu_flydsl.dispatch_stats() == {"fallback/not verified before graph capture (call warmup())": 1}
    S.assert_bits(out, S.relu_bits(xbits, torch.bfloat16))
    relu_flydsl.relu(x, out=out)  # outside the capture: canary, then the kernel
    assert dispatch.STATE.canary_runs == {("v5", "bfloat16", 8, 0): 1} and len(vgpu.launches) == 1


# ---- concurrency: eight first calls, each canary once --------------------------
def test_eight_threads_run_each_canary_once(vgpu):
    relu_flydsl, dispatch, _ = _pkg()
    jobs = [(torch.bfloat16, 4096), (torch.bfloat16, 2048), (torch.float32, 4096), (torch.float32, 1024)] * 2
    cases = []
    for i, (dt, n) in enumerate(jobs):
        xbits = S.make_bits("mixed", n, dt, i)
        x, _ = S.guarded_input(vgpu, xbits, dt)
        out, obuf = vgpu.guarded((n,), dt, name=f"out{i}")
        cases.append((xbits, x, out, dt))
    barrier = threading.Barrier(len(cases))
    errors = []

    def work(x, out):
        try:
            barrier.wait()
            relu_flydsl.relu(x, out=out)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c[1], c[2])) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for xbits, x, out, dt in cases:
        S.assert_bits(out, S.relu_bits(xbits, dt))
    assert dispatch.STATE.canary_runs == {("v5", "bfloat16", 8, 0): 1, ("v5", "float32", 4, 0): 1}
    assert len(vgpu.canary_launches) == 2
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/bfloat16": 4, "flydsl/v5/float32": 4}


# ---- the switch ----------------------------------------------------------------
def test_switch_turns_the_canary_off_and_on_at_run_time(vgpu, monkeypatch):
    relu_flydsl, dispatch, _ = _pkg()
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "0")
    for _ in range(2):  # the second call takes relu()'s hot path
        _call(vgpu, relu_flydsl.relu, torch.float32, 4096)
    assert dispatch.STATE.canary_runs == {} and vgpu.canary_launches == [] and len(vgpu.launches) == 2
    monkeypatch.setenv("RELU_FLYDSL_CANARY", "1")  # the hot path's cached entry must not skip it
    _call(vgpu, relu_flydsl.relu, torch.float32, 4096)
    assert dispatch.STATE.canary_runs == {("v5", "float32", 4, 0): 1} and len(vgpu.canary_launches) == 1
    monkeypatch.delenv("RELU_FLYDSL_CANARY")  # default: on
    _call(vgpu, relu_flydsl.relu, torch.float32, 4096)
    assert dispatch.STATE.canary_runs == {("v5", "float32", 4, 0): 1}
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 4}
