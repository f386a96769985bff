"""get_kernel on machines that are not a gfx950, through kernels' real loader and arch check.

- ROCm GPU of another arch (a simulated gfx942, in a fresh process): get_kernel refuses
  it (kernels' own arch check against metadata.json's backend.archs); with
  check_arch=False it loads, every call takes torch's kernel with torch.relu's results,
  and dispatch_stats() says `fallback/arch gfx942 (kernels are built for gfx950)`.
  Simulated by torch's device queries only (torch.version.hip set, torch.version.cuda
  None, torch.cuda.is_available / current_device / get_device_properties /
  current_stream, torch._C._cuda_getCurrentRawStream) and plain tensors that report
  device 0 of that torch (torch.Tensor's is_cuda and get_device patched in that process);
  kernels' arch check and relu_flydsl's device_info run unmodified.
- CPU machine and CUDA machine (torch.version.hip and torch.version.cuda set to what
  each build reports, on any build of torch): get_kernel raises FileNotFoundError, the
  only variant being torch-rocm; has_kernel() says False, so a mixed fleet can choose
  torch.relu there. (Checked on a real H200 too, with torch 2.11.0+cu130: the same
  message, "system backend (cuda)".)

The Hub is replaced by kernels' documented local override, LOCAL_KERNELS=repo=path.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
REPO = "org/relu-flydsl"


GFX942 = textwrap.dedent('''
    import json, sys, types
    import torch

    # A ROCm torch on a gfx942: the device queries kernels and relu_flydsl make
    # (kernels reads torch.version.cuda before hip: a CUDA build must hide it).
    torch.version.hip = "7.0.0"
    torch.version.cuda = None
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_properties = lambda index=None: types.SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-")
    torch.cuda.current_stream = lambda index=None: types.SimpleNamespace(cuda_stream=0)
    torch._C._cuda_getCurrentRawStream = lambda index: 0  # a CUDA build has the real one
    # Every tensor says it lives on that torch's device 0 (its memory is host memory);
    # plain tensors, so relu() treats them as any ROCm tensor (a subclass goes to torch).
    torch.Tensor.is_cuda = property(lambda self: True)
    torch.Tensor.get_device = lambda self: 0

    from kernels import get_kernel, has_kernel

    result = {"has_kernel": [has_kernel(sys.argv[1], version=1, trust_remote_code=True, check_arch=c)
                             for c in (True, False)]}
    try:
        get_kernel(sys.argv[1], version=1, trust_remote_code=True)
        result["default"] = "loaded"
    except Exception as e:
        result["default"] = f"{type(e).__name__}: {e}"
    k = get_kernel(sys.argv[1], version=1, trust_remote_code=True, check_arch=False)
    # the compiled entry reads the tensors' real memory description (CPU): presented as device 0
    # there too, where torch's patched queries put them
    sys.modules[k.__name__ + "._compiled_entry"].present_cpu(True)
    same = []
    # float inputs chosen here (-0.0, inf, NaN), 3 calls each; their int views restated (plain torch in this child)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        base = torch.randn(4097, dtype=dtype)
        base[:4] = torch.tensor([-0.0, float("inf"), -float("inf"), float("nan")])
        x = base.clone()
        expect = torch.relu(base)
        y = k.relu(x)
        out = torch.empty_like(x)
        k.relu(x, out=out, rung="v4")
        k.relu(x, out=x)  # in place
        ints = torch.int16 if dtype != torch.float32 else torch.int32
        same.append(all(type(t) is torch.Tensor and torch.equal(t.view(ints), expect.view(ints)) for t in (y, out, x)))
    result["same_bits_as_torch_relu"] = same
    result["stats"] = k.dispatch_stats()
    print(json.dumps(result))
''')


def test_gfx942_is_refused_by_default_and_falls_back_with_check_arch_false(variant_build):
    env = dict(os.environ, LOCAL_KERNELS=f"{REPO}={variant_build}", HF_HUB_OFFLINE="1")
    env.pop("RELU_FLYDSL_DISABLE", None)
    r = subprocess.run([sys.executable, "-c", GFX942, REPO], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["default"].startswith(
        "RuntimeError: Kernel 'relu-flydsl' variant 'torch-rocm' does not support the current device: ROCm arch "
        "gfx942 of the current device is not supported by the architectures of the build: gfx950"), result
    assert "pass `check_arch=False` to skip this check" in result["default"]
    assert result["has_kernel"] == [False, True]  # the mixed-fleet test: check_arch=False loads here
    assert result["same_bits_as_torch_relu"] == [True, True, True]
    assert result["stats"] == {"fallback/arch gfx942 (kernels are built for gfx950)": 9}, result["stats"]
    assert "RuntimeWarning" not in r.stderr  # another arch falls back silently (documented), no warning


@pytest.mark.parametrize("machine", ["cpu", "cuda"])
def test_get_kernel_on_cpu_and_cuda_machines_raises_file_not_found(variant_build, monkeypatch, machine):
    from kernels import get_kernel, has_kernel

    monkeypatch.setenv("LOCAL_KERNELS", f"{REPO}={variant_build}")
    # What kernels reads to pick the backend (cuda, then hip), as each build reports it.
    monkeypatch.setattr(torch.version, "cuda", "12.8" if machine == "cuda" else None)
    monkeypatch.setattr(torch.version, "hip", None)
    assert not has_kernel(REPO, version=1, trust_remote_code=True, check_arch=False)
    for check_arch in (True, False):
        with pytest.raises(FileNotFoundError) as e:
            get_kernel(REPO, version=1, trust_remote_code=True, check_arch=check_arch)
        assert f"torch-rocm: backend (rocm) does not match system backend ({machine}) and is not universal" in str(e.value)
