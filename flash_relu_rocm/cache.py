"""Compile cache: one `CompiledFunction` per (rung, dtype, vec, block, unroll).

numel is a runtime argument, so this is a handful of kernels per process. The
per-call path is a dict lookup; `flyc.compile` runs once per key, under a
per-key lock, so concurrent first calls compile each kernel exactly once.
"""

import threading

from .registry import Rung

_compiled = {}
_locks = {}
_locks_guard = threading.Lock()
compile_counts = {}  # key -> number of times flyc.compile ran (tests assert 1)


def _placeholder(dtype: str, vec: int):
    # CPU tensors are compile placeholders for flyc.compile: it traces and
    # compiles without launching (a live device tensor would launch once).
    import torch

    return torch.empty(vec, dtype=getattr(torch, dtype))


def compiled(rung: Rung, dtype: str, vec: int):
    """The CompiledFunction for this rung/dtype/vec; compiles on first use.
    Call it as fn(x, y, grid, stream) with positional arguments only."""
    key = (rung.name, dtype, vec, rung.block, rung.unroll)
    fn = _compiled.get(key)
    if fn is not None:
        return fn
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        fn = _compiled.get(key)
        if fn is None:
            import flydsl.compiler as flyc

            launcher = rung.build(dtype, vec)
            ph = _placeholder(dtype, vec)
            fn = flyc.compile(launcher, ph, _placeholder(dtype, vec), 1, 0)
            compile_counts[key] = compile_counts.get(key, 0) + 1
            if fn is None:
                raise RuntimeError(
                    "flyc.compile returned no callable: COMPILE_ONLY is set in this process, "
                    "so kernels can be compiled but not launched"
                )
            _compiled[key] = fn
    return fn


def cached_keys():
    return sorted(_compiled)


def clear():
    """Forget every compiled kernel (tests only)."""
    _compiled.clear()
    compile_counts.clear()
