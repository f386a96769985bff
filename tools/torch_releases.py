"""Check the built variant on every torch release from the package index, and keep the record.

    .venv/bin/python tools/torch_releases.py                       # 2.9 and 2.10 ... the newest
    .venv/bin/python tools/torch_releases.py --releases 2.12.1,2.15.0
    .venv/bin/python tools/torch_releases.py --env PATH/bin/python  # an existing interpreter, kept

Build the variant first (.venv/bin/python tools/build_variant.py). The releases are the newest
patch of each torch minor from 2.10 on, as `pip index versions torch` lists them (final public
releases, no local builds), and the newest 2.9, where the compiled entry does not load (no
DLPack C exchange API). For each, one at a time: a virtual environment of this interpreter,
`pip install torch===V numpy` (PyPI's Linux wheels are CUDA builds with their nvidia-* wheels,
3-5 GB each; no pip cache), then in it, with the built variant loaded by path as relu_flydsl
(as kernels imports a variant; kernels itself is not installed there):

  - probe: status() of the compiled entry, and which of the libtorch symbols it binds (and the
    candidates for a cheaper allocation) torch's libraries export (`nm -D --defined-only`);
    relu(x, out=y) and relu(x) run twice on the virtual gfx950 (tools/vgpu: the shipped code
    objects emulated, the first-use canary on) for every served dtype and three sizes, the
    values compared with the bit rule (tests/reference.py), the guard bytes around out and x
    untouched, the input unchanged, no access outside the registered memory, and the second
    call served by the compiled entry where it loaded;
  - host time: benchmarks/host_overhead.py --dtype bfloat16 on the no-op HIP library
    (tools/noop_hip), relu(x, out=y) against torch.clamp_min(x, 0, out=y) and relu(x) against
    torch.relu(x). Where the entry does not load, the same rows run on the Python path (the
    benchmark is told the entry is absent on purpose). Where torch has named tensors (2.10-2.12),
    the probe also runs a named x twice: its output keeps the names (the entry allocates it with
    torch.empty_like, any other through torch's C shim), bit-exact, the second call the entry's.

The environment is deleted after each release. The record goes to releases/torch/v<N>.json (N:
build.toml's version); a table is printed at the end. pip runs with PIP_CONFIG_FILE=/dev/null:
a machine-wide pip configuration may cap torch below the newest release.
"""

import argparse
import datetime
import json
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
BUILD_HINT = ".venv/bin/python tools/build_variant.py"
LOWEST = (2, 10)      # the first torch with the DLPack C exchange API the entry needs
NOT_LOADING = (2, 9)  # checked too: the release where the entry must say why it does not load
PIP_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
DTYPE = "bfloat16"
PAIRS = ("relu(x, out=y) / torch.clamp_min(x, 0, out=y)", "relu(x) / torch.relu(x)")
SHIM_PAIR = "relu(x) / torch.relu(x), C shim"  # records of version 3 (empty_like on 2.10-2.12) have it
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
    noop_hip.load()
else:
    import vgpu
    dev = vgpu.device()
import torch
spec = importlib.util.spec_from_file_location("relu_flydsl", os.path.join(variant, "__init__.py"),
                                              submodule_search_locations=[variant])
relu_flydsl = importlib.util.module_from_spec(spec)
sys.modules["relu_flydsl"] = relu_flydsl
spec.loader.exec_module(relu_flydsl)
from relu_flydsl import _compiled_entry
'''

PROBE = PRELUDE + r'''
import json, platform, subprocess
import reference
import vgpu_support as S
from vgpu.serve import serve
from relu_flydsl import _relu

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

entered = []
check = _relu._check
_relu._check = lambda *a: entered.append(1) or check(*a)  # the Python path's argument check: not the entry

dev.canary_launches = []
restore = serve(dev, relu_flydsl)
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

# Runs benchmarks/host_overhead.py's main() with argv[4:], after: where the entry did not load,
# not_loaded() answering None (the rows then time the Python path).
BENCH = PRELUDE + r'''
rest = sys.argv[4:]
if _compiled_entry.status()["loaded"] is False:
    _compiled_entry.not_loaded = lambda: None
from benchmarks import host_overhead
sys.exit(host_overhead.main(rest))
'''


def child_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELU_FLYDSL_", "PYTHON", "VIRTUAL_ENV"))}
    env["TORCH_RELEASES_ROOT"] = str(ROOT)
    return env


def run_probe(python, variant=VARIANT, timeout=1800) -> dict:
    proc = subprocess.run([python, "-c", PROBE, str(variant), "vgpu", json.dumps(CANDIDATES), json.dumps(LIBRARIES)],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"probe failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("PROBE "):])


def run_bench(python, variant=VARIANT, mode="as shipped", rounds=None, calls=None, timeout=1800) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "host.json"
        args = ["--dtype", DTYPE, "--json", str(path)]
        args += ["--rounds", str(rounds)] if rounds else []
        args += ["--calls", str(calls)] if calls else []
        proc = subprocess.run([python, "-c", BENCH, str(variant), "noop", mode, *args], capture_output=True,
                              text=True, cwd=ROOT, env=child_env(), timeout=timeout)
        if proc.returncode or not path.exists():
            raise RuntimeError(f"host_overhead failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}")
        doc = json.loads(path.read_text())
    return {"path": doc["path"], "paired": doc["paired"],
            "median_us": {name: round(row["median_us"], 3) for name, row in doc["rows"].items()}}


# ---------------------------------------------------------------- one release
def make_env(base_python, where: Path, version: str) -> str:
    subprocess.run([base_python, "-m", "venv", str(where)], check=True, timeout=600)
    python = str(where / "bin" / "python")
    t0 = time.monotonic()
    # numpy: the virtual device and the bit rule; torch alone does not need it. ===: this version exactly,
    # not a local build such as 2.13.0+cpu from a find-links folder, which torch==2.13.0 would prefer
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-compile",
                           f"torch==={version}", "numpy"], capture_output=True, text=True,
                          env={**os.environ, **PIP_ENV}, timeout=3600)
    if proc.returncode:
        raise RuntimeError(f"pip install torch==={version} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    say(f"  installed torch {version} in {time.monotonic() - t0:.0f} s ({du(where)})")
    return python


def du(path: Path) -> str:
    proc = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True)
    return proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout else "?"


def check_release(python, variant=VARIANT, rounds=None, calls=None) -> dict:
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
        "loaded_after": probe["status_after"]["loaded"], "exports": probe["exports"],
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
    t0 = time.monotonic()
    host = run_bench(python, variant, "as shipped", rounds, calls)
    result["host"] = {"path": "compiled entry" if status["loaded"] else "Python path (no compiled entry)",
                      **{k: round(host["paired"][k], 3) for k in PAIRS}, "median_us": host["median_us"]}
    say(f"  host time: " + ", ".join(f"{k} {v:.2f}" for k, v in result["host"].items() if isinstance(v, float))
        + f" ({time.monotonic() - t0:.0f} s)")
    return result


# ---------------------------------------------------------------- the record
def package_version(root: Path = ROOT) -> int:
    return tomllib.loads((root / "build.toml").read_text())["general"]["version"]


def record_path(root: Path = ROOT) -> Path:
    return root / "releases" / "torch" / f"v{package_version(root)}.json"


def variant_id(variant=VARIANT) -> str:
    return json.loads((variant / "metadata.json").read_text())["id"]


def entry_sha256(variant=VARIANT) -> str:
    """The compiled entry binary checked (the variant's manifest)."""
    return json.loads((variant / "code_objects" / "manifest.json").read_text())["entry"]["sha256"]


def merge(old: dict, results: list) -> list:
    """The new results, and the old record's for releases not checked this time, by version."""
    by = {r["release"]: r for r in (old or {}).get("releases", [])}
    by.update({r["release"]: r for r in results})
    return [by[k] for k in sorted(by, key=lambda v: parse_version(v) or (0, 0, 0))]


def table(record: dict) -> str:
    rows = [("torch", "entry", "bit-exact", "out= / clamp_min", "relu(x) / torch.relu", "with C shim", "why not / allocation")]
    for r in record["releases"]:
        if "error" in r:
            rows.append((r["release"], "?", "?", "", "", "", r["error"].splitlines()[0][:60]))
            continue
        h = r["host"]
        rows.append((r["release"], "loads" if r["loaded"] else "no", "yes" if r["bit_exact"] else "NO",
                     f"{h[PAIRS[0]]:.2f}", f"{h[PAIRS[1]]:.2f}",
                     f"{h[SHIM_PAIR]:.2f}" if SHIM_PAIR in h else "", r["reason"] or r["allocation"] or ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def make_record(old, results, found, command, merged=True, variant=VARIANT) -> dict:
    return {
        "package": "relu-flydsl", "version": package_version(), "variant": variant_id(variant), "entry_sha256": entry_sha256(variant),
        "checked": datetime.date.today().isoformat(),
        "machine": f"{platform.system()} {platform.machine()}, CPython {platform.python_version()}, no GPU",
        "command": command,
        "probe": "the built variant on the virtual gfx950, canary on: relu(x, out=y) and relu(x) twice each, "
                 "float32/float16/bfloat16/int8 x 1, 777, 65539 elements, against the bit rule",
        "host_time": f"benchmarks/host_overhead.py --dtype {DTYPE} on tools/noop_hip: paired ratios, median over "
                     "rounds; a shared machine, so a few percent either way",
        "index_versions": found if found is not None else (old or {}).get("index_versions"),
        "releases": merge(old, results) if merged else results,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", help="comma-separated torch versions (default: from the package index)")
    parser.add_argument("--env", help="check this interpreter (with torch and numpy) instead; nothing installed")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the environments are made from")
    parser.add_argument("--work", help="where the environments are made (default: the temporary folder)")
    parser.add_argument("--out", help=f"the record (default releases/torch/v{package_version()}.json)")
    parser.add_argument("--variant", default=str(VARIANT), help="the built variant (default %(default)s)")
    parser.add_argument("--no-record", action="store_true", help="print the table only")
    parser.add_argument("--rounds", type=int, help="host_overhead.py --rounds")
    parser.add_argument("--calls", type=int, help="host_overhead.py --calls")
    args = parser.parse_args(argv)

    variant = Path(args.variant).resolve()
    if not (variant / "code_objects" / "manifest.json").exists():
        sys.exit(f"torch_releases: no built variant in {variant}; build it: {BUILD_HINT}")
    from tools import noop_hip

    noop_hip.build()  # once here, not in each environment
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

    out = Path(args.out) if args.out else record_path()
    keep = not args.no_record and not args.env
    old = json.loads(out.read_text()) if keep and out.exists() else None
    command = ".venv/bin/python tools/torch_releases.py"  # the whole record's; --releases reruns some of it
    results = []
    for i, (version, python) in enumerate(jobs, 1):
        say(f"[{i}/{len(jobs)}] torch {version or python}")
        where = None
        try:
            if python is None:
                where = Path(tempfile.mkdtemp(prefix=f"torch-{version}-", dir=args.work))
                say(f"  pip install torch==={version} numpy into {where} (CUDA wheels with nvidia-*: 3-5 GB)")
                python = make_env(args.python, where, version)
            result = check_release(python, variant, args.rounds, args.calls)
            result["release"] = version or result["torch"].split("+")[0]
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            say(f"  failed: {e}")
            result = {"release": version, "error": str(e)[-2000:]}
        finally:
            if where is not None:
                shutil.rmtree(where, ignore_errors=True)
                say(f"  deleted {where}")
        results.append(result)
        record = make_record(old, results, found, command, merged=not args.env, variant=variant)
        if keep:  # after each release: a long run stopped halfway keeps what it checked
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=2) + "\n")
    print(table(record), flush=True)
    if keep:
        say(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    bad = [r["release"] for r in results if "error" in r or not r["bit_exact"]
           or (not r["loaded"] and parse_version(r["release"])[:2] >= LOWEST)]
    if bad:
        say(f"not as expected: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
