#!/usr/bin/env bash
# The main job, set-up included: build relu-build/ and run the ladder benchmark.
# Runs in the project's .venv (tools/setup.sh makes it; PYTHON=... picks its base interpreter).
# On a gfx950 machine it measures device bandwidth (results/ladder.{json,csv,png});
# elsewhere it runs the no-GPU mode and says that bandwidth was not measured.
set -euo pipefail
cd "$(dirname "$0")"
bash tools/setup.sh
.venv/bin/python tools/build_variant.py
exec .venv/bin/python -m benchmarks.ladder "$@"
