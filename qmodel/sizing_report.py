"""A sizing plan on disk: its config.pbtxt, a Markdown report and the figures behind it.

:meth:`qmodel.sizing.Plan.write` (and ``qmodel size --out DIR``) calls :func:`write_plan`:

- ``<name>/config.pbtxt`` (for Ensemble pods, one directory per model), ready for a Triton
  model repository, where the ``[triton]`` extra is installed;
- ``report.md``: the plan against the SLO (predicted, trusted, simulated), how it was verified,
  the cheapest alternatives, the cost-latency front and the plan's notes;
- ``pareto.png``: the trusted SLO quantile of the best configuration at each cost;
- ``rate_sweep.png``: the SLO quantile of the plan and its nearest alternatives against the
  rate, with the SLO line;
- ``batch_sweep.png`` (a node plan): the SLO quantile against max_batch_size with everything
  else as planned, and the largest batch that stays under the SLO.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .ensemble import Ensemble
from .predict import predict
from .system import Cluster, Node

__all__ = ["write_plan", "rate_sweep", "batch_sweep", "tail"]

SWEEP = np.linspace(0.3, 1.3, 21)        # rates, as fractions of the sized rate


def tail(plan) -> tuple[str, float, float]:
    """(key, level, target) of the plan's highest SLO quantile."""
    from .sizing import LEVELS, highest_quantile

    key = highest_quantile(plan.slo)
    return key, LEVELS[key], plan.slo[key]


def _answer(system, rate, level):
    """The model's quantile at ``level`` (seconds), or None where it is unstable or no model
    covers it (the sweeps do not simulate)."""
    try:
        return float(predict(system, rate=rate, fallback="raise").quantile(level))
    except (ValueError, NotImplementedError, ArithmeticError):
        return None


def rate_sweep(plan, candidates=3) -> dict:
    """{label: (rates, quantiles)} for the plan and up to ``candidates - 1`` alternatives of
    other configurations: the SLO quantile predicted from 0.3 to 1.3 times the sized rate."""
    _, level, _ = tail(plan)
    systems = [("plan", plan.system)]
    seen = {_describe(plan.system)}
    for c in plan.alternatives:
        if len(systems) >= candidates:
            break
        system = c.system()
        if _describe(system) not in seen:
            seen.add(_describe(system))
            systems.append((f"{c.nodes} x {c.node.describe()}", system))
    out = {}
    for label, system in systems:
        rates = plan.load * SWEEP
        values = [_answer(system, r, level) for r in rates]
        keep = [i for i, v in enumerate(values) if v is not None]
        out[label] = (rates[keep], np.array([values[i] for i in keep]))
    return out


def batch_sweep(plan, sizes=(1, 2, 4, 8, 16, 32, 64, 128)) -> tuple:
    """(sizes, quantiles, largest size under the SLO) with every other knob as planned; None
    for an Ensemble plan."""
    from dataclasses import replace

    node = plan.system if isinstance(plan.system, Node) else plan.system.nodes[0]
    if isinstance(node, Ensemble):
        return None
    _, level, target = tail(plan)
    values = []
    for B in sizes:
        changed = replace(node, max_batch_size=B, preferred_batch_sizes=tuple(
            p for p in node.preferred_batch_sizes if p <= B))
        system = changed if isinstance(plan.system, Node) else Cluster(
            changed, count=len(plan.system.nodes), router=plan.system.router)
        values.append(_answer(system, plan.load, level))
    under = [B for B, v in zip(sizes, values) if v is not None and v + plan.network <= target]
    return list(sizes), values, (max(under) if under else None)


def _describe(system) -> str:
    return system.describe()


def write_plan(plan, folder, name: str = "model") -> list:
    """Write the plan's config, report and figures into ``folder``; returns the paths."""
    from .plots import plot_batch_sweep, plot_pareto, plot_rate_sweep

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, config_note = [], ""
    try:
        texts = plan.config_pbtxt(name) if plan.feasible else None
    except ImportError as err:
        config_note = f"config.pbtxt not written: {err}"
    else:
        if texts is None:
            config_note, texts = "config.pbtxt not written: no plan meets the SLO", {}
        if isinstance(texts, str):
            texts = {name: texts}
        for model, text in texts.items():
            (folder / model).mkdir(exist_ok=True)
            path = folder / model / "config.pbtxt"
            path.write_text(text)
            written.append(path)
    key, level, target = tail(plan)
    figures = []
    if plan.pareto:
        figures.append(plot_pareto(plan, folder / "pareto.png"))
    sweep = rate_sweep(plan)
    if any(r.size for r, _ in sweep.values()):
        figures.append(plot_rate_sweep(plan, sweep, folder / "rate_sweep.png"))
    batches = batch_sweep(plan)
    if batches is not None and any(v is not None for v in batches[1]):
        figures.append(plot_batch_sweep(plan, batches, folder / "batch_sweep.png"))
    report = folder / "report.md"
    report.write_text(_markdown(plan, figures, batches, config_note, written))
    return [*written, report, *figures]


def _markdown(plan, figures, batches, config_note, configs) -> str:
    from .sizing import LEVELS, trusted_quantile

    ms = lambda x: f"{x * 1e3:.3f}"     # noqa: E731
    lines = ["# Sizing plan", ""]
    lines += ["```", plan.summary(), "```", ""]
    lines += [f"Rate {plan.rate:,.0f} req/s, sized at {plan.load:,.0f} req/s"
              + (f" with {plan.failures} node(s) down" if plan.failures else "")
              + (f"; {plan.network * 1e3:g} ms of each target left to the network"
                 if plan.network else "") + ".", ""]
    head = "| quantile | target ms | predicted ms | trusted + network ms | simulated ms (95% CI) |"
    lines += [head, "|---|---|---|---|---|"]
    for key, target in plan.slo.items():
        lvl = LEVELS[key]
        pred = plan.predicted
        predicted = "-" if pred is None else ms(pred.quantile(lvl))
        trusted = "-" if pred is None else ms(trusted_quantile(pred, lvl) + plan.network)
        sim = "-"
        if plan.simulated is not None:
            lo, hi = plan.simulated.ci(lvl)
            sim = f"{ms(plan.simulated.quantile(lvl))} ({ms(lo)}-{ms(hi)})"
        lines.append(f"| {key} | {ms(target)} | {predicted} | {trusted} | {sim} |")
    lines += ["", f"**Verification.** {plan.verification}", ""]
    if plan.rival is not None:
        rival, sim = plan.rival
        key = next(iter(plan.slo))
        lines += [f"**One node cheaper.** The best configuration at {rival.nodes} node(s), "
                  f"{rival.node.describe()} ({rival.router}), simulated {key} "
                  f"{ms(sim.quantile(LEVELS[key]))} ms against the target "
                  f"{ms(plan.slo[key])} ms (the model's trusted value: "
                  f"{ms(rival.trusted[key])} ms).", ""]
    if plan.alternatives:
        lines += ["## Cheapest alternatives", "",
                  "| nodes | cost | configuration | router | worst trusted / target |",
                  "|---|---|---|---|---|"]
        for c in plan.alternatives[:10]:
            lines.append(f"| {c.nodes} | {c.cost:g} | {c.node.describe()} | {c.router} | "
                         f"{c.worst_ratio:.3f} |")
        lines.append("")
    if plan.pareto:
        lines += ["## Cost against the tail", "",
                  "| nodes | cost | best configuration | worst trusted / target |",
                  "|---|---|---|---|"]
        for c in plan.pareto:
            lines.append(f"| {c.nodes} | {c.cost:g} | {c.node.describe()} ({c.router}) | "
                         f"{c.worst_ratio:.3f} |")
        lines.append("")
    if batches is not None and batches[2] is not None:
        lines += [f"**Batch size.** With every other knob as planned, the largest "
                  f"max_batch_size whose {tail(plan)[0]} stays under the target is "
                  f"{batches[2]}.", ""]
    if figures:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures] + [""]
    if plan.notes or config_note:
        lines += ["## Notes", ""] + [f"- {n}" for n in (*plan.notes, config_note) if n] + [""]
    if configs:
        lines += ["## Triton configuration", ""] + [
            f"- `{p.parent.name}/config.pbtxt`" for p in configs] + [""]
    return "\n".join(lines)
