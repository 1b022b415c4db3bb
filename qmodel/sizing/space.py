"""The space a sizing searches: its inputs checked once, and the configurations in it.

A configuration is a node's knobs (instances per GPU, max_batch_size, max_queue_delay,
preferred batch sizes) under a router; for Ensemble pods, each stage's knobs are chosen per
pod count (:class:`PodChoice`). How instances that share a GPU run is never assumed silently
(``sharing``): a Profile measured at concurrency i gives their service, or the caller states
an assumption.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..ensemble import Ensemble
from ..slo import checked_slo
from ..system import Node, ServiceTime
from .trust import Rates

__all__ = ["Space", "SHARING", "DEFAULT_BATCHES", "DEFAULT_DELAYS", "checked_space",
           "configurations", "services_for"]

DEFAULT_DELAYS = (0.0, 0.5e-3, 1e-3, 2e-3, 5e-3)
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
SIZED_ROUTERS = ("random", "round_robin", "least_outstanding")
# how instances sharing one GPU run, where no profile measured them
SHARING = {
    "independent": "each instance runs at its own S(k), as if the GPU had room for all of "
                   "them (an optimistic bound: no slowdown)",
    "time-sliced": "the GPU runs one instance at a time: i instances each take i x S(k) "
                   "(a pessimistic bound: sharing adds no capacity)",
}


@dataclass(frozen=True)
class Space:
    """A sizing question, checked (:func:`checked_space`)."""

    slo: dict
    network: float
    rates: Rates               # as sized: the peak factor applied to the upper end
    given: Rates               # as asked
    failures: int
    counts: tuple
    gpus_per_node: int
    per_gpu: tuple
    batches: tuple
    delays: tuple
    preferred: tuple
    routers: tuple
    cost_per_gpu: float
    sharing: str | None
    scv: float = 1.0           # the arrivals' squared coefficient of variation (a Traffic's)

    @property
    def gpu_cost(self) -> float:
        return self.gpus_per_node * self.cost_per_gpu


def checked_space(slo, rate, network, peak, failures, nodes, gpus_per_node, instances_per_gpu,
                  max_batch_size, max_queue_delay, preferred_batch_sizes, routers,
                  cost_per_gpu, sharing) -> Space:
    """Every sizing input checked once, with messages that name the field and the fix."""
    slo = checked_slo(slo, network)
    given = _rates(rate)
    peak = _positive(peak, "peak")
    if peak < 1:
        raise ValueError(f"peak={peak!r} must be >= 1: the factor by which the peak rate "
                         "exceeds rate")
    counts = tuple(sorted({_count(n, "nodes", 1) for n in _listed(nodes, "nodes")}))
    per_gpu = tuple(sorted({_count(i, "instances_per_gpu", 1)
                            for i in _listed(instances_per_gpu, "instances_per_gpu")}))
    batches = tuple(sorted({_count(b, "max_batch_size", 1)
                            for b in _listed(max_batch_size, "max_batch_size")}))
    delays = tuple(sorted({_delay(d) for d in _listed(max_queue_delay, "max_queue_delay")}))
    preferred = _preferred_options(preferred_batch_sizes)
    routers = tuple(dict.fromkeys(_listed(routers, "routers")))
    for r in routers:
        if r not in SIZED_ROUTERS:
            raise ValueError(f"routers: {r!r} is not sized; use 'random', 'round_robin' or "
                             "'least_outstanding'")
    if sharing is not None and sharing not in SHARING:
        raise ValueError(f"sharing={sharing!r}: use None (instances sharing a GPU need a "
                         f"profile measured at that concurrency), "
                         f"{' or '.join(map(repr, SHARING))}")
    failures = _count(failures, "failures", 0)
    if failures >= counts[-1]:
        raise ValueError(f"failures={failures} leaves no node serving at the most nodes "
                         f"allowed ({counts[-1]}); allow more nodes or fewer failures")
    return Space(slo=slo, network=float(network), rates=Rates(given.low, given.peak * peak),
                 given=given, failures=failures, counts=counts,
                 gpus_per_node=_count(gpus_per_node, "gpus_per_node", 1), per_gpu=per_gpu,
                 batches=batches, delays=delays, preferred=preferred, routers=routers,
                 cost_per_gpu=_positive(cost_per_gpu, "cost_per_gpu"), sharing=sharing)


def services_for(service, per_gpu, sharing, stage: str | None = None):
    """({instances per GPU: ServiceTime}, notes, node overhead, prefetch) for one model.

    A Profile gives, for i instances per GPU, its samples at concurrency i; where it has none,
    or for a plain ServiceTime with i > 1, ``sharing`` must say how the instances run
    (:data:`SHARING`), or this refuses with the fix. A Node (e.g. calibrated from a Triton
    server) gives its service, overhead and prefetch.
    """
    from ..profiling import Profile

    where = f"{stage}: " if stage else ""
    notes, overhead, prefetch = [], 0.0, None
    if isinstance(service, Node):
        overhead, prefetch = service.overhead, service.prefetch
        notes.append(f"{where}service, overhead"
                     + (f" and prefetch ({prefetch:g})" if prefetch is not None else "")
                     + " taken from the given Node; its own knobs are replaced by the "
                       "searched ones")
        if service.slowdown is not None:
            notes.append(f"{where}the given Node's slowdown is not searched: how instances "
                         f"sharing a GPU run comes from a Profile measured at that "
                         f"concurrency or from sharing=")
        if service.drift is not None:
            notes.append(f"{where}the given Node's drift ({service.drift.describe()}) is not "
                         f"carried into the plans: their predictions assume a steady speed "
                         f"(no model covers drift, and simulating every candidate would "
                         f"take minutes); check the chosen plan with qmodel.simulate and "
                         f"the Node's drift")
        service = service.service
    if not isinstance(service, (ServiceTime, Profile)):
        raise ValueError(f"size(service, ...): {where}service must be a qmodel.ServiceTime, "
                         f"Profile or Node, got {type(service).__name__}")
    out = {}
    for i in per_gpu:
        if isinstance(service, Profile) and i in service.samples:
            out[i] = service.service(i)
            if i > 1:
                notes.append(f"{where}{i} instances per GPU: S(k) measured with {i} copies "
                             f"sharing the device (profile concurrency {i})")
            continue
        base = service.service(1) if isinstance(service, Profile) else service
        if i == 1:
            out[i] = base
            continue
        if sharing is None:
            what = ("the profile has no concurrency " f"{i}" if isinstance(service, Profile)
                    else "a plain ServiceTime says nothing of instances sharing a GPU")
            raise ValueError(
                f"{where}instances_per_gpu includes {i}, but {what}: qmodel cannot tell how "
                f"{i} instances on one GPU slow each other. Measure it (qmodel profile "
                f"--concurrency 1,{i}) and give the Profile, or state an assumption: "
                "sharing='independent' (no slowdown, optimistic) or sharing='time-sliced' "
                "(i instances each i x slower, pessimistic)")
        out[i] = base if sharing == "independent" else base.scaled(i)
        notes.append(f"{where}{i} instances per GPU: {SHARING[sharing]} (sharing="
                     f"{sharing!r}, an assumption, not a measurement)")
    return out, tuple(notes), overhead, prefetch


def configurations(services, space: Space, overhead=0.0, prefetch=None) -> list:
    """Every node configuration searched: ``services[i]`` with i instances per GPU, each
    max_batch_size, max_queue_delay and preferred sizes (no delay at max_batch_size 1, where
    it only waits; each preferred set cut to the sizes up to max_batch_size, each distinct
    set once; an empty set is Triton's default, max_batch_size alone)."""
    out = []
    for i in space.per_gpu:
        for B in space.batches:
            for D in space.delays:
                if B == 1 and D > 0:
                    continue
                seen = set()
                for pref in space.preferred:
                    kept = tuple(p for p in pref if p <= B)
                    if kept in seen:
                        continue
                    seen.add(kept)
                    out.append(Node(services[i], max_batch_size=B, max_queue_delay=D,
                                    preferred_batch_sizes=kept,
                                    instances=space.gpus_per_node * i, overhead=overhead,
                                    prefetch=prefetch if D > 0 else None))
    return out


def pod_stage_options(ensemble: Ensemble, profiles: dict, space: Space):
    """({stage: [Node options]}, notes) for Ensemble pods."""
    if len(ensemble.stages) > 1 and space.sharing is None:
        raise ValueError(
            "an Ensemble pod puts every stage's instances on the pod's GPUs, and qmodel "
            "cannot tell how the stages slow each other: state the assumption with "
            "sharing='independent' (each stage runs at its own S(k), as measured alone or at "
            "its profile's concurrency)")
    if space.sharing == "time-sliced":
        raise ValueError("sharing='time-sliced' is not sized for Ensemble pods (the stages' "
                         "instances on a GPU are chosen stage by stage); use 'independent'")
    notes = [f"the stages share the pod's GPUs: {SHARING['independent']} (sharing="
             "'independent', an assumption)"]
    options = {}
    for name, node in ensemble.stages.items():
        services, stage_notes, _, _ = services_for(profiles.get(name, node.service),
                                                   space.per_gpu, space.sharing, stage=name)
        notes += list(stage_notes)
        options[name] = configurations(services, space, node.overhead, node.prefetch)
    return options, tuple(notes)


def _preferred_options(value) -> tuple:
    """The preferred-size sets searched: tuples of sizes, () for none."""
    if value is None:
        return ((),)
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError("preferred_batch_sizes must list the sets to try, e.g. ((), (1, 2, 4))"
                         f"; got {value!r}")
    out = []
    for option in value:
        if isinstance(option, numbers.Integral):
            raise ValueError("preferred_batch_sizes lists sets of sizes, e.g. ((), (1, 2, 4)); "
                             f"a bare {option!r} is not a set: write ({option},)")
        sizes = tuple(sorted({_count(p, "preferred_batch_sizes", 1) for p in option}))
        if sizes not in out:
            out.append(sizes)
    if not out:
        raise ValueError("preferred_batch_sizes is empty; give ((),) for none")
    # a delay-free node with preferred sizes and without: distinct configurations
    return tuple(out)


def _rates(rate) -> Rates:
    if isinstance(rate, (tuple, list)):
        if len(rate) != 2:
            raise ValueError(f"rate={rate!r}: give one rate, or a range (low, peak)")
        low, high = _positive(rate[0], "rate low"), _positive(rate[1], "rate peak")
        if low > high:
            raise ValueError(f"rate=({low:g}, {high:g}): the low end exceeds the peak; write "
                             f"({high:g}, {low:g})")
        return Rates(low, high)
    r = _positive(rate, "rate")
    return Rates(r, r)


def _delay(value) -> float:
    from ..checks import positive_duration

    return positive_duration(value, "max_queue_delay", allow_zero=True)


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
