"""The release number. Single source: build.toml's [general] version. A built
variant carries it in metadata.json beside this file; a source checkout reads
build.toml two folders up."""

import json
import tomllib
from pathlib import Path

_here = Path(__file__).resolve().parent


def _read_version() -> int:
    metadata = _here / "metadata.json"
    if metadata.exists():
        return int(json.loads(metadata.read_text())["version"])
    build_toml = _here.parent.parent / "build.toml"
    return int(tomllib.loads(build_toml.read_text())["general"]["version"])


__version__ = str(_read_version())
