"""The compiled entry under threads (tests/entry_stress.py, in a child process each, so that a
crash is this test failing with its name): no pointer into the entry's table outlives a call that
can run Python. Both allocation modes of relu(x), on the virtual gfx950 (results bit-exact, memory
checked) and on the no-op HIP library (a million calls in seconds, launches counted)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STRESS = ROOT / "tests" / "entry_stress.py"


def _run(*args, timeout=240):
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    for name in ("RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG", "RELU_FLYDSL_CANARY", "RELU_FLYDSL_ENTRY"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(STRESS), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    tail = (proc.stdout[-3000:] + proc.stderr[-6000:]).strip()
    if proc.returncode == 0 and proc.stdout.strip() == "":
        pytest.fail(f"entry_stress {' '.join(args)} printed no summary:\n{tail}")
    skip = "virtual gfx950 unavailable", "cannot build"
    if proc.returncode != 0 and any(s in tail for s in skip):
        pytest.skip(f"entry_stress {' '.join(args)}: {tail.splitlines()[-1]}")
    lines = proc.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        summary = None
    assert proc.returncode == 0 and summary is not None, \
        f"entry_stress {' '.join(args)} exited {proc.returncode}:\n{tail}"
    assert summary["problems"] == [], summary["problems"]
    return summary


def _allocates_as_asked(summary, allocation):
    want = "torch's C shim" if allocation == "shim" else "torch.empty_like"
    assert summary["allocation"].startswith(want), summary["allocation"]


@pytest.mark.parametrize("allocation", ["shim", "empty_like"])
@pytest.mark.parametrize("device", ["vgpu", "noop"])
def test_threads_replaying_while_the_table_restarts(device, allocation):
    """Hot threads replay ready entries (relu(x) and relu(x, out=y)) while churn threads add
    entries on new sizes and restart the table (its bound lowered to 16) many times: every
    result right, every call counted once on the kernel path, one launch each, no crash."""
    summary = _run(device, allocation, "--seconds", "2")
    _allocates_as_asked(summary, allocation)
    assert summary["restarts"] >= 2 and summary["calls"] == summary["counted"] == summary["launches"] > 0, summary


@pytest.mark.parametrize("device, allocation", [("vgpu", "empty_like"), ("noop", "empty_like"), ("noop", "shim")])
def test_an_allocation_that_restarts_the_table_mid_call(device, allocation):
    """The forced interleaving: a replayed relu(x) whose allocation (torch.empty_like, or a
    garbage collection as the shim's tensor is wrapped) itself calls relu on new sizes until the
    table restarts, three times. The replayed call still launches its own kernel on its own
    tensors, counted once. (Before serve() copied its entry this crashed, or launched a cleared
    entry's kernel: HIP error 400 on the virtual gfx950.)"""
    summary = _run(device, allocation, "--interleave")
    _allocates_as_asked(summary, allocation)
    assert summary["restarts"] == 3 and summary["calls"] == summary["counted"] == summary["launches"], summary
