#!/usr/bin/env python
"""The kernels' bit rule, torch's relu as torch specifies it, and what torch.relu does on a device.

    .venv/bin/python benchmarks/relu_semantics.py [--device cuda] [--json FILE]
        prints (and writes) what torch.relu and torch.clamp(min=0, out=) do on that device to
        -0.0, NaN payloads (quiet, signalling, negative) and denormals. An observation, never
        a failure.

The facts this module is built on:

- The kernels' specification is the bit rule `y = +0.0 if x < 0 else x`, on the bits:
  NaN payloads (quiet, signalling, negative), +-inf, -0.0 and denormals pass through unchanged.
  The ladder's rungs are gated on it exactly.
- torch.relu is a baseline, not that rule. Its sign of zero and NaN bits depend on device and size:
  - CPU (torch 2.13.0, checked): keeps -0.0, but its vectorized path rewrites some NaN payloads
    (bf16 NaNs in large tensors -> 0xFFFF; f16 signalling NaN quieted, 0x7C01 -> 0x7E01).
  - NVIDIA GPU (torch 2.11.0+cu130 on an H200, checked): -0.0 -> +0.0 (bf16, f16, f32), NaN
    payloads kept. The CUDA clamp kernel is `_isnan(v) ? v : ::max(v, 0)`; ROCm builds
    compile the same source.
  - AMD MI350X: the reference post ("Beating torch.relu with FlyDSL: A Hands-On Guide to
    Bandwidth-Bound Kernels") reports -0.0 kept. Not checked here: tests/hardware/test_hardware.py's
    observation test records what the user's ROCm torch does.
- So the torch baseline is checked as torch's relu is specified: values equal with +0.0 and -0.0
  counted equal, NaN exactly where the input is NaN (guards and input are the caller's checks).
  Where its bits differ from the bit rule (sign of zero, NaN payloads) that is counted and
  reported as a note, never a failure; a wrong value is a failure.

Pure torch and flash_relu_rocm/dtypes.py (the dtype table): no flydsl, no kernels, so it runs
on any machine with torch.
"""

import argparse
import json
import sys
from dataclasses import dataclass, field

from flash_relu_rocm import dtypes as _dtypes

INT_VIEW = {name: d.int_view for name, d in _dtypes.TABLE.items()}
WIDTH = {name: d.width for name, d in _dtypes.TABLE.items()}
DTYPES = tuple(n for n in _dtypes.DTYPES if _dtypes.TABLE[n].floating)  # the observation is about floats


def _torch():
    import torch

    return torch


def dtype_name(t):
    return str(t.dtype).removeprefix("torch.")


def bits(t):
    torch = _torch()
    return t.reshape(-1).view(getattr(torch, INT_VIEW[dtype_name(t)]))


def hexbits(v, dtype):
    return f"0x{v & ((1 << WIDTH[dtype]) - 1):0{WIDTH[dtype] // 4}X}"


def bit_rule(x):
    """y = +0.0 if x < 0 else x, on the bits (torch.where copies the selected element)."""
    torch = _torch()
    return torch.where(x < 0, torch.zeros_like(x), x)


def value_failures(x, out):
    """Failures of `out` as torch's relu is specified: [] when every value equals max(x, 0)
    with +0.0 == -0.0 and NaN exactly where x is NaN. Bits are not compared here."""
    torch = _torch()
    x, out = x.reshape(-1), out.reshape(-1)
    n = x.numel()
    xn, on = torch.isnan(x), torch.isnan(out)
    fails = []
    lost = int((xn & ~on).sum())
    if lost:
        fails.append(f"numel {n}: {lost} NaN inputs did not give NaN")
    made = int((on & ~xn).sum())
    if made:
        fails.append(f"numel {n}: {made} non-NaN inputs gave NaN")
    both = ~xn & ~on
    wrong = int((out[both] != bit_rule(x)[both]).sum())  # float compare: -0.0 == +0.0
    if wrong:
        fails.append(f"numel {n}: {wrong} values differ from max(x, 0)")
    return fails


def same_ignoring_zero_sign(a, b):
    """Elementwise: same bits, or both zeros of either sign. NaN bits must match."""
    return (bits(a) == bits(b)) | ((a.reshape(-1) == 0) & (b.reshape(-1) == 0))


@dataclass
class Differences:
    """Where a result that passed value_failures() differs from the bit rule on the bits.
    Add results with add(); the counts accumulate over calls."""

    dtype: str
    elements: int = 0
    neg_zero_inputs: int = 0
    neg_zero_to_pos: int = 0         # -0.0 -> +0.0
    neg_zero_outputs: int = 0        # +0.0 expected, -0.0 returned (e.g. a negative input)
    nan_inputs: int = 0
    nan_bits_changed: int = 0
    nan_examples: list = field(default_factory=list)  # ["0x7C01 -> 0x7E01", ...], at most 3
    other: int = 0                   # any other bit difference (cannot happen once values agree)

    def add(self, x, out):
        torch = _torch()
        x, out = x.reshape(-1), out.reshape(-1)
        xb, ob, rb = bits(x), bits(out), bits(bit_rule(x))
        diff = ob != rb
        xn = torch.isnan(x)
        neg_zero = (x == 0) & torch.signbit(x)
        self.elements += x.numel()
        self.neg_zero_inputs += int(neg_zero.sum())
        self.nan_inputs += int(xn.sum())
        self.neg_zero_to_pos += int((neg_zero & diff & (out == 0) & ~torch.signbit(out)).sum())
        self.neg_zero_outputs += int((~neg_zero & diff & (out == 0) & torch.signbit(out)).sum())
        nan_diff = xn & diff
        self.nan_bits_changed += int(nan_diff.sum())
        if len(self.nan_examples) < 3 and bool(nan_diff.any()):
            idx = nan_diff.nonzero().flatten()[:8].tolist()
            for i in idx:
                ex = f"{hexbits(int(xb[i]), self.dtype)} -> {hexbits(int(ob[i]), self.dtype)}"
                if ex not in self.nan_examples and len(self.nan_examples) < 3:
                    self.nan_examples.append(ex)
        zero_diff = (x == 0) | (out == 0)
        self.other += int((diff & ~nan_diff & ~zero_diff).sum())
        return self

    @property
    def any(self):
        return bool(self.neg_zero_to_pos or self.neg_zero_outputs or self.nan_bits_changed or self.other)

    def note(self, who="torch on this device"):
        """'torch on this device: -0.0 -> +0.0 in 3 of 1000 elements', or '' when bit-exact."""
        parts = []
        if self.neg_zero_to_pos:
            parts.append(f"-0.0 -> +0.0 in {self.neg_zero_to_pos} of {self.elements} elements")
        if self.neg_zero_outputs:
            parts.append(f"-0.0 returned for +0.0 in {self.neg_zero_outputs} of {self.elements} elements")
        if self.nan_bits_changed:
            parts.append(f"NaN bits changed in {self.nan_bits_changed} of {self.nan_inputs} NaN inputs "
                         f"(e.g. {', '.join(self.nan_examples)})")
        if self.other:
            parts.append(f"{self.other} other elements differ from the bit rule")
        return f"{who}: " + "; ".join(parts) if parts else ""


# ---- observation: what a relu does to the values where implementations differ ----------
def classify(u, dtype):
    """A name for an unsigned bit pattern of a floating dtype: '-0.0', 'negative signalling
    NaN, payload', 'largest denormal', '+inf', 'normal 0x3F80' ..."""
    d = _dtypes.get(dtype)
    sign_bit = 1 << (d.width - 1)
    mag, neg = u & (sign_bit - 1), bool(u & sign_bit)
    lsb = d.exp_all_ones & -d.exp_all_ones  # lowest exponent bit
    quiet = lsb >> 1                        # the top mantissa bit
    sign = "negative " if neg else ""
    if mag > d.exp_all_ones:
        payload = mag & (quiet - 1)
        kind = "quiet" if mag & quiet else "signalling"
        canonical = payload == (0 if mag & quiet else 1)
        return f"{sign}{kind} NaN" + ("" if canonical else ", payload")
    if mag == d.exp_all_ones:
        return "-inf" if neg else "+inf"
    if mag == 0:
        return "-0.0" if neg else "+0.0"
    if mag < lsb:
        edge = "smallest " if mag == 1 else "largest " if mag == lsb - 1 else ""
        return f"{sign}{edge}denormal"
    if mag == d.exp_all_ones - 1:
        return f"{sign}largest finite"
    if mag == lsb:
        return f"{sign}smallest normal"
    if mag == (d.exp_all_ones >> 1) & d.exp_all_ones:
        return "-1.0" if neg else "+1.0"
    return f"{sign}normal {hexbits(u, dtype)}"


def _observed():
    """(label, {dtype: bits}) for every special pattern of flash_relu_rocm/dtypes.py: the
    floating dtypes list the same classes in the same order."""
    per = {n: _dtypes.TABLE[n].special for n in DTYPES}
    lengths = {len(v) for v in per.values()}
    assert len(lengths) == 1, f"the dtypes' special lists differ in length: {lengths}"
    first = DTYPES[0]
    return tuple((classify(per[first][i], first), {n: per[n][i] for n in DTYPES}) for i in range(lengths.pop()))


OBSERVED = _observed()
LARGE = 65536  # a size where vectorized paths run (CPU torch rewrites bf16 NaNs there)


def _signed(v, dtype):
    return _dtypes.signed(v, WIDTH[dtype])


def observe(relu, device, dtypes=DTYPES, large=LARGE):
    """{dtype: [record]}: for each OBSERVED value, relu(x)'s bits for x alone (1 element) and
    every distinct result over `large` copies, next to the bit rule. relu(x) -> tensor."""
    torch = _torch()
    result = {}
    for dtype in dtypes:
        it = getattr(torch, INT_VIEW[dtype])
        recs = []
        for label, per in OBSERVED:
            v = per[dtype]
            x1 = torch.tensor([_signed(v, dtype)], dtype=it).view(getattr(torch, dtype)).to(device)
            xl = x1.repeat(large)
            y1, yl = relu(x1), relu(xl)
            if str(device) != "cpu":
                torch.cuda.synchronize()
            rule = int(bits(bit_rule(x1.cpu()))[0])
            alone = int(bits(y1.cpu())[0])
            many = sorted({int(b) for b in bits(yl.cpu()).unique().tolist()})
            outs = {alone, *many}
            recs.append({"value": label, "in": hexbits(v, dtype), "bit_rule": hexbits(rule, dtype),
                         "alone": hexbits(alone, dtype), "copies": large, "in_copies": [hexbits(b, dtype) for b in many],
                         "as_bit_rule": outs == {rule}})
        result[dtype] = recs
    return result


def observation_table(obs):
    copies = next(r["copies"] for recs in obs.values() for r in recs)
    lines = [("dtype", "value", "input", "bit rule", "alone", f"in {copies} copies", "verdict")]
    for dtype, recs in obs.items():
        for r in recs:
            lines.append((dtype, r["value"], r["in"], r["bit_rule"], r["alone"], " ".join(r["in_copies"]),
                          "as bit rule" if r["as_bit_rule"] else "DIFFERS from bit rule"))
    widths = [max(len(l[c]) for l in lines) for c in range(len(lines[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def summary(obs):
    """One line: which observed values differ from the bit rule, per dtype."""
    parts = []
    for dtype, recs in obs.items():
        bad = [f"{r['value']} {r['in']} -> {'/'.join(sorted({r['alone'], *r['in_copies']}))}"
               for r in recs if not r["as_bit_rule"]]
        parts.append(f"{dtype}: " + ("as the bit rule" if not bad else "; ".join(bad)))
    return " | ".join(parts)


def torch_relus():
    """The two torch paths the project compares with: torch.relu and the harness's baseline."""
    torch = _torch()

    def clamp_out(x):
        out = torch.empty_like(x)
        torch.clamp(x, min=0, out=out)
        return out

    return {"torch.relu": torch.relu, "torch.clamp(min=0, out=)": clamp_out}


def observe_torch(device):
    """{'device': ..., 'torch': ..., 'ops': {name: observe(...)}} for torch.relu and clamp."""
    torch = _torch()
    name = torch.cuda.get_device_name(torch.device(device)) if str(device) != "cpu" else "cpu"
    return {"device": name, "torch": torch.__version__, "hip": torch.version.hip, "cuda": torch.version.cuda,
            "ops": {op: observe(fn, device) for op, fn in torch_relus().items()}}


def format_observation(doc):
    text = [f"what torch does on {doc['device']} (torch {doc['torch']}); an observation, not a test of torch"]
    for op, obs in doc["ops"].items():
        text += ["", f"{op}: {summary(obs)}", observation_table(obs)]
    return "\n".join(text)


def main(argv=None):
    torch = _torch()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="also write the observation here")
    args = p.parse_args(argv)
    doc = observe_torch(args.device)
    print(format_observation(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
