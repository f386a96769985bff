"""The release number. Single source: build.toml's [general] version.

tools/build_variant.py stamps it into the variant's copy of this file (the
_STAMPED line), so the shipped package reads no file and needs no TOML parser
(tomllib is Python 3.11+; the variant supports 3.10). A source checkout reads
build.toml two folders up.
"""

import os
import re

_STAMPED = None  # the build replaces None with the version


def _from_build_toml() -> int:
    # abspath, not resolve(): torch-ext/relu_flydsl is reached as is.
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, os.pardir, os.pardir, "build.toml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # build.toml is this repository's own file: `version = N` in its [general] table.
    general = re.search(r"^\[general\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    found = general and re.search(r"^version\s*=\s*(\d+)\s*(?:#.*)?$", general.group(1), flags=re.M)
    if not found:
        raise RuntimeError(f"{path}: no [general] version = N")
    return int(found.group(1))


__version__ = str(_STAMPED if _STAMPED is not None else _from_build_toml())
