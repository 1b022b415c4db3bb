"""Latency over time: the results of traffic that changes (simulated or predicted).

A system fed a :class:`~qmodel.Traffic` has no single sojourn-time distribution: each moment
has its own. Its result is still one :class:`~qmodel.latency.Latency`, the distribution of
every request of the traffic together, and it also answers by time window: the requests are
kept in time bins of ``resolution`` seconds (by arrival), and

- :meth:`Timeline.window` is the latency of the requests arriving in a window (a Latency
  with its quantiles, and for a simulation of several realisations its confidence
  intervals);
- :meth:`Timeline.windows` cuts the whole traffic into windows of one length;
- :meth:`Timeline.within` is the share of arriving requests served within each SLO target
  over any window (a rejected request is not within it): an SLO key ``p95`` holds over a
  window where that share is at least 0.95.

Windows are whole bins: a window's edges are rounded to the nearest bin edge.

:class:`TrafficLatency` is a simulation's (:func:`qmodel.sim.timevarying.simulate_traffic`),
:class:`TrafficPrediction` a model's (:mod:`qmodel.timevarying`): a mixture of each moment's
distribution weighted by its expected arrivals.
"""

from __future__ import annotations

import numpy as np

from .latency import Latency, SampledLatency, WeightedMixture, checked_times
from .slo import LEVELS, checked_slo

__all__ = ["Timeline", "TrafficLatency", "TrafficPrediction", "default_resolution"]

# Sections of a window's confidence intervals: groups of whole realisations.
WINDOW_SECTIONS = 16
MOST_BINS = 50_000


def default_resolution(traffic) -> float:
    """The width of a result's time bins: one second, coarser where the traffic would need
    more than 50,000 bins, a hundredth of a traffic shorter than 100 s."""
    import math

    if traffic.duration < 100:
        return traffic.duration / 100
    return float(max(1.0, math.ceil(traffic.duration / MOST_BINS)))


class Timeline:
    """What a result over time answers by window (a mixin; see the module docstring).

    Subclasses set ``edges`` (the bin edges, seconds), ``traffic`` and ``pods`` (the
    :class:`~qmodel.autoscaler.PodSchedule`, or None), and implement ``_window(i, j)`` (the
    Latency of bins i..j-1), ``_within(i, j, targets)`` (the share within each target) and
    ``_arrivals(i, j)``.
    """

    edges: np.ndarray
    traffic: object = None
    pods: object = None

    @property
    def resolution(self) -> float:
        """The width of a time bin (seconds)."""
        return float(self.edges[1] - self.edges[0])

    def _bins(self, start, end) -> tuple[int, int]:
        start = self.edges[0] if start is None else float(checked_times(start, "start"))
        end = self.edges[-1] if end is None else float(checked_times(end, "end"))
        if not end > start:
            raise ValueError(f"the window [{start:g}, {end:g}] s must end after it starts")
        i = int(np.clip(np.rint((start - self.edges[0]) / self.resolution), 0,
                        self.edges.size - 1))
        j = int(np.clip(np.rint((end - self.edges[0]) / self.resolution), 0,
                        self.edges.size - 1))
        if j <= i:
            raise ValueError(f"the window [{start:g}, {end:g}] s holds no whole bin of "
                             f"{self.resolution:g} s within the traffic's "
                             f"[{self.edges[0]:g}, {self.edges[-1]:g}] s")
        return i, j

    def window(self, start: float | None = None, end: float | None = None) -> Latency:
        """The latency of the requests arriving in [start, end) (seconds on the traffic's
        clock; default the whole traffic)."""
        return self._window(*self._bins(start, end))

    def windows(self, length: float) -> list:
        """Consecutive windows of ``length`` seconds over the traffic: a list of
        (start, end, Latency or None), None where no request arrived."""
        if not length > 0:
            raise ValueError(f"windows: length={length!r} must be > 0 seconds")
        step = max(1, int(round(length / self.resolution)))
        out = []
        for i in range(0, self.edges.size - 1, step):
            j = min(i + step, self.edges.size - 1)
            latency = self._window(i, j) if self._arrivals(i, j) > 0 else None
            out.append((float(self.edges[i]), float(self.edges[j]), latency))
        return out

    def within(self, slo: dict, start: float | None = None, end: float | None = None,
               network: float = 0.0) -> dict:
        """{SLO key: share of the requests arriving in [start, end) served within its target
        less ``network``}; a key holds over the window where its share reaches its level."""
        slo = checked_slo(slo, network)
        i, j = self._bins(start, end)
        targets = {k: t - network for k, t in slo.items()}
        return self._within(i, j, targets)

    def meets(self, slo: dict, start: float | None = None, end: float | None = None,
              network: float = 0.0) -> bool:
        """Whether every SLO key holds over [start, end) (:meth:`within`)."""
        shares = self.within(slo, start, end, network)
        return all(shares[k] >= LEVELS[k] for k in shares)

    def windowed_quantiles(self, p: float, length: float) -> tuple[np.ndarray, np.ndarray]:
        """(window starts, the p-quantile of each window; NaN where none arrived)."""
        rows = self.windows(length)
        return (np.array([a for a, _, _ in rows]),
                np.array([np.nan if r is None else r.quantile(p) for _, _, r in rows]))


class TrafficLatency(SampledLatency, Timeline):
    """Simulated sojourn times over a traffic, kept by arrival time bin.

    Parameters
    ----------
    sojourn : float32 array
        Sojourn times of served requests, grouped by bin (bin 0 first).
    served, rejected : int arrays (bins,)
        Requests served and rejected per bin.
    edges : array (bins + 1,)
        Bin edges (seconds).
    sections : int
        Sections of the whole run's confidence intervals, each of interleaved blocks of
        consecutive bins so that every section spans the whole traffic.

    relaxation : array (bins,), optional
        The queues' relaxation time in each bin (seconds): with one realisation, a section of
        a confidence interval spans at least ten of them.

    Attributes
    ----------
    lanes : int
        Lanes the engine ran (chunks of the pods' streams, over every replica).
    **metrics
        Passed to :class:`~qmodel.latency.Latency`.
    """

    def __init__(self, sojourn, served, rejected, edges, traffic=None, pods=None,
                 replica=None, relaxation=None, sections: int = 32, **metrics):
        sojourn = np.asarray(sojourn, dtype=np.float32)
        served = np.asarray(served, dtype=np.int64)
        self.edges = np.asarray(edges, dtype=float)
        self.served = served
        self.rejected = np.asarray(rejected, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(served)])
        self.traffic, self.pods = traffic, pods
        self.lanes = 0
        self._by_bin = sojourn
        self._replica = (np.zeros(sojourn.size, dtype=np.uint16) if replica is None
                         else np.asarray(replica))
        self.replicas = int(self._replica.max()) + 1 if self._replica.size else 1
        self.relaxation = (np.zeros(served.size) if relaxation is None
                           else np.asarray(relaxation, dtype=float))
        # Confidence intervals come from independent realisations only: stretches of one
        # run are not independent enough for a tail quantile (the p99 of 60 s windows of
        # M/M/1 at 0.8, sections of 300 relaxation times: 106 of 120 covered)
        order, sizes = _by_replica(self._replica, min(sections, self.replicas))
        super().__init__(sojourn[order] if order is not None else sojourn, sizes, **metrics)

    def _arrivals(self, i, j) -> int:
        return int(self.served[i:j].sum() + self.rejected[i:j].sum())

    def _window(self, i, j) -> SampledLatency:
        part = self._by_bin[self.offsets[i]:self.offsets[j]]
        if part.size == 0:
            raise ValueError(f"no request was served in [{self.edges[i]:g}, "
                             f"{self.edges[j]:g}) s")
        # independent realisations: the sections of a window, whatever happens in it (one
        # realisation: one section, no confidence interval)
        order, sizes = _by_replica(self._replica[self.offsets[i]:self.offsets[j]],
                                   min(WINDOW_SECTIONS, self.replicas))
        part = part[order]
        rejected = int(self.rejected[i:j].sum())
        return SampledLatency(
            part, sizes, model=self.model,
            method=f"{self.method}, window [{self.edges[i]:g}, {self.edges[j]:g}) s",
            accuracy=self.accuracy, throughput=part.size / (self.edges[j] - self.edges[i]),
            utilization=self.utilization, batch_size_distribution=self.batch_size_distribution
            or {1: 1.0}, rejection_fraction=rejected / max(1, rejected + part.size))

    def _within(self, i, j, targets) -> dict:
        part = self._by_bin[self.offsets[i]:self.offsets[j]]
        arrived = max(1, self._arrivals(i, j))
        return {k: float(np.count_nonzero(part <= np.float32(t))) / arrived
                for k, t in targets.items()}


class TrafficPrediction(WeightedMixture, Timeline):
    """A model's latency over a traffic: per time bin, the law of a request arriving then
    (:mod:`qmodel.theory.timevarying`), mixed by the bins' expected arrivals.

    Parameters
    ----------
    parts : list of Latency
        The law of each bin's requests.
    expected : array (bins,)
        Expected arrivals per bin.
    edges : array (bins + 1,)

    Attributes
    ----------
    backlog : array (bins,)
        The fluid backlog (requests, over all pods) at each bin's middle; 0 where the pods
        keep up.
    fluid : bool array (bins,)
        Where the backlog's law answered (a backlog held, or too near capacity for a
        stationary law) rather than the pointwise stationary one.
    window_accuracy : callable (i, j) -> Accuracy, optional
        The accuracy of bins i..j-1 alone (the rules and measured families they used);
        without it a window states the whole result's.
    """

    def __init__(self, parts, expected, edges, traffic=None, pods=None, **metrics):
        self.edges = np.asarray(edges, dtype=float)
        self.expected = np.asarray(expected, dtype=float)
        self.traffic, self.pods = traffic, pods
        self.backlog = np.zeros(self.expected.size)
        self.fluid = np.zeros(self.expected.size, dtype=bool)
        self.window_accuracy = None
        self._parts_by_bin = list(parts)
        super().__init__(parts, self.expected, **metrics)

    def _arrivals(self, i, j) -> float:
        return float(self.expected[i:j].sum())

    def _window(self, i, j) -> WeightedMixture:
        w = self.expected[i:j]
        if not w.sum() > 0:
            raise ValueError(f"no request is expected in [{self.edges[i]:g}, "
                             f"{self.edges[j]:g}) s")
        return WeightedMixture(
            self._parts_by_bin[i:j], w,
            model=self.model,
            method=f"{self.method}, window [{self.edges[i]:g}, {self.edges[j]:g}) s",
            accuracy=self.accuracy if self.window_accuracy is None
            else self.window_accuracy(i, j), throughput=w.sum() / (self.edges[j] - self.edges[i]),
            utilization=self.utilization, batch_size_distribution=self.batch_size_distribution
            or {1: 1.0}, rejection_fraction=self.rejection_fraction)

    def _within(self, i, j, targets) -> dict:
        window = self._window(i, j)
        return {k: float(window.cdf(t)) for k, t in targets.items()}


def _by_replica(replica, sections: int):
    """An order grouping samples into sections of whole replicas (replica mod sections), and
    the section sizes."""
    key = replica.astype(np.int64) % sections
    order = np.argsort(key, kind="stable")
    return order, np.bincount(key, minlength=sections).tolist()
