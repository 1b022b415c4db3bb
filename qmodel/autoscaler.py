"""Pods that follow the traffic: Kubernetes' Horizontal Pod Autoscaler, as a description.

:class:`Autoscaler` holds what a real HorizontalPodAutoscaler (``autoscaling/v2``) is given:
a target for a per-pod metric (instance utilization, or requests in flight per pod, as an
adapter reads them from Prometheus), the bounds on pods, the scale-down stabilization window,
and what the cluster adds: the delay from a scale-up decision to a pod that serves (pod start
and model load). :meth:`Autoscaler.run` replays its control loop over a :class:`~qmodel.Traffic`
and gives the :class:`PodSchedule`, the pods ready and requested over time, which the
simulator and the models take.

The control loop, as Kubernetes documents it (kube-controller-manager's defaults):

- every ``sync_period`` (15 s) the controller reads the metric averaged over the ready pods
  (here the mean over the last ``metric_window`` seconds, as a Prometheus ``rate()`` over
  that window gives it) and computes ``desired = ceil(ready x metric / target)``;
- within ``tolerance`` (10%) of the target nothing changes;
- a scale-up adds at most max(4 pods, 100% of the current pods) per period (the default
  scale-up policies) and is not stabilized; pods still starting count as current, so the
  controller does not ask twice for the same load;
- a scale-down takes the highest recommendation of the last ``stabilization`` seconds
  (300 s); removed pods stop receiving requests at once (the newest first);
- pods never go below ``min_pods`` or above ``max_pods``.

While the ready pods cannot carry the rate a backlog builds; :meth:`Autoscaler.run` follows
it as a fluid (each cohort of pods, ready at the same moment, drains its own backlog at its
capacity less its arrivals), which the in-flight metric counts and the models use.

Examples
--------
>>> from qmodel.traffic import Traffic
>>> hpa = Autoscaler(target=0.6, scale_up_delay=60, min_pods=2, max_pods=20)
>>> step = Traffic([0, 600, 1800], [2000.0, 6000.0])
>>> util = lambda x: x / 1000.0                     # a pod serves 1,000 req/s at most
>>> s = hpa.run(step, util, capacity=1000.0)
>>> int(s.ready_at(590.0)), int(s.ready_at(1790.0))
(4, 11)

2,000 req/s: 4 pods at 0.5 (within the 10% tolerance of 0.6). At 6,000 the pods, busy
with the backlog while the new ones start, read 1.0: the autoscaler asks for one more than
6,000 / 600 = 10, and 6,000 / 11 = 0.545 is within the tolerance, so 11 stay.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from .checks import shown

__all__ = ["Autoscaler", "PodSchedule", "FluidCohorts", "METRICS"]

# the per-pod metrics an autoscaler can target, with the Prometheus series that measures them
METRICS = {
    "utilization": "the fraction of the pod's instance time spent executing batches (0-1), "
                   "e.g. the rate of nv_inference_compute_infer_duration_us over the instance "
                   "count, or nv_gpu_utilization where one model owns the GPU",
    "in_flight": "requests inside the pod, queued or executing (nv_inference_pending_request_"
                 "count plus those executing, or the load balancer's active requests per "
                 "pod)",
}
# a scale-up delay beyond this is a unit slip (milliseconds given as seconds)
LONGEST_SCALE_UP = 3600.0


@dataclass(frozen=True)
class Autoscaler:
    """A Horizontal Pod Autoscaler on one per-pod metric.

    Parameters
    ----------
    metric : {"utilization", "in_flight"}
        What the autoscaler reads per pod (:data:`METRICS`).
    target : float, optional
        The metric's target: a utilization in (0, 1], or requests in flight per pod (> 0).
        None lets :func:`qmodel.size` choose the cheapest that holds the SLO.
    scale_up_delay : float
        Seconds from a scale-up decision to a pod that serves (pod scheduling, container
        start, model load): 60-120 s is common for a GPU model.
    stabilization : float
        Scale-down stabilization window, seconds (Kubernetes' default 300).
    min_pods, max_pods : int
    sync_period : float
        Seconds between the controller's decisions (Kubernetes' default 15).
    tolerance : float
        Relative distance from the target within which nothing changes (default 0.1).
    metric_window : float
        Seconds the metric is averaged over (a Prometheus ``rate(...[1m])``: 60).

    Examples
    --------
    >>> Autoscaler(target=0.6, scale_up_delay=90_000)
    Traceback (most recent call last):
    ...
    ValueError: Autoscaler.scale_up_delay=90000 s is more than an hour: qmodel takes seconds; write 90 for 90,000 ms
    """

    metric: str = "utilization"
    target: float | None = None
    scale_up_delay: float = 90.0
    stabilization: float = 300.0
    min_pods: int = 1
    max_pods: int = 64
    sync_period: float = 15.0
    tolerance: float = 0.1
    metric_window: float = 60.0

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ValueError(f"Autoscaler.metric={shown(self.metric)}: use "
                             f"{' or '.join(map(repr, METRICS))}")
        if self.target is not None:
            target = _number(self.target, "Autoscaler.target")
            if target < 0.001 or (self.metric == "utilization" and target > 1):
                raise ValueError(
                    f"Autoscaler.target={shown(self.target)}: "
                    + ("a utilization target is a fraction in [0.001, 1], e.g. 0.6 for 60%"
                       if self.metric == "utilization" else
                       "give the requests in flight per pod to aim at, at least 0.001"))
            object.__setattr__(self, "target", target)
        delay = _number(self.scale_up_delay, "Autoscaler.scale_up_delay")
        if delay < 0:
            raise ValueError(f"Autoscaler.scale_up_delay={delay:g} s must be >= 0")
        if 0 < delay < 1:
            raise ValueError(f"Autoscaler.scale_up_delay={delay:g} s is under a second, "
                             "shorter than any pod start and model load: qmodel takes seconds "
                             "(write 90 for a minute and a half, 0 for pods that serve at "
                             "once)")
        if delay > LONGEST_SCALE_UP:
            raise ValueError(f"Autoscaler.scale_up_delay={delay:g} s is more than an hour: "
                             f"qmodel takes seconds; write {delay / 1000:g} for "
                             f"{delay:,.0f} ms")
        object.__setattr__(self, "scale_up_delay", delay)
        stabilization = _number(self.stabilization, "Autoscaler.stabilization")
        if not (0 <= stabilization <= 3600 and float(stabilization).is_integer()):
            raise ValueError(f"Autoscaler.stabilization={stabilization:g} s must be whole "
                             "seconds from 0 to 3600 (Kubernetes' limit; default 300)")
        object.__setattr__(self, "stabilization", stabilization)
        window = _number(self.metric_window, "Autoscaler.metric_window")
        if not 0 <= window <= 86_400:
            raise ValueError(f"Autoscaler.metric_window={window:g} s must be between 0 and a "
                             "day (seconds)")
        object.__setattr__(self, "metric_window", window)
        period = _number(self.sync_period, "Autoscaler.sync_period")
        if not (1 <= period <= 1800 and float(period).is_integer()):
            raise ValueError(f"Autoscaler.sync_period={period:g} s must be whole seconds from 1 "
                             "to 1800 (the controller's --horizontal-pod-autoscaler-sync-"
                             "period; Kubernetes' default is 15)")
        object.__setattr__(self, "sync_period", period)
        tol = _number(self.tolerance, "Autoscaler.tolerance")
        if not 0 <= tol < 1:
            raise ValueError(f"Autoscaler.tolerance={tol:g} must be in [0, 1) (default 0.1)")
        object.__setattr__(self, "tolerance", tol)
        for name in ("min_pods", "max_pods"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"Autoscaler.{name} must be a whole number >= 1, got "
                                 f"{shown(value)}")
        if self.min_pods > self.max_pods:
            raise ValueError(f"Autoscaler.min_pods={self.min_pods} exceeds max_pods="
                             f"{self.max_pods}")

    def with_target(self, target: float) -> "Autoscaler":
        """This autoscaler aiming at ``target``."""
        from dataclasses import replace

        return replace(self, target=target)

    def steady_pods(self, rate: float, metric, capacity: float) -> int:
        """The pods the controller settles at for a constant ``rate``: the fewest within the
        bounds whose metric is within the tolerance above the target (or the most allowed)."""
        self._need_target()
        for n in range(self.min_pods, self.max_pods + 1):
            x = rate / n
            if x < capacity and float(metric(x)) <= self.target * (1 + self.tolerance):
                return n
        return self.max_pods

    def run(self, traffic, metric, capacity: float, start_pods: int | None = None,
            step: float = 1.0) -> "PodSchedule":
        """Replay the control loop over ``traffic`` (see the module docstring).

        Parameters
        ----------
        traffic : Traffic
        metric : callable
            The per-pod metric at a per-pod rate x (requests per second), in steady state:
            utilization, or requests in flight. Vectorised over an array of x.
        capacity : float
            The most one pod serves (requests per second); beyond it the backlog grows.
        start_pods : int, optional
            Ready pods at the start; default :meth:`steady_pods` at the starting rate.
        step : float
            Seconds between the points at which the rate, the backlog and the metric are
            followed (the controller decides every ``sync_period``).
        """
        self._need_target()
        if not capacity > 0:
            raise ValueError("Autoscaler.run: capacity must be > 0 requests per second")
        t0, t1 = traffic.start, traffic.end
        grid = np.arange(t0, t1, step)
        rates = traffic.rate_at(grid + step / 2)
        if start_pods is None:
            start_pods = self.steady_pods(float(rates[0]), metric, capacity)
        start_pods = int(np.clip(start_pods, self.min_pods, self.max_pods))
        fluid = FluidCohorts(capacity)
        fluid.add(start_pods)
        pending: list = []                         # [ready at, pods]
        history: list = []                         # (time, recommendation) for scale-down
        samples: list = []                         # (time, metric) for the metric window
        events = [(t0, start_pods, start_pods)]
        next_sync = t0 + self.sync_period
        for i, t in enumerate(grid):
            while pending and pending[0][0] <= t:  # pods that became ready
                ready_at, n = pending.pop(0)
                fluid.add(n)
                events.append((ready_at, fluid.pods, fluid.pods + sum(p[1] for p in pending)))
            ready = fluid.pods
            x = rates[i] / ready
            fluid.step(x, step)
            if self.metric == "utilization":
                # a pod working off a backlog is busy all the time
                value = (1.0 if x >= capacity else
                         sum(c.pods * (1.0 if c.backlog > 0 else float(metric(x)))
                             for c in fluid.cohorts) / ready)
            else:
                value = float(metric(min(x, capacity * 0.999))) + fluid.backlog / ready
            samples.append((t, value))
            if t + step <= next_sync:
                continue
            next_sync += self.sync_period
            window = [v for s, v in samples if s > t - max(self.metric_window, step)]
            samples = [(s, v) for s, v in samples if s > t - self.metric_window - step]
            measured = float(np.mean(window))
            current = ready + sum(p[1] for p in pending)
            ratio = measured / self.target
            if abs(ratio - 1) <= self.tolerance:
                recommendation = current
            else:
                recommendation = math.ceil(ratio * ready)
            recommendation = int(np.clip(recommendation, self.min_pods, self.max_pods))
            history.append((t, recommendation))
            history = [(s, r) for s, r in history if s > t - self.stabilization]
            if recommendation > current:
                target = min(recommendation, max(2 * current, current + 4), self.max_pods)
                pending.append([t + self.scale_up_delay, target - current])
                events.append((t, ready, target))
            else:
                target = max(r for _, r in history)      # stabilized scale-down
                if target < current:
                    drop = current - target
                    while drop and pending:              # cancel pods not yet ready
                        take = min(drop, pending[-1][1])
                        pending[-1][1] -= take
                        drop -= take
                        if pending[-1][1] == 0:
                            pending.pop()
                    fluid.remove(drop)                   # then the newest ready pods
                    events.append((t, fluid.pods, fluid.pods + sum(p[1] for p in pending)))
        return PodSchedule.from_events(events, t1, self)

    def _need_target(self):
        if self.target is None:
            raise ValueError("Autoscaler.target is None: give a target (e.g. "
                             "Autoscaler(target=0.6)), or let qmodel.size choose it")

    def manifest(self, name: str, deployment: str | None = None,
                 metric_name: str | None = None) -> str:
        """The HorizontalPodAutoscaler (``autoscaling/v2``) YAML for this autoscaler.

        The metric is a Pods metric, which a metrics adapter (prometheus-adapter) must serve
        under ``metric_name`` (default ``triton_utilization`` or ``triton_in_flight``); the
        comment says what it measures.

        >>> hpa = Autoscaler(target=0.6, min_pods=2, max_pods=16)
        >>> text = hpa.manifest("recommender")
        >>> text.splitlines()[3:5]
        ['apiVersion: autoscaling/v2', 'kind: HorizontalPodAutoscaler']
        >>> [line.strip() for line in text.splitlines() if "Replicas" in line or "averageV" in line]
        ['minReplicas: 2', 'maxReplicas: 16', 'averageValue: "600m"']
        """
        self._need_target()
        deployment = deployment or name
        metric_name = metric_name or f"triton_{self.metric}"
        value = _quantity(self.target)
        period = int(self.sync_period)
        tolerance = ([f"      tolerance: {self.tolerance:g}"] if self.tolerance != 0.1 else [])
        lines = [
            f"# qmodel: HorizontalPodAutoscaler for {name} (pods ready "
            f"{self.scale_up_delay:g} s after a scale-up, as planned).",
            f"# {metric_name}: {METRICS[self.metric]}; averaged over {self.metric_window:g} s "
            "(the metrics adapter's query).",
            f"# planned with the controller deciding every {period} s "
            "(kube-controller-manager --horizontal-pod-autoscaler-sync-period)"
            + (f" and a tolerance of {self.tolerance:g} (behavior.*.tolerance: the "
               "HPAConfigurableTolerance feature, Kubernetes 1.33 and later)"
               if tolerance else "") + ".",
            "apiVersion: autoscaling/v2",
            "kind: HorizontalPodAutoscaler",
            "metadata:",
            f"  name: {name}",
            "spec:",
            "  scaleTargetRef:",
            "    apiVersion: apps/v1",
            "    kind: Deployment",
            f"    name: {deployment}",
            f"  minReplicas: {self.min_pods}",
            f"  maxReplicas: {self.max_pods}",
            "  metrics:",
            "    - type: Pods",
            "      pods:",
            "        metric:",
            f"          name: {metric_name}",
            "        target:",
            "          type: AverageValue",
            f"          averageValue: \"{value}\"",
            "  behavior:",
            "    scaleUp:",
            "      stabilizationWindowSeconds: 0",
            *tolerance,
            "      selectPolicy: Max",
            "      policies:",
            "        - type: Percent",
            "          value: 100",
            f"          periodSeconds: {period}",
            "        - type: Pods",
            "          value: 4",
            f"          periodSeconds: {period}",
            "    scaleDown:",
            f"      stabilizationWindowSeconds: {int(self.stabilization)}",
            *tolerance,
            "      policies:",
            "        - type: Percent",
            "          value: 100",
            f"          periodSeconds: {period}",
        ]
        return "\n".join(lines) + "\n"


class FluidCohorts:
    """The backlog of pods that cannot keep up, as a fluid, by cohort.

    Pods that became ready together form a cohort; every ready pod receives the same rate x
    (a static router), and a cohort's backlog per pod grows at x - capacity while positive,
    and drains at capacity - x. A new cohort starts empty; pods leave newest first. With
    ``spread`` (requests^2 per second added to each pod's backlog variance while it is
    positive: the arrivals' x ca^2 plus the departures' capacity B cs^2) it also follows the
    variance of the backlog as a Brownian motion (the diffusion approximation), reset where
    the backlog clears.

    Examples
    --------
    >>> f = FluidCohorts(capacity=100.0)
    >>> f.add(2)
    >>> f.step(150.0, 10.0)          # 50 req/s per pod too many for 10 s
    >>> f.backlog
    1000.0
    >>> f.add(2); f.step(75.0, 10.0) # two empty pods join: the old ones drain 25 req/s
    >>> [(c.pods, c.backlog) for c in f.cohorts]
    [(2, 250.0), (2, 0.0)]
    """

    class Cohort:
        __slots__ = ("pods", "backlog", "variance")

        def __init__(self, pods):
            self.pods, self.backlog, self.variance = pods, 0.0, 0.0

    def __init__(self, capacity: float):
        self.capacity = float(capacity)
        self.cohorts: list = []

    @property
    def pods(self) -> int:
        return int(sum(c.pods for c in self.cohorts))

    @property
    def backlog(self) -> float:
        """Requests held back over all pods."""
        return float(sum(c.pods * c.backlog for c in self.cohorts))

    def add(self, pods: int) -> None:
        if pods > 0:
            self.cohorts.append(FluidCohorts.Cohort(int(pods)))

    def remove(self, pods: int) -> None:
        while pods > 0 and self.cohorts:
            take = min(pods, self.cohorts[-1].pods)
            self.cohorts[-1].pods -= take
            pods -= take
            if self.cohorts[-1].pods == 0:
                self.cohorts.pop()

    def step(self, x: float, dt: float, spread: float = 0.0) -> None:
        """Advance ``dt`` seconds at a rate of ``x`` requests per second per pod."""
        for c in self.cohorts:
            c.backlog = max(0.0, c.backlog + (x - self.capacity) * dt)
            c.variance = c.variance + spread * dt if c.backlog > 0 else 0.0


@dataclass(frozen=True, eq=False)
class PodSchedule:
    """Pods over time: from ``times[i]`` to ``times[i + 1]``, ``ready[i]`` pods serve and
    ``requested[i]`` are asked for (ready plus starting); the last entry lasts to ``end``.

    Examples
    --------
    >>> s = PodSchedule([0.0, 100.0], [2, 3], [3, 3], end=200.0)
    >>> int(s.ready_at(50.0)), int(s.ready_at(150.0)), s.pod_seconds()
    (2, 3, 600.0)
    """

    times: np.ndarray = field(repr=False)
    ready: np.ndarray = field(repr=False)
    requested: np.ndarray = field(repr=False)
    end: float = 0.0
    autoscaler: Autoscaler | None = None

    def __post_init__(self):
        t = np.asarray(self.times, dtype=float).ravel()
        ready = np.asarray(self.ready).ravel()
        requested = np.asarray(self.requested).ravel()
        if not (t.size == ready.size == requested.size) or t.size == 0:
            raise ValueError("PodSchedule: times, ready and requested must be of one length, "
                             "at least 1")
        if np.any(np.diff(t) < 0) or not float(self.end) > t[-1]:
            raise ValueError("PodSchedule: times must not decrease and end must follow them")
        if np.any(ready < 1) or np.any(requested < ready):
            raise ValueError("PodSchedule: at least one pod must be ready, and requested "
                             "pods include the ready ones")
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "ready", ready.astype(np.int64))
        object.__setattr__(self, "requested", requested.astype(np.int64))
        object.__setattr__(self, "end", float(self.end))

    @classmethod
    def constant(cls, pods: int, start: float, end: float) -> "PodSchedule":
        return cls([start], [pods], [pods], end=end)

    @classmethod
    def from_events(cls, events, end: float, autoscaler=None) -> "PodSchedule":
        """From (time, ready, requested) events in time order: the last at each time wins,
        and repeats are merged."""
        times, ready, requested = [], [], []
        for t, r, q in sorted(events, key=lambda e: e[0]):
            if times and t == times[-1]:
                ready[-1], requested[-1] = r, q
            elif not ready or (r, q) != (ready[-1], requested[-1]):
                times.append(t)
                ready.append(r)
                requested.append(q)
        return cls(times, ready, requested, end=end, autoscaler=autoscaler)

    def ready_at(self, t):
        """Pods serving at times ``t``."""
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.times.size - 1)
        return self.ready[i]

    def requested_at(self, t):
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.times.size - 1)
        return self.requested[i]

    @property
    def most(self) -> int:
        """The most pods ever ready."""
        return int(self.ready.max())

    def pod_seconds(self, start: float | None = None, end: float | None = None) -> float:
        """Requested pods integrated over time (what they cost: a starting pod is billed)."""
        start = self.times[0] if start is None else start
        end = self.end if end is None else end
        edges = np.concatenate([self.times, [self.end]])
        lo = np.clip(edges[:-1], start, end)
        hi = np.clip(edges[1:], start, end)
        return float(np.sum(self.requested * (hi - lo)))

    def changes(self) -> list:
        """(time, ready, requested) at each change."""
        return [(float(t), int(r), int(q))
                for t, r, q in zip(self.times, self.ready, self.requested)]


def _number(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {shown(value)}")
    return float(value)


def _quantity(value: float) -> str:
    """A Kubernetes quantity: whole, milli-units where that is exact, else a decimal.

    >>> _quantity(2.0), _quantity(0.6), _quantity(12345.6789), _quantity(0.0015)
    ('2', '600m', '12345.6789', '0.0015')
    """
    if float(value).is_integer():
        return str(int(value))
    milli = value * 1000
    if abs(milli - round(milli)) < 1e-9 * max(1.0, abs(milli)):
        return f"{round(milli)}m"
    return f"{value:.9f}".rstrip("0")
