"""A sizing plan on disk: its config.pbtxt, a Markdown report and the figures behind it.

:meth:`qmodel.sizing.Plan.write` (and ``qmodel size --out DIR``) calls :func:`write_plan`:

- ``<name>/config.pbtxt`` (for Ensemble pods, one directory per model), ready for a Triton
  model repository, where the ``[triton]`` extra is installed;
- ``report.md``: the plan against the SLO (predicted, trusted, simulated), how it was verified,
  the cheapest alternatives, the cost-latency front and the plan's notes;
- ``pareto.png``: the trusted SLO quantile of the best configuration at each cost;
- ``rate_sweep.png``: the SLO quantile of the plan and its nearest alternatives against the
  rate, with the SLO line;
- ``batch_sweep.png``: the SLO quantile against max_batch_size with everything else as
  planned (for Ensemble pods, that of the stage with the longest own tail), and the largest
  batch that stays under the SLO.

The sweeps are the model's answers, not simulations, by the rule the search ranks with
(:func:`qmodel.sizing.model_answer`: also beyond a family's measured domain), as the report
says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .ensemble import Ensemble
from .system import Cluster

__all__ = ["write_plan", "rate_sweep", "batch_sweep", "tail", "knobs", "unit"]

SWEEP = np.linspace(0.3, 1.3, 21)        # rates, as fractions of the sized rate


def tail(plan) -> tuple[str, float, float]:
    """(key, level, target) of the plan's highest SLO quantile."""
    from .sizing import LEVELS, highest_quantile

    key = highest_quantile(plan.slo)
    return key, LEVELS[key], plan.slo[key]


def knobs(system) -> str:
    """A node's description, or for an Ensemble pod each stage's batching knobs on one line.

    >>> import qmodel as qm
    >>> s = qm.ServiceTime.affine(1e-3)
    >>> pod = qm.Ensemble({"a": qm.Node(s, max_batch_size=4, max_queue_delay=1e-3),
    ...                    "b": qm.Node(s, instances=2)}, [("a", "b")])
    >>> knobs(pod)
    'a: B 4, delay 1 ms, 1 instance; b: B 1, delay 0 ms, 2 instances'
    """
    if not isinstance(system, Ensemble):
        return system.describe()
    return "; ".join(
        f"{name}: B {n.max_batch_size}, delay {n.max_queue_delay * 1e3:g} ms, "
        + (f"preferred {'/'.join(map(str, n.preferred_batch_sizes))}, "
           if n.preferred_batch_sizes else "")
        + f"{n.instances} instance{'s' * (n.instances > 1)}"
        for name, n in ((m, system.stages[m]) for m in system.order))


def _answer(system, rate, level):
    """The quantile at ``level`` (seconds) by the rule the search ranks with
    (:func:`qmodel.sizing.model_answer`: the model's own answer, also beyond its measured
    domain, which the report states), or None where it is unstable or no model covers it
    (the sweeps do not simulate)."""
    from .sizing import model_answer

    try:
        return float(model_answer(system, rate).quantile(level))
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
            systems.append((f"{c.nodes} x {knobs(c.node)}", system))
    out = {}
    for label, system in systems:
        rates = plan.load * SWEEP
        values = [_answer(system, r, level) for r in rates]
        keep = [i for i, v in enumerate(values) if v is not None]
        out[label] = (rates[keep], np.array([values[i] for i in keep]))
    return out


def batch_sweep(plan, sizes=(1, 2, 4, 8, 16, 32, 64, 128)) -> tuple:
    """(sizes, quantiles, largest size under the SLO, stage) with every other knob as
    planned. For Ensemble pods the stage is the one with the longest own tail in the plan's
    prediction, and only its max_batch_size changes; stage is None for a node plan.

    Sizes beyond the largest a measured S(k) holds (a table or samples) are not swept: the
    law there is an extrapolation.
    """
    node = unit(plan.system)
    _, level, target = tail(plan)
    stage = None
    if isinstance(node, Ensemble):
        stages = getattr(plan.predicted, "stages", None) or {}
        if not stages:
            return None
        stage = max(stages, key=lambda name: stages[name].quantile(level))
        swept = node.stages[stage]
    else:
        swept = node
    sizes = [B for B in sizes if B <= _largest_measured(swept.service)]
    values = [_answer(_with_batch(plan, node, stage, B), plan.load, level) for B in sizes]
    under = [B for B, v in zip(sizes, values) if v is not None and v + plan.network <= target]
    return sizes, values, (max(under) if under else None), stage


def _with_batch(plan, node, stage, B):
    """The plan's system with max_batch_size B at ``node`` (or at its stage ``stage``)."""
    from dataclasses import replace

    def changed(n):
        return replace(n, max_batch_size=B, preferred_batch_sizes=tuple(
            p for p in n.preferred_batch_sizes if p <= B))
    if stage is not None:
        node = Ensemble({**node.stages, stage: changed(node.stages[stage])}, list(node.edges))
    else:
        node = changed(node)
    if isinstance(plan.system, Cluster):
        return Cluster(node, count=len(plan.system.nodes), router=plan.system.router)
    return node


def unit(system):
    """What a plan repeats: its Node or Ensemble pod (the system itself where it is one)."""
    return system.nodes[0] if isinstance(system, Cluster) else system


def _largest_measured(service) -> float:
    """The largest batch size a measured law holds; infinity for a formula."""
    sizes = [k for k, _ in (service.samples or service.points)]
    return max(sizes) if sizes else float("inf")


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
                  f"{knobs(rival.node)} ({rival.router}), simulated {key} "
                  f"{ms(sim.quantile(LEVELS[key]))} ms against the target "
                  f"{ms(plan.slo[key])} ms (the model's trusted value: "
                  f"{ms(rival.trusted[key])} ms).", ""]
    if plan.alternatives:
        lines += ["## Cheapest alternatives", "",
                  "| nodes | cost | configuration | router | worst trusted / target |",
                  "|---|---|---|---|---|"]
        for c in plan.alternatives[:10]:
            lines.append(f"| {c.nodes} | {c.cost:g} | {knobs(c.node)} | {c.router} | "
                         f"{c.worst_ratio:.3f} |")
        lines.append("")
    if plan.pareto:
        lines += ["## Cost against the tail", "",
                  "| nodes | cost | best configuration | worst trusted / target |",
                  "|---|---|---|---|"]
        for c in plan.pareto:
            lines.append(f"| {c.nodes} | {c.cost:g} | {knobs(c.node)} ({c.router}) | "
                         f"{c.worst_ratio:.3f} |")
        lines.append("")
    if batches is not None and batches[2] is not None:
        where = "" if batches[3] is None else f" of {batches[3]} (the longest own tail)"
        lines += [f"**Batch size.** With every other knob as planned, the largest "
                  f"max_batch_size{where} whose {tail(plan)[0]} stays under the target is "
                  f"{batches[2]}.", ""]
    lines += ["The sweeps in the figures are the model's own answers, extrapolated where a "
              "system lies beyond its family's measured domain; the plan itself is checked "
              "by simulation.", ""]
    if figures:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures] + [""]
    if plan.notes or config_note:
        lines += ["## Notes", ""] + [f"- {n}" for n in (*plan.notes, config_note) if n] + [""]
    if configs:
        lines += ["## Triton configuration", ""] + [
            f"- `{p.parent.name}/config.pbtxt`" for p in configs] + [""]
    return "\n".join(lines)
