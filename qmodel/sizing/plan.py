"""What a sizing found: the :class:`Plan` and the :class:`Candidate` deployments behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ensemble import Ensemble
from ..slo import LEVELS
from .deployment import system_of, unit

__all__ = ["Plan", "Candidate", "Transient"]


@dataclass(frozen=True)
class Candidate:
    """One deployment the search evaluated.

    Attributes
    ----------
    node : Node or Ensemble
        The node configuration (its instances: gpus_per_node x instances_per_gpu), or the
        pod's configured Ensemble.
    router : str
    nodes : int
        Node count.
    cost : float
    feasible : bool
        Whether every SLO quantile, raised by the prediction's stated error and the network
        budget, meets its target at every rate of the range.
    quantiles : dict
        SLO key -> the predicted quantile (seconds) at the binding rate, as the model gives it.
    trusted : dict
        SLO key -> what the SLO was checked against there: :func:`~qmodel.sizing.trusted_quantile`
        plus the network budget (seconds); inf where unstable or no model answers.
    worst_ratio : float
        The largest trusted quantile over its target (<= 1: feasible); where ``complete`` is
        False, a lower bound (the evaluation stopped at the first rate that missed).
    method : str
        The model that answered at the binding rate, or why none did.
    extrapolated : bool
        Whether an answer lies outside its family's measured domain.
    binding : float
        The rate at which the margin is smallest (requests per second).
    complete : bool
        Whether every rate of the range was evaluated.
    """

    node: object
    router: str
    nodes: int
    cost: float
    feasible: bool
    quantiles: dict
    trusted: dict
    worst_ratio: float
    method: str
    extrapolated: bool = False
    binding: float = 0.0
    complete: bool = True

    def system(self, failures: int = 0):
        """The deployment as a qmodel system (a Node where one node serves), with
        ``failures`` nodes down."""
        return system_of(self.node, self.router, self.nodes - failures)


@dataclass
class Plan:
    """What :func:`qmodel.size` found.

    Attributes
    ----------
    feasible : bool
    reason : str
        Why no plan meets the SLO, or "" when one does.
    system : Node or Cluster
        The chosen deployment (all nodes up), or the closest one when infeasible. With an
        autoscaler, one pod's configuration repeated as many times as the most pods ready.
    nodes, gpus : int
        Nodes (pods) and GPUs; with an autoscaler, the most ever requested.
    cost : float
        Per node-hour units: nodes x GPUs per node x cost per GPU (a static plan); with an
        autoscaler, the mean pods requested over the traffic times the same.
    predicted : Latency or None
        The chosen deployment predicted at the binding rate with ``failures`` nodes down
        (None for a closest plan that cannot carry the rate); with an autoscaler, the
        time-varying prediction (:class:`~qmodel.timeline.TrafficPrediction`).
    simulated : SampledLatency or None
        Its simulation at the binding rate (verification), or None with ``verify=False``;
        with an autoscaler, the time-varying simulation.
    verification : str
        How the plan was verified, in words.
    verified : tuple of (rate, SampledLatency)
        Every verifying simulation (the binding rate and the range's ends).
    alternatives : tuple of Candidate
        The feasible candidates, cheapest first (ties: the search's order, most capacity
        first).
    pareto : tuple of Candidate
        For each node count evaluated, the configuration with the lowest trusted quantile over
        target: the cost-latency front.
    candidates : int
        How many deployments (configuration x router x node count) the space holds.
    evaluated : int
        How many predictions the search made.
    slo : dict
    rate : float
        The peak rate asked for (requests per second).
    low : float
        The lowest rate the plan must hold at (= rate for one rate).
    load : float
        The peak rate sized for (``rate x peak``).
    binding : float
        The rate at which the plan's margin is smallest.
    notes : tuple of str
        What the plan assumed (service of instances sharing a GPU, and so on).
    rival : (Candidate, SampledLatency) or None
        The best configuration one node cheaper than the plan and its simulation, which
        missed the SLO (had it met it, it would be the plan).
    network : float
    failures : int
    scv : float
        The arrivals' squared coefficient of variation the plan was sized for (a Traffic's
        renewal shape; 1 for Poisson).
    rival_rate : float
        The rate of the rival's simulation that missed.
    schedule : PodSchedule or None
        With an autoscaler: the pods ready and requested over the traffic.
    autoscaler : Autoscaler or None
        With an autoscaler: the one planned (its target chosen).
    traffic : Traffic or None
    static : Plan or None
        With an autoscaler: the static plan sized for the traffic's whole range.
    transients : tuple of Transient
        With an autoscaler: each rise of the traffic before the new pods are ready.
    """

    feasible: bool
    reason: str
    system: object
    nodes: int
    gpus: int
    cost: float
    predicted: object
    simulated: object
    verification: str
    alternatives: tuple
    pareto: tuple
    candidates: int
    evaluated: int
    slo: dict
    rate: float
    notes: tuple = field(default_factory=tuple)
    rival: object = None
    network: float = 0.0
    load: float = 0.0
    failures: int = 0
    low: float = 0.0
    binding: float = 0.0
    verified: tuple = ()
    schedule: object = None
    autoscaler: object = None
    traffic: object = None
    static: object = None
    transients: tuple = ()
    windows: tuple = ()
    scv: float = 1.0
    rival_rate: float = 0.0

    @property
    def node(self):
        """The Node (or Ensemble pod) every node of the plan runs."""
        return unit(self.system)

    @property
    def is_range(self) -> bool:
        return self.low < self.load

    def write(self, folder, name: str = "model") -> list:
        """config.pbtxt (one per model directory), report.md and the figures into ``folder``
        (:mod:`qmodel.sizing.report`), and with an autoscaler its HorizontalPodAutoscaler
        manifest; returns the paths written."""
        from .report import write_plan

        return write_plan(self, folder, name)

    def config_pbtxt(self, name: str = "model", **kwargs):
        """The chosen node's config.pbtxt (:func:`qmodel.triton.write_config`; keyword
        arguments pass on), for every node of the deployment; for Ensemble pods, a dict from
        model directory to text (the ensemble and each stage)."""
        from ..triton import write_config

        return write_config(self.node, name, **kwargs)

    def manifest(self, name: str = "model") -> str:
        """The HorizontalPodAutoscaler YAML of an autoscaled plan
        (:meth:`qmodel.Autoscaler.manifest`)."""
        if self.autoscaler is None:
            raise ValueError("this plan has no autoscaler: size(..., traffic=..., "
                             "autoscale=qm.Autoscaler(...)) plans one")
        return self.autoscaler.manifest(name)

    def summary(self) -> str:
        """A few lines: the plan, its cost, predicted and simulated quantiles against the SLO.

        Examples
        --------
        See :func:`qmodel.size`.
        """
        if self.autoscaler is not None and self.schedule is None and self.static is not None:
            # no autoscaled plan: say so, then the static plan for the whole range
            verdict = ("meets the SLO at every rate" if self.static.feasible
                       else "does not meet it either")
            return (f"no autoscaled plan: {self.reason}\nthe static plan for the whole range "
                    f"{verdict}:\n" + self.static.summary())
        head = ("feasible" if self.feasible else f"infeasible: {self.reason}; closest")
        node = self.node
        router = "" if node is self.system else f", {self.system.router.name}"
        count = (f"{self.nodes} pod(s)" if isinstance(node, Ensemble)
                 else f"{self.nodes} node(s)")
        if self.schedule is not None:
            count = (f"{self.schedule.ready.min()}-{self.schedule.most} "
                     f"{'pod' if isinstance(node, Ensemble) else 'node'}(s) autoscaled")
            if self.nodes > self.schedule.most:
                count += f" ({self.nodes} asked for at most)"
        if isinstance(node, Ensemble):     # a pod: one line per stage
            edges = ", ".join(f"{a}->{b}" for a, b in sorted(node.edges))
            lines = [f"{head}: {count} x ensemble ({edges}){router}"]
            lines += [f"  {name}: {node.stages[name].describe()}" for name in node.order]
        else:
            lines = [f"{head}: {count} x {node.describe()}{router}"]
        lines += [(f"cost {self.cost:g} (the mean pods asked for x their GPUs' cost; "
                   f"{self.gpus} GPUs at most)" if self.schedule is not None else
                   f"cost {self.cost:g} ({self.gpus} GPUs)")
                  + f"; {self.candidates:,} candidates, "
                  f"{self.evaluated:,} prediction{'s' * (self.evaluated != 1)}"]
        if self.is_range and self.schedule is None:
            lines.append(f"holds at every rate in [{self.low:,.6g}, {self.load:,.6g}] req/s; "
                         f"the margin is smallest at {self.binding:,.6g} req/s")
        if self.schedule is not None:
            lines += self._autoscaled_lines()
            return "\n".join(lines)
        for key, target in self.slo.items():
            level = LEVELS[key]
            line = f"{key}: target {target * 1e3:.3f} ms, predicted " + (
                "- (over capacity)" if self.predicted is None
                else f"{self.predicted.quantile(level) * 1e3:.3f} ms")
            if self.simulated is not None:
                lo, hi = self.simulated.ci(level)
                line += (f", simulated {self.simulated.quantile(level) * 1e3:.3f} ms "
                         f"[{lo * 1e3:.3f}, {hi * 1e3:.3f}]")
            lines.append(line)
        lines.append(f"verification: {self.verification}")
        return "\n".join(lines)

    def _autoscaled_lines(self) -> list:
        lines = [f"autoscaler: {self.autoscaler.metric} target {self.autoscaler.target:g}, "
                 f"pods {self.autoscaler.min_pods}-{self.autoscaler.max_pods}, ready "
                 f"{self.autoscaler.scale_up_delay:g} s after a scale-up"]
        if self.static is not None and self.static.feasible:
            lines.append(f"static plan for the whole range: {self.static.nodes} "
                         f"{'pod' if isinstance(self.node, Ensemble) else 'node'}(s), cost "
                         f"{self.static.cost:g}; autoscaled {self.cost:.4g} "
                         f"({self.cost / self.static.cost:.0%} of it"
                         + ("; the static plan costs no more: prefer it)"
                            if self.cost >= self.static.cost else ")"))
        for t in self.transients:
            lines.append(t.describe())
        lines.append(f"verification: {self.verification}")
        return lines


@dataclass(frozen=True)
class Transient:
    """A rise of the traffic, from the moment the ready pods fall behind their target until
    the pods asked for are ready and any backlog is worked off.

    Attributes
    ----------
    start, end : float
        Seconds on the traffic's clock.
    worst : dict
        SLO key -> the worst windowed quantile inside it (seconds), predicted.
    over : dict
        SLO key -> the share of the requests arriving inside it served beyond the target,
        predicted.
    simulated_worst, simulated_over : dict
        The same from the plan's simulation (empty without one).
    requests : float
        Requests expected inside it.
    """

    start: float
    end: float
    worst: dict
    over: dict
    requests: float
    simulated_worst: dict = field(default_factory=dict)
    simulated_over: dict = field(default_factory=dict)

    def describe(self) -> str:
        key = max(self.worst, key=lambda k: LEVELS[k])
        text = (f"transient {self.start:,.0f}-{self.end:,.0f} s: worst windowed {key} "
                f"{self.worst[key] * 1e3:,.1f} ms predicted")
        if self.simulated_worst:
            text += f", {self.simulated_worst[key] * 1e3:,.1f} ms simulated"
        text += f"; {self.over[key]:.1%} of its {self.requests:,.0f} requests over the target"
        if self.simulated_over:
            text += f" ({self.simulated_over[key]:.1%} simulated)"
        return text
