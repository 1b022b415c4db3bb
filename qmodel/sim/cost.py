"""What a simulation will cost, estimated before it runs.

:func:`qmodel.predict` answers by simulation where no model covers a system; it sizes that run
within the prediction's budget (:mod:`qmodel.theory.budget`) from these estimates, so that a
fallback never becomes a call of minutes or a MemoryError.

The two engines cost differently (measured on the shared 2-core development machine, NumPy,
one thread; ``benchmarks/sim_cost.py`` prints estimate against measurement):

- the look-ahead engine handles one batch per lane (replica x node) per step: about 25 us a
  step, and 0.1-0.25 us per request. With many lanes it runs at 5-17 million requests per
  second; with 8 long replicas of one node near capacity (batches of one, a million steps)
  at 0.34 million (24 s for 8M requests at load 0.99);
- the events engine takes one arrival per replica per step, so a run costs its steps (the
  arrivals of one replica) times the cost of a step: 50-110 us of fixed work, 0.3-0.8 us
  more per replica (the step's work and the result's assembly) and 4-12 ns per lane
  (replica x node). A 64-node cluster at 8 replicas costs about 60 us per step whatever the
  number of requests, and its replicas are long.

Memory at the peak (times, sojourns and batch records on the host) is 27-139 bytes per request
on the look-ahead engine and 72-148 on the events engine (the most with batches of one). The
nominal figures below sit at the slow and large end of those measurements, so that the same
configuration gets the same run on every machine.

Examples
--------
>>> import qmodel as qm
>>> node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8)
>>> cost = run_cost(qm.Cluster(node, count=64, router="least_outstanding"),
...                 qm.Poisson(0.9 * 64 * 8 / 1.7e-3), 1_000_000)
>>> cost.engine, cost.replicas, round(cost.seconds), round(cost.nbytes / 2**20)
('events', 8, 14, 143)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import machine
from ..system import as_cluster
from .replicas import DEFAULT_WARMUP, auto_engine, default_replicas

__all__ = ["RunCost", "run_cost", "LOOKAHEAD_RATE", "LOOKAHEAD_STEP_SECONDS", "STEP_SECONDS",
           "REPLICA_SECONDS", "LANE_SECONDS", "BYTES_PER_REQUEST", "check_memory"]

# Nominal speeds (see the module docstring for the measurements behind them).
LOOKAHEAD_RATE = 4e6          # look-ahead engine: requests per second ...
LOOKAHEAD_STEP_SECONDS = 25e-6  # ... and per step (a batch of one per lane, at most)
STEP_SECONDS = 100e-6         # events engine: fixed work of a step
REPLICA_SECONDS = 0.8e-6      # events engine: per replica per step
LANE_SECONDS = 8e-9           # events engine: per replica x node per step
SETUP_SECONDS = 0.05          # drawing arrivals, assembling the result
BYTES_PER_REQUEST = 150.0
# an ensemble's stage: sorting a request's ready time, and its ready, completion and
# finish times (float64) and sort index
SORT_SECONDS = 0.1e-6
STAGE_BYTES = 40.0


@dataclass(frozen=True)
class RunCost:
    """Estimated cost of one :func:`qmodel.simulate` run: ``seconds`` of work at the nominal
    speeds, ``nbytes`` of arrays at the peak, the ``engine`` and ``replicas`` it would take."""

    seconds: float
    nbytes: float
    engine: str
    replicas: int


def run_cost(system, arrivals, requests: int, warmup: float = DEFAULT_WARMUP) -> RunCost:
    """Estimated time and memory of ``qmodel.simulate(system, arrivals=arrivals,
    requests=requests)`` with the default replicas and engine (see the module docstring)."""
    cluster = as_cluster(system)
    if cluster.pods:
        return _ensemble_cost(cluster, arrivals, requests, warmup)
    engine = auto_engine(cluster)
    replicas = default_replicas(cluster, arrivals, requests, warmup)
    if engine == "lookahead":
        steps = requests / (replicas * len(cluster.nodes))
        seconds = steps * LOOKAHEAD_STEP_SECONDS + requests / LOOKAHEAD_RATE
    else:
        steps = requests / replicas
        lanes = replicas * len(cluster.nodes)
        seconds = steps * (STEP_SECONDS + REPLICA_SECONDS * replicas + LANE_SECONDS * lanes)
    return RunCost(SETUP_SECONDS + seconds, BYTES_PER_REQUEST * requests, engine, replicas)


def _ensemble_cost(cluster, arrivals, requests: int, warmup: float) -> RunCost:
    """An ensemble runs each stage on the look-ahead engine over all (replica, pod) lanes,
    sorts each stage's ready times, and keeps a few arrays per request and stage
    (:mod:`qmodel.sim.ensemble`)."""
    from .ensemble import _longest_need, _pods_of

    worst, source = _longest_need(cluster, arrivals, warmup)
    replicas = default_replicas(_pods_of(worst, cluster), source, requests, warmup)
    stages = len(cluster.nodes[0].stages)
    steps = requests / (replicas * len(cluster.nodes))
    seconds = stages * (steps * LOOKAHEAD_STEP_SECONDS + requests / LOOKAHEAD_RATE
                        + requests * SORT_SECONDS)
    return RunCost(SETUP_SECONDS + seconds,
                   (BYTES_PER_REQUEST + STAGE_BYTES * stages) * requests, "lookahead",
                   replicas)


def check_memory(nbytes: float, requests: float, what: str = "requests") -> None:
    """A ValueError, before anything is drawn, where a run of ``requests`` would need about
    ``nbytes`` (:func:`run_cost`'s estimate, an upper bound: measured peaks were 1/5 to 1/1.1
    of it) and that is more than the machine has free: the run would otherwise die inside
    NumPy's allocator, or be killed by the system without a word. ``what`` names what sets
    the requests."""
    free = machine.available_memory()
    if free is not None and nbytes > free:
        most = int(requests * free / nbytes)
        raise ValueError(f"{what}={int(requests):,} would need about {nbytes / 2**30:.1f} GiB "
                         f"of memory by qmodel's estimate, more than the "
                         f"{free / 2**30:.1f} GiB free here; simulate at most about {most:,} "
                         f"requests (a p99's confidence interval narrows as one over the "
                         f"square root of the requests)")
