"""Ensembles from their stages' models: departure processes, sums along paths, maxima at joins.

:func:`qmodel.predict` solves an :class:`~qmodel.Ensemble` stage by stage in topological order
and combines the stages' sojourn-time distributions here. Three approximations, each stated in
the result's accuracy and measured together against the simulator (validation/ensemble_accuracy.py):

1. **A stage's arrivals are a renewal stream** (gamma gaps) at the ensemble's rate with the scv
   of what its upstream releases (:func:`departure_scv`), blended with the ensemble's own
   arrival scv the more the busier the stage (:func:`blended_scv`); below a single batching
   upstream, a stream of its clumps (:func:`clumped_stage`). A fan-in is fed by the upstream
   whose mean completion time is the latest: the branch a request waits for most often. A batching stage releases the K
   requests of a batch together at its completion epoch. For a stream of clumps (marks K, iid
   and independent of the epochs) the index of dispersion of counts over long windows is
   ``E[K] c_e^2 + Var K / E[K]`` (Cox & Lewis 1966, 4.6; the batch rule of Whitt's Queueing
   Network Analyzer, 1983), with ``c_e^2`` the scv of the epochs; derivation "departures"
   works it out. The epochs' scv comes from Whitt's (1983) departure formula for a c-server
   station, ``1 + (1 - rho^2)(c_b^2 - 1) + rho^2 (c_s^2 - 1) / sqrt(c)``, taken for batches:
   ``rho`` the stage's utilization, ``c_s^2`` the scv of a batch of the mean size, and
   ``c_b^2 = c_a^2 / E[K]`` the scv of the gaps between batch formations at light load (a
   batch collects E[K] arrivals).
2. **Stage sojourns are independent**: a request's completion at a stage is the latest of its
   upstreams' completions (product of the cdfs) plus the stage's sojourn (a convolution).
   Successive stages of a tandem are positively correlated in truth (a burst delays a request
   at both), and branches that share an upstream see the same request; both are left out.
3. **The arithmetic on a lattice**: each stage's cdf is taken on a grid of step ``h`` (the
   result's ``accuracy.lattice_step``), up to the sum of the stages' 1 - 1e-7 quantiles (the
   mass beyond is ``accuracy.truncated_mass``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

from ..accuracy import Accuracy, Approximation, least_exact
from ..checks import MOST_RENEWAL_SCV

__all__ = ["pipeline_latency", "departure_scv", "blended_scv", "batch_service_scv",
           "clumped_stage", "unclumped", "combine", "ensemble_features",
           "ensemble_family", "FAMILY", "GRID_POINTS", "TAIL"]

# the measured family of ensembles (qmodel/theory/measured_errors.json)
FAMILY = "ensemble"

# lattice points of the combined distribution, and the tail level that bounds it
GRID_POINTS = 1 << 14
TAIL = 1e-7
# the largest relative difference between whole clumps per batch (times the clump) and B
CLUMP_ROUNDING = 0.05


def departure_scv(utilization: float, batch_sizes: dict, instances: int, service_scv: float,
                  arrival_scv: float, epochs_too: bool = False):
    """The scv of the request stream a batching stage releases (see the module docstring).

    Parameters
    ----------
    utilization : float
        Fraction of the stage's instance time busy.
    batch_sizes : dict of int to float
        Probability of each batch size (per batch).
    instances : int
    service_scv : float
        scv of the service time of a batch of the mean size.
    arrival_scv : float
        scv of the stage's own arrivals.
    epochs_too : bool
        Also return the scv of the batch completion epochs: (requests' scv, epochs' scv).

    Examples
    --------
    One request per batch (K = 1) reduces to Whitt's departure formula: an M/D/1 at load 0.6
    releases a stream of scv 1 - 0.6^2.

    >>> round(departure_scv(0.6, {1: 1.0}, 1, 0.0, 1.0), 6)
    0.64
    >>> # batches of 8 at light load: each collects 8 Poisson arrivals, so the epochs are
    >>> # Erlang-8 (scv 1/8) and over long windows the clumps count as Poisson again
    >>> round(departure_scv(0.05, {8: 1.0}, 1, 0.0, 1.0), 3)
    0.998
    """
    sizes = np.array(sorted(batch_sizes), dtype=float)
    probs = np.array([batch_sizes[k] for k in sorted(batch_sizes)], dtype=float)
    probs /= probs.sum()
    mean = float(np.dot(sizes, probs))
    var = float(np.dot((sizes - mean) ** 2, probs))
    rho2 = min(max(utilization, 0.0), 1.0) ** 2
    epochs = (1.0 + (1.0 - rho2) * (arrival_scv / mean - 1.0)
              + rho2 * (service_scv - 1.0) / math.sqrt(instances))
    epochs = max(epochs, 0.0)
    requests = float(min(MOST_RENEWAL_SCV, mean * epochs + var / mean))
    return (requests, float(min(MOST_RENEWAL_SCV, epochs))) if epochs_too else requests


def blended_scv(interval: float, long_run: float, load: float) -> float:
    """The arrival scv a downstream stage at ``load`` is solved with: ``(1 - w) interval +
    w long_run`` with ``w = load^2``.

    ``interval`` is the scv of the gaps its upstream releases (:func:`departure_scv`, the
    stationary-interval view); ``long_run`` that of the ensemble's arrivals, which every
    stage's output keeps over windows long against its busy periods (the asymptotic view: a
    stable stage passes every request on, each within a bounded time). A lightly loaded stage clears each gap's
    work and sees the intervals; a busy one integrates over long windows. Whitt (1983, the
    Queueing Network Analyzer) blends the same two views with a weight growing with the
    downstream load; the weight here is simpler and measured with the rest
    (validation/ensemble_accuracy.py).

    Examples
    --------
    >>> blended_scv(0.2, 1.0, 0.5)
    0.4
    """
    w = min(max(load, 0.0), 1.0) ** 2
    return float((1.0 - w) * interval + w * long_run)


def batch_service_scv(service, batch_sizes: dict) -> float:
    """The scv of a batch's service time over the batches a stage runs: the spread of the
    means S(K) over the batch sizes K and each size's own jitter,
    ``E[S(K)^2 (1 + scv_K)] / E[S(K)]^2 - 1``.

    Examples
    --------
    >>> import qmodel as qm
    >>> s = qm.ServiceTime.affine(1e-3, 1e-3)       # S(1) = 2 ms, S(3) = 4 ms
    >>> round(batch_service_scv(s, {1: 0.5, 3: 0.5}), 4)    # sd 1 ms over mean 3 ms, squared
    0.1111
    """
    sizes = sorted(batch_sizes)
    probs = np.array([batch_sizes[k] for k in sizes], float)
    probs /= probs.sum()
    means = np.array([float(service.mean(k)) for k in sizes])
    scvs = np.array([float(service.scv(k)) for k in sizes])
    first = float(np.dot(probs, means))
    second = float(np.dot(probs, means ** 2 * (1.0 + scvs)))
    return max(0.0, second / first ** 2 - 1.0)


def clumped_stage(node, clump: float):
    """A stage fed by one batching upstream, as a node whose requests are the upstream's
    clumps: ``(m, node')`` with m the mean clump (the upstream's mean batch size) and node'
    taking up to round(B / m) clumps per batch, a batch of j clumps served as one of j m
    requests. None where that does not apply: clumps of fewer than 1.5 requests on average,
    a service law other than affine, preferred batch sizes, clumps larger than B, or
    round(B / m) m more than CLUMP_ROUNDING away from B (whole clumps would misstate the
    capacity).

    The upstream releases each batch's requests at one instant; a downstream batcher takes
    them whole, which a stream of single requests (however bursty) does not reproduce.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=16)
    >>> m, clumps = clumped_stage(node, 4.0)
    >>> m, clumps.max_batch_size, float(clumps.service.mean(2))   # 2 clumps: 8 requests
    (4.0, 4, 0.0018)
    """
    from dataclasses import replace

    from ..system import AffineService

    if (clump < 1.5 or not isinstance(node.service, AffineService)
            or node.preferred_batch_sizes or clump > node.max_batch_size):
        return None
    size = float(clump)
    most = max(1, round(node.max_batch_size / size))
    if abs(most * size / node.max_batch_size - 1.0) > CLUMP_ROUNDING:
        return None          # whole clumps would misstate the stage's capacity
    service = replace(node.service, per_item=node.service.per_item * size)
    return size, replace(node, service=service, max_batch_size=most)


def unclumped(result, clump: float, rate: float):
    """A clumped stage's result (:func:`clumped_stage`) in requests: every request of a clump
    has the clump's sojourn; batches of j clumps hold about j m requests."""
    sizes: dict = {}
    for j, p in result.batch_size_distribution.items():
        k = max(1, round(j * clump))
        sizes[k] = sizes.get(k, 0.0) + p
    result.batch_size_distribution = sizes
    result.throughput = float(result.throughput * clump)
    result.method = f"{result.method}, over clumps of {clump:.3g} requests"
    result.accuracy = result.accuracy.extended(exactness=least_exact(
        [result.accuracy, Accuracy("approximation")]), approximations=[Approximation(
        "clumped_arrivals", "a stage fed by one batching upstream takes its batches as "
        "clumps of the mean batch size, arriving as a renewal stream of completion epochs",
        clump)])
    return result


def combine(ensemble, stages: dict):
    """The end-to-end sojourn's distribution on a lattice, from each stage's (independent)
    sojourn ``stages[name]`` (a Latency): completion at a stage = latest upstream completion
    plus its sojourn; done = latest exit completion.

    Returns
    -------
    (pmf, h, truncated_mass)
        ``pmf[i]``: probability of the lattice cell around ``i h``.

    Examples
    --------
    Two deterministic 1 ms stages in a row (each an atom): the sum is an atom at 2 ms.

    >>> import qmodel as qm
    >>> s = qm.Node(qm.ServiceTime.affine(1e-3))
    >>> ens = qm.Ensemble({"a": s, "b": s}, [("a", "b")])
    >>> r = qm.predict(s, rate=1.0)
    >>> pmf, h, lost = combine(ens, {"a": r, "b": r})
    >>> round(float(np.dot(pmf, np.arange(pmf.size) * h)) * 1e3, 2)
    2.0
    """
    graph = ensemble.graph
    horizon = sum(float(stages[n].quantile(1.0 - TAIL)) for n in ensemble.order)
    h = horizon / (GRID_POINTS - 1)
    edges = (np.arange(GRID_POINTS) + 0.5) * h
    cells = {}
    for name in ensemble.order:
        cdf = np.concatenate([[0.0], np.asarray(stages[name].cdf(edges), float)])
        cells[name] = np.clip(np.diff(cdf), 0.0, None)        # cell i: ((i - 1/2) h, (i + 1/2) h]
    done = {}
    for name in ensemble.order:
        ups = list(graph.predecessors(name))
        pmf = cells[name]
        if ups:
            ready = _latest([done[u] for u in ups])
            pmf = signal.fftconvolve(ready, pmf)[:GRID_POINTS]
            pmf = np.clip(pmf, 0.0, None)
        done[name] = pmf
    end = _latest([done[x] for x in ensemble.exits])
    lost = float(max(0.0, 1.0 - end.sum()))
    return end, h, lost


def _latest(pmfs):
    """The pmf of the largest of independent lattice variables (product of their cdfs)."""
    if len(pmfs) == 1:
        return pmfs[0]
    cdf = np.ones(pmfs[0].size)
    for p in pmfs:
        cdf *= np.minimum(np.cumsum(p), 1.0)
    return np.diff(np.concatenate([[0.0], cdf]))


def pipeline_latency(ensemble, process, entry_scv: float, solve, notes=()):
    """The end-to-end latency of ``ensemble`` from its stages' models (the approximations of
    the module docstring), with ``.stages``.

    Parameters
    ----------
    ensemble : Ensemble
        Two stages or more.
    process : Poisson or Renewal
        The ensemble's arrivals (the entry stages' stream).
    entry_scv : float
        Its interarrival scv.
    solve : callable
        ``solve(name, node, arrivals)``: the stage's model (a Latency) under Poisson or Renewal
        ``arrivals``; :func:`qmodel.predict` passes its checked node models.
    notes : sequence of Approximation
        Further approximations to state (how ``process`` was obtained).

    Returns
    -------
    LatticeLatency
        Approximation; its accuracy gathers the stages' and states the ensemble family's
        measured error (:func:`ensemble_family`), not the stages' families.

    Examples
    --------
    >>> import qmodel as qm
    >>> s = qm.Node(qm.ServiceTime.affine(1e-3))
    >>> ens = qm.Ensemble({"a": s, "b": s}, [("a", "b")])
    >>> r = pipeline_latency(ens, qm.Poisson(1.0), 1.0,
    ...                      lambda name, node, arrivals: qm.predict(node, arrivals=arrivals))
    >>> round(r.p50 * 1e3, 1), sorted(r.stages)      # almost never a queue: 1 ms + 1 ms
    (2.0, ['a', 'b'])
    """
    from dataclasses import replace

    from ..latency import LatticeLatency
    from ..system import Renewal

    rate = float(process.rate)
    graph = ensemble.graph
    stages, released, epochs, scvs, finish = {}, {}, {}, {}, {}
    for name in ensemble.order:
        ups = list(graph.predecessors(name))
        node = ensemble.stages[name]
        load = rate / node.capacity
        clump = None
        if not ups:
            scv, stream = entry_scv, process
        else:
            # a fan-in is fed by the branch a request waits for most often: the one with the
            # latest mean completion
            u = max(ups, key=lambda v: finish[v])
            # what u releases (its interval scv) blended with what every stage passes on over
            # long windows (the ensemble's own arrivals), the more the busier this stage
            scv = blended_scv(released[u], entry_scv, load)
            stream = Renewal(rate, scv)
            clump = clumped_stage(node, stages[u].mean_batch_size)
        if clump is None:
            result = solve(name, node, stream)
        else:
            size, clumps = clump
            given = Renewal(rate / size, blended_scv(epochs[u], entry_scv / size, load))
            result = unclumped(solve(name, clumps, given), size, rate)
        released[name], epochs[name] = departure_scv(
            result.utilization, result.batch_size_distribution, node.instances,
            batch_service_scv(node.service, result.batch_size_distribution), scv,
            epochs_too=True)
        stages[name], scvs[name] = result, scv
        finish[name] = max((finish[v] for v in ups), default=0.0) + result.mean
    pmf, h, lost = combine(ensemble, stages)
    inner = [Approximation("stage_arrivals_renewal",
                           "each stage below another takes renewal arrivals with the scv of "
                           "what its upstream releases (a batch's requests together), blended "
                           "with the ensemble's arrival scv by the stage's load (Whitt 1983); "
                           "largest scv as value", max(scvs.values())),
             Approximation("stage_sojourns_independent",
                           "stage sojourns taken as independent: summed along each path, the "
                           "latest taken at a fan-in"), *notes]
    outer = Accuracy("approximation", f"{len(stages)} stages combined on a lattice",
                     lattice_step=h, truncated_mass=lost, approximations=tuple(inner))
    accuracy = Accuracy.combine(outer, [r.accuracy for r in stages.values()])
    # the stages' own families and domains describe the stages (in result.stages), not the
    # ensemble: its measured error is the ensemble family's
    family = ensemble_family()
    accuracy = replace(accuracy, measured=(family,) if family is not None else (),
                       approximations=tuple(a for a in accuracy.approximations
                                            if a.key != "outside_measured_domain"))
    instances = np.array([ensemble.stages[n].instances for n in stages], float)
    batches: dict = {}
    for r in stages.values():
        for k, p in r.batch_size_distribution.items():    # all stages' batches, per batch
            batches[k] = batches.get(k, 0.0) + p / r.mean_batch_size
    out = LatticeLatency(
        pmf, h, model="pipeline",
        method=f"ensemble of {len(stages)} stages (stage models combined: renewal "
               "arrivals downstream, independent sojourns)",
        accuracy=accuracy, throughput=min(r.throughput for r in stages.values()),
        utilization=float(np.dot([r.utilization for r in stages.values()], instances)
                          / instances.sum()),
        batch_size_distribution=batches)
    out.stages = stages
    return out


def ensemble_features(ensemble, process, stages=None) -> dict:
    """The features the ensemble family's measured domain bounds: the number of stages and,
    over the stages, the largest max_batch_size, load (rate over the stage's capacity),
    service cv, instances, max_queue_delay over S(1) and count of preferred sizes below B;
    the arrivals' scv; and, given the stages' predicted results (``stages``: name ->
    Latency), the largest utilization (busy fraction) among them: a stage whose preferred
    size 1 sends requests one by one is far busier than its load (which counts full
    batches) says.

    Examples
    --------
    >>> import qmodel as qm
    >>> s = qm.ServiceTime.affine(1e-3, 1e-4)
    >>> ens = qm.Ensemble({"a": qm.Node(s, max_batch_size=8), "b": qm.Node(s)}, [("a", "b")])
    >>> f = ensemble_features(ens, qm.Poisson(500.0))
    >>> f["stages"], f["max_batch_size"], round(f["load"], 2)
    (2, 8, 0.55)
    """
    from .measured import configuration_features

    rate = float(process.rate)
    scv = float(getattr(process, "scv", 1.0))
    per = [configuration_features(node, rate / node.capacity, scv)
           for node in ensemble.stages.values()]
    out = {key: max(f[key] for f in per)
           for key in ("max_batch_size", "load", "jitter_cv", "instances", "delay_over_s1",
                       "preferred_below_max")}
    out.update(stages=len(ensemble.stages), arrival_scv=scv)
    if stages:
        out["utilization"] = max(float(r.utilization) for r in stages.values())
    return out


def ensemble_family():
    """The ensemble family's MeasuredError, or None before it is measured."""
    from .measured import measured_table

    return measured_table().get(FAMILY)
