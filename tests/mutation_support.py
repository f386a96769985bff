"""The mutation check: the ladder post's four ways a kernel passed an output
check and was still wrong, plus an off-by-one predicate, each applied as a
patch to a COPY of the package, run through the copy's public relu() on the
virtual gfx950 with the same checks the vgpu suites apply. Then dispatch,
planner and hot-path mutants (DISPATCH_MUTANTS: edits a reviewer hunting for
untested lines would try), each run against the scenarios of
tests/vgpu/test_hot_path.py and test_fast_fallback.py until the first one fails. Then check mutants
(CHECK_MUTANTS): a check of the tree weakened in place, one real test run.

A copy is `torch-ext/relu_flydsl/` with `flash_relu_rocm/` resolved, written to
a temporary folder under its own package name (and its own torch.library
namespace), so the real tree is never touched and the real package stays
loaded beside it.

Patches are anchored by meaning: a function named by its qualified name and,
inside it, a snippet compared as a syntax tree (ast_patch), so reformatting,
comments or a moved line do not retire a mutant. A patch whose function is
gone, or whose snippet does not match the expected number of times, fails the
run loudly instead of testing unmutated code.
"""

import ast
import functools
import importlib
import inspect
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

import c_anchor
from mutant_types import CheckMutant, Mutant
import vgpu_support as S

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch-ext" / "relu_flydsl"


# ---- anchors by meaning ----------------------------------------------------
# An AST patch names a function by its qualified name ("Canary.__init__",
# "build.relu_v1_naive" for a nested kernel, or a module constant) and the code
# to change by a snippet that is parsed and compared as a syntax tree
# (positions ignored). The snippet must match the stated number of times in
# that function (once unless said), and the function must exist, or the run fails.
def _dump(node) -> str:
    return ast.dump(node, annotate_fields=True, include_attributes=False)


@functools.lru_cache(maxsize=8)
def parse(text: str):
    """ast.parse, once per text: many mutants patch the same file (the trees are only read)."""
    return ast.parse(text)


def _is_expr(snippet: str) -> bool:
    try:
        ast.parse(textwrap.dedent(snippet).strip("\n"), mode="eval")
    except SyntaxError:
        return False
    return True


def _pattern(snippet: str, stmts: bool = False):
    """('expr', node) or ('stmts', [nodes]) for a source snippet (statements
    when `stmts`: a call replaced by `pass` is a statement, not an expression)."""
    text = textwrap.dedent(snippet).strip("\n")
    if stmts:
        return "stmts", ast.parse(text).body
    try:
        return "expr", ast.parse(text, mode="eval").body
    except SyntaxError:
        return "stmts", ast.parse(text).body


def find_function(tree, qualname: str):
    """The FunctionDef (or ClassDef/Assign for a named constant) at `qualname`."""
    scope, node = tree.body, None
    for part in qualname.split("."):
        node = None
        for n in scope:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part:
                node = n
            elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == part for t in n.targets):
                node = n
        if node is None:
            raise AssertionError(f"mutation target {qualname!r} not found (no {part!r}): update tests/mutation_support.py")
        scope = getattr(node, "body", [])
    return node


def _matches(func, snippet: str, stmts: bool = False):
    """[(first node, last node)] of every place `snippet` occurs inside func."""
    kind, pat = _pattern(snippet, stmts)
    found = []
    if kind == "expr":  # a node of another type is never dumped (most of a function's nodes)
        want = _dump(pat)
        found = [(n, n) for n in ast.walk(func) if type(n) is type(pat) and _dump(n) == want]
    else:
        want, types = [_dump(p) for p in pat], [type(p) for p in pat]
        for n in ast.walk(func):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(n, field, None)
                if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                    continue
                for i in range(len(body) - len(want) + 1):
                    run = body[i:i + len(want)]
                    if [type(s) for s in run] == types and [_dump(s) for s in run] == want:
                        found.append((body[i], body[i + len(want) - 1]))
    return found


def _offset(lines, lineno, col):
    return sum(len(l) for l in lines[:lineno - 1]) + len(lines[lineno - 1].encode()[:col].decode())


def ast_patch(text: str, qualname: str, old: str, new: str, where: str = "", count: int = 1) -> str:
    """`text` with the `count` occurrences of `old` inside `qualname` replaced by
    `new` (a statement replacement is re-indented to the statement's column;
    an expression replacement is parenthesized)."""
    func = find_function(parse(text), qualname)
    found = _matches(func, old, stmts=not _is_expr(new))
    if len(found) != count:
        raise AssertionError(f"mutation patch for {where or qualname} matches {len(found)} times in {qualname} "
                             f"(expected exactly {count}): {old!r}; update tests/mutation_support.py")
    lines = text.splitlines(keepends=True)
    changed = text
    for first, last in sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset), reverse=True):
        start = _offset(lines, first.lineno, first.col_offset)
        end = _offset(lines, last.end_lineno, last.end_col_offset)
        if isinstance(first, ast.stmt):
            indent = " " * first.col_offset
            body = textwrap.dedent(new).strip("\n") or "pass"
            replacement = ("\n" + indent).join(body.splitlines())
        else:
            replacement = f"({new})"
        changed = changed[:start] + replacement + changed[end:]
    parse(changed)  # the mutant is still Python
    assert changed != text
    return changed


def apply_patch(path: Path, patch):
    """A patch is (file, qualname, old snippet, new snippet[, count]): anchored
    by syntax tree inside a named function (ast_patch), never by text; in a C
    file (the compiled entry) by function and tokens (c_anchor.c_patch)."""
    qualname, old, new, *count = patch[1:]
    if path.suffix == ".c":
        path.write_text(c_anchor.c_patch(path.read_text(), qualname, old, new, *count))
        return
    path.write_text(ast_patch(path.read_text(), qualname, old, new, path.name, *count))


_PLAN_VEC = "pick_vec(numel, dtype, rung.max_vec(dtype), x_addr, y_addr)"
MUTANTS = (
    Mutant(
        "straddling-predicate", "case 1: one predicate bit covers an 8-element vector straddling the end",
        (("flash_relu_rocm/plan.py", "plan", _PLAN_VEC, f"rung.max_vec(dtype) if not rung.buffer else {_PLAN_VEC}"),),
    ),
    Mutant(
        "over-launch", "case 2: (numel + block*vec - 1) // block*vec, 64x the blocks for bf16",
        (("flash_relu_rocm/plan.py", "plan", "-(-n // tile)", "(n + rung.block * vec - 1) // rung.block * vec"),),
    ),
    Mutant(
        "max-size-default", "case 3a: make_buffer_tensor's max_size left at True (num_records 0xFFFFFFFF)",
        (("flash_relu_rocm/v4_buffer.py", "build_buffer_kernel.relu_buffer",
          "fx.rocdl.make_buffer_tensor(X, max_size=False)", "fx.rocdl.make_buffer_tensor(X)"),
         ("flash_relu_rocm/v4_buffer.py", "build_buffer_kernel.relu_buffer",
          "fx.rocdl.make_buffer_tensor(Y, max_size=False)", "fx.rocdl.make_buffer_tensor(Y)")),
        rebuild=("v4", "v5"),  # the rungs build_buffer_kernel builds (BUFFER_RUNGS, defined below)
    ),
    Mutant(
        "buffer-straddle", "case 3b: buffer rungs without the vector-width rule",
        (("flash_relu_rocm/plan.py", "plan", _PLAN_VEC, f"rung.max_vec(dtype) if rung.buffer else {_PLAN_VEC}"),),
    ),
    Mutant(
        "off-by-one", "not in the post: v1's in-bounds test `<` -> `<=`",
        (("flash_relu_rocm/v1_naive.py", "build.relu_v1_naive", "bid * block + tid < numel",
          "bid * block + tid <= numel"),),
        rebuild=("v1",),
    ),
)


def _m(name, why, rel, qualname, old, new, kill, count=1):
    return Mutant(name, why, ((rel, qualname, old, new) + ((count,) if count != 1 else ()),), (kill,))


# The compiled entry's questions to libtorch (torch_decides) are checked against torch's own answers
# before it loads (_compiled_entry._bind_queries), which refuses a mutated one. A guard mutant skips
# that check too, so that the scenarios themselves must catch the wrong answer.
_ANSWERS_UNCHECKED = ("_compiled_entry.py", "_check_answers", "got != want", "False")


def _guard(name, why, old, new, *kill):
    return Mutant(name, why, (("_compiled_entry.c", "torch_decides", old, new), _ANSWERS_UNCHECKED), kill)


_D, _L, _O, _S, _P = "_dispatch.py", "_launch.py", "_objects.py", "_state.py", "flash_relu_rocm/plan.py"
_E = "_compiled_entry.c"  # the compiled entry (C, c_anchor.c_patch)
_KERNARG = "uint64_t kernarg[4] = {xp, (uint32_t)numel, yp, (uint32_t)numel};"
DISPATCH_MUTANTS = (
    _m("hot-overlap-in-elements", "compiled entry: overlap computed in elements, not bytes",
       _E, "serve", "(uint64_t)numel * (xt.dtype.bits / 8)", "(uint64_t)numel", "overlap_in_bytes"),
    _m("hot-no-device-switch", "compiled entry: launches for a tensor not on the current device without switching there",
       _E, "serve", "current != device && (err = set_device(device)) != 0", "0", "other_device"),
    _m("split-error-untaken", "launch_all: only the last launch's error of a split kept",
       _L, "launch_all", "error = error or failed", "error = failed", "split_launch_fails_in_the_middle"),
    _m("dense-out-accepted", "dispatcher: a dense non-contiguous out takes the kernel when x is contiguous",
       _D, "fallback_reason", "x.is_contiguous() and out.is_contiguous()", "x.is_contiguous()",
       "dense_noncontiguous_out"),
    _m("plan-x-alignment-only", "planner: the vector width checks x's alignment, not out's",
       _P, "plan", _PLAN_VEC, "pick_vec(numel, dtype, rung.max_vec(dtype), x_addr)", "misaligned_out"),
    _m("hot-out-layout-unchecked", "compiled entry: out's contiguity not checked",
       _E, "serve", "|| !contiguous(&yt)", "", "dense_noncontiguous_out"),
    _m("hot-x-layout-unchecked", "compiled entry: x's contiguity not checked with out=",
       _E, "serve", "|| !contiguous(&xt) ||", "||", "dense_noncontiguous_x"),
    _m("hot-key-x-alignment-twice", "compiled entry: entry looked up with x's alignment for out too",
       _E, "serve", "(xp & 15) << 4 | (yp & 15)", "(xp & 15) << 4 | (xp & 15)", "misaligned_out"),
    _m("entry-key-x-alignment-twice", "dispatcher: entries keyed with x's alignment for out too",
       _D, "_entry", "y_addr & 15", "x_addr & 15", "misaligned_out"),
    _m("hot-dtype-unchecked", "compiled entry: out's dtype not compared with x's",
       _E, "serve", "dtype_key(yt.dtype) != dt ||", "", "hostile_out_on_the_hot_path"),
    _m("hot-shape-unchecked", "compiled entry: shapes not compared (same numel passes)",
       _E, "serve", "!same_shape(&xt, &yt) ||", "", "hostile_out_on_the_hot_path"),
    _guard("hot-grad-unchecked", "compiled entry: x requiring grad served (no autograd graph)",
           'if (requires_grad(impl_of(xt))) return "x requires grad";', "", "hostile_out_on_the_hot_path",
           "new_out_on_the_hot_path"),
    _m("hot-env-unread", "compiled entry: kill switch / forced rung not re-read",
       _E, "serve", "|| !env_current()", "", "kill_switch_on_the_hot_path"),
    _m("hot-error-swallowed", "compiled entry: launch error returned but not raised",
       _E, "serve", "if (err) {", "if (0) {", "hot_failed_launch"),
    _m("hot-pointers-swapped", "compiled entry: x and out passed in the wrong order",
       _E, "serve", _KERNARG, _KERNARG.replace("{xp, (uint32_t)numel, yp", "{yp, (uint32_t)numel, xp"),
       "overlap_in_bytes"),
    _m("hot-default-stream", "compiled entry: launches on stream 0, not torch's current stream",
       _E, "serve", "void *stream = stream_of(device);", "void *stream = NULL;", "overlap_in_bytes"),
    _m("dispatch-default-stream", "first call: launches on stream 0, not the tensor's device's current stream",
       _D, "_launch_entry", "info.stream", "0", "overlap_in_bytes"),
    _m("hot-uncounted", "compiled entry: dispatch_stats() not counted",
       _E, "serve", "return count(hit, out);", "return out;", "overlap_in_bytes"),
    _m("launch-return-code-dropped", "launch(): hipModuleLaunchKernel's return code dropped",
       _L, "launch", "return err", "return 0", "first_launch_fails"),
    _m("launch-error-left-pending", "launch(): a failed launch's error not taken (hipGetLastError)",
       _L, "launch", "_hip.clear_last_error()", "pass", "first_launch_fails"),
    _m("launch-config-grid-dropped", "launch_all: the null stream's launch config made for one block",
       _L, "launch_all", "config(chunk.grid, block)", "config(1, block)", "null_stream"),
    _m("entry-config-grid-dropped", "compiled entry: an entry's launch made for one block",
       _E, "add", "e->config.gridDimX = (unsigned)grid;", "e->config.gridDimX = 1;", "null_stream"),
    _m("hot-ex-on-any-stream", "compiled entry: hipDrvLaunchKernelEx (null stream) used for every stream",
       _E, "serve", "stream == NULL && launch_ex != NULL", "launch_ex != NULL", "overlap_in_bytes"),
    _m("launch-error-unraised", "dispatcher: a launch error not raised",
       _D, "_launch_entry", "_launch_failed(error, p, sum(c.numel for c in p.launches))", "pass",
       "first_launch_fails"),
    _m("split-offset-in-elements", "launch_all: a split chunk's offset in elements, not bytes",
       _L, "launch_all", "chunk.start * esize", "chunk.start", "split_launch_fails_in_the_middle"),
    _m("split-entry-on-hot-path", "dispatcher: split plans handed to the fast path (single-launch only)",
       _D, "run", "entry.single", "True", "split_launch_fails_in_the_middle"),
    _m("hot-key-without-device", "compiled entry: entries looked up without the tensor's device",
       _E, "serve", "Key k = {numel, device,", "Key k = {numel, 0,", "other_device"),
    _m("entry-key-without-device", "dispatcher: entries keyed without the device",
       _D, "_entry", "(rung, torch_dtype, numel, x_addr & 15, y_addr & 15, device)",
       "rung, torch_dtype, numel, x_addr & 15, y_addr & 15, 0", "other_device"),
    _m("dispatch-no-device-switch", "dispatcher: launches for another device's tensor without switching there",
       _D, "_launch_entry", "info.current", "True", "other_device"),
    _m("load-on-current-device", "first use: module loaded on the current device, not the tensor's",
       _D, "_ready", "_on_device(device, info.current, _objects.function, rung, dtype, vec, device)",
       "_on_device(device, True, _objects.function, rung, dtype, vec, device)", "other_device"),
    _m("hot-in-place-refused", "compiled entry: out=x counted as an overlap",
       _E, "serve", "xp != yp && xp < yp + nbytes", "xp < yp + nbytes", "in_place"),
    _m("hot-overlap-adjacent", "compiled entry: overlap test off by one (adjacent buffers refused)",
       _E, "serve", "yp < xp + nbytes", "yp <= xp + nbytes", "overlap_in_bytes"),
    _m("sha256-unchecked", "code objects loaded without their sha256 check",
       _O, "read_verified", "hashlib.sha256(data).hexdigest() != e.get('sha256')", "False", "corrupt_object"),
    _guard("hot-out-grad-unchecked", "compiled entry: out requiring grad written",
           'if (requires_grad(impl_of(yt))) return "out requires grad";', "", "hostile_out_on_the_hot_path"),
    _m("hot-any-arch", "compiled entry: serves any arch from a gfx950 entry",
       _E, "serve", "if (!devices[device].gfx950) {", "if (0) {", "other_arch"),
    _m("dispatch-any-arch", "dispatcher: the arch not checked",
       _D, "fallback_reason", "info.arch != SUPPORTED_ARCH", "False", "other_arch_general_path"),
    _m("dispatch-kill-switch-ignored", "dispatcher: RELU_FLYDSL_DISABLE not honoured",
       _D, "fallback_reason", "STATE.current().disabled", "False", "kill_switch_on_the_hot_path"),
    _m("fast-unbounded", "compiled entry: its table not bounded by the state's ENTRIES_MAX",
       _E, "add", "if (n_entries >= entries_max) clear_table();", "", "entries_bounded"),
    _m("plan-buffer-limit-in-elements", "planner: the descriptor's byte limit compared with elements",
       _P, "fits_one_launch",
       "ok and numel * esize <= limits.max_buffer_bytes and (last_index + vec) * esize - 1 <= limits.max_buffer_bytes",
       "ok and numel <= limits.max_buffer_bytes and (last_index + vec) - 1 <= limits.max_buffer_bytes",
       "buffer_split_by_bytes"),
    # the fast path off gfx950 (the torch fallback) and for relu(x) (tests/vgpu/test_fast_fallback.py)
    _m("fallback-uncounted", "compiled entry: its torch fallback not counted in dispatch_stats()",
       _E, "fallback", "return count(hit, r);", "return r;", "fallback_served_by_the_fast_path"),
    _m("fallback-not-fast", "compiled entry: every call off a ROCm device left to the general path",
       _E, "serve", "return fallback(x, out, disabled ? disabled_hit : off_hit);", "goto general;",
       "fallback_served_by_the_fast_path"),
    _m("fallback-kill-switch-skipped", "compiled entry: the kill switch not counted first",
       _E, "serve", "disabled ? disabled_hit : off_hit", "off_hit", "fallback_kill_switch"),
    _m("torch-input-uncounted", "dispatcher: an input only torch serves (sparse, nested, ...) not counted",
       _D, "torch_input", "STATE.record(('fallback', _inputs.why_torch(x, out) or 'torch input'))", "pass",
       "fallback_leaves_torch_inputs_to_the_general_path"),
    _m("fallback-arch-reason-lost", "compiled entry: another arch counted as no ROCm device",
       _E, "serve", "disabled ? disabled_hit : devices[device].arch_hit", "disabled ? disabled_hit : off_hit",
       "fallback_kill_switch"),
    _guard("fast-accepts-subclass", "compiled entry: a tensor subclass x taken as a plain tensor",
           "(PyObject *)Py_TYPE(x) != tensor_type", "!PyObject_TypeCheck(x, (PyTypeObject *)tensor_type)",
           "fallback_leaves_torch_inputs_to_the_general_path"),
    _guard("fast-accepts-subclass-out", "compiled entry: a tensor subclass out taken as a plain tensor",
           "(PyObject *)Py_TYPE(out) != tensor_type", "!PyObject_TypeCheck(out, (PyTypeObject *)tensor_type)",
           "fallback_leaves_torch_inputs_to_the_general_path"),
    _guard("fast-mode-unchecked", "compiled entry: a dispatch mode not left to torch",
           'if (dispatch_modes() != 0) return "a dispatch mode";', "", "fallback_leaves_torch_inputs_to_the_general_path"),
    _guard("fast-transform-unchecked", "compiled entry: a torch.func transform not left to torch",
           'if (layers[0] != layers[1]) return "a torch.func transform";', "",
           "fallback_leaves_torch_inputs_to_the_general_path"),
    _m("fallback-dtype-unchecked", "compiled entry: bool, complex and other dtypes handed to torch's relu",
       _E, "serve", "if (!plain_dtype(dt)) goto general; if (out != Py_None && (yt.device.device_type",
       "if (out != Py_None && (yt.device.device_type", "fallback_bad_input"),
    _m("fallback-rung-unchecked", "compiled entry: an unknown rung accepted off gfx950",
       _E, "serve", "if (rung < 0) goto general;", "", "fallback_bad_input"),
    _m("fallback-torch-error-raised", "compiled entry: torch's refusal (autograd, overlap) raised as torch's error",
       _E, "fallback", "if (out != Py_None && PyErr_ExceptionMatches(PyExc_RuntimeError)) {", "if (0) {",
       "fallback_bad_input"),
    _guard("fast-inference-out-unchecked", "compiled entry: an inference-tensor out not refused before writing",
           'if (is_inference(yt)) return "out is an inference tensor";', "", "fallback_bad_input"),
    _m("new-layout-unchecked", "compiled entry: relu(x) of a strided x launched over its raw memory",
       _E, "serve", "out == Py_None ? !contiguous(&xt) :", "out == Py_None ? 0 :", "new_out_on_the_hot_path"),
    _guard("hot-neg-unchecked", "compiled entry: a neg-bit view's raw memory (which holds -x) launched",
           'if (is_neg(xt)) return "x is a neg-bit view";', "", "new_out_on_the_hot_path"),
    _guard("hot-out-neg-unchecked", "compiled entry: a neg-bit out's raw memory (which holds -out) written",
           'if (is_neg(yt)) return "out is a neg-bit view";', "", "neg_out_on_the_hot_path"),
    _m("fast-miss-to-torch", "compiled entry: a gfx950 call without a ready entry served by torch (no first use)",
       _E, "serve", "if (found == NULL) goto general;", "if (found == NULL) return fallback(x, out, off_hit);",
       "misaligned_out"),  # a new alignment on a device the entry knows: its first use
    _m("sha256-missing-unchecked", "code objects: an entry with no or an empty sha256 loaded unchecked",
       _O, "read_verified", "hashlib.sha256(data).hexdigest() != e.get('sha256')",
       "e.get('sha256') and hashlib.sha256(data).hexdigest() != e.get('sha256')", "entry_without_sha256"),
    _m("sha256-mismatch-forgotten", "code objects: a sha256 mismatch not remembered (a repaired file loads)",
       _O, "function", "STATE.broken[bkey] = str(e)", "pass", "sha256_mismatch_is_remembered"),
    _m("manifest-any-arch", "code objects: a manifest for another arch accepted",
       _O, "_read_manifest", "manifest.get('arch') != ARCH", "False", "manifest_for_another_arch"),
    _m("kernarg-size-unchecked", "code objects: an entry's kernarg_size not compared with the runtime's 28 bytes",
       _O, "entry", "e.get('kernarg_size') != KERNARG.size", "False", "kernel_arguments_not_the_runtimes"),
    _m("kernarg-fifth-argument-accepted", "code objects: an entry with a fifth kernel argument accepted",
       _O, "entry", "args != KERNARG_LAYOUT", "args[:4] != KERNARG_LAYOUT", "kernel_arguments_not_the_runtimes"),
    _m("fresh-out-alignment-unchecked", "compiled entry: relu(x) launches the aligned entry into a misaligned empty_like",
       _E, "serve", "if (yp & 15) {", "if (0) {", "fresh_out_misaligned"),
    _m("new-like-compact-strides", "compiled entry: relu(x)'s output made with compact strides, not x's",
       _E, "new_like", "const int64_t *strides = t->strides;", "const int64_t *strides = NULL;",
       "new_out_like_the_general_path"),
    _m("new-like-one-dtype", "compiled entry: relu(x)'s output allocated as the first served dtype",
       _E, "new_like", "shim_dtype[i],", "shim_dtype[0],", "new_out_like_the_general_path"),
    _m("hot-numel-short", "compiled entry: the kernel told one element fewer than numel",
       _E, "serve", _KERNARG, "uint64_t kernarg[4] = {xp, (uint32_t)numel - 1, yp, (uint32_t)numel - 1};",
       "overlap_in_bytes"),
    _m("hot-error-left-pending", "compiled entry: a failed launch's error not taken (hipGetLastError)",
       _E, "serve", "if (err) get_last_error();", "", "hot_failed_launch"),
    _m("hot-out-other-device", "compiled entry: out on another device than x launched into",
       _E, "serve", "out == Py_None ? !contiguous(&xt) : device_of(&yt) != device",
       "out == Py_None ? !contiguous(&xt) : 0", "out_on_another_device"),
    _m("launch-ex-assumed", "launch: the null stream takes hipDrvLaunchKernelEx even where the runtime lacks it",
       _L, "prepare", "stream == 0 and launch_ex is not None", "stream == 0", "null_stream_without_launch_ex"),
    # the compiled entry on every device and through every switch (test_entry_devices, test_entry_switches)
    _m("entry-kill-switch-unchecked", "compiled entry: the kill switch not checked on the gfx950 path",
       _E, "serve", "if (disabled || dt < 0) goto general;", "if (dt < 0) goto general;",
       "kill_switch_checked_by_the_entry"),
    _m("kill-switch-case-sensitive", "settings: the kill switch compared without lower-casing",
       _S, "Settings.__init__", "os.environ.get(ENV_DISABLE, '').strip().lower()",
       "os.environ.get(ENV_DISABLE, '').strip()", "kill_switch_spellings"),
    _m("entry-device-restored-on-success-only", "compiled entry: the current device restored only after a "
       "successful launch", _E, "serve", "if (current != device && set_device(current) != 0)",
       "if (!err && current != device && set_device(current) != 0)", "entry_failed_launch_restores_the_device"),
    _m("entry-device-error-left-pending", "compiled entry: a failed hipGetDevice/hipSetDevice's error left pending",
       _E, "hip_failed", "get_last_error();", "", "entry_failed_set_device"),
    _m("entry-key-align-ignored", "compiled entry: keys equal whatever their alignment byte",
       _E, "key_equal", "&& a->align == b->align", "", "entry_alignments_apart"),
    _m("entry-named-x-to-shim", "compiled entry: a named x's output allocated through the shim (its names lost)",
       _E, "new_like", "(has_names == NULL || !has_names(impl_of(tensor_of(x))))", "1",
       "entry_named_x_allocates_with_empty_like"),
    _m("entry-has-names-unchecked", "compiled entry: libtorch's has_names bound without checking its answers",
       "_compiled_entry.py", "_allocate_with", "answers != want or want != (False, True)", "False",
       "entry_has_names_checked_before_use"),
    _m("entry-output-leaked", "compiled entry: new_like never deletes the shim's handle (every output leaks)",
       _E, "new_like", "delete_tensor(handle);", "", "entry_output_freed"),
    _m("entry-device-of-zero", "compiled entry: device_of reads a ROCm tensor's device as 0",
       _E, "device_of", "return t->device.device_id;", "return 0;", "entry_serves_every_device"),
    _m("entry-new-like-device-zero", "compiled entry: relu(x)'s output allocated on device 0 whatever x's device",
       _E, "new_like", "t->device.device_id, &handle", "0, &handle", "entry_serves_every_device"),
    _m("entry-stream-unchecked", "compiled entry: a device learned whatever its stream query gives",
       _E, "device", "if ((uint64_t)(uintptr_t)s != torch_stream) return PyLong_FromUnsignedLongLong((uint64_t)(uintptr_t)s);",
       "", "entry_learns_each_devices_stream"),
    _m("entry-learn-stream-current-only", "learn(): the entry's stream compared with torch's on the current device only",
       "_compiled_entry.py", "learn", "stream != info.stream", "info.current and stream != info.stream",
       "entry_learns_each_devices_stream"),
    _m("entry-add-after-settings-change", "add(): an entry made ready before the settings changed handed over after",
       "_compiled_entry.py", "_still_ready", "STATE.entries.get(entry.key) is not entry or s.disabled", "False",
       "kill_switch_checked_by_the_entry"),
    _m("unload-unpublished", "unload(): relu() not told, it keeps calling the unloaded entry",
       "_compiled_entry.py", "unload", "_publish()", "pass", "unload_as_the_general_path"),
    _m("unload-warning-fallback", "unload(): the warning says every call takes torch's fallback",
       "_compiled_entry.py", "unload", "False", "True", "unload_as_the_general_path"),
)
# Further catalogues, one module an area, each beside the scenarios that kill its mutants:
# a module's MUTANTS (patched copies), SCENARIOS (name -> scenario, as the scenario files'),
# KNOWN_BUGS and CHECK_MUTANTS (weakened checks; CheckMutant is defined below, so they are
# added there).
AREA_MODULES = ("mutants_entry", "mutants_general", "mutants_status", "mutants_check", "mutants_release")


def _areas():
    import importlib

    return [importlib.import_module(name) for name in AREA_MODULES]


ALL_MUTANTS = MUTANTS + DISPATCH_MUTANTS + tuple(m for area in _areas() for m in area.MUTANTS)
UNMUTATED = Mutant("unmutated", "the copy as it is", ())
BY_NAME = {m.name: m for m in ALL_MUTANTS + (UNMUTATED,)}
assert len(BY_NAME) == len(ALL_MUTANTS) + 1, "mutant names must be unique"
TEXT_ANCHORED = [m.name for m in ALL_MUTANTS if any(len(p) < 4 for p in m.patches)]  # no qualname: refused


def _tag(mutant: Mutant, prefix: str = "") -> str:
    return prefix + re.sub(r"\W", "_", mutant.name)


def make_copy(mutant: Mutant, root: Path, build_entry: bool = True) -> str:
    """Write the patched copy under `root` as package relu_flydsl_mut_<name>; return its name.
    build_entry=False leaves a C mutant's binary unbuilt (for a look at the patched source only)."""
    tag = _tag(mutant)
    name = f"relu_flydsl_mut_{tag}"
    dst = root / name
    if dst.exists():
        shutil.rmtree(dst)
    # symlinks=False (the default) copies flash_relu_rocm/ itself, not the link
    shutil.copytree(PACKAGE, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert not (dst / "flash_relu_rocm").is_symlink()
    # its own torch.library namespace, and the version a built variant carries
    apply_patch(dst / "_ops.py", ("_ops.py", "_UNIQUE_ID", "'dev'", f"'mut_{tag}'"))
    import relu_flydsl

    version = int(relu_flydsl.__version__)
    apply_patch(dst / "_version.py", ("_version.py", "_STAMPED", "None", str(version)))  # as the build stamps it
    if not (dst / "metadata.json").exists():
        (dst / "metadata.json").write_text(f'{{"version": {version}}}\n')
    for patch in mutant.patches:
        apply_patch(dst / patch[0], patch)
    if build_entry and _own_entry(mutant):
        build_copy_entry(dst)
    return name


# A copy that loads its own compiled entry builds it at ENTRY_OPT, not the shipped -O2: what
# is judged is its behaviour, and gcc's optimizer was most of a C mutant's time. The unmutated
# copy is built so too, so its passing run vouches for that build (the suite runs the shipped one).
ENTRY_OPT = "-O0"


def _own_entry(mutant: Mutant) -> bool:
    return mutant is UNMUTATED or any(patch[0].endswith(".c") for patch in mutant.patches)


def build_copy_entry(dst: Path):
    from unittest import mock

    from flash_relu_rocm import build

    flags = tuple(ENTRY_OPT if f == "-O2" else f for f in build.ENTRY_FLAGS)
    assert flags != build.ENTRY_FLAGS, f"no -O2 in the entry's flags {build.ENTRY_FLAGS}"
    with mock.patch.object(build, "ENTRY_FLAGS", flags):
        build.update_entry(dst / "code_objects", dst / "_compiled_entry.c", strict=False)


_made = {}  # (root, mutant name) -> whether its compiled entry is built


def copy_of(mutant: Mutant, root: Path, build_entry: bool = True) -> str:
    """make_copy once per mutant and root: the patch check looks at the copy the run imports."""
    key = (str(root), mutant.name)
    if key not in _made:
        make_copy(mutant, root, build_entry=False)
        _made[key] = False
    name = _tag(mutant, "relu_flydsl_mut_")
    if build_entry and not _made[key] and _own_entry(mutant):
        build_copy_entry(root / name)
    _made[key] = _made[key] or build_entry
    return name


def rebuild_objects(pkg, rungs, dtypes=("float32", "bfloat16")):
    """Compile the copy's patched rungs into its own code_objects/ (the serve
    path runs code objects only), with the build's own functions."""
    import json

    from flash_relu_rocm import build

    registry = importlib.import_module(pkg.__name__ + ".flash_relu_rocm.registry")
    objects_dir = Path(pkg.__file__).resolve().parent / "code_objects"
    manifest = json.loads((objects_dir / build.MANIFEST).read_text())
    toolchain = build._load_tool("toolchain")
    codeobj = build._load_tool("vgpu/codeobj")
    objdump = toolchain.find_tool("llvm-objdump")
    with build._BuildEnv(toolchain.compile_env()):
        for rung_name in rungs:
            rung = registry.RUNGS[rung_name]
            for dtype in dtypes:
                vec = 1
                while vec <= rung.max_vec(dtype):
                    data = build.compile_kernel(rung, dtype, vec)
                    entry = build.describe(data, rung, dtype, vec, codeobj, objdump)
                    (objects_dir / entry["file"]).write_bytes(data)
                    manifest["kernels"][build.kernel_key(rung_name, dtype, vec)] = entry
                    vec *= 2
    (objects_dir / build.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def import_copy(mutant: Mutant, root: Path):
    """The patched copy as an imported package (root goes first on sys.path),
    its code objects rebuilt where the mutant patches a kernel."""
    name = copy_of(mutant, root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]
    importlib.invalidate_caches()
    pkg = importlib.import_module(name)
    assert Path(pkg.__file__).resolve().parent == (root / name).resolve()
    if mutant.rebuild:
        rebuild_objects(pkg, mutant.rebuild)
    return pkg


# ---- the checks ------------------------------------------------------------
from relu_flydsl.flash_relu_rocm.registry import RUNGS as _REGISTRY  # noqa: E402

RUNGS = tuple(_REGISTRY)
BUFFER_RUNGS = tuple(name for name, r in _REGISTRY.items() if r.buffer)
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


def run_mutant(dev, pkg, mutant: Mutant, want=frozenset()) -> Result:
    """cases() against the copy until one fails and the checks in `want` have all fired
    (a mutant needs only the cases that show it caught as expected); every case when none fails."""
    failing = {}
    n_cases = 0
    for rung, model, dtype, n in cases():
        fired = run_case(dev, pkg.relu, rung, model, dtype, n)
        n_cases += 1
        if fired:
            failing[f"{rung}-{model}-{str(dtype)[6:]}-{n}"] = fired
            if set(want) <= {check for f in failing.values() for check in f}:
                break
    return Result(mutant, n_cases, failing)


def scenarios() -> dict:
    """name -> scenario: tests/vgpu/test_hot_path.py's, test_fast_fallback.py's,
    test_objects_and_runtime.py's, test_entry_devices.py's, test_entry_switches.py's and
    test_entry_allocation.py's."""
    import test_entry_allocation as EA
    import test_entry_devices as ED
    import test_entry_switches as ES
    import test_fast_fallback as F
    import test_hot_path as H
    import test_objects_and_runtime as O

    tables = (H.SCENARIOS, F.SCENARIOS, O.SCENARIOS, ED.SCENARIOS, ES.SCENARIOS, EA.SCENARIOS)
    tables += tuple(area.SCENARIOS for area in _areas())
    names = [name for table in tables for name in table]
    assert len(set(names)) == len(names), "scenario names must be unique"
    return {name: f for table in tables for name, f in table.items()}


def known_bugs() -> dict:
    """Scenarios expected to fail until a bug is fixed (each scenario file's KNOWN_BUGS)."""
    import test_entry_devices as ED
    import test_hot_path as H

    extra = {k: v for area in _areas() for k, v in area.KNOWN_BUGS.items()}
    return {**H.KNOWN_BUGS, **ED.KNOWN_BUGS, **extra}


def run_scenarios(dev, pkg, mutant: Mutant, names, first_only=True) -> Result:
    """scenarios() against the copy, each with its own
    monkeypatch (undone after it), stopping at the first that fails unless
    first_only is False. Any exception counts: the suite's test would fail."""
    import pytest

    import test_hot_path as H

    table = scenarios()
    failing = {}
    n = 0
    for name in names:
        n += 1
        dev.reset()
        # the vgpu fixture's straddle model, whatever a kernel mutant's case left: under "start"
        # a buffer access straddling num_records is written whole, hiding a short numel
        dev.straddle = "dword"
        with pytest.MonkeyPatch.context() as mp:
            for var in ("RELU_FLYDSL_DISABLE", "RELU_FLYDSL_RUNG"):
                mp.delenv(var, raising=False)
            try:
                table[name](H.Ctx(pkg, dev, mp))
                status = pkg._compiled_entry.status()
                assert status["loaded"], f"the scenario unloaded the compiled entry: {status['reason']}"
            except (Exception, pytest.fail.Exception) as e:
                first = (str(e).strip().splitlines() or [""])[0][:200]
                failing[name] = {name: f"{type(e).__name__}: {first}"}
            finally:
                pkg._state.STATE.reset()
                dev.reset()
        if failing and first_only:
            break
    return Result(mutant, n, failing)


# ---- check mutants: weakened checks, run in this process --------------------
@functools.lru_cache(maxsize=None)
def _real(f: str) -> str:  # every check mutant looks through all of sys.modules' files
    return os.path.realpath(f)


def _modules_of(path: Path):
    path = _real(str(path))
    mods = []
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and f.endswith(".py") and _real(f) == path:
            mods.append(m)
    return mods


def apply_live(cm: CheckMutant, setattr_) -> int:
    """Replace cm's target in every loaded module of its file (and every other
    module's reference to it) through `setattr_` (monkeypatch.setattr).
    Returns how many objects were replaced; 0 fails."""
    path = ROOT / cm.file
    text = path.read_text()
    changed = ast_patch(text, cm.qualname, cm.old, cm.new, where=cm.file)
    target = find_function(ast.parse(changed), cm.qualname)
    first = min([target.lineno] + [d.lineno for d in getattr(target, "decorator_list", [])])
    lines = changed.splitlines(keepends=True)
    src = textwrap.dedent("".join(lines[first - 1:target.end_lineno]))
    code = compile("\n" * (first - 1) + src, str(path), "exec")
    parts = cm.qualname.split(".")
    mods = _modules_of(path)
    assert mods, f"{cm.file} is not imported: the kill test's module must import it"
    replaced = 0
    for mod in mods:
        ns = {}
        exec(code, mod.__dict__, ns)
        value = ns[parts[-1]]
        owner = mod
        for p in parts[:-1]:
            owner = getattr(owner, p)
        old_value = getattr(owner, parts[-1])
        setattr_(owner, parts[-1], value)
        replaced += 1
        if len(parts) == 1:  # `from x import f` copies elsewhere
            for other in list(sys.modules.values()):
                d = getattr(other, "__dict__", None)
                if other is mod or not isinstance(d, dict):
                    continue
                for k, v in list(d.items()):
                    if v is old_value and callable(v):
                        setattr_(other, k, value)
    return replaced


_CHILD = '''
import faulthandler, pathlib, sys, tempfile
faulthandler.enable()
sys.path[:0] = sys.argv[3:]
import pytest
import json
import mutation_support as M
spec = json.loads(sys.argv[1])
cm = M.CheckMutant(**dict(spec, kill=tuple(spec["kill"])))
fn, params, fixtures = M.kill_test(cm)
with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
    given = {"monkeypatch": mp, "tmp_path": pathlib.Path(tmp)}
    unknown = [p for p in fixtures if p not in given]
    assert not unknown, f"a child process offers the fixtures {sorted(given)}, not {unknown}"
    if sys.argv[2] == "1":
        assert M.apply_live(cm, mp.setattr) > 0
    try:
        fn(**dict(params, **{p: given[p] for p in fixtures}))
    except (Exception, pytest.fail.Exception) as e:
        print(f"FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}", flush=True)
        sys.exit(1)
print("PASSED", flush=True)
'''


def run_in_child(cm: CheckMutant, mutate: bool, timeout: int = 600):
    """cm's kill test run in a child process (faulthandler on), mutated where `mutate`:
    (failed, what it said). A crash there (a signal, as damaged native code gives) is a
    failure of the kill test, reported with the child's last lines, and never takes this
    process with it."""
    import subprocess

    tests = Path(__file__).resolve().parent
    paths = [str(tests)] + [str(d) for d in sorted(tests.iterdir()) if d.is_dir() and not d.name.startswith("_")]
    import dataclasses
    import json

    spec = json.dumps(dataclasses.asdict(cm))
    r = subprocess.run([sys.executable, "-c", _CHILD, spec, "1" if mutate else "0", *paths],
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=dict(os.environ))
    lines = (r.stdout + r.stderr).strip().splitlines()
    said = next((ln for ln in lines if ln.startswith(("FAILED", "PASSED"))), None)
    if r.returncode == 0 and said == "PASSED":
        return False, "passed"
    if r.returncode == 1 and said and said.startswith("FAILED"):
        return True, said[len("FAILED "):]
    why = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
    fatal = next((i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")), None)
    if fatal is not None:  # faulthandler's report: the error, then the stack, innermost first
        lines = [ln.strip() for ln in lines[fatal:] if ln.startswith("Fatal") or ln.strip().startswith("File")]
    return True, f"the child process died ({why}): " + " | ".join(lines[-8:] if fatal is None else lines[:6])[:800]


def kill_test(cm: CheckMutant):
    module, name, params = cm.kill
    mod = importlib.import_module(module)
    fn = getattr(mod, name)
    # "@expr": a value of the test module (a parametrize value there)
    params = {k: eval(v[1:], mod.__dict__) if isinstance(v, str) and v.startswith("@") else v for k, v in params.items()}
    return fn, params, [p for p in inspect.signature(fn).parameters if p not in params]


_C, _H, _R = "torch-ext/relu_flydsl/_canary.py", "torch-ext/relu_flydsl/_hip.py", "torch-ext/relu_flydsl/_relu.py"
_DD, _REL, _B = "torch-ext/relu_flydsl/_dispatch.py", "tools/release.py", "flash_relu_rocm/build.py"
_CK, _G, _BM, _RS = "benchmarks/ladder/checks.py", "benchmarks/ladder/gpu.py", "benchmarks/benchmark.py", "benchmarks/relu_semantics.py"
_CHK = "test_check_mutants"
CHECK_MUTANTS = (
    # the canary: its input, its planner check, its guards, its expected bits
    CheckMutant("canary-specials-head-only", "canary: the special values not repeated in the partial tail",
                _C, "input_bits", "bits[n - diagonal.numel():] = diagonal", "",
                ("test_canary", "test_every_special_value_sits_at_every_lane_position", {})),
    CheckMutant("canary-specials-one-lane", "canary: the specials visit lane positions 0 and 1 only",
                _C, "input_bits", "special[(i // vec + i % vec) % k]", "special[(i // vec + i % 2) % k]",
                ("test_canary", "test_every_special_value_sits_at_every_lane_position", {})),
    CheckMutant("canary-specials-part-of-buffer", "canary: the special values fill only the first vector",
                _C, "input_bits", "torch.arange(min(n, k * vec))", "torch.arange(min(n, vec))",
                ("test_canary", "test_every_special_value_sits_at_every_lane_position", {})),
    CheckMutant("canary-plans-aligned-only", "canary: the planner check skips misaligned pointers",
                _C, "check_plans", "(0, esize)", "(0,)",
                (_CHK, "test_canary_plan_check_sees_misaligned_pointers", {})),
    CheckMutant("canary-guards-fixed", "canary: guards of 256 bytes, smaller than a tile",
                _C, "Canary.__init__", "guard = max(GUARD, -(-tile_bytes // GUARD) * GUARD)", "guard = GUARD",
                (_CHK, "test_canary_guards_are_at_least_a_tile", {})),
    CheckMutant("canary-expect-inf-is-nan", "canary expected bits: -inf read as a NaN (kept)",
                _C, "expected_bits", "mag > d.exp_all_ones", "mag >= d.exp_all_ones",
                ("test_canary", "test_canary_input_and_bit_rule", {"dtype": "@torch.float32"})),
    CheckMutant("canary-expect-negative-zero", "canary expected bits: -0.0 turned into +0.0",
                _C, "expected_bits", "(bits < 0) & (mag != 0) & ~is_nan", "(bits < 0) & ~is_nan",
                ("test_canary", "test_canary_input_and_bit_rule", {"dtype": "@torch.bfloat16"})),
    CheckMutant("canary-expect-integers-as-floats", "canary expected bits: integers judged by the float rule",
                _C, "expected_bits", "not d.floating", "False",
                ("test_canary", "test_expected_bits_for_integer_dtypes", {})),
    CheckMutant("canary-expect-smallest-nan-as-number", "canary expected bits: the smallest negative NaN zeroed",
                _C, "expected_bits", "mag > d.exp_all_ones", "mag > d.exp_all_ones + 1",
                ("test_canary", "test_canary_input_and_bit_rule", {"dtype": "@torch.float32"})),
    CheckMutant("canary-expect-negative-nan-zeroed", "canary expected bits: negative NaNs zeroed",
                _C, "expected_bits", "(bits < 0) & (mag != 0) & ~is_nan", "(bits < 0) & (mag != 0)",
                ("test_canary", "test_canary_input_and_bit_rule", {"dtype": "@torch.bfloat16"})),
    CheckMutant("canary-default-stream", "canary: launched on stream 0, not the tensor's device's current stream",
                _DD, "_ready", "_run_canary(function, vkey, info.stream, info.current)",
                "_run_canary(function, vkey, 0, info.current)",
                ("test_launch_streams", "test_first_call_and_its_canary_use_the_tensors_devices_stream", {})),
    # capture states, canary on and off, loaded and not-yet-loaded modules
    CheckMutant("capture-invalidated-as-none", "capture: an invalidated capture read as not capturing",
                _DD, "_capturing", "_hip.capture_status(stream) != _hip.CAPTURE_NONE",
                "_hip.capture_status(stream) == _hip.CAPTURE_ACTIVE",
                (_CHK, "test_first_call_on_an_invalidated_capture_falls_back", {})),
    CheckMutant("capture-query-error-as-none", "capture: a failing hipStreamIsCapturing read as not capturing",
                _H, "capture_status", "if err:\n    clear_last_error()\n    return CAPTURE_ACTIVE",
                "if err:\n    clear_last_error()\n    return CAPTURE_NONE",
                (_CHK, "test_a_failing_capture_query_counts_as_capturing", {})),
    CheckMutant("capture-unchecked-canary-off", "capture: with the canary off, modules load inside a capture",
                _DD, "_ready", "_capturing(info.stream)", "canary and _capturing(info.stream)",
                ("test_graphs", "test_first_call_inside_capture_falls_back", {"canary": "0"})),
    CheckMutant("capture-unchecked-canary-on", "capture: with the canary on, the canary runs inside a capture",
                _DD, "_ready", "_capturing(info.stream)", "not canary and _capturing(info.stream)",
                ("test_graphs", "test_first_call_inside_capture_falls_back", {"canary": "1"})),
    CheckMutant("capture-query-error-left-pending", "capture: a failing hipStreamIsCapturing's error left pending",
                _H, "capture_status", "clear_last_error()", "pass",
                (_CHK, "test_a_failing_capture_query_counts_as_capturing", {})),
    CheckMutant("loaded-module-skips-canary", "canary turned on: a module loaded with it off is served unverified",
                _DD, "_ready", "if function is not None and not canary:\n    return function, None",
                "if function is not None:\n    return function, None",
                (_CHK, "test_loaded_module_is_verified_before_a_capture_uses_it", {})),
    # streams: the tensor's device's current stream
    CheckMutant("stream-of-current-device", "launch stream: the current device's, not the tensor's device's",
                _DD, "device_info", "_current_stream(index)", "_current_stream(torch.cuda.current_device())",
                (_CHK, "test_device_info_takes_the_tensors_devices_stream", {})),
    # in place: same address and same strides
    CheckMutant("same-view-address-only", "in place: out at x's address with other strides taken as out=x",
                _R, "_same_view", "out.data_ptr() == _inputs.read_ptr(x) and out.stride() == x.stride()",
                "out.data_ptr() == _inputs.read_ptr(x)",
                (_CHK, "test_out_at_xs_address_with_other_strides_is_not_in_place", {})),
    # the release tool's breaking-change check; the build's staleness check
    CheckMutant("release-surface-dropped", "release: dtypes not compared",
                _REL, "SURFACES", '(("all", "public symbols"), ("dtypes", "dtypes"), ("rungs", "rungs"))',
                '(("all", "public symbols"), ("rungs", "rungs"))',
                ("test_release_tool", "test_each_removal_alone_is_a_breaking_change", {"surface": "dtypes"})),
    CheckMutant("release-rungs-dropped", "release: rungs not compared",
                _REL, "SURFACES", '(("all", "public symbols"), ("dtypes", "dtypes"), ("rungs", "rungs"))',
                '(("all", "public symbols"), ("dtypes", "dtypes"))',
                ("test_release_tool", "test_each_removal_alone_is_a_breaking_change", {"surface": "rungs"})),
    CheckMutant("release-symbols-dropped", "release: public symbols not compared",
                _REL, "SURFACES", '(("all", "public symbols"), ("dtypes", "dtypes"), ("rungs", "rungs"))',
                '(("dtypes", "dtypes"), ("rungs", "rungs"))',
                ("test_release_tool", "test_each_removal_alone_is_a_breaking_change", {"surface": "all"})),
    CheckMutant("release-removals-ignored", "release: removals not counted as changes",
                _REL, "check_versioning", "if removed:\n    changes.append(f'removed {what} {removed}')", "",
                ("test_release_tool", "test_each_removal_alone_is_a_breaking_change", {"surface": "all"})),
    CheckMutant("release-missing-surface-unchecked", "release: a record without a surface compared as no change",
                _REL, "surface_changes", "key not in m", "False",
                ("test_release_tool", "test_a_release_record_without_a_surface_cannot_be_compared", {})),
    CheckMutant("entry-sha256-unchecked", "compiled entry: the binary loaded without its sha256 check",
                "torch-ext/relu_flydsl/_compiled_entry.py", "_verified_bytes",
                "hashlib.sha256(data).hexdigest() != meta['sha256']", "False",
                ("test_compiled_entry", "test_a_damaged_binary_is_not_loaded", {}), child=True),
    CheckMutant("stale-sha256-skipped", "build: stale() does not check the objects' sha256",
                _B, "stale", "if hashlib.sha256(data).hexdigest() != entry.get('sha256'):\n"
                "    return f'{key}: {path.name} does not match its sha256 in the manifest'", "",
                ("test_code_objects", "test_damaged_objects_are_stale", {"damage": "flip"})),
    # the benchmarks: each workload proves its own calls took the kernel path
    CheckMutant("window-cumulative", "ladder: the timed window's path read from cumulative stats",
                _CK, "window_failures", "delta = stats_delta(stats_before, stats_after)", "delta = dict(stats_after)",
                ("test_ladder", "test_window_failures_read_this_windows_calls_only", {})),
    CheckMutant("window-ignores-strays", "ladder: calls outside the expected keys ignored",
                _CK, "window_failures", "stray = {k: v for k, v in delta.items() if k not in keys}", "stray = {}",
                ("test_ladder", "test_window_failures_read_this_windows_calls_only", {})),
    CheckMutant("gpu-mode-no-window-check", "ladder: GPU mode does not check the timed window",
                _G, "time_case", "case_failed.update(checks.window_failures(stats_before, stats_after, expected))",
                "pass", ("test_ladder", "test_gpu_mode_refuses_a_rung_whose_timed_calls_fell_back", {})),
    CheckMutant("workload-cumulative", "benchmark.py: a workload's path read from cumulative stats",
                _BM, "require_flydsl_path", "{k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}",
                "dict(after)", ("test_workload_path_check", "test_a_workload_reads_its_own_calls_not_earlier_ones", {})),
    CheckMutant("check-cumulative", "ladder: kernel_path_ran reads cumulative stats",
                _CK, "kernel_path_ran", "delta = stats_delta(stats_before, stats_after)", "delta = dict(stats_after)",
                ("test_benchmarks", "test_flydsl_path_ran", {})),
    # the torch-baseline value check
    CheckMutant("value-ignores-zeros", "relu_semantics: elements where either side is zero not compared",
                _RS, "value_failures", "both = ~xn & ~on", "both = ~xn & ~on & (out != 0) & (bit_rule(x) != 0)",
                ("test_ladder", "test_value_check_refuses_wrong_baselines", {"bad": "@_zeros", "expect": "values differ", "dtype": "float32"})),
    CheckMutant("value-magnitudes", "relu_semantics: magnitudes compared (sign flips accepted)",
                _RS, "value_failures", "out[both] != bit_rule(x)[both]", "out[both].abs() != bit_rule(x)[both].abs()",
                ("test_ladder", "test_value_check_refuses_wrong_baselines", {"bad": "@_sign_flip", "expect": "values differ", "dtype": "float32"})),
    CheckMutant("value-abs-ok", "relu_semantics: a baseline computing |x| accepted",
                _RS, "value_failures", "out[both] != bit_rule(x)[both]",
                "(out[both] != bit_rule(x)[both]) & (out[both] != x[both].abs())",
                ("test_ladder", "test_value_check_refuses_wrong_baselines", {"bad": "@_abs", "expect": "values differ", "dtype": "float32"})),
    CheckMutant("value-nan-dropped-ok", "relu_semantics: NaNs turned into numbers accepted",
                _RS, "value_failures", "lost = int((xn & ~on).sum())", "lost = 0",
                ("test_ladder", "test_value_check_refuses_wrong_baselines", {"bad": "@_nan_dropped", "expect": "did not give NaN", "dtype": "float32"})),
    # the canary's judge: bits, the sign of zero included (-0.0 where +0.0 is due is wrong)
    CheckMutant("canary-judge-zero-sign-or", "canary: an output zero of either sign accepted where one is due",
                _C, "Canary.judge", "out != expect", "(out != expect) & ((out | expect) != torch.iinfo(out.dtype).min)",
                ("test_canary_zero_sign", "test_negative_zero_for_negative_inputs_fails_the_canary",
                 {"dtype": "@torch.float32", "key": "v5/float32/x4", "hexdigits": 8})),
    # verify_digest's pin: the whole fingerprint
    CheckMutant("verify-pin-prefix", "verify_digest: expected= compared as a prefix of the fingerprint",
                "torch-ext/relu_flydsl/_verify.py", "verify_digest", "fingerprint != expected",
                "not fingerprint.startswith(expected)", ("test_verify_pin", "test_a_pin_is_the_whole_fingerprint", {})),
    # _hip: a miss is not remembered (a runtime loaded later is found)
    CheckMutant("hip-miss-remembered", "_hip: no HIP runtime found once is taken as none for good",
                _H, "_bind", "lib = _find_loaded()\nif lib is None:\n    raise HipUnavailable(MISSING)",
                "lib = None if getattr(_bind, 'missed', False) else _find_loaded()\nif lib is None:\n"
                "    _bind.missed = True\n    raise HipUnavailable(MISSING)",
                ("test_hip_lookup", "test_a_runtime_loaded_after_a_miss_is_found", {})),
)
CHECK_MUTANTS += tuple(m for area in _areas() for m in area.CHECK_MUTANTS)
CHECK_BY_NAME = {m.name: m for m in CHECK_MUTANTS}
assert len(CHECK_BY_NAME) == len(CHECK_MUTANTS) and not set(CHECK_BY_NAME) & set(BY_NAME), "mutant names must be unique"
