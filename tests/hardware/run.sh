#!/usr/bin/env bash
# The hardware suite (tests/hardware/test_hardware.py) on this machine's gfx950, from this checkout.
#
#   bash tests/hardware/run.sh                    tests this checkout's package (torch-ext/relu_flydsl)
#   bash tests/hardware/run.sh --variant PATH     tests an installed or downloaded release instead:
#       PATH is the folder `hf download org/relu-flydsl --repo-type kernel --revision vN --local-dir PATH`
#       (or kernels' cache snapshot) gives, holding build/torch-rocm/, or a variant folder itself
#       (build/torch-rocm/, e.g. relu-build/build/torch-rocm). It is loaded as `kernels` loads it.
#
# Other arguments go to pytest (e.g. -x, -k in_place). Without a gfx950 every test is skipped with
# the reason. PYTHON=... picks the interpreter (default: .venv/bin/python, else python3).
# RELU_FLYDSL_HARDWARE_TARGET=vgpu runs the same tests on the virtual gfx950 (tests/hardware_vgpu.py).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
variant=""
args=()
while (($#)); do
  case "$1" in
    --variant)
      [[ $# -ge 2 ]] || { echo "run.sh: --variant needs a folder" >&2; exit 2; }
      variant="$2"; shift 2 ;;
    --variant=*) variant="${1#--variant=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
python="${PYTHON:-}"
if [[ -z $python ]]; then
  if [[ -x $root/.venv/bin/python ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
if [[ -n $variant ]]; then
  [[ -d $variant ]] || { echo "run.sh: --variant $variant: no such folder" >&2; exit 2; }
  variant="$(cd "$variant" && pwd)"  # absolute, symlinks kept (kernels' cache links files into blobs/)
  if [[ -f $variant/build/torch-rocm/__init__.py ]]; then
    variant="$variant/build/torch-rocm"
  elif [[ ! -f $variant/__init__.py || ! -f $variant/metadata.json ]]; then
    echo "run.sh: --variant $variant: neither a release folder (build/torch-rocm/) nor a variant folder" \
         "(__init__.py and metadata.json)" >&2
    exit 2
  fi
  export RELU_FLYDSL_HARDWARE_VARIANT="$variant"
  echo "hardware suite: testing the variant at $variant"
else
  unset RELU_FLYDSL_HARDWARE_VARIANT  # the checkout's package
  echo "hardware suite: testing this checkout's package"
fi
cd "$root"
exec "$python" -m pytest -m hardware -ra -p no:cacheprovider tests/hardware/test_hardware.py ${args[@]+"${args[@]}"}
