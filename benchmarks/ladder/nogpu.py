"""The no-GPU report: what a machine without a gfx950 can know. Device bandwidth is NOT
measured here; nothing below is a GB/s figure.

Sections:
  isa    the gfx950 ISA of every rung (tools/isa_report.py over the shipped code objects),
         in this process
  vgpu   emulated instructions per byte moved per rung, on the virtual gfx950 (tools/vgpu/)
  host   host time per relu(x, out=y) call against torch (benchmarks/host_overhead.py)
vgpu and host run in their own processes (one process holds one stand-in libamdhip64) and
hand their result back as a JSON file (a Section); their progress goes to stderr as it
happens. A section whose tool is missing or fails says so and why; nothing is made up.
Everything is written to <out>/nogpu.json.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from flash_relu_rocm.registry import DTYPES, RUNGS

from . import checks
from .cases import traffic_bytes
from .progress import Steps

ROOT = Path(__file__).resolve().parent.parent.parent
LADDER_HINT = ".venv/bin/python -m benchmarks.ladder"


@dataclass
class Section:
    title: str
    available: bool
    text: str                       # what is printed
    data: dict = field(default_factory=dict)
    reason: str = ""                # why it is unavailable


def section_isa():
    import isa_report as isa

    how = "disassembled from the shipped code objects, tools/isa_report.py"
    with contextlib.redirect_stdout(io.StringIO()):  # FlyDSL prints one line per ISA dump
        isas = isa.collect()
    data = {f"{i.rung}/{i.dtype}": {"vec": i.vec, "instructions": len(i.body), "memory_instructions": len(i.memops),
                                    "vgprs": i.vgprs, "sgprs": i.sgprs, "scratch_bytes": i.scratch_bytes,
                                    "memops": [m.text for m in i.memops]} for i in isas}
    return Section(f"gfx950 ISA per rung ({how})", True, isa.table(isas), data)


def run_child(cmd, json_path, title, timeout):
    """Run a section's process; its stderr is shown as it comes (progress), its stdout kept
    only for a failure's reason. The Section is read from the JSON file it writes."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = threading.Event()

    def kill():
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    stdout = []
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read()), daemon=True)
    reader.start()
    tail = deque(maxlen=3)
    try:
        for line in proc.stderr:
            line = line.rstrip("\n")
            if line.strip():
                tail.append(line)
                print(f"    {line}", file=sys.stderr, flush=True)
        rc = proc.wait()
        reader.join()
    finally:
        timer.cancel()
    if killed.is_set():
        return Section(title, False, "", reason=f"timed out after {timeout} s")
    if rc != 0 or not Path(json_path).is_file():
        why = list(tail) or ((stdout[0] or "").strip().splitlines()[-3:] if stdout else [])
        return Section(title, False, "", reason=f"{' '.join(cmd[1:3])} exited {rc}: " + " | ".join(why))
    return Section(**json.loads(Path(json_path).read_text()))


VGPU_NUMEL = 65536           # every rung: whole blocks only and <= 4096 waves (one emulator batch)
VGPU_MAX_BATCH_WAVES = 4096  # tools/vgpu Emulator's default batch
VGPU_TITLE = "emulated instructions per byte moved (virtual gfx950, tools/vgpu/, deterministic)"


def section_vgpu():
    """Emulated instructions per byte moved per rung, from the virtual gfx950 (tools/vgpu/):
    the kernels launched through relu()'s own path, run by the emulator. Runs in the
    process that calls it (it loads the virtual device's libamdhip64)."""
    try:
        import toolchain
        import vgpu
    except ImportError as e:
        return Section(VGPU_TITLE, False, "", reason=f"tools/vgpu is not importable here ({e}; tools/setup.sh "
                       "puts tools/ on .venv's import path)")
    toolchain.apply()
    os.environ.pop("COMPILE_ONLY", None)  # the kernels must be launchable in this process
    dev = vgpu.device()
    import relu_flydsl
    from vgpu.serve import serve

    serve(dev, relu_flydsl)  # CPU tensors as gfx950 memory; canary launches kept apart from dev.launches
    steps = Steps("vgpu: ")
    rows, data = [], {}
    todo = [(d, r) for d in DTYPES for r in RUNGS]
    for k, (dtype, rung) in enumerate(todo, 1):
        reg = RUNGS[rung]
        vec = reg.max_vec(dtype)
        assert VGPU_NUMEL % reg.tile(vec) == 0
        dev.reset()
        x = checks.check_input(VGPU_NUMEL, dtype, "cpu", seed=3)
        x_before = x.clone()
        out, buf = checks.guarded(VGPU_NUMEL, dtype, "cpu")
        dev.register(x, name="x", writable=False)
        dev.register(out, name="out")
        stats0 = relu_flydsl.dispatch_stats()
        n0 = len(dev.launches)
        relu_flydsl.relu(x, out=out, rung=rung)
        fails = []
        try:
            dev.check()
        except Exception as e:  # noqa: BLE001 - an invalid access is a failed check
            fails.append(str(e)[:300])
        fails += checks.check_output(x, out, buf, x_before)
        why = checks.kernel_path_ran(stats0, relu_flydsl.dispatch_stats(), rung, dtype)
        if why:
            fails.append(why)
        launches = dev.launches[n0:]
        if len(launches) != 1:
            fails.append(f"{len(launches)} launches reached the virtual device, expected 1")
        steps.line(f"{rung}/{dtype} {'FAILED' if fails else 'bit-exact'} ({k}/{len(todo)})")
        if fails:
            data[f"{rung}/{dtype}"] = {"failed": fails}
            rows.append((rung, dtype, "FAILED: " + "; ".join(fails[:2])))
            continue
        rec = launches[0]
        blocks = rec.grid[0] * rec.grid[1] * rec.grid[2]
        threads = rec.block[0] * rec.block[1] * rec.block[2]
        waves = blocks * -(-threads // 64)
        assert waves <= VGPU_MAX_BATCH_WAVES  # one batch, whole tiles: every wave runs every step
        per_wave = rec.instructions
        total = per_wave * waves
        moved = traffic_bytes(VGPU_NUMEL, dtype)
        d = {"numel": VGPU_NUMEL, "kernel": rec.kernel, "grid": list(rec.grid), "block": list(rec.block),
             "vec": vec, "waves": waves, "instructions_per_wave": per_wave, "wave_instructions": total,
             "bytes_moved": moved, "wave_instructions_per_kib": 1024 * total / moved,
             "bytes_per_wave_instruction": moved / total, "bit_exact_and_guards_ok": True}
        data[f"{rung}/{dtype}"] = d
        rows.append((rung, dtype, d))
    head = ("rung", "dtype", "vec", "grid x block", "waves", "instr/wave", "wave-instr", "bytes moved",
            "wave-instr per KiB", "bytes per wave-instr", "checks")
    lines = [head]
    for rung, dtype, d in rows:
        if isinstance(d, str):
            lines.append((rung, dtype) + ("",) * 8 + (d,))
            continue
        lines.append((rung, dtype, str(d["vec"]), f"{d['grid'][0]} x {d['block'][0]}", str(d["waves"]),
                      str(d["instructions_per_wave"]), str(d["wave_instructions"]), str(d["bytes_moved"]),
                      f"{d['wave_instructions_per_kib']:.2f}", f"{d['bytes_per_wave_instruction']:.0f}",
                      "bit-exact, guards ok"))
    widths = [max(len(l[c]) for l in lines) for c in range(len(head))]
    text = [f"one launch per row, numel {VGPU_NUMEL}; an emulator step issues one instruction to every wave of "
            "the batch (here one batch, whole tiles: steps = instructions per wave); wave-instr = instr/wave x waves"]
    text += ["  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    text.insert(2, "  ".join("-" * w for w in widths))
    return Section(VGPU_TITLE, True, "\n".join(text), data)


SECTIONS = {"vgpu": section_vgpu}  # sections a child process runs: --section NAME --section-json FILE


def section_child(name, path):
    """The child's side of subprocess_section: run section `name`, write it to `path` as JSON."""
    Path(path).write_text(json.dumps(asdict(SECTIONS[name]())) + "\n")
    return 0


def subprocess_section(name, title, timeout, tmp):
    path = Path(tmp) / f"{name}.json"
    cmd = [sys.executable, "-m", "benchmarks.ladder", "--section", name, "--section-json", str(path)]
    return run_child(cmd, path, title, timeout)


HOST_TITLE = "host time per call: relu(x, out=y) and relu(x) against torch (CPU, 1 element, stand-in HIP)"


def section_host(tmp, timeout=600):
    """benchmarks/host_overhead.py in its own process (it loads the no-op libamdhip64); its
    result comes back as the JSON file it writes, its table as its stdout."""
    script = ROOT / "benchmarks" / "host_overhead.py"
    if not script.exists():
        return Section(HOST_TITLE, False, "", reason="benchmarks/host_overhead.py is not in this checkout")
    path = Path(tmp) / "host.json"
    cmd = [sys.executable, str(script), "--dtype", "bfloat16", "--json", str(path)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Section(HOST_TITLE, False, "", reason=f"{script.name} timed out after {timeout} s")
    if p.returncode != 0 or not path.is_file():
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return Section(HOST_TITLE, False, "", reason=f"{script.name} exited {p.returncode}: " + " | ".join(tail))
    doc = json.loads(path.read_text())
    doc["command"] = ".venv/bin/python benchmarks/host_overhead.py --dtype bfloat16"
    return Section(HOST_TITLE, True, p.stdout.rstrip() + f"\n[{doc['command']}]", doc)


def nogpu_main(args, why):
    t0 = time.perf_counter()
    print(f"No gfx950 device here ({why}).")
    print("DEVICE BANDWIDTH WAS NOT MEASURED: nothing below is a GB/s figure. On an MI350X/MI355X run")
    print(f"    {LADDER_HINT}")
    print("from the repository root for the timed ladder. What this machine can report:\n", flush=True)
    steps = Steps()
    sections = []
    with tempfile.TemporaryDirectory(prefix="relu-nogpu-") as tmp:
        plan = (("isa", "gfx950 ISA of every rung, compiled here", section_isa),
                ("vgpu", "every rung on the virtual gfx950 (emulated)",
                 lambda: subprocess_section("vgpu", VGPU_TITLE, 900, tmp)),
                ("host", "host time per call (benchmarks/host_overhead.py)", lambda: section_host(tmp)))
        for k, (label, what, fn) in enumerate(plan, 1):
            steps.line(f"[{k}/{len(plan)}] {what} ...")
            t = time.perf_counter()
            try:
                s = fn()
            except Exception as e:  # noqa: BLE001 - a broken section is reported, not hidden
                s = Section(label, False, "", reason=f"{type(e).__name__}: {str(e)[:300]}")
            s.data["seconds"] = round(time.perf_counter() - t, 1)
            steps.line(f"[{k}/{len(plan)}] {what}: {'done' if s.available else 'UNAVAILABLE'} "
                       f"({s.data['seconds']} s)")
            sections.append(s)
            print(f"[{k}/{len(plan)}] {s.title}")
            print(s.text if s.available else f"UNAVAILABLE: {s.reason}")
            print(flush=True)
    from .gpu import environment

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"mode": "nogpu", "device_bandwidth_measured": False, "why_no_gpu": why, "environment": environment(),
           "command": " ".join([".venv/bin/python -m benchmarks.ladder"] + sys.argv[1:]),  # as typed in the repo root
           "sections": [asdict(s) for s in sections]}
    (out / "nogpu.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}/nogpu.json ({time.perf_counter() - t0:.0f} s). Device bandwidth was not measured.")
    return 0
