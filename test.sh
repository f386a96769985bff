#!/usr/bin/env bash
# The whole test suite, set-up included: bash test.sh [extra pytest args]
# Runs in the project's .venv (tools/setup.sh makes it; PYTHON=... picks its base interpreter).
# Without a gfx950 GPU the hardware tests are reported as skipped, with the reason.
# The order is random (pytest-randomly; the header prints "Using --randomly-seed=N"):
#   bash test.sh -p randomly --randomly-seed=N   replays that order; -p no:randomly: file order.
set -euo pipefail
cd "$(dirname "$0")"
bash tools/setup.sh
# The suites run the shipped gfx950 code objects: rebuild them when flash_relu_rocm/
# or the toolchain changed (a no-op otherwise), so no test sees stale objects.
.venv/bin/python -m flash_relu_rocm.build
exec .venv/bin/python -m pytest -ra -p no:cacheprovider tests/ "$@"
