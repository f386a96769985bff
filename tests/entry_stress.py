"""The compiled entry under threads, and with Python forced into the middle of a replayed call.

    python tests/entry_stress.py DEVICE ALLOCATION [--seconds S] [--threads N] [--interleave]

DEVICE: vgpu (the virtual gfx950: results computed, memory checked) or noop (the no-op HIP
library: nothing computed, launches counted). ALLOCATION: how relu(x) allocates in the entry:
shim (torch's C shim) or empty_like (torch.empty_like, which releases the GIL).

Threads: "hot" threads repeat relu(x) and relu(x, out=y) on sizes whose entries are ready, while
"churn" threads call relu on ever new sizes, so the general path adds entries and restarts the
entry's table (its bound lowered to ENTRIES_MAX below) many times. The switch interval is 1 us.
--interleave instead forces the interleaving: the allocation of a replayed relu(x) itself calls
relu on new sizes until the table restarts (through empty_like, or a garbage-collection callback
for the shim), then the replayed call must still launch its own kernel.

Every result is checked (vgpu: bit-exact, no byte outside it written; noop: shape, dtype and a
launch per call), and dispatch_stats() must count each call once on the kernel path. Prints one
JSON line: {"calls", "counted", "launches", "restarts", "problems"}; exits 1 on any problem. Run in
a child process by tests/vgpu/test_entry_threads.py: a crash there is a failing test, not a lost run.
"""

import argparse
import gc
import json
import os
import sys
import threading
import time

ENTRIES_MAX = 16  # the table's bound here: a churn thread restarts it every 16 new sizes
HOT_SIZES = (1, 7, 64, 1023)
DTYPES = ("float32", "bfloat16", "float16", "int8")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("device", choices=("vgpu", "noop"))
    ap.add_argument("allocation", choices=("shim", "empty_like"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=4, help="hot threads (one churn thread per two)")
    ap.add_argument("--interleave", action="store_true")
    args = ap.parse_args(argv)
    os.environ.pop("RELU_FLYDSL_DISABLE", None)
    os.environ.pop("RELU_FLYDSL_RUNG", None)
    if args.device == "noop":
        os.environ["RELU_FLYDSL_CANARY"] = "0"  # the no-op library computes nothing: no canary can pass
    rig = Rig(args.device)
    allocation = rig.entry.use_shim(args.allocation == "shim")
    summary = rig.interleave(args.allocation) if args.interleave else rig.threads(args.seconds, args.threads)
    summary["allocation"] = allocation
    print(json.dumps(summary))
    return 1 if summary["problems"] else 0


class Rig:
    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        if device == "noop":
            from tools import noop_hip

            self.hip = noop_hip.load()  # the process's libamdhip64 before the package binds one
        import relu_flydsl
        from relu_flydsl import _compiled_entry, _state

        self.pkg, self.entry, self.state = relu_flydsl, _compiled_entry, _state.STATE
        if _compiled_entry.not_loaded():
            sys.exit(f"entry_stress: the compiled entry is not loaded: {_compiled_entry.not_loaded()}")
        _state.ENTRIES_MAX = ENTRIES_MAX  # read by refresh() (the entry's bound) and add_entry()
        if device == "vgpu":
            import vgpu
            from vgpu.serve import serve

            self.dev = vgpu.device()
            self.dev.reset()
            self.dev.stream = 0x5EED0
            serve(self.dev, relu_flydsl)
        else:
            from vgpu.serve import present_cpu_as

            self.dev = None
            present_cpu_as(relu_flydsl, stream=0x5000)
        self.state.reset()
        self.lock = threading.RLock()  # the problems list and the vgpu's one pending fresh output
        self.problems, self.restarts, self.calls, self.kept = [], 0, 0, []

    # ---- tensors and checks ----
    def inputs(self, n, dtype, seed):
        """x (random bits with special values) and a ready out, in device memory."""
        import vgpu_support as S

        torch = self.torch
        dt = getattr(torch, dtype)
        bits = S.make_bits("mixed", n, dt, seed)
        if self.dev is None:
            return bits, S.to_tensor(bits, dt).clone(), torch.empty(n, dtype=dt), None
        with self.lock:
            x, _ = S.guarded_input(self.dev, bits, dt, name=f"x{seed}")
            out, obuf = self.dev.guarded((n,), dt, name=f"out{seed}")
        return bits, x, out, obuf

    def check(self, what, bits, x, y, obuf=None):
        import vgpu_support as S

        if y is x or y.shape != x.shape or y.dtype != x.dtype:
            return self.problem(f"{what}: result {tuple(y.shape)} {y.dtype} for x {tuple(x.shape)} {x.dtype}")
        if self.dev is None:
            return
        try:
            S.assert_bits(y, S.relu_bits(bits, x.dtype))
            if obuf is not None:
                S.assert_guards(obuf, y)
        except AssertionError as e:
            self.problem(f"{what}: {str(e).splitlines()[0]}")

    def problem(self, text):
        with self.lock:
            if len(self.problems) < 20:
                self.problems.append(text)

    def relu_new(self, x, nbytes, just_before=None):
        """relu(x), its output memory registered on the virtual device as the launch sees it."""
        if self.dev is None:
            if just_before:
                just_before()
            return self.pkg.relu(x)
        with self.lock:  # one pending fresh output at a time (vgpu.fresh_output is per device)
            self.dev.fresh_output(nbytes)
            if just_before:
                just_before()
            y = self.pkg.relu(x)
            self.kept.append(y)  # its memory stays registered, never handed out again
            return y

    def counted(self):
        return sum(n for k, n in self.pkg.dispatch_stats().items() if k.startswith("flydsl/"))

    def launches(self):
        return self.hip.noop_hip_launch_count() if self.dev is None else len(self.dev.launches)

    def summary(self, launches_before):
        if self.dev is not None:
            try:
                self.dev.check()
            except AssertionError as e:
                self.problem(f"memory: {str(e)[:400]}")
        stats = self.pkg.dispatch_stats()
        others = {k: n for k, n in stats.items() if not k.startswith("flydsl/")}
        if others:
            self.problem(f"calls off the kernel path: {others}")
        counted, launched = self.counted(), self.launches() - launches_before
        if counted != self.calls:
            self.problem(f"dispatch_stats() counts {counted} kernel calls, {self.calls} were made")
        if launched != self.calls:
            self.problem(f"{launched} launches for {self.calls} calls")
        return {"calls": self.calls, "counted": counted, "launches": launched, "restarts": self.restarts,
                "problems": self.problems}

    # ---- threads ----
    def threads(self, seconds, hot_threads):
        ready = []  # (bits, x, out, obuf, dtype): entries made ready before the threads start
        for i, n in enumerate(HOT_SIZES):
            for j, dtype in enumerate(DTYPES):
                bits, x, out, obuf = self.inputs(n, dtype, seed=100 + 10 * i + j)
                self.pkg.relu(x, out=out)
                self.relu_new(x, x.numel() * x.element_size())
                ready.append((bits, x, out, obuf, dtype))
        self.pkg.reset_dispatch_stats()
        before = self.launches()
        stop = time.monotonic() + seconds
        made = [0] * (hot_threads + max(1, hot_threads // 2))

        def hot(k):
            i = k
            while time.monotonic() < stop:
                bits, x, out, obuf, dtype = ready[i % len(ready)]
                i += 1
                y = self.pkg.relu(x, out=out)
                made[k] += 1
                self.check(f"relu(x, out=y) {dtype} {x.numel()}", bits, x, y, obuf)
                y = self.relu_new(x, x.numel() * x.element_size())
                made[k] += 1
                self.check(f"relu(x) {dtype} {x.numel()}", bits, x, y)

        def churn(k):
            n, seen = 2 + 7919 * k % 500, self.entry._loaded.entries()
            while time.monotonic() < stop:
                n += 1
                dtype = DTYPES[n % len(DTYPES)]
                bits, x, out, obuf = self.inputs(n % 600 + 2, dtype, seed=n)
                y = self.pkg.relu(x, out=out)
                made[k] += 1
                self.check(f"churn relu(x, out=y) {dtype} {x.numel()}", bits, x, y, obuf)
                now = self.entry._loaded.entries()
                if now < seen:
                    with self.lock:
                        self.restarts += 1
                seen = now

        workers = [threading.Thread(target=hot, args=(k,)) for k in range(hot_threads)]
        workers += [threading.Thread(target=churn, args=(k,)) for k in range(hot_threads, len(made))]
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        finally:
            sys.setswitchinterval(switch)
        self.calls = sum(made)
        if self.restarts < 2:
            self.problem(f"the table restarted {self.restarts} times: the run did not test what it is for")
        return self.summary(before)

    # ---- the forced interleaving ----
    def interleave(self, allocation):
        """A replayed relu(x) whose allocation runs relu on new sizes until the entry's table
        restarts (twice), then goes on: its launch must be its own kernel's."""
        torch = self.torch
        rounds, size, nested = 0, [1], [0]
        relu_module = sys.modules["relu_flydsl._relu"]
        check, general = relu_module._check, [0]

        def counted_check(*a, **k):  # relu()'s general path entered
            general[0] += 1
            return check(*a, **k)

        relu_module._check = counted_check

        def restart_table():
            nonlocal rounds
            seen = -1
            while self.entry._loaded.entries() > seen:  # until add() restarts the table
                seen = self.entry._loaded.entries()
                size[0] += 1
                bits, x, out, obuf = self.inputs(size[0], "float32", seed=size[0])
                self.check(f"nested relu {size[0]}", bits, x, self.pkg.relu(x, out=out), obuf)
                self.calls += 1
                nested[0] += 1
            rounds += 1

        busy, armed = [False], [False]
        if allocation == "empty_like":
            def empty_like(t, *a, **k):  # the entry's torch.empty_like: Python in the middle of serve()
                if not busy[0]:
                    busy[0] = True
                    try:
                        restart_table()
                    finally:
                        busy[0] = False
                return torch.empty_like(t, *a, **k)

            self.entry._init(self.entry._loaded, empty_like=empty_like)
        else:
            def collected(phase, info):  # a garbage collection while the shim's tensor is wrapped
                if phase == "start" and armed[0] and not busy[0]:
                    armed[0], busy[0] = False, True
                    try:
                        restart_table()
                    finally:
                        busy[0] = False

            gc.callbacks.append(collected)
        try:
            bits, x, out, obuf = self.inputs(1, "bfloat16", seed=7)
            self.check("first relu(x)", bits, x, self.relu_new(x, 2))  # its entry made ready
            self.calls += 1
            self.pkg.relu(x, out=out)  # and relu(x, out=y)'s
            self.calls += 1
            self.pkg.reset_dispatch_stats()
            self.calls = 0
            before = self.launches()
            for _ in range(3):
                busy[0] = True  # x's entry ready again (the last round's restart dropped it), nothing nested
                try:
                    self.check("relu(x) making its entry ready", bits, x, self.relu_new(x, 2))
                finally:
                    busy[0] = False
                self.calls += 1
                general[0] = nested[0] = 0
                threshold = gc.get_threshold()

                def arm():  # the first object allocated from here on collects: the shim's wrapped tensor
                    armed[0] = True
                    gc.set_threshold(1)

                try:
                    y = self.relu_new(x, 2, arm if allocation == "shim" else None)
                finally:
                    gc.set_threshold(*threshold)
                self.calls += 1
                self.check("replayed relu(x)", bits, x, y)
                if general[0] != nested[0]:
                    self.problem(f"the replayed relu(x) took the general path ({general[0]} general-path calls for "
                                 f"{nested[0]} nested ones): the interleaving was not forced")
            if rounds < 3:
                self.problem(f"the allocation restarted the table {rounds} times, not 3: the interleaving "
                             "was not forced")
            self.restarts = rounds
            return self.summary(before)
        finally:
            relu_module._check = check
            if allocation == "empty_like":
                self.entry._init(self.entry._loaded)
            else:
                gc.callbacks.remove(collected)


if __name__ == "__main__":
    sys.exit(main())
