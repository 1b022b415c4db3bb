"""``qmodel.size``: the cheapest deployment whose tail latency meets an SLO at a given rate.

The search, for one model served by identical nodes (each ``gpus_per_node`` GPUs with
``instances_per_gpu`` instances on each):

1. **Candidates.** Every node configuration (instances per GPU x max_batch_size x
   max_queue_delay) under every router. The cost of N nodes is N x gpus_per_node x
   cost_per_gpu, so for each configuration the question is the fewest nodes that meet the
   SLO.
2. **Fewest nodes by bisection.** A node count below ``rate / capacity`` is unstable, so the
   search starts there; above it, the tail falls as nodes are added (each node's share of the
   rate falls), so the fewest feasible count is found by bisection over the allowed counts, a
   few predictions per configuration. Configurations are taken largest capacity first, and
   each is tried only at counts cheaper than the best plan found (one whose stable minimum
   costs as much is skipped): the search does not predict a configuration only to break a
   tie in cost, which halves its predictions. Among plans of equal cost it takes the first
   in that order, the one with the most capacity, with an executor as without.
3. **Margins.** A prediction is trusted only as far as it claims: the SLO is checked against
   the predicted quantile raised by its own stated error (:func:`trusted_quantile`: the lowest
   measured error of its family, the lattice step, or a simulation's confidence interval), plus
   the network budget. Outside a family's measured domain (round robin over nodes of several
   instances, for one) the model's own answer is taken (:func:`model_answer`), and the
   plan's simulation vouches for it. Headroom: ``peak`` multiplies the rate, and
   ``failures=k`` asks that the SLO hold with k nodes down (N - k nodes carry the rate).
4. **Verification.** The cheapest plan is simulated (``verify_requests``, ``seed``) and kept
   only if the upper end of its simulated quantiles' 95% confidence intervals meets the SLO;
   otherwise the next plan is tried. The best configuration one node cheaper is simulated too:
   where its simulation meets the SLO that the model's margin said it would miss, it becomes
   the plan (and so on down), since the simulation is the reference; otherwise it stays as
   ``plan.rival``, what one node fewer would have given.

Examples
--------
>>> import qmodel as qm
>>> svc = qm.ServiceTime.affine(2e-3, 0.2e-3)
>>> plan = qm.size(svc, rate=4000, slo={"p99": 15e-3}, nodes=range(1, 17), gpus_per_node=1,
...                max_batch_size=(4, 8, 16), max_queue_delay=(0, 1e-3),
...                routers=("random",), verify=False)
>>> plan.feasible, plan.nodes, plan.system.nodes[0].max_batch_size
(True, 2, 16)
>>> print(plan.summary())
feasible: 2 node(s) x Node(B=16, delay=0ms, instances=1, S(k)=2 ms + 0.2 ms x k), random
cost 2 (2 GPUs); 96 candidates, 1 prediction
p99: target 15.000 ms, predicted 8.425 ms
verification: not verified (verify=False)
"""

from __future__ import annotations

import bisect
import math
import numbers
from dataclasses import dataclass, field

from .checks import UnstableError
from .ensemble import Ensemble
from .predict import predict
from .sizing_report import knobs, unit
from .system import Cluster, Node, ServiceTime

__all__ = ["size", "Plan", "Candidate", "trusted_quantile", "highest_quantile", "exhaustive",
           "model_answer", "is_extrapolated", "LEVELS"]

# SLO keys and their quantile levels
LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}
DEFAULT_DELAYS = (0.0, 0.5e-3, 1e-3, 2e-3, 5e-3)
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)


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
        budget, meets its target.
    quantiles : dict
        SLO key -> the predicted quantile (seconds), as the model gives it.
    trusted : dict
        SLO key -> what the SLO was checked against: :func:`trusted_quantile` plus the network
        budget (seconds); inf where the system is unstable or no model answers.
    worst_ratio : float
        The largest trusted quantile over its target (<= 1: feasible).
    method : str
        The model that answered, or why none did.
    extrapolated : bool
        Whether the answer lies outside its family's measured domain (the model's own answer
        there, :func:`model_answer`).
    """

    node: Node
    router: str
    nodes: int
    cost: float
    feasible: bool
    quantiles: dict
    trusted: dict
    worst_ratio: float
    method: str
    extrapolated: bool = False

    def system(self, failures: int = 0):
        """The deployment as a qmodel system (a Node where one node serves), with
        ``failures`` nodes down."""
        return _system(self.node, self.router, self.nodes - failures)


@dataclass
class Plan:
    """What :func:`size` found.

    Attributes
    ----------
    feasible : bool
    reason : str
        Why no plan meets the SLO, or "" when one does.
    system : Node or Cluster
        The chosen deployment (all nodes up), or the closest one when infeasible.
    nodes, gpus : int
    cost : float
    predicted : Latency or None
        The chosen deployment predicted at the peak rate with ``failures`` nodes down (None
        for a closest plan that cannot carry the rate).
    simulated : SampledLatency or None
        Its simulation (verification), or None with ``verify=False``.
    verification : str
        How the plan was verified, in words.
    alternatives : tuple of Candidate
        The feasible candidates, cheapest first (ties: most capacity first).
    pareto : tuple of Candidate
        For each node count evaluated, the configuration with the lowest trusted quantile over
        target: the cost-latency front.
    candidates : int
        How many deployments (configuration x router x node count) the space holds.
    evaluated : int
        How many predictions the search made.
    notes : tuple of str
        What the plan assumed (service of instances sharing a GPU, and so on).
    rival : (Candidate, SampledLatency) or None
        The best configuration one node cheaper than the plan and its simulation, which
        missed the SLO (had it met it, it would be the plan).
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

    def write(self, folder, name: str = "model") -> list:
        """config.pbtxt (one per model directory), report.md and the figures into ``folder``
        (:mod:`qmodel.sizing_report`); returns the paths written."""
        from .sizing_report import write_plan

        return write_plan(self, folder, name)

    def config_pbtxt(self, name: str = "model", **kwargs):
        """The chosen node's config.pbtxt (:func:`qmodel.triton.write_config`; keyword
        arguments pass on), for every node of the deployment; for Ensemble pods, a dict from
        model directory to text (the ensemble and each stage)."""
        from .triton import write_config

        node = self.system if isinstance(self.system, (Node, Ensemble)) \
            else self.system.nodes[0]
        return write_config(node, name, **kwargs)

    def summary(self) -> str:
        """A few lines: the plan, its cost, predicted and simulated quantiles against the SLO.

        Examples
        --------
        See :func:`size`.
        """
        head = ("feasible" if self.feasible else f"infeasible: {self.reason}; closest")
        node = unit(self.system)
        router = "" if node is self.system else f", {self.system.router.name}"
        if isinstance(node, Ensemble):     # a pod: one line per stage
            edges = ", ".join(f"{a}->{b}" for a, b in sorted(node.edges))
            lines = [f"{head}: {self.nodes} pod(s) x ensemble ({edges}){router}"]
            lines += [f"  {name}: {node.stages[name].describe()}" for name in node.order]
        else:
            lines = [f"{head}: {self.nodes} node(s) x {node.describe()}{router}"]
        lines += [f"cost {self.cost:g} ({self.gpus} GPUs); {self.candidates:,} candidates, "
                  f"{self.evaluated:,} prediction{'s' * (self.evaluated != 1)}"]
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


def highest_quantile(slo: dict) -> str:
    """The key of the highest quantile an SLO names (what the report, the sweeps and the
    ensemble's stage choice look at).

    >>> highest_quantile({"p50": 2e-3, "p99": 9e-3})
    'p99'
    """
    return max(slo, key=lambda k: LEVELS[k])


def model_answer(system, rate: float, budget=None):
    """The answer a candidate is ranked by: the model's, never a simulation, and outside its
    family's measured domain the model's own (``extrapolate=True``, marked in its accuracy).

    Within the domain a model is trusted to its measured error (:func:`trusted_quantile`).
    Outside it, nothing measured says how far off it is; the search still ranks by it, because
    refusing would leave whole spaces unsized (round robin over nodes of several instances, for
    one), and the plan's simulation is what vouches for the chosen one. Raises UnstableError,
    or NotImplementedError where no model covers the system at all.
    """
    return predict(system, rate=rate, fallback="raise", extrapolate=True, budget=budget)


def is_extrapolated(result) -> bool:
    """Whether ``result`` is a model's answer outside its family's measured domain."""
    return any(a.key == "outside_measured_domain" for a in result.accuracy.approximations)


def trusted_quantile(result, level: float) -> float:
    """The quantile at ``level`` raised by what ``result`` says about its own error.

    - a simulation: the upper end of its 95% confidence interval;
    - a model with a measured family: the quantile divided by (1 + the family's lowest error
      at that level), where that error is negative (the model has read low by that much); the
      p50 uses the family's p50 errors where measured, else its p95 errors; p99.9 the p99's;
    - a lattice: plus its step (``accuracy.quantile_error``).

    Examples
    --------
    >>> import qmodel as qm
    >>> r = qm.predict(qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential")), rate=500.0)
    >>> round(trusted_quantile(r, 0.99) / r.quantile(0.99), 6)    # M/M/1: exact
    1.0
    """
    q = float(result.quantile(level))
    acc = result.accuracy
    if acc.exactness == "simulation" and getattr(result, "sections", 0) >= 2:
        return float(result.ci(level)[1])
    low = 0.0
    for family in acc.measured:
        if level <= 0.5 and family.p50 is not None:
            rng = family.p50
        elif level <= 0.95:
            rng = family.p95
        else:
            rng = family.p99
        low = min(low, rng.low)
    if low < 0:
        q /= 1.0 + low
    return q + (acc.quantile_error or 0.0)


def size(service, rate: float, slo: dict, *, nodes=range(1, 65), gpus_per_node: int = 1,
         instances_per_gpu=(1,), max_batch_size=DEFAULT_BATCHES,
         max_queue_delay=DEFAULT_DELAYS, routers=("round_robin",), cost_per_gpu: float = 1.0,
         network: float = 0.0, peak: float = 1.0, failures: int = 0, verify: bool = True,
         verify_requests: int = 1_000_000, seed: int = 1, executor=None,
         budget=None, profiles=None) -> Plan:
    """The cheapest deployment that meets ``slo`` at ``rate`` (see the module docstring).

    Parameters
    ----------
    service : ServiceTime, Profile, Node or Ensemble
        S(k) of one instance; a Profile gives, for i instances per GPU, its samples at
        concurrency i where measured (their slower service, stated in the plan's notes); a
        Node (e.g. calibrated from a Triton server) gives its service and overhead; an
        Ensemble is sized as pods, each stage's knobs searched
        (:func:`qmodel.sizing_ensemble.size_pods`;
        ``executor`` is not used there).
    rate : float
        Requests per second to serve.
    slo : dict
        Targets in seconds by quantile: keys "p50", "p90", "p95", "p99", "p99.9".
    nodes : iterable of int
        Node counts allowed.
    gpus_per_node : int
    instances_per_gpu : iterable of int
    max_batch_size, max_queue_delay : iterables
        The batching knobs searched (seconds for the delays).
    routers : iterable of str
        "random", "round_robin" or "least_outstanding" (predicted where a model covers it).
    cost_per_gpu : float
    network : float
        Seconds of each SLO spent outside the servers (subtracted from every target).
    peak : float
        The rate is multiplied by this (>= 1) before sizing.
    failures : int
        Nodes that may be down while the SLO still holds.
    verify : bool
        Simulate the chosen plan (and the best one node cheaper) before answering.
    verify_requests, seed : int
        The verification's run.
    executor : concurrent.futures.Executor, optional
        Evaluates the configurations in parallel (``executor.map``); without one they run in
        turn, with pruning.
    budget : qmodel.Budget, optional
        Passed to every prediction.
    profiles : dict of str to Profile, optional
        For an Ensemble: measured profiles by stage name, which replace those stages'
        S(k) as a Profile ``service`` does a node's (concurrency i for i instances per GPU).

    Returns
    -------
    Plan
        Never raises for an SLO no deployment meets: ``feasible`` is False with the reason and
        the closest plan.
    """
    slo = _checked_slo(slo, network)
    rate = _positive(rate, "rate")
    peak = _positive(peak, "peak")
    if peak < 1:
        raise ValueError(f"peak={peak!r} must be >= 1: the factor by which the peak rate "
                         "exceeds rate")
    failures = _count(failures, "failures", 0)
    gpus_per_node = _count(gpus_per_node, "gpus_per_node", 1)
    cost_per_gpu = _positive(cost_per_gpu, "cost_per_gpu")
    counts = sorted({_count(n, "nodes", 1) for n in _listed(nodes, "nodes")})
    per_gpu = sorted({_count(i, "instances_per_gpu", 1)
                      for i in _listed(instances_per_gpu, "instances_per_gpu")})
    batches = sorted({_count(b, "max_batch_size", 1)
                      for b in _listed(max_batch_size, "max_batch_size")})
    delays = sorted({float(d) for d in _listed(max_queue_delay, "max_queue_delay")})
    routers = tuple(dict.fromkeys(_listed(routers, "routers")))
    for r in routers:
        if r not in ("random", "round_robin", "least_outstanding"):
            raise ValueError(f"routers: {r!r} is not sized; use 'random', 'round_robin' or "
                             "'least_outstanding'")
    load = rate * peak
    profiles = _checked_profiles(profiles, service)
    if isinstance(service, Ensemble):
        for r in routers:
            if r == "least_outstanding":
                raise ValueError("routers: 'least_outstanding' over Ensemble pods is not "
                                 "modelled; use 'random' or 'round_robin'")
        from .sizing_ensemble import size_pods

        return size_pods(service, rate, load, slo, network, failures, counts,
                              gpus_per_node, cost_per_gpu, per_gpu, batches, delays, routers,
                              verify, verify_requests, seed, budget, profiles)
    services, notes, overhead = _services(service, per_gpu)

    configs = [(node, r) for node in _configurations(services, per_gpu, batches, delays,
                                                      gpus_per_node, overhead)
               for r in routers]
    candidates_total = len(configs) * len(counts)
    # largest capacity first: cheap plans are found early, and prune the rest
    configs.sort(key=lambda c: -c[0].capacity)
    gpu_cost = gpus_per_node * cost_per_gpu
    search = _Search(load, slo, network, failures, counts, gpus_per_node, gpu_cost, budget)
    search.services, search.largest = list(services.values()), configs[0]
    # ties in cost go to the configuration the search takes first, with or without executor
    search.rank = {config: i for i, config in enumerate(configs)}
    if executor is None:
        for node, router in configs:
            search.configuration(node, router)
    else:
        for found in executor.map(search.isolated, configs):
            search.merge(found)
    return search.plan(rate, notes, verify, verify_requests, seed, candidates_total)


class _Search:
    """The state of one sizing: every candidate evaluated, and the cheapest cost found."""

    def __init__(self, load, slo, network, failures, counts, gpus_per_node, gpu_cost, budget):
        self.load, self.slo, self.network, self.failures = load, slo, network, failures
        self.counts, self.gpu_cost, self.budget = counts, gpu_cost, budget
        self.gpus_per_node = gpus_per_node
        self.seen: dict = {}
        self.best = math.inf
        self.predictions = 0
        self.rank: dict = {}

    def isolated(self, config):
        """Evaluate one configuration in a fresh search (for an executor); returns its
        candidates and prediction count."""
        other = _Search(self.load, self.slo, self.network, self.failures, self.counts,
                        self.gpus_per_node, self.gpu_cost, self.budget)
        other.configuration(*config)
        return other.seen, other.predictions

    def merge(self, found):
        seen, predictions = found
        self.seen.update(seen)
        self.predictions += predictions
        for c in seen.values():
            if c.feasible:
                self.best = min(self.best, c.cost)

    def evaluate(self, node, router, count) -> Candidate:
        active = count - self.failures
        # one node serving (the others down): every router is the same system
        key = (node, router if active > 1 else "-", count)
        if key in self.seen:
            return self.seen[key]
        cost = count * self.gpu_cost
        quantiles, trusted, method = {}, {k: math.inf for k in self.slo}, ""
        extrapolated = False
        if active < 1:
            method = f"{count} node(s) with {self.failures} down serve nothing"
        else:
            self.predictions += 1
            try:
                result = model_answer(_system(node, router, active), self.load, self.budget)
            except UnstableError:
                method = "over capacity"
            except NotImplementedError as err:
                method = f"no model: {err}"
            else:
                method, extrapolated = result.method, is_extrapolated(result)
                for name in self.slo:
                    level = LEVELS[name]
                    quantiles[name] = float(result.quantile(level))
                    trusted[name] = trusted_quantile(result, level) + self.network
        worst = max(trusted[k] / self.slo[k] for k in self.slo)
        candidate = Candidate(node, router, count, cost, worst <= 1.0, quantiles, trusted,
                              worst, method, extrapolated)
        self.seen[key] = candidate
        if candidate.feasible:
            self.best = min(self.best, cost)
        return candidate

    def configuration(self, node, router) -> None:
        """The fewest nodes of this configuration that meet the SLO (:func:`_fewest`), from
        the stable minimum up to, not including, the best cost found so far."""
        stable = math.floor(self.load / node.capacity) + 1 + self.failures
        start = bisect.bisect_left(self.counts, stable)
        allowed = [n for n in self.counts[start:] if n * self.gpu_cost < self.best]
        _fewest(allowed, lambda n: self.evaluate(node, router, n).feasible)

    def misses(self, sim) -> list:
        """The SLO keys whose simulated 95% CI upper end, plus the network, exceeds the
        target."""
        return [key for key in self.slo
                if sim.ci(LEVELS[key])[1] + self.network > self.slo[key]]

    def verified(self, sim, seed) -> str:
        return (f"simulated {sim.requests:,} requests (seed {seed}) at {self.load:,.6g} req/s "
                f"with {self.failures} node(s) down: every SLO quantile's 95% CI upper end "
                "meets its target" + (" plus the network budget" if self.network else ""))

    def plan(self, rate, notes, verify, verify_requests, seed, candidates_total) -> Plan:
        feasible = sorted((c for c in self.seen.values() if c.feasible),
                          key=lambda c: (c.cost, self.rank.get((c.node, c.router), math.inf),
                                         c.worst_ratio))
        pareto = _pareto(self.seen.values())
        verification = "not verified (verify=False)"
        simulated, rival = None, None
        chosen = None
        extra = {"network": self.network, "load": self.load, "failures": self.failures}
        for candidate in feasible:
            if not verify:
                chosen = candidate
                break
            sim = _simulate(candidate.system(self.failures), self.load, verify_requests, seed)
            misses = self.misses(sim)
            if not misses:
                chosen, simulated = candidate, sim
                verification = self.verified(sim, seed)
                break
            notes = (*notes, f"{candidate.nodes} x {knobs(candidate.node)} "
                             f"({candidate.router}) was predicted to meet the SLO but its "
                             f"simulation missed {', '.join(misses)}: rejected")
        # one node fewer, simulated: taken where its simulation meets the SLO that the
        # model's margin said it would miss (the simulation is the reference)
        while chosen is not None and verify:
            rival = _cheaper_rival(self, chosen, verify_requests, seed)
            if rival is None or self.misses(rival[1]):
                break
            best, sim = rival
            notes = (*notes, f"{best.nodes} x {knobs(best.node)} ({best.router}): the model's "
                             f"margin put it at {best.worst_ratio:.2f} x its target, but its "
                             "simulation meets the SLO: taken, one node fewer")
            chosen, simulated, rival = best, sim, None
            verification = self.verified(sim, seed)
        if chosen is not None and chosen.extrapolated:
            notes = (*notes, "the plan lies outside the measured domain of its model's family: "
                             "the model's own answer ranked it"
                             + (", and its simulation verified it" if verify else
                                " (not verified: verify=False)"))
        if chosen is None:
            if not self.seen:
                # every configuration is unstable at the largest count allowed: the closest
                # plan is the one with the most capacity there
                node, router = self.largest
                self.evaluate(node, router, self.counts[-1])
            closest = min(self.seen.values(), key=lambda c: c.worst_ratio)
            reason = _infeasible_reason(self, feasible, closest)
            return Plan(False, reason, closest.system(), closest.nodes,
                        closest.nodes * self.gpus_per_node, closest.cost,
                        _predicted(closest, self), None, "not verified (infeasible)",
                        tuple(feasible), tuple(pareto), candidates_total, self.predictions,
                        dict(self.slo), rate, tuple(notes), **extra)
        return Plan(True, "", chosen.system(), chosen.nodes, chosen.nodes * self.gpus_per_node,
                    chosen.cost, _predicted(chosen, self), simulated, verification,
                    tuple(feasible), tuple(pareto), candidates_total, self.predictions,
                    dict(self.slo), rate, tuple(notes), rival, **extra)


def exhaustive(service, rate: float, slo: dict, *, nodes, gpus_per_node: int = 1,
               instances_per_gpu=(1,), max_batch_size=DEFAULT_BATCHES,
               max_queue_delay=DEFAULT_DELAYS, routers=("round_robin",),
               cost_per_gpu: float = 1.0, network: float = 0.0, failures: int = 0) -> float:
    """The cheapest feasible cost found by predicting every candidate of the space, the
    reference :func:`size` is checked against (tests/test_sizing.py) and timed against
    (benchmarks/size_speed.py); inf where none is feasible. ``service``: a ServiceTime.

    Examples
    --------
    >>> import qmodel as qm
    >>> exhaustive(qm.ServiceTime.affine(2e-3, 0.2e-3), 4000, {"p99": 15e-3},
    ...            nodes=range(1, 5), max_batch_size=(4, 16), max_queue_delay=(0,),
    ...            routers=("random",))
    2.0
    """
    best = math.inf
    services = {i: service for i in instances_per_gpu}
    for node in _configurations(services, instances_per_gpu, max_batch_size, max_queue_delay,
                                gpus_per_node):
        for router in routers:
            for n in nodes:
                active = n - failures
                if active < 1 or rate >= active * node.capacity:
                    continue
                try:
                    r = model_answer(_system(node, router, active), rate)
                except NotImplementedError:
                    continue
                if all(trusted_quantile(r, LEVELS[k]) + network <= t for k, t in slo.items()):
                    best = min(best, n * gpus_per_node * cost_per_gpu)
    return best


def _configurations(services, per_gpu, batches, delays, gpus_per_node, overhead=0.0):
    """Every node configuration searched: ``services[i]`` with i instances per GPU, each
    max_batch_size and max_queue_delay (no delay at max_batch_size 1: a delay only waits for
    a batch to fill)."""
    return [Node(services[i], max_batch_size=B, max_queue_delay=D,
                 instances=gpus_per_node * i, overhead=overhead)
            for i in per_gpu for B in batches for D in delays if not (B == 1 and D > 0)]


def _fewest(allowed, feasible):
    """The index in ``allowed`` (increasing counts) of the fewest for which ``feasible(count)``
    holds, or None: counts 1, 2, 4, ... steps up from the first until one is feasible, then
    bisection between it and the last infeasible one.

    Galloping up from the bottom, not bisecting the whole range, because with a delay the
    tail is not monotone in the node count: at a low rate per node every request waits the
    whole delay, so the feasible counts can end above as well as below.

    Examples
    --------
    >>> _fewest([2, 3, 5, 8, 13], lambda n: n >= 5)
    2
    >>> _fewest([2, 3], lambda n: False) is None
    True
    """
    if not allowed:
        return None
    below, at, step = -1, 0, 1
    while not feasible(allowed[at]):
        below = at
        if at == len(allowed) - 1:
            return None                             # none feasible within the limit
        at, step = min(at + step, len(allowed) - 1), 2 * step
    lo, hi = below + 1, at
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(allowed[mid]):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _system(node, router, count):
    return node if count == 1 else Cluster(node, count=count, router=router)


def _predicted(candidate, search):
    """The candidate's answer at the sized rate, as it was ranked (:func:`model_answer`);
    a labelled simulation where no model covers it, None where it cannot carry the rate."""
    system = candidate.system(search.failures)
    try:
        return model_answer(system, search.load, search.budget)
    except NotImplementedError:
        return predict(system, rate=search.load, budget=search.budget)
    except UnstableError:
        return None


def _simulate(system, rate, requests, seed):
    import warnings

    from .sim import simulate
    from .sim.window import ShortRunWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)
        return simulate(system, rate=rate, requests=requests, seed=seed)


def _cheaper_rival(search, chosen, requests, seed):
    """The best configuration at one node fewer, simulated: what the margins cost."""
    fewer = [c for c in search.seen.values() if c.nodes == chosen.nodes - 1
             and c.nodes - search.failures >= 1 and math.isfinite(c.worst_ratio)]
    if not fewer:
        return None
    best = min(fewer, key=lambda c: c.worst_ratio)
    try:
        sim = _simulate(best.system(search.failures), search.load, requests, seed)
    except (ValueError, UnstableError):
        return None
    return best, sim


def _pareto(candidates):
    by_count: dict = {}
    for c in candidates:
        if math.isfinite(c.worst_ratio):
            if c.nodes not in by_count or c.worst_ratio < by_count[c.nodes].worst_ratio:
                by_count[c.nodes] = c
    front, best = [], math.inf
    for n in sorted(by_count):
        if by_count[n].worst_ratio < best:
            front.append(by_count[n])
            best = by_count[n].worst_ratio
    return front


def _infeasible_reason(search, feasible, closest) -> str:
    if feasible:
        return ("every plan the model accepted missed the SLO in its simulation (see the "
                "notes)")
    fastest = min(float(s.mean(1)) for s in search.services)
    tight = min(search.slo, key=search.slo.get)
    if fastest + search.network >= search.slo[tight]:
        return (f"S(1) alone, {fastest * 1e3:.3g} ms, plus the network budget "
                f"{search.network * 1e3:g} ms already reaches the {tight} target "
                f"{search.slo[tight] * 1e3:g} ms: no batching or node count meets it")
    if not math.isfinite(closest.worst_ratio):
        node = closest.node
        return (f"no deployment within {search.counts[-1]} nodes meets the SLO: even the "
                f"configuration with the most capacity ({node.describe()}, "
                f"{node.capacity:,.0f} req/s per node) needs more than "
                f"{search.load / node.capacity:.1f} nodes for {search.load:,.0f} req/s; allow "
                "more nodes")
    return (f"no deployment within {search.counts[-1]} nodes meets the SLO; the closest, "
            f"{closest.nodes} x {closest.node.describe()} ({closest.router}), reaches "
            f"{closest.worst_ratio:.2f} x its target")


def _services(service, per_gpu):
    """{instances per GPU: ServiceTime}, the notes about it, and the node overhead."""
    from .profiling import Profile

    notes, overhead = [], 0.0
    if isinstance(service, Node):
        overhead = service.overhead
        service = service.service
        notes.append("service and overhead taken from the given Node; its own knobs are "
                     "replaced by the searched ones")
    if isinstance(service, ServiceTime):
        if len(per_gpu) > 1 or per_gpu != [1]:
            notes.append("instances sharing a GPU are taken to run at the given S(k) "
                         "each (no slowdown measured); a profile at several concurrencies "
                         "gives their slower service")
        return {i: service for i in per_gpu}, tuple(notes), overhead
    if isinstance(service, Profile):
        out = {}
        for i in per_gpu:
            if i in service.samples:
                out[i] = service.service(i)
                if i > 1:
                    notes.append(f"{i} instances per GPU: S(k) measured with {i} copies "
                                 f"sharing the device (profile concurrency {i})")
            else:
                out[i] = service.service(1)
                notes.append(f"{i} instances per GPU: the profile has no concurrency {i}; "
                             "S(k) of one copy alone used (optimistic)")
        return out, tuple(notes), overhead
    raise ValueError(f"size(service, ...): service must be a qmodel.ServiceTime, Profile or "
                     f"Node, got {type(service).__name__}")


def _checked_profiles(profiles, service) -> dict:
    """Stage name -> Profile, checked against the ensemble's stages."""
    from .profiling import Profile

    if profiles is None:
        return {}
    if not isinstance(service, Ensemble):
        raise ValueError("profiles= names an Ensemble's stages; for one model give its "
                         "Profile as the service")
    if not isinstance(profiles, dict):
        raise ValueError("profiles must map stage names to qmodel.Profile, e.g. "
                         "{'item_tower': qm.Profile.load('item-tower.json')}")
    for name, prof in profiles.items():
        if name not in service.stages:
            raise ValueError(f"profiles: {name!r} is not a stage of the ensemble; its stages "
                             f"are {', '.join(service.stages)}")
        if not isinstance(prof, Profile):
            raise ValueError(f"profiles[{name!r}] must be a qmodel.Profile (Profile.load(path)"
                             f"), got {type(prof).__name__}")
    return dict(profiles)


def _checked_slo(slo, network) -> dict:
    if not isinstance(slo, dict) or not slo:
        raise ValueError("slo must be a dict of targets in seconds, e.g. {'p95': 5e-3}")
    network = float(network)
    if not (network >= 0 and math.isfinite(network)):
        raise ValueError(f"network={network!r} must be seconds >= 0 spent outside the servers")
    out = {}
    for key, target in slo.items():
        if key not in LEVELS:
            raise ValueError(f"slo key {key!r} is not a quantile; use "
                             f"{', '.join(map(repr, LEVELS))}")
        target = _positive(target, f"slo[{key!r}]")
        if target > 60:
            raise ValueError(f"slo[{key!r}]={target:g} s is longer than a minute: qmodel takes "
                             "seconds; write 5e-3 for 5 ms")
        if target <= network:
            raise ValueError(f"slo[{key!r}]={target:g} s leaves nothing after network="
                             f"{network:g} s")
        out[key] = target
    return out


def _positive(value, name) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _count(value, name, least) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


def _listed(values, name):
    if isinstance(values, (str, bytes)):
        values = (values,)
    try:
        values = list(values)
    except TypeError:
        values = [values]
    if not values:
        raise ValueError(f"{name} is empty; give at least one value")
    return values
