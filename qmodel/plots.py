"""Matplotlib figures of latency results (for reports, the CLI and the demo).

Figures are drawn with the non-interactive Agg backend and written to files; nothing here opens
a window.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Mapping

import numpy as np

__all__ = ["plot_latency", "plot_router_comparison", "plot_profile", "plot_bottleneck",
           "plot_pareto", "plot_rate_sweep", "plot_batch_sweep", "plot_timeline",
           "plot_triton_check"]


def _pyplot():
    """matplotlib.pyplot on the file-only Agg backend (imported late: it is slow to load)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path) -> Path:
    """Write the figure (format from the extension), close it, return the path."""
    plt = _pyplot()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_latency(results: Mapping[str, object], path, title: str = "") -> Path:
    """CDF (left) and tail on a log scale (right) of several latency results, in ms.

    Parameters
    ----------
    results : mapping of label to Latency
        Each curve is drawn from the result's own ``cdf``; p50/p95/p99 are marked.
    path : str or Path
        Output file (PNG, SVG or PDF by extension).
    title : str
        Figure title.

    Returns
    -------
    Path
        The file written.
    """
    plt = _pyplot()

    if not results:
        raise ValueError("plot_latency needs at least one result")
    top = max(r.quantile(0.9995) for r in results.values())
    t = np.linspace(0.0, 1.05 * top, 800)
    fig, (ax_cdf, ax_tail) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, r in results.items():
        cdf = np.asarray(r.cdf(t))
        line, = ax_cdf.plot(t * 1e3, cdf, label=label)
        ax_tail.semilogy(t * 1e3, np.clip(1.0 - cdf, 1e-5, 1.0), color=line.get_color())
        for p, marker in ((0.5, "o"), (0.95, "s"), (0.99, "^")):
            q = r.quantile(p)
            ax_cdf.plot(q * 1e3, p, marker, color=line.get_color(), ms=5)
            ax_tail.plot(q * 1e3, 1 - p, marker, color=line.get_color(), ms=5)
    ax_cdf.set(xlabel="latency (ms)", ylabel="P(latency <= t)", ylim=(0, 1.01))
    ax_tail.set(xlabel="latency (ms)", ylabel="P(latency > t)", ylim=(1e-4, 1.05))
    for ax in (ax_cdf, ax_tail):
        ax.grid(True, which="both", alpha=0.3)
    ax_cdf.legend(loc="lower right", fontsize=8)
    ax_tail.text(0.98, 0.95, "markers: p50 o, p95 s, p99 ^", transform=ax_tail.transAxes,
                 ha="right", va="top", fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_router_comparison(rows, path, title: str = "") -> Path:
    """Bars of p50/p95/p99 (ms) per router: predicted solid, simulated hatched.

    Parameters
    ----------
    rows : list of RouterResult
        From :func:`qmodel.compare.compare_routers`.
    path : str or Path
        Output file.
    title : str
        Figure title.

    Returns
    -------
    Path
        The file written.
    """
    plt = _pyplot()

    if not rows:
        raise ValueError("plot_router_comparison needs at least one router's result")
    levels = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.13
    x = np.arange(len(rows))
    for i, (name, p) in enumerate(levels):
        for j, (kind, hatch) in enumerate((("predicted", None), ("simulated", "//"))):
            vals = [getattr(r, kind).quantile(p) * 1e3 if getattr(r, kind) is not None
                    else np.nan for r in rows]
            if np.all(np.isnan(vals)):
                continue
            ax.bar(x + (2 * i + j - 2.5) * width, vals, width, color=f"C{i}", hatch=hatch,
                   edgecolor="black" if hatch else None, linewidth=0.5,
                   label=f"{name} {kind}")
    tops = [getattr(r, kind).quantile(0.99) * 1e3 for r in rows
            for kind in ("predicted", "simulated") if getattr(r, kind) is not None]
    ax.set_ylim(0, 1.35 * max(tops))            # room for the legend above the bars
    ax.set_xticks(x, [r.router for r in rows])
    ax.set_ylabel("latency (ms)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_profile(profile, path, title: str = "") -> Path:
    """S(k) of a :class:`qmodel.Profile`: the mean per batch size with its 5-95% spread, one
    line per concurrency, in ms."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m, by_k in sorted(profile.samples.items()):
        k = np.array(sorted(by_k))
        values = [np.asarray(by_k[int(x)]) * 1e3 for x in k]
        mean = np.array([v.mean() for v in values])
        lo = np.array([np.percentile(v, 5) for v in values])
        hi = np.array([np.percentile(v, 95) for v in values])
        line, = ax.plot(k, mean, marker="o", ms=3, label=f"concurrency {m}: mean")
        ax.fill_between(k, lo, hi, color=line.get_color(), alpha=0.2, label="5-95%")
    ax.set_xlabel("batch size k")
    ax.set_ylabel("S(k), ms")
    ax.set_title(title or f"{profile.workload} on {profile.device}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_bottleneck(report, path, title: str = "") -> Path:
    """What each stage's knob changes do to the end-to-end quantile
    (:func:`qmodel.bottleneck.bottleneck`): one horizontal bar per change, grouped by stage,
    its length the change against the configured value in percent (left: faster); the
    dominant stage's bars stand out.

    Examples
    --------
    >>> import tempfile, pathlib, qmodel as qm
    >>> from qmodel.bottleneck import bottleneck
    >>> s = qm.ServiceTime.affine(1e-3, 1e-4)
    >>> ens = qm.Ensemble({"a": qm.Node(s, max_batch_size=4), "b": qm.Node(s, instances=2)},
    ...                   [("a", "b")])
    >>> out = plot_bottleneck(bottleneck(ens, rate=1500.0, fallback="raise"),
    ...                       pathlib.Path(tempfile.mkdtemp()) / "b.png")
    >>> out.stat().st_size > 0
    True
    """
    plt = _pyplot()
    rows = [c for c in report.changes if c.latency is not None]
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(rows) + 1.6))
    if not rows:
        ax.text(0.5, 0.5, "no knob change was answered (see the report's notes)",
                ha="center", va="center", transform=ax.transAxes)
    y = np.arange(len(rows))[::-1]
    colours = ["tab:red" if c.stage == report.dominant else "tab:blue" for c in rows]
    ax.barh(y, [100 * (c.latency / report.latency - 1) for c in rows], color=colours,
            alpha=0.8)
    name = f"p{report.level * 100:g}"
    ax.axvline(0.0, color="black", linestyle="--",
               label=f"as configured: {name} {report.latency * 1e3:.2f} ms")
    ax.set_yticks(y, [f"{c.stage}: {c.change}" for c in rows], fontsize=8)
    ax.set_xlabel(f"change of the end-to-end {name} (%)")
    ax.set_title(title or f"end-to-end {name} per knob change (dominant stage: "
                          f"{report.dominant})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def plot_pareto(costs, ratios, plan_point, path) -> Path:
    """A sizing's cost-latency front: at each cost, the best configuration's trusted SLO
    quantile over its target (1 is the SLO); ``plan_point`` (cost, ratio) marks the plan, or
    None."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(costs, ratios, "o-", label="best configuration at each cost")
    ax.axhline(1.0, color="tab:red", linestyle="--", label="SLO")
    if plan_point is not None:
        ax.plot([plan_point[0]], [plan_point[1]], "*", markersize=14, color="tab:green",
                label="plan")
    ax.set_xlabel("cost")
    ax.set_ylabel("trusted quantile / target (worst SLO key)")
    ax.set_title("cost against the tail", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_rate_sweep(sweep, key: str, wall: float, path, stated: float | None = None,
                    rates: tuple = (), title: str = "") -> Path:
    """The SLO quantile against the rate: ``sweep`` maps a label to (rates, seconds);
    ``wall`` is the target less the network (seconds), ``stated`` the same less the model's
    stated error, ``rates`` the (low, high) range the plan holds over (shaded), or (rate,)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (xs, values) in sweep.items():
        if len(xs):
            # an ensemble's knobs run long: wrapped, not cut
            shown = "\n".join(textwrap.wrap(label, 70)[:4])
            ax.plot(xs, np.asarray(values) * 1e3, "o-", markersize=3, label=shown)
    ax.axhline(wall * 1e3, color="tab:red", linestyle="--", label=f"{key} target less the network")
    if stated is not None and stated < wall:
        ax.axhline(stated * 1e3, color="tab:orange", linestyle=":",
                   label="less the model's stated error")
    if len(rates) == 2 and rates[0] < rates[1]:
        ax.axvspan(rates[0], rates[1], color="tab:green", alpha=0.08, label="sized range")
    elif rates:
        ax.axvline(rates[-1], color="grey", linestyle=":", label="sized rate")
    ax.set_xlabel("rate (req/s)")
    ax.set_ylabel(f"predicted {key} (ms)")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_batch_sweep(sizes, values, largest, stage, key: str, wall: float, path) -> Path:
    """The SLO quantile against max_batch_size with every other knob as planned: the
    largest batch under the wall (``wall``: the target less the network, seconds); a value
    None is over capacity or unanswered."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    if stage is not None:
        ax.set_title(f"max_batch_size of {stage}, the other stages as planned", fontsize=9)
    pts = [(b, v) for b, v in zip(sizes, values) if v is not None]
    ax.plot([b for b, _ in pts], [v * 1e3 for _, v in pts], "o-")
    missing = [b for b, v in zip(sizes, values) if v is None]
    if missing:     # over capacity, or no model: marked where the wall is, not left out
        ax.plot(missing, [wall * 1e3] * len(missing), "x", color="black",
                label="unstable or no model")
    ax.axhline(wall * 1e3, color="tab:red", linestyle="--", label=f"{key} target less the network")
    if largest is not None:
        ax.axvline(largest, color="tab:green", linestyle=":",
                   label=f"largest batch under it: {largest}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("max_batch_size" if stage is None else f"max_batch_size of {stage}")
    ax.set_ylabel(f"predicted {key} (ms)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_timeline(series, pods, path, wall: float | None = None, key: str = "p95",
                  rate=None, title: str = "") -> Path:
    """Latency and pods over time, as a design review wants them: top, a windowed quantile
    per deployment (``series``: label -> (window starts, seconds)) against the SLO line
    ``wall``; middle, pods ready (``pods``: label -> (times, counts), steps); bottom, the
    offered rate (``rate``: (times, req/s)) when given. Times in seconds, shown in minutes."""
    plt = _pyplot()
    rows = 3 if rate is not None else 2
    fig, axes = plt.subplots(rows, 1, figsize=(9, 2.4 * rows + 0.6), sharex=True)
    ax = axes[0]
    for label, (xs, values) in series.items():
        # a model's line dashed over the simulations it is checked against
        ax.plot(np.asarray(xs) / 60, np.asarray(values) * 1e3, drawstyle="steps-post",
                label=label, linestyle="--" if "model" in label else "-")
    if wall is not None:
        ax.axhline(wall * 1e3, color="tab:red", linestyle="--", label=f"{key} SLO")
    ax.set_yscale("log")
    ax.set_ylabel(f"windowed {key} (ms)")
    ax.legend(fontsize=7, loc="upper right")
    ax = axes[1]
    for label, (xs, counts) in pods.items():
        ax.plot(np.asarray(xs) / 60, counts, drawstyle="steps-post", label=label)
    ax.set_ylabel("pods ready")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7, loc="upper right")
    if rate is not None:
        axes[2].plot(np.asarray(rate[0]) / 60, rate[1], color="grey")
        axes[2].set_ylabel("rate (req/s)")
    axes[-1].set_xlabel("time (minutes)")
    if title:
        axes[0].set_title(title, fontsize=10)
    return _save(fig, path)


def plot_triton_check(rows, path) -> Path:
    """Real server against qmodel (:func:`qmodel.triton.check.compare`): left, the calibrated
    prediction's p50 and p99 against perf_analyzer's, each run a point, a configuration's
    repeats joined by a line (their spread is the measurement's noise); right, the p99 error
    of the calibrated and of the mean-only prediction against the calibrated utilization.
    Overloaded runs are left out."""
    plt = _pyplot()
    rows = [r for r in rows if not r.overloaded]     # no steady state to compare
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.config, r.rate), []).append(r)
    for key, marker in (("p50", "o"), ("p99", "s")):
        xs = [r.measured[key] * 1e3 for r in rows]
        ys = [r.calibrated[key] * 1e3 for r in rows]
        left.scatter(xs, ys, marker=marker, s=18, label=f"{key}, calibrated prediction")
        for runs in groups.values():
            if len(runs) > 1:
                left.plot([r.measured[key] * 1e3 for r in runs],
                          [r.calibrated[key] * 1e3 for r in runs], color="grey", lw=0.6)
    top = max((max(r.measured["p99"], r.calibrated["p99"]) for r in rows), default=0.01) \
        * 1e3 * 1.05
    left.plot([0, top], [0, top], color="black", lw=0.8, linestyle=":", label="equal")
    left.set_xlabel("measured by perf_analyzer (ms)")
    left.set_ylabel("predicted (ms)")
    left.legend(fontsize=7)
    for which, marker in (("calibrated", "o"), ("mean_only", "x")):
        right.scatter([r.utilization for r in rows], [100 * r.error(which, "p99") for r in rows],
                      marker=marker, s=18, label=f"{which.replace('_', '-')} p99")
    right.axhline(0, color="black", lw=0.8)
    right.set_xlabel("utilization of the calibrated node")
    right.set_ylabel("error against perf_analyzer (%)")
    right.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)
