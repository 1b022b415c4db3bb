"""The validation report's figures, drawn from a campaign's plain-data rows (PNG, Agg backend).

Each function returns the file it wrote, or None (an empty list for the heatmaps) when the
campaign holds nothing to draw, so a report of a user's own configurations shows only the
figures its data supports. Theory is drawn as lines, simulation as points or dashes, in every
figure; latencies are in milliseconds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from .measure import QUANTILES

__all__ = ["cdf_overlays", "error_heatmaps", "throughput_p99", "router_comparison",
           "lab_figure"]

# Colour scale of the heatmaps: errors beyond this saturate (the cell still prints its value).
HEATMAP_RANGE = 0.15
_DPI = 110


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=_DPI)
    _plt().close(fig)
    return path


def _ok(rows):
    return [r for r in rows if not r.get("error_message")]


def _representatives(rows, most: int = 6):
    """Per family (approximation split by instances) the median-|p99 error| row, plus the worst."""
    rows = _ok(rows)
    modelled = [r for r in rows if r["modelled"]]
    groups = defaultdict(list)
    for r in modelled:
        key = r["family"] if r["family"] != "approximation" else \
            f"approximation, {r['instances']} instance(s)"
        groups[key].append(r)
    picks = []
    for key in sorted(groups):
        sel = sorted(groups[key], key=lambda r: abs(r["error"]["p99"]))
        picks.append(sel[len(sel) // 2])
    if modelled:
        worst = max(modelled, key=lambda r: abs(r["error"]["p99"]))
        if worst not in picks:
            picks.append(worst)
    unmodelled = [r for r in rows if not r["modelled"]]
    if unmodelled:
        picks.append(unmodelled[0])
    return picks[:most]


def cdf_overlays(rows, path):
    """Survival functions of theory (line) and simulation (dashes) for representative rows."""
    picks = _representatives(rows)
    if not picks:
        return None
    plt = _plt()
    ncols = 2 if len(picks) == 4 else min(3, len(picks))
    nrows = -(-len(picks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.9 * nrows), squeeze=False)
    for ax, r in zip(axes.flat, picks):
        t = np.array(r["curve"]["t"]) * 1e3
        for key, style, label in (("simulated_cdf", dict(ls="--", color="C1", lw=2),
                                   "simulation"),
                                  ("predicted_cdf", dict(color="C0", lw=1.5), "theory")):
            if r["curve"][key] is None:
                continue
            sf = 1 - np.array(r["curve"][key])
            keep = sf > 2e-4           # below, the simulated tail is a handful of requests
            ax.semilogy(t[keep], sf[keep], label=label, **style)
        for q, level in QUANTILES:
            s = r["simulated"]
            lo, hi = s["ci99"][q]
            ax.errorbar(s[q] * 1e3, 1 - level, xerr=[[(s[q] - lo) * 1e3], [(hi - s[q]) * 1e3]],
                        fmt="s", color="C1", ms=5, capsize=3)
            if r["modelled"]:
                ax.plot(r["predicted"][q] * 1e3, 1 - level, "o", color="C0", ms=5, mfc="none",
                        mew=1.5)
        what = (f"{r['family']}, p99 error {r['error']['p99']:+.1%}" if r["modelled"]
                else "not modelled: simulation only")
        ax.set_title(f"{r['name']}\n{what}", fontsize=9)
        ax.set(xlabel="latency (ms)", ylabel="P(latency > t)", ylim=(3e-4, 1.3))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    for ax in list(axes.flat)[len(picks):]:
        ax.set_visible(False)
    fig.suptitle("Latency distributions: theory (line, o) against simulation (dashes, squares "
                 "with 99% CI)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def error_heatmaps(rows, folder) -> list:
    """Signed p99 error over (load, max_batch_size), one panel per (instances, delay), per jitter.

    Only single-node rows count; a jitter needs at least two loads and two batch sizes.
    """
    rows = [r for r in _ok(rows) if r["nodes"] == 1]
    out = []
    plt = _plt()
    for jitter in sorted({r["jitter"] for r in rows}):
        sel = [r for r in rows if r["jitter"] == jitter]
        loads = sorted({round(r["load"], 3) for r in sel})
        sizes = sorted({r["B"] for r in sel})
        cs = sorted({r["instances"] for r in sel})
        ds = sorted({r["D_over_S1"] for r in sel if r["B"] > 1}) or [0.0]
        if len(loads) < 2 or len(sizes) < 2:
            continue
        fig, axes = plt.subplots(len(cs), len(ds), figsize=(1.0 + 3.9 * len(ds),
                                                            0.8 + 2.5 * len(cs)),
                                 squeeze=False)
        image = None
        for i, c in enumerate(cs):
            for j, d in enumerate(ds):
                ax = axes[i, j]
                grid = np.full((len(sizes), len(loads)), np.nan)
                for a, B in enumerate(sizes):
                    for b, load in enumerate(loads):
                        # B = 1: the delay never binds, its D = 0 row stands for every column
                        match = [r for r in sel if r["B"] == B and r["instances"] == c
                                 and round(r["load"], 3) == load
                                 and (r["D_over_S1"] == d or B == 1)]
                        if not match:
                            continue
                        r = match[0]
                        if r["modelled"]:
                            grid[a, b] = r["error"]["p99"]
                            text = f"{r['error']['p99']:+.1%}" + \
                                ("\nx" if r["verdict"] == "fail" else "")
                        else:
                            text = "n/m"
                        dark = r["modelled"] and abs(r["error"]["p99"]) > 0.6 * HEATMAP_RANGE
                        ax.text(b, a, text, ha="center", va="center", fontsize=7.5,
                                color="white" if dark else "black",
                                fontweight="bold" if r["verdict"] == "fail" else "normal")
                image = ax.imshow(grid, cmap="RdBu_r", vmin=-HEATMAP_RANGE, vmax=HEATMAP_RANGE,
                                  aspect="auto", origin="lower")
                ax.set_xticks(range(len(loads)), [f"{x:g}" for x in loads], fontsize=8)
                ax.set_yticks(range(len(sizes)), [str(B) for B in sizes], fontsize=8)
                ax.set_title(f"c = {c} instance{'s' if c > 1 else ''}, D = {d:g} x S(1)",
                             fontsize=9)
                if i == len(cs) - 1:
                    ax.set_xlabel("load (fraction of capacity)", fontsize=8)
                if j == 0:
                    ax.set_ylabel("max_batch_size B", fontsize=8)
        fig.suptitle(f"p99 error, predicted / simulated - 1 ({jitter} service); x: outside "
                     "tolerance", fontsize=10)
        fig.tight_layout(rect=(0, 0, 0.92, 1))
        cax = fig.add_axes((0.93, 0.15, 0.015, 0.7))
        bar = fig.colorbar(image, cax=cax)
        bar.ax.yaxis.set_major_formatter(lambda v, _: f"{v:+.0%}")
        bar.ax.tick_params(labelsize=8)
        out.append(_save(fig, Path(folder) / f"heatmap_p99_{jitter.replace(' ', '_')}.png"))
    return out


def throughput_p99(rows, curves, path):
    """Throughput against p99 per max_batch_size; one instance, panels per jitter and delay.

    Lines are the theory curves (``curves``; without them, the predicted points joined); points
    are simulations with their 99% CI.
    """
    rows = [r for r in _ok(rows) if r["nodes"] == 1 and r["instances"] == 1]
    if not rows:
        return None
    jitters = sorted({r["jitter"] for r in rows})
    ds = sorted({r["D_over_S1"] for r in rows if r["B"] > 1}) or [0.0]
    sizes = sorted({r["B"] for r in rows})
    series = defaultdict(list)
    for r in rows:
        for d in (ds if r["B"] == 1 else [r["D_over_S1"]]):
            series[(r["jitter"], d, r["B"])].append(r)
    if not any(len(v) >= 2 for v in series.values()):
        return None
    lines = {}
    for c in curves:
        for d in (ds if c["B"] == 1 else [c["D_over_S1"]]):
            lines[(c["jitter"], d, c["B"])] = c["points"]
    plt = _plt()
    from matplotlib import ticker

    fig, axes = plt.subplots(len(jitters), len(ds), figsize=(5.0 * len(ds), 3.9 * len(jitters)),
                             squeeze=False)
    colour = {B: f"C{k}" for k, B in enumerate(sizes)}
    for i, jitter in enumerate(jitters):
        for j, d in enumerate(ds):
            ax = axes[i, j]
            top = 0.0
            for B in sizes:
                pts = sorted(series.get((jitter, d, B), []), key=lambda r: r["load"])
                if not pts:
                    continue
                if (jitter, d, B) in lines:
                    xs = [p["throughput"] for p in lines[(jitter, d, B)]]
                    ys = [p["p99"] * 1e3 for p in lines[(jitter, d, B)]]
                else:
                    mod = [r for r in pts if r["modelled"]]
                    xs = [r["predicted"]["throughput"] for r in mod]
                    ys = [r["predicted"]["p99"] * 1e3 for r in mod]
                ax.plot(xs, ys, color=colour[B], lw=1.5, label=f"B = {B}")
                for r in pts:
                    s = r["simulated"]
                    lo, hi = s["ci99"]["p99"]
                    ax.errorbar(s["throughput"], s["p99"] * 1e3,
                                yerr=[[(s["p99"] - lo) * 1e3], [(hi - s["p99"]) * 1e3]],
                                fmt="o", color=colour[B], ms=4.5, capsize=2, mfc="white")
                    top = max(top, hi * 1e3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_ylim(top=1.6 * top if top else None)
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(ticker.NullFormatter())
            # p99 spans a decade or two: label 2, 5, 20, 50 too, or the axis has one number
            ax.yaxis.set_minor_formatter(ticker.FuncFormatter(
                lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
            ax.tick_params(axis="y", which="minor", labelsize=8)
            ax.set_title(f"{jitter} service, D = {d:g} x S(1), 1 instance", fontsize=9)
            ax.set(xlabel="throughput (req/s)", ylabel="p99 (ms)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left", title="theory lines; o simulated",
                      title_fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def router_comparison(routers, path):
    """p99 per router at each load: theory bars (solid) and simulation bars (hatched, 99% CI)."""
    routers = _ok(routers)
    if not routers:
        return None
    plt = _plt()
    loads = sorted({round(r["load"], 3) for r in routers})
    names = list(dict.fromkeys(r["router"] for r in routers))
    fig, axes = plt.subplots(1, len(loads), figsize=(4.3 * len(loads), 4.0), squeeze=False)
    x = np.arange(len(names))
    for ax, load in zip(axes.flat, loads):
        sel = {r["router"]: r for r in routers if round(r["load"], 3) == load}
        top = 0.0
        for k, name in enumerate(names):
            r = sel.get(name)
            if r is None:
                continue
            s = r["simulated"]
            lo, hi = s["ci99"]["p99"]
            ax.bar(k + 0.19, s["p99"] * 1e3, 0.36, color="C1", hatch="//", edgecolor="black",
                   lw=0.5, yerr=[[(s["p99"] - lo) * 1e3], [(hi - s["p99"]) * 1e3]], capsize=3,
                   label="simulated" if k == 0 else None)
            top = max(top, hi * 1e3)
            if r["modelled"]:
                ax.bar(k - 0.19, r["predicted"]["p99"] * 1e3, 0.36, color="C0",
                       label="predicted" if not ax.get_legend_handles_labels()[1].count(
                           "predicted") else None)
                top = max(top, r["predicted"]["p99"] * 1e3)
            else:
                ax.text(k - 0.19, 0.02 * max(top, 1), "no\nmodel", ha="center", va="bottom",
                        fontsize=7.5, rotation=0)
        ax.set_xticks(x, [n.replace("_", "\n") for n in names], fontsize=8)
        ax.set_ylim(0, 1.25 * top)
        ax.set_title(f"load {load:g} of capacity", fontsize=9)
        ax.set_ylabel("p99 (ms)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    r0 = routers[0]
    fig.suptitle(f"Routers: {r0['nodes']} nodes, B = {r0['B']}, D = {r0['D_over_S1']:g} x S(1), "
                 f"{r0['jitter']} service", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def lab_figure(lab, path):
    """The lab: the sweep's throughput against p99 with the SLA wall, and throughput under it."""
    lab = sorted(_ok(lab), key=lambda p: p["B"])
    if not lab:
        return None
    from .lab import largest_under_wall

    plt = _plt()
    wall = lab[0]["wall"] * 1e3
    pick = largest_under_wall(lab)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4))
    sw = [p for p in lab if p.get("sweep")]
    xp = [p["sweep"]["throughput"]["predicted"] for p in sw]
    yp = [p["sweep"]["p99"]["predicted"] * 1e3 for p in sw]
    ax.plot(xp, yp, "o-", color="C0", label="theory")
    for p in sw:
        w = p["sweep"]
        lo, hi = w["p99"]["ci99"]
        ax.errorbar(w["throughput"]["simulated"], w["p99"]["simulated"] * 1e3,
                    yerr=[[(w["p99"]["simulated"] - lo) * 1e3], [(hi - w["p99"]["simulated"])
                                                                * 1e3]],
                    fmt="s", color="C1", ms=5, capsize=3,
                    label="simulation" if p is sw[0] else None, mfc="none", mew=1.5)
        ax.annotate(f"B={p['B']}", (w["throughput"]["predicted"], w["p99"]["predicted"] * 1e3),
                    textcoords="offset points", xytext=(6, -12), fontsize=8,
                    fontweight="bold" if p["B"] == pick else "normal")
    chosen = [p for p in sw if p["B"] == pick]
    if chosen:
        w = chosen[0]["sweep"]
        ax.plot(w["throughput"]["predicted"], w["p99"]["predicted"] * 1e3, "*", ms=16,
                color="C2", zorder=0, label="rule's pick")
    ax.axhline(wall, color="C3", ls="--", lw=1.2, label=f"SLA wall {wall:g} ms")
    ax.set_xscale("log")
    from matplotlib import ticker
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.FuncFormatter(
        lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set(xlabel="throughput at the sweep's load (req/s)", ylabel="p99 (ms)",
           title=f"Sweep of max_batch_size at {lab[0]['load']:.0%} of capacity; "
                 f"rule's pick B = {pick}")
    ax.title.set_fontsize(10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center")   # B = 1 sits top left, and B = 64 top right
    searched = [p for p in lab if p.get("under_wall")]
    if searched:
        k = np.arange(len(searched))
        bx.bar(k - 0.2, [p["under_wall"]["predicted"] for p in searched], 0.4, color="C0",
               label="theory")
        bx.bar(k + 0.2, [p["under_wall"]["simulated"] for p in searched], 0.4, color="C1",
               hatch="//", edgecolor="black", lw=0.5, label="simulation")
        bx.plot(k, [p["capacity"] for p in searched], "k_", ms=18, mew=2,
                label="capacity")
        bx.set_xticks(k, [str(p["B"]) for p in searched])
        bx.set(xlabel="max_batch_size B", ylabel="req/s",
               title=f"Largest throughput with p99 <= {wall:g} ms")
        bx.title.set_fontsize(10)
        bx.grid(True, axis="y", alpha=0.3)
        bx.legend(fontsize=8, loc="upper left")
    else:
        bx.set_visible(False)
    fig.tight_layout()
    return _save(fig, path)
