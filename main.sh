#!/usr/bin/env bash
# The main job, set-up included: build relu-build/ and run the ladder benchmark.
# On a gfx950 machine it measures device bandwidth (results/ladder.{json,csv,png});
# elsewhere it runs the no-GPU mode and says that bandwidth was not measured.
set -euo pipefail
cd "$(dirname "$0")"
bash tools/setup.sh
PY=${PYTHON:-python3}
$PY tools/build_variant.py
exec $PY benchmarks/ladder.py "$@"
