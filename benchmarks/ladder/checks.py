"""Correctness before any timing, and of the timed buffers afterwards.

- Rungs: the bit rule y = +0.0 if x < 0 else x, on the bits, exactly; guard regions of
  SENTINEL around the output untouched; the input unchanged; and the calls of THIS check or
  timing window took the rung's kernel path (dispatch_stats() before and after: the
  difference, never the cumulative counts, which earlier work also filled).
- torch: values as torch specifies relu (benchmarks/relu_semantics.py: max(x, 0) with
  +0.0 == -0.0, NaN exactly where x is NaN); where its bits depart from the bit rule, a note.
The inputs hold every special bit pattern of flash_relu_rocm/dtypes.py at the start, middle
and end of randn values.
"""

from flash_relu_rocm import dtypes as dtype_table

from .. import relu_semantics

SENTINEL = -7  # a value no relu can produce
GUARD = 8192   # elements of sentinel before and after every checked output
CHECK_SIZES = (1, 7, 8, 1000, 4257, 65539, 1 << 20)

bits = relu_semantics.bits            # the element bits as integers, flattened
bit_rule = relu_semantics.bit_rule    # y = +0.0 if x < 0 else x, on the bits


def _torch():
    import torch

    return torch


def special_values(dtype):
    """The dtype's special bit patterns as a tensor of that dtype."""
    torch = _torch()
    d = dtype_table.get(dtype)
    signed = [dtype_table.signed(u, d.width) for u in d.special]
    return torch.tensor(signed, dtype=getattr(torch, d.int_view)).view(getattr(torch, dtype))


def check_input(numel, dtype, device, seed=0):
    """Random values (randn; integers over their range) with the special values spliced
    in at the start, middle and end."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    t = getattr(torch, dtype)
    if t.is_floating_point:
        x = torch.randn(numel, generator=g, dtype=torch.float32).to(t)
    else:
        info = torch.iinfo(t)
        x = torch.randint(info.min, info.max + 1, (numel,), generator=g, dtype=t)
    sp = special_values(dtype)
    for start in (0, max(0, numel // 2 - len(sp) // 2), max(0, numel - len(sp))):
        k = min(len(sp), numel - start)
        x[start:start + k] = sp[:k]
    return x.to(device)


def guarded(numel, dtype, device):
    """(out, buf): out = buf[GUARD:GUARD+numel]; the rest of buf holds SENTINEL."""
    torch = _torch()
    buf = torch.full((numel + 2 * GUARD,), SENTINEL, dtype=getattr(torch, dtype), device=device)
    return buf[GUARD:GUARD + numel], buf


def _guard_and_input(x, buf, x_before):
    torch = _torch()
    fails, n = [], x.numel()
    sentinel = torch.full((GUARD,), SENTINEL, dtype=buf.dtype, device=buf.device)
    if not (torch.equal(bits(buf[:GUARD]), bits(sentinel)) and torch.equal(bits(buf[GUARD + n:]), bits(sentinel))):
        fails.append(f"numel {n}: guard region overwritten")
    if x_before is not None and not torch.equal(bits(x.reshape(-1)), bits(x_before.reshape(-1))):
        fails.append(f"numel {n}: input modified")
    return fails


def check_output(x, out, buf, x_before=None):
    """Failures (list of strings) of one call's result under the bit rule; [] when correct.
    This is the rungs' gate."""
    torch = _torch()
    fails = []
    n = x.numel()
    ref = bit_rule(x.reshape(-1))
    if not torch.equal(bits(out.reshape(-1)), bits(ref)):
        wrong = int((bits(out.reshape(-1)) != bits(ref)).sum())
        fails.append(f"numel {n}: {wrong} elements differ from the bit rule")
    return fails + _guard_and_input(x, buf, x_before)


def check_output_torch(x, out, buf, x_before=None, diff=None):
    """The torch baseline's check, as torch specifies relu: values equal to max(x, 0) with
    +0.0 == -0.0, NaN exactly where x is NaN, guards and input untouched. Where its bits
    differ from the bit rule (sign of zero, NaN payloads) `diff` (a Differences) counts it:
    a note, not a failure. Wrong values fail."""
    fails = relu_semantics.value_failures(x, out)
    if diff is not None and not fails:
        diff.add(x, out)
    return fails + _guard_and_input(x, buf, x_before)


def _run_checks(call, dtype, device, sizes, checker):
    fails = []
    for n in sizes:
        x = check_input(n, dtype, device, seed=n)
        x_before = x.clone()
        out, buf = guarded(n, dtype, device)
        try:
            call(x, out)
        except Exception as e:  # noqa: BLE001 - reported as a failure of this implementation
            fails.append(f"numel {n}: raised {type(e).__name__}: {str(e)[:200]}")
            continue
        if str(device) != "cpu":
            _torch().cuda.synchronize()
        fails += checker(x, out, buf, x_before)
    return fails


def check_impl(call, dtype, device, sizes=None):
    """Run call(x, out) on the check inputs under the bit rule; list of failures ([] = correct)."""
    return _run_checks(call, dtype, device, sizes or CHECK_SIZES, check_output)


def check_baseline(call, dtype, device, sizes=None):
    """(failures, Differences): the torch baseline on the same inputs, checked as torch
    specifies relu (check_output_torch); the Differences say where it departs from the bit rule."""
    diff = relu_semantics.Differences(dtype)
    fails = _run_checks(call, dtype, device, sizes or CHECK_SIZES,
                        lambda x, out, buf, xb: check_output_torch(x, out, buf, xb, diff))
    return fails, diff


def stats_delta(before, after):
    """{path: calls} made between two dispatch_stats() snapshots."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def kernel_path_ran(stats_before, stats_after, rung, dtype):
    """None if the calls between the two snapshots all took the kernel path of `rung` (at
    least one did), else why not."""
    key = f"flydsl/{rung}/{dtype}"
    delta = stats_delta(stats_before, stats_after)
    other = {k: v for k, v in delta.items() if k != key}
    if other:
        return f"calls took other paths: {other}"
    if delta.get(key, 0) == 0:
        return f"no call reached {key}"
    return None


def window_failures(stats_before, stats_after, expected):
    """{impl: why} for a timing window in which each rung `impl` of `expected`
    ({impl: (key, calls)}) made exactly `calls` calls on `key`, and nothing else ran.
    A path no rung expects (a fallback, another rung) fails every rung of the window:
    its calls cannot be told apart."""
    delta = stats_delta(stats_before, stats_after)
    keys = {key for key, _ in expected.values()}
    stray = {k: v for k, v in delta.items() if k not in keys}
    out = {}
    for impl, (key, calls) in expected.items():
        if stray:
            out[impl] = f"calls in the timing window took other paths: {stray}"
        elif delta.get(key, 0) != calls:
            out[impl] = f"{delta.get(key, 0)} of the window's {calls} calls were counted on {key}"
    return out
