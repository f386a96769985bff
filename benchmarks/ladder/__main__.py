"""The ladder's command line: `.venv/bin/python -m benchmarks.ladder [options]` from the
repository root. It only chooses the mode; see benchmarks/ladder/__init__.py. "The post" in the
help is the reference post, "Beating torch.relu with FlyDSL: A Hands-On Guide to Bandwidth-Bound Kernels"."""

import argparse
import sys
from pathlib import Path

from flash_relu_rocm.dtypes import DTYPES
from flash_relu_rocm.registry import RUNGS

from . import __doc__ as PACKAGE_DOC
from . import gpu, nogpu, rungs, timing
from .cases import SWEEPS

ROOT = Path(__file__).resolve().parent.parent.parent


def parser():
    p = argparse.ArgumentParser(prog=".venv/bin/python -m benchmarks.ladder", description=PACKAGE_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "results"), help="results folder (default results/)")
    p.add_argument("--mode", choices=("auto", "gpu", "nogpu", "baseline"), default="auto",
                   help="auto: gpu on a gfx950, else nogpu; baseline: torch only, on any GPU")
    p.add_argument("--rungs", nargs="+", default=list(RUNGS), choices=list(RUNGS))
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"], choices=list(DTYPES))
    p.add_argument("--sweeps", nargs="+", default=list(SWEEPS), choices=SWEEPS,
                   help="curve: 64 KiB .. 2 GiB of traffic; shapes: the post's four; band: its cache band")
    p.add_argument("--rounds", type=int, default=timing.ROUNDS)
    p.add_argument("--iters", type=int, default=timing.ITERS)
    p.add_argument("--warmup", type=int, default=timing.WARMUP)
    p.add_argument("--variant", help="time a built variant folder (relu-build/build/torch-rocm) instead of the source")
    p.add_argument("--rungs-from", choices=sorted(rungs.SOURCES), default=rungs.DEFAULT,
                   help="where the gpu mode's rungs come from: relu_flydsl (the shipped kernels, on a gfx950; "
                        "default) or stand-in (torch ops under the bit rule, on any GPU: every step of the "
                        "gpu mode runs, but its numbers are torch's, not the ladder's)")
    p.add_argument("--section", choices=sorted(nogpu.SECTIONS), help=argparse.SUPPRESS)  # a no-GPU section's child
    p.add_argument("--section-json", help=argparse.SUPPRESS)                              # ... and its result file
    return p


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for the report's "command"
    if args.section:
        if not args.section_json:
            p.error("--section needs --section-json FILE")
        return nogpu.section_child(args.section, args.section_json)
    if args.mode == "baseline":
        if args.rungs_from != rungs.DEFAULT:
            p.error("--rungs-from is for the gpu mode; the baseline mode times torch alone")
        has_gpu, what = gpu.any_gpu()
        if not has_gpu:
            print(f"benchmarks.ladder --mode baseline: NO GPU HERE: {what}. Nothing was timed.\n"
                  "The baseline mode times torch's relu on a CUDA or ROCm GPU. On this machine run\n"
                  f"    {nogpu.LADDER_HINT}\n"
                  "from the repository root for the no-GPU report.", file=sys.stderr)
            return 2
        return gpu.gpu_main(args, baseline=True)
    source = rungs.source(args.rungs_from)
    if source.name != rungs.DEFAULT:  # a stand-in is for the gpu mode alone: never a no-GPU report
        if args.mode == "nogpu":
            p.error(f"--rungs-from {source.name} runs the gpu mode; --mode nogpu reports the shipped kernels")
        if args.variant:
            p.error(f"--variant times built kernels; --rungs-from {source.name} has none")
        args.mode = "gpu"
    ok, why = source.device()  # the device check goes through the source, never around it
    if args.mode == "gpu" and not ok:
        p.error(f"--mode gpu{'' if source.name == rungs.DEFAULT else ' --rungs-from ' + source.name} "
                f"needs {source.needs}: {why}")
    if args.mode == "nogpu" or not ok:
        return nogpu.nogpu_main(args, why if not ok else "--mode nogpu")
    return gpu.gpu_main(args, source=source)


if __name__ == "__main__":
    sys.exit(main())
