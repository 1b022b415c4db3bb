"""Matplotlib figures of latency results (for reports, the CLI and the demo).

Figures are drawn with the non-interactive Agg backend and written to files; nothing here opens
a window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

__all__ = ["plot_latency"]


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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
