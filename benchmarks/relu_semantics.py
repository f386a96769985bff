#!/usr/bin/env python
"""The kernels' bit rule, torch's relu as torch specifies it, and what torch.relu does on a device.

    python benchmarks/relu_semantics.py [--device cuda] [--json FILE]
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
  - AMD MI350X: the reference post reports -0.0 kept. Not checked here: tests/test_hardware.py's
    observation test records what the user's ROCm torch does.
- So the torch baseline is checked as torch's relu is specified: values equal with +0.0 and -0.0
  counted equal, NaN exactly where the input is NaN (guards and input are the caller's checks).
  Where its bits differ from the bit rule (sign of zero, NaN payloads) that is counted and
  reported as a note, never a failure; a wrong value is a failure.

Pure torch: no flydsl, no kernels, so it runs on any machine with torch.
"""

import argparse
import json
import sys
from dataclasses import dataclass, field

INT_VIEW = {"float32": "int32", "float16": "int16", "bfloat16": "int16"}
WIDTH = {"float32": 32, "float16": 16, "bfloat16": 16}
DTYPES = ("bfloat16", "float16", "float32")


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
# (label, bits per dtype). Negative NaNs and signalling NaNs carry payloads on purpose.
OBSERVED = (
    ("+0.0", {"bfloat16": 0x0000, "float16": 0x0000, "float32": 0x00000000}),
    ("-0.0", {"bfloat16": 0x8000, "float16": 0x8000, "float32": 0x80000000}),
    ("quiet NaN", {"bfloat16": 0x7FC0, "float16": 0x7E00, "float32": 0x7FC00000}),
    ("quiet NaN, payload", {"bfloat16": 0x7FC5, "float16": 0x7E55, "float32": 0x7FC12345}),
    ("signalling NaN", {"bfloat16": 0x7F81, "float16": 0x7C01, "float32": 0x7F800001}),
    ("negative quiet NaN", {"bfloat16": 0xFFC1, "float16": 0xFE01, "float32": 0xFFC00001}),
    ("negative signalling NaN", {"bfloat16": 0xFF81, "float16": 0xFC01, "float32": 0xFF800001}),
    ("smallest denormal", {"bfloat16": 0x0001, "float16": 0x0001, "float32": 0x00000001}),
    ("largest denormal", {"bfloat16": 0x007F, "float16": 0x03FF, "float32": 0x007FFFFF}),
    ("negative denormal", {"bfloat16": 0x8001, "float16": 0x8001, "float32": 0x80000001}),
)
LARGE = 65536  # a size where vectorized paths run (CPU torch rewrites bf16 NaNs there)


def _signed(v, dtype):
    w = WIDTH[dtype]
    return v - (1 << w) if v >= 1 << (w - 1) else v


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
