"""The release number. Single source: build.toml's [general] version. A built
variant carries it in metadata.json beside this file; a source checkout reads
build.toml two folders up."""

import json
import os
import tomllib
from pathlib import Path

# abspath, not resolve(): in a Hub cache the files are symlinks into blobs/,
# and metadata.json must be found beside the snapshot's __init__.py.
_here = Path(os.path.dirname(os.path.abspath(__file__)))


def _read_version() -> int:
    metadata = _here / "metadata.json"
    if metadata.exists():
        return int(json.loads(metadata.read_text())["version"])
    build_toml = _here.parent.parent / "build.toml"
    return int(tomllib.loads(build_toml.read_text())["general"]["version"])


__version__ = str(_read_version())
