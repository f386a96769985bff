"""All mutable dispatch state, with one owner: `STATE` (a DispatchState).

    STATE.settings          kill switch, forced rung, canary switch (from the environment)
    STATE.entries           launch entries (the general path's plans, per size/alignment/device)
    STATE.replay            the compiled entry (_compiled_entry.c) once loaded, else None: its ready
                            entries are dispatch state too, dropped with the others
    STATE.functions         (rung, dtype, vec, device) -> loaded kernel function (modules: their handles)
    STATE.verdicts          (rung, dtype, vec, device) -> None (canary passed) or the evidence
    STATE.broken            (rung, dtype, vec) -> why that code object cannot be used
    STATE.counters          path -> PathCounter (dispatch_stats())
    STATE.lasting           the torch fallback's PathCounters for the kill switch and "not a
                            ROCm device": one each for the life of the process (zeroed on
                            reset), so the compiled entry holds their hit functions
    STATE.reset()           back to a fresh process (tests); modules are forgotten, not unloaded
    STATE.warn_once(...)    a RuntimeWarning once per key, at the caller's line (caller_stacklevel)
    SETTINGS                every environment variable the package reads: (name, accepted values,
                            when read, meaning); status()["settings"] reports each

Any change of the environment variables is seen at the next call (an operator
can flip the kill switch in a running process) and drops every entry, the compiled
entry's included: it compares the raw values on every call and hands any change to the
general path, which re-reads them here.
"""

import importlib
import itertools
import os
import sys
import threading
import warnings

from ._inputs import short
from .flash_relu_rocm.registry import DEFAULT_RUNG, RUNGS, get_rung

ENV_DISABLE = "RELU_FLYDSL_DISABLE"  # "1": every call takes the torch fallback (operator kill switch)
ENV_RUNG = "RELU_FLYDSL_RUNG"        # "v1".."v5": rung used when the call names none
ENV_CANARY = "RELU_FLYDSL_CANARY"    # "0": no first-use canaries
ENV_ENTRY = "RELU_FLYDSL_ENTRY"      # "0": never load the compiled entry (_compiled_entry.py, at import)
ENV_COMPILE = "RELU_FLYDSL_COMPILE"  # "op": the kernel op in compiled graphs (_relu.py, when a graph is traced)
ON = ("1", "true", "yes", "on")      # the spellings that switch on (any case, surrounding spaces ignored)
OFF = ("0", "false", "no", "off")    # the spellings that switch off
ENTRIES_MAX = 4096                   # bound memory for processes that see endless sizes

# Every environment variable the package reads: (name, accepted values, when it is read, what it
# does). One list: status()["settings"] reports each, and the documentation's settings table is
# checked against it.
SETTINGS = (
    (ENV_DISABLE, "1, true, yes, on (any case): on; unset or anything else: off",
     "every call (re-read whenever it changes)",
     "the kill switch: every call takes torch's fallback (torch.relu's own kernel)"),
    (ENV_RUNG, f"{', '.join(RUNGS)}; unset: {DEFAULT_RUNG} (an unknown rung warns once and is ignored)",
     "every call (re-read whenever it changes)",
     "the ladder rung a call runs when it names none (relu(x, rung=...) overrides it)"),
    (ENV_CANARY, "0, false, no, off (any case): off; unset or anything else: on",
     "every call (re-read whenever it changes)",
     "the first-use canary: each kernel checked on each device before its first launch there; a "
     "kernel whose canary failed stays unused on that device whatever this says later"),
    (ENV_ENTRY, "0, false, no, off (any case): not loaded; unset or anything else: loaded where it can",
     "at import",
     "the compiled entry, the low-host-time path for repeated calls (same results without it, more "
     "host time per call)"),
    (ENV_COMPILE, "op: the kernel op; torch or unset: torch's relu (another value warns and means torch)",
     "when torch.compile traces a graph (a traced graph keeps its choice)",
     "what relu() becomes in a compiled graph: torch's relu, fused by Inductor, or the kernel as an "
     "opaque op"),
)

# The variables' raw values are compared on every call: CPython's os.environ
# keeps them in `_data`, so that costs three dict lookups.
ENV_DATA = getattr(os.environ, "_data", None)
ENV_KEYS = tuple(os.environ.encodekey(k) for k in (ENV_DISABLE, ENV_RUNG, ENV_CANARY)) if ENV_DATA is not None else ()


def env_raw():
    if ENV_DATA is not None:
        return (ENV_DATA.get(ENV_KEYS[0]), ENV_DATA.get(ENV_KEYS[1]), ENV_DATA.get(ENV_KEYS[2]))
    return (os.environ.get(ENV_DISABLE), os.environ.get(ENV_RUNG), os.environ.get(ENV_CANARY))


class PathCounter:
    """Calls down one path. `hit` is an itertools.count's C-level __next__:
    atomic under the GIL and ~50 ns, so the per-call path takes no lock.
    value() takes one number of the count itself and subtracts the numbers
    it took, so reading never races a hit."""

    __slots__ = ("hit", "_taken")

    def __init__(self):
        self.hit = itertools.count().__next__
        self._taken = 0

    def value(self) -> int:
        """Hits so far (call with the state's lock held)."""
        n = self.hit() - self._taken
        self._taken += 1
        return n

    def zero(self):
        self._taken = self.hit() + 1


class Settings:
    """The environment's settings, read by DispatchState.refresh()."""

    __slots__ = ("env", "disabled", "canary", "default_rung", "bad_rung")

    def __init__(self, env):
        self.env = env
        self.disabled = os.environ.get(ENV_DISABLE, "").strip().lower() in ON
        self.canary = os.environ.get(ENV_CANARY, "").strip().lower() not in OFF
        forced = os.environ.get(ENV_RUNG, "").strip()
        self.bad_rung = None
        try:
            self.default_rung = get_rung(forced).name if forced else DEFAULT_RUNG
        except (ValueError, TypeError):
            self.default_rung = DEFAULT_RUNG
            self.bad_rung = forced


DISABLED = ("fallback", f"disabled by {ENV_DISABLE}")
NO_DEVICE = ("fallback", "not a ROCm device")


class DispatchState:
    def __init__(self):
        self.lock = threading.RLock()
        self.replay = None
        self.on_reset = []  # what reset() also calls (the compiled entry's restore)
        self.lasting = {DISABLED: PathCounter(), NO_DEVICE: PathCounter()}
        self.reset()

    def reset(self):
        """Forget everything a process learned: stats, entries, loaded modules
        (forgotten, not unloaded: a captured graph may still launch them),
        canary verdicts, broken objects, warnings, the manifest, device archs."""
        with self.lock:
            for c in self.lasting.values():
                c.zero()
            self.counters = dict(self.lasting)
            self.entries = {}
            self.functions = {}
            self.modules = []
            self.verdicts = {}
            self.canary_runs = {}
            self.broken = {}
            self.warned = set()
            self.key_locks = {}
            self.manifest = None
            self.archs = {}
            for restore in self.on_reset:
                restore()
            self.refresh()

    def refresh(self):
        """Re-read the environment; drops every launch entry."""
        with self.lock:
            self.settings = s = Settings(env_raw())
            self.env = s.env
            self.entries.clear()
            if self.replay is not None:  # its entries, devices and the settings it compares with
                self.replay.clear(s.env, s.disabled, ENTRIES_MAX)
            if s.bad_rung is not None:
                self.warn_once(("env", s.bad_rung), f"ignoring {ENV_RUNG}={short(s.bad_rung)}: unknown rung; choose one of "
                           f"{', '.join(RUNGS)}",
                               fallback=False)

    def current(self) -> Settings:
        """The settings, re-read first if the environment changed."""
        if env_raw() != self.env:
            self.refresh()
        return self.settings

    # ---- dispatch_stats() ----
    def counter(self, key) -> PathCounter:
        c = self.counters.get(key)
        if c is None:
            with self.lock:
                c = self.counters.setdefault(key, PathCounter())
        return c

    def record(self, key):
        self.counter(key).hit()

    def stats(self) -> dict:
        with self.lock:
            values = {"/".join(k): c.value() for k, c in sorted(self.counters.items())}
        return {k: n for k, n in values.items() if n}

    def reset_stats(self):
        with self.lock:
            for c in self.counters.values():
                c.zero()

    # ---- entries ----
    def add_entry(self, key, entry):
        with self.lock:
            if len(self.entries) >= ENTRIES_MAX:
                self.entries.clear()  # (the compiled entry keeps its own bound)
            self.entries[key] = entry

    def key_lock(self, key):
        with self.lock:
            return self.key_locks.setdefault(key, threading.Lock())

    def warn_once(self, key, message, fallback=True):
        """A RuntimeWarning, once per key for the life of the state, pointing at the caller's line
        (the first frame outside this package and torch: caller_stacklevel)."""
        with self.lock:
            if key in self.warned:
                return
            self.warned.add(key)
        tail = "; using the torch fallback (torch.relu's own kernel and results on this device)" if fallback else ""
        warnings.warn(f"relu_flydsl: {message}{tail}", RuntimeWarning, caller_stacklevel())


PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep  # importlib.import_module's frames


def _inside(filename: str) -> bool:
    """A frame of this package, of torch (an autograd or torch.library call on the way) or of
    importlib's Python modules (import_module on the way of an import)."""
    path = os.path.abspath(filename)
    if path.startswith(PACKAGE_DIR) or path.startswith(IMPORTLIB_DIR):
        return True
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    return torch_file is not None and path.startswith(os.path.dirname(os.path.abspath(torch_file)) + os.sep)


def _skipped(filename: str) -> bool:
    """A frame warnings.warn skips without counting it in stacklevel: the import machinery's
    own (<frozen importlib._bootstrap>, CPython's _is_internal_filename)."""
    return "importlib" in filename and "_bootstrap" in filename


def caller_stacklevel() -> int:
    """warnings.warn's stacklevel, for a warning issued by this function's caller, that names the
    first frame outside this package and torch: the line of the user's code that called into the
    package (relu(), warmup(), a layer's forward ...), whatever path inside led to the warning,
    or that imported it (a setting read at import: the import machinery's frames between are
    skipped, and not counted, as warnings.warn skips them). Runs only when a warning is issued."""
    frame, level = sys._getframe(1), 1  # level 1: the frame calling warnings.warn
    while _inside(frame.f_code.co_filename):
        back = frame.f_back
        while back is not None and _skipped(back.f_code.co_filename):
            back = back.f_back
        if back is None:
            break
        frame, level = back, level + 1
    return level


STATE = DispatchState()
