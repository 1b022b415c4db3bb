"""Reference simulators written with SimPy and Ciw, run next to qmodel by the speed benchmark.

Each peer is a plain event-driven program, one event at a time, written the way a user of that
library would write it. Its speed is what a practitioner would get from the library, and its
answers are an independent check of qmodel's engines (``tests/test_peers.py``).

All functions return sojourn times (seconds, completion minus arrival) of every request in
arrival order; none discards a warm-up, the caller does. The same arguments and seed give the
same result.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np
from scipy import stats

__all__ = ["timed", "simpy_batching_node", "simpy_mm1", "ciw_mm1"]


def timed(fn, *args, **kw):
    """Call ``fn(*args, **kw)`` and measure its wall-clock time.

    Returns
    -------
    (object, float)
        The result and the elapsed seconds (``time.perf_counter``).

    Examples
    --------
    >>> out, seconds = timed(sum, [1, 2, 3])
    >>> out, seconds >= 0
    (6, True)
    """
    start = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - start


def batch_means(x, p, blocks=20, warmup=0.1, level=0.95):
    """Pooled p-quantile of one long run after warm-up, and its batch-means CI half-width.

    The run (in arrival order) is cut into ``blocks`` consecutive blocks after discarding the
    first ``warmup`` fraction; Student's t over the blocks' quantiles gives the half-width.
    """
    x = np.asarray(x)[int(warmup * len(x)):]
    per_block = np.array([np.quantile(b, p) for b in np.array_split(x, blocks)])
    half = stats.t.ppf(0.5 + level / 2, blocks - 1) * per_block.std(ddof=1) / np.sqrt(blocks)
    return float(np.quantile(x, p)), float(half)


def simpy_batching_node(rate, base, per_item, max_batch_size, max_queue_delay, instances,
                        requests, seed, *, times=None):
    """One Triton dynamic-batching node in SimPy: Poisson arrivals, S(k) = base + per_item * k.

    A shared FIFO queue feeds ``instances`` model instances (a ``simpy.Resource``); the
    preferred batch sizes are {max_batch_size}. A batcher process, like Triton's batcher thread,
    waits for a free instance and then applies the rule of docs/triton-semantics.md: with q
    pending requests, the oldest of which arrived at a0,

    - if D > 0 and now >= a0 + D: dispatch min(q, B) now;
    - elif q >= B: dispatch B now;
    - elif D == 0: dispatch all q now;
    - else wait for a0 + D or the next arrival, whichever comes first, and decide again.

    The batch then runs for S(k) on that instance, in a process of its own.

    Parameters
    ----------
    rate : float
        Poisson arrival rate (requests/s); unused when ``times`` is given.
    base, per_item : float
        Deterministic batch service time S(k) = base + per_item * k (seconds).
    max_batch_size : int
        B.
    max_queue_delay : float
        D (seconds); 0 means greedy batching.
    instances : int
        Model instances sharing the queue.
    requests : int
        Number of arrivals; unused when ``times`` is given.
    seed : int
        Seeds ``numpy.random.default_rng`` for the interarrival times.
    times : array_like, optional
        Arrival times (seconds, non-decreasing, >= 0) to replay instead of Poisson arrivals.

    Returns
    -------
    numpy.ndarray
        Sojourn time of every request, in arrival order.
    """
    import simpy

    B, D = int(max_batch_size), float(max_queue_delay)
    if times is None:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, int(requests))
    else:
        gaps = np.diff(np.asarray(times, dtype=float), prepend=0.0)
    env = simpy.Environment()
    pool = simpy.Resource(env, capacity=int(instances))
    pending = deque()                       # indices of queued requests, oldest first
    arrival = np.empty(gaps.size)
    done = np.empty(gaps.size)
    signal = {"arrived": env.event()}       # succeeds at the next arrival, then is replaced

    def source():
        for i, gap in enumerate(gaps.tolist()):
            yield env.timeout(gap)
            arrival[i] = env.now
            pending.append(i)
            signal["arrived"].succeed()
            signal["arrived"] = env.event()

    def execute(batch, slot):
        yield env.timeout(base + per_item * len(batch))
        done[batch] = env.now
        pool.release(slot)

    def batcher():
        while True:
            slot = pool.request()
            yield slot                      # an instance is free
            while True:
                if not pending:
                    yield signal["arrived"]
                    continue
                q, deadline = len(pending), arrival[pending[0]] + D
                if D > 0 and env.now >= deadline:
                    k = min(q, B)
                    break
                if q >= B:
                    k = B
                    break
                if D == 0:
                    k = q
                    break
                timer = env.timeout(deadline - env.now)
                fired = yield timer | signal["arrived"]
                if timer in fired:          # the oldest request's delay ran out
                    k = min(len(pending), B)
                    break
            batch = [pending.popleft() for _ in range(k)]
            env.process(execute(batch, slot))

    env.process(source())
    env.process(batcher())
    env.run()
    return done - arrival


def simpy_mm1(rate, service_rate, requests, seed):
    """M/M/1 FIFO queue in SimPy: one customer process per request, a ``simpy.Resource`` server.

    Parameters
    ----------
    rate, service_rate : float
        Arrival rate lambda and service rate mu (per second), lambda < mu.
    requests : int
        Number of arrivals, all served to completion.
    seed : int
        Seeds ``numpy.random.default_rng`` for interarrival and service times.

    Returns
    -------
    numpy.ndarray
        Sojourn time of every request, in arrival order.
    """
    import simpy

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, int(requests)).tolist()
    work = rng.exponential(1.0 / service_rate, int(requests)).tolist()
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    arrival = np.empty(len(gaps))
    done = np.empty(len(gaps))

    def customer(i):
        arrival[i] = env.now
        with server.request() as req:
            yield req
            yield env.timeout(work[i])
        done[i] = env.now

    def source():
        for i, gap in enumerate(gaps):
            yield env.timeout(gap)
            env.process(customer(i))

    env.process(source())
    env.run()
    return done - arrival


def ciw_mm1(rate, service_rate, requests, seed):
    """M/M/1 FIFO queue in Ciw 3, run until ``requests`` customers have completed service.

    Ciw draws from the global ``random`` module and ``ciw.rng``; ``ciw.seed(seed)`` sets both,
    so calling this reseeds them.

    Parameters
    ----------
    rate, service_rate : float
        Arrival rate lambda and service rate mu (per second), lambda < mu.
    requests : int
        Number of completed customers (with one FIFO server, the first ``requests`` arrivals).
    seed : int
        Passed to ``ciw.seed``.

    Returns
    -------
    numpy.ndarray
        Waiting plus service time of every completed customer, in arrival order.
    """
    import ciw

    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate)],
        service_distributions=[ciw.dists.Exponential(service_rate)],
        number_of_servers=[1])
    ciw.seed(seed)
    sim = ciw.Simulation(network)
    sim.simulate_until_max_customers(int(requests), method="Complete")
    records = sorted(sim.get_all_records(only=["service"]), key=lambda r: r.id_number)
    return np.array([r.waiting_time + r.service_time for r in records])
