#!/usr/bin/env bash
# Virtual environments with torch for the CPython versions the compiled entry
# (_relu_flydsl_entry.abi3.so, one limited-API binary for CPython 3.10-3.13) is tested on
# besides the project's own 3.11: venv-py310/ and venv-py313/ in $OTHER_PYTHONS_DIR
# (default ~/.cache/relu-flydsl), made from pyenv's interpreters ($PYENV_ROOT/versions/3.10.N
# and 3.13.N, the newest N there). Outside the checkout: 9 GB that the tests walking the
# checkout's files (tests/release/test_hints.py) would read; the checkouts of one user share
# them (the stamp says what each holds).
# tests/release/test_compiled_entry_pythons.py runs the built variant in them.
# Idempotent: a few seconds when done (a stamp file in each venv). A missing interpreter
# is reported and skipped (the test then skips with the same reason), not an error.
#
# PyPI's Linux torch 2.13.0 wheels for cp310/cp313 are the CUDA builds: `import torch`
# needs their nvidia-* libraries even without a GPU, so the full dependency set is
# installed (about 3 GB of wheels, 4.5 GB per venv; a few minutes on a fresh machine).
# The wheels are downloaded into one folder, $OTHER_PYTHONS_DIR/wheels,
# and installed from there: the second interpreter reuses the first one's
# version-independent wheels (nvidia-*, cuda-toolkit, ...), and a venv made again needs no
# download. (pip's own cache cannot do it where the index sends no cache headers.)
set -euo pipefail
cd "$(dirname "$0")/.."
PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
TORCH=torch==2.13.0  # the project's pin (requirements.txt)
DIR=${OTHER_PYTHONS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/relu-flydsl}
WHEELS=$DIR/wheels
START=$SECONDS
say() { echo "other_pythons: $*"; }

# The newest pyenv CPython X.Y.N (not a free-threaded 3.13t: abi3 does not load there).
find_python() {
  local minor=$1 d best=""
  for d in "$PYENV_ROOT"/versions/"$minor".*; do
    [[ $(basename "$d") =~ ^$minor\.[0-9]+$ ]] && [ -x "$d/bin/python$minor" ] || continue
    best=$(printf '%s\n%s\n' "$best" "$d" | sed '/^$/d' | sort -V | tail -1)
  done
  [ -n "$best" ] && echo "$best/bin/python$minor"
}

setup_one() {
  local minor=$1 venv=$DIR/venv-py${1/./} base stamp stamp_file t0=$SECONDS
  if ! base=$(find_python "$minor"); then
    say "skipped CPython $minor: no $PYENV_ROOT/versions/$minor.N/bin/python$minor (pyenv install $minor)"
    return 0
  fi
  stamp="other-pythons-v1 base=$base $TORCH script=$(sha256sum "$0" | cut -c1-16)"
  stamp_file=$venv/.relu-flydsl-setup
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then
    say "$venv up to date (Python $("$venv/bin/python" -c 'import platform; from importlib.metadata import version; print(platform.python_version(), "torch", version("torch"))'))"
    return 0
  fi
  rm -rf "$venv"  # ours alone; a half-made or outdated one starts over
  mkdir -p "$DIR"
  say "creating $venv from $base ($("$base" --version 2>&1))"
  "$base" -m venv "$venv"
  # The mirror's "Location ... is ignored" notes are left out of pip's output (pipefail
  # keeps pip's status).
  say "pip download $TORCH with its dependencies (CUDA wheels, about 3 GB) for CPython $minor into $WHEELS:" \
      "about 30 s here on a fresh machine, seconds when the folder has them"
  mkdir -p "$WHEELS"
  if ! "$venv/bin/python" -m pip download -q --disable-pip-version-check -d "$WHEELS" "$TORCH" 2>&1 \
      | { grep -v "is ignored: it is neither a file nor a directory" || true; }; then
    echo "other_pythons: pip download $TORCH for CPython $minor failed" >&2
    exit 1
  fi
  say "  downloaded in $((SECONDS - t0)) s; pip install into $venv from $WHEELS (about 40 s)"
  # --no-compile: no .pyc for thousands of files nobody imports
  if ! "$venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check --no-index \
      --find-links "$WHEELS" "$TORCH"; then
    echo "other_pythons: pip install $TORCH into $venv failed" >&2
    exit 1
  fi
  if ! "$venv/bin/python" -W "ignore:Failed to initialize NumPy" -c 'import torch'; then
    echo "other_pythons: import torch fails in $venv" >&2
    exit 1
  fi
  echo "$stamp" > "$stamp_file"
  say "$venv ready in $((SECONDS - t0)) s ($(du -sh "$venv" | cut -f1))"
}

for minor in 3.10 3.13; do
  setup_one "$minor"
done
say "done in $((SECONDS - START)) s"
