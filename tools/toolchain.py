"""Make FlyDSL compile for gfx950 on a machine without ROCm.

FlyDSL links code objects with `$ROCM_PATH/llvm/bin/ld.lld`. On Debian, lld-22
provides /usr/lib/llvm-22/bin/ld.lld; this points a private ROCM_PATH at it.
llvm-objdump from llvm-22 is the only disassembler here that knows gfx950.
"""

import os
import shutil
import tempfile
from pathlib import Path

LLVM_BIN = Path("/usr/lib/llvm-22/bin")
ARCH = "gfx950"


def find_tool(name: str) -> str:
    for cand in (LLVM_BIN / name, shutil.which(f"{name}-22")):
        if cand and Path(cand).exists():
            return str(cand)
    raise FileNotFoundError(f"{name} for LLVM 22 not found: apt-get install llvm-22 lld-22")


def rocm_shim() -> str:
    """A ROCM_PATH whose llvm/bin/ld.lld is Debian's lld-22 (created once)."""
    root = Path(tempfile.gettempdir()) / "relu-flydsl-rocm-shim"
    link = root / "llvm" / "bin" / "ld.lld"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_suffix(f".tmp{os.getpid()}")
        tmp.symlink_to(find_tool("ld.lld"))
        tmp.replace(link)
    return str(root)


def compile_env(compile_only: bool = False) -> dict:
    """Environment variables that make FlyDSL target gfx950 from a CPU machine."""
    root = os.environ.get("ROCM_PATH", "/opt/rocm") if has_rocm_lld() else rocm_shim()
    env = {"ROCM_PATH": root, "FLYDSL_GPU_ARCH": ARCH}
    if compile_only:
        env["COMPILE_ONLY"] = "1"
    return env


def has_rocm_lld() -> bool:
    root = os.environ.get("ROCM_PATH", "/opt/rocm")
    return (Path(root) / "llvm" / "bin" / "ld.lld").exists()


def apply(compile_only: bool = False) -> dict:
    env = compile_env(compile_only)
    os.environ.update(env)
    return env
