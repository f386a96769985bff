"""benchmarks/: the `kernels benchmark` workloads and the ladder harness's logic.

Nothing here times anything. The workloads are discovered with kernels' own discovery
functions in a freshly built relu-build (as the CLI imports them, `benchmark_module`, with
torch presenting a ROCm build so the file's own machine check passes), and run with a
stand-in kernel whose relu() is torch's and whose dispatch_stats() says which path it
claims: the fair-reference rule (verify_ writes into a buffer preallocated in setup, the
upstream mirror allocates on both sides) and the refusal to time a fallback are checked on
CPU in a second. The real CLI on the virtual gfx950 is tests/release/test_kernels_cli.py. The
harness's median / GB/s / ratio / report logic is tested on fake timings.
"""

import argparse
import itertools
import json
import random
import re
import statistics
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
from benchmarks.ladder import __main__ as cli
from benchmarks.ladder import cases as cases_mod
from benchmarks.ladder import checks, gpu, nogpu, report, timing
from flash_relu_rocm.dtypes import DTYPES as SERVED
from flash_relu_rocm.dtypes import ELEMENT_BYTES, TABLE
from flash_relu_rocm.registry import RUNGS

TEST_ROW_DIVISOR = 1 << 20  # every shape becomes 1 row: the rules checked here do not depend on size
EXPECTED_CLASSES = {"ReluBenchmark", "ReluDtypeBenchmark", "ReluLadderBenchmark", "ReluCacheBandBenchmark"}
POST_SHAPES = [(8192, 8192), (16384, 8192), (32768, 8192), (4096, 14336)]


# ---- the kernels benchmark workloads --------------------------------------------------
@pytest.fixture(scope="module")
def build_dir(variant_build):
    return variant_build


@pytest.fixture(scope="module")
def discovered(build_dir):
    """(module, classes) exactly as `kernels benchmark ./relu-build` discovers them on a ROCm machine."""
    from kernels.cli.benchmark import discover_benchmark_classes, discover_benchmark_scripts

    scripts = discover_benchmark_scripts(str(build_dir), build_dir)
    assert [s.name for s in scripts] == ["benchmark.py"], scripts  # the ladder harness is not a workload script
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.version, "hip", "7.0.0")  # the file refuses a non-ROCm torch at import
        classes = discover_benchmark_classes(scripts[0], build_dir)
    module = sys.modules[classes[0].__module__]
    return module, classes


def _workload_count(module):
    """Upstream's 2, every served dtype and every rung at the 4 shapes of the reference post
    ("Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels"), the band's 7 x 2."""
    return (2 + len(module.DTYPES) * len(module.POST_SHAPES) + len(module.RUNG_NAMES) * len(module.POST_SHAPES)
            + len(module.CACHE_BAND_SHAPES) * len(module.CACHE_BAND_RUNGS))


def _workloads(cls):
    # the runner's own rule (kernels/cli/benchmark.py run_benchmark_class)
    return [n.removeprefix("benchmark_") for n in dir(cls) if n.startswith("benchmark_") and callable(getattr(cls, n))]


def test_discovery_finds_every_class_and_workload(discovered):
    module, classes = discovered
    assert {c.__name__ for c in classes} == EXPECTED_CLASSES
    found = {f"{c.__name__}.{w}" for c in classes for w in _workloads(c)}
    assert found == set(module.bench_table())
    assert len(found) == _workload_count(module) >= 52  # 52 with bf16/f16/f32/int8 and five rungs
    for c in classes:
        for w in _workloads(c):
            assert callable(getattr(c, f"verify_{w}", None)), f"{c.__name__}.{w} has no verify"
            assert callable(getattr(c, f"setup_{w}", None)), f"{c.__name__}.{w} has no setup"


def test_full_size_table_is_what_a_gpu_runs(discovered):
    """The shipped file runs full size everywhere (ROW_DIVISOR 1) and declares the post's shapes."""
    module, _ = discovered
    assert module.ROW_DIVISOR == 1
    assert module.scaled((32768, 8192)) == (32768, 8192)
    t = module.bench_table()
    assert t["ReluBenchmark.base"] == {"dtype": "f32", "shape": (1024, 1024), "rung": None}
    assert t["ReluBenchmark.large"] == {"dtype": "f32", "shape": (4096, 4096), "rung": None}
    dtype_w = {(v["dtype"], v["shape"], v["rung"]) for k, v in t.items() if k.startswith("ReluDtypeBenchmark.")}
    assert dtype_w == {(d, s, None) for d in module.DTYPES for s in POST_SHAPES}
    assert {"bf16", "f16", "f32", "i8"} <= set(module.DTYPES)
    ladder_w = {(v["dtype"], v["shape"], v["rung"]) for k, v in t.items() if k.startswith("ReluLadderBenchmark.")}
    assert ladder_w == {("bf16", s, r) for r in RUNGS for s in POST_SHAPES}
    band = [(v["rung"], v["shape"]) for k, v in t.items() if k.startswith("ReluCacheBandBenchmark.")]
    assert {r for r, _ in band} == {"v4", "v5"}
    mb = sorted({round(2 * s[0] * s[1] * ELEMENT_BYTES["bfloat16"] / 1e6) for _, s in band})
    assert mb == [134, 201, 268, 403, 537, 805, 1074]
    assert all(v["dtype"] == "bf16" for k, v in t.items() if k.startswith("ReluCacheBandBenchmark."))


class StandInKernel:
    """torch's relu behind the kernel's API; dispatch_stats() counts each call under the
    path `path(rung, dtype)` names (a FlyDSL key, or a fallback to test the refusal)."""

    def __init__(self, path):
        self.path, self.stats = path, {}

    def relu(self, x, out=None, rung=None):
        out = torch.empty_like(x) if out is None else out
        torch.clamp_min(x, 0, out=out)
        key = self.path(rung, str(x.dtype).removeprefix("torch."))
        self.stats[key] = self.stats.get(key, 0) + 1
        return out

    def dispatch_stats(self):
        return dict(self.stats)


def _instance(cls, kernel):
    inst = cls()
    inst.kernel, inst.device = kernel, "cpu"
    torch.manual_seed(inst.seed)
    random.seed(inst.seed)
    return inst


def test_every_workload_verifies_against_a_fair_reference(discovered, monkeypatch):
    """As kernels' runner calls them: setup, benchmark, verify (twice: warm-up, timed).
    The out= workloads' reference is written into a buffer allocated in setup, neither x
    nor the kernel's out, the same buffer at every call; the upstream mirror allocates."""
    module, classes = discovered
    monkeypatch.setattr(module, "ROW_DIVISOR", TEST_ROW_DIVISOR)
    table = module.bench_table()
    kernel = StandInKernel(lambda rung, dtype: f"flydsl/{rung or 'v5'}/{dtype}")
    ran = 0
    for cls in classes:
        for w in _workloads(cls):
            inst = _instance(cls, kernel)
            getattr(inst, f"setup_{w}")()
            full = table[f"{cls.__name__}.{w}"]["shape"]
            assert tuple(inst.x.shape) == (max(1, full[0] // TEST_ROW_DIVISOR), full[1])
            assert not torch.isnan(inst.x).any()  # kernels verifies with allclose
            getattr(inst, f"benchmark_{w}")()
            refs = [getattr(inst, f"verify_{w}")() for _ in range(2)]
            for ref in refs:
                assert torch.allclose(inst.out, ref, atol=1e-2), f"{cls.__name__}.{w} fails verification"
                assert torch.equal(ref, torch.relu(inst.x)), f"{cls.__name__}.{w}"
            ptrs = {r.data_ptr() for r in refs}
            if cls.__name__ == "ReluBenchmark":  # upstream's: relu(x) against F.relu(x), both allocating
                assert inst.out.data_ptr() not in ptrs and inst.x.data_ptr() not in ptrs
            else:  # relu(x, out=y) against clamp_min(x, 0, out=ref): both preallocated in setup
                assert inst.out.data_ptr() == inst.y.data_ptr()
                assert ptrs == {inst.ref.data_ptr()}, f"{cls.__name__}.{w}: verify allocates its reference"
                assert len({inst.x.data_ptr(), inst.y.data_ptr(), inst.ref.data_ptr()}) == 3
            ran += 1
    assert ran == _workload_count(module)
    # setup's untimed check call + the benchmark call, per workload
    assert sum(kernel.dispatch_stats().values()) == 2 * ran


RUNG_CLASSES = ("ReluLadderBenchmark", "ReluCacheBandBenchmark")


@pytest.mark.parametrize("path, expect, classes", [
    (lambda rung, dtype: "fallback/arch gfx942 (kernels are built for gfx950)",
     "relu() ran fallback/arch gfx942 (kernels are built for gfx950) (1 call), not the FlyDSL kernel",
     EXPECTED_CLASSES),
    (lambda rung, dtype: "fallback/disabled by RELU_FLYDSL_DISABLE", "fallback/disabled by RELU_FLYDSL_DISABLE",
     EXPECTED_CLASSES),
    (lambda rung, dtype: f"flydsl/{'v2' if rung == 'v1' else 'v1'}/{dtype}", "not the FlyDSL kernel v",
     RUNG_CLASSES),  # another rung ran: only workloads that name a rung can tell
    (lambda rung, dtype: f"flydsl/{rung or 'v5'}/{'float32' if dtype == 'float16' else 'float16'}",
     "not the FlyDSL kernel", EXPECTED_CLASSES),  # another dtype's kernel
], ids=["arch", "kill-switch", "other-rung", "other-dtype"])
def test_every_workload_refuses_to_time_a_fallback(discovered, monkeypatch, path, expect, classes):
    """setup_ raises RuntimeError naming the path that ran (kernels prints it and exits 1)."""
    module, all_classes = discovered
    monkeypatch.setattr(module, "ROW_DIVISOR", TEST_ROW_DIVISOR)
    refused = 0
    for cls in all_classes:
        if cls.__name__ not in classes:
            continue
        for w in _workloads(cls):
            inst = _instance(cls, StandInKernel(path))
            with pytest.raises(RuntimeError, match="stops here") as e:
                getattr(inst, f"setup_{w}")()
            assert str(e.value).startswith(f"{cls.__name__}.{w}: relu() ran ") and expect in str(e.value)
            refused += 1
    total = _workload_count(module)
    assert refused == (total if classes is EXPECTED_CLASSES else total - 2 - len(module.DTYPES) * len(POST_SHAPES))


def test_a_default_rung_workload_accepts_any_rung_but_no_fallback(discovered, monkeypatch):
    module, _ = discovered
    monkeypatch.setattr(module, "ROW_DIVISOR", TEST_ROW_DIVISOR)
    ok = StandInKernel(lambda rung, dtype: f"flydsl/v4/{dtype}")  # RELU_FLYDSL_RUNG=v4
    module.require_flydsl_path(ok, lambda: ok.relu(torch.ones(3)), None, "float32", "W")
    mixed = StandInKernel(lambda rung, dtype: f"flydsl/v5/{dtype}")
    calls = itertools.count()

    def one_fallback():
        mixed.relu(torch.ones(3))
        if next(calls) == 0:
            mixed.stats["fallback/empty tensor"] = 1

    with pytest.raises(RuntimeError, match=r"fallback/empty tensor \(1 call\), flydsl/v5/float32 \(1 call\)"):
        module.require_flydsl_path(mixed, one_fallback, None, "float32", "W")


def test_workload_check_reads_its_own_calls_not_cumulative_stats(discovered):
    """Earlier workloads filled dispatch_stats() with kernel-path counts; a workload whose
    own call then ran another rung, another dtype, or took no recorded path at all must
    still be refused: only the difference made by its own call counts."""
    module, _ = discovered
    earlier = {"flydsl/v5/float32": 40, "flydsl/v5/bfloat16": 40}

    class Kernel(StandInKernel):
        def __init__(self, path):
            super().__init__(path)
            self.stats = dict(earlier)

    other_rung = Kernel(lambda rung, dtype: f"flydsl/v4/{dtype}")
    with pytest.raises(RuntimeError, match=r"ran flydsl/v4/float32 \(1 call\), not the FlyDSL kernel v5/float32"):
        module.require_flydsl_path(other_rung, lambda: other_rung.relu(torch.ones(3), rung="v4"), "v5", "float32", "W")
    unrecorded = Kernel(lambda rung, dtype: "flydsl/v5/float32")
    with pytest.raises(RuntimeError, match="no recorded path"):
        module.require_flydsl_path(unrecorded, lambda: torch.relu(torch.ones(3)), None, "float32", "W")
    other_dtype = Kernel(lambda rung, dtype: f"flydsl/v5/{dtype}")
    with pytest.raises(RuntimeError, match=r"flydsl/v5/float16 \(1 call\)"):
        module.require_flydsl_path(other_dtype, lambda: other_dtype.relu(torch.ones(3, dtype=torch.float16)), None,
                                   "float32", "W")


def test_committed_stub_is_the_built_file():
    """relu-build/benchmarks/benchmark.py is committed (so `kernels benchmark ./relu-build` on a
    fresh clone names the command that builds relu-build/) and must be byte for byte what
    tools/build_variant.py writes there, or a build would leave the tree modified."""
    stub = ROOT / "relu-build" / "benchmarks" / "benchmark.py"
    assert stub.read_bytes() == (ROOT / "benchmarks" / "benchmark.py").read_bytes(), (
        "relu-build/benchmarks/benchmark.py differs from benchmarks/benchmark.py: run "
        "`python3 tools/build_variant.py` and commit relu-build/benchmarks/benchmark.py")


# ---- the ladder harness: pure logic on fake timings -----------------------------------
def test_schedule_is_round_robin_with_rotation():
    impls = ["v1", "v2", "torch"]
    order = timing.schedule(impls, 15)
    assert len(order) == 45
    for r in range(15):
        this_round = [i for rr, i in order if rr == r]
        assert sorted(this_round) == sorted(impls)
    firsts = [order[3 * r][1] for r in range(15)]
    assert set(firsts) == set(impls)  # nobody always goes first


def test_collect_samples_feeds_each_impl_its_own_timings():
    impls = ["v4", "v5", "torch"]
    seq = {"v4": iter(range(100)), "v5": iter(range(100, 200)), "torch": iter(range(200, 300))}
    ticks = []
    s = timing.collect_samples(impls, lambda i: next(seq[i]), rounds=15, progress=ticks.append)
    assert s["v4"] == list(range(15)) and s["v5"] == list(range(100, 115)) and s["torch"] == list(range(200, 215))
    assert len(ticks) == 45


def test_summarize_uses_the_median_and_the_papers_formulas():
    case = cases_mod.Case((8192, 8192), "bfloat16", ("shapes",))
    traffic = 2 * 8192 * 8192 * 2
    assert case.traffic == traffic
    t5, tt = traffic / 7000e9, traffic / 6800e9
    # one cold sample 10x slow: the mean would move, the median must not
    samples = {"v5": [t5] * 14 + [10 * t5], "torch": [tt] * 13 + [3 * tt, 5 * tt]}
    assert statistics.mean(samples["v5"]) > 1.5 * t5
    rows = {r["impl"]: r for r in report.summarize(case, samples)}
    assert rows["v5"]["gbps"] == pytest.approx(7000)
    assert rows["torch"]["gbps"] == pytest.approx(6800)
    assert rows["v5"]["pct_peak"] == pytest.approx(87.5)
    assert rows["v5"]["vs_torch"] == pytest.approx(7000 / 6800)
    assert rows["v5"]["median_us"] == pytest.approx(t5 * 1e6)
    assert rows["torch"]["vs_torch"] == pytest.approx(1.0)
    assert rows["v5"]["traffic_mb"] == pytest.approx(268.435)
    assert len(rows["v5"]["samples_us"]) == 15


def test_summarize_reports_no_numbers_for_a_failed_rung():
    case = cases_mod.Case((4096, 8192), "bfloat16", ("band",))
    rows = {r["impl"]: r for r in report.summarize(case, {"v4": [1e-4] * 3, "torch": [1e-4] * 3},
                                                   failed={"v2": "numel 7: guard region overwritten"})}
    assert rows["v2"]["gbps"] is None and rows["v2"]["status"].startswith("FAILED")
    assert rows["v4"]["gbps"] is not None
    table = report.ladder_table(list(rows.values()), ["v2", "v4", "torch"])
    assert "FAILED" in table and "1.00x" in table


def test_no_torch_means_no_ratio():
    case = cases_mod.Case((4096, 8192), "bfloat16", ("band",))
    (row,) = report.summarize(case, {"v4": [1e-4]}, failed=None)
    assert row["vs_torch"] is None and row["gbps"] > 0


def test_cases_are_the_posts_shapes_and_cache_band():
    cs = cases_mod.cases(sweeps=("shapes", "band"))
    assert len(cs) == 8  # 4 post shapes + 7 band sizes, 3 in common
    assert [round(c.traffic / 1e6) for c in cs if "band" in c.sweeps] == [134, 201, 268, 403, 537, 805, 1074]
    assert sorted(c.shape for c in cs if "shapes" in c.sweeps) == sorted(POST_SHAPES)
    assert [c.traffic for c in cs] == sorted(c.traffic for c in cs)


def test_reports_written(tmp_path):
    case_rows = []
    for shape in [(4096, 8192), (8192, 8192)]:
        case = cases_mod.Case(shape, "bfloat16", ("band",))
        case_rows += report.summarize(case, {"v5": [2e-5, 3e-5, 4e-5], "torch": [4e-5, 5e-5, 6e-5]})
    report.write_csv(case_rows, tmp_path / "l.csv")
    lines = (tmp_path / "l.csv").read_text().splitlines()
    assert lines[0] == ",".join(report.CSV_COLUMNS)
    assert lines[0].startswith("shape,dtype,sweeps,numel,traffic_mb,impl,status,method,median_us,host_us")
    assert len(lines) == 5
    json.dumps(case_rows)  # JSON-serialisable as written by gpu_main
    pytest.importorskip("matplotlib", reason="matplotlib not installed: the PNG plot cannot be drawn")
    report.plot(case_rows, tmp_path / "l.png", ["v5", "torch"])
    assert (tmp_path / "l.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- correctness checks of the harness (run before timing on a GPU) --------------------
DTYPES = [d for d in SERVED if TABLE[d].floating]  # the checks below are about NaN and -0.0
SMALL = (1, 7, 8, 1000, 4257)


@pytest.mark.parametrize("dtype", SERVED)
def test_check_accepts_the_bit_rule(dtype):
    assert checks.check_impl(lambda x, out: out.copy_(checks.bit_rule(x)), dtype, "cpu", SMALL) == []


@pytest.mark.parametrize("dtype", DTYPES)
def test_check_input_holds_the_special_values(dtype):
    x = checks.check_input(64, dtype, "cpu")
    assert torch.isnan(x).sum() >= 3 and torch.isinf(x).sum() >= 2
    assert ((x == 0) & torch.signbit(x)).any()  # -0.0


def _write_past_end(x, out):
    out.copy_(checks.bit_rule(x))
    out.as_strided((out.numel() + 1,), (1,))[-1] = 1.0


def _nan_to_canonical(x, out):
    out.copy_(checks.bit_rule(x))
    out[torch.isnan(out)] = float("nan")


def _skip_tail(x, out):
    out.copy_(checks.bit_rule(x))
    if out.numel() % 8:
        out[-(out.numel() % 8):] = checks.SENTINEL


def _clobber_input(x, out):
    out.copy_(checks.bit_rule(x))
    x.zero_()


@pytest.mark.parametrize("bad, expect", [
    (lambda x, out: torch.maximum(x, torch.zeros_like(x), out=out), "differ"),  # -0.0 -> +0.0
    (_write_past_end, "guard"),
    (_nan_to_canonical, "differ"),
    (_skip_tail, "differ"),
    (_clobber_input, "input modified"),
    (lambda x, out: (_ for _ in ()).throw(RuntimeError("launch failed")), "raised"),
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_rejects_broken_kernels(bad, expect, dtype):
    fails = checks.check_impl(bad, dtype, "cpu", SMALL)
    assert fails and any(expect in f for f in fails), fails


def test_flydsl_path_ran():
    assert checks.kernel_path_ran({}, {"flydsl/v5/bfloat16": 7}, "v5", "bfloat16") is None
    assert "no call" in checks.kernel_path_ran({"flydsl/v5/bfloat16": 7}, {"flydsl/v5/bfloat16": 7}, "v5", "bfloat16")
    why = checks.kernel_path_ran({}, {"flydsl/v5/bfloat16": 6, "fallback/not a ROCm device": 1}, "v5", "bfloat16")
    assert "other paths" in why
    assert "other paths" in checks.kernel_path_ran({}, {"flydsl/v4/bfloat16": 1}, "v5", "bfloat16")


def test_no_gpu_mode_says_bandwidth_was_not_measured(tmp_path, monkeypatch, capsys):
    fake = nogpu.Section("fake ISA", True, "rung table here", {"x": 1})
    monkeypatch.setattr(nogpu, "section_isa", lambda: fake)
    monkeypatch.setattr(nogpu, "subprocess_section",
                        lambda name, title, timeout, tmp: nogpu.Section(title, False, "", reason=f"{name} missing"))
    monkeypatch.setattr(nogpu, "section_host", lambda tmp: nogpu.Section("host", False, "", reason="host missing"))
    args = argparse.Namespace(out=str(tmp_path))
    assert nogpu.nogpu_main(args, "no device") == 0
    text = capsys.readouterr().out
    assert "DEVICE BANDWIDTH WAS NOT MEASURED" in text
    assert "rung table here" in text and "UNAVAILABLE: vgpu missing" in text and "UNAVAILABLE: host missing" in text
    doc = json.loads((tmp_path / "nogpu.json").read_text())
    assert doc["device_bandwidth_measured"] is False
    assert [s["available"] for s in doc["sections"]] == [True, False, False]
    assert "GB/s" not in json.dumps(doc["sections"])


def test_no_gpu_steps_show_progress_with_elapsed_time(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(nogpu, "section_isa", lambda: nogpu.Section("isa", True, "t", {}))
    monkeypatch.setattr(nogpu, "subprocess_section", lambda name, title, timeout, tmp: nogpu.Section(title, True, "v", {}))
    monkeypatch.setattr(nogpu, "section_host", lambda tmp: nogpu.Section("host", True, "h", {}))
    assert nogpu.nogpu_main(argparse.Namespace(out=str(tmp_path)), "no device") == 0
    err = capfd.readouterr().err.splitlines()
    steps = [l for l in err if re.match(r"^\[ *\d+\.\d s\] \[\d/3\] ", l)]
    assert len(steps) == 6, err  # a start and an end line per step
    assert all(l.endswith(" s)") for l in steps[1::2])


def test_gpu_mode_is_refused_without_a_gfx950():
    ok, why = gpu.gfx950_device()
    if ok:
        pytest.skip("a gfx950 is present: the refusal cannot be exercised here")
    with pytest.raises(SystemExit):
        cli.main(["--mode", "gpu"])


def test_child_section_comes_back_as_json(tmp_path):
    """A no-GPU section's process hands back its Section as a JSON file; its stderr lines
    are progress, its stdout noise is ignored, a failure keeps the last lines as the reason."""
    path = tmp_path / "s.json"
    code = ("import json, sys; print('noise on stdout'); print('step 1', file=sys.stderr); "
            f"open({str(path)!r}, 'w').write(json.dumps(dict(title='t', available=True, text='x', data={{'k': 1}})))")
    s = nogpu.run_child([sys.executable, "-c", code], path, "t", 60)
    assert s.available and s.data == {"k": 1} and s.text == "x"
    bad = nogpu.run_child([sys.executable, "-c", "import sys; print('why it broke', file=sys.stderr); sys.exit(3)"],
                          tmp_path / "none.json", "t", 60)
    assert not bad.available and "exited 3" in bad.reason and "why it broke" in bad.reason
    slow = nogpu.run_child([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "none.json", "t", 1)
    assert not slow.available and "timed out after 1 s" in slow.reason


def _vgpu_missing():
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "no C compiler to build the stand-in libamdhip64"
    if not Path("/usr/lib/llvm-22/bin/llvm-objdump").exists():
        return "llvm-objdump from LLVM 22 is not installed (apt-get install llvm-22)"
    return None


@pytest.mark.vgpu
def test_no_gpu_vgpu_section_counts_instructions(tmp_path):
    """The no-GPU report's virtual-device section, in its own process as the harness runs it:
    every rung bit-exact with guards intact, and v1 spends far more instructions per byte."""
    why = _vgpu_missing()
    if why:
        pytest.skip(f"virtual gfx950 unavailable: {why}")
    s = nogpu.subprocess_section("vgpu", "virtual gfx950", 600, tmp_path)
    assert s.available, s.reason
    d = s.data
    assert all("failed" not in d[f"{r}/{t}"] for r in RUNGS for t in SERVED)
    for t in SERVED:
        per_kib = {r: d[f"{r}/{t}"]["wave_instructions_per_kib"] for r in RUNGS}
        assert per_kib["v1"] > 2.5 * per_kib["v2"]
        assert per_kib["v4"] <= per_kib["v2"]
        for r in RUNGS:
            e = d[f"{r}/{t}"]
            assert e["wave_instructions"] == e["instructions_per_wave"] * e["waves"]
            assert e["bytes_moved"] == 2 * e["numel"] * ELEMENT_BYTES[t]


# ---- every command hint the benchmarks print works from the repository root ----------------
HINT = re.compile(r"\.venv/bin/python (-m [\w.]+|[\w/.-]+\.py)")


def _hints():
    found = set()
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        found |= {m.group(0) for m in HINT.finditer(path.read_text())}
    return sorted(found)


def test_hints_use_the_projects_interpreter():
    """`python ...` fails on a stock system without `python`; a path without benchmarks/
    fails from the repository root."""
    bare = re.compile(r"(?<![/\w.-])python3? (-m |benchmarks/|tools/|[\w-]+\.py)")
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not bare.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
    assert len(_hints()) >= 5


@pytest.mark.parametrize("hint", _hints())
def test_every_printed_hint_runs_with_help(hint):
    """Each command form the benchmarks print or document, run as pasted in a fresh shell
    in the repository root, with --help."""
    import subprocess

    exe, rest = hint.split(" ", 1)
    if not (ROOT / exe).exists():
        pytest.skip(f"{exe} does not exist in this checkout (tools/setup.sh makes it)")
    p = subprocess.run([str(ROOT / exe), *rest.split(), "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"{hint} --help: exit {p.returncode}\n{p.stderr[-2000:]}"
    assert "usage:" in p.stdout
