"""From an engine's records to a :class:`~qmodel.latency.SampledLatency`: per-request sojourns
from the event engine's dispatch records, each node's overhead, and the measured window cut
out of every replica (:mod:`qmodel.sim.window` says what counts inside it)."""

from __future__ import annotations

import warnings

import numpy as np

from ..latency import Accuracy, SampledLatency, SimulationEstimate
from .replicas import MAX_SECTIONS
from .window import ShortRunWarning, busy_time, measured_batches

__all__ = ["overheads", "from_events", "assemble"]


def overheads(cluster):
    """Each node's Node.overhead (seconds outside the batcher, added to its requests'
    sojourns), or None where all are 0."""
    overhead = np.array([node.overhead for node in cluster.nodes])
    return overhead if overhead.any() else None


def from_events(bk, rec, times, overhead=None):
    """Per-request sojourns from the event engine's routes and per-node dispatch records;
    ``overhead`` (per node, or None) is added to each request's."""
    nodes = rec["nodes"]
    route = rec["route"]
    times = bk.asnumpy(times)
    replicas = route.shape[0]
    # Requests of each (replica, node) in arrival order are served by that node's batches in
    # dispatch order; a stable sort by node key lines both lists up.
    accepted = route >= 0
    # Small integer keys let NumPy's stable sort use radix sort (16-bit) instead of timsort.
    kdt = np.int16 if replicas * nodes < 2 ** 15 else np.int64
    key = (np.arange(replicas, dtype=kdt)[:, None] * kdt(nodes) + route.astype(kdt))[accepted]
    req_order = np.argsort(key, kind="stable")
    batch_order = np.argsort(rec["pair"].astype(kdt), kind="stable")
    done = np.repeat((rec["start"] + rec["service"])[batch_order], rec["size"][batch_order])
    if done.size != key.size:
        raise AssertionError(f"event engine served {done.size} of {key.size} accepted requests")
    completion = np.empty(key.size)
    completion[req_order] = done
    arrival = times[accepted]
    rejected = np.isfinite(times) & ~accepted
    served = accepted.sum(axis=1)

    def first_arrival():
        # Each node's batches take its requests in order, as lined up above.
        size = rec["size"][batch_order]
        got = np.empty(size.size)
        got[batch_order] = arrival[req_order][np.cumsum(size) - size]
        return got

    sojourn = completion - arrival
    if overhead is not None:
        sojourn += overhead[route[accepted]]
    return {
        "arrival": np.split(arrival, np.cumsum(served)[:-1]),
        "segment_replica": np.arange(replicas), "sojourn": sojourn,
        "rejected_arrival": times[rejected], "rejected": rejected.sum(axis=1),
        "batch_start": rec["start"], "batch_service": rec["service"],
        "batch_size": rec["size"], "batch_replica": rec["pair"] // nodes,
        "batch_first_arrival": first_arrival,
    }


def assemble(out, times, start, counts, types, warmup, engine: str, backend: str,
              requests: int, ask: str):
    """Cut the warm-up and the cool-down, compute the metrics and build the SampledLatency.

    The measured window of each replica and what counts inside it: :mod:`qmodel.sim.window`;
    the window of replica r is its ``counts[r]`` arrivals from index ``start[r]``, less
    their ``warmup`` fraction. ``requests`` and ``ask`` (the fix, from
    :func:`plan_replicas`) go into its warning."""
    replicas = counts.size
    method = f"simulation ({engine} engine, {backend}, {replicas} replicas)"
    rows = np.arange(replicas)
    t_warm = times[rows, start + np.minimum((warmup * counts).astype(np.int64), counts - 1)]
    t_end = times[rows, start + counts - 1]
    span = float(np.sum(t_end - t_warm))
    if span <= 0:
        raise ValueError("the measured window is empty; raise requests or lower warmup")
    # Within a segment, served requests are in arrival order, so the window keeps a slice of
    # each segment: a search per segment instead of a mask over all requests.
    seg_replica = out["segment_replica"]
    lengths = np.array([a.size for a in out["arrival"]], dtype=np.int64)
    # [t_warm, t_end] is [t_warm, next float after t_end): one search for both edges
    edges = np.stack([t_warm, np.nextafter(t_end, np.inf)], axis=1)
    bounds = np.array([np.searchsorted(a, edges[r]) for a, r in zip(out["arrival"], seg_replica)],
                      dtype=np.int64).reshape(-1, 2)
    offsets = np.cumsum(lengths) - lengths
    cut, ends = offsets + bounds[:, 0], offsets + bounds[:, 1]
    sojourn = np.concatenate([out["sojourn"][c:e] for c, e in zip(cut, ends)],
                             dtype=np.float32, casting="same_kind")
    kept = np.bincount(seg_replica, weights=ends - cut, minlength=replicas)
    refused = out["rejected_arrival"]
    rejected = int(np.sum((refused >= np.repeat(t_warm, out["rejected"]))
                          & (refused <= np.repeat(t_end, out["rejected"]))))
    served = sojourn.size

    b_rep = out["batch_replica"]
    b_warm, b_end = t_warm[b_rep], t_end[b_rep]
    counted, after_window = measured_batches(np, out["batch_start"], out["batch_size"],
                                             b_warm, b_end, out["batch_first_arrival"])
    if after_window and served:
        warnings.warn(f"requests={requests} is too short: no batch was dispatched "
                      f"inside the measured windows ({span / replicas:.3g} s each); the batch "
                      "statistics count the batches dispatched after the windows that "
                      f"carried the measured requests: {ask}.", ShortRunWarning, stacklevel=3)
    hist = np.bincount(out["batch_size"][counted], minlength=types.bmax + 1)
    instance_count = sum(types.kinds[t].instances for t in types.type_of_node)
    busy = float(busy_time(np, out["batch_start"], out["batch_service"], b_warm, b_end).sum())
    utilization = busy / (span * instance_count)
    # An instance runs one batch at a time: busy <= instances x window, up to rounding.
    if utilization > 1 + 1e-9:
        raise AssertionError(f"{engine} engine reported {utilization:.6g} of its instances "
                             "busy in the measured window; an instance overlapped two batches")
    utilization = min(1.0, utilization)

    # Contiguous groups of replicas form the sections of the confidence intervals.
    sections = min(replicas, MAX_SECTIONS)
    section_of_replica = rows * sections // replicas
    section_sizes = np.bincount(section_of_replica, weights=kept, minlength=sections)
    result = SampledLatency(
        sojourn, section_sizes.astype(np.int64), model="simulation", method=method,
        accuracy=Accuracy("simulation"),
        throughput=served / span, utilization=utilization,
        batch_size_distribution={k: int(c) for k, c in enumerate(hist) if c},
        rejection_fraction=rejected / max(1, rejected + served))
    half_width = None
    if result.sections >= 2:
        lo, hi = result.ci(0.99)
        half_width = (hi - lo) / 2 / result.p99
    result.accuracy = Accuracy("simulation", simulation=SimulationEstimate(
        requests=served, replicas=replicas, p99_half_width=half_width, engine=engine,
        backend=backend))
    return result
