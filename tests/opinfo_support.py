"""torch's `nn.functional.relu` OpInfo as a library, and the pieces tests/vgpu/test_opinfo.py
needs to hold relu() to what torch's test_ops.py asserts for that OpInfo.

    relu_opinfo()          the OpInfo of the installed torch (sample_inputs, reference_inputs,
                           dtypes, supports_out, supports_forward_ad, supports_fwgrad_bwgrad, ...)
    KERNEL_DTYPES          what the kernel serves (flash_relu_rocm/dtypes.py)
    kernel_serves(x, out)  whether relu(x, out) is a call the kernel path must serve
    present(dev, t)        t copied into the virtual gfx950's memory, its layout kept
    Calls                  counts one relu() call per path (dispatch_stats()) and its launches
    same_values(a, b)      torch's comparison of a result it decides: values, NaN equal to NaN
    assert_rule(y, x)      the bit rule, for a result the kernel made
"""

import functools
import sys
import types
import unittest
import warnings

import torch

from reference import SERVED, assert_relu_bits

KERNEL_DTYPES = SERVED  # float32, float16, bfloat16, int8
FLOAT_KERNEL_DTYPES = tuple(d for d in KERNEL_DTYPES if d.is_floating_point)


@functools.lru_cache(maxsize=None)
def relu_opinfo():
    """torch.testing._internal's OpInfo for nn.functional.relu. common_utils imports
    `expecttest` only for its TestCase base class and an ACCEPT flag (golden-output tests): where
    it is not installed, a stand-in with exactly those two names lets the OpInfo database import."""
    stand_in = None
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = sys.modules["expecttest"] = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
    frozen = torch.backends.flags_frozen()
    try:
        with warnings.catch_warnings():  # common_utils adds a filter at import
            from torch.testing._internal.common_methods_invocations import op_db
    finally:
        # common_utils also freezes torch.backends' flags at import, for torch's own test runs;
        # the rest of this suite keeps its process as it was
        if not frozen:  # the flag disable_global_flags() cleared, where flags_frozen() reads it
            torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
        if stand_in is not None and sys.modules.get("expecttest") is stand_in:
            del sys.modules["expecttest"]  # common_utils holds it; nothing else sees it
    assert torch.backends.flags_frozen() == frozen

    (op,) = [o for o in op_db if o.name == "nn.functional.relu" and not o.variant_test_name]
    return op


def dense(t) -> bool:
    """No gaps, no overlapping elements, in some dimension order."""
    expected = 1
    for size, stride in sorted((p for p in zip(t.shape, t.stride()) if p[0] != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def kernel_serves(x, out=None) -> bool:
    """relu(x, out) on the virtual gfx950 is a call the kernel must serve (docs/semantics.md,
    "Which path runs"): a served dtype, elements, no neg bit, x contiguous (and out too), or
    x dense with out of x's strides."""
    if type(x) is not torch.Tensor or x.dtype not in KERNEL_DTYPES or x.numel() == 0 or x.is_neg():
        return False
    if out is not None and (out.is_neg() or out.dtype != x.dtype or out.shape != x.shape):
        return False
    y = x if out is None else out
    if x.is_contiguous() and y.is_contiguous():
        return True
    return dense(x) and y.stride() == x.stride()


def span(t) -> int:
    """Elements from t's first to its last addressed element, inclusive (0 when empty)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def present(dev, t, name="x", device=0, offset_elems=0):
    """A copy of t in the virtual device's memory (a guarded buffer of `device`), with t's shape
    and strides (gaps, overlapping and broadcast strides kept), not requiring grad: the memory
    from t's first to its last element is copied, gaps included."""
    n = span(t)
    flat, _ = dev.guarded((max(n, 1),), t.dtype, offset_elems=offset_elems, name=name, device=device)
    if n:
        with torch.no_grad():
            flat[:n].copy_(t.detach().as_strided((n,), (1,)))
    return flat.as_strided(t.shape, t.stride())


class Calls:
    """One relu() call's path: dispatch_stats() counts it, the virtual device records its launches."""

    def __init__(self, pkg, dev):
        self.pkg, self.dev = pkg, dev

    def __enter__(self):
        self.pkg.reset_dispatch_stats()
        self.launches = len(self.dev.launches)
        return self

    def __exit__(self, *exc):
        self.stats = dict(self.pkg.dispatch_stats())
        self.launched = self.dev.launches[self.launches:]
        return False

    def kernel(self, dtype, what=""):
        """Served by the kernel, counted once under its dtype, and it launched."""
        name = str(dtype).removeprefix("torch.")
        want = {f"flydsl/v5/{name}": 1}
        assert self.stats == want, f"{what}: expected the kernel path {want}, dispatch_stats() says {self.stats}"
        assert self.launched, f"{what}: counted as the kernel's but nothing launched on the virtual gfx950"

    def torch(self, reason=None, what=""):
        """Served by torch's kernel, counted once with its reason (`reason`: the text after
        'fallback/', or None for any), and nothing launched."""
        keys = list(self.stats)
        assert len(keys) == 1 and self.stats[keys[0]] == 1 and keys[0].startswith("fallback/"), \
            f"{what}: expected one call counted as torch's, dispatch_stats() says {self.stats}"
        if reason is not None:
            assert keys[0] == f"fallback/{reason}", f"{what}: expected fallback/{reason}, got {keys[0]}"
        assert not self.launched, f"{what}: torch's path, yet {len(self.launched)} launch(es) on the virtual gfx950"

    def once(self, what=""):
        """Counted exactly once, on whichever path."""
        assert sum(self.stats.values()) == 1, f"{what}: expected one counted call, dispatch_stats() says {self.stats}"
        return next(iter(self.stats))


def same_values(actual, expected, what=""):
    """torch's own comparison for a result torch decides (test_ops' assertEqual): dtype, shape,
    device and values exactly, NaN equal to NaN."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, \
        f"{what}: {actual.dtype} {tuple(actual.shape)} vs torch's {expected.dtype} {tuple(expected.shape)}"
    assert actual.device == expected.device, f"{what}: on {actual.device}, torch's on {expected.device}"
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


def assert_rule(y, x, what=""):
    """A kernel-made result: the bit rule against x's bits."""
    assert y.dtype == x.dtype and y.shape == x.shape, f"{what}: {y.dtype} {tuple(y.shape)} for x {x.dtype} {tuple(x.shape)}"
    try:
        assert_relu_bits(y.detach(), x.detach())
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None


def same_bits(a, b) -> bool:
    """Equal shapes and equal bits (NaN payloads, -0.0 count), any dtype."""
    def raw(t):
        return t.detach().reshape(-1).clone(memory_format=torch.contiguous_format).view(torch.uint8)

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.numel() == 0 or torch.equal(raw(a), raw(b))
