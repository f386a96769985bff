"""Check the built variant on every torch release from the package index, and keep the record.

    .venv/bin/python tools/torch_releases.py                       # 2.9 and 2.10 ... the newest
    .venv/bin/python tools/torch_releases.py --releases 2.12.1,2.15.0
    .venv/bin/python tools/torch_releases.py --prepare             # make the environments only
    .venv/bin/python tools/torch_releases.py --env PATH/bin/python  # an existing interpreter

Build the variant first (.venv/bin/python tools/build_variant.py). The releases are the newest
patch of each torch minor from 2.10 on, as `pip index versions torch` lists them (final public
releases, no local builds), and the newest 2.9, where the compiled entry does not load (no
DLPack C exchange API).

Environments: one virtual environment of this interpreter per release, kept in --envs
(default ~/.cache/relu-flydsl/torch-envs, or $XDG_CACHE_HOME/relu-flydsl/torch-envs) as
torch-<version>/ and reused while it holds that torch; --reinstall makes them anew. Made with
`pip install torch===V numpy` (PyPI's Linux wheels are CUDA builds with their nvidia-* wheels,
about 6 GB each, 2-3 minutes to install), then `hardlink` joins identical files of 1 MiB or
more across the environments (same nvidia-* libraries). pip runs with PIP_CONFIG_FILE=/dev/null:
a machine-wide pip configuration may cap torch below the newest release.

In each, with the built variant loaded by path as relu_flydsl (as kernels imports a variant;
kernels itself is not installed there) and nothing in the package replaced:

  - probe: status() of the compiled entry, and which of the libtorch symbols it binds (and the
    candidates for a cheaper allocation) torch's libraries export (`nm -D --defined-only`);
    relu(x, out=y) and relu(x) run twice on the virtual gfx950 (tools/vgpu: the shipped code
    objects emulated, the first-use canary on) for every served dtype and three sizes, the
    values compared with the bit rule (tests/reference.py), the guard bytes around out and x
    untouched, the input unchanged, no access outside the registered memory, and the second
    call served by the compiled entry where it loaded (it did not ask the device hook, which
    only the general path asks). Where torch has named tensors (2.10-2.12), a named x twice
    too: its output keeps the names, bit-exact, the second call the entry's.
  - host time, --runs separate processes (default 3), each --rounds rounds of --calls calls
    per row, the rows interleaved within a round: relu(x, out=y), torch.clamp_min(x, 0, out=y),
    relu(x), torch.relu(x) on a 1-element bfloat16 tensor. A run records each row's median;
    its ratios are those medians' ratios, and the record gives each ratio's range over the
    runs. What stands in for the GPU machine (there is none here): the HIP runtime is the
    no-op library (tools/noop_hip: launches accepted, nothing run), and the device query is
    benchmarks/host_overhead.py's model of the real one (its Python steps, its two runtime
    calls trivial; a lower bound of the real query), installed at the dispatcher's device
    hook, the one the tests substitute; the compiled entry asks its own query (present_cpu).
    RELU_FLYDSL_CANARY=0 (the no-op library computes nothing, so a canary cannot pass on it).
    The rows run as shipped (the compiled entry where it loads, else the general path, with
    everything a call does there), and where the entry loads also with RELU_FLYDSL_ENTRY=0:
    the general path a user gets by switching the entry off.

The record goes to releases/torch/v<N>.json (N: build.toml's version; the record of a version
already released, releases/v<N>.json, is not overwritten); a table
is printed at the end. A record names the variant it measured, so the variant must be the one this
tree builds (the tool refuses a stale build). _claims.NO_ENTRY_COST ships in the variant and comes
from the record: the tool writes it into torch-ext/relu_flydsl/_claims.py, rebuilds, and names the
variant that ships (the one measured, if it differs only there, as measured_variant). Exit status 1, naming each release and why, when a release failed, was
not bit-exact, or the compiled entry did not load or serve on a torch it supports (2.10 on).
A whole run of 7 releases, the environments already made, takes 10-15 minutes on 2 cores;
run it on a quiet machine: other work there widens the ranges (the record keeps each release's
load average).
"""

import argparse
import ast
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANT = ROOT / "relu-build" / "build" / "torch-rocm"
CLAIMS = ROOT / "torch-ext" / "relu_flydsl" / "_claims.py"
COST_LINE = re.compile(r"^NO_ENTRY_COST = (.*)$", flags=re.M)
BUILD_HINT = ".venv/bin/python tools/build_variant.py"
ENVS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "relu-flydsl" / "torch-envs"
LOWEST = (2, 10)      # the first torch with the DLPack C exchange API the entry needs
NOT_LOADING = (2, 9)  # checked too: the release where the entry must say why it does not load
PIP_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
DTYPE = "bfloat16"
RUNS, ROUNDS, CALLS = 3, 41, 3000  # a record needs RUNS runs at least
PAIRS = ("relu(x, out=y) / torch.clamp_min(x, 0, out=y)", "relu(x) / torch.relu(x)")
ROWS = tuple(name for pair in PAIRS for name in pair.split(" / "))
COST_KEYS = {"out": PAIRS[0], "new": PAIRS[1]}  # _claims.NO_ENTRY_COST's keys
ENTRY_OFF = "RELU_FLYDSL_ENTRY"
# Exported symbols that would let the entry allocate relu(x)'s output through the C shim where
# torch has named tensors (a "does x have names" question callable from C), and the stable-ABI
# conversions of newer torches; looked up besides the entry's own (_compiled_entry's QUERIES,
# SHIM, WRAP).
CANDIDATES = (
    "_ZN2at4impl9has_namesEPKN3c1010TensorImplE",  # at::impl::has_names(const c10::TensorImpl *)
    "_ZN2at9NamesMode10is_enabledEv",              # at::NamesMode::is_enabled()
    "_ZN2at14namedinference15propagate_namesEPN3c1010TensorImplES3_",  # propagate_names(TensorImpl *, TensorImpl *)
    "torch_tensor_from_pyobject",
    "torch_tensor_to_pyobject",
    "torch_is_tensor_pyobject",
)
LIBRARIES = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")


def say(*args):
    print("torch_releases:", *args, flush=True)


# ---------------------------------------------------------------- which releases
def parse_version(text: str):
    """(major, minor, patch) of a final public release ('2.12.1'), else None ('2.13.0+cpu',
    '2.14.0rc1', '2.15.0.dev2026')."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(map(int, m.groups())) if m else None


def supported(release: str) -> bool:
    """Whether the compiled entry must load on this torch release ('2.12.1', '2.13.0+cpu')."""
    t = parse_version(release.split("+")[0])
    return t is not None and t[:2] >= LOWEST


def index_versions(text: str) -> list:
    """The versions of `pip index versions torch`'s 'Available versions:' line."""
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise ValueError(f"no 'Available versions:' line in pip's answer:\n{text}")


def select(versions, lowest=LOWEST, also=(NOT_LOADING,)) -> list:
    """The newest final release of each minor from `lowest` on, and of each minor in `also`,
    oldest first."""
    newest = {}
    for v in versions:
        t = parse_version(v)
        if t is None or not (t[:2] >= lowest or t[:2] in also):
            continue
        if t > newest.get(t[:2], (0, 0, -1)):
            newest[t[:2]] = t
    return [".".join(map(str, newest[k])) for k in sorted(newest)]


def available(python: str) -> list:
    proc = subprocess.run([python, "-m", "pip", "index", "versions", "torch"], capture_output=True, text=True,
                          env={**os.environ, **PIP_ENV}, timeout=300)
    if proc.returncode:
        sys.exit(f"torch_releases: pip index versions torch failed:\n{proc.stdout}{proc.stderr}")
    return index_versions(proc.stdout)


# ---------------------------------------------------------------- what runs in each environment
# Loads tools/noop_hip or the virtual device first (the HIP runtime the variant binds), then the
# built variant by path as relu_flydsl. argv: variant, hip ("noop" or "vgpu").
PRELUDE = r'''
import importlib.util, os, sys, warnings
ROOT = os.environ["TORCH_RELEASES_ROOT"]
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools"), os.path.join(ROOT, "tests")]  # a bare venv: no dev install
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
variant, hip = sys.argv[1], sys.argv[2]
if hip == "noop":
    from tools import noop_hip
    hip_lib = noop_hip.load()
else:
    import vgpu
    dev = vgpu.device()
import torch
spec = importlib.util.spec_from_file_location("relu_flydsl", os.path.join(variant, "__init__.py"),
                                              submodule_search_locations=[variant])
relu_flydsl = importlib.util.module_from_spec(spec)
sys.modules["relu_flydsl"] = relu_flydsl
spec.loader.exec_module(relu_flydsl)
from relu_flydsl import _compiled_entry, _dispatch
'''

PROBE = PRELUDE + r'''
import json, platform, subprocess
import reference
import vgpu_support as S
from vgpu.serve import serve

symbols_wanted = list(_compiled_entry.QUERIES) + list(_compiled_entry.SHIM) + [_compiled_entry.WRAP]
symbols_wanted += json.loads(sys.argv[3])
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
exports = {}
for name in json.loads(sys.argv[4]):
    path = os.path.join(lib, name)
    if not os.path.exists(path):
        continue
    text = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    defined = {f[-1] for f in (line.split() for line in text.splitlines()) if len(f) >= 3}
    for s in symbols_wanted:
        if s in defined:
            exports.setdefault(s, name)
out = {"python": platform.python_version(), "torch": torch.__version__, "file": relu_flydsl.__file__,
       "status": _compiled_entry.status(), "named_tensors": hasattr(torch.Tensor, "has_names"),
       "exports": {s: exports.get(s) for s in symbols_wanted}}

dev.canary_launches = []
restore = serve(dev, relu_flydsl)
# The virtual device's answer at the device hook, counted: only the general path asks it (the
# compiled entry asks its own C callbacks), so a call that did not ask was the entry's.
stand_in, entered = _dispatch.device_info, []
_dispatch.device_info = lambda t: entered.append(1) or stand_in(t)
cases, failures = [], []
for dtype in reference.SERVED:
    for n in (1, 777, 65539):
        name = f"{str(dtype)[6:]} x {n}"
        dev.reset()  # no region of an earlier case's freed tensors left registered
        dev.straddle, dev.stream = "dword", 0
        kept = []  # this case's outputs stay alive (their memory is not reused while registered)
        try:
            xbits = S.make_bits("mixed", n, dtype, seed=n)
            expect = S.relu_bits(xbits, dtype)
            x, xbuf = S.guarded_input(dev, xbits, dtype)
            served, form = [], None
            for form in ("relu(x, out=y)", "relu(x, out=y)", "relu(x)", "relu(x)"):
                before = len(entered)
                if form == "relu(x, out=y)":
                    y, ybuf = dev.guarded((n,), dtype, name="out")
                    kept.append(ybuf)
                    assert relu_flydsl.relu(x, out=y) is y, "relu(x, out=y) did not return out"
                    S.assert_guards(ybuf, y)
                else:
                    dev.fresh_output(n * x.element_size())
                    y = relu_flydsl.relu(x)
                    kept.append(y)
                    assert y.dtype == dtype and y.shape == x.shape, (y.dtype, y.shape)
                S.assert_bits(y, expect)
                served.append(len(entered) == before)
                dev.check()
            S.assert_guards(xbuf, x)
            assert (S.tensor_bits(x) == xbits).all(), "input modified"
            cases.append({"case": name, "bit_exact": True, "entry_served": served})
        except Exception as e:
            cases.append({"case": name, "bit_exact": False, "error": f"call {len(served) + 1}, {form}: "
                          f"{type(e).__name__}: {e}"[:500], "stats": relu_flydsl.dispatch_stats()})
        del kept
out["cases"] = cases

# Where torch has named tensors: a named x through the entry keeps its names (empty_like allocates it).
named = None
if out["status"]["loaded"] and out["named_tensors"]:
    named = {"allocation": _compiled_entry.status()["allocation"], "cases": []}
    for dtype in reference.SERVED:
        for n in (777, 4099):
            dev.reset()
            dev.straddle, dev.stream = "dword", 0
            name, kept = f"{str(dtype)[6:]} x {n}", []
            try:
                xbits = S.make_bits("mixed", n, dtype, seed=n + 1)
                x, xbuf = S.guarded_input(dev, xbits, dtype)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # named tensors are experimental
                    xn = x.refine_names("n")
                served = []
                for _ in range(2):
                    before = len(entered)
                    dev.fresh_output(n * x.element_size())
                    y = relu_flydsl.relu(xn)
                    kept.append(y)
                    assert y.names == ("n",), f"names {y.names}"
                    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous(), (y.dtype, y.shape)
                    S.assert_bits(y.rename(None), S.relu_bits(xbits, dtype))
                    served.append(len(entered) == before)
                    dev.check()
                named["cases"].append({"case": name, "bit_exact": True, "entry_served": served})
            except Exception as e:
                named["cases"].append({"case": name, "bit_exact": False, "error": f"{type(e).__name__}: {e}"[:500]})
            del kept
out["named"] = named
restore()
out["stats"] = relu_flydsl.dispatch_stats()
out["canary_launches"] = len(dev.canary_launches)
out["status_after"] = _compiled_entry.status()
print("PROBE " + json.dumps(out))
'''

# Host time of one run. argv[3:]: dtype, rounds, calls. The package is as loaded; the device hook
# answers with the modelled query (see the docstring) and the entry asks its own.
BENCH = PRELUDE + r'''
import gc, json, statistics
from benchmarks.host_overhead import modelled_device_query, per_call
dtype_name, rounds, calls = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
query = modelled_device_query(torch, _dispatch.DeviceInfo)
_dispatch.device_info = query
_dispatch.device_archs = lambda: {0: "gfx950"}
_compiled_entry.present_cpu(True)  # device 0 and torch's CPU stream query; nothing where it did not load
x = torch.randn(1).to(getattr(torch, dtype_name))
y = torch.empty_like(x)
relu = relu_flydsl.relu
relu(x, out=y)  # module load and plan, the entry's ready entries: untimed
relu(x)
asked = []  # which path serves: only the general path asks the device hook
_dispatch.device_info = lambda t: asked.append(1) or query(t)
for _ in range(10):
    relu(x, out=y)
    relu(x)
_dispatch.device_info = query
general = len(asked)
methods = {
    "relu(x, out=y)": lambda: relu(x, out=y),
    "torch.clamp_min(x, 0, out=y)": lambda: torch.clamp_min(x, 0, out=y),
    "relu(x)": lambda: relu(x),
    "torch.relu(x)": lambda: torch.relu(x),
}
assert tuple(methods) == tuple(json.loads(sys.argv[6])), "the rows are the tool's"
times = {name: [] for name in methods}
relu_flydsl.reset_dispatch_stats()
launches = hip_lib.noop_hip_launch_count()
gc.disable()
try:
    for _ in range(rounds):
        for name, fn in methods.items():
            times[name].append(per_call(fn, calls))
finally:
    gc.enable()
relu_calls = 2 * rounds * calls
key = f"flydsl/{_dispatch.STATE.current().default_rung}/{dtype_name}"
stats, launched = relu_flydsl.dispatch_stats(), hip_lib.noop_hip_launch_count() - launches
if stats != {key: relu_calls} or launched != relu_calls:
    sys.exit(f"not every timed relu call launched {key}: dispatch_stats() {stats}, launches {launched}, "
             f"expected {relu_calls}")
print("BENCH " + json.dumps({
    "torch": torch.__version__, "loaded": _compiled_entry.status()["loaded"], "reason": _compiled_entry.not_loaded(),
    "general_path_calls": general, "of_calls": 20,
    "median_us": {name: round(statistics.median(t) * 1e6, 3) for name, t in times.items()}}))
'''


def child_env(**settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELU_FLYDSL_", "PYTHON", "VIRTUAL_ENV"))}
    env["TORCH_RELEASES_ROOT"] = str(ROOT)
    env.update(settings)
    return env


def run_probe(python, variant=VARIANT, timeout=1800) -> dict:
    proc = subprocess.run([python, "-c", PROBE, str(variant), "vgpu", json.dumps(CANDIDATES), json.dumps(LIBRARIES)],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"probe failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("PROBE "):])


def run_bench(python, variant=VARIANT, entry_off=False, rounds=ROUNDS, calls=CALLS, timeout=1800) -> dict:
    """One run (one process): {"loaded", "reason", "general_path_calls", "median_us": {row: us}}."""
    settings = {"RELU_FLYDSL_CANARY": "0", **({ENTRY_OFF: "0"} if entry_off else {})}
    proc = subprocess.run([python, "-c", BENCH, str(variant), "noop", DTYPE, str(rounds), str(calls), json.dumps(ROWS)],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(**settings), timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("BENCH ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"host time failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("BENCH "):])


# ---------------------------------------------------------------- host time: runs and ratios
def ratio(medians: dict, pair: str) -> float:
    """A pair's ratio in one run: the ratio of the two rows' recorded medians."""
    a, b = pair.split(" / ")
    return round(medians[a] / medians[b], 3)


def summarise(path: str, runs: list) -> dict:
    """The record of one release's host time: each run's medians and ratios, and each ratio's
    range (min, max) over the runs."""
    done = [{"median_us": {row: r["median_us"][row] for row in ROWS}} for r in runs]
    for d in done:
        d["ratios"] = {pair: ratio(d["median_us"], pair) for pair in PAIRS}
    return {"path": path, "ratios": {pair: [min(d["ratios"][pair] for d in done), max(d["ratios"][pair] for d in done)]
                                     for pair in PAIRS}, "runs": done}


def measure(python, variant, loaded, runs=RUNS, rounds=ROUNDS, calls=CALLS) -> dict:
    """{"host": as shipped, "host_entry_off": with RELU_FLYDSL_ENTRY=0 (only where the entry loaded)},
    the runs of both alternating (a drift of the machine's speed hits both)."""
    shipped, off = [], []
    for _ in range(runs):
        shipped.append(run_bench(python, variant, False, rounds, calls))
        if loaded:
            off.append(run_bench(python, variant, True, rounds, calls))
    served = [r["general_path_calls"] == 0 for r in shipped]
    path = "compiled entry" if all(served) else "Python path (no compiled entry)" if not any(served) else \
        f"mixed: the compiled entry served in {sum(served)} of {runs} runs"
    out = {"host": summarise(path, shipped)}
    if loaded:
        if any(r["general_path_calls"] == 0 for r in off):
            raise RuntimeError(f"with {ENTRY_OFF}=0 the compiled entry still served")
        out["host_entry_off"] = summarise(f"Python path ({ENTRY_OFF}=0)", off)
    return out


def no_entry_runs(record: dict) -> list:
    """Every host-time summary of the general path where the entry does not serve: releases
    where it does not load, and each release's RELU_FLYDSL_ENTRY=0 rows."""
    found = []
    for r in record.get("releases", []):
        if "error" in r:
            continue
        if not r.get("loaded") and "host" in r:
            found.append((r["release"], r["host"]))
        if "host_entry_off" in r:
            found.append((f"{r['release']}, {ENTRY_OFF}=0", r["host_entry_off"]))
    return found


def no_entry_cost(record: dict) -> dict:
    """What _claims.NO_ENTRY_COST must be: {"out": (lo, hi), "new": (lo, hi)}, the ranges of every
    no-entry summary together, widened to one decimal."""
    found = no_entry_runs(record)
    if not found:
        raise ValueError("the record has no host time of the general path without the compiled entry")
    cost = {}
    for key, pair in COST_KEYS.items():
        lo = min(h["ratios"][pair][0] for _, h in found)
        hi = max(h["ratios"][pair][1] for _, h in found)
        cost[key] = (math.floor(lo * 10 + 1e-9) / 10, math.ceil(hi * 10 - 1e-9) / 10)
    return cost


# ---------------------------------------------------------------- one release
def env_dir(envs: Path, version: str) -> Path:
    return Path(envs) / f"torch-{version}"


def installed_torch(python) -> str:
    """The torch distribution's version in that interpreter ('2.12.1'), or None."""
    try:
        proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                              capture_output=True, text=True, timeout=120)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def make_env(base_python, where: Path, version: str) -> str:
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([base_python, "-m", "venv", str(where)], check=True, timeout=600)
    python = str(where / "bin" / "python")
    t0 = time.monotonic()
    # numpy: the virtual device and the bit rule; torch alone does not need it. ===: this version exactly,
    # not a local build such as 2.13.0+cpu from a find-links folder, which torch==2.13.0 would prefer
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-compile",
                           f"torch==={version}", "numpy"], capture_output=True, text=True,
                          env={**os.environ, **PIP_ENV}, timeout=3600)
    if proc.returncode:
        shutil.rmtree(where, ignore_errors=True)
        raise RuntimeError(f"pip install torch==={version} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    say(f"  installed torch {version} in {time.monotonic() - t0:.0f} s ({du(where)})")
    return python


def share_files(envs: Path):
    """Identical files (1 MiB or more) of the environments become one (hardlink, util-linux)."""
    if shutil.which("hardlink") is None:
        return say("  no hardlink command: the environments keep their own copies")
    t0 = time.monotonic()
    subprocess.run(["hardlink", "-q", "-c", "-s", "1M", str(envs)], capture_output=True, timeout=3600)
    say(f"  identical files shared across {envs} ({du(envs)} in all, {time.monotonic() - t0:.0f} s)")


def ensure_env(base_python, envs: Path, version: str, reinstall=False) -> str:
    """The environment of torch `version` in `envs`, made if missing (or asked anew)."""
    where = env_dir(envs, version)
    python = where / "bin" / "python"
    have = None if reinstall else installed_torch(python)
    if have is not None and have.split("+")[0] == version:
        say(f"  torch {version}: {where} (kept)")
        return str(python)
    say(f"  pip install torch==={version} numpy into {where} (CUDA wheels with nvidia-*: about 6 GB)")
    where.parent.mkdir(parents=True, exist_ok=True)
    make_env(base_python, where, version)
    share_files(envs)
    return str(python)


def du(path: Path) -> str:
    proc = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True)
    return proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout else "?"


def check_release(python, variant=VARIANT, runs=RUNS, rounds=ROUNDS, calls=CALLS) -> dict:
    """Probe and host time in an environment that has torch (and numpy)."""
    t0 = time.monotonic()
    probe = run_probe(python, variant)
    status = probe["status"]
    cases = probe["cases"]
    result = {
        "torch": probe["torch"], "python": probe["python"], "loaded": status["loaded"],
        "reason": status.get("reason"), "allocation": status.get("allocation"),
        "named_tensors": probe["named_tensors"],
        "bit_exact": bool(cases) and all(c["bit_exact"] for c in cases),
        # each form's second call (relu(x, out=y), relu(x)) through the entry, not the Python path
        "entry_served": status["loaded"] and all(c.get("entry_served", [False] * 4)[1::2] == [True, True]
                                                  for c in cases),
        "cases": len(cases), "failures": [c for c in cases if not c["bit_exact"]],
        "canary_launches": probe["canary_launches"], "stats": probe["stats"],
        "loaded_after": probe["status_after"]["loaded"], "reason_after": probe["status_after"]["reason"],
        "exports": probe["exports"],
    }
    if probe["named"] is not None:  # where torch has named tensors: a named x keeps its names
        named_cases = probe["named"]["cases"]
        result["named_probe"] = {"allocation": probe["named"]["allocation"],
                                 "bit_exact": bool(named_cases) and all(c["bit_exact"] for c in named_cases),
                                 "entry_served": all(c.get("entry_served", [False])[-1] for c in named_cases),
                                 "failures": [c for c in named_cases if not c["bit_exact"]]}
    say(f"  probe: loaded {result['loaded']} ({result['reason'] or result['allocation']}); "
        f"bit-exact {result['bit_exact']} over {len(cases)} cases; entry served {result['entry_served']} "
        f"({time.monotonic() - t0:.0f} s)")
    t0, load = time.monotonic(), os.getloadavg()[0]
    result.update(measure(python, variant, status["loaded"], runs, rounds, calls))
    # the machine's 1-minute load average before and after: other work there widens the ranges
    result["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    if max(result["load_average"]) > (os.cpu_count() or 1):
        say(f"  the machine was busy (load average {result['load_average']} on {os.cpu_count()} cores): "
            "the ranges are wider than on a quiet one")
    for name in ("host", "host_entry_off"):
        if name in result:
            h = result[name]
            say(f"  {h['path']}: " + ", ".join(f"{pair} {lo:.2f}-{hi:.2f}" for pair, (lo, hi) in h["ratios"].items()))
    say(f"  host time: {runs} runs ({time.monotonic() - t0:.0f} s)")
    return result


def problems(results) -> list:
    """What is not as expected, one line per finding, each naming its release: a release that
    failed, was not bit-exact, or where the compiled entry did not load or serve on a torch it
    supports (or loaded on one it cannot)."""
    found = []
    for r in results:
        where = f"torch {r.get('release') or r.get('torch')}"
        if "error" in r:
            found.append(f"{where}: failed: {str(r['error']).strip().splitlines()[0] if r['error'] else '?'}")
            continue
        if not r["bit_exact"]:
            first = (r.get("failures") or [{}])[0]
            found.append(f"{where}: not bit-exact ({first.get('case', '?')}: {first.get('error', '?')})")
        if supported(r.get("release") or r["torch"]):
            if not r["loaded"]:
                found.append(f"{where}: the compiled entry did not load: {r['reason']}")
                continue
            if not r["entry_served"]:
                found.append(f"{where}: the compiled entry loaded but did not serve the repeated calls")
            if not r.get("loaded_after", True):
                found.append(f"{where}: the compiled entry unloaded while probed: {r.get('reason_after') or '?'}")
            named = r.get("named_probe")
            if named is not None and not (named["bit_exact"] and named["entry_served"]):
                found.append(f"{where}: a named tensor: bit-exact {named['bit_exact']}, entry served "
                             f"{named['entry_served']}")
            if "host" in r and r["host"]["path"] != "compiled entry":
                found.append(f"{where}: host time was not the compiled entry's ({r['host']['path']})")
        elif r["loaded"]:
            found.append(f"{where}: the compiled entry loaded on a torch without the DLPack C exchange API")
    return found


# ---------------------------------------------------------------- the record
def package_version(root: Path = ROOT) -> int:
    return tomllib.loads((root / "build.toml").read_text())["general"]["version"]


def record_path(root: Path = ROOT) -> Path:
    return root / "releases" / "torch" / f"v{package_version(root)}.json"


def records(root: Path = ROOT) -> list:
    """The committed torch-release records, oldest version first."""
    found = [(int(m.group(1)), p) for p in (root / "releases" / "torch").glob("v*.json")
             if (m := re.fullmatch(r"v(\d+)\.json", p.name))]
    return [p for _, p in sorted(found)]


def variant_id(variant=VARIANT) -> str:
    return json.loads((variant / "metadata.json").read_text())["id"]


def tree_variant_id(out: Path = None) -> str:
    """The name of the variant this tree builds (tools/build_variant.py, into out or a temporary folder)."""
    import build_variant

    if out is not None:
        return build_variant.build(out)["id"]
    with tempfile.TemporaryDirectory() as tmp:
        return build_variant.build(Path(tmp) / "relu-build")["id"]


def stale_variant(variant=VARIANT, tree_id=None):
    """Why `variant` cannot be recorded as this tree's, or None: a record names what it measured."""
    measured, tree_id = variant_id(variant), tree_id or tree_variant_id()
    if measured == tree_id:
        return None
    return f"the variant in {variant} is {measured}, but this tree builds {tree_id}: rebuild it: {BUILD_HINT}"


def claimed_cost(path: Path = CLAIMS) -> dict:
    return ast.literal_eval(COST_LINE.search(path.read_text())[1])


def write_cost(cost: dict, path: Path = CLAIMS) -> bool:
    """_claims.NO_ENTRY_COST := cost; True where that changed the file."""
    if claimed_cost(path) == cost:
        return False
    line = "NO_ENTRY_COST = " + repr({"out": tuple(cost["out"]), "new": tuple(cost["new"])})
    path.write_text(COST_LINE.sub(lambda _: line, path.read_text(), count=1))
    return True


def name_shipped_variant(record: dict, claims: Path = CLAIMS, rebuild=tree_variant_id) -> dict:
    """The record's cost into _claims.py, then the record names the variant that ships: where the
    claim changed, the rebuilt one, and the one measured (the same files but _claims.py and the
    stamped name) as measured_variant."""
    try:
        cost = no_entry_cost(record)
    except ValueError:
        return record
    if write_cost(cost, claims):
        say(f"wrote {cost} to _claims.NO_ENTRY_COST")
        shipped = rebuild()
        if shipped != record["variant"]:
            record = dict(record, variant=shipped, measured_variant=record["variant"])
    return record


def entry_sha256(variant=VARIANT) -> str:
    """The compiled entry binary checked (the variant's manifest)."""
    return json.loads((variant / "code_objects" / "manifest.json").read_text())["entry"]["sha256"]


def refuse_overwrite(out: Path, old, root: Path = ROOT):
    """Why `out` must not be written, or None: the record of a version already released
    (releases/v<N>.json exists) is that release's history."""
    version = (old or {}).get("version")
    if version is not None and (root / "releases" / f"v{version}.json").exists():
        return (f"{out} is the record of release v{version}, kept as it is; bump build.toml's version first "
                "(or write elsewhere with --out)")
    return None


def merge(old: dict, results: list, sha256=None, variant=None) -> list:
    """The new results, and the old record's for releases not checked this time, by version
    (the old ones only where that record is of the same compiled entry, sha256, and, given, the
    same variant, measured as now)."""
    same = old is not None and old.get("entry_sha256") == sha256 and \
        (variant is None or old.get("variant") == variant) and \
        all("runs" in r.get("host", {"runs": 0}) for r in old.get("releases", []))
    by = {r["release"]: r for r in (old["releases"] if same else [])}
    by.update({r["release"]: r for r in results})
    return [by[k] for k in sorted(by, key=lambda v: parse_version(v) or (0, 0, 0))]


def span(host: dict, pair: str) -> str:
    lo, hi = host["ratios"][pair]
    return f"{lo:.2f}-{hi:.2f}"


def table(record: dict) -> str:
    rows = [("torch", "entry", "bit-exact", "out= / clamp_min", "relu(x) / torch.relu", "entry off: out=",
             "entry off: relu(x)", "why not / allocation")]
    for r in record["releases"]:
        if "error" in r:
            rows.append((r["release"], "?", "?", "", "", "", "", r["error"].splitlines()[0][:60]))
            continue
        h, off = r["host"], r.get("host_entry_off")
        rows.append((r["release"], "loads" if r["loaded"] else "no", "yes" if r["bit_exact"] else "NO",
                     span(h, PAIRS[0]), span(h, PAIRS[1]), span(off, PAIRS[0]) if off else "",
                     span(off, PAIRS[1]) if off else "", r["reason"] or r["allocation"] or ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def make_record(old, results, found, command, merged=True, variant=VARIANT, runs=RUNS, rounds=ROUNDS,
                calls=CALLS) -> dict:
    return {
        "package": "relu-flydsl", "version": package_version(), "variant": variant_id(variant), "entry_sha256": entry_sha256(variant),
        "checked": datetime.date.today().isoformat(),
        "machine": f"{platform.system()} {platform.machine()}, CPython {platform.python_version()}, no GPU",
        "command": command,
        "probe": "the built variant on the virtual gfx950, canary on: relu(x, out=y) and relu(x) twice each, "
                 "float32/float16/bfloat16/int8 x 1, 777, 65539 elements, against the bit rule",
        "host_time": f"{DTYPE}, 1 element, the package as loaded on the no-op HIP library (tools/noop_hip) with "
                     "benchmarks/host_overhead.py's modelled device query at the device hook, RELU_FLYDSL_CANARY=0; "
                     f"{runs} runs (processes) of {rounds} rounds x {calls} calls, rows interleaved; a run's ratio "
                     "is the ratio of its medians, each ratio given as its range over the runs; host_entry_off: "
                     f"{ENTRY_OFF}=0; load_average: the machine's 1-minute load before and after a release's runs "
                     f"({os.cpu_count()} cores)",
        "runs": runs, "rounds": rounds, "calls": calls,
        "index_versions": found if found is not None else (old or {}).get("index_versions"),
        "releases": merge(old, results, entry_sha256(variant), variant_id(variant)) if merged else results,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", help="comma-separated torch versions (default: from the package index)")
    parser.add_argument("--env", help="check this interpreter (with torch and numpy) instead; nothing installed")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the environments are made from")
    parser.add_argument("--envs", default=str(ENVS), help="where the environments are kept (default %(default)s)")
    parser.add_argument("--reinstall", action="store_true", help="make the environments anew")
    parser.add_argument("--prepare", action="store_true", help="make the environments, check nothing")
    parser.add_argument("--out", help=f"the record (default releases/torch/v{package_version()}.json)")
    parser.add_argument("--variant", default=str(VARIANT), help="the built variant (default %(default)s)")
    parser.add_argument("--no-record", action="store_true", help="print the table only")
    parser.add_argument("--runs", type=int, default=RUNS, help="host-time runs per release (default %(default)s; "
                        f"a record needs {RUNS} or more)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per run (default %(default)s)")
    parser.add_argument("--calls", type=int, default=CALLS, help="calls per row and round (default %(default)s)")
    args = parser.parse_args(argv)

    variant = Path(args.variant).resolve()
    envs = Path(args.envs).expanduser().resolve()
    keep = not args.no_record and not args.env and not args.prepare
    if keep and args.runs < RUNS:
        parser.error(f"a record needs --runs {RUNS} or more (or --no-record)")
    out = Path(args.out) if args.out else record_path()
    old = json.loads(out.read_text()) if keep and out.exists() else None
    if keep and not args.out and (why := refuse_overwrite(out, old)):
        sys.exit(f"torch_releases: {why}")
    if not args.prepare and not (variant / "code_objects" / "manifest.json").exists():
        sys.exit(f"torch_releases: no built variant in {variant}; build it: {BUILD_HINT}")
    if keep and (why := stale_variant(variant)):
        sys.exit(f"torch_releases: {why}")
    found = None
    if args.env:
        jobs = [(None, args.env)]
    else:
        if args.releases:
            releases = [v.strip() for v in args.releases.split(",") if v.strip()]
        else:
            found = available(args.python)
            releases = select(found)
            say(f"the index lists torch {', '.join(found[:12])}{' ...' if len(found) > 12 else ''}; checking "
                f"{', '.join(releases)}")
        jobs = [(v, None) for v in releases]

    if args.prepare:
        for version, _ in jobs:
            ensure_env(args.python, envs, version, args.reinstall)
        return 0
    from tools import noop_hip

    noop_hip.build()  # once here, not in each environment
    command = ".venv/bin/python tools/torch_releases.py"  # the whole record's; --releases reruns some of it
    results, record = [], None
    for i, (version, python) in enumerate(jobs, 1):
        say(f"[{i}/{len(jobs)}] torch {version or python}")
        try:
            if python is None:
                python = ensure_env(args.python, envs, version, args.reinstall)
            result = check_release(python, variant, args.runs, args.rounds, args.calls)
            result["release"] = version or result["torch"].split("+")[0]
            if version is not None and result["torch"].split("+")[0] != version:
                raise RuntimeError(f"the environment has torch {result['torch']}, not {version}")
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            say(f"  failed: {e}")
            result = {"release": version, "error": str(e)[-2000:]}
        results.append(result)
        record = make_record(old, results, found, command, merged=not args.env, variant=variant, runs=args.runs,
                             rounds=args.rounds, calls=args.calls)
        if keep:  # after each release: a long run stopped halfway keeps what it checked
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=2) + "\n")
    if keep and not args.out:  # this version's record: the claim it gives, and the variant that ships with it
        rebuild = (lambda: tree_variant_id(variant.parents[1])) if variant == VARIANT.resolve() else tree_variant_id
        record = name_shipped_variant(record, rebuild=rebuild)
        out.write_text(json.dumps(record, indent=2) + "\n")
    print(table(record), flush=True)
    if keep:
        say(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    try:
        say(f"the general path without the compiled entry costs (_claims.NO_ENTRY_COST): {no_entry_cost(record)}")
    except ValueError:
        pass
    bad = problems(results)
    for line in bad:
        say(f"not as expected: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
