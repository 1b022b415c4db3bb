"""A sizing plan on disk: its config.pbtxt, a Markdown report and the figures behind it.

:meth:`qmodel.sizing.Plan.write` (and ``qmodel size --out DIR``) calls :func:`write_plan`:

- ``<name>/config.pbtxt`` (for Ensemble pods, one directory per model), ready for a Triton
  model repository, where the ``[triton]`` extra is installed;
- ``report.md``: the plan against the SLO (predicted, trusted, simulated), how it was verified,
  the cheapest alternatives, the cost-latency front and the plan's notes;
- ``pareto.png``: the trusted SLO quantile of the best configuration at each cost;
- ``rate_sweep.png``: the SLO quantile of the plan and its nearest alternatives against the
  rate, the range it was sized for shaded;
- ``batch_sweep.png``: the SLO quantile against max_batch_size with everything else as
  planned (for Ensemble pods, that of the stage with the longest own tail);
- with an autoscaler, ``hpa.yaml`` (the HorizontalPodAutoscaler) and ``schedule.png`` (the
  pods and the windowed quantile over the traffic, against the static plan).

The sweeps are the model's answers, not simulations, by the rule the search ranks with
(:func:`qmodel.sizing.trust.model_answer`: also beyond a family's measured domain), with the
plan's ``failures`` nodes down as it was sized, as the report says.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..ensemble import Ensemble
from ..slo import LEVELS, highest_quantile
from ..system import Cluster
from .deployment import knobs, unit
from .trust import model_answer, trusted_quantile

__all__ = ["write_plan", "rate_sweep", "batch_sweep", "tail", "autoscaled_markdown",
           "plot_autoscaled"]

# rates swept, as fractions of the sized rate (one rate) or of the range's ends
SWEEP = np.linspace(0.3, 1.3, 21)


def tail(plan) -> tuple[str, float, float]:
    """(key, level, target) of the plan's highest SLO quantile."""
    key = highest_quantile(plan.slo)
    return key, LEVELS[key], plan.slo[key]


def _down(system, failures: int):
    """``system`` with ``failures`` nodes down, as the plan was sized."""
    if not failures or not isinstance(system, Cluster):
        return system
    left = len(system.nodes) - failures
    node = system.nodes[0]
    return node if left == 1 else Cluster(node, count=left, router=system.router)


def _answer(system, rate, level, scv=1.0):
    """The quantile at ``level`` (seconds) by the search's rule, or None where it is
    unstable or no model covers it (the sweeps do not simulate)."""
    try:
        return float(model_answer(system, rate, scv=scv).quantile(level))
    except (ValueError, NotImplementedError, ArithmeticError):
        return None


def _swept_rates(plan) -> np.ndarray:
    if plan.is_range:
        return np.geomspace(0.5 * plan.low, 1.3 * plan.load, 25)
    return plan.load * SWEEP


def rate_sweep(plan, candidates=3) -> dict:
    """{label: (rates, quantiles)} for the plan and up to ``candidates - 1`` alternatives of
    other configurations: the SLO quantile predicted over the rates around the sized ones,
    with the plan's ``failures`` nodes down."""
    _, level, _ = tail(plan)
    systems = [("plan" + (f" ({plan.failures} node(s) down)" if plan.failures else ""),
                plan.system)]
    seen = {plan.system.describe()}
    for c in plan.alternatives:
        if len(systems) >= candidates:
            break
        system = c.system()
        if system.describe() not in seen:
            seen.add(system.describe())
            systems.append((f"{c.nodes} x {knobs(c.node)}", system))
    out = {}
    rates = _swept_rates(plan)
    for label, system in systems:
        values = [_answer(_down(system, plan.failures), r, level, plan.scv) for r in rates]
        keep = [i for i, v in enumerate(values) if v is not None]
        out[label] = (rates[keep], np.array([values[i] for i in keep]))
    return out


def batch_sweep(plan, sizes=(1, 2, 4, 8, 16, 32, 64, 128)):
    """(sizes, quantiles, largest size under the SLO, stage) with every other knob as
    planned, at the rate where the plan's margin is smallest, ``failures`` nodes down. For
    Ensemble pods the stage is the one with the longest own tail in the plan's prediction;
    stage is None for a node plan. Sizes beyond the largest a measured S(k) holds are not
    swept: the law there is an extrapolation."""
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
    rate = plan.binding or plan.load
    values = [_answer(_down(_with_batch(plan, node, stage, B), plan.failures), rate, level,
                      plan.scv) for B in sizes]
    under = [B for B, v in zip(sizes, values) if v is not None and v + plan.network <= target]
    return sizes, values, (max(under) if under else None), stage


def _with_batch(plan, node, stage, B):
    """The plan's system with max_batch_size B at ``node`` (or at its stage ``stage``)."""
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


def _largest_measured(service) -> float:
    """The largest batch size a measured law holds; infinity for a formula."""
    sizes = [k for k, _ in (service.samples or service.points)]
    return max(sizes) if sizes else float("inf")


def write_plan(plan, folder, name: str = "model") -> list:
    """Write the plan's config, report and figures into ``folder``; returns the paths."""
    from ..plots import plot_batch_sweep, plot_pareto, plot_rate_sweep

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
    if plan.autoscaler is not None and plan.feasible:
        path = folder / "hpa.yaml"
        path.write_text(plan.manifest(name))
        written.append(path)
    key, level, target = tail(plan)
    figures = []
    front = plan.static.pareto if plan.static is not None else plan.pareto
    if front:
        point = None
        if plan.feasible and plan.alternatives and plan.schedule is None:
            point = (plan.cost, plan.alternatives[0].worst_ratio)
        figures.append(plot_pareto([c.cost for c in front], [c.worst_ratio for c in front],
                                   point, folder / "pareto.png"))
    static = plan.static if plan.static is not None else plan
    sweep = rate_sweep(static)
    if any(r.size for r, _ in sweep.values()):
        stated = None
        if static.predicted is not None:
            share = (float(static.predicted.quantile(level))
                     / trusted_quantile(static.predicted, level))
            stated = (target - plan.network) * share
        rates = (static.low, static.load) if static.is_range else (static.load,)
        figures.append(plot_rate_sweep(sweep, key, target - plan.network,
                                       folder / "rate_sweep.png", stated, rates))
    batches = batch_sweep(static)
    if batches is not None and any(v is not None for v in batches[1]):
        figures.append(plot_batch_sweep(*batches, key, target - plan.network,
                                        folder / "batch_sweep.png"))
    if plan.schedule is not None:

        figures.append(plot_autoscaled(plan, folder / "schedule.png"))
    report = folder / "report.md"
    report.write_text(_markdown(plan, figures, batches, config_note, written))
    return [*written, report, *figures]


def _markdown(plan, figures, batches, config_note, configs) -> str:
    ms = lambda x: f"{x * 1e3:.3f}"     # noqa: E731
    lines = ["# Sizing plan", ""]
    lines += ["```", plan.summary(), "```", ""]
    rates = (f"every rate in [{plan.low:,.0f}, {plan.load:,.0f}] req/s (the margin is "
             f"smallest at {plan.binding:,.0f} req/s)" if plan.is_range
             else f"{plan.load:,.0f} req/s")
    lines += [f"Sized for {rates}"
              + (f" with {plan.failures} node(s) down" if plan.failures else "")
              + (f"; {plan.network * 1e3:g} ms of each target left to the network"
                 if plan.network else "") + ".", ""]
    if plan.schedule is not None:

        lines += autoscaled_markdown(plan)
    else:
        lines += _quantile_table(plan, ms)
        lines += ["", f"**Verification.** {plan.verification}", ""]
    if plan.rival is not None:
        rival, sim = plan.rival
        # the key that missed most: simulated CI upper end plus network over its target
        key = max(plan.slo, key=lambda k: (sim.ci(LEVELS[k])[1] + plan.network) / plan.slo[k])
        lines += [f"**One node cheaper.** The best configuration at {rival.nodes} node(s), "
                  f"{knobs(rival.node)} ({rival.router}), simulated {key} "
                  f"{ms(sim.quantile(LEVELS[key]))} ms at "
                  f"{plan.rival_rate or rival.binding:,.0f} req/s against "
                  f"the target {ms(plan.slo[key])} ms"
                  + (f" less the {plan.network * 1e3:g} ms network" if plan.network else "")
                  + f" (the model's trusted value at {rival.binding:,.0f} req/s: "
                  f"{ms(rival.trusted[key])} ms).", ""]
    static = plan.static if plan.static is not None else plan
    if static.alternatives:
        lines += ["## Cheapest alternatives", "",
                  "| nodes | cost | configuration | router | worst trusted / target | at req/s |",
                  "|---|---|---|---|---|---|"]
        for c in static.alternatives[:10]:
            lines.append(f"| {c.nodes} | {c.cost:g} | {knobs(c.node)} | {c.router} | "
                         f"{c.worst_ratio:.3f} | {c.binding:,.0f} |")
        lines.append("")
    if static.pareto:
        lines += ["## Cost against the tail", "",
                  "| nodes | cost | best configuration | worst trusted / target |",
                  "|---|---|---|---|"]
        for c in static.pareto:
            bound = "" if c.complete else " (at least: evaluation stopped at a miss)"
            lines.append(f"| {c.nodes} | {c.cost:g} | {knobs(c.node)} ({c.router}) | "
                         f"{c.worst_ratio:.3f}{bound} |")
        lines.append("")
    if batches is not None and batches[2] is not None:
        where = "" if batches[3] is None else f" of {batches[3]} (the longest own tail)"
        lines += [f"**Batch size.** With every other knob as planned, the largest "
                  f"max_batch_size{where} whose {tail(plan)[0]} stays under the target is "
                  f"{batches[2]}.", ""]
    lines += ["The sweeps in the figures are the model's own answers, extrapolated where a "
              "system lies beyond its family's measured domain"
              + (f", with {plan.failures} node(s) down as sized" if plan.failures else "")
              + "; the plan itself is checked by simulation.", ""]
    if figures:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures] + [""]
    if plan.notes or config_note:
        lines += ["## Notes", ""] + [f"- {n}" for n in (*plan.notes, config_note) if n] + [""]
    if configs:
        lines += ["## Triton configuration", ""] + [
            f"- `{p.relative_to(p.parents[1]) if p.name == 'config.pbtxt' else p.name}`"
            for p in configs] + [""]
    return "\n".join(lines)


def _quantile_table(plan, ms) -> list:
    lines = ["| quantile | target ms | predicted ms | trusted + network ms | "
             "simulated ms (95% CI) |", "|---|---|---|---|---|"]
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
    if len(plan.verified) > 1:
        lines += ["", "| simulated at req/s | " + " | ".join(plan.slo) + " |",
                  "|---|" + "---|" * len(plan.slo)]
        for rate, sim in plan.verified:
            lines.append(f"| {rate:,.0f} | " + " | ".join(
                f"{ms(sim.quantile(LEVELS[k]))} ({ms(sim.ci(LEVELS[k])[1])})"
                for k in plan.slo) + " |")
    return lines


def autoscaled_markdown(plan) -> list:
    """The report's lines for an autoscaled plan: the schedule, the cost, the transients."""
    a = plan.autoscaler
    lines = [f"**Autoscaler.** {a.metric} target {a.target:.3g} per pod, pods "
             f"{a.min_pods}-{a.max_pods}, ready {a.scale_up_delay:g} s after a scale-up, "
             f"scale-down stabilization {a.stabilization:g} s; the HorizontalPodAutoscaler "
             "is `hpa.yaml`.", ""]
    if plan.static is not None and plan.static.feasible:
        hours = plan.traffic.duration / 3600
        lines += [f"**Cost.** {plan.cost * hours:,.1f} GPU-hour units over the "
                  f"{hours:.3g} h traffic, against {plan.static.cost * hours:,.1f} for the "
                  f"static plan over the whole range ({plan.static.nodes} "
                  f"{'pod' if isinstance(plan.node, Ensemble) else 'node'}(s)): "
                  f"{plan.cost / plan.static.cost:.0%}.", ""]
    lines += ["| from s | ready | requested |", "|---|---|---|"]
    changes = plan.schedule.changes()
    for t, ready, requested in changes[:40]:
        lines.append(f"| {t:,.0f} | {ready} | {requested} |")
    if len(changes) > 40:
        lines.append(f"| ... {len(changes) - 40} more changes | | |")
    lines.append("")
    if plan.transients:
        lines += ["**Transients** (after a rise, before the new pods are ready and the "
                  "backlog is worked off; not required by the plan):", ""]
        lines += [f"- {t.describe()}" for t in plan.transients] + [""]
    lines += [f"**Verification.** {plan.verification}", ""]
    return lines


def plot_autoscaled(plan, path):
    """Pods and the windowed quantile over the traffic, predicted and simulated, against the
    static plan's pods (the figure a design review wants)."""
    from ..plots import plot_timeline

    key = max(plan.slo, key=lambda k: LEVELS[k])
    level = LEVELS[key]
    series = {}
    rows = plan.windows
    series["autoscaled, predicted"] = ([r[0] for r in rows], [r[2][key] for r in rows])
    if plan.simulated is not None:
        starts, values = plan.simulated.windowed_quantiles(level, rows[1][0] - rows[0][0]
                                                           if len(rows) > 1 else 60.0)
        series["autoscaled, simulated"] = (starts, values)
    sched = plan.schedule
    pods = {"autoscaled": (np.concatenate([sched.times, [sched.end]]),
                           np.concatenate([sched.ready, sched.ready[-1:]]))}
    if plan.static is not None and plan.static.feasible:
        pods[f"static ({plan.static.nodes})"] = ([plan.traffic.start, plan.traffic.end],
                                                 [plan.static.nodes] * 2)
    t = np.linspace(plan.traffic.start, plan.traffic.end, 1000)
    return plot_timeline(series, pods, path, wall=plan.slo[key] - plan.network, key=key,
                         rate=(t, plan.traffic.rate_at(t)),
                         title=f"{knobs(plan.node)[:90]}")
