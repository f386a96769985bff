"""The shipped gfx950 code objects: manifest, sha256 check, one module per device.

    code_objects/manifest.json      format 1: per "<rung>/<dtype>/x<vec>" the file,
                                    symbol, block, kernel-argument layout, sha256
    code_objects/<symbol>.co        one kernel each, built by flash_relu_rocm/build.py

function(rung, dtype, vec, device) reads the object, checks its sha256 against
the manifest (a mismatch warns once, naming the file, and that kernel takes the
torch fallback for good: it is never loaded), then hipModuleLoadData and
hipModuleGetFunction, once per (kernel, device), with that device current.
"""

import hashlib
import json
import os
from pathlib import Path

from . import _hip
from ._launch import KERNARG, KERNARG_LAYOUT
from ._state import STATE

# abspath, not resolve(): in a Hub cache each file is a symlink into blobs/, and
# code_objects/ sits beside the snapshot's __init__.py, not beside the blob.
OBJECTS_DIR = Path(os.path.dirname(os.path.abspath(__file__))) / "code_objects"
MANIFEST = "manifest.json"
FORMAT = 1
ARCH = "gfx950"
BUILD_HINT = "build them with tools/build_variant.py"


class ObjectError(RuntimeError):
    """A kernel's code object cannot be used; the message is the fallback reason."""


def _read_manifest() -> dict:
    path = OBJECTS_DIR / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ObjectError(f"no code objects ({OBJECTS_DIR.name}/{MANIFEST} missing: {BUILD_HINT})") from None
    except (OSError, ValueError) as e:
        raise ObjectError(f"{OBJECTS_DIR.name}/{MANIFEST} is unreadable ({type(e).__name__}); {BUILD_HINT}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("arch") != ARCH:
        raise ObjectError(f"{OBJECTS_DIR.name}/{MANIFEST} is not format {FORMAT} for {ARCH}; {BUILD_HINT}")
    if not isinstance(manifest.get("kernels"), dict):
        raise ObjectError(f"{OBJECTS_DIR.name}/{MANIFEST} has no kernel table; {BUILD_HINT}")
    return manifest


def read_manifest() -> dict:
    """The manifest as it is on disk now (ObjectError when there is none usable)."""
    return _read_manifest()


def manifest() -> dict:
    """The manifest, read once (ObjectError when there is none usable)."""
    m = STATE.manifest
    if m is None:
        try:
            m = _read_manifest()
        except ObjectError as e:
            m = e
        STATE.manifest = m
    if isinstance(m, ObjectError):
        raise m
    return m


def unavailable():
    """Why no code object can be used (no or a bad manifest), or None."""
    try:
        manifest()
    except ObjectError as e:
        return str(e)
    return None


def key(rung: str, dtype: str, vec: int) -> str:
    return f"{rung}/{dtype}/x{vec}"


def entry(rung: str, dtype: str, vec: int) -> dict:
    """The manifest entry of one kernel, checked against what the runtime packs."""
    k = key(rung, dtype, vec)
    e = manifest()["kernels"].get(k)
    if not isinstance(e, dict):
        raise ObjectError(f"no code object for {k} in {MANIFEST}; {BUILD_HINT}")
    args = tuple((a.get("offset"), a.get("size")) for a in e.get("args", ()))
    if args != KERNARG_LAYOUT or e.get("kernarg_size") != KERNARG.size:
        raise ObjectError(f"{e.get('file')}: kernel arguments {args} are not the {KERNARG.size}-byte "
                          "(X ptr, X numel, Y ptr, Y numel) the runtime packs")
    return e


def read_verified(rung: str, dtype: str, vec: int) -> bytes:
    """The object's bytes, only if they match the manifest's sha256."""
    e = entry(rung, dtype, vec)
    path = OBJECTS_DIR / str(e.get("file"))
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ObjectError(f"code object {path.name} unreadable ({type(err).__name__}); {BUILD_HINT}") from None
    if hashlib.sha256(data).hexdigest() != e.get("sha256"):
        raise ObjectError(f"code object {path.name} does not match its sha256 in {MANIFEST} (not loaded)")
    return data


def function(rung: str, dtype: str, vec: int, device: int):
    """The loaded kernel function (c_void_p) of (rung, dtype, vec) on `device`,
    which must be current. Loads its module the first time; ObjectError (the
    fallback reason, remembered for every device) when its object is unusable."""
    fkey = (rung, dtype, vec, device)
    fn = STATE.functions.get(fkey)
    if fn is not None:
        return fn
    bkey = (rung, dtype, vec)
    with STATE.key_lock(("load",) + fkey):
        fn = STATE.functions.get(fkey)
        if fn is not None:
            return fn
        why = STATE.broken.get(bkey)
        if why is not None:
            raise ObjectError(why)
        try:
            data = read_verified(rung, dtype, vec)
        except ObjectError as e:
            STATE.broken[bkey] = str(e)
            STATE.warn_once(("object", bkey), str(e))
            raise
        symbol = entry(rung, dtype, vec)["symbol"]
        module, err = _hip.load_module(data)
        if err:
            raise ObjectError(f"hipModuleLoadData of {symbol} failed on device {device} with HIP error {err}")
        fn, err = _hip.get_function(module, symbol)
        if err:
            _hip.unload_module(module)
            raise ObjectError(f"hipModuleGetFunction({symbol}) failed on device {device} with HIP error {err}")
        STATE.modules.append(module)
        STATE.functions[fkey] = fn
    return fn

