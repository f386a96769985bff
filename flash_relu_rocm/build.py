"""Build time: every kernel the planner can choose, compiled for gfx950 into
code objects (`<symbol>.co`) plus `manifest.json`.

The kernels are pure functions of (rung, dtype, vector width): numel is a
runtime argument. So the package ships one code object per triple and nothing
compiles, links or imports FlyDSL where relu() runs.

    manifest.json (format 1)
      {"format": 1, "arch": "gfx950",
       "toolchain": {"flydsl": "0.5.0", "llvm": "<ld.lld version>"},
       "source_sha256": "<flash_relu_rocm/*.py + toolchain>",
       "kernels": {"v5/bfloat16/x8": {"rung", "dtype", "vec", "block", "file",
                   "symbol", "kernarg_size", "args": [{"offset", "size", "kind"}],
                   "sha256"}, ...},
       "entry": {"file", "abi", "toolchain", "source_sha256", "sha256"}}

The compiled entry (torch-ext/relu_flydsl/_compiled_entry.c) is built here too, with the
machine's C compiler against the CPython limited API 3.10: one x86-64 Linux binary for
CPython 3.10-3.13 that relu() replays its decisions through (_compiled_entry.py loads it).

Only this module's build functions import FlyDSL and torch; `stale()` and the
manifest helpers need neither (they run in test.sh before every test run).
Building needs a source checkout: the toolchain set-up and the code-object
reader live in tools/.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from .registry import DTYPES, RUNGS

FORMAT = 1
ARCH = "gfx950"
PINNED_FLYDSL = "0.5.0"  # the FlyDSL every shipped object is built and verified with
MANIFEST = "manifest.json"

SOURCE_DIR = Path(__file__).resolve().parent
ROOT = SOURCE_DIR.parent  # the source checkout (flash_relu_rocm/ and tools/)
OBJECTS_DIR = ROOT / "torch-ext" / "relu_flydsl" / "code_objects"
ENTRY_SOURCE = ROOT / "torch-ext" / "relu_flydsl" / "_compiled_entry.c"
ENTRY_FILE = "_relu_flydsl_entry.abi3.so"
ENTRY_ABI = "cp310-abi3"  # Py_LIMITED_API 0x030A0000 in the source
# No debug info, no build paths, hidden symbols but PyInit_: the same bytes from the same
# compiler and source on any machine.
ENTRY_FLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-ident", "-Wall", "-Wextra", "-Werror",
               "-Wl,-z,noexecstack", "-Wl,--build-id=none", "-s")
# The sanitized entry (tools/sanitized_entry.py; never shipped): the same flags plus
# AddressSanitizer and UndefinedBehaviorSanitizer, any report fatal, with symbols (no -s) so
# the reports name functions and lines.
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")

# What the runtime packs: X pointer, X numel (i32), Y pointer, Y numel (i32).
EXPECTED_ARGS = (("global_buffer", 8), ("by_value", 4), ("global_buffer", 8), ("by_value", 4))

# Environment variables that change what FlyDSL compiles (target, optimisation,
# debug info, instrumentation, an external LLVM) or whether it returns a
# callable at all: cleared for the build, so a developer's shell cannot leak
# into the shipped bytes.
_CLEARED_ENV_PREFIXES = ("FLYDSL_", "HSA_OVERRIDE_GFX_VERSION")
_CLEARED_ENV = ("ARCH", "COMPILE_ONLY")


class BuildError(RuntimeError):
    pass


def kernel_key(rung: str, dtype: str, vec: int) -> str:
    return f"{rung}/{dtype}/x{vec}"


def kernel_specs():
    """Every (rung, dtype, vec) the planner can choose: vec is a power of two
    from 1 to the rung's widest vector for the dtype (plan.pick_vec)."""
    specs = []
    for rung in RUNGS.values():
        for dtype in DTYPES:
            vec = 1
            while vec <= rung.max_vec(dtype):
                specs.append((rung, dtype, vec))
                vec *= 2
    return specs


# ---------------------------------------------------------------- toolchain
def _load_tool(name: str):
    path = ROOT / "tools" / f"{name}.py"
    if not path.exists():
        raise BuildError(f"building code objects needs a source checkout: {path} is missing")
    spec = importlib.util.spec_from_file_location(f"_relu_flydsl_build_{name.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flydsl_version() -> Optional[str]:
    """The installed FlyDSL's version, read from its distribution metadata
    (no import), or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("flydsl")
    except metadata.PackageNotFoundError:
        return None


def linker_version(rocm_path: str) -> str:
    """First line of `ld.lld --version` for the linker FlyDSL uses
    ($ROCM_PATH/llvm/bin/ld.lld), without "(compatible with GNU linkers)"."""
    lld = Path(rocm_path) / "llvm" / "bin" / "ld.lld"
    try:
        out = subprocess.run([str(lld), "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"cannot run {lld} --version ({type(e).__name__}: {e})") from None
    return out.splitlines()[0].split(" (compatible")[0].strip()


def toolchain(env: Optional[dict] = None) -> dict:
    """{"flydsl": version, "llvm": linker version} for this machine's build
    toolchain (tools/toolchain.py picks ROCM_PATH)."""
    env = env or _load_tool("toolchain").compile_env()
    return {"flydsl": flydsl_version() or "not installed", "llvm": linker_version(env["ROCM_PATH"])}


def check_flydsl(version: Optional[str]):
    if version != PINNED_FLYDSL:
        found = "FlyDSL is not installed" if version is None else f"FlyDSL {version} is installed"
        raise BuildError(
            f"the code objects are built with FlyDSL {PINNED_FLYDSL}, but {found}: "
            f"install flydsl=={PINNED_FLYDSL} to build them"
        )


# ---------------------------------------------------------------- source hash
def source_files(source_dir: Path = SOURCE_DIR) -> list:
    return sorted(p for p in Path(source_dir).glob("*.py") if p.is_file())


def source_sha256(tools: dict, source_dir: Path = SOURCE_DIR) -> str:
    """sha256 over flash_relu_rocm/*.py (sorted names, each name and its bytes)
    and the toolchain versions: what the code objects are a function of."""
    h = hashlib.sha256()
    for path in source_files(source_dir):
        data = path.read_bytes()
        h.update(f"{path.name}\0{len(data)}\0".encode())
        h.update(data)
    h.update(json.dumps(tools, sort_keys=True).encode())
    return h.hexdigest()


def read_manifest(objects_dir: Path = OBJECTS_DIR) -> dict:
    return json.loads((Path(objects_dir) / MANIFEST).read_text())


def stale(objects_dir: Path = OBJECTS_DIR, source_dir: Path = SOURCE_DIR, tools: Optional[dict] = None) -> Optional[str]:
    """None when the objects in `objects_dir` are complete and were built from
    these sources with this toolchain; otherwise why they are not."""
    objects_dir = Path(objects_dir)
    try:
        manifest = read_manifest(objects_dir)
    except FileNotFoundError:
        return f"no {MANIFEST} in {objects_dir}"
    except (OSError, ValueError) as e:
        return f"{objects_dir / MANIFEST} is unreadable ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("arch") != ARCH:
        return f"{MANIFEST} is not format {FORMAT} for {ARCH}"
    tools = tools or toolchain()
    if manifest.get("toolchain") != tools:
        return f"toolchain changed: built with {manifest.get('toolchain')}, now {tools}"
    if manifest.get("source_sha256") != source_sha256(tools, source_dir):
        return f"{Path(source_dir).name}/*.py changed since the objects were built"
    kernels = manifest.get("kernels")
    if not isinstance(kernels, dict):
        return f"{MANIFEST} has no kernel table"
    expected = {kernel_key(r.name, d, v) for r, d, v in kernel_specs()}
    if set(kernels) != expected:
        missing, extra = sorted(expected - set(kernels)), sorted(set(kernels) - expected)
        return f"the kernel set differs from the planner's: missing {missing[:5]}, extra {extra[:5]}"
    for key, entry in sorted(kernels.items()):
        path = objects_dir / str(entry.get("file"))
        try:
            data = path.read_bytes()
        except OSError:
            return f"{key}: {path.name} is missing"
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            return f"{key}: {path.name} does not match its sha256 in the manifest"
    return None


# ---------------------------------------------------------------- compiling
class _BuildEnv:
    """os.environ set for a gfx950 build (cache off, COMPILE_ONLY off: the
    compile must hand back the artifact), restored afterwards."""

    def __init__(self, env: dict):
        self.env = env

    def __enter__(self):
        self.saved = dict(os.environ)
        for name in list(os.environ):
            if name.startswith(_CLEARED_ENV_PREFIXES) or name in _CLEARED_ENV:
                del os.environ[name]
        os.environ.update(self.env)
        os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"  # every object compiled here, not read from a cache
        return self

    def __exit__(self, *exc):
        os.environ.clear()
        os.environ.update(self.saved)


def code_object_bytes(compiled) -> bytes:
    """The gfx950 ELF inside a CompiledFunction: the one object of its
    `gpu.binary` op (FlyDSL 0.5.0 keeps the final IR on the artifact)."""
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import gpu
    from flydsl.compiler.jit_function import _create_mlir_context

    found = []
    with _create_mlir_context():
        module = ir.Module.parse(compiled._keepalive._ir_text)
        for op in module.body.operations:
            if op.operation.name == "gpu.binary":
                for attr in ir.ArrayAttr(op.operation.attributes["objects"]):
                    found.append(bytes(gpu.ObjectAttr(attr).object))
    if len(found) != 1:
        raise BuildError(f"expected one gpu.binary object, found {len(found)}")
    return found[0]


def compile_kernel(rung, dtype: str, vec: int) -> bytes:
    """flyc.compile of the rung's launcher on CPU placeholder tensors (a live
    device tensor would be launched once), then its code object."""
    import flydsl.compiler as flyc
    import torch

    def placeholder():
        return torch.empty(vec, dtype=getattr(torch, dtype))

    fn = flyc.compile(rung.build(dtype, vec), placeholder(), placeholder(), 1, 0)
    if fn is None:
        raise BuildError("flyc.compile returned no artifact (COMPILE_ONLY set?)")
    return code_object_bytes(fn)


def describe(data: bytes, rung, dtype: str, vec: int, codeobj, objdump: str) -> dict:
    """The manifest entry of one code object, from its own AMDGPU metadata."""
    co = codeobj.CodeObject(data, objdump, ARCH)
    if len(co.kernels) != 1:
        raise BuildError(f"{kernel_key(rung.name, dtype, vec)}: {len(co.kernels)} kernels in one code object")
    (kernel,) = co.kernels.values()
    args = [{"offset": a[".offset"], "size": a[".size"], "kind": a[".value_kind"]} for a in kernel.args]
    if tuple((a["kind"], a["size"]) for a in args) != EXPECTED_ARGS:
        raise BuildError(f"{kernel.name}: kernel arguments {args} are not (X ptr, X numel, Y ptr, Y numel)")
    block = kernel.meta.get(".reqd_workgroup_size", [kernel.meta.get(".max_flat_workgroup_size")])[0]
    if block != rung.block:
        raise BuildError(f"{kernel.name}: block {block}, the rung says {rung.block}")
    return {
        "rung": rung.name,
        "dtype": dtype,
        "vec": vec,
        "block": rung.block,
        "file": f"{kernel.name}.co",
        "symbol": kernel.name,
        "kernarg_size": kernel.kernarg_size,
        "args": args,
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def build_objects(out_dir: Path = OBJECTS_DIR, specs=None) -> dict:
    """Compile every kernel (or `specs`: (rung, dtype, vec) triples) for gfx950
    into `out_dir`: `<symbol>.co` files and manifest.json. Returns the manifest.
    The folder is replaced only once the whole build succeeded."""
    out_dir = Path(out_dir)
    check_flydsl(flydsl_version())
    toolchain_mod = _load_tool("toolchain")
    codeobj = _load_tool("vgpu/codeobj")
    objdump = toolchain_mod.find_tool("llvm-objdump")
    env = toolchain_mod.compile_env()
    tools = toolchain(env)
    import flydsl

    check_flydsl(flydsl.__version__)  # the one imported, not only the one installed
    kernels = {}
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with _BuildEnv(env):
        for rung, dtype, vec in specs or kernel_specs():
            data = compile_kernel(rung, dtype, vec)
            entry = describe(data, rung, dtype, vec, codeobj, objdump)
            (tmp / entry["file"]).write_bytes(data)
            kernels[kernel_key(rung.name, dtype, vec)] = entry
    manifest = {
        "format": FORMAT,
        "arch": ARCH,
        "toolchain": tools,
        "source_sha256": source_sha256(tools),
        "kernels": dict(sorted(kernels.items())),
        "entry": build_entry(tmp),
    }
    _write_manifest(tmp, manifest)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return manifest


# ---------------------------------------------------------------- the compiled entry
def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildError("building the compiled entry needs a C compiler (apt-get install gcc)")
    return cc


def entry_toolchain() -> dict:
    """The C compiler (first line of --version) and the Python headers the entry is built with:
    their major.minor only. The limited-API entry gets the same bytes from any patch release's
    headers, and the manifest is in the release digest: a patch version there would give a
    release another digest on each machine's interpreter (Debian 12's 3.11.2, a pyenv 3.11.7)."""
    import sysconfig

    cc = _cc()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"cannot run {cc} --version ({type(e).__name__}: {e})") from None
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        raise BuildError(f"no Python.h in {include}: the compiled entry needs the interpreter's headers")
    return {"cc": version.splitlines()[0].strip(), "python_headers": "%d.%d" % sys.version_info[:2]}


def entry_flags(strict: bool = True, sanitize: bool = False) -> tuple:
    """The compiler flags of the entry: ENTRY_FLAGS, less -Werror unless strict, and for the
    sanitized build less -s, plus SANITIZE_FLAGS."""
    flags = ENTRY_FLAGS if strict else tuple(f for f in ENTRY_FLAGS if f != "-Werror")
    return tuple(f for f in flags if f != "-s") + SANITIZE_FLAGS if sanitize else flags


def entry_source_sha256(tools: dict, source: Path = ENTRY_SOURCE, sanitize: bool = False) -> str:
    h = hashlib.sha256(Path(source).read_bytes())
    flags = entry_flags(sanitize=sanitize)
    h.update(json.dumps({"tools": tools, "flags": flags, "abi": ENTRY_ABI}, sort_keys=True).encode())
    return h.hexdigest()


def compile_entry(out: Path, source: Path = ENTRY_SOURCE, strict: bool = True, sanitize: bool = False) -> bytes:
    """`source` compiled into the binary `out`; returns its bytes. strict=False lets warnings
    pass (a mutated copy may leave a helper unused); sanitize=True builds with SANITIZE_FLAGS."""
    import sysconfig

    flags = entry_flags(strict, sanitize)
    cmd = [_cc(), *flags, "-I", sysconfig.get_paths()["include"], "-o", str(out), str(source)]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(source).parent, timeout=300)
    if result.returncode != 0:
        raise BuildError(f"compiling {Path(source).name} failed:\n{result.stderr.strip()}")
    return Path(out).read_bytes()


def build_entry(out_dir: Path, source: Path = ENTRY_SOURCE, strict: bool = True, sanitize: bool = False) -> dict:
    """The compiled entry built into `out_dir`; returns its manifest block."""
    tools = entry_toolchain()
    data = compile_entry(Path(out_dir) / ENTRY_FILE, source, strict, sanitize)
    return {"file": ENTRY_FILE, "abi": ENTRY_ABI, "toolchain": tools,
            "source_sha256": entry_source_sha256(tools, source, sanitize), "sha256": hashlib.sha256(data).hexdigest()}


def entry_stale(objects_dir: Path = OBJECTS_DIR, source: Path = ENTRY_SOURCE) -> Optional[str]:
    """None when the manifest's compiled entry was built from `source` with this compiler."""
    try:
        entry = read_manifest(objects_dir).get("entry")
    except (OSError, ValueError) as e:
        return f"no readable {MANIFEST} ({type(e).__name__})"
    if not isinstance(entry, dict):
        return "no compiled entry in the manifest"
    if entry.get("source_sha256") != entry_source_sha256(entry_toolchain(), source):
        return f"{Path(source).name} or the C compiler changed since the entry was built"
    path = Path(objects_dir) / str(entry.get("file"))
    try:
        data = path.read_bytes()
    except OSError:
        return f"{path.name} is missing"
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return f"{path.name} does not match its sha256 in the manifest"
    return None


def update_entry(objects_dir: Path = OBJECTS_DIR, source: Path = ENTRY_SOURCE, strict: bool = True,
                 sanitize: bool = False) -> dict:
    """Rebuild only the compiled entry of complete code objects (from `source`), rewriting the manifest."""
    manifest = read_manifest(objects_dir)
    manifest["entry"] = build_entry(objects_dir, source, strict, sanitize)
    _write_manifest(objects_dir, manifest)
    return manifest


def _write_manifest(objects_dir: Path, manifest: dict):
    (Path(objects_dir) / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def ensure_objects(out_dir: Path = OBJECTS_DIR) -> Optional[str]:
    """Build the objects (and the compiled entry) unless they are up to date. Returns why
    they were rebuilt, or None when nothing was done."""
    reason = stale(out_dir)
    if reason is not None:
        build_objects(out_dir)
        return reason
    reason = entry_stale(out_dir)
    if reason is not None:
        update_entry(out_dir)
    return reason


def main(argv=None):
    import argparse
    import time

    parser = argparse.ArgumentParser(description="Build the gfx950 code objects of every ladder kernel.")
    parser.add_argument("--out", type=Path, default=OBJECTS_DIR)
    parser.add_argument("--force", action="store_true", help="rebuild even when the objects are up to date")
    parser.add_argument("--kernels", help="only these kernels, comma-separated keys (e.g. v5/bfloat16/x8); implies --force")
    args = parser.parse_args(argv)
    start = time.monotonic()
    specs = None
    if args.kernels:
        by_key = {kernel_key(r.name, d, v): (r, d, v) for r, d, v in kernel_specs()}
        wanted = [k.strip() for k in args.kernels.split(",") if k.strip()]
        unknown = [k for k in wanted if k not in by_key]
        if unknown:
            parser.error(f"unknown kernels {unknown}; e.g. {sorted(by_key)[:3]}")
        specs = [by_key[k] for k in wanted]
    reason = "--force" if args.force or specs else stale(args.out)
    if reason is None:
        why = entry_stale(args.out)
        if why is None:
            print(f"code objects and compiled entry up to date: {args.out}")
            return 0
        update_entry(args.out)
        print(f"built the compiled entry {ENTRY_FILE} in {time.monotonic() - start:.1f} s ({why}): {args.out}")
        return 0
    manifest = build_objects(args.out, specs)
    print(f"built {len(manifest['kernels'])} code objects in {time.monotonic() - start:.1f} s ({reason}): {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
