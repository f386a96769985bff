#!/usr/bin/env bash
# Installs what this repository needs on a Debian machine (idempotent; a few seconds when done):
#   Debian: lld-22 (FlyDSL links gfx950 code objects with it), llvm-22 (llvm-objdump
#           that knows gfx950), gcc (the virtual device's HIP stand-in), and
#           python3-venv when the base Python cannot make a virtual environment
#   .venv/: the project's virtual environment with requirements.txt (torch 2.13.0,
#           flydsl 0.5.0, kernels 0.17.2, ...) and the development install
#           (tools/dev_install.py: each process imports relu_flydsl, flash_relu_rocm,
#           benchmarks and the tools/ modules from the checkout of what it runs; why
#           not an editable install: pyproject.toml). The user's own Python environment
#           is never modified: everything goes into .venv (git-ignored).
# PYTHON=/path/to/python3 picks the base interpreter (default: the one .venv was made from, else
# python3 on PATH).
#
# A ROCm machine keeps its own torch: when the base interpreter has a ROCm build of
# torch, .venv gets a .pth file naming the site-packages folder that holds it
# (read-only: .venv's own packages come first) and requirements.txt is installed
# without its torch pin, which is a CPU wheel. A .pth rather than
# --system-site-packages because ROCm images often keep torch in a venv or conda
# env of their own, which --system-site-packages would not see.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
VPY=$VENV/bin/python
BASE=${PYTHON:-python3}
# PYTHON unset: the interpreter .venv was made from, while it is there, so that one
# `PYTHON=/usr/bin/python3 bash tools/setup.sh` holds for every later run (test.sh, main.sh).
if [ -z "${PYTHON:-}" ] && [ -f "$VENV/.relu-flydsl-setup" ]; then
  kept=$(sed -n 's/^setup-v2 base=\([^ ]*\) .*/\1/p' "$VENV/.relu-flydsl-setup")
  if [ -n "$kept" ] && [ -x "$kept" ]; then BASE=$kept; fi
fi

# Each step prints what it does and, when done, how long it took since the set-up began.
START=$SECONDS
say() { echo "setup: $*"; }
took() { echo "setup:   done: $* ($((SECONDS - START)) s since the start)"; }

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_install() {
  say "apt-get install $* (Debian packages; about a minute on a fresh machine)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
  took "apt-get install"
}

need=()
for pkg in lld-22 llvm-22 gcc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ! command -v "$BASE" >/dev/null 2>&1; then
  [ -n "${PYTHON:-}" ] && [ "$BASE" != /usr/bin/python3 ] && { echo "setup: PYTHON=$BASE not found" >&2; exit 1; }
  need+=(python3 python3-venv)  # stock Debian without python3 (Debian's is /usr/bin/python3)
elif ! "$BASE" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  # Debian splits venv/ensurepip out of python3 into python3.X-venv.
  case "$("$BASE" -c 'import sys; print(sys.prefix)')" in
    /usr) need+=("python3-venv" "python$("$BASE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv") ;;
    *) echo "setup: $BASE cannot create a virtual environment (no ensurepip); use PYTHON=/usr/bin/python3" >&2; exit 1 ;;
  esac
fi
if [ ${#need[@]} -gt 0 ]; then apt_install "${need[@]}"; fi

# "rocm <site-packages> <hip version>" when the base interpreter has a ROCm torch, else "cpu".
mode=$("$BASE" tools/base_torch.py)
req_hash=$(sha256sum requirements.txt | cut -c1-16)
dev_hash=$(cat pyproject.toml tools/dev_install.py | sha256sum | cut -c1-16)
base_real=$("$BASE" -c 'import sys; print(sys.executable)')
stamp="setup-v2 base=$base_real mode=${mode% *} requirements=$req_hash dev=$dev_hash"
stamp_file=$VENV/.relu-flydsl-setup

if [ -x "$VPY" ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  echo "setup: $VENV up to date ($("$VPY" -c 'from importlib.metadata import version as v; print(", ".join(p + " " + v(p) for p in ("torch", "flydsl", "kernels")))'))"
  exit 0
fi

# Another base interpreter or torch mode: start over (the folder is ours alone).
if [ -d "$VENV" ] && { [ ! -f "$stamp_file" ] || [ "$(sed 's/ requirements=.*//' "$stamp_file")" != "${stamp% requirements=*}" ]; }; then
  echo "setup: recreating $VENV (base interpreter or torch changed)"
  rm -rf "$VENV"
fi
if [ ! -x "$VPY" ]; then
  say "creating $VENV from $base_real ($("$BASE" --version 2>&1))"
  "$BASE" -m venv "$VENV"
  took "$VENV created"
fi
# The same requirements with another development install (or none yet): only that step runs.
deps_current=false
if [ -x "$VPY" ] && [ -f "$stamp_file" ] && [ "$(sed 's/ dev=.*//' "$stamp_file")" = "${stamp% dev=*}" ]; then
  deps_current=true
fi
rm -f "$stamp_file"

dev_install() {
  say "development install into $VENV (tools/dev_install.py)"
  if ! "$VPY" tools/dev_install.py; then
    echo "setup: the development install into $VENV failed" >&2
    exit 1
  fi
  took "development install"
}
if [ "$deps_current" = true ]; then
  dev_install
  echo "$stamp" > "$stamp_file"
  echo "setup: $VENV up to date, development install renewed"
  exit 0
fi

req=requirements.txt
if [ "${mode%% *}" = rocm ]; then
  read -r _ site hip <<<"$mode"
  "$VPY" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/_relu_flydsl_rocm_torch.pth", "w").write(sys.argv[1] + "\n")' "$site"
  req=$(mktemp)
  grep -v '^torch==' requirements.txt > "$req"
  echo "setup: keeping the base interpreter's ROCm torch (HIP $hip, from $site)"
fi
# On a terminal pip shows its own progress (downloads, installs); elsewhere (CI, a log) it is
# quiet, so say what is happening and how long it usually takes.
if [ -t 1 ]; then
  pip_output="--progress-bar on"
  say "pip install -r requirements.txt into $VENV (torch, flydsl, kernels, ...: about 3 minutes on a fresh machine)"
else
  pip_output="-q"
  say "pip install -r requirements.txt into $VENV (torch, flydsl, kernels, ...: about 3 minutes on a fresh machine; pip is quiet when the output is not a terminal)"
fi
# shellcheck disable=SC2086 # $pip_output is one or two words on purpose
if ! "$VPY" -m pip install $pip_output --disable-pip-version-check -r "$req"; then
  echo "setup: pip install -r requirements.txt into $VENV failed" >&2
  exit 1
fi
if [ "${mode%% *}" = rocm ] && ! "$VPY" -c 'import sys, torch; sys.exit(0 if torch.version.hip else 1)'; then
  echo "setup: a requirement replaced the ROCm torch in $VENV; the ROCm torch is too old for it" >&2
  exit 1
fi
took "pip install"
dev_install
echo "$stamp" > "$stamp_file"
echo "setup: $VENV ready after $((SECONDS - START)) s: $("$VPY" -c 'import torch, flydsl, kernels; print(f"torch {torch.__version__}, flydsl {flydsl.__version__}, kernels {kernels.__version__}")'), $(/usr/lib/llvm-22/bin/llvm-objdump --version | grep -m1 version)"
