"""The steady-state answer of :func:`qmodel.predict`: the best solver for a system under a
stationary arrival process, or the simulator where none covers it.

:func:`qmodel.predict` (:mod:`qmodel.predict`) sends a :class:`~qmodel.Traffic` to
:mod:`qmodel.timevarying`, which answers window by window with this module's
:func:`predict_stationary`; everything else comes here. Which solver answers (and what it
claims about itself, in ``result.model``, ``result.method`` and ``result.accuracy``):

=============================================  =================================================
node and arrivals                              solver
=============================================  =================================================
max_batch_size 1, deterministic service,       M/D/c (exact up to a stated truncation)
Poisson
max_batch_size 1, exponential service, Poisson M/M/c (exact)
max_batch_size 1, lognormal service with cv    GI/G/1 by Lindley's recursion on a lattice
<= 1, Poisson, 1 instance                      (numerical)
max_batch_size 1, other service laws, Poisson, M/G/1 by transform inversion (numerical)
1 instance
max_batch_size 1, renewal arrivals, 1 instance GI/G/1 by Lindley's recursion (numerical)
max_batch_size 1, several instances, renewal   GI/G/c as one c-times-faster server, waiting
arrivals or other service laws                 probability scaled by Erlang C (approximation)
one instance, any batching knobs and service   batch-node chain (numerical: lattice step and
                                               truncation stated; "approximation" where the
                                               result says which rule it simplifies)
several instances, or renewal arrivals with    batch-node chain with the instances taken in
batching                                       turn; renewal counts (approximation; errors
                                               measured in validation/predict_accuracy.py)
=============================================  =================================================

A cluster behind a static router is solved node by node and its latency is the request-weighted
mixture of its nodes' latencies. A random (weighted) router splits Poisson traffic into
independent Poisson streams: exact decomposition. Round robin gives each node every N-th
arrival: renewal arrivals with Erlang-N gaps (for Poisson input), exact marginally, solved by
the renewal-arrival models above. Power of d over identical single-instance nodes: the cavity
(mean-field) model of :mod:`qmodel.theory.routing`, inside its measured domain (N >= 8 and
N (1 - load) >= 2.4; for max_batch_size >= 8, N >= 4 and N (1 - load) >= 0.8); power of N (every
node sampled) is least outstanding. Least outstanding over identical one-request nodes
(max_batch_size 1): the balanced-queue model of :mod:`qmodel.theory.jsq`; over identical
single-instance batching nodes (max_batch_size >= 4, steady service): the round-robin model, a
measured surrogate (also under renewal arrivals from max_batch_size 8). Least outstanding and
power of d over identical nodes of several instances (any max_batch_size, preferred sizes
included): each node under the stream round robin over the nodes looked at would give it, a
measured surrogate.

Where no model covers the system (dynamic routers over single-instance nodes with preferred
sizes, over a finite queue or a mix of nodes; power of d, or least outstanding without
batching, under renewal arrivals; power of d outside its measured domain; a few node
shapes), or the system lies outside its family's measured domain, predict
falls back to qmodel's simulator and says so: ``accuracy.is_fallback`` is True,
``accuracy.exactness`` is "simulation" with the p99's confidence interval in
``accuracy.simulation``, and the reason no model answers is ``accuracy.fallback_reason``. That
takes seconds, not milliseconds; ``fallback="raise"`` raises NotImplementedError with the
reason instead.

An :class:`~qmodel.Ensemble` (or identical Ensemble pods behind a static router) is solved
stage by stage and the stages combined along its graph (:mod:`qmodel.theory.pipeline`): an
approximation with the measured error of family ``ensemble``; its result's ``stages`` holds
each stage's answer.

A finite ``max_queue_size`` makes the node a loss system: the batch-node chain answers with
``rejection_fraction`` where it is numerical (one instance, no delay, Poisson arrivals); no
approximate family was measured with a finite queue (every family's domain has queue limit 0),
so elsewhere such a node is simulated. A :class:`~qmodel.system.Trace` is taken as renewal
arrivals with its rate and interarrival scv (approximation, stated) where its gaps are
consistent with independence (:meth:`~qmodel.system.Trace.gap_autocorrelation`, every lag up
to ten within four standard errors of 0); the families were measured on renewal arrivals
only, so a trace with correlated gaps (bursts) lies outside every measured domain.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from .checks import MOST_RENEWAL_SCV
from .latency import (Accuracy, Approximation, Latency, WeightedMixture, least_exact,
                      with_overhead)
from .selfcheck import defects
from .sim import replicas as sim_replicas
from .sim import run as sim_run
from .sim.cost import run_cost
from .sim.ensemble import arrivals_per_replica
from .system import (Cluster, Node, Poisson, Renewal, Trace, arrivals_from, as_cluster,
                     check_stable)
from .theory.batch import DEFAULT_RESOLUTION, batch_node, check_resolution
from .theory.batch.bunched import behind_router, bunched_batch_node, bunching
from .theory.budget import (ADVICE, OverBudget, charge, fits, format_bytes, format_seconds,
                            hold, limits, memory_limit, remaining)
from .theory.classical import mdc, mg1, mmc
from .theory.pipeline import ensemble_family, ensemble_features, pipeline_latency
from .theory.lindley import gig1, gigc
from .theory.measured import (CLUSTER_FAMILIES, configuration_features, delay_acts, measured,
                               router_choices, several_instance_family)
from .theory.jsq import balanced_least_outstanding
from .theory.routing import dynamic_router

__all__ = ["predict_stationary", "MixtureLatency", "arrival_scv"]

# one request per batch, one instance, Poisson, lognormal jitter (no closed-form transform, so
# the inversion integrates it: 50-200 ms): with cv up to this the Pollaczek-Khinchine lattice
# (gig1) gives M/G/1's p50-p99 within 0.12% in 1.4-5 ms (loads 0.3-0.95, against mg1); at cv
# 1.5 within 1.6%, at cv 2 25% off (the lattice spreads too thin), so longer tails go to mg1
LATTICE_MAX_CV = 1.0
# the cavity model's lattice (steps per S(1)); its quantiles move < 0.1% from 40 to 100
DYNAMIC_RESOLUTION = 40

# The simulation fallback: at least this many requests (and enough for MIN_REPLICAS replicas
# long against the start-up transient), four times more while the p99's 95% confidence
# interval is wider than FALLBACK_CI of it, up to FALLBACK_MAX_REQUESTS, every run within the
# prediction's budget; a fixed seed makes the answer reproducible.
FALLBACK_REQUESTS, FALLBACK_MAX_REQUESTS, FALLBACK_CI, FALLBACK_SEED = 1_000_000, 16_000_000, \
    0.02, 0
FALLBACKS = ("simulate", "raise")

# Deterministic arrivals (Renewal scv 0) are taken as gamma gaps with this scv (Erlang-1000):
# the Lindley lattice needs a spread, and the difference is far below the lattice step.
MIN_SCV = 1e-3
# A trace's interarrival scv above this (a few huge gaps) is taken as this
MAX_TRACE_SCV = MOST_RENEWAL_SCV
# A trace is taken as renewal arrivals inside the measured domains only where its gaps' rank
# autocorrelation at every lag up to GAP_LAGS lies below GAP_SIGMAS standard errors
# (1 / sqrt(gaps)): independent gaps, of any law, pass with probability about 1 - 3e-4
GAP_LAGS, GAP_SIGMAS = 10, 4.0


def predict_stationary(system, rate=None, *, arrivals=None,
                       resolution: int = DEFAULT_RESOLUTION, fallback: str = "simulate",
                       extrapolate: bool = False, budget=None) -> Latency:
    """:func:`qmodel.predict` for a stationary arrival process (a rate, Poisson, Renewal or
    Trace): the parameters, result and errors are that function's.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential"))   # M/M/1, mu = 1000/s
    >>> round(predict_stationary(node, rate=500.0).p99 * 1e3, 2)           # ln(100) / 500
    9.21
    """
    process = arrivals_from(rate, arrivals)
    check_resolution(resolution)       # checked here too: M/D/c and M/M/c ignore it
    as_cluster(system)    # a Node, Ensemble or Cluster, or the error that says what else it is
    if not isinstance(extrapolate, bool):
        raise ValueError(f"extrapolate must be True or False, got {extrapolate!r}")
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback={fallback!r} is unknown; use 'simulate' (answer by "
                         f"simulation where no model covers the system) or 'raise'")
    check_stable(system, float(process.rate))
    with limits(budget):
        if fallback == "raise":
            return _checked_model(system, process, resolution, extrapolate)
        least, shortest = _shortest_simulation(system, process)
        if fits(shortest.seconds, shortest.nbytes):
            # a model that runs out of budget must leave the fallback its shortest run
            hold(shortest.seconds)
        try:
            return _checked_model(system, process, resolution, extrapolate)
        except NotImplementedError as err:
            reason = str(err)
        hold(0.0)
        return _simulated(system, process, reason, least, shortest)


def arrival_scv(process) -> float:
    """The interarrival scv the models take: 1 for Poisson, a renewal stream's own, a trace's
    up to MAX_TRACE_SCV (a trace is taken as renewal arrivals with its rate and scv)."""
    if isinstance(process, Trace):
        return min(float(process.scv), MAX_TRACE_SCV)
    return float(process.scv) if isinstance(process, Renewal) else 1.0


def _checked_model(system, process, resolution: int, extrapolate: bool) -> Latency:
    """The model's answer where its self-checks pass (:func:`qmodel.selfcheck.defects`) and
    the system lies in its family's measured domain (or ``extrapolate``); NotImplementedError
    with the reason otherwise. Overflow inside a solver is caught by those checks, so numpy's
    floating-point warnings are kept inside."""
    if as_cluster(system).pods:
        return _pods(as_cluster(system), process, resolution, extrapolate)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = _model(system, process, resolution)
        except (ArithmeticError, np.linalg.LinAlgError) as err:
            # a solver that cannot solve this system is a model that does not cover it
            raise NotImplementedError(f"the model's solver failed here: {err}") from err
        reason = defects(result, system, float(process.rate))
        if reason is not None:
            raise NotImplementedError(reason)
        # a trace of correlated gaps is outside every family (its gaps ranked once)
        correlated = correlated_gaps(process) if isinstance(process, Trace) else None
        outside = correlated or _outside_measured_domain(system, process, result)
    if outside is not None:
        if not extrapolate:
            raise NotImplementedError(outside)
        result.accuracy = extrapolated(result.accuracy, outside,
                                       measured_there=correlated is None)
    return result


def extrapolated(accuracy: Accuracy, reason: str, measured_there: bool = True) -> Accuracy:
    """``accuracy`` of an answer given outside its family's measured domain: the
    approximation ``outside_measured_domain`` with ``reason`` and, where ``measured_there``,
    the measured error of such answers (family ``extrapolated``, validation/domain_check.py:
    Poisson arrivals) after the family's own, whose range is not known to hold here."""
    accuracy = accuracy.extended(approximations=[
        Approximation("outside_measured_domain", f"extrapolated: {reason}")])
    if not measured_there:
        return accuracy
    return replace(accuracy, measured=accuracy.measured + (measured("extrapolated"),))


def _outside_measured_domain(system, process, result: Latency) -> str | None:
    """Why the system lies outside the measured domain of a family its answer quotes, or None.

    A family measured on whole clusters (round robin, least outstanding, power of d) covers
    the node models inside it, so only its domain is checked, with the cluster's features;
    otherwise each node's families are checked with that node's features (its own load and
    arrival scv).
    """
    families = result.accuracy.measured
    if not families:
        return None
    scv = arrival_scv(process)
    rate = float(process.rate)
    cluster = as_cluster(system)
    outer = [m for m in families if m.family in CLUSTER_FAMILIES]
    if outer:
        # every node of the cluster, not only the first: a mixed cluster is inside the
        # family's domain only where each of its nodes is
        distinct = []
        for node in cluster.nodes:
            if node not in distinct:
                distinct.append(node)
        # the d of a power-of-d router: its family was measured at d = 2 only
        choices = router_choices(cluster)
        # a mix of round-robin families (one node of one instance, another of several):
        # each node against its own
        checks = [(m, configuration_features(node, rate / cluster.capacity, scv,
                                             nodes=len(cluster.nodes), choices=choices))
                  for node in distinct for m in outer
                  if not m.family.startswith("round_robin")
                  or m.family == round_robin_family(node)]
    else:
        parts = getattr(result, "parts", [result])
        N = len(cluster.nodes)
        shares = np.full(N, 1.0 / N) if cluster.shares is None else cluster.shares
        served = [(n, float(s)) for n, s in zip(cluster.nodes, shares) if s > 0]
        checks = []
        for (node, share), part in zip(served, parts):
            node_scv = cluster.router.kind.node_arrival_scv(share, scv, N) if N > 1 else scv
            features = configuration_features(node, rate * share / node.capacity, node_scv)
            checks += [(m, features) for m in part.accuracy.measured]
    for family, features in checks:
        reason = family.outside(features)
        if reason is not None:
            return (f"{reason} (its measured error {family.p99.low:+.1%} to "
                    f"{family.p99.high:+.1%} on p99 is not known to hold here)")
    return None


def correlated_gaps(trace: Trace) -> str | None:
    """Why a trace's gaps are not those of a renewal stream (a lag up to GAP_LAGS whose rank
    autocorrelation is more than GAP_SIGMAS standard errors above 0), or None. The families
    were measured under Poisson and renewal arrivals only. Positive correlation (bursts) is
    what lengthens a tail; a negative one, as timestamps rounded to a clock give, smooths the
    stream and is let through."""
    rho = trace.gap_autocorrelation(GAP_LAGS)
    limit = GAP_SIGMAS / math.sqrt(trace.times.size - 1)
    if rho.size and np.max(rho) > limit:
        k = int(np.argmax(rho))
        return (f"the trace's gaps are correlated (lag-{k + 1} autocorrelation {rho[k]:+.3f}, "
                f"beyond {GAP_SIGMAS:g} standard errors {limit:.3f} of independence); the "
                f"families were measured under renewal arrivals only: replay the trace with "
                f"qmodel.simulate")
    return None


def _model(system, process, resolution: int) -> Latency:
    """The analytic answer, or NotImplementedError saying why there is none."""
    nodes = [system] if isinstance(system, Node) else system.nodes
    if any(n.prefetches for n in nodes):
        raise NotImplementedError("no model covers Triton's prefetching batcher "
                                  "(Node.prefetch with a delay)")
    if any(n.slowdown is not None for n in nodes):
        raise NotImplementedError("no model covers instances that slow each other "
                                  "(Node.slowdown)")
    if any(n.drift is not None for n in nodes):
        raise NotImplementedError("no model covers executions whose speed drifts "
                                  "(Node.drift)")
    trace_note = None
    if isinstance(process, Trace):
        # the models take a renewal stream: keep the trace's rate and gap variability, drop
        # the correlation between successive gaps (bursts that last many requests)
        process = Renewal(process.rate, arrival_scv(process))
        trace_note = (f"trace replaced by renewal arrivals with its rate {process.rate:.6g}/s "
                      f"and interarrival scv {process.scv:.3g} (gamma gaps; correlation between "
                      f"successive gaps ignored: replay the trace with qmodel.simulate to see "
                      f"its effect)")
    scv = arrival_scv(process)
    rate = float(process.rate)
    if isinstance(system, Node):
        result = _node(system, rate, resolution, scv)
    elif len(system.nodes) == 1:
        result = _node(system.nodes[0], rate, resolution, scv)
    else:
        result = _cluster(system, rate, resolution, scv)
    if trace_note:
        result.accuracy = result.accuracy.extended(
            exactness=least_exact([result.accuracy, Accuracy("approximation")]),
            approximations=[Approximation("trace_as_renewal", trace_note)])
    return result


def _shortest_simulation(system, process):
    """(requests, RunCost) of the shortest sound simulation of the system: MIN_REPLICAS
    replicas past the start-up transient (the simulator's own rule), or a Trace whole."""
    if isinstance(process, Trace):
        least = int(process.times.size)
    elif as_cluster(system).pods:
        least = math.ceil(sim_replicas.MIN_REPLICAS * arrivals_per_replica(system, process))
    else:
        cluster = as_cluster(system)
        per_node = sim_replicas.arrivals_per_replica_node(cluster, process.rate, process.scv)
        least = math.ceil(sim_replicas.MIN_REPLICAS * len(cluster.nodes) * per_node)
    return least, run_cost(system, process, least)


def _simulated(system, process, reason: str, least: int, shortest) -> Latency:
    """The simulator's answer where no model covers the system, labelled as such.

    Enough requests for MIN_REPLICAS replicas to outlast the start-up transient (the
    simulator's own rule), at least FALLBACK_REQUESTS, and four times more while the p99's 95%
    confidence interval is wider than FALLBACK_CI of it, up to FALLBACK_MAX_REQUESTS; every run
    within what is left of the prediction's budget (:func:`qmodel.sim.cost.run_cost`
    estimates each before it starts). Where even the shortest sound run would pass the budget,
    OverBudget says so with the run to ask qmodel.simulate for. A Trace is replayed whole.
    ``least`` and ``shortest`` are :func:`_shortest_simulation`'s, held back from the model.
    """
    requests = least if isinstance(process, Trace) else max(least, FALLBACK_REQUESTS)
    if not fits(shortest.seconds, shortest.nbytes):
        seconds, nbytes = remaining()
        raise OverBudget(
            f"{reason.removesuffix('; ' + ADVICE)}; and the shortest simulation that would "
            f"answer instead, {least:,} requests, needs about "
            f"{format_seconds(shortest.seconds)} and {format_bytes(shortest.nbytes)} (budget "
            f"left {format_seconds(max(seconds, 0))}; {memory_limit()[1]}): call "
            f"qmodel.simulate(system, ..., requests={least}), or raise the budget "
            f"(qmodel.predict(..., budget=qmodel.Budget(...)))")
    cost = run_cost(system, process, requests)
    while requests > least and not fits(cost.seconds, cost.nbytes):
        requests = max(least, requests // 2)
        cost = run_cost(system, process, requests)
    while True:
        charge(cost.seconds, "the simulation fallback", f"{requests:,} requests")
        result = sim_run.simulate(system, arrivals=process,
                                  requests=None if isinstance(process, Trace) else requests,
                                  seed=FALLBACK_SEED)
        if isinstance(process, Trace) or requests >= FALLBACK_MAX_REQUESTS \
                or result.sections < 2:
            break
        lo, hi = result.ci(0.99)
        if (hi - lo) / 2 <= FALLBACK_CI * result.p99:
            break
        longer = min(4 * requests, FALLBACK_MAX_REQUESTS)
        cost = run_cost(system, process, longer)
        if not fits(cost.seconds, cost.nbytes):
            break
        requests = longer
    result.method = f"simulation fallback ({result.method}, seed {FALLBACK_SEED})"
    result.accuracy = result.accuracy.extended(fallback_reason=reason)
    return result


def _ensemble(ensemble, process, resolution: int, extrapolate: bool) -> Latency:
    """Each stage's model under the arrivals its upstreams release, combined along the graph
    (:mod:`qmodel.theory.pipeline`); NotImplementedError naming the stage none covers."""
    if len(ensemble.stages) == 1:            # the node itself, inside its own domain
        (name, node), = ensemble.stages.items()
        result = _checked_model(node, process, resolution, extrapolate)
        result.stages = {name: result}
        return result
    note = None
    correlated = correlated_gaps(process) if isinstance(process, Trace) else None
    if isinstance(process, Trace):
        process = Renewal(process.rate, arrival_scv(process))
        note = Approximation("trace_as_renewal", f"trace replaced by renewal arrivals with its "
                             f"rate {process.rate:.6g}/s and interarrival scv {process.scv:.3g}")
    result = pipeline_latency(
        ensemble, process, arrival_scv(process),
        lambda name, node, stream: _stage_model(name, node, stream, resolution),
        notes=[note] if note else [])
    family = ensemble_family()
    reason = defects(result)
    if reason is not None:
        raise NotImplementedError(reason)
    outside = correlated
    if family is not None and outside is None:
        outside = family.outside(ensemble_features(ensemble, process, result.stages))
        if outside is not None:
            outside = (f"{outside} (its measured error {family.p99.low:+.1%} to "
                       f"{family.p99.high:+.1%} on p99 is not known to hold here)")
    if outside is not None:
        if not extrapolate:
            raise NotImplementedError(outside)
        # answered anyway: say so, as a node outside its family's domain does
        result.accuracy = extrapolated(result.accuracy, outside,
                                       measured_there=correlated is None)
    return result


def _pods(cluster: Cluster, process, resolution: int, extrapolate: bool) -> Latency:
    """An Ensemble, or identical Ensemble pods behind a static router: each pod solved with
    the stream the router gives it (:func:`_split`), the pods mixed."""
    ensemble = cluster.nodes[0]
    if len(cluster.nodes) == 1:
        return _ensemble(ensemble, process, resolution, extrapolate)
    correlated = correlated_gaps(process) if isinstance(process, Trace) else None
    if correlated is not None and not extrapolate:
        raise NotImplementedError(correlated)

    def solve(pod, pod_rate, pod_scv):
        stream = Poisson(pod_rate) if pod_scv == 1.0 else Renewal(pod_rate, pod_scv)
        return _ensemble(pod, stream, resolution, extrapolate)

    result = _split(cluster, float(process.rate), resolution, arrival_scv(process), solve)
    distinct = {id(part) for part in result.parts}
    # identical pods with equal shares are one part: its stages are every pod's
    result.stages = result.parts[0].stages if len(distinct) == 1 else None
    if correlated is not None:
        result.accuracy = extrapolated(result.accuracy, correlated, measured_there=False)
    return result


def _stage_model(name: str, node: Node, process, resolution: int) -> Latency:
    """A stage's model inside an ensemble, whose family's measured domain (not the stage's)
    says where it holds; NotImplementedError naming the stage where no model covers it."""
    try:
        return _checked_model(node, process, resolution, True)
    except NotImplementedError as err:
        raise NotImplementedError(f"ensemble stage {name!r}: {err}") from err


def _node(node: Node, rate: float, resolution: int, scv: float = 1.0) -> Latency:
    return with_overhead(_batcher(node, rate, resolution, scv), node.overhead)


def _batcher(node: Node, rate: float, resolution: int, scv: float = 1.0) -> Latency:
    """The node's sojourn in the batcher (queue and execution), without its overhead."""
    queue = node.max_queue_size
    if queue and queue < node.max_batch_size and node.max_queue_delay == 0:
        # at most Q wait and, with no delay, whatever waits goes at once: batches never exceed
        # Q, so the node is the same as one with max_batch_size Q (and the preferred sizes
        # that fit)
        node = replace(node, max_batch_size=queue, preferred_batch_sizes=tuple(
            p for p in node.preferred_batch_sizes if p <= queue))
    if node.max_batch_size == 1 and not node.max_queue_size:
        # one request per batch: a classical queue with c servers
        return _single_request(node, rate, scv)
    verdict = bunching(node, rate, scv)
    if verdict.bunched:
        # deterministic instances that free together, not in turn
        return bunched_batch_node(node, rate, resolution)
    if verdict.unmodelled is not None:
        raise NotImplementedError(verdict.unmodelled)
    return batch_node(node, rate, resolution=resolution, arrival_scv=scv)


def _single_request(node: Node, rate: float, scv: float) -> Latency:
    """max_batch_size 1: M/D/c, M/M/c, M/G/1 and GI/G/1 exact or numerical; GI/G/c (and
    M/G/c for other service laws) by the fast-server approximation."""
    service, c = node.service, node.instances
    if scv == 1.0:
        mean = float(service.mean(1))
        if service.jitter == "deterministic":
            return mdc(rate, mean, c)
        if service.jitter == "exponential":
            return mmc(rate, 1.0 / mean, c)
        if c == 1:
            if service.jitter == "lognormal" and service.cv <= LATTICE_MAX_CV:
                return gig1(rate, service, 1.0)
            # gamma: a closed-form transform, the inversion takes about 1 ms
            return mg1(rate, service)
    scv = max(scv, MIN_SCV)
    if c == 1:
        # a request arriving at a random time does not see time averages under renewal
        # arrivals, which the batch model assumes; Lindley's recursion does not need it
        return gig1(rate, service, scv)
    return gigc(rate, service, scv, c)


def _split(cluster: Cluster, rate: float, resolution: int, scv: float = 1.0,
           solve=None, split: Accuracy | None = None) -> Latency:
    """A static router splits the stream into per-node renewal streams: solve each node alone.

    - random (weighted), share p: independent thinning of a renewal stream is renewal, its
      gaps a geometric sum of the input's, scv p * scv + (1 - p) (Poisson stays Poisson: an
      exact decomposition; otherwise the node sees gamma gaps with that scv, approximation);
    - round robin over N nodes: every N-th arrival, gaps the sum of N input gaps, so gamma
      with scv scv / N (Erlang-N for Poisson input): exact marginally, as each node's stream
      is exactly that renewal process.

    Each node then gets its own solver (``solve(node, rate, scv)``; by default the node's
    model), and the cluster's latency is the request-weighted mixture of the nodes' (every
    request is served by one node). ``split``: how the stream was split, where a surrogate
    says it (by default the router's own record, with its measured families).
    """
    if solve is None:
        solve = (lambda node, node_rate, node_scv: _node(node, node_rate, resolution, node_scv))
    router = cluster.router
    nodes, shares = cluster.nodes, cluster.shares
    solved = {}                       # identical nodes with identical streams: solve once
    parts, weights, instances = [], [], []
    for node, share in zip(nodes, shares):
        if share <= 0:
            continue                  # a node the router never picks serves nothing
        node_scv = router.kind.node_arrival_scv(float(share), scv, len(nodes))
        key = (node, float(share), node_scv)
        if key not in solved:
            solved[key] = solve(node, rate * share, node_scv)
        parts.append(solved[key])
        weights.append(share)
        instances.append(node.instances)
    if split is None:
        split = _split_accuracy(cluster, scv)
    result = MixtureLatency(parts, weights, instances, split=split)
    idle = sum(node.instances for node, share in zip(nodes, shares) if share <= 0)
    if idle:
        # a node the router never picks (a node down, weight 0) idles: the cluster's
        # utilization pools its instances too
        result.utilization *= sum(instances) / (sum(instances) + idle)
    return result


def _split_accuracy(cluster: Cluster, scv: float) -> Accuracy:
    """How a static router's split of the stream is known (:func:`_split`'s default)."""
    nodes = cluster.nodes
    if cluster.router.policy == "round_robin":
        return Accuracy("numerical", f"round robin over {len(nodes)} nodes: each sees every "
                                     f"{len(nodes)}-th arrival, gamma gaps with scv "
                                     f"{scv / len(nodes):.3g} (exact marginally)",
                        measured=[] if cluster.pods else _round_robin_families(nodes))
    if scv == 1.0:
        return Accuracy("exact", "random split of Poisson traffic: exact decomposition into "
                                 "independent nodes")
    return Accuracy("approximation", approximations=[Approximation(
        "thinned_renewal", "random split of renewal traffic: each node sees a thinned "
                           "renewal stream, taken as gamma gaps with its scv")])


def round_robin_family(node) -> str:
    """The measured round-robin family of ``node``: "round_robin" (measured over
    one-instance nodes) or, for batching nodes of several instances,
    "round_robin_several_delay" / "round_robin_several_no_delay"
    (validation/several_instance_routers.py)."""
    if node.instances == 1 or node.max_batch_size == 1:
        return "round_robin"
    return several_instance_family("round_robin", delay_acts(node))


def _round_robin_families(nodes) -> list:
    """The round-robin families of the kinds of node among ``nodes``, each once."""
    return [measured(f) for f in dict.fromkeys(round_robin_family(n) for n in nodes)]


def _power_of_d(cluster: Cluster, rate: float, resolution: int, scv: float) -> Latency:
    """Power of d: the cavity (mean-field) model, where it is accurate; power of N samples
    every node and breaks ties at random, which is least outstanding.

    The model takes the other nodes as independent copies of the one it follows, which holds
    as N grows and fails for few nodes near saturation (they fill up together). It answers
    only inside the domain measured in validation/router_accuracy.py
    (:meth:`qmodel.routers.PowerOfD.unmodelled` says where).
    """
    router, nodes = cluster.router, cluster.nodes
    N, d = len(nodes), router.choices
    if d >= N:
        result = _least_outstanding(cluster, rate, resolution, scv)
        result.method = f"power of {d} over {N} nodes is least outstanding: {result.method}"
        return result
    if nodes[0].instances > 1:
        return _levelled(cluster, rate, resolution, scv, d, f"power of {d}", "power_of_two")
    result = dynamic_router(nodes[0], rate, N, d, resolution=min(resolution, DYNAMIC_RESOLUTION))
    result.accuracy = result.accuracy.extended(measured=[measured("power_of_two_mean_field")])
    return with_overhead(result, nodes[0].overhead)


def _least_outstanding(cluster: Cluster, rate: float, resolution: int,
                       scv: float = 1.0) -> Latency:
    """Least outstanding: the balanced-queue model for one-request nodes, round robin for
    batching nodes (each a measured approximation).

    Several instances (any max_batch_size): :func:`_levelled`, round robin over the N nodes.

    One request per batch, one instance:
    :func:`~qmodel.theory.jsq.balanced_least_outstanding` (central-queue count, the shortest
    node holds floor(n / N), equilibrium residual); measured family
    "least_outstanding_balanced".

    One instance, max_batch_size >= 4: joining the node with the fewest outstanding requests
    keeps the nodes' counts level, so successive requests go to different nodes in turn, much
    as round robin sends them, and the node sees close to round robin's Erlang-N stream. The
    round-robin model's errors against the simulated least-outstanding cluster are the
    measured families "least_outstanding_as_round_robin" (max_batch_size >= 8), "..._b4"
    (4-7) and "..._renewal";
    its median runs low (least outstanding's requests wait for fuller batches). At
    max_batch_size 2 it is up to twice the simulated p99 and is not used. The independent-nodes
    mean field fails for this router at any size (25-60% low), so it is not used.
    """
    node = cluster.nodes[0]
    N = len(cluster.nodes)
    # several instances first: the balanced-queue model counts one server per node
    if node.instances > 1:
        return _levelled(cluster, rate, resolution, scv, N, "least outstanding",
                         "least_outstanding")
    if node.max_batch_size == 1:
        return with_overhead(balanced_least_outstanding(node, rate, N), node.overhead)
    twin = Cluster(list(cluster.nodes), router="round_robin")
    result = _split(twin, rate, resolution, scv)
    result.method = f"least outstanding over {N} nodes as round robin: {result.method}"
    result.model = "least_outstanding_as_round_robin"
    # under renewal arrivals the renewal campaign's family is the one measured there
    families = (["least_outstanding_as_round_robin_renewal"] if scv != 1.0
                else ["least_outstanding_as_round_robin" if node.max_batch_size >= 8
                      else "least_outstanding_as_round_robin_b4"])
    # the surrogate's own round-robin error is not this answer's: least outstanding's is
    surrogate = replace(result.accuracy, measured=tuple(
        m for m in result.accuracy.measured if m.family != "round_robin"))
    result.accuracy = surrogate.extended(
        exactness="approximation",
        approximations=[Approximation("least_outstanding_as_round_robin",
                                      "least outstanding taken as round robin (level counts "
                                      "send requests to the nodes in turn)")],
        measured=[measured(f) for f in families])
    return result


def as_round_robin_over(cluster: Cluster, rate: float, resolution: int, scv: float,
                        over: int) -> Latency:
    """Each node fed as round robin over ``over`` nodes would feed it: its share of ``rate``
    as renewal arrivals with scv ``scv / over`` (gamma gaps), solved by the node's model;
    ``over`` = N is round robin itself.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.3e-3, jitter=("lognormal", 0.3)),
    ...                max_batch_size=8, instances=2)
    >>> cluster = qm.Cluster(node, count=4, router="power_of_two")
    >>> r = as_round_robin_over(cluster, 0.6 * cluster.capacity, 100, 1.0, over=2)
    >>> r.parts[0].method.startswith("batch node")
    True
    """
    node_scv = scv / over
    said = f"each node under renewal arrivals with scv {node_scv:.3g}, as round robin over " \
           f"{over} nodes feeds it"
    split = Accuracy("approximation", said, approximations=[Approximation(
        "as_round_robin", f"{said} (gamma gaps)", value=node_scv)])
    twin = Cluster(list(cluster.nodes), router="round_robin")
    return _split(twin, rate, resolution, scv, split=split,
                  solve=lambda node, node_rate, _: _node(node, node_rate, resolution, node_scv))


def _levelled(cluster: Cluster, rate: float, resolution: int, scv: float, over: int,
              policy: str, router: str) -> Latency:
    """A dynamic router over nodes of several instances, as round robin over ``over`` nodes.

    Least outstanding (``over`` = N) and power of d (``over`` = d) send a request to the
    emptiest node they look at, so successive requests go to the nodes in turn much as round
    robin over the nodes looked at would: the node is solved under renewal arrivals with scv
    1 / over (Erlang gaps for Poisson input). A measured surrogate, families
    ``{router}_several_delay`` and ``{router}_several_no_delay``
    (validation/several_instance_routers.py): it misses where the router reacts to the
    nodes' state, which the families' measured misses keep out (with a delay and service that
    grows fast with the batch, least outstanding herds requests into batches a third larger
    than round robin's, and the model's p99 ran up to 70% below the simulated one), and where
    the several-instance batch model misses under a smooth stream (light loads without a
    delay: up to twice the simulated p99, under round robin too).
    """
    result = as_round_robin_over(cluster, rate, resolution, scv, over)
    N, c = len(cluster.nodes), cluster.nodes[0].instances
    result.method = (f"{policy} over {N} nodes of {c} instances as round robin over {over}: "
                     f"{result.method}")
    result.model = "levelled_as_round_robin"
    # the family was measured on whole clusters answered this way: its error, not the node
    # model's under renewal arrivals (whose family's domain these streams are not in), is
    # the answer's
    result.accuracy = replace(result.accuracy, measured=()).extended(
        exactness="approximation",
        approximations=[Approximation(
            "levelled_as_round_robin", f"{policy} taken as round robin over {over} nodes "
            f"(each node's arrivals renewal with scv {scv / over:.3g})", value=scv / over)],
        measured=[measured(several_instance_family(router, delay_acts(cluster.nodes[0])))])
    return result


# predict's model of a cluster behind each routing policy (qmodel.routers.RouterPolicy.model)
CLUSTER_MODELS = {"split": _split, "least_outstanding": _least_outstanding,
                   "power_of_d": _power_of_d}


def _cluster(cluster: Cluster, rate: float, resolution: int, scv: float = 1.0) -> Latency:
    """The router's model, inside its domain; NotImplementedError saying why elsewhere."""
    policy = cluster.router.kind
    reason = policy.unmodelled(cluster, rate / cluster.capacity, scv)
    if reason is None and policy.name != "random":
        # the other routers' models take instances in turn: none holds where they free
        # together (the nodes share the rate evenly behind these routers)
        share = rate / len(cluster.nodes)
        reason = next((why for why in (behind_router(node, share)
                                       for node in dict.fromkeys(cluster.nodes))
                       if why is not None), None)
    if reason is not None:
        raise NotImplementedError(reason)
    return CLUSTER_MODELS[policy.model](cluster, rate, resolution, scv)


class MixtureLatency(WeightedMixture):
    """Request-weighted mixture of parts: the latency of a cluster behind a static router.

    Parameters
    ----------
    parts : list of Latency
        One per node.
    weights : sequence of float
        Fraction of arriving requests each part receives (normalised here); parts that reject
        requests (finite queues) count only the ones they serve.
    instances : sequence of int, optional
        Instances per part, to pool the parts' utilizations.
    split : Accuracy, optional
        How the stream was split (default: a random split of Poisson traffic, exact); the
        mixture's accuracy combines it with the parts'.
    """

    def __init__(self, parts, weights, instances=None, split: Accuracy | None = None):
        shares = np.asarray(weights, float)
        shares = shares / shares.sum()
        instances = np.ones(len(parts)) if instances is None else np.asarray(instances, float)
        # finite queues: a node rejects part of its share; the mixture is over served requests
        rejected = np.array([p.rejection_fraction for p in parts])
        served = shares * (1.0 - rejected)
        # nodes solved once (identical node and stream) share one part: evaluated once
        self._set_parts(parts, served)
        batches: dict[int, float] = {}
        for part, w in zip(self.parts, self.weights):
            # per-batch law: weight each node by its batch rate (requests / mean batch size)
            rate = w / part.mean_batch_size
            for k, p in part.batch_size_distribution.items():
                batches[k] = batches.get(k, 0.0) + rate * p
        split = split or Accuracy("exact", "random split of Poisson traffic: exact "
                                           "decomposition into independent nodes")
        Latency.__init__(
            self, model="mixture",
            method="mixture over nodes (" + ", ".join(sorted({p.method for p in self.parts}))
                   + ")",
            accuracy=Accuracy.combine(split, [p.accuracy for p in self.parts]),
            throughput=sum(p.throughput for p in self.parts),
            utilization=float(np.dot([p.utilization for p in self.parts], instances)
                              / np.sum(instances)),
            batch_size_distribution=batches,
            rejection_fraction=float(np.dot(shares, rejected)))

