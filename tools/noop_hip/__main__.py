""".venv/bin/python -m tools.noop_hip [--out DIR]: build the no-op libamdhip64.so.7, print its path."""
import argparse
from pathlib import Path

from . import build

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--out", type=Path, default=None)
print(build(parser.parse_args().out))
