"""Rows, tables, where each rung crosses torch, CSV and the plot.

A row is one implementation at one case: the median device time per launch, GB/s
(2 x numel x element size / time), % of the device's peak where one is known, ratio to
torch's GB/s, the timing method, and for small sizes the host time per launch.
"""

import csv
import math
import re
import statistics

from .cases import L2_BYTES, LLC_BYTES
from .timing import EVENTS, HOST_BOUND_FRACTION, Timing

TORCH = "torch"
PEAK_GBPS = 8000.0  # MI350X / MI355X HBM3E, the device the ladder is built for
PEAK_LABEL = "MI350X peak 8 TB/s (reference)"
# Peaks by device name for the baseline mode (vendors' datasheets; a reference line, not a measurement).
PEAKS = (("MI350X", 8000.0, PEAK_LABEL), ("MI355X", 8000.0, "MI355X peak 8 TB/s (reference)"),
         ("H200", 4800.0, "H200 peak 4.8 TB/s (datasheet)"))
CACHE_LINES = ((L2_BYTES, "MI350X L2 32 MiB"), (LLC_BYTES, "MI350X Infinity Cache 256 MiB"))


def peak_for(device_name, gfx950=False):
    """(GB/s, label) of the peak line the report assumes; (None, reason) when none is known."""
    if gfx950:
        return PEAK_GBPS, PEAK_LABEL
    for key, gb, label in PEAKS:
        if key in device_name:
            return gb, label
    return None, f"no peak known for {device_name}"


def gbps(traffic, seconds):
    return traffic / seconds / 1e9


def _quartiles(xs):
    q = statistics.quantiles(sorted(xs), n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]


def _as_timing(t):
    return t if isinstance(t, Timing) else Timing(t)


def summarize(case, samples, failed=None, peak=PEAK_GBPS, notes=None, method=EVENTS):
    """One row per implementation. `samples` {impl: [Timing or seconds]}. Implementations in
    `failed` ({impl: reason}) get no numbers, only the reason. `notes` ({impl: text}): e.g.
    where torch differs from the bit rule."""
    failed, notes = failed or {}, notes or {}
    samples = {i: [_as_timing(t) for t in s] for i, s in samples.items()}
    rows = []
    med = {i: statistics.median(t.device for t in s) for i, s in samples.items() if s and i not in failed}
    torch_gbps = gbps(case.traffic, med[TORCH]) if TORCH in med else None
    for impl in list(samples) + [i for i in failed if i not in samples]:
        row = {"shape": case.name, "dtype": case.dtype, "sweeps": "+".join(case.sweeps), "numel": case.numel,
               "traffic_mb": round(case.traffic / 1e6, 3), "impl": impl, "method": method,
               "note": notes.get(impl) or None}
        if impl in failed:
            row.update(status="FAILED correctness: " + failed[impl], median_us=None, gbps=None,
                       pct_peak=None, vs_torch=None, iqr_pct=None, host_us=None, host_bound=None, samples_us=[])
        else:
            s = [t.device for t in samples[impl]]
            hosts = [t.host for t in samples[impl] if t.host is not None]
            g = gbps(case.traffic, med[impl])
            q1, q3 = _quartiles(s)
            host = statistics.median(hosts) if hosts else None
            row.update(status="ok", median_us=med[impl] * 1e6, gbps=g, pct_peak=100.0 * g / peak if peak else None,
                       vs_torch=(g / torch_gbps) if torch_gbps else None,
                       iqr_pct=100.0 * (q3 - q1) / med[impl], samples_us=[t * 1e6 for t in s],
                       host_us=host * 1e6 if host is not None else None,
                       host_bound=(host >= HOST_BOUND_FRACTION * med[impl]) if host is not None else None)
        rows.append(row)
    return rows


def crossings(rows):
    """Where each rung's GB/s crosses torch's, per dtype: [{"dtype", "impl", "lo_mb",
    "hi_mb" (the measured traffic points on either side of the crossing), "at_mb" (where the
    ratio interpolated in log-log reaches 1), "to": "above" or "below" torch}], in traffic
    order. Points at exactly torch's GB/s sit on the crossing; touching torch's level and
    turning back is no crossing."""
    ratio = {}
    for r in rows:
        if r["impl"] != TORCH and r.get("vs_torch"):
            ratio.setdefault((r["dtype"], r["impl"]), {})[r["traffic_mb"]] = r["vs_torch"]
    out = []
    for (dtype, impl), per in sorted(ratio.items()):
        prev, level = None, None  # last point off torch's level; first point on it since then
        for mb, r in sorted(per.items()):
            sign = (r > 1) - (r < 1)
            if sign == 0:
                level = level or mb
                continue
            if prev is not None and prev[2] != sign:
                (m1, r1, _) = prev
                if level is not None:
                    at = level
                else:  # log(ratio) linear in log(traffic) between the two points
                    f = math.log(r1) / (math.log(r1) - math.log(r))
                    at = math.exp(math.log(m1) + f * (math.log(mb) - math.log(m1)))
                out.append({"dtype": dtype, "impl": impl, "lo_mb": m1, "hi_mb": mb, "at_mb": at,
                            "to": "above" if sign > 0 else "below"})
            prev, level = (mb, r, sign), None
    return out


def crossing_lines(rows, impls):
    """One line per rung and dtype: where it crosses torch, or that it never does."""
    cs = crossings(rows)
    lines = []
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        for impl in impls:
            if impl == TORCH:
                continue
            pts = sorted((r["traffic_mb"], r["vs_torch"]) for r in rows
                         if r["impl"] == impl and r["dtype"] == dtype and r.get("vs_torch"))
            if not pts:
                continue
            mine = [c for c in cs if c["dtype"] == dtype and c["impl"] == impl]
            if not mine:
                side = "above" if pts[0][1] > 1 else "below" if pts[0][1] < 1 else "level with"
                lines.append(f"{impl} {dtype}: {side} torch at every measured size "
                             f"({_mb(pts[0][0])} .. {_mb(pts[-1][0])})")
                continue
            parts = [f"{c['to']} torch from ~{_mb(c['at_mb'])} (between {_mb(c['lo_mb'])} and "
                     f"{_mb(c['hi_mb'])})" for c in mine]
            lines.append(f"{impl} {dtype}: " + "; ".join(parts))
    return lines


def _mb(mb):
    return f"{mb:.3g} MB" if mb < 10 else f"{mb:.0f} MB"


def _align(lines, right=True, last_left=False):
    widths = [max(len(str(l[c])) for l in lines) for c in range(len(lines[0]))]
    out = []
    for l in lines:
        cells = []
        for k, (c, w) in enumerate(zip(l, widths)):
            left = last_left and k == len(l) - 1
            cells.append(str(c).ljust(w) if left or not right else str(c).rjust(w))
        out.append("  ".join(cells).rstrip())
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def ladder_table(rows, impls):
    """GB/s per case, one column per implementation; '*' marks the first size after a rung
    crosses torch; 'h' marks a host-bound timing (timing.HOST_BOUND_FRACTION). A note is a
    footnote [n]; notes of one implementation and dtype that differ only in their counts
    share one (a device's departure from the bit rule shows in every case)."""
    by_case = {}
    for r in rows:
        by_case.setdefault((r["dtype"], r["traffic_mb"], r["shape"]), {})[r["impl"]] = r
    first_after = {(c["dtype"], c["impl"], c["hi_mb"]) for c in crossings(rows)}
    head = ["shape", "dtype", "traffic MB", "method"] + list(impls) + ["best / torch", "torch host us"]
    lines, foot, foot_of = [head], [], {}  # foot: [impl, dtype, first case's note, more cases sharing it]
    for (dtype, mb, shape), per in sorted(by_case.items()):
        method = next(iter(per.values()))["method"]
        cells = [shape, dtype, f"{mb:.3g}" if mb < 10 else f"{mb:.0f}", method]
        best = None
        for i in impls:
            r = per.get(i)
            if r is None:
                cells.append("-")
            elif r["gbps"] is None:
                cells.append("FAILED")
            else:
                mark = ("*" if (dtype, i, mb) in first_after else "") + ("h" if r.get("host_bound") else "")
                cell = f"{r['gbps']:.0f}{mark}"
                if r.get("note"):  # a footnote: the note is too long for a cell
                    key = (i, dtype, re.sub(r"\d+", "#", r["note"]))
                    if key not in foot_of:
                        foot.append([i, dtype, f"{i}, {shape} {dtype}: {r['note']}", 0])
                        foot_of[key] = len(foot)
                    else:
                        foot[foot_of[key] - 1][3] += 1
                    cell += f" [{foot_of[key]}]"
                cells.append(cell)
                if i != TORCH and (best is None or r["gbps"] > best):
                    best = r["gbps"]
        t = per.get(TORCH)
        cells.append(f"{best / t['gbps']:.2f}x" if best and t and t["gbps"] else "-")
        cells.append(f"{t['host_us']:.1f}" if t and t.get("host_us") is not None else "-")
        lines.append(cells)
    foot = [f"[{k}] {text}" + (f" (and {more} more {impl} {dtype} cases marked [{k}], each with its own counts: "
                                 "the rows' notes in the JSON and CSV)" if more else "")
            for k, (impl, dtype, text, more) in enumerate(foot, 1)]
    legend = ["* first size past a crossing with torch; h host-bound (host time per launch >= "
              f"{HOST_BOUND_FRACTION:g} x device time: the GB/s are the host's launch rate, not memory's)"]
    return "\n".join(_align(lines) + foot + legend + ["where each rung crosses torch:"]
                     + ["  " + l for l in crossing_lines(rows, impls)])


def baseline_table(rows):
    """The baseline mode's table: torch per case, % of the named peak, host time, the cross-check."""
    head = ["shape", "dtype", "traffic MB", "method", "median us", "host us", "GB/s", "% peak", "IQR %",
            "do_bench GB/s", "harness/do_bench", "note"]
    lines = [head]
    for r in sorted(rows, key=lambda r: (r["dtype"], r["traffic_mb"], r["shape"])):
        cc = r.get("crosscheck") or {}
        mb = f"{r['traffic_mb']:.3g}" if r["traffic_mb"] < 10 else f"{r['traffic_mb']:.0f}"
        if r["gbps"] is None:
            lines.append([r["shape"], r["dtype"], mb, r["method"], "-", "-", "FAILED", "-", "-", "-", "-", r["status"]])
            continue
        host = "-" if r.get("host_us") is None else f"{r['host_us']:.1f}" + (" h" if r.get("host_bound") else "")
        lines.append([r["shape"], r["dtype"], mb, r["method"], f"{r['median_us']:.1f}", host, f"{r['gbps']:.0f}",
                      f"{r['pct_peak']:.1f}" if r["pct_peak"] is not None else "-", f"{r['iqr_pct']:.1f}",
                      f"{cc['do_bench_gbps']:.0f}" if cc.get("available") else "-",
                      f"{cc['ratio']:.3f}" if cc.get("available") else "-", r.get("note") or ""])
    return "\n".join(_align(lines, last_left=True) + [f"h host-bound (host time per launch >= {HOST_BOUND_FRACTION:g} x "
                                                       "device time: the GB/s are the host's launch rate, not memory's)"])


CSV_COLUMNS = ["shape", "dtype", "sweeps", "numel", "traffic_mb", "impl", "status", "method", "median_us",
               "host_us", "host_bound", "gbps", "pct_peak", "vs_torch", "iqr_pct", "note"]


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def plot(rows, path, impls, peak=PEAK_GBPS, title="relu-flydsl ladder", peak_label=PEAK_LABEL, caches=True):
    """Against total traffic (log), one column per dtype: GB/s (top; one line per
    implementation, torch dashed black, hollow markers where the timing was host-bound, the
    peak of the device it assumes) and the time per launch (bottom, log, with torch's host
    time per launch where measured); a vertical mark where each rung crosses torch and
    (caches=True) at the MI350X cache sizes. Returns {dtype: labels of the GB/s panel}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    n = max(1, len(dtypes))
    fig, axes = plt.subplots(2, n, figsize=(1.5 + 7 * n, 10), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    top = max([peak or 0] + [r["gbps"] for r in rows if r["gbps"]])
    cross = crossings(rows)
    drawn = {}
    for k, dtype in enumerate(dtypes):
        ax, tax = axes[0][k], axes[1][k]
        colors = {}
        for impl in impls:
            pts = sorted((r["traffic_mb"], r["gbps"], bool(r.get("host_bound")), r["median_us"], r.get("host_us"))
                         for r in rows if r["impl"] == impl and r["dtype"] == dtype and r["gbps"])
            if not pts:
                continue
            xs, ys, hb, us, host = zip(*pts)
            style = dict(color="black", linestyle="--", linewidth=2, marker="s") if impl == TORCH else dict(marker="o")
            label = impl if impl != TORCH else "torch (clamp into out)"
            (line,) = ax.plot(xs, ys, label=label, markersize=4, **style)
            colors[impl] = line.get_color()
            tax.plot(xs, us, label=label, markersize=3, **style)
            hx = [x for x, h in zip(xs, hb) if h]
            if hx:  # host-bound points: hollow
                ax.plot(hx, [y for y, h in zip(ys, hb) if h], linestyle="none", marker=style["marker"],
                        markersize=7, markerfacecolor="white", color=line.get_color())
            hp = [(x, h) for x, h in zip(xs, host) if h is not None]
            if hp and impl == TORCH:
                tax.plot(*zip(*hp), color="grey", linestyle=":", marker=".", label="torch host time per launch")
        for c in cross:
            if c["dtype"] == dtype and c["impl"] in colors:
                for a in (ax, tax):
                    a.axvline(c["at_mb"], color=colors[c["impl"]], linestyle="-.", linewidth=1, alpha=0.8)
                ax.annotate(f"{c['impl']} {c['to']} torch ~{_mb(c['at_mb'])}", (c["at_mb"], top * 0.03),
                            rotation=90, fontsize=7, color=colors[c["impl"]], ha="right", va="bottom")
        if peak:
            ax.axhline(peak, color="red", linestyle=":", label=peak_label)
        if caches:
            for nbytes, label in CACHE_LINES:
                for a in (ax, tax):
                    a.axvline(nbytes / 1e6, color="grey", linestyle=":", linewidth=1)
                ax.annotate(label, (nbytes / 1e6, top * 0.5), rotation=90, fontsize=7, color="grey", ha="right",
                            va="center")
        ax.set_xscale("log")
        tax.set_yscale("log")
        tax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        tax.set_xlabel("total traffic, MB (2 x numel x element size; = footprint of x and out)")
        ax.set_title(dtype)
        for a in (ax, tax):
            a.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
        tax.legend(loc="upper left", fontsize="x-small")
        drawn[dtype] = [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    axes[0][0].set_ylabel("GB/s (median of rounds); hollow: host-bound")
    axes[0][0].set_ylim(0, top * 1.12)
    axes[1][0].set_ylabel("us per launch (device events, median)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn
