#!/usr/bin/env bash
# The hardware suite (tests/hardware/test_hardware.py) on this machine's gfx950, from this checkout.
#
#   bash tests/hardware/run.sh                    tests this checkout's package (torch-ext/relu_flydsl)
#   bash tests/hardware/run.sh --variant PATH     tests an installed or downloaded release instead:
#       PATH is the folder `hf download org/relu-flydsl --repo-type kernel --revision vN --local-dir PATH`
#       (or kernels' cache snapshot) gives, holding build/torch-rocm/, or a variant folder itself
#       (build/torch-rocm/, e.g. relu-build/build/torch-rocm). It is loaded as `kernels` loads it.
#
#   bash tests/hardware/run.sh --allow-no-gpu     exits 0 where no gfx950 is found (nothing is tested)
#
# Other arguments go to pytest (e.g. -x, -k in_place). Without a gfx950 every test is skipped with
# the reason, and run.sh exits 5: nothing was checked. --allow-no-gpu makes that exit 0 (a machine
# where no gfx950 is expected). The interpreter: .venv/bin/python where tools/setup.sh made it
# (from PYTHON, the base interpreter, as for test.sh), else PYTHON, else python3.
# RELU_FLYDSL_HARDWARE_TARGET=vgpu runs the same tests on the virtual gfx950
# (tests/hardware_vgpu.py, which also runs pytest for this script and holds its gate).
#
# Exit status, as for `python -m relu_flydsl [check]` (pytest's numbers): 0 passed;
# 1 a test failed; 4 a usage error (run.sh's or pytest's); 5 nothing was tested (no test ran or
# none was selected). pytest's 2 (interrupted) and 3 (internal error) pass through.
set -euo pipefail
usage() { echo "run.sh: $1 (see bash tests/hardware/run.sh --help)" >&2; exit 4; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
variant=""
allow=()
args=()
while (($#)); do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    --variant)
      [[ $# -ge 2 ]] || usage "--variant needs a folder"
      variant="$2"; shift 2 ;;
    --variant=*) variant="${1#--variant=}"; shift ;;
    --allow-no-gpu) allow=(--allow-no-gpu); shift ;;
    *) args+=("$1"); shift ;;
  esac
done
python="$root/.venv/bin/python"
[[ -x $python ]] || python="${PYTHON:-python3}"
if [[ -n $variant ]]; then
  [[ -d $variant ]] || usage "--variant $variant: no such folder"
  variant="$(cd "$variant" && pwd)"  # absolute, symlinks kept (kernels' cache links files into blobs/)
  if [[ -f $variant/build/torch-rocm/__init__.py ]]; then
    variant="$variant/build/torch-rocm"
  elif [[ ! -f $variant/__init__.py || ! -f $variant/metadata.json ]]; then
    usage "--variant $variant: neither a release folder (build/torch-rocm/) nor a variant folder (__init__.py and metadata.json)"
  fi
  echo "hardware suite: testing the variant at $variant"
  variant_arg=(--variant "$variant")
else
  echo "hardware suite: testing this checkout's package"  # (RELU_FLYDSL_HARDWARE_VARIANT is dropped)
  variant_arg=()
fi
cd "$root"
exec "$python" tests/hardware_vgpu.py ${variant_arg[@]+"${variant_arg[@]}"} ${allow[@]+"${allow[@]}"} \
  ${args[@]+"${args[@]}"}
