"""Which torch the base interpreter has, for tools/setup.sh (run with that interpreter).

Prints `rocm <site-packages folder> <HIP version>` for a ROCm build of torch, else `cpu`
(no torch, or a CPU/CUDA build). Reads torch/version.py without importing torch, which
would take seconds on every set-up run.
"""

import importlib.util
import os
import re


def base_torch() -> str:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return "cpu"
    package = os.path.dirname(spec.origin)
    try:
        with open(os.path.join(package, "version.py")) as f:
            text = f.read()
    except OSError:
        return "cpu"
    # torch writes `hip: Optional[str] = '6.4.43482-...'` (or `= None`) into version.py.
    m = re.search(r"^hip\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return f"rocm {os.path.dirname(package)} {m.group(1)}" if m else "cpu"


if __name__ == "__main__":
    print(base_torch())
