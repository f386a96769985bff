"""Run the `kernels` CLI, exactly as typed, with the kernels running on the virtual gfx950.

    .venv/bin/python tools/kernels_cli_vgpu.py benchmark ./relu-build

calls kernels' own console-script entry point (`kernels.cli:main`) with
sys.argv = ["kernels", "benchmark", "./relu-build"], in a process where:

  - torch reports a ROCm build (`torch.version.hip` set and `torch.version.cuda` None,
    what kernels' backend detection reads, cuda first), so kernels chooses and loads
    relu-build/build/torch-rocm as it does on a ROCm machine, on CPU and CUDA builds of
    torch alike. kernels' loader, discovery and timing loop run as shipped;
    the runner wraps two of them to act on their results: get_local_kernel/get_kernel
    (to put the loaded variant on the virtual device) and discover_benchmark_classes
    (to set ROW_DIVISOR in the discovered module);
  - the benchmark runner's device is "cpu" (`kernels.cli.benchmark._backend`, which the
    CLI reads only to pick the workloads' torch device and the machine info): the
    virtual device's memory is host memory, so the workloads' tensors are CPU tensors;
  - every relu_flydsl variant kernels loads sees CPU tensors as gfx950 memory (its
    `_dispatch.device_info`, the substitution point of tests/conftest.py; its first-use
    canary's buffer, `_canary.device_memory`, is registered CPU memory), and each
    relu() call registers its x and out with the virtual device for that call (the
    device checks every access against the registered allocations; relu(x)'s own
    output is declared with the device's fresh_output());
  - the workloads' shapes keep their columns and are cut to a few rows (benchmark.py's
    ROW_DIVISOR, default 65536: one row; env KERNELS_VGPU_ROW_DIVISOR), because the
    emulator runs ~0.1 s per million elements. Workload names keep the full shapes.

Timings printed here are the emulator's, not a GPU's. At the end it prints every loaded
variant's dispatch_stats() and the device's launch count, and exits non-zero when the
CLI failed, any call fell back to torch, or the device recorded an error or an invalid
memory access. tests/release/test_kernels_cli.py runs it in CI.
"""

import functools
import os
import sys
import traceback

ROCM_VERSION = "7.0.0"  # what torch.version.hip says here; libamdhip64.so.7 is the stand-in's SONAME
DEFAULT_ROW_DIVISOR = 65536


def _virtual_device():
    import toolchain

    toolchain.apply()  # ld.lld-22 for FlyDSL's gfx950 link step
    os.environ.pop("COMPILE_ONLY", None)  # the kernels must launch
    import vgpu

    return vgpu.device()  # loads the stand-in libamdhip64.so.7 before FlyDSL opens it


class Session:
    def __init__(self, dev, row_divisor):
        self.dev = dev
        self.row_divisor = row_divisor
        self.modules = []  # every relu_flydsl variant kernels loaded (one per benchmark class)
        self.calls = 0

    # ---- what the process looks like to kernels --------------------------------------
    def present_rocm(self):
        import torch

        import kernels
        import kernels.cli.benchmark as cli_benchmark
        from kernels.backends import CPU

        torch.version.hip = ROCM_VERSION
        torch.version.cuda = None  # kernels reads cuda before hip: a CUDA build of torch must look ROCm too
        cli_benchmark._backend = CPU  # the workloads' device: host memory is the device's memory
        for name in ("get_local_kernel", "get_kernel"):  # the CLI imports them from `kernels` at call time
            setattr(kernels, name, self._loader(getattr(kernels, name)))
        discover = cli_benchmark.discover_benchmark_classes

        @functools.wraps(discover)
        def discover_small(script_path, cwd):
            classes = discover(script_path, cwd)
            for cls in classes:
                module = sys.modules[cls.__module__]
                if hasattr(module, "ROW_DIVISOR"):
                    module.ROW_DIVISOR = self.row_divisor
            return classes

        cli_benchmark.discover_benchmark_classes = discover_small

    def _loader(self, load):
        @functools.wraps(load)
        def load_on_vgpu(*args, **kwargs):
            module = load(*args, **kwargs)
            if not any(m is module for m in self.modules):
                self._install(module)
                self.modules.append(module)
            return module

        return load_on_vgpu

    # ---- the loaded variant on the virtual device --------------------------------------
    def _install(self, module):
        from vgpu.serve import serve

        # CPU tensors as gfx950 memory of device 0, the canary's buffer registered there
        serve(self.dev, module)
        dev = self.dev
        real_relu = module.relu

        @functools.wraps(real_relu)
        def relu(x, out=None, **kwargs):
            regions = [dev.register(x, name="x")]
            fresh = None
            if out is None:
                fresh = "relu(x) output"
                dev.fresh_output(x.numel() * x.element_size(), name=fresh)
            elif out.data_ptr() != x.data_ptr():
                regions.append(dev.register(out, name="out"))
            try:
                result = real_relu(x, out, **kwargs)
            finally:
                regions += [r for r in dev.memory.regions if r.name == fresh]
                for r in regions:
                    dev.memory.remove(r)
                dev._fresh = None  # a call that launched nothing (a fallback) leaves it pending
            self.calls += 1
            self.check_device()
            return result

        module.relu = relu

    def check_device(self):
        dev = self.dev
        if dev.errors or dev.memory.violations:
            first = dev.errors[0] if dev.errors else dev.memory.violations[0]
            text = getattr(first, "__traceback_text__", "")
            raise RuntimeError(f"virtual gfx950: {type(first).__name__}: {first}\n{text}")

    # ---- the report ------------------------------------------------------------------
    def report(self):
        """Print what ran; return the problems found (empty when every call was FlyDSL's)."""
        problems = []
        print("\n== virtual gfx950: dispatch statistics of the variant kernels loaded ==", file=sys.stderr)
        total = {}
        for m in self.modules:
            for k, n in m.dispatch_stats().items():
                total[k] = total.get(k, 0) + n
        for k in sorted(total):
            print(f"  {k:28s} {total[k]}", file=sys.stderr)
        flydsl = sum(n for k, n in total.items() if k.startswith("flydsl/"))
        fallback = {k: n for k, n in total.items() if not k.startswith("flydsl/")}
        launches = self.dev.counts()["launch"]
        print(f"  relu() calls {self.calls}, FlyDSL path {flydsl}, fallback {sum(fallback.values())}, "
              f"kernel launches on the virtual gfx950 {launches}, device errors {len(self.dev.errors)}, "
              f"invalid accesses {len(self.dev.memory.violations)}", file=sys.stderr)
        print(f"  shapes: full columns, rows // {self.row_divisor} (at least 1); times above are the emulator's",
              file=sys.stderr)
        if not self.modules:
            problems.append("kernels loaded no relu_flydsl variant")
        if fallback:
            problems.append(f"calls fell back to torch: {fallback}")
        if self.modules and flydsl == 0:
            problems.append("no call ran the FlyDSL kernel")
        if launches < flydsl:
            problems.append(f"{flydsl} FlyDSL calls but only {launches} launches reached the virtual device")
        if self.dev.errors or self.dev.memory.violations:
            first = self.dev.errors[0] if self.dev.errors else self.dev.memory.violations[0]
            problems.append(f"the virtual device recorded errors or invalid memory accesses; first: "
                            f"{type(first).__name__}: {first}")
        for p in problems:
            print(f"  PROBLEM: {p}", file=sys.stderr)
        return problems


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if "-h" in argv or "--help" in argv:  # help only: no kernel runs, so no report
        print(__doc__)
        from kernels.cli import main as kernels_main

        sys.argv = ["kernels", *argv]
        try:
            kernels_main()
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
        return 0
    session = Session(_virtual_device(), int(os.environ.get("KERNELS_VGPU_ROW_DIVISOR", DEFAULT_ROW_DIVISOR)))
    session.present_rocm()
    from kernels.cli import main as kernels_main  # the `kernels` console script

    sys.argv = ["kernels", *argv]
    code = 0
    try:
        kernels_main()
    except SystemExit as e:  # the CLI's own error exits (it prints the reason)
        code = e.code if isinstance(e.code, int) else 1
    except Exception:  # an error the CLI does not catch: show it, then the report
        traceback.print_exc()
        code = 1
    problems = session.report()
    if code:
        print(f"  PROBLEM: the kernels CLI exited with status {code}", file=sys.stderr)
    return code or (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
