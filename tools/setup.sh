#!/usr/bin/env bash
# Installs what this repository needs on a Debian machine (idempotent):
#   Debian: lld-22 (FlyDSL links gfx950 code objects with it), llvm-22
#           (llvm-objdump that knows gfx950), gcc (the virtual device's HIP stand-in)
#   PyPI:   requirements.txt (flydsl 0.5.0, kernels 0.17.2, torch 2.13.0, ...)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in lld-22 llvm-22 gcc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
req=requirements.txt
# On a ROCm machine keep its ROCm build of torch: the pin (a CPU wheel here)
# would replace it with a build that cannot see the GPU.
if $PY -c 'import sys, torch; sys.exit(0 if torch.version.hip else 1)' 2>/dev/null; then
  req=$(mktemp)
  grep -v '^torch==' requirements.txt > "$req"
  echo "setup: keeping this machine's ROCm torch ($($PY -c 'import torch; print(torch.__version__)'))"
fi
if ! PIP_ROOT_USER_ACTION=ignore $PY -m pip install -q --disable-pip-version-check -r "$req"; then
  echo "setup: pip install -r requirements.txt failed" >&2
  exit 1
fi
echo "setup: $($PY -c 'import torch, flydsl, kernels; print(f"torch {torch.__version__}, flydsl {flydsl.__version__}, kernels {kernels.__version__}")'), $(/usr/lib/llvm-22/bin/llvm-objdump --version | grep -m1 version)"
