"""The health check (status()) for a person or a script: `.venv/bin/python -m relu_flydsl [--json]`.

Prints status() readably (--json: the dict as JSON). Exits 1 when a gfx950 is present and
the kernel path is not active on it, or a kernel's canary failed there (the lines starting
"PROBLEM" say which), else 0: a machine without a gfx950 is not a failure, its calls take
torch's kernel by design. Launches nothing, loads no module, runs no canary.
"""

import argparse
import json
import sys

from . import _status


def _unset(value) -> str:
    return "(unset)" if value is None else repr(value)


def render(st: dict) -> str:
    """status() as text, a few lines per part."""
    out = [f"relu_flydsl {st['version']}: torch {st['torch']}, Python {st['python']}"]
    hip = st["hip_runtime"] or f"none ({st['hip_reason']})"
    out.append(f"HIP runtime:    {hip}")
    co = st["code_objects"]
    if co["verified"]:
        out.append(f"code objects:   {co['count']} kernels, each matching its sha256")
    else:
        out.append(f"code objects:   {co['count']} kernels, NOT verified: {co['reason']}")
        out += [f"                {k}: {why}" for k, why in co["broken"].items()]
    e = st["entry"]
    if e["loaded"]:
        serving = "serving" if e["serving"] else "loaded but switched off"
        out.append(f"compiled entry: {serving} (low host time per call); relu(x) allocates with {e['allocation']}")
    else:
        out.append(f"compiled entry: not loaded ({e['reason']}); every call takes the Python path (same "
                   f"results, more host time); relu(x) allocates with {e['allocation']}")
    if not st["devices"]:
        why = st.get("devices_error") or "this torch sees no ROCm device"
        out.append(f"devices:        none ({why}): every call takes torch's kernel")
    for d in st["devices"]:
        state = "kernel path active" if d["kernel_path"] else f"kernel path OFF: {d['reason']}"
        out.append(f"device {d['index']}:       {d['arch']}, {state}")
        if d["entry"]:
            out.append(f"                compiled entry there: {d['entry']}")
        for kernel, verdict in d["canary"].items():
            out.append(f"                canary {kernel}: {verdict}")
    out.append("settings:")
    for s in st["settings"]:
        note = f"; {s['note']}" if s["note"] else ""
        out.append(f"  {s['name']}={_unset(s['value'])}: in force {s['in_force']!r}, read {s['read']}{note}")
    problems = _status.problems(st)
    out += [f"PROBLEM: {p}" for p in problems] or ["OK"]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print status() as JSON")
    args = parser.parse_args(argv)
    st = _status.status()
    print(json.dumps(st, indent=2) if args.json else render(st))
    return 1 if _status.problems(st) else 0


if __name__ == "__main__":
    sys.exit(main())
