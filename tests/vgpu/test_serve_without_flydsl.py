"""The serve path needs no FlyDSL, no compiler and no linker: every planner
kernel (rung x dtype x vector width) runs from the package's shipped code
objects on the virtual gfx950, in a subprocess where

- `import flydsl` raises ImportError (a meta-path blocker), or
- an incompatible `flydsl` is first on the path (a stub package that raises on
  any attribute, as a FlyDSL of another version would break the old JIT path),

and no `ld.lld` can be found (PATH and ROCM_PATH scrubbed). Each case is
bit-exact on the bit rule with guards intact (vgpu_support.run_case), every
call counts on the kernel path in dispatch_stats(), first-use canaries run,
and `flydsl` never enters sys.modules.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.vgpu
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(r"""
    import json, os, shutil, sys
    mode = sys.argv[1]
    if mode == "blocked":
        class BlockFlydsl:
            def find_spec(self, name, path=None, target=None):
                if name == "flydsl" or name.startswith("flydsl."):
                    raise ImportError(f"{name} is blocked in this process")
                return None
        sys.meta_path.insert(0, BlockFlydsl())
    root = sys.argv[2]
    sys.path.insert(0, os.path.join(root, "tests"))  # vgpu_support: the test support modules are not installed
    from vgpu.device import VirtualGPU
    dev = VirtualGPU(os.environ["VGPU_LIB"], os.environ["VGPU_OBJDUMP"])  # the stand-in, loaded first
    import relu_flydsl
    import vgpu_support as S
    from vgpu.serve import serve
    serve(dev, relu_flydsl)
    dev.stream, dev.canary_launches = 0, []
    problems, cases = [], 0
    for rung, dtype, vec in S.planner_kernels():
        case = S.Case(rung, dtype, vec, "size", "mixed")
        cases += 1
        problems += [f"{case.id}: {p}" for p in S.run_case(dev, relu_flydsl.relu, case)]
    print(json.dumps({
        "cases": cases, "problems": problems[:5], "n_problems": len(problems),
        "stats": relu_flydsl.dispatch_stats(),
        "canaries": len(dev.canary_launches),
        "flydsl_modules": sorted(m for m in sys.modules if m.split(".")[0] == "flydsl"),
        "ld.lld": shutil.which("ld.lld"), "rocm_path": os.environ.get("ROCM_PATH"),
    }))
""")


@pytest.fixture(scope="module")
def child_env(vgpu_device, tmp_path_factory):
    """PATH without any folder holding ld.lld, no ROCM_PATH, no FlyDSL
    variables; the virtual device's library and objdump passed explicitly."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLYDSL_", "ROCM", "HIP"))}
    env.pop("COMPILE_ONLY", None)
    env.pop("PYTHONPATH", None)
    folders = [p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "ld.lld").exists()]
    empty = tmp_path_factory.mktemp("no-tools")
    env["PATH"] = os.pathsep.join(folders + [str(empty)])
    env["VGPU_LIB"], env["VGPU_OBJDUMP"] = vgpu_device.lib_path, vgpu_device.objdump
    return env


def _run(env, mode):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(ROOT)], env=env, capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, f"child failed ({r.returncode}):\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(report):
    import vgpu_support as S

    assert report["ld.lld"] is None and report["rocm_path"] is None, "the child could find a linker"
    assert report["cases"] == len(S.planner_kernels()) == 68
    assert report["n_problems"] == 0, report["problems"]
    stats = report["stats"]
    assert all(k.startswith("flydsl/") for k in stats), stats
    assert sum(stats.values()) == report["cases"], stats
    assert report["canaries"] >= report["cases"], "every kernel's first use runs its canary"
    assert report["flydsl_modules"] == [], report["flydsl_modules"]


def test_serves_with_flydsl_blocked(child_env):
    _check(_run(child_env, "blocked"))


def test_serves_with_an_incompatible_flydsl_first_on_the_path(child_env, tmp_path):
    stub = tmp_path / "flydsl"
    stub.mkdir()
    (stub / "__init__.py").write_text(
        "def __getattr__(name):\n"
        "    raise RuntimeError(f'an incompatible flydsl: no attribute {name!r} here')\n")
    env = dict(child_env, PYTHONPATH=str(tmp_path))
    probe = subprocess.run([sys.executable, "-c", "import flydsl, sys; print(flydsl.__file__)"], env=env,
                           capture_output=True, text=True, cwd=ROOT)
    assert probe.stdout.strip() == str(stub / "__init__.py"), "the stub must shadow any installed flydsl"
    _check(_run(env, "stub"))
