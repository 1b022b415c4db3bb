"""The latency of a request that meets a backlog: the fluid and diffusion model of an
overload.

Where the rate exceeds what the ready pods serve (the minutes after a jump in traffic, before
new pods are ready), no stationary law exists: the backlog grows at the excess rate and drains
after, the carried-over backlog that the pointwise stationary approximation cannot see (Green
and Kolesar, Management Science 37(1), 1991; the fluid view of a temporary overload: Newell,
"Applications of Queueing Theory", 1982, ch. 2). :class:`~qmodel.autoscaler.FluidCohorts`
follows the backlog per pod, cohort by cohort, and its variance as a Brownian motion (the
diffusion approximation: arrivals add x ca^2 and departures mu B cs^2 per second, with ca^2 the
arrivals' squared coefficient of variation, mu the pod's capacity, B its batch and cs^2 the
scv of a full batch's service; Whitt, "Stochastic-Process Limits", 2002, ch. 9).

A request that arrives at a pod holding a backlog b (requests) waits for it to clear at the
pod's capacity mu, then for its own full batch: its sojourn is taken as b / mu + S(B), with b
normal of the fluid mean and the diffusion variance, and S(B) the service time of a full
batch. :class:`BacklogLatency` is that law; its measured error, window by window against the
simulator, is the ``traffic_fluid_backlog`` family (validation/traffic_accuracy.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from ..latency import Latency

__all__ = ["BacklogLatency", "saturation_spread"]


class BacklogLatency(Latency):
    """Sojourn time b / mu + S(B) with b ~ Normal(backlog, variance) cut at 0.

    Parameters
    ----------
    backlog : float
        The fluid backlog per pod the request meets (requests).
    variance : float
        Its diffusion variance (requests^2).
    capacity : float
        The pod's capacity mu (requests per second).
    service_mean, service_var : float
        Mean and variance of a full batch's service time S(B) (seconds, seconds^2).
    **metrics
        Passed to :class:`~qmodel.latency.Latency`.

    Examples
    --------
    >>> from qmodel.latency import Accuracy
    >>> r = BacklogLatency(500.0, 0.0, 1000.0, 2e-3, 0.0, model="fluid_backlog", method="demo",
    ...                    accuracy=Accuracy("approximation"), throughput=1000.0,
    ...                    utilization=1.0, batch_size_distribution={8: 1.0})
    >>> round(r.quantile(0.5), 6), round(r.mean, 6)       # 0.5 s of backlog, then S(B)
    (0.502, 0.502)
    """

    def __init__(self, backlog: float, variance: float, capacity: float, service_mean: float,
                 service_var: float, **metrics):
        super().__init__(**metrics)
        self.floor = float(service_mean)
        self.centre = float(backlog) / capacity + float(service_mean)
        self.sd = math.sqrt(max(variance, 0.0) / capacity ** 2 + max(service_var, 0.0))
        self._below = self._normal_cdf(self.floor)

    def _normal_cdf(self, t):
        if self.sd == 0:
            return np.where(np.asarray(t) >= self.centre, 1.0, 0.0)
        return special.ndtr((np.asarray(t) - self.centre) / self.sd)

    def _cdf(self, t):
        # the mass of b < 0 sits at b = 0: a request that meets no backlog waits S(B) only
        return np.where(t >= self.floor, self._normal_cdf(t), 0.0)

    def _sf(self, t):
        if self.sd == 0:
            return np.where(t >= self.centre, 0.0, 1.0)
        return np.where(t >= self.floor, special.ndtr((self.centre - t) / self.sd), 1.0)

    def _quantile(self, p):
        if self.sd == 0:
            return np.full(np.shape(p), self.centre)
        q = self.centre + self.sd * stats.norm.ppf(p)
        return np.maximum(q, self.floor)

    @property
    def mean(self) -> float:
        if self.sd == 0:
            return self.centre
        z = (self.floor - self.centre) / self.sd
        # E[max(X, floor)] for X normal
        return float(self.floor * stats.norm.cdf(z)
                     + self.centre * stats.norm.sf(z) + self.sd * stats.norm.pdf(z))


def saturation_spread(node, pods: int = 1, arrival_scv: float = 1.0):
    """(capacity mu per node, S(B) mean, S(B) variance, departures' variance rate per second
    per unit rate of departures) of a node serving full batches, for
    :class:`~qmodel.autoscaler.FluidCohorts` and :class:`BacklogLatency`.

    The departures of c instances each finishing B requests every S(B) form a counting process
    whose variance grows at mu B cs^2 per second (a renewal process of B-clumps), cs^2 the scv
    of S(B).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.25e-3), max_batch_size=8, instances=2)
    >>> cap, mean, var, per = saturation_spread(node)
    >>> round(cap), mean, var, per
    (4000, 0.004, 0.0, 0.0)
    """
    B = node.max_batch_size
    mean = float(node.service.mean(B))
    scv = float(node.service.scv(B))
    return node.capacity, mean, scv * mean * mean, B * scv
