"""The health check and the hardware check from a shell (`--help`: each one's exit statuses).

    python -m relu_flydsl [--json] [--require-gfx950]
        status() readably (--json: as JSON), and the files against their digest. Launches
        nothing, loads no module, runs no canary. Says OK only where the kernels serve a gfx950.
        Exits 1 for a problem (the "PROBLEM" lines): a shipped file failing its sha256, a gfx950
        without the kernel path, a kernel's failed canary there; where no gfx950 is served it says
        what it found and exits 0 (calls take torch's kernel by design), or 5 with --require-gfx950.
    python -m relu_flydsl check [--no-bandwidth] [-o REPORT] [--kernels K,...]
        the hardware check (relu_flydsl.check(), _check.py, which defines the exit statuses both
        use); the JSON report goes to REPORT (default ./relu_flydsl_check.json).
    python FOLDER [check ...]
        the same from the folder `kernels` downloads (build/torch-rocm/): this file loads the
        folder as the package, as kernels does, then runs these.
"""

import argparse
import json
import os
import shlex
import sys


def _load_folder():
    """The folder holding this file, imported as the package it is, under the name kernels
    gives it (metadata.json's id; relu_flydsl without one)."""
    import importlib.util

    folder = os.path.dirname(os.path.abspath(__file__))  # not resolved: a Hub cache links files into blobs/
    # `python FOLDER` put FOLDER first on sys.path: its modules are the package's, not top-level ones
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != folder]
    name = "relu_flydsl"
    try:
        with open(os.path.join(folder, "metadata.json"), encoding="utf-8") as f:
            name = json.load(f).get("id") or name
    except (OSError, ValueError):
        pass
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    return importlib.import_module(f"{name}.__main__")


_PYTHON = shlex.quote((getattr(sys, "orig_argv", None) or ["python"])[0])  # as typed (Debian has no `python`)
if not __package__ and __name__ == "__main__":  # `python FOLDER ...`: a script, not yet inside its package
    sys.exit(_load_folder().main(prog=f"{_PYTHON} {shlex.quote(sys.argv[0])}"))
if __package__:  # (without one, e.g. read by runpy under another name: _load_folder alone)
    from . import _check, _status


def served(st: dict) -> list:
    """The devices whose calls the kernels serve: a gfx950 with the kernel path active."""
    return [d for d in st["devices"] if d["arch"] == _status.SUPPORTED_ARCH and d["kernel_path"]]


def problems(st: dict) -> list:
    """_status.problems(st), after the files': one failing its sha256, or no manifest to check."""
    said, co = _status.problems(st), st["code_objects"]
    if co["broken"] or st["package"]["digest"].startswith("FAILED"):
        said.insert(0, "a shipped file fails its sha256 (above): the download is broken or was changed")
    elif not co["verified"]:
        said.insert(0, f"the code objects cannot be checked: {co['reason']}")
    return said


def render(st: dict, prog: str) -> str:
    """status() as text, a few lines per part, then the verdict."""
    out = [f"relu_flydsl {st['version']}: torch {st['torch']}, Python {st['python']}"]
    hip = st["hip_runtime"] or f"none ({st['hip_reason']})"
    out.append(f"HIP runtime:    {hip}")
    co = st["code_objects"]
    said = "each matching its sha256" if co["verified"] else "NOT verified:" + ("" if co["broken"] else f" {co['reason']}")
    out.append(f"code objects:   {co['count']} kernels, {said}")
    out += [f"                {k}: {why}" for k, why in co["broken"].items()]
    out.append(f"files:          {st['package']['digest']}")
    e = st["entry"]
    serves = served(st)
    alloc = f"relu(x) allocates with {e['allocation']}"
    if e["in_use"] and e["serving_devices"]:
        out.append(f"compiled entry: serving {e['serving_devices']} device(s) (low host time per call); {alloc}")
    elif e["in_use"]:
        out.append(f"compiled entry: loaded, serving no device here (a gfx950 is served from its first relu() "
                   f"call there); {alloc}")
    else:
        state = "switched off" if e["loaded"] else f"not loaded ({e['reason']})"
        out.append(f"compiled entry: {state}; {e['cost']['said']}; {alloc}")
    if not st["devices"]:
        why = st.get("devices_error") or "this torch sees no ROCm device"
        out.append(f"devices:        none ({why}): every call takes torch's kernel")
    for d in st["devices"]:
        state = "kernel path active" if d["kernel_path"] else f"kernel path OFF: {d['reason']}"
        out.append(f"device {d['index']}:       {d['arch']}, {state}")
        out.append(f"                compiled entry there: {d['entry'] or 'serving'}")
        for kernel, verdict in d["canary"].items():
            out.append(f"                canary {kernel}: {verdict}")
    out.append("settings:")
    for s in st["settings"]:
        note = f"; {s['note']}" if s["note"] else ""
        value = "(unset)" if s["value"] is None else repr(s["value"])
        out.append(f"  {s['name']}={value}: in force {s['in_force']!r}, read {s['read']}{note}")
    said, ok = problems(st), bool(serves)  # OK only where a gfx950 is served
    if said:
        out += [f"PROBLEM: {p}" for p in said]
    elif ok:
        out.append("OK: the kernels serve " + ", ".join(f"device {d['index']} ({d['arch']})" for d in serves)
                   + f"; to check them there: {prog} check")
    else:
        found = _check.nothing_to_test({d["index"]: d["arch"] for d in st["devices"]}, st.get("devices_error"))
        out.append(f"NO GFX950 SERVED: {found or 'a gfx950, not served'}; every call takes torch's kernel")
    return "\n".join(out)


def health(st: dict, require_gfx950: bool = False) -> int:
    """The health check's exit status: 1 a problem, 5 no gfx950 served where one is required, else 0."""
    return _check.FAILED if problems(st) else _check.NOT_TESTED if require_gfx950 and not served(st) else _check.PASSED


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is not "nothing tested" (argparse's own 2)
        self.exit(_check.USAGE, f"{self.format_usage()}{self.prog}: error: {message}\n")


def main(argv=None, prog=None) -> int:
    prog, k = prog or f"{_PYTHON} -m {__package__}", _check  # `python FOLDER` passes its own
    parser = _Parser(prog=prog, description="the health check (status()); `check`: the hardware check",
                     epilog=f"exit status: {k.PASSED} OK, or no gfx950 served (without --require-gfx950); {k.FAILED} a "
                     f"PROBLEM, such as a shipped file failing its sha256; {k.USAGE} a usage error; {k.NOT_TESTED} no "
                     "gfx950 served, with --require-gfx950")
    parser.add_argument("--json", action="store_true", help="print status() as JSON, with the digest check")
    parser.add_argument("--require-gfx950", action="store_true",
                        help=f"exit {k.NOT_TESTED} unless the kernels serve a gfx950 here")
    c = parser.add_subparsers(dest="command").add_parser(
        "check", help="the hardware check: every shipped kernel on each gfx950, then bandwidth",
        description=k.__doc__.split("\n\n")[0], epilog=f"exit status: {k.PASSED} every case passed; {k.FAILED} a "
        f"failure, named (a case, or a shipped file failing its sha256); {k.USAGE} a usage error; {k.NOT_TESTED} "
        "nothing was tested (and why: no HIP runtime, no gfx950, ...)")
    c.add_argument("--no-bandwidth", action="store_true", help="skip the bandwidth sweep")
    c.add_argument("-o", "--report", default=_check.REPORT,
                   help=f"where to write the JSON report (default: {_check.REPORT} in the current directory)")
    c.add_argument("--kernels", default=None,
                   help="only these kernels, comma-separated: v5, v5/bfloat16, v5/bfloat16/x8 (default: all)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)
    if args.command == "check":
        selection = None if args.kernels is None else [k.strip() for k in args.kernels.split(",") if k.strip()]
        try:
            result = _check.check(not args.no_bandwidth, kernels=selection, report=args.report,
                                  progress=not args.no_progress)
        except ValueError as e:
            c.error(str(e))
        print(result.text)
        return result.exit_code
    st = dict(_status.status(), package=_check._package_info()[0])
    print(json.dumps(st, indent=2) if args.json else render(st, prog))
    return health(st, args.require_gfx950)


if __name__ == "__main__":
    sys.exit(main())
