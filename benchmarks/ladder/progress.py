"""Progress on stderr: a bar (tqdm when installed, else a counter) for the timing loop,
and one line per step with its elapsed time for the no-GPU report."""

import sys
import time


class Progress:
    """tqdm when installed, else a plain counter on stderr."""

    def __init__(self, total, desc):
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="timing", file=sys.stderr)
        except ImportError:
            self._bar = None
        self.total, self.done, self.desc = total, 0, desc

    def __call__(self, n=1):
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.done == self.total or self.done % max(1, self.total // 50) == 0:
            print(f"\r{self.desc}: {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
        else:
            print(file=sys.stderr)


class Steps:
    """`steps.line("ISA compiled")` prints '[  12.3 s] ISA compiled' on stderr: elapsed
    since the Steps was made."""

    def __init__(self, prefix=""):
        self.t0, self.prefix = time.perf_counter(), prefix

    def line(self, text):
        print(f"[{time.perf_counter() - self.t0:6.1f} s] {self.prefix}{text}", file=sys.stderr, flush=True)
