"""The front door: ``qmodel.predict(system, rate)`` answers with the best model for the system.

A stationary arrival process (a rate, Poisson, Renewal, Trace) is answered by
:mod:`qmodel.stationary` (which solver for which system, and the simulation fallback); a
:class:`~qmodel.Traffic`, a rate that changes with time, by :mod:`qmodel.timevarying`, window
by window, with the time-varying simulator as its fallback.
"""

from __future__ import annotations

from dataclasses import replace

from .latency import Latency
from .sim.timevarying import simulate_traffic
from .stationary import (FALLBACK_SEED, FALLBACKS, MixtureLatency, arrival_scv,
                         predict_stationary)
from .theory.batch import DEFAULT_RESOLUTION
from .timevarying import predict_traffic
from .traffic import Traffic

# MixtureLatency and arrival_scv live in qmodel.stationary; named here as before
__all__ = ["predict", "MixtureLatency", "arrival_scv"]


def predict(system, rate=None, *, arrivals=None, resolution: int = DEFAULT_RESOLUTION,
            fallback: str = "simulate", extrapolate: bool = False,
            budget=None, pods=None) -> Latency:
    """Predicted sojourn-time distribution of a node, cluster or ensemble under an arrival
    process.

    Parameters
    ----------
    system : Node, Cluster, Ensemble, or Cluster of Ensemble pods
    rate : float, optional
        Poisson arrival rate in requests per second (or give ``arrivals``).
    arrivals : Poisson, Renewal or Traffic, optional
        The arrival process. Renewal arrivals (gamma interarrivals with a given scv) are an
        approximation, stated in the result. A :class:`~qmodel.Traffic` (a rate that changes
        with time) is answered second by second (:mod:`qmodel.timevarying`) with a
        :class:`~qmodel.timeline.TrafficPrediction`.
    resolution : int
        Lattice steps per batch-of-one service time for the numeric batch models.
    fallback : {"simulate", "raise"}
        What to do where no model covers the system: simulate it (seconds; the result says
        "simulation fallback" in ``method`` and why in ``accuracy``), or raise
        NotImplementedError with the reason.
    extrapolate : bool
        Outside the measured domain of the approximation's family (the configurations its
        error was measured on, ``accuracy.measured[i].domain``), answer with the model anyway:
        the result then lists the approximation "outside_measured_domain" with the feature
        that lies outside, and its measured error is not known to hold. By default (False)
        such a system is answered as where no model covers it. Answers that fail the
        self-checks (:mod:`qmodel.selfcheck`) are never given.
    budget : qmodel.Budget, optional
        The memory and estimated work the numeric models may spend (default 1 GiB of arrays
        and 20 s, :mod:`qmodel.theory.budget`); a model that would pass it declines with the
        numbers, as where no model covers the system.
    pods : PodSchedule or int, optional
        With a Traffic: the pods ready over time (:meth:`qmodel.Autoscaler.run`).

    Returns
    -------
    Latency
        With ``method`` (which solver) and ``accuracy`` (exact, numerical, approximation or
        simulation, and the error statement).

    Raises
    ------
    UnstableError
        If the load (arrival rate over capacity) reaches 1.
    NotImplementedError
        With ``fallback="raise"``, where no model covers the system (the message says why).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(base=2e-3, per_item=0.25e-3), max_batch_size=8,
    ...                max_queue_delay=1e-3)
    >>> r = qm.predict(node, rate=1500.0)
    >>> r.accuracy.exactness, round(r.p99 * 1e3, 1)
    ('approximation', 9.4)
    """
    if isinstance(arrivals, Traffic):
        return _traffic(system, rate, arrivals, fallback, budget, pods)
    if pods is not None:
        raise ValueError("pods= goes with arrivals=qmodel.Traffic (a rate that changes with "
                         "time)")
    return predict_stationary(system, rate, arrivals=arrivals, resolution=resolution,
                              fallback=fallback, extrapolate=extrapolate, budget=budget)


def _traffic(system, rate, traffic, fallback, budget, pods):
    """The time-varying model, or where it has none the time-varying simulation (labelled)."""
    if rate is not None:
        raise ValueError("give rate= or arrivals=, not both: the traffic sets the rate")
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback={fallback!r} is unknown; use 'simulate' or 'raise'")
    try:
        return predict_traffic(system, traffic, pods=pods, budget=budget)
    except NotImplementedError as err:
        if fallback == "raise":
            raise
        result = simulate_traffic(system, traffic, pods=pods, seed=FALLBACK_SEED)
        result.accuracy = replace(result.accuracy, fallback_reason=str(err))
        result.method = f"simulation fallback: {result.method}"
        return result
