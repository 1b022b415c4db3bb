"""Which stage of an ensemble dominates its tail, and what turning its knobs does.

:func:`bottleneck` predicts the ensemble (or its pods) as given, then once per knob change
of each stage: one instance more, max_batch_size doubled and halved, max_queue_delay halved
and doubled (or set to S(1) where it is 0). The stage whose best change cuts the end-to-end
quantile the most (``best``) is the one to work on; the stage with the largest own quantile
(``dominant``) is the one that holds the tail.

Examples
--------
>>> import qmodel as qm
>>> s = qm.ServiceTime.affine(1e-3, 1e-4)
>>> model = qm.Node(qm.ServiceTime.affine(2e-3, 5e-4), max_batch_size=8, max_queue_delay=3e-3)
>>> ens = qm.Ensemble({"pre": qm.Node(s, max_batch_size=4, instances=2), "model": model},
...                   [("pre", "model")])
>>> report = bottleneck(ens, rate=400.0, fallback="raise")
>>> report.dominant
'model'
>>> round(report.stages["model"] / report.latency, 2)    # its own p99 over the end-to-end
0.87
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .predict import predict
from .system import Cluster, as_cluster

__all__ = ["bottleneck", "Bottleneck", "KnobChange"]


@dataclass(frozen=True)
class KnobChange:
    """One stage's knob changed and the end-to-end quantile predicted with it.

    ``latency`` is None where the change makes the ensemble unstable or no answer came
    (``note`` says why); ``simulated`` is True where the simulator answered it (no model
    covers the changed ensemble: its accuracy record's exactness is "simulation");
    ``method`` is how the answer was obtained, in words, for display."""

    stage: str
    change: str
    latency: float | None
    method: str = ""
    note: str = ""
    simulated: bool = False


@dataclass(frozen=True)
class Bottleneck:
    """What :func:`bottleneck` found.

    Attributes
    ----------
    level : float
        The quantile level looked at (0.99 for p99).
    latency : float
        The end-to-end quantile as configured (seconds).
    stages : dict of str to float
        Each stage's own sojourn quantile at ``level`` (seconds).
    dominant : str
        The stage that holds the tail: the one with the largest own quantile, or where the
        answer does not carry the stages' own latencies, the stage nearest saturation
        (``dominant_by`` says which rule chose it).
    changes : tuple of KnobChange
    best : KnobChange or None
        The change with the lowest end-to-end quantile, where it is lower than as configured
        (None where no answered change cuts it).
    result : Latency
        The end-to-end prediction as configured.
    dominant_by : {"own quantile", "utilization"}
        How ``dominant`` was chosen.
    """

    level: float
    latency: float
    stages: dict
    dominant: str
    changes: tuple
    best: object
    result: object
    dominant_by: str = "own quantile"

    def table(self) -> str:
        """The report as a fixed-width text table (milliseconds).

        Examples
        --------
        See :func:`bottleneck`.
        """
        name = _level_name(self.level)
        rule = ("" if self.dominant_by == "own quantile" else
                " (nearest saturation: the answer carries no stage's own latency)")
        lines = [f"end-to-end {name}: {self.latency * 1e3:.3f} ms; dominant stage: "
                 f"{self.dominant}{rule}"]
        if self.best is not None:
            lines.append(f"largest cut: {self.best.stage}, {self.best.change} "
                         f"({self.best.latency / self.latency - 1:+.1%})")
        else:
            lines.append(f"no change tried cuts the end-to-end {name}")
        lines += ["",
                 f"{'stage':16}{'own ' + name:>12}{'share':>8}"]
        for stage, value in self.stages.items():
            lines.append(f"{stage:16}{value * 1e3:9.3f} ms{value / self.latency:8.0%}")
        lines += ["", f"{'stage':16}{'change':30}{'end-to-end ' + name:>18}{'change':>9}"]
        for c in self.changes:
            if c.latency is None:
                lines.append(f"{c.stage:16}{c.change:30}{'-':>18}   {c.note}")
                continue
            delta = c.latency / self.latency - 1.0
            lines.append(f"{c.stage:16}{c.change:30}{c.latency * 1e3:15.3f} ms{delta:+9.1%}"
                         + ("  (simulated)" if c.simulated else ""))
        return "\n".join(lines)


def bottleneck(system, rate: float, *, level: float = 0.99, fallback: str = "simulate",
               budget=None) -> Bottleneck:
    """The stages of an Ensemble (or of identical Ensemble pods behind a static router) ranked
    by what their knobs do to the end-to-end quantile at ``level``.

    Parameters
    ----------
    system : Ensemble or Cluster of Ensemble pods
    rate : float
        Poisson arrivals, requests per second (to the whole cluster for pods).
    level : float
        The quantile looked at, 0.99 by default.
    fallback : {"simulate", "raise"}
        Passed to every :func:`qmodel.predict` call: where no model covers a change, answer
        by simulation (seconds each), or leave the change without an answer (its note says
        why).
    budget : qmodel.Budget, optional
        Passed to every :func:`qmodel.predict` call.

    Returns
    -------
    Bottleneck
    """
    cluster = as_cluster(system)
    if not cluster.pods:
        raise ValueError("bottleneck(system, ...) takes an Ensemble or a Cluster of Ensemble "
                         f"pods, got {type(system).__name__}")
    from .latency import checked_levels

    level = float(checked_levels(level, "level")[()])
    base = predict(system, rate=rate, budget=budget)     # as configured: always answered
    latency = float(base.quantile(level))
    ensemble = cluster.nodes[0]
    own = {}
    if base.stages is not None:
        own = {name: float(r.quantile(level)) for name, r in base.stages.items()}
    changes = []
    for stage in ensemble.order:
        for label, node in _variants(ensemble.stages[stage]):
            changed = _with_stage(system, stage, node)
            try:
                result = predict(changed, rate=rate, fallback=fallback, budget=budget)
            except (ValueError, NotImplementedError, ArithmeticError) as err:
                changes.append(KnobChange(stage, label, None, note=_short(err)))
                continue
            changes.append(KnobChange(stage, label, float(result.quantile(level)),
                                      result.method,
                                      simulated=result.accuracy.exactness == "simulation"))
    # a simulation fallback of the ensemble carries its stages too; without them, the
    # stage nearest saturation, and the report says so
    if own:
        dominant, dominant_by = max(own, key=own.get), "own quantile"
    else:
        dominant, dominant_by = ensemble.bottleneck, "utilization"
    cuts = [c for c in changes if c.latency is not None and c.latency < latency]
    best = min(cuts, key=lambda c: c.latency) if cuts else None
    return Bottleneck(level, latency, own, dominant, tuple(changes), best, base, dominant_by)


def _variants(node):
    """(label, changed node) for each knob change tried on a stage."""
    out = [(f"instances {node.instances} -> {node.instances + 1}",
            replace(node, instances=node.instances + 1))]
    B = node.max_batch_size
    for new in (2 * B, B // 2):
        if new >= 1 and new != B:
            preferred = tuple(p for p in node.preferred_batch_sizes if p <= new)
            out.append((f"max_batch_size {B} -> {new}",
                        replace(node, max_batch_size=new, preferred_batch_sizes=preferred)))
    D = node.max_queue_delay
    delays = (D / 2, 2 * D) if D > 0 else (float(node.service.mean(1)),)
    for new in delays:
        out.append((f"max_queue_delay {D * 1e3:g} -> {new * 1e3:.3g} ms",
                    replace(node, max_queue_delay=new)))
    return out


def _with_stage(system, stage: str, node):
    """``system`` with one stage's node replaced (in every pod)."""
    from .ensemble import Ensemble

    cluster = as_cluster(system)
    ensemble = cluster.nodes[0]
    changed = Ensemble({**ensemble.stages, stage: node}, list(ensemble.edges))
    if isinstance(system, Ensemble):
        return changed
    return Cluster(changed, count=len(cluster.nodes), router=cluster.router)


def _short(err) -> str:
    text = str(err)
    return text if len(text) <= 90 else text[:87] + "..."


def _level_name(level: float) -> str:
    return f"p{level * 100:g}"
