"""The ladder harness (benchmarks/ladder/) on CPU, with fake timings: torch is checked as torch
specifies relu (its departures from the bit rule are notes, wrong values, |x|, zeros, sign flips,
dropped NaNs, are refused); the size curve, where each rung crosses torch, the timing method per
size; each timing window's own kernel-path counts; the baseline and gpu modes end to end, the
cross-check and the report. The rungs' bit-rule gate is tested in tests/release/test_benchmarks.py."""

import json
import math
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
from benchmarks import relu_semantics as rs
from benchmarks.ladder import __main__ as cli
from benchmarks.ladder import cases as cases_mod
from benchmarks.ladder import checks, gpu, report, timing

DTYPES = list(rs.DTYPES)  # the served floating dtypes (flash_relu_rocm/dtypes.py): NaN and -0.0 checks
SMALL = (1, 7, 8, 1000, 4257)


def _neg_zero_count(dtype, sizes=SMALL):
    n = 0
    for size in sizes:
        x = checks.check_input(size, dtype, "cpu", seed=size)
        n += int(((x == 0) & torch.signbit(x)).sum())
    return n


def _max_zero(x, out):  # as torch on an NVIDIA GPU: -0.0 -> +0.0, NaN bits kept
    torch.where(x == 0, torch.zeros_like(x), checks.bit_rule(x), out=out)


def _canonical_nan(x, out):  # a baseline that rewrites every NaN to the default NaN
    out.copy_(checks.bit_rule(x))
    out[torch.isnan(out)] = float("nan")


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_check_accepts_neg_zero_to_pos_zero_and_notes_it(dtype):
    fails, diff = checks.check_baseline(_max_zero, dtype, "cpu", SMALL)
    assert fails == []
    n, total = _neg_zero_count(dtype), sum(SMALL)
    assert n > 0
    assert diff.note() == f"torch on this device: -0.0 -> +0.0 in {n} of {total} elements"
    # the rungs' gate refuses the same result
    assert any("differ from the bit rule" in f for f in checks.check_impl(_max_zero, dtype, "cpu", SMALL))


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_check_accepts_rewritten_nan_payloads_and_notes_them(dtype):
    fails, diff = checks.check_baseline(_canonical_nan, dtype, "cpu", SMALL)
    assert fails == []
    assert "NaN bits changed in" in diff.note() and "-0.0" not in diff.note()


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_check_of_the_bit_rule_has_no_note(dtype):
    fails, diff = checks.check_baseline(lambda x, out: out.copy_(checks.bit_rule(x)), dtype, "cpu", SMALL)
    assert fails == [] and diff.note() == "" and not diff.any


def _identity(x, out):
    out.copy_(x)


def _nan_to_zero(x, out):
    out.copy_(checks.bit_rule(x))
    out[torch.isnan(out)] = 0


def _nan_for_one(x, out):
    out.copy_(checks.bit_rule(x))
    out[-1] = float("nan") if not torch.isnan(x[-1]) else 1.0


def _off_value(x, out):
    out.copy_(checks.bit_rule(x))
    pos = (out > 0) & torch.isfinite(out)
    out[pos] = out[pos] * 2


def _write_past_end(x, out):
    out.copy_(checks.bit_rule(x))
    out.as_strided((out.numel() + 1,), (1,))[-1] = 1.0


def _clobber_input(x, out):
    out.copy_(checks.bit_rule(x))
    x.zero_()


def _raises(x, out):
    raise RuntimeError("launch failed")


@pytest.mark.parametrize("bad, expect", [
    (_identity, "values differ"),            # negatives not zeroed
    (_off_value, "values differ"),
    (_nan_to_zero, "did not give NaN"),      # the upstream kernels-community/relu behaviour
    (_nan_for_one, "gave NaN"),
    (_write_past_end, "guard"),
    (_clobber_input, "input modified"),
    (_raises, "raised"),
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_check_still_refuses_wrong_values(bad, expect, dtype):
    fails, _ = checks.check_baseline(bad, dtype, "cpu", SMALL)
    assert fails and any(expect in f for f in fails), fails


def test_differences_note_wording():
    x = torch.tensor([-0.0] * 3 + [1.0] * 997)
    out = torch.relu(x).abs()  # +0.0 for the three -0.0
    d = rs.Differences("float32").add(x, out)
    assert d.note() == "torch on this device: -0.0 -> +0.0 in 3 of 1000 elements"
    x = torch.tensor([-2.0, 0.0])
    d = rs.Differences("float32").add(x, torch.tensor([-0.0, -0.0]))
    assert "-0.0 returned for +0.0 in 2 of 2" in d.note()


# ---- report: notes in rows, table, CSV, JSON -------------------------------------------
def test_note_reaches_row_table_and_csv(tmp_path):
    case = cases_mod.Case((8192, 8192), "bfloat16", ("shapes",))
    note = "torch on this device: -0.0 -> +0.0 in 3 of 67108864 elements"
    rows = report.summarize(case, {"v5": [1e-4] * 3, "torch": [2e-4] * 3}, notes={"torch": note})
    by = {r["impl"]: r for r in rows}
    assert by["torch"]["note"] == note and by["torch"]["gbps"] > 0 and by["v5"]["note"] is None
    assert by["v5"]["vs_torch"] == pytest.approx(2.0)  # the baseline still gives the ratio
    table = report.ladder_table(rows, ["v5", "torch"])
    assert "[1]" in table and f"[1] torch, 8192x8192 bfloat16: {note}" in table and "2.00x" in table
    report.write_csv(rows, tmp_path / "l.csv")
    assert note in (tmp_path / "l.csv").read_text()
    json.dumps(rows)


def test_summarize_without_a_known_peak_gives_no_percent():
    case = cases_mod.Case((8192, 8192), "float32", ("shapes",))
    (row,) = report.summarize(case, {"torch": [1e-4]}, peak=None)
    assert row["pct_peak"] is None and row["gbps"] > 0


def test_peak_is_named_for_its_device():
    assert report.peak_for("anything", gfx950=True) == (8000.0, "MI350X peak 8 TB/s (reference)")
    gb, label = report.peak_for("NVIDIA H200")
    assert gb == 4800.0 and label.startswith("H200 peak")
    assert report.peak_for("NVIDIA A100-SXM4-80GB")[0] is None


def test_plot_has_one_panel_per_dtype_and_a_named_peak(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: the PNG plot cannot be drawn")
    rows = []
    for dtype in ("bfloat16", "float32"):
        for shape in [(4096, 8192), (8192, 8192)]:
            rows += report.summarize(cases_mod.Case(shape, dtype, ("band",)), {"v5": [2e-5], "torch": [4e-5]})
    drawn = report.plot(rows, tmp_path / "p.png", ["v5", "torch"])
    assert set(drawn) == {"bfloat16", "float32"}
    for labels in drawn.values():
        assert labels == ["v5", "torch (clamp into out)", "MI350X peak 8 TB/s (reference)"]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- cases without `kernels` ----------------------------------------------------------
def test_cases_need_no_kernels(monkeypatch):
    """The harness and benchmark.py read one list of shapes (flash_relu_rocm/workloads.py);
    the harness's cases need neither `kernels` nor benchmark.py."""
    kernels = pytest.importorskip("kernels", reason="kernels not installed: benchmark.py cannot be imported to compare")
    del kernels
    from benchmarks import benchmark

    from flash_relu_rocm import workloads

    # the same file (benchmark.py loads it by path, as it must in a built kernel repository:
    # the source tree's, or the built variant's copy of it)
    assert Path(benchmark._tables.workloads.__file__).read_bytes() == Path(workloads.__file__).read_bytes()
    assert benchmark.POST_SHAPES == workloads.POST_SHAPES and benchmark.CACHE_BAND_SHAPES == workloads.CACHE_BAND_SHAPES
    for name in ("kernels", "kernels.benchmark", "benchmarks.benchmark"):
        monkeypatch.setitem(sys.modules, name, None)  # any import of them now fails
    assert len(cases_mod.cases(("bfloat16", "float32"), ("shapes",))) == 8
    assert {c.shape for c in cases_mod.cases(sweeps=("band",))} == set(workloads.CACHE_BAND_SHAPES)


# ---- the cross-check and the baseline mode ----------------------------------------------
def test_crosscheck_ratio(monkeypatch):
    testing = types.SimpleNamespace(do_bench=lambda fn, return_mode: (fn(), 2.0)[1])  # 2 ms per call
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(testing=testing))
    monkeypatch.setitem(sys.modules, "triton.testing", testing)
    calls = []
    cc = timing.crosscheck(lambda: calls.append(1), 1e-3, 4e9)
    assert calls and cc["available"] and cc["ratio"] == pytest.approx(2.0)  # harness 1 ms, do_bench 2 ms
    assert cc["do_bench_gbps"] == pytest.approx(2000.0)
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "triton.testing", None)
    cc = timing.crosscheck(lambda: None, 1e-3, 4e9)
    assert not cc["available"] and "not importable" in cc["reason"]


def test_baseline_mode_without_a_gpu_says_so(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the no-GPU refusal cannot be exercised here")
    assert cli.main(["--mode", "baseline"]) == 2
    err = capsys.readouterr().err
    assert "NO GPU HERE" in err and "Nothing was timed" in err


def test_baseline_mode_end_to_end_on_cpu(tmp_path, monkeypatch, capsys):
    """The GPU code path of --mode baseline with DEVICE = "cpu" and a fake timer: CPU torch
    rewrites bf16 NaN payloads in large tensors, so bf16 rows must carry a note and still a time."""
    monkeypatch.setattr(gpu, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "any_gpu", lambda: (True, "cpu"))
    monkeypatch.setattr(cases_mod.workloads, "POST_SHAPES", ((64, 256), (32, 128)))
    monkeypatch.setattr(checks, "CHECK_SIZES", SMALL)
    ran = []

    def fake_time(fn, iters, warmup, host=False):
        fn()
        ran.append(host)
        return timing.Timing(1e-5, 2e-5 if host else None)

    monkeypatch.setattr(timing, "time_launches", fake_time)
    monkeypatch.setattr(rs.observe, "__defaults__", (rs.DTYPES, 256))
    rc = cli.main(["--mode", "baseline", "--dtypes", "bfloat16", "float32", "--sweeps", "shapes",
                      "--rounds", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert len(ran) == 2 * 2 * 3 and all(ran)  # small sizes: host time too
    doc = json.loads((tmp_path / "baseline.json").read_text())
    rows = doc["rows"]
    assert {r["impl"] for r in rows} == {"torch"} and all(r["gbps"] for r in rows)
    bf = [r for r in rows if r["dtype"] == "bfloat16"]
    assert all(r["note"] and "NaN bits changed" in r["note"] for r in bf)  # CPU's vectorized bf16 path
    assert doc["meta"]["mode"] == "baseline" and doc["meta"]["peak_gbps"] is None
    assert set(doc["meta"]["torch_relu_observed"]["ops"]) == {"torch.relu", "torch.clamp(min=0, out=)"}
    assert all("crosscheck" in r for r in rows)
    assert "check torch bfloat16 ok" in out and "NaN bits changed" in out
    assert ("cross-check unavailable" in out) or ("cross-check, torch" in out)
    assert "what torch does on this device" in out


class _FakeRelu:
    """Stands in for relu_flydsl in GPU mode on CPU: v5 follows the bit rule, v4 turns -0.0
    into +0.0 (as torch on an NVIDIA GPU does) and must be refused by the rungs' gate."""

    def __init__(self):
        self.stats = {}

    def relu(self, x, out=None, rung=None):
        key = f"flydsl/{rung}/{str(x.dtype).removeprefix('torch.')}"
        self.stats[key] = self.stats.get(key, 0) + 1
        (_max_zero if rung == "v4" else lambda x, out: out.copy_(checks.bit_rule(x)))(x, out)
        return out

    def dispatch_stats(self):
        return dict(self.stats)


def _fake_gpu_mode(monkeypatch, fake_relu):
    """GPU mode on the CPU: a fake gfx950 whose relu_flydsl is a fresh fake_relu(), one 64x256
    shape, the small check sizes, a timing that calls fn iters + warmup times and reports 10 us,
    and relu_semantics.observe over 256 copies of each value."""
    monkeypatch.setattr(gpu, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "gfx950_device", lambda: (True, "fake gfx950"))
    monkeypatch.setattr(gpu, "load_relu", lambda variant=None: fake_relu())
    monkeypatch.setattr(cases_mod.workloads, "POST_SHAPES", ((64, 256),))
    monkeypatch.setattr(checks, "CHECK_SIZES", SMALL)
    monkeypatch.setattr(timing, "time_launches",
                        lambda fn, iters, warmup, host=False: [fn() for _ in range(iters + warmup)] and timing.Timing(1e-5))
    monkeypatch.setattr(rs.observe, "__defaults__", (rs.DTYPES, 256))


def test_gpu_mode_end_to_end_on_cpu_gates_rungs_on_the_bit_rule(tmp_path, monkeypatch, capsys):
    _fake_gpu_mode(monkeypatch, _FakeRelu)
    rc = cli.main(["--mode", "gpu", "--rungs", "v4", "v5", "--sweeps", "shapes", "--rounds", "3", "--iters", "2",
                      "--warmup", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1, out  # v4 refused
    rows = {r["impl"]: r for r in json.loads((tmp_path / "ladder.json").read_text())["rows"]}
    assert rows["v4"]["gbps"] is None and "differ from the bit rule" in rows["v4"]["status"]
    assert rows["v5"]["gbps"] and rows["v5"]["vs_torch"] == pytest.approx(1.0)
    assert rows["torch"]["gbps"] and "NaN bits changed" in rows["torch"]["note"]  # CPU torch, bf16
    assert "[1] torch, 64x256 bfloat16: torch on this device: NaN bits changed" in out
    assert "not reported (failed correctness): v4" in out
    assert "MI350X peak 8 TB/s (reference)" in out


def test_same_ignoring_zero_sign_used_by_the_hardware_suite():
    for dtype in (getattr(torch, d) for d in DTYPES):
        a = torch.tensor([0.0, -0.0, 1.0, float("nan")], dtype=dtype)
        b = torch.tensor([-0.0, 0.0, 1.0, float("nan")], dtype=dtype)
        assert bool(rs.same_ignoring_zero_sign(a, b).all())
        other_nan = rs.bits(b).clone()
        other_nan[3] ^= 1  # the NaN's payload, last bit flipped: still NaN, other bits
        assert rs.same_ignoring_zero_sign(a, other_nan.view(dtype)).tolist() == [True, True, True, False]
        assert not bool(rs.same_ignoring_zero_sign(a, torch.tensor([0.0, 0.0, 2.0, float("nan")], dtype=dtype)).all())


# ---- the baseline value check refuses wrong-value baselines ------------------------------
def _abs(x, out):
    torch.abs(x, out=out)


def _zeros(x, out):
    out.zero_()


def _sign_flip(x, out):
    out.copy_(-ladder_bit_rule(x))


def _nan_dropped(x, out):  # NaN inputs come back as a number (here +inf), everything else right
    out.copy_(ladder_bit_rule(x))
    out[torch.isnan(x)] = float("inf")


def ladder_bit_rule(x):
    return checks.bit_rule(x)


@pytest.mark.parametrize("bad, expect", [
    (_abs, "values differ"),
    (_zeros, "values differ"),
    (_sign_flip, "values differ"),
    (_nan_dropped, "did not give NaN"),
], ids=["abs", "zeros", "sign-flip", "nan-dropped"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_value_check_refuses_wrong_baselines(bad, expect, dtype):
    """relu_semantics.value_failures, the torch baseline's gate, on the harness's check inputs."""
    fails, _ = checks.check_baseline(bad, dtype, "cpu", SMALL)
    assert fails and any(expect in f for f in fails), fails
    for n in (1000, 4257):  # and on each input alone that holds every class, as the timed buffers are checked
        x = checks.check_input(n, dtype, "cpu", seed=n)
        out = torch.empty_like(x)
        bad(x, out)
        assert rs.value_failures(x, out), (n, bad.__name__)


def test_value_check_sees_single_wrong_elements():
    """One wrong element of each kind among right ones is enough."""
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), 5.0])
    right = checks.bit_rule(x)
    assert rs.value_failures(x, right) == []
    for i, v in ((0, 2.0), (3, 0.0), (3, -3.0), (4, 0.0), (5, float("nan"))):
        out = right.clone()
        out[i] = v
        assert rs.value_failures(x, out), (i, v)


# ---- the whole curve ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_curve_spans_64k_to_2g_log_spaced(dtype):
    cs = cases_mod.cases((dtype,), ("curve",))
    t = [c.traffic for c in cs]
    assert t == sorted(t) and len(set(t)) == len(t)
    assert t[0] <= 64 * 1024 * 1.02 and t[-1] >= 2 * 2 ** 30 * 0.99  # 64 KiB .. >= 2 GiB
    steps = [b / a for a, b in zip(t, t[1:])]
    assert max(steps) <= 2 ** (1 / 3) * 1.02  # >= 3 points per octave everywhere
    lo, hi = cases_mod.L2_BYTES // 2, 2 * cases_mod.LLC_BYTES  # through the MI350X cache band: denser
    band = [b / a for a, b in zip(t, t[1:]) if lo <= a and b <= hi]
    assert band and max(band) <= 2 ** (1 / 6) * 1.02
    for octave in range(16, 31):  # every octave of the curve holds at least 3 points
        assert sum(2 ** octave <= x < 2 ** (octave + 1) for x in t) >= 3, octave
    assert all(c.shape == (c.numel,) and c.numel % cases_mod.NUMEL_QUANTUM == 0 for c in cs)


def test_curve_points_merge_with_the_posts_shapes():
    cs = cases_mod.cases(("bfloat16",))
    by = {c.name: c for c in cs}
    assert by["8192x8192"].sweeps == ("shapes", "band", "curve")  # 256 MiB: a curve point too
    assert "67108864" not in by  # not timed twice
    assert len({c.numel for c in cs}) == len(cs)


def test_curve_traffic_rejects_a_band_density_it_cannot_nest():
    with pytest.raises(ValueError, match="multiple"):
        cases_mod.curve_traffic(per_octave=4, band_per_octave=6)


def test_timing_method_suits_the_size():
    assert timing.method_for(64 * 1024) == timing.EVENTS_HOST
    assert timing.method_for(timing.HOST_TIMED_BELOW - 1) == timing.EVENTS_HOST
    assert timing.method_for(timing.HOST_TIMED_BELOW) == timing.EVENTS
    case = cases_mod.Case((16384,), "float32", ("curve",))
    rows = {r["impl"]: r for r in report.summarize(
        case, {"v5": [timing.Timing(4e-6, 6e-6)] * 3, "torch": [timing.Timing(4e-6, 2e-6)] * 3},
        method=timing.EVENTS_HOST)}
    assert rows["v5"]["host_bound"] is True and rows["v5"]["host_us"] == pytest.approx(6.0)
    assert rows["torch"]["host_bound"] is False and rows["v5"]["method"] == "events+host"
    assert "host_us" in report.CSV_COLUMNS and "method" in report.CSV_COLUMNS


# ---- where each rung crosses torch ----------------------------------------------------------
def _rows(points, impl="v5", dtype="bfloat16"):
    """Rows at (traffic MB, rung GB/s, torch GB/s)."""
    rows = []
    for mb, g, tg in points:
        numel = int(mb * 1e6 / 4)
        case = cases_mod.Case((numel,), dtype, ("curve",))
        rows += report.summarize(case, {impl: [case.traffic / (g * 1e9)], "torch": [case.traffic / (tg * 1e9)]})
    return rows


def test_crossing_is_found_and_interpolated():
    rows = _rows([(1, 100, 200), (10, 500, 600), (100, 3000, 2000), (1000, 6000, 5000)])
    (c,) = report.crossings(rows)
    assert (c["impl"], c["dtype"], c["to"]) == ("v5", "bfloat16", "above")
    assert c["lo_mb"] == pytest.approx(10, rel=1e-3) and c["hi_mb"] == pytest.approx(100, rel=1e-3)
    r1, r2 = 500 / 600, 3000 / 2000  # log(ratio) linear in log(traffic)
    f = math.log(r1) / (math.log(r1) - math.log(r2))
    assert c["at_mb"] == pytest.approx(10 * 10 ** f, rel=1e-3)
    table = report.ladder_table(rows, ["v5", "torch"])
    assert "3000*" in table and table.count("*") == 2  # the marked cell and the legend
    assert f"v5 bfloat16: above torch from ~{c['at_mb']:.0f} MB (between 10 MB and 100 MB)" in table


def test_crossings_both_ways_touching_and_never():
    rows = _rows([(1, 100, 200), (10, 300, 200), (100, 100, 200)])
    assert [c["to"] for c in report.crossings(rows)] == ["above", "below"]
    touch = _rows([(1, 100, 200), (10, 200, 200), (100, 100, 200)])
    assert report.crossings(touch) == []  # reaching torch's level and turning back is no crossing
    through = _rows([(1, 100, 200), (10, 200, 200), (100, 300, 200)])
    (c,) = report.crossings(through)
    assert c["at_mb"] == pytest.approx(10, rel=1e-3) and c["to"] == "above"
    never = _rows([(1, 100, 200), (10, 150, 200)])
    assert report.crossings(never) == []
    assert report.crossing_lines(never, ["v5", "torch"]) == ["v5 bfloat16: below torch at every measured size (1 MB .. 10 MB)"]
    per_dtype = _rows([(1, 100, 200), (10, 300, 200)]) + _rows([(1, 300, 200), (10, 100, 200)], dtype="float32")
    assert {(c["dtype"], c["to"]) for c in report.crossings(per_dtype)} == {("bfloat16", "above"), ("float32", "below")}


def test_plot_marks_crossings_host_bound_points_and_caches(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: the PNG plot cannot be drawn")
    rows = _rows([(0.1, 50, 100), (1, 200, 400), (10, 900, 1000), (100, 4000, 3000), (1000, 6000, 5000)])
    for r in rows:
        if r["traffic_mb"] < 1:
            r["host_bound"] = True
    drawn = report.plot(rows, tmp_path / "c.png", ["v5", "torch"])
    assert drawn["bfloat16"] == ["v5", "torch (clamp into out)", "MI350X peak 8 TB/s (reference)"]
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- each timing window proves its own calls took the kernel path -------------------------
def test_window_failures_read_this_windows_calls_only():
    exp = {"v4": ("flydsl/v4/bfloat16", 120), "v5": ("flydsl/v5/bfloat16", 120)}
    before = {"flydsl/v4/bfloat16": 500, "flydsl/v5/bfloat16": 500, "fallback/empty tensor": 3}
    ok = {"flydsl/v4/bfloat16": 620, "flydsl/v5/bfloat16": 620, "fallback/empty tensor": 3}
    assert checks.window_failures(before, ok, exp) == {}
    # cumulative counts already above the window's: this window's v5 calls went nowhere
    short = dict(ok, **{"flydsl/v5/bfloat16": 500})
    assert set(checks.window_failures(before, short, exp)) == {"v5"}
    # a fallback inside the window (even with every rung's count right) fails every rung
    stray = dict(ok, **{"fallback/empty tensor": 4})
    fails = checks.window_failures(before, stray, exp)
    assert set(fails) == {"v4", "v5"} and "fallback/empty tensor" in fails["v5"]
    # a rung asked for v5 that ran v4's kernel
    swapped = dict(before, **{"flydsl/v4/bfloat16": 740})
    assert set(checks.window_failures(before, swapped, exp)) == {"v4", "v5"}


def test_gpu_mode_refuses_a_rung_whose_timed_calls_fell_back(tmp_path, monkeypatch, capsys):
    """The timed window's calls, not the check's: a rung that passes its checks and then
    falls back while timed is refused (its numbers would be torch's)."""
    class Flaky(_FakeRelu):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def relu(self, x, out=None, rung=None):
            self.calls += 1
            if rung == "v5" and self.calls > len(SMALL) + 1:  # checks passed; within the window it falls back
                self.stats["fallback/disabled by RELU_FLYDSL_DISABLE"] = self.stats.get("fallback/disabled by RELU_FLYDSL_DISABLE", 0) + 1
                out.copy_(checks.bit_rule(x))
                return out
            return super().relu(x, out, rung)

    _fake_gpu_mode(monkeypatch, Flaky)
    rc = cli.main(["--mode", "gpu", "--rungs", "v5", "--sweeps", "shapes", "--rounds", "2", "--iters", "2",
                   "--warmup", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "check v5    bfloat16 ok" in out  # the checks passed ...
    rows = {r["impl"]: r for r in json.loads((tmp_path / "ladder.json").read_text())["rows"]}
    assert rows["v5"]["gbps"] is None and "other paths" in rows["v5"]["status"]  # ... the window did not


# ---- the rung source seam (benchmarks/ladder/rungs.py, --rungs-from) ------------------------
from benchmarks.ladder import rungs  # noqa: E402

ALL_DTYPES = list(rs.INT_VIEW)  # every served dtype, int8 too


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_stand_in_rungs_obey_the_bit_rule_and_count_the_real_path(dtype):
    """The stand-in passes the rungs' own gate (every special value, -0.0 and NaN payloads
    kept: torch.relu on CUDA would not) and counts its calls as the real rung's."""
    standin = rungs.source(rungs.STAND_IN).load(None)
    for rung in ("v1", "v5"):
        assert checks.check_impl(lambda x, out, r=rung: standin.relu(x, out=out, rung=r), dtype, "cpu", SMALL) == []
        assert standin.dispatch_stats()[f"flydsl/{rung}/{dtype}"] == len(SMALL)
    x = checks.check_input(1000, dtype, "cpu", seed=5)
    assert torch.equal(checks.bits(standin.relu(x)), checks.bits(checks.bit_rule(x)))  # out=None too
    with pytest.raises(ValueError, match="unknown rung"):
        standin.relu(x, rung="v9")


def test_stand_in_gpu_mode_end_to_end_without_flydsl(tmp_path, monkeypatch, capsys):
    """--rungs-from stand-in on a non-gfx950 GPU (here the CPU, with a fake timer): the device
    check is the source's, nothing imports flydsl, kernels or relu_flydsl, every rung is
    checked and timed, and the report names the stand-in and the device's own peak."""
    for name in ("flydsl", "kernels", "relu_flydsl"):
        monkeypatch.setitem(sys.modules, name, None)  # any import of them now fails
    monkeypatch.setattr(gpu, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "any_gpu", lambda: (True, "NVIDIA H200"))
    monkeypatch.setattr(gpu, "_device_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(gpu, "gfx950_device", lambda: pytest.fail("the stand-in asked for a gfx950"))
    monkeypatch.setattr(cases_mod.workloads, "POST_SHAPES", ((64, 256), (256, 1024)))
    monkeypatch.setattr(checks, "CHECK_SIZES", SMALL)
    monkeypatch.setattr(timing, "time_launches",
                        lambda fn, iters, warmup, host=False: [fn() for _ in range(iters + warmup)]
                        and timing.Timing(1e-5, 2e-5 if host else None))
    monkeypatch.setattr(rs.observe, "__defaults__", (rs.DTYPES, 256))
    argv = ["--rungs-from", "stand-in", "--dtypes", "bfloat16", "int8", "--sweeps", "shapes", "--rounds", "2",
            "--iters", "2", "--warmup", "1", "--out", str(tmp_path)]
    rc = cli.main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "rungs: stand-in rungs (torch.where under the bit rule; not the gfx950 kernels)" in out
    for rung in ("v1", "v2", "v3", "v4", "v5"):
        for dtype in ("bfloat16", "int8"):
            assert f"check {rung:5s} {dtype:8s} ok [bit rule; guards; input; kernel path]" in out
    doc = json.loads((tmp_path / "ladder.json").read_text())
    rows = doc["rows"]
    assert len(rows) == 2 * 2 * 6 and all(r["status"] == "ok" and r["gbps"] for r in rows)
    meta = doc["meta"]
    assert meta["rungs_from"] == "stand-in" and meta["mode"] == "gpu"
    assert meta["peak_label"] == "H200 peak 4.8 TB/s (datasheet)" and "MI350X" not in out.split("GB/s (median")[1]
    assert meta["command"].endswith(" -m benchmarks.ladder " + " ".join(argv))  # as typed, not pytest's argv
    assert (tmp_path / "ladder.csv").read_text().count("\n") == 1 + len(rows)
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the report says why there is no plot
        assert "(no ladder.png: " in out
    else:
        assert (tmp_path / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_device_check_goes_through_the_source(monkeypatch, capsys):
    """No GPU: --rungs-from stand-in refuses with the stand-in's own reason; the default source
    still asks for a gfx950 (and, in auto mode, falls to the no-GPU report: not run here)."""
    monkeypatch.setattr(gpu, "any_gpu", lambda: (False, "torch sees no CUDA or ROCm GPU"))
    with pytest.raises(SystemExit):
        cli.main(["--rungs-from", "stand-in"])
    err = capsys.readouterr().err
    assert "--rungs-from stand-in needs a GPU torch sees (CUDA or ROCm): torch sees no CUDA or ROCm GPU" in err
    monkeypatch.setattr(gpu, "gfx950_device", lambda: (False, "device 0 is sm_90, not gfx950"))
    with pytest.raises(SystemExit):
        cli.main(["--mode", "gpu"])
    assert "--mode gpu needs a gfx950 device: device 0 is sm_90, not gfx950" in capsys.readouterr().err
    for bad in (["--rungs-from", "stand-in", "--mode", "nogpu"], ["--rungs-from", "stand-in", "--mode", "baseline"],
                ["--rungs-from", "stand-in", "--variant", "relu-build/build/torch-rocm"]):
        with pytest.raises(SystemExit):
            cli.main(bad)


def test_notes_that_differ_only_in_counts_share_one_footnote():
    """A device's departure from the bit rule shows in every case: one footnote per
    implementation, dtype and note (its counts aside), not one per case; another note gets its own."""
    rows = []
    for n in (1024, 4096, 8192):
        rows += report.summarize(cases_mod.Case((n,), "bfloat16", ("curve",)), {"v5": [1e-5], "torch": [2e-5]},
                                 notes={"torch": f"torch on this device: -0.0 -> +0.0 in 3 of {n} elements"})
    rows += report.summarize(cases_mod.Case((16384,), "bfloat16", ("curve",)), {"v5": [1e-5], "torch": [2e-5]},
                             notes={"torch": "torch on this device: NaN bits changed in 2 of 16384 elements"})
    rows += report.summarize(cases_mod.Case((1024,), "float32", ("curve",)), {"v5": [1e-5], "torch": [2e-5]},
                             notes={"torch": "torch on this device: -0.0 -> +0.0 in 3 of 1024 elements"})
    table = report.ladder_table(rows, ["v5", "torch"])
    cells = table.split("\n[1] ")[0]  # the rows, before the footnotes
    assert cells.count(" [1]") == 3 and cells.count(" [2]") == 1 and cells.count(" [3]") == 1
    assert ("[1] torch, 1024 bfloat16: torch on this device: -0.0 -> +0.0 in 3 of 1024 elements (and 2 more torch "
            "bfloat16 cases marked [1]") in table
    assert "[2] torch, 16384 bfloat16: torch on this device: NaN bits changed in 2 of 16384 elements\n" in table
    assert "[3] torch, 1024 float32: torch on this device: -0.0 -> +0.0 in 3 of 1024 elements\n" in table
    assert "[4]" not in table


def test_host_bound_is_host_time_near_device_time_not_above_it():
    """A host-bound loop's device events span the host's loop plus the last kernel: device time
    stays a little above host time (host / device 0.96-0.99 on an NVIDIA H200 at every
    host-bound size). host >= device would mark none of those; 0.9 x device marks them, and
    not a device-bound point whose host time is well under its device time."""
    case = cases_mod.Case((16384,), "bfloat16", ("curve",))
    measured = {"v5": [timing.Timing(18.32e-6, 18.16e-6)] * 3,     # 0.066 MB on the H200: host-bound
                "torch": [timing.Timing(16.41e-6, 8.63e-6)] * 3}   # 60 MB: the kernel is the limit
    rows = {r["impl"]: r for r in report.summarize(case, measured, method=timing.EVENTS_HOST)}
    assert rows["v5"]["host_bound"] is True and rows["torch"]["host_bound"] is False
    assert report.summarize(case, {"torch": [timing.Timing(1e-5, 0.9e-5)]}, method=timing.EVENTS_HOST)[0]["host_bound"]
    assert not report.summarize(case, {"torch": [timing.Timing(1e-5, 0.85e-5)]}, method=timing.EVENTS_HOST)[0]["host_bound"]
    table = report.ladder_table(list(rows.values()), ["v5", "torch"])
    assert table.split("\n")[2].split()[4:6] == ["4h", "4"]  # v5 host-bound, torch (same GB/s: one case) not


def test_progress_counts_only_what_is_timed(tmp_path, monkeypatch, capsys):
    """A rung refused by the check step is not timed: the bar's total leaves it out, so the
    bar ends full (v4 refused here, as in the gate test above)."""
    _fake_gpu_mode(monkeypatch, _FakeRelu)
    bars = []

    class Bar:
        def __init__(self, total, desc):
            self.total, self.done = total, 0
            bars.append(self)

        def __call__(self, n=1):
            self.done += n

        def close(self):
            pass

    monkeypatch.setattr(gpu, "Progress", Bar)
    rc = cli.main(["--mode", "gpu", "--rungs", "v4", "v5", "--sweeps", "shapes", "--rounds", "3", "--iters", "2",
                   "--warmup", "1", "--out", str(tmp_path)])
    assert rc == 1, capsys.readouterr().out
    (bar,) = bars
    assert bar.total == bar.done == 1 * 2 * 3  # one case, v5 and torch, 3 rounds
