"""The ladder harness: every rung against torch, the method of the reference post
("Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels"), over the
whole size curve.

    .venv/bin/python -m benchmarks.ladder                  on a gfx950 device (MI350X/MI355X): the
                                                           timed ladder; elsewhere the no-GPU report
    .venv/bin/python -m benchmarks.ladder --mode baseline  torch's relu alone, on whatever GPU torch
                                                           sees (CUDA or ROCm)
    .venv/bin/python -m benchmarks.ladder --mode nogpu     the no-GPU report even on a GPU machine
    .venv/bin/python -m benchmarks.ladder --rungs-from stand-in
                                                           the gpu mode end to end on any GPU, each
                                                           rung a bit-exact torch stand-in (rungs.py)
    .venv/bin/python -m benchmarks.ladder --help           every option

Run from the repository root. One file per responsibility:

    cases.py    what is timed: the size curve (64 KB .. 2 GB of traffic, denser through the
                last-level-cache band), the post's shapes and its cache band
    checks.py   correctness before timing: the rungs on the bit rule, torch as torch
                specifies relu, guards, input, and that this workload's calls took the kernel path
    timing.py   how a point is timed (the policy is in its docstring)
    report.py   rows, tables, where each rung crosses torch, CSV, plot
    gpu.py      the gpu and baseline modes (correctness, then timing, then the report)
    rungs.py    where the gpu mode's rungs and its device check come from (--rungs-from): the
                shipped kernels on a gfx950, or the stand-in
    nogpu.py    the no-GPU report: ISA, virtual-device instruction counts, host overhead;
                its sections run in their own processes and hand back JSON files
    __main__.py the command line: chooses the mode

What is checked, and against what: the rungs' specification is the bit rule
y = +0.0 if x < 0 else x, on the bits (NaN payloads, +-inf, -0.0 and denormals pass through);
torch is a baseline, checked as torch specifies relu (values equal to max(x, 0) with
+0.0 == -0.0, NaN where the input is NaN). Where torch's bits depart from the bit rule, that is
a note, not a failure (benchmarks/relu_semantics.py).
"""
