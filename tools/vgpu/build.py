"""Build the stand-in libamdhip64.so.7 with the machine's C compiler."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "hipstub.c", HERE / "hipstub.map", HERE.parent / "hip_launch_config.h")  # .c, version script, included header
SONAME = "libamdhip64.so.7"
FLAGS = ("-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra", "-Werror")


class BuildUnavailable(Exception):
    """No C compiler: the virtual device cannot be built here."""


def find_cc():
    for name in (os.environ.get("CC"), "gcc", "cc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build_stub(build_dir=None) -> Path:
    """Compile the stub (once per change of source or flags) into build_dir/<hash>/libamdhip64.so.7."""
    cc = find_cc()
    if cc is None:
        raise BuildUnavailable("no C compiler (gcc/cc/clang) on PATH: cannot build the stand-in libamdhip64.so.7")
    key = b"".join(p.read_bytes() for p in SOURCES) + cc.encode() + " ".join(FLAGS).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    out_dir = Path(build_dir or HERE / "build") / digest
    out = out_dir / SONAME
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{SONAME}.{os.getpid()}"
    cmd = [cc, *FLAGS, "-o", str(tmp), str(SOURCES[0]),
           f"-Wl,-soname,{SONAME}", f"-Wl,--version-script={SOURCES[1]}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"building the HIP stand-in failed: {' '.join(cmd)}\n{r.stderr}")
    tmp.replace(out)
    return out
