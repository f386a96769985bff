"""The compiled entry (_relu_flydsl_entry.abi3.so) is one binary for CPython 3.10-3.13 on
x86-64 Linux: it loads and serves in the built variant on 3.10 and on 3.13 (pyenv's
interpreters, venvs with torch that tools/other_pythons.sh makes in $OTHER_PYTHONS_DIR), its ELF needs no glibc
version newer than manylinux_2_28's and no library but libc, and two builds of one source
give the same bytes."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv"))
SETUP = "bash tools/other_pythons.sh"
# where tools/other_pythons.sh puts venv-py310/ and venv-py313/ (outside the checkout)
VENVS = Path(os.environ.get("OTHER_PYTHONS_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "relu-flydsl")
GLIBC_BASELINE = (2, 28)  # manylinux_2_28, the baseline ROCm's TheRock builds target
ENTRY_MODULE = "_relu_flydsl_entry"


# ---------------------------------------------------------------- other interpreters
def find_python(minor: str):
    """The newest $PYENV_ROOT/versions/<minor>.N/bin/python<minor> (as tools/other_pythons.sh
    picks it; a free-threaded X.Yt is not one), or None."""
    found = []
    for d in (PYENV_ROOT / "versions").glob(f"{minor}.*"):
        m = re.fullmatch(re.escape(minor) + r"\.(\d+)", d.name)
        if m and (d / "bin" / f"python{minor}").exists():
            found.append((int(m.group(1)), d / "bin" / f"python{minor}"))
    return max(found)[1] if found else None


def venv_python(minor: str):
    """(venv python, None) or (None, why it cannot run: the skip reason with the command that
    makes it)."""
    if find_python(minor) is None:
        return None, (f"no CPython {minor} interpreter: {PYENV_ROOT}/versions/{minor}.N/bin/python{minor} not "
                      f"found (pyenv install {minor}, then `{SETUP}`)")
    venv = VENVS / f"venv-py{minor.replace('.', '')}"
    if not (venv / ".relu-flydsl-setup").exists() or not (venv / "bin" / "python").exists():
        return None, (f"no {venv}/ with torch for CPython {minor}: run `{SETUP}` "
                      "(a few minutes on a fresh machine)")
    return venv / "bin" / "python", None


# Runs in the other interpreter: imports the built variant by path as relu_flydsl (kernels is
# not installed there), serves CPU tensors, then the kernel path on the no-op HIP library;
# prints one JSON line for the test to judge.
PROBE = r'''
import ctypes, importlib.util, json, os, platform, struct, sys, warnings
variant, noop_hip = sys.argv[1], sys.argv[2]
out = {"python": platform.python_version()}
os.environ["RELU_FLYDSL_CANARY"] = "0"  # the no-op library computes nothing: no canary can pass
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch without numpy
hip = ctypes.CDLL(noop_hip, mode=ctypes.RTLD_GLOBAL)  # before the variant binds a HIP runtime
hip.noop_hip_launch_count.restype = ctypes.c_uint64
import torch
before = {m.partition(".")[0] for m in sys.modules}
spec = importlib.util.spec_from_file_location("relu_flydsl", os.path.join(variant, "__init__.py"),
                                              submodule_search_locations=[variant])
relu_flydsl = importlib.util.module_from_spec(spec)
sys.modules["relu_flydsl"] = relu_flydsl
spec.loader.exec_module(relu_flydsl)
from relu_flydsl import _compiled_entry, _dispatch, _relu
out["torch"] = torch.__version__
out["file"] = relu_flydsl.__file__
out["status"] = _compiled_entry.status()
out["installed"] = sorted(m for m in ("flydsl", "kernels") if importlib.util.find_spec(m) is not None)

entered = []
check = _relu._check
_relu._check = lambda *a: entered.append(1) or check(*a)

def bits(t):
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in t.tolist()]

# CPU tensors: torch's result through the entry's fallback
x = torch.tensor([-0.0, float("nan"), -1.0, 2.0, 0.0, -float("inf"), 3e38, -1e-45])
relu_flydsl.reset_dispatch_stats()
y = relu_flydsl.relu(x)
o = torch.full_like(x, 7.0)
r = relu_flydsl.relu(x, out=o)
out["cpu"] = {"bits": bits(y), "out_bits": bits(o), "returned_out": r is o, "torch_bits": bits(torch.relu(x)),
              "stats": relu_flydsl.dispatch_stats(), "checks": len(entered)}

# The kernel path: CPU tensors presented as device 0, a gfx950 (benchmarks/host_overhead.py's cpu_setup)
gfx950 = _dispatch.DeviceInfo("gfx950", 0)
_dispatch.device_info = lambda t: gfx950 if t.is_cpu else None
_compiled_entry.present_cpu(True)
relu_flydsl.reset_dispatch_stats()
xb = torch.randn(1000).to(torch.bfloat16)
yb = torch.empty_like(xb)
steps = []
for _ in range(2):
    n0, c0 = hip.noop_hip_launch_count(), len(entered)
    relu_flydsl.relu(xb, out=yb)
    steps.append({"launches": hip.noop_hip_launch_count() - n0, "checks": len(entered) - c0,
                  "stats": relu_flydsl.dispatch_stats()})
out["kernel"] = steps
out["status_after"] = _compiled_entry.status()
out["new_modules"] = sorted({m.partition(".")[0] for m in sys.modules} - before - set(sys.stdlib_module_names))
print("PROBE " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def noop_hip_path():
    from tools import noop_hip

    try:
        return noop_hip.build()
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot build the no-op HIP library (tools/noop_hip): {e}")


@pytest.mark.parametrize("minor", ["3.10", "3.13"])
def test_the_built_variant_loads_and_serves_the_compiled_entry(minor, variant_build, noop_hip_path):
    python, why = venv_python(minor)
    if python is None:
        pytest.skip(why)
    variant = variant_build / "build" / "torch-rocm"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELU_FLYDSL_", "PYTHON"))}
    proc = subprocess.run([str(python), "-c", PROBE, str(variant), str(noop_hip_path)], capture_output=True,
                          text=True, timeout=300, cwd=variant_build.parent, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, f"probe failed on {python}:\n{proc.stdout}\n{proc.stderr}"
    r = json.loads(lines[-1][len("PROBE "):])
    print(f"CPython {r['python']}, torch {r['torch']}: {r['status']}")

    assert r["python"].rsplit(".", 1)[0] == minor, r["python"]
    assert Path(r["file"]).parent == variant, r["file"]  # the built variant, not a checkout's package
    # the variant imports only the standard library, torch and itself (nothing else is there)
    assert r["installed"] == [], f"{r['installed']} installed in {python.parent.parent.name}: not a bare torch venv"
    assert r["new_modules"] == [ENTRY_MODULE, "relu_flydsl"], r["new_modules"]  # itself and its binary
    assert r["status"]["loaded"] is True, f"the compiled entry did not load on CPython {minor}: {r['status']}"

    cpu = r["cpu"]
    assert cpu["bits"] == cpu["torch_bits"] and cpu["out_bits"] == cpu["torch_bits"], cpu
    nan = cpu["torch_bits"][1]
    assert nan & 0x7F800000 == 0x7F800000 and nan & 0x7FFFFF, cpu  # NaN stays NaN
    assert cpu["returned_out"], cpu
    assert cpu["stats"] == {"fallback/not a ROCm device": 2}, cpu
    assert cpu["checks"] == 0, f"the Python path's _check ran {cpu['checks']} time(s): the entry did not serve"

    first, second = r["kernel"]
    assert first["launches"] == 1 and first["stats"] == {"flydsl/v5/bfloat16": 1}, first  # the general path
    assert second == {"launches": 1, "checks": 0, "stats": {"flydsl/v5/bfloat16": 2}}, second  # the entry
    assert r["status_after"]["loaded"] is True, r["status_after"]


# ---------------------------------------------------------------- the ELF
def readelf(*args) -> str:
    tool = shutil.which("readelf")
    if tool is None:
        pytest.skip("readelf (binutils, installed with gcc) not found: apt-get install binutils")
    return subprocess.run([tool, "-W", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def version_needs(text: str) -> dict:
    """{library: [version names]} from `readelf -V`'s .gnu.version_r section."""
    needs, current, inside = {}, None, False
    for line in text.splitlines():
        if not line.startswith(" ") and line.strip():
            inside = line.startswith("Version needs section")
            continue
        if inside and (m := re.search(r"File: (\S+)", line)):
            current = needs.setdefault(m.group(1), [])
        elif inside and (m := re.search(r"Name: (\S+)", line)):
            current.append(m.group(1))
    return needs


def needed(text: str) -> list:
    """The NEEDED libraries from `readelf -d`."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)


def glibc_problems(needs: dict, libraries: list, baseline=GLIBC_BASELINE) -> list:
    """Why the binary would not load on a glibc `baseline` system without other libraries ([] if it would)."""
    problems = [f"needs {lib}" for lib in libraries if lib != "libc.so.6"]
    for lib, names in needs.items():
        for name in names:
            m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", name)
            if lib != "libc.so.6":
                problems.append(f"{name} from {lib}")
            elif m is None:
                problems.append(f"{name} from {lib} (not a released glibc version)")
            elif tuple(map(int, m.group(1).split("."))) > baseline:
                problems.append(f"{name} from {lib} (newer than glibc {'.'.join(map(str, baseline))})")
    return problems


def undefined_unversioned(text: str) -> list:
    """Undefined global symbols with no version (`readelf --dyn-syms`): the interpreter's to provide."""
    names = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[6] == "UND" and f[4] == "GLOBAL" and "@" not in f[7]:
            names.append(f[7])
    return names


def defined(text: str) -> list:
    return [f[7] for f in (line.split() for line in text.splitlines())
            if len(f) >= 8 and f[6] not in ("UND", "Ndx") and f[4] == "GLOBAL"]


SAMPLE_V = """
Version symbols section '.gnu.version' contains 3 entries:
 Addr: 0x0000000000000400  Offset: 0x00000400  Link: 2 (.dynsym)
  000:   0 (*local*)       2 (GLIBC_2.2.5)   3 (GLIBC_2.34)

Version needs section '.gnu.version_r' contains 2 entries:
 Addr: 0x0000000000000420  Offset: 0x00000420  Link: 3 (.dynstr)
  000000: Version: 1  File: libm.so.6  Cnt: 1
  0x0010:   Name: GLIBC_2.29  Flags: none  Version: 4
  0x0020: Version: 1  File: libc.so.6  Cnt: 4
  0x0030:   Name: GLIBC_2.9  Flags: none  Version: 5
  0x0040:   Name: GLIBC_2.3.4  Flags: none  Version: 6
  0x0050:   Name: GLIBC_2.34  Flags: none  Version: 3
  0x0060:   Name: GLIBC_2.2.5  Flags: none  Version: 2
"""


def test_the_version_check_reads_readelf_and_compares_versions_as_numbers():
    needs = version_needs(SAMPLE_V)
    assert needs == {"libm.so.6": ["GLIBC_2.29"], "libc.so.6": ["GLIBC_2.9", "GLIBC_2.3.4", "GLIBC_2.34", "GLIBC_2.2.5"]}
    assert glibc_problems(needs, ["libm.so.6", "libc.so.6"]) == [
        "needs libm.so.6", "GLIBC_2.29 from libm.so.6",
        "GLIBC_2.34 from libc.so.6 (newer than glibc 2.28)"]  # 2.9 and 2.3.4 are older: numbers, not strings
    assert glibc_problems({"libc.so.6": ["GLIBC_2.28", "GLIBC_2.17"]}, ["libc.so.6"]) == []
    assert glibc_problems({"libc.so.6": ["GLIBC_PRIVATE"]}, ["libc.so.6"]) == [
        "GLIBC_PRIVATE from libc.so.6 (not a released glibc version)"]


def test_the_version_check_catches_a_binary_built_against_a_newer_glibc(tmp_path):
    """A real ELF: dlopen from a glibc >= 2.34 libc is dlopen@GLIBC_2.34 (libdl merged into libc)."""
    from flash_relu_rocm import build

    src = tmp_path / "new.c"
    src.write_text("#include <dlfcn.h>\nvoid *open_it(const char *p) { return dlopen(p, RTLD_NOW); }\n")
    try:
        subprocess.run([build._cc(), "-O2", "-fPIC", "-shared", "-o", str(tmp_path / "new.so"), str(src)],
                       check=True, capture_output=True, text=True, timeout=120)
    except build.BuildError as e:
        pytest.skip(str(e))
    needs = version_needs(readelf("-V", str(tmp_path / "new.so")))
    libc = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    if "GLIBC_2.34" not in needs.get("libc.so.6", []):
        pytest.skip(f"this machine's glibc ({libc}) links dlopen below 2.34: no newer-glibc sample to build")
    assert "GLIBC_2.34 from libc.so.6 (newer than glibc 2.28)" in glibc_problems(needs, ["libc.so.6"])


def test_the_shipped_entry_needs_nothing_newer_than_glibc_2_28(variant_build):
    objects = variant_build / "build" / "torch-rocm" / "code_objects"
    entry = json.loads((objects / "manifest.json").read_text())["entry"]
    so = str(objects / entry["file"])
    needs, libraries = version_needs(readelf("-V", so)), needed(readelf("-d", so))
    print(f"{entry['file']}: NEEDED {libraries}, version needs {needs}")
    assert libraries in ([], ["libc.so.6"]), libraries
    assert needs.get("libc.so.6"), needs  # parsed: the entry calls memset and more from libc
    assert glibc_problems(needs, libraries) == []
    syms = readelf("--dyn-syms", so)
    assert f"PyInit_{ENTRY_MODULE}" in defined(syms)
    # every other undefined symbol is the interpreter's (the limited API), none another library's
    others = [s for s in undefined_unversioned(syms) if not s.startswith(("Py", "_Py"))]
    assert others == [], others


# ---------------------------------------------------------------- reproducible
def test_two_builds_of_the_entry_give_identical_bytes(tmp_path):
    """From two folders (other paths, other output names): the bytes depend on the source alone."""
    from flash_relu_rocm import build

    data = []
    for i, folder in enumerate(("a", "another/folder")):
        src = tmp_path / folder / "_compiled_entry.c"
        src.parent.mkdir(parents=True)
        shutil.copyfile(build.ENTRY_SOURCE, src)
        data.append(build.compile_entry(tmp_path / f"out{i}.so", src))
    assert data[0] == data[1]
    assert data[0][:4] == b"\x7fELF" and len(data[0]) > 4096
