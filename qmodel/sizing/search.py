"""``qmodel.size``: the cheapest deployment whose tail latency meets an SLO.

The search, for nodes (each ``gpus_per_node`` GPUs with ``instances_per_gpu`` instances on
each) or Ensemble pods behind a router:

1. **Candidates.** Every configuration (instances per GPU x max_batch_size x max_queue_delay
   x preferred sizes, for a node; for pods, each stage's knobs chosen per pod count) under
   every router, at every allowed count. N nodes cost N x gpus_per_node x cost_per_gpu.
2. **The range rule.** A candidate is feasible where every SLO quantile, raised by its
   prediction's stated error (:func:`~qmodel.sizing.trust.trusted_quantile`) plus the
   network budget, meets its target at every rate of the range
   (:func:`~qmodel.sizing.trust.worst_over_rates`: both ends, a grid between them, and a
   search around the grid's worst point); one rate is the range of one point. ``failures=k``
   asks that it hold with k nodes down; ``peak`` multiplies the range's upper end.
3. **Fewest nodes.** For each configuration, the counts from the stable minimum up are tried
   in turn, up to the cost of the best plan so far (included: a configuration of equal cost
   is evaluated, so that the plan does not depend on the order or on an executor). The
   tail is not monotone in the count (with a delay it is U-shaped: more nodes, fewer requests
   per node, the delay waited out), so no count is skipped. Configurations are taken largest
   capacity first, which finds cheap plans early.
4. **Verification.** The cheapest plan is simulated (``verify_requests``, ``seed``) at the
   rate where its margin is smallest and at the range's ends, and kept only where the upper
   end of every simulated quantile's 95% confidence interval meets the SLO; otherwise the
   next plan of that cost, then the search resumes without the rejected ones. The best
   configuration one node cheaper is simulated too: where it meets the SLO that the model's
   margin said it would miss, it becomes the plan (and so on down), since the simulation is
   the reference; otherwise it stays as ``plan.rival``.

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
cost 2 (2 GPUs); 96 candidates, 4 predictions
p99: target 15.000 ms, predicted 8.425 ms
verification: not verified (verify=False)
"""

from __future__ import annotations

import math

from ..checks import UnstableError
from ..ensemble import Ensemble
from ..slo import LEVELS
from .deployment import knobs, system_of
from .plan import Candidate, Plan
from .space import (DEFAULT_BATCHES, DEFAULT_DELAYS, Space, checked_space, configurations,
                    pod_stage_options, services_for)
from .trust import model_answer, trusted_quantile, worst_over_rates

__all__ = ["size", "exhaustive"]

# verifying simulations before the search gives up on the model's plans
MOST_VERIFICATIONS = 24
# verify="all": cheaper candidates whose trusted quantiles lie within this factor of their
# targets are simulated (the model's error statements reach about 20%; the factor leaves
# room for answers outside their domain).
SHORTLIST_RATIO = 1.5
# verify="all" on a GPU: requests per verifying simulation (seconds of a GPU's time)
GPU_VERIFY_REQUESTS = 200_000_000


def size(service, rate=None, slo=None, *, nodes=range(1, 65), gpus_per_node: int = 1,
         instances_per_gpu=(1,), max_batch_size=DEFAULT_BATCHES,
         max_queue_delay=DEFAULT_DELAYS, preferred_batch_sizes=((),),
         routers=("round_robin",), cost_per_gpu: float = 1.0, network: float = 0.0,
         peak: float = 1.0, failures: int = 0, verify: bool | str = True,
         verify_requests: int = 1_000_000, seed: int = 1, executor=None, budget=None,
         profiles=None, sharing: str | None = None, traffic=None, autoscale=None,
         window: float = 60.0) -> Plan:
    """The cheapest deployment that meets ``slo`` at ``rate`` (see the module docstring).

    Parameters
    ----------
    service : ServiceTime, Profile, Node or Ensemble
        S(k) of one instance; a Profile gives, for i instances per GPU, its samples at
        concurrency i; a Node (e.g. calibrated from a Triton server) gives its service,
        overhead and prefetch; an Ensemble is sized as pods, each stage's knobs searched.
    rate : float or (float, float)
        Requests per second to serve, or a range (low, peak) at every rate of which the SLO
        must hold.
    slo : dict
        Targets in seconds by quantile: keys "p50", "p90", "p95", "p99", "p99.9".
    nodes : iterable of int
        Node counts allowed.
    gpus_per_node : int
    instances_per_gpu : iterable of int
    max_batch_size, max_queue_delay : iterables
        The batching knobs searched (seconds for the delays).
    preferred_batch_sizes : iterable of tuples
        The preferred-size sets searched, e.g. ``((), (1, 2, 4))``; () is Triton's default.
    routers : iterable of str
        "random", "round_robin" or "least_outstanding" (predicted where a model covers it).
    cost_per_gpu : float
    network : float
        Seconds of each SLO spent outside the servers (subtracted from every target).
    peak : float
        The rate (a range's upper end) is multiplied by this (>= 1) before sizing; with an
        autoscaler every rate of the traffic is.
    failures : int
        Nodes that may be down while the SLO still holds (not with ``autoscale``).
    verify : bool or "all"
        True: simulate the chosen plan (and the best one node cheaper) before answering.
        "all": then also simulate every cheaper candidate whose trusted prediction lies
        within :data:`SHORTLIST_RATIO` of its targets, cheapest first, each with
        ``verify_requests`` (or :data:`GPU_VERIFY_REQUESTS` on a GPU, where the compiled
        engine makes such runs cheap): the cheapest whose simulated 95% CI upper ends meet
        the SLO is the plan, so that the model's margin costs no node.
    verify_requests, seed : int
        The verification's runs.
    executor : concurrent.futures.Executor, optional
        Evaluates the configurations in parallel (``executor.map``); the plan is the same.
    budget : qmodel.Budget, optional
        Passed to every prediction.
    profiles : dict of str to Profile, optional
        For an Ensemble: measured profiles by stage name.
    sharing : {None, "independent", "time-sliced"}
        How instances that share a GPU run where no profile measured them: None refuses
        (give a Profile at that concurrency), "independent" takes no slowdown (optimistic),
        "time-sliced" i x S(k) for i instances (pessimistic). Ensemble pods need it.
    traffic : Traffic, optional
        Instead of ``rate``: size for the traffic's range of rates, or, with ``autoscale``,
        plan pods over it (:mod:`qmodel.sizing.autoscale`).
    autoscale : Autoscaler, optional
        Plan the pod count by this autoscaler over ``traffic``: ``plan.schedule``, the cost
        against the static plan, the transients.
    window : float
        With ``autoscale``: the SLO must hold over each window of this many seconds in which
        the pods are settled.

    Returns
    -------
    Plan
        Never raises for an SLO no deployment meets: ``feasible`` is False with the reason and
        the closest plan.
    """
    from ..traffic import Traffic

    if slo is None:
        raise ValueError("size() needs slo=, e.g. {'p95': 5e-3}")
    if traffic is not None:
        if not isinstance(traffic, Traffic):
            raise ValueError(f"traffic must be a qmodel.Traffic, got {type(traffic).__name__}")
        if rate is not None:
            raise ValueError("give rate= or traffic=, not both: the traffic sets the rates")
        if autoscale is not None and peak != 1.0:
            # headroom over a traffic: every rate of it raised, as the autoscaler will see
            traffic = traffic.scaled(_positive_factor(peak))
            peak = 1.0
        positive = traffic.rates[traffic.rates > 0]
        rate = (float(positive.min()), traffic.peak)
    elif autoscale is not None:
        raise ValueError("autoscale= plans pods over a traffic: give traffic=qm.Traffic(...)")
    if isinstance(window, bool) or not isinstance(window, (int, float)) \
            or not (window > 0 and math.isfinite(window)):
        raise ValueError(f"window={window!r} must be a positive number of seconds")
    if autoscale is not None:
        from ..autoscaler import Autoscaler

        if failures:
            raise ValueError("failures= is not planned with autoscale=: the autoscaler and "
                             "the Deployment replace a pod that fails, and its minutes "
                             "without it are not modelled; size without autoscale for "
                             "nodes down, or raise min_pods")
        if not isinstance(autoscale, Autoscaler):
            raise ValueError(f"autoscale must be a qmodel.Autoscaler, got "
                             f"{type(autoscale).__name__}")
        if isinstance(window, bool) or not isinstance(window, (int, float)) \
                or not 0 < window <= traffic.duration:
            raise ValueError(f"window={window!r} must be seconds in (0, the traffic's "
                             f"{traffic.duration:g} s]")
    if rate is None:
        raise ValueError("size() needs rate= (requests per second, or a range (low, peak)) or "
                         "traffic=")
    space = checked_space(slo, rate, network, peak, failures, nodes, gpus_per_node,
                          instances_per_gpu, max_batch_size, max_queue_delay,
                          preferred_batch_sizes, routers, cost_per_gpu, sharing)
    if traffic is not None and traffic.scv != 1.0:
        from dataclasses import replace

        space = replace(space, scv=traffic.scv)      # the traffic's renewal shape
    profiles = _checked_profiles(profiles, service)
    if isinstance(service, Ensemble):
        for r in space.routers:
            if r == "least_outstanding":
                raise ValueError("routers: 'least_outstanding' over Ensemble pods is not "
                                 "modelled; use 'random' or 'round_robin'")
        configs, notes, per_config = _pod_configs(service, profiles, space, budget)
    else:
        configs, notes, per_config = _node_configs(service, space)
    if verify not in (True, False, "all"):
        raise ValueError(f"verify={verify!r}: use True (simulate the plan and the best one "
                         "node cheaper), False, or 'all' (simulate every cheaper candidate "
                         "the model put within reach of the SLO)")
    if verify == "all" and (autoscale is not None or isinstance(service, Ensemble)):
        raise ValueError("verify='all' sizes nodes at a steady rate or range; for ensembles "
                         "and autoscaling use verify=True")
    search = _Search(space, configs, budget)
    search.run(executor)
    plan = search.plan(notes, bool(verify), verify_requests, seed,
                       per_config * len(space.counts), every=verify == "all")
    if autoscale is not None:
        from .autoscale import plan_autoscaled

        return plan_autoscaled(plan, search, traffic, autoscale, verify, seed, window)
    return plan


def exhaustive(service, rate, slo: dict, *, nodes, gpus_per_node: int = 1,
               instances_per_gpu=(1,), max_batch_size=DEFAULT_BATCHES,
               max_queue_delay=DEFAULT_DELAYS, preferred_batch_sizes=((),),
               routers=("round_robin",), cost_per_gpu: float = 1.0, network: float = 0.0,
               failures: int = 0, sharing: str | None = None) -> float:
    """The cheapest feasible cost found by evaluating every candidate of the space by the
    same range rule (no pruning, no order): the reference :func:`size` is checked against
    (tests/test_sizing.py); inf where none is feasible. ``service``: a ServiceTime or
    Profile.

    Examples
    --------
    >>> import qmodel as qm
    >>> exhaustive(qm.ServiceTime.affine(2e-3, 0.2e-3), 4000, {"p99": 15e-3},
    ...            nodes=range(1, 5), max_batch_size=(4, 16), max_queue_delay=(0,),
    ...            routers=("random",))
    2.0
    """
    space = checked_space(slo, rate, network, 1.0, failures, nodes, gpus_per_node,
                          instances_per_gpu, max_batch_size, max_queue_delay,
                          preferred_batch_sizes, routers, cost_per_gpu, sharing)
    services, _, overhead, prefetch = services_for(service, space.per_gpu, space.sharing)
    best = math.inf
    for node in configurations(services, space, overhead, prefetch):
        for router in space.routers:
            for n in space.counts:
                active = n - space.failures
                if active < 1:
                    continue
                system = system_of(node, router, active)
                answer = worst_over_rates(lambda r, s=system: model_answer(s, r), space.rates,
                                          space.slo, space.network)
                if answer.worst_ratio <= 1.0:
                    best = min(best, n * space.gpu_cost)
    return best


# ------------------------------------------------------------------------------------------
# configurations
# ------------------------------------------------------------------------------------------
class _NodeConfig:
    """A node configuration under a router: the same node at every count."""

    def __init__(self, node, router):
        self.node, self.router = node, router
        self.capacity = node.capacity

    def at(self, active):
        return self.node


class _PodConfig:
    """Ensemble pods under a router: each stage's knobs chosen for the per-pod range of rates
    at each pod count (the configuration with the lowest trusted tail of its own at the
    highest SLO level, solved alone under Poisson arrivals, the worse of the range's two
    ends). A heuristic: the stages interact only through their arrival streams; each pod
    is then evaluated end to end over the whole range, and the plan verified end to end."""

    def __init__(self, ensemble, options, router, space, budget, counter):
        self.ensemble, self.options, self.router = ensemble, options, router
        self.space, self.budget, self.counter = space, budget, counter
        self.capacity = min(max(o.capacity for o in options[n]) for n in ensemble.order)
        self.level = LEVELS[max(space.slo, key=lambda k: LEVELS[k])]
        self.chosen: dict = {}

    def at(self, active):
        if active not in self.chosen:
            rates = self.space.rates.scaled(1.0 / active)
            stages = {}
            for name in self.ensemble.order:
                stages[name] = self._stage(name, rates)
                if stages[name] is None:
                    self.chosen[active] = None
                    return None
            self.chosen[active] = Ensemble(stages, list(self.ensemble.edges))
        return self.chosen[active]

    def _stage(self, name, rates):
        ranked = []
        for node in self.options[name]:
            if rates.peak >= node.capacity:
                continue
            worst = 0.0
            for r in {rates.low, rates.peak}:
                self.counter[0] += 1
                try:
                    worst = max(worst, trusted_quantile(model_answer(node, r, self.budget,
                                                                     self.space.scv),
                                                        self.level))
                except (NotImplementedError, UnstableError):
                    worst = math.inf
                    break
            if math.isfinite(worst):
                ranked.append((worst, -node.capacity, len(ranked), node))
        return min(ranked)[3] if ranked else None


def _node_configs(service, space: Space):
    services, notes, overhead, prefetch = services_for(service, space.per_gpu, space.sharing)
    nodes = configurations(services, space, overhead, prefetch)
    if not nodes:
        raise ValueError("the space holds no configuration: a delay is not tried at "
                         "max_batch_size 1 (it only waits); add 0 to max_queue_delay or a "
                         "max_batch_size above 1")
    configs = [_NodeConfig(node, r) for node in nodes for r in space.routers]
    # largest capacity first: cheap plans are found early, and prune the rest
    configs.sort(key=lambda c: -c.capacity)
    if prefetch is not None:
        notes = (*notes, f"the measured prefetch share {prefetch:g} is kept in every planned "
                         "node: candidates are ranked by the model without it (none covers "
                         "it; one node states the error measured against it), and the "
                         "plan's simulation runs it")
    return configs, tuple(notes), len(configs)


def _pod_configs(ensemble, profiles, space: Space, budget):
    options, notes = pod_stage_options(ensemble, profiles, space)
    counter = [0]
    configs = [_PodConfig(ensemble, options, r, space, budget, counter) for r in space.routers]
    notes = ("each stage's knobs chosen for its own tail over the pod's range of rates "
             "(a heuristic); the pod is evaluated and verified end to end", *notes)
    per_config = math.prod(len(options[n]) for n in ensemble.order) * len(space.routers)
    return configs, notes, per_config


# ------------------------------------------------------------------------------------------
# the search
# ------------------------------------------------------------------------------------------
class _Search:
    """Every candidate evaluated, the model's answers behind them, and the plan."""

    def __init__(self, space: Space, configs, budget):
        self.space, self.configs, self.budget = space, configs, budget
        self.seen: dict = {}          # (config index, count) -> Candidate
        self.answers: dict = {}       # (config index, active, rate) -> Latency or exception
        self.rejected: set = set()
        self.own_predictions = 0
        self.index_of: dict = {}      # id(Candidate) -> config index

    @property
    def predictions(self) -> int:
        pods = [c.counter[0] for c in self.configs if isinstance(c, _PodConfig)]
        return self.own_predictions + (pods[0] if pods else 0)

    def answer(self, ci, active, rate):
        key = (ci, active, rate)
        if key not in self.answers:
            self.own_predictions += 1
            node = self.configs[ci].at(active)
            system = system_of(node, self.configs[ci].router, active)
            try:
                self.answers[key] = model_answer(system, rate, self.budget, self.space.scv)
            except (UnstableError, NotImplementedError) as err:
                self.answers[key] = err
        found = self.answers[key]
        if isinstance(found, Exception):
            raise found
        return found

    def evaluate(self, ci, count, complete: bool = False) -> Candidate:
        known = self.seen.get((ci, count))
        if known is not None and (known.complete or not complete):
            return known
        space, config = self.space, self.configs[ci]
        active = count - space.failures
        cost = count * space.gpu_cost
        node = config.at(active) if active >= 1 else None
        if node is None:
            method = (f"{count} node(s) with {space.failures} down serve nothing" if active < 1
                      else "no stage configuration carries the pods' rate")
            candidate = Candidate(node or self._any_node(ci), config.router, count, cost,
                                  False, {}, {k: math.inf for k in space.slo}, math.inf,
                                  method, binding=space.rates.peak)
        else:
            ranged = worst_over_rates(lambda r: self.answer(ci, active, r), space.rates,
                                      space.slo, space.network, stop_at_miss=not complete)
            candidate = Candidate(node, config.router, count, cost, ranged.worst_ratio <= 1.0,
                                  ranged.quantiles, ranged.trusted, ranged.worst_ratio,
                                  ranged.method, ranged.extrapolated, ranged.binding,
                                  ranged.complete)
        self.seen[(ci, count)] = candidate
        self.index_of[id(candidate)] = ci
        return candidate

    def _any_node(self, ci):
        config = self.configs[ci]
        return getattr(config, "node", None) or config.ensemble

    def stable_count(self, ci) -> int:
        return math.floor(self.space.rates.peak / self.configs[ci].capacity) + 1 \
            + self.space.failures

    def fewest(self, ci, limit: float):
        """The fewest nodes of configuration ``ci`` feasible and not rejected, at a cost of
        at most ``limit``, or None."""
        stable = self.stable_count(ci)
        for count in self.space.counts:
            if count < stable:
                continue
            if count * self.space.gpu_cost > limit:
                return None
            c = self.evaluate(ci, count)
            if c.feasible and (ci, count) not in self.rejected:
                return c
        return None

    def run(self, executor=None) -> None:
        """Find each configuration's fewest feasible count (up to the best cost so far)."""
        best = math.inf
        if executor is None:
            for ci in range(len(self.configs)):
                found = self.fewest(ci, best)
                if found is not None:
                    best = min(best, found.cost)
            return
        for seen, answers, predictions in executor.map(self._isolated,
                                                       range(len(self.configs))):
            self.seen.update(seen)
            self.index_of.update({id(c): ci for (ci, _), c in seen.items()})
            self.answers.update(answers)
            self.own_predictions += predictions

    def _isolated(self, ci):
        """One configuration searched alone (for an executor): its candidates, answers and
        predictions."""
        other = _Search(self.space, self.configs, self.budget)
        other.rejected = set(self.rejected)
        other.fewest(ci, math.inf)
        return other.seen, other.answers, other.own_predictions

    # --- the plan ----------------------------------------------------------------------------
    def feasible(self) -> list:
        """Feasible candidates not rejected, cheapest first, ties in the search's order; one
        node behind several routers at one cost: the lowest trusted quantile over its target
        first (least outstanding's surrogate predicts what round robin does over such nodes,
        with a wider stated error, and was only as good as listed first)."""
        found = sorted((c for (ci, n), c in self.seen.items()
                        if c.feasible and (ci, n) not in self.rejected), key=self._index)
        # keyed by the node's value: an executor that pickles the results hands back one
        # node as several objects
        first = {}                      # a node -> the search index it first appears at
        for c in found:
            first.setdefault(c.node, self._index(c))
        return sorted(found, key=lambda c: (c.cost, first[c.node], c.worst_ratio,
                                            self._index(c)))

    def _index(self, candidate) -> int:
        return self.index_of[id(candidate)]

    def misses(self, sim) -> list:
        """The SLO keys whose simulated 95% CI upper end, plus the network, exceeds the
        target."""
        return [key for key in self.space.slo
                if sim.ci(LEVELS[key])[1] + self.space.network > self.space.slo[key]]

    def verify_rates(self, candidate) -> list:
        rates = self.space.rates
        return sorted({candidate.binding, rates.peak, rates.low}, reverse=True)

    def simulate_candidate(self, candidate, requests, seed):
        """[(rate, simulation)] at the candidate's verification rates, stopping at the first
        that misses."""
        out = []
        for rate in self.verify_rates(candidate):
            sim = _simulate(candidate.system(self.space.failures), rate, requests, seed,
                            self.space.scv)
            out.append((rate, sim))
            if self.misses(sim):
                break
        return out

    def verified_text(self, sims, seed) -> str:
        requests = sum(s.requests for _, s in sims)
        where = ", ".join(f"{r:,.6g}" for r, _ in sims)
        what = "pod(s)" if isinstance(self.configs[0], _PodConfig) else "node(s)"
        return (f"simulated {requests:,} requests (seed {seed}) at {where} req/s with "
                f"{self.space.failures} {what} down: every SLO quantile's 95% CI upper end "
                "meets its target" + (" plus the network budget" if self.space.network else ""))

    def shortlist(self, chosen) -> list:
        """verify="all": cheaper candidates within SHORTLIST_RATIO, cheapest first, each
        evaluated over the whole range; those the plan's verification rejected come again
        (with a GPU, at many more requests)."""
        cheaper = [(ci, c) for (ci, n), c in self.seen.items()
                   if c.cost < chosen.cost and n - self.space.failures >= 1
                   and c.worst_ratio <= SHORTLIST_RATIO]
        full = [self.evaluate(ci, c.nodes, complete=True) for ci, c in cheaper]
        return sorted((c for c in full if c.worst_ratio <= SHORTLIST_RATIO),
                      key=lambda c: (c.cost, c.worst_ratio))

    def simulate_all(self, chosen, sims, verification, notes, verify_requests, seed):
        """verify="all": the cheapest short-listed candidate whose simulations meet the SLO
        replaces ``chosen``; returns (chosen, sims, verification, notes)."""
        from ..sim.compiled import gpu_present

        requests = max(verify_requests, GPU_VERIFY_REQUESTS) if gpu_present() else \
            verify_requests
        tried = 0
        for candidate in self.shortlist(chosen):
            try:
                found = self.simulate_candidate(candidate, requests, seed)
            except (ValueError, UnstableError) as err:   # e.g. more memory than is free
                notes = (*notes, f"verify='all': {candidate.nodes} x {knobs(candidate.node)} "
                                 f"({candidate.router}) not simulated: {err}")
                continue
            tried += 1
            if not self.misses(found[-1][1]):
                notes = (*notes, f"{candidate.nodes} x {knobs(candidate.node)} "
                                 f"({candidate.router}): the model's margin put it at "
                                 f"{candidate.worst_ratio:.2f} x its target, but its "
                                 "simulation meets the SLO: taken (verify='all')")
                return (candidate, tuple(found), self.verified_text(found, seed), notes)
        notes = (*notes, f"verify='all': {tried} cheaper candidate(s) within "
                         f"{SHORTLIST_RATIO:g} x the targets simulated, none met the SLO")
        return chosen, sims, verification, notes

    def plan(self, notes, verify, verify_requests, seed, candidates_total,
             every=False) -> Plan:
        space = self.space
        chosen, sims, verification, rival = None, (), "not verified (verify=False)", None
        rival_rate = 0.0
        attempts = 0
        while chosen is None:
            pool = self.feasible()
            if not pool:
                break
            if not verify:
                chosen = pool[0]
                break
            for candidate in [c for c in pool if c.cost == pool[0].cost]:
                attempts += 1
                found = self.simulate_candidate(candidate, verify_requests, seed)
                rate, last = found[-1]
                missed = self.misses(last)
                if not missed:
                    chosen, sims = candidate, tuple(found)
                    verification = self.verified_text(found, seed)
                    break
                self.rejected.add((self._index(candidate), candidate.nodes))
                notes = (*notes, f"{candidate.nodes} x {knobs(candidate.node)} "
                                 f"({candidate.router}) was predicted to meet the SLO but its "
                                 f"simulation at {rate:,.6g} req/s missed {', '.join(missed)}: "
                                 "rejected")
                if attempts >= MOST_VERIFICATIONS:
                    break
            if chosen is None:
                if attempts >= MOST_VERIFICATIONS:
                    break
                self.run()                  # resume, the rejected plans left out
        # one node fewer, simulated: taken where its simulation meets the SLO that the
        # model's margin said it would miss (the simulation is the reference)
        while chosen is not None and verify:
            found = self.cheaper_rival(chosen, verify_requests, seed)
            if found is None:
                break
            best, rival_sims = found
            if self.misses(rival_sims[-1][1]):
                rival, rival_rate = (best, rival_sims[-1][1]), rival_sims[-1][0]
                break
            notes = (*notes, f"{best.nodes} x {knobs(best.node)} ({best.router}): the model's "
                             f"margin put it at {best.worst_ratio:.2f} x its target, but its "
                             "simulation meets the SLO: taken, one node fewer")
            chosen, sims, rival = best, tuple(rival_sims), None
            verification = self.verified_text(rival_sims, seed)
        if chosen is not None and every:
            chosen, sims, verification, notes = self.simulate_all(
                chosen, sims, verification, notes, verify_requests, seed)
            if rival is not None and rival[0].cost >= chosen.cost:
                rival = None
        if chosen is not None and chosen.extrapolated:
            notes = (*notes, "the plan lies outside the measured domain of its model's family: "
                             "the model's own answer ranked it"
                             + (", and its simulation verified it" if verify else
                                " (not verified: verify=False)"))
        unmodelled = self.unmodelled()
        if unmodelled:
            notes = (*notes, f"{len(unmodelled)} configuration(s) left out: no model answers "
                             f"them and the search ranks by models only (simulate them with "
                             f"qmodel.simulate); for example {unmodelled[0]}")
        alternatives = tuple(self.feasible())
        pareto = tuple(_pareto(self.seen.values()))
        extra = dict(network=space.network, load=space.rates.peak, failures=space.failures,
                     low=space.rates.low, rival=rival, scv=space.scv, rival_rate=rival_rate)
        if chosen is None:
            closest = self.closest()
            reason = self.infeasible_reason(alternatives, closest, attempts)
            return Plan(False, reason, closest.system(), closest.nodes,
                        closest.nodes * space.gpus_per_node, closest.cost,
                        self.predicted(closest), None, "not verified (infeasible)",
                        alternatives, pareto, candidates_total, self.predictions,
                        dict(space.slo), space.given.peak, tuple(notes),
                        binding=closest.binding, **extra)
        simulated = next((s for r, s in sims if r == chosen.binding), None) if sims else None
        return Plan(True, "", chosen.system(), chosen.nodes, chosen.nodes * space.gpus_per_node,
                    chosen.cost, self.predicted(chosen), simulated, verification,
                    alternatives, pareto, candidates_total, self.predictions, dict(space.slo),
                    space.given.peak, tuple(notes), binding=chosen.binding, verified=sims,
                    **extra)

    def unmodelled(self) -> list:
        """Why each configuration that no model answered was left out, one per configuration
        (a router and node the models do not cover: least outstanding over nodes of several
        instances, say)."""
        reasons = {}
        for (ci, _, _), answer in self.answers.items():
            if isinstance(answer, NotImplementedError) and ci not in reasons:
                reasons[ci] = (f"{knobs(self._any_node(ci))} behind "
                               f"{self.configs[ci].router}: {answer}")
        return [reasons[ci] for ci in sorted(reasons)]

    def predicted(self, candidate):
        """The candidate's answer at its binding rate, as it was ranked; None where it cannot
        carry the rate or no model answers."""
        ci = self._index(candidate)
        try:
            return self.answer(ci, candidate.nodes - self.space.failures, candidate.binding)
        except (UnstableError, NotImplementedError):
            return None

    def cheaper_rival(self, chosen, requests, seed):
        """The best configuration at one node fewer (evaluated over the whole range) and its
        simulations: what the margins cost."""
        fewer = [(ci, c) for (ci, n), c in self.seen.items()
                 if n == chosen.nodes - 1 and n - self.space.failures >= 1
                 and math.isfinite(c.worst_ratio)]
        if not fewer:
            return None
        full = [self.evaluate(ci, c.nodes, complete=True) for ci, c in fewer]
        best = min(full, key=lambda c: c.worst_ratio)
        if not math.isfinite(best.worst_ratio):
            return None
        try:
            return best, self.simulate_candidate(best, requests, seed)
        except (ValueError, UnstableError):
            return None

    def closest(self) -> Candidate:
        """The candidate nearest to feasible, evaluated over the whole range."""
        if not self.seen:
            # every configuration is unstable at the largest count allowed: the closest plan
            # is the one with the most capacity there
            self.evaluate(0, self.space.counts[-1])
        finite = [(ci, c) for (ci, n), c in self.seen.items() if math.isfinite(c.worst_ratio)]
        if not finite:
            return min(self.seen.values(), key=lambda c: c.cost)
        ranked = sorted(finite, key=lambda x: x[1].worst_ratio)[:4]
        full = [self.evaluate(ci, c.nodes, complete=True) for ci, c in ranked]
        return min(full, key=lambda c: c.worst_ratio)

    def infeasible_reason(self, alternatives, closest, attempts) -> str:
        space = self.space
        if alternatives or self.rejected:
            return ("every plan the model accepted missed the SLO in its simulation (see the "
                    f"notes; {attempts} simulated)")
        what = "pods" if isinstance(self.configs[0], _PodConfig) else "nodes"
        services = {n.service for c in self.configs for n in _nodes_of(c)}
        fastest = min(float(s.mean(1)) for s in services)
        tight = min(space.slo, key=space.slo.get)
        if fastest + space.network >= space.slo[tight]:
            return (f"S(1) alone, {fastest * 1e3:.3g} ms, plus the network budget "
                    f"{space.network * 1e3:g} ms already reaches the {tight} target "
                    f"{space.slo[tight] * 1e3:g} ms: no batching or node count meets it")
        unmodelled = self.unmodelled()
        if not math.isfinite(closest.worst_ratio) and len(unmodelled) == len(self.configs):
            return (f"no model answers any configuration, and the search ranks by models only "
                    f"(simulate them with qmodel.simulate, or list another router): "
                    f"{unmodelled[0]}")
        if not math.isfinite(closest.worst_ratio):
            best = max(self.configs, key=lambda c: c.capacity)
            return (f"no deployment within {space.counts[-1]} {what} meets the SLO: even the "
                    f"configuration with the most capacity ({best.capacity:,.0f} req/s per "
                    f"{what[:-1]}) needs more than {space.rates.peak / best.capacity:.1f} "
                    f"{what} for "
                    f"{space.rates.peak:,.0f} req/s; allow more nodes")
        where = "" if space.rates.single else f" at {closest.binding:,.6g} req/s"
        return (f"no deployment within {space.counts[-1]} {what} meets the SLO; the closest, "
                f"{closest.nodes} x {knobs(closest.node)} ({closest.router}), reaches "
                f"{closest.worst_ratio:.2f} x its target{where}")


def _positive_factor(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        raise ValueError(f"peak={value!r} must be >= 1: the factor by which the peak rate "
                         "exceeds rate")
    return float(value)


def _nodes_of(config):
    if isinstance(config, _PodConfig):
        return [n for opts in config.options.values() for n in opts]
    return [config.node]


def _simulate(system, rate, requests, seed, scv=1.0):
    import warnings

    from ..sim import simulate
    from ..sim.window import ShortRunWarning
    from ..system import Renewal

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)
        if scv == 1.0:
            return simulate(system, rate=rate, requests=requests, seed=seed)
        return simulate(system, arrivals=Renewal(rate, scv), requests=requests, seed=seed)


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


def _checked_profiles(profiles, service) -> dict:
    """Stage name -> Profile, checked against the ensemble's stages."""
    from ..profiling import Profile

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
