"""The mutation check: the ladder post's four ways a kernel passed an output
check and was still wrong, plus an off-by-one predicate, each applied as a
textual patch to a COPY of the package, run through the copy's public relu()
on the virtual gfx950 with the same checks the vgpu suites apply. Then
dispatch, planner and hot-path mutants (DISPATCH_MUTANTS: edits a reviewer
hunting for untested lines would try), each run against the scenarios of
tests/test_hot_path.py until the first one fails.

A copy is `torch-ext/relu_flydsl/` with `flash_relu_rocm/` resolved, written to
a temporary folder under its own package name (and its own torch.library
namespace), so the real tree is never touched and the real package stays
loaded beside it. Every patch must match its source text exactly once: a
refactor that makes a patch miss fails loudly instead of testing unmutated code.
"""

import importlib
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

import vgpu_support as S

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch-ext" / "relu_flydsl"


@dataclass(frozen=True)
class Mutant:
    name: str
    post: str       # where the ladder post describes it
    patches: tuple  # (file inside the package, exact old text, new text)
    kill: tuple = ()  # test_hot_path scenarios to run (first failure catches); () = the kernel cases


_PLAN_VEC = "    vec = pick_vec(numel, dtype, rung.max_vec(dtype), x_addr, y_addr)\n"
MUTANTS = (
    Mutant(
        "straddling-predicate", "case 1: one predicate bit covers an 8-element vector straddling the end",
        (("flash_relu_rocm/plan.py", _PLAN_VEC,
          "    vec = rung.max_vec(dtype) if not rung.buffer else pick_vec(numel, dtype, rung.max_vec(dtype), x_addr, y_addr)\n"),),
    ),
    Mutant(
        "over-launch", "case 2: (numel + block*vec - 1) // block*vec, 64x the blocks for bf16",
        (("flash_relu_rocm/plan.py", "        launches.append(Launch(start, n, -(-n // tile)))\n",
          "        launches.append(Launch(start, n, (n + rung.block * vec - 1) // rung.block * vec))\n"),),
    ),
    Mutant(
        "max-size-default", "case 3a: make_buffer_tensor's max_size left at True (num_records 0xFFFFFFFF)",
        (("flash_relu_rocm/v4_buffer.py", "make_buffer_tensor(X, max_size=False)", "make_buffer_tensor(X)"),
         ("flash_relu_rocm/v4_buffer.py", "make_buffer_tensor(Y, max_size=False)", "make_buffer_tensor(Y)")),
    ),
    Mutant(
        "buffer-straddle", "case 3b: buffer rungs without the vector-width rule",
        (("flash_relu_rocm/plan.py", _PLAN_VEC,
          "    vec = rung.max_vec(dtype) if rung.buffer else pick_vec(numel, dtype, rung.max_vec(dtype), x_addr, y_addr)\n"),),
    ),
    Mutant(
        "off-by-one", "not in the post: v1's in-bounds test `<` -> `<=`",
        (("flash_relu_rocm/v1_naive.py", "in_bounds[0] = bid * block + tid < numel",
          "in_bounds[0] = bid * block + tid <= numel"),),
    ),
)


def _m(name, why, rel, old, new, kill):
    return Mutant(name, why, ((rel, old, new),), (kill,))


_R, _D, _P = "_relu.py", "_dispatch.py", "flash_relu_rocm/plan.py"
# Each patch anchors on a short, stable piece of text; when a refactor removes
# it, make_copy fails loudly (update the anchor, keep the mutant).
DISPATCH_MUTANTS = (
    # the mutation audit's five (issue 13)
    _m("hot-overlap-in-elements", "hot path: overlap computed in elements, not bytes",
       _R, "nbytes = numel * entry.esize", "nbytes = numel", "overlap_in_bytes"),
    _m("hot-no-device-switch", "hot path: launches for a tensor not on the current device without switching there",
       _R, "if dev.current:", "if True:", "other_device"),
    _m("split-error-untaken", "direct-launch path: no launch-error check after each launch of a split",
       _D, "direct(xp + offset, yp + offset, launch.numel, launch.grid, stream)\n",
       "direct(xp + offset, yp + offset, launch.numel, launch.grid, stream)\n            continue  # error not taken\n",
       "split_launch_fails_in_the_middle"),
    _m("dense-out-accepted", "dispatcher: a dense non-contiguous out takes the kernel when x is contiguous",
       _D, "if not (x.is_contiguous() and out.is_contiguous()):", "if not x.is_contiguous():",
       "dense_noncontiguous_out"),
    _m("plan-x-alignment-only", "planner: the vector width checks x's alignment, not out's",
       _P, _PLAN_VEC, "    vec = pick_vec(numel, dtype, rung.max_vec(dtype), x_addr)\n", "misaligned_out"),
    # more, line by line through relu()'s hot path, the dispatcher and the planner
    _m("hot-out-layout-unchecked", "hot path: out's contiguity not checked",
       _R, "            and out.is_contiguous()\n", "", "dense_noncontiguous_out"),
    _m("hot-x-layout-unchecked", "hot path: x's contiguity not checked",
       _R, "            and x.is_contiguous()\n", "", "dense_noncontiguous_x"),
    _m("hot-key-x-alignment-twice", "hot path: entry looked up with x's alignment for out too",
       _R, "xp & 15, yp & 15", "xp & 15, xp & 15", "misaligned_out"),
    _m("entry-key-x-alignment-twice", "dispatcher: entries keyed with x's alignment for out too",
       _D, "numel, x_addr & 15, y_addr & 15", "numel, x_addr & 15, x_addr & 15", "misaligned_out"),
    _m("hot-dtype-unchecked", "hot path: out's dtype not compared with x's",
       _R, "out.dtype is dt", "True", "hostile_out_on_the_hot_path"),
    _m("hot-shape-unchecked", "hot path: shapes not compared (same numel passes)",
       _R, "and x.shape == out.shape", "and True", "hostile_out_on_the_hot_path"),
    _m("hot-grad-unchecked", "hot path: x requiring grad with out= not refused",
       _R, "and not x.requires_grad", "and True", "hostile_out_on_the_hot_path"),
    _m("hot-env-unread", "hot path: kill switch / forced rung not re-read",
       _R, "if _env_raw() != d.settings.env:", "if False:", "kill_switch_on_the_hot_path"),
    _m("hot-error-swallowed", "hot path: launch error taken but not raised",
       _R, "error = d._take_error()", "error = d._take_error() and 0", "hot_failed_launch"),
    _m("hot-pointers-swapped", "hot path: x and out passed in the wrong order",
       _R, "entry.direct.launch(xp, yp, numel", "entry.direct.launch(yp, xp, numel", "overlap_in_bytes"),
    _m("hot-default-stream", "hot path: launches on stream 0, not torch's current stream",
       _R, "entry.grid, dev.stream)  # any rank", "entry.grid, 0)  # any rank", "overlap_in_bytes"),
    _m("hot-uncounted", "hot path: dispatch_stats() not counted",
       _R, "next(entry.count)", "pass  # uncounted", "overlap_in_bytes"),
    _m("first-launch-error-untaken", "first (public-call) launches: no launch-error check",
       _D, "        kernel(xf[launch.start : launch.stop], yf[launch.start : launch.stop], launch.grid, stream)\n",
       "        kernel(xf[launch.start : launch.stop], yf[launch.start : launch.stop], launch.grid, stream)\n"
       "        continue  # error not taken\n", "first_launch_fails"),
    _m("launch-error-unraised", "dispatcher: a taken launch error not raised",
       _D, "if error:\n        _launch_failed(error, entry.plan.rung", "if False:\n        _launch_failed(error, entry.plan.rung",
       "layer_failed_launch"),
    _m("split-offset-in-elements", "direct-launch path: a split chunk's offset in elements, not bytes",
       _D, "offset = launch.start * esize", "offset = launch.start", "split_launch_fails_in_the_middle"),
    _m("split-entry-on-hot-path", "dispatcher: split plans handed to the hot path (single-launch only)",
       _D, "if entry.single:\n            _fast[key] = entry", "if True:\n            _fast[key] = entry",
       "split_launch_fails_in_the_middle"),
    _m("hot-key-without-device", "hot path: entries looked up without the tensor's device",
       _R, "yp & 15, dev.index))", "yp & 15, 0))", "other_device"),
    _m("entry-key-without-device", "dispatcher: entries keyed without the device",
       _D, "numel, x_addr & 15, y_addr & 15, device)", "numel, x_addr & 15, y_addr & 15, 0)", "other_device"),
    _m("dispatch-no-device-switch", "dispatcher: launches for another device's tensor without switching there",
       _D, "_on_device(info.index, info.current, _launch,", "_on_device(info.index, True, _launch,", "other_device"),
    _m("hot-in-place-refused", "hot path: out=x counted as an overlap",
       _R, "if xp != yp and xp < yp + nbytes", "if xp < yp + nbytes", "in_place"),
    _m("hot-overlap-adjacent", "hot path: overlap test off by one (adjacent buffers refused)",
       _R, "and yp < xp + nbytes:", "and yp <= xp + nbytes:", "overlap_in_bytes"),
    _m("hot-entry-unlaunched", "hot path: serves an entry whose kernel never launched (no direct launcher yet)",
       _R, "if entry is not None and entry.direct:", "if entry is not None:", "first_launch_fails"),
    _m("hot-out-grad-unchecked", "hot path: out requiring grad not refused",
       _R, "and not out.requires_grad", "and True", "hostile_out_on_the_hot_path"),
    _m("hot-any-arch", "hot path: serves any arch from a gfx950 entry",
       _R, "dev is not None and dev.arch == _GFX950", "dev is not None", "other_arch"),
    _m("dispatch-any-arch", "dispatcher: the arch not checked",
       _D, "if info.arch != SUPPORTED_ARCH:", "if False:", "other_arch"),
    _m("dispatch-kill-switch-ignored", "dispatcher: RELU_FLYDSL_DISABLE not honoured",
       _D, "if settings.current().disabled:", "if False:", "kill_switch_on_the_hot_path"),
    _m("fast-unbounded", "dispatcher: the entry bound clears _entries but not the hot path's _fast",
       _D, "            _entries.clear()\n            _fast.clear()\n", "            _entries.clear()\n",
       "entries_bounded"),
    _m("plan-buffer-limit-in-elements", "planner: the descriptor's byte limit compared with elements",
       _P, "ok = ok and numel * esize <= limits.max_buffer_bytes and (last_index + vec) * esize - 1",
       "ok = ok and numel <= limits.max_buffer_bytes and (last_index + vec) - 1", "buffer_split_by_bytes"),
)
ALL_MUTANTS = MUTANTS + DISPATCH_MUTANTS
UNMUTATED = Mutant("unmutated", "the copy as it is", ())
BY_NAME = {m.name: m for m in ALL_MUTANTS + (UNMUTATED,)}
assert len(BY_NAME) == len(ALL_MUTANTS) + 1, "mutant names must be unique"


def _replace_once(path: Path, old: str, new: str):
    text = path.read_text()
    n = text.count(old)
    if n != 1:
        raise AssertionError(f"mutation patch for {path.name} matches {n} times (expected exactly 1): {old!r}; "
                             "the kernels changed: update the patch in tests/mutation_support.py")
    changed = text.replace(old, new)
    assert changed != text
    path.write_text(changed)


def make_copy(mutant: Mutant, root: Path) -> str:
    """Write the patched copy under `root` as package relu_flydsl_mut_<name>; return its name."""
    tag = re.sub(r"\W", "_", mutant.name)
    name = f"relu_flydsl_mut_{tag}"
    dst = root / name
    if dst.exists():
        shutil.rmtree(dst)
    # symlinks=False (the default) copies flash_relu_rocm/ itself, not the link
    shutil.copytree(PACKAGE, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert not (dst / "flash_relu_rocm").is_symlink()
    # its own torch.library namespace, and the version a built variant carries
    _replace_once(dst / "_ops.py", '_UNIQUE_ID = "dev"', f'_UNIQUE_ID = "mut_{tag}"')
    if not (dst / "metadata.json").exists():
        import relu_flydsl

        (dst / "metadata.json").write_text(f'{{"version": {int(relu_flydsl.__version__)}}}\n')
    for rel, old, new in mutant.patches:
        _replace_once(dst / rel, old, new)
    return name


def import_copy(mutant: Mutant, root: Path):
    """The patched copy as an imported package (root goes first on sys.path)."""
    name = make_copy(mutant, root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]
    importlib.invalidate_caches()
    pkg = importlib.import_module(name)
    assert Path(pkg.__file__).resolve().parent == (root / name).resolve()
    return pkg


# ---- the checks ------------------------------------------------------------
RUNGS = ("v1", "v2", "v3", "v4", "v5")
BUFFER_RUNGS = ("v4", "v5")
MODELS = ("dword", "whole", "start")
DTYPES = (torch.float32, torch.bfloat16)
SIZES = (1, 7, 8, 1023, 1024, 4257)  # test_vgpu_correctness's small sizes


def cases():
    """A representative subset of test_vgpu_correctness: every rung, every
    straddle model where the hardware range check runs, f32 and bf16, the small sizes."""
    for rung in RUNGS:
        for model in MODELS if rung in BUFFER_RUNGS else ("dword",):
            for dtype in DTYPES:
                for n in SIZES:
                    yield rung, model, dtype, n


def run_case(dev, relu, rung, model, dtype, n):
    """One guarded call of relu(x, out=out, rung=rung) and every check the vgpu
    suites make. Returns {check: first line of its failure} for the checks that fired."""
    from vgpu.device import DeviceError

    dev.reset()
    dev.straddle = model
    xbits = S.make_bits("random", n, dtype, seed=n * 7 + 6)
    x, xbuf = S.guarded_input(dev, xbits, dtype)
    out, obuf = dev.guarded((n,), dtype, name="out")
    fired = {}
    try:
        relu(x, out=out, rung=rung)
    except RuntimeError as e:  # the dispatcher raises when a launch fails (device stopped it)
        fired["launch"] = str(e)
    launched = list(dev.launches)

    def launched_here():
        assert launched, "relu() did not launch on the virtual device"

    def guards():
        S.assert_guards(obuf, out)
        S.assert_guards(xbuf, x)

    def input_unchanged():
        assert (S.tensor_bits(x) == xbits).all(), "input modified"

    checks = (
        ("launched", launched_here),
        ("device", dev.check),  # out-of-bounds / guard / straddle accesses, emulator errors
        ("grid", lambda: S.assert_exact_grids(launched)),
        ("bits", lambda: S.assert_bits(out, S.relu_bits(xbits, dtype))),
        ("written-once", lambda: S.assert_written_once(dev, out)),
        ("guards", guards),
        ("input", input_unchanged),
    )
    for name, check in checks:
        try:
            check()
        except (AssertionError, DeviceError) as e:
            fired[name] = (str(e).strip().splitlines() or [""])[0][:300]
    dev.reset()
    return fired


@dataclass
class Result:
    mutant: Mutant
    cases: int      # cases run
    failing: dict   # case id -> {check: message}

    @property
    def caught(self) -> bool:
        return bool(self.failing)

    def by_check(self) -> dict:
        """check -> number of cases it fired on, most first."""
        counts = {}
        for fired in self.failing.values():
            for check in fired:
                counts[check] = counts.get(check, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def describe(self) -> str:
        if not self.caught:
            return f"{self.mutant.name}: NOT CAUGHT ({self.cases} cases)"
        if self.mutant.kill:
            return f"{self.mutant.name}: by {', '.join(self.failing)}"
        checks = ", ".join(f"{c} {k}" for c, k in self.by_check().items())
        return f"{self.mutant.name}: {len(self.failing)}/{self.cases} cases, by {checks}"


def run_mutant(dev, pkg, mutant: Mutant) -> Result:
    failing = {}
    n_cases = 0
    for rung, model, dtype, n in cases():
        fired = run_case(dev, pkg.relu, rung, model, dtype, n)
        n_cases += 1
        if fired:
            failing[f"{rung}-{model}-{str(dtype)[6:]}-{n}"] = fired
    return Result(mutant, n_cases, failing)


def run_scenarios(dev, pkg, mutant: Mutant, names, first_only=True) -> Result:
    """test_hot_path's scenarios against the copy, each with its own
    monkeypatch (undone after it), stopping at the first that fails unless
    first_only is False. Any exception counts: the suite's test would fail."""
    import pytest

    import test_hot_path as H

    failing = {}
    n = 0
    for name in names:
        n += 1
        dev.reset()
        # FlyDSL's pending launch error is process-wide: one a mutant left
        # untaken must not fail the next mutant's scenario
        pkg._dispatch._take_error()
        with pytest.MonkeyPatch.context() as mp:
            for var in ("RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG"):
                mp.delenv(var, raising=False)
            try:
                H.SCENARIOS[name](H.Ctx(pkg, dev, mp))
            except (Exception, pytest.fail.Exception) as e:
                first = (str(e).strip().splitlines() or [""])[0][:200]
                failing[name] = {name: f"{type(e).__name__}: {first}"}
            finally:
                pkg.reset_dispatch_stats()
                dev.reset()
        if failing and first_only:
            break
    return Result(mutant, n, failing)
