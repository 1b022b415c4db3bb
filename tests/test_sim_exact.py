"""The simulator against exact queueing results, within its own confidence intervals.

A max_batch_size=1 node is a classical multi-server queue: exponential service gives M/M/c
(Erlang C), deterministic service gives M/D/c (Erlang 1909 for c=1; Crommelin 1932 / Franx 2001
for c>1). Each check asserts that the exact percentile lies inside the simulator's 99%
confidence interval AND that the interval is narrow (so the check can fail). Seeds are fixed.
"""

import pytest

import qmodel as qm
from qmodel.theory import classical

LEVEL = 0.99
PERCENTILES = (0.5, 0.95, 0.99)


def sim_node(service, servers):
    return qm.Node(service, max_batch_size=1, instances=servers)


def assert_inside(sim, exact, p, width):
    lo, hi = sim.ci(p, level=LEVEL)
    q = exact.quantile(p)
    assert lo <= q <= hi, f"p{p * 100:g}: exact {q:.6g} outside simulated CI [{lo:.6g}, {hi:.6g}]"
    assert (hi - lo) / 2 < width * q, f"p{p * 100:g}: CI half-width {(hi - lo) / 2 / q:.2%} " \
                                      f"too wide to test anything"


@pytest.mark.parametrize("servers, rho, seed", [(1, 0.8, 1), (3, 0.7, 2), (8, 0.9, 3)])
def test_mmc(servers, rho, seed):
    mu = 1000.0
    rate = rho * servers * mu
    sim = qm.simulate(sim_node(qm.ServiceTime.affine(1 / mu, jitter="exponential"), servers),
                      rate=rate, requests=4_000_000, seed=seed)
    exact = classical.mmc(rate, mu, servers)
    for p in PERCENTILES:
        assert_inside(sim, exact, p, width=0.05)
    assert sim.utilization == pytest.approx(rho, rel=0.01)


@pytest.mark.parametrize("rho, seed", [(0.5, 4), (0.8, 5)])
def test_md1(rho, seed):
    d = 1e-3
    rate = rho / d
    sim = qm.simulate(sim_node(qm.ServiceTime.affine(d), 1), rate=rate, requests=4_000_000,
                      seed=seed)
    exact = classical.md1(rate, d)
    for p in (0.95, 0.99):         # p50 at rho 0.5 sits on the atom at D, checked below
        assert_inside(sim, exact, p, width=0.05)
    # The atom: a fraction 1 - rho finds the server idle and leaves after exactly D.
    assert sim.cdf(d * (1 + 1e-6)) == pytest.approx(1 - rho, abs=0.005)


@pytest.mark.parametrize("servers, rho, seed", [(2, 0.8, 6), (4, 0.9, 7)])
def test_mdc(servers, rho, seed):
    d = 1e-3
    rate = rho * servers / d
    sim = qm.simulate(sim_node(qm.ServiceTime.affine(d), servers), rate=rate,
                      requests=4_000_000, seed=seed)
    exact = classical.mdc(rate, d, servers)
    for p in (0.95, 0.99):
        assert_inside(sim, exact, p, width=0.05)


def test_published_md1_oracle_through_the_simulator():
    # theory-notes.md: M/D/1, D = 1, rho = 0.8: waiting-time p99 = 10.35589, so the sojourn
    # p99 is 11.35589 service times. Exercised at D = 1 ms.
    sim = qm.simulate(sim_node(qm.ServiceTime.affine(1e-3), 1), rate=800.0,
                      requests=4_000_000, seed=8)
    lo, hi = sim.ci(0.99, level=LEVEL)
    assert lo <= 11.35589e-3 <= hi


# --- properties ---------------------------------------------------------------------------------
SVC = qm.ServiceTime.affine(2.4e-3, 0.54e-3, jitter=("lognormal", 0.2))


@pytest.mark.parametrize("knobs", [dict(max_batch_size=8), dict(max_batch_size=8,
                                   max_queue_delay=2e-3, preferred_batch_sizes=(4,),
                                   instances=2)])
def test_percentiles_are_ordered(knobs):
    r = qm.simulate(qm.Node(SVC, **knobs), rate=600.0, requests=200_000, seed=9)
    assert r.p50 <= r.p95 <= r.p99 <= r.quantile(0.999)
    assert r.cdf(r.p99) >= 0.99 and r.cdf(r.p50) >= 0.5
    assert r.sf(r.p99) == pytest.approx(1 - r.cdf(r.p99))


def test_greedy_batching_percentiles_grow_with_the_rate():
    node = qm.Node(SVC, max_batch_size=8)
    p99 = []
    for load in (0.3, 0.6, 0.9):
        r = qm.simulate(node, rate=load * node.capacity, requests=400_000, seed=10)
        p99.append(r.ci(0.99, level=LEVEL))
    for (lo_a, hi_a), (lo_b, hi_b) in zip(p99, p99[1:]):
        assert hi_a < lo_b


def test_a_delay_can_make_latency_fall_as_the_rate_rises():
    # Triton's behaviour, not a bug: with a 5 ms delay and B=4 a light load waits out the delay,
    # while a heavier load fills batches of 4 sooner.
    node = qm.Node(qm.ServiceTime.affine(1e-3, 0.1e-3), max_batch_size=4,
                   max_queue_delay=5e-3)
    light = qm.simulate(node, rate=100.0, requests=100_000, seed=11)
    heavy = qm.simulate(node, rate=2000.0, requests=100_000, seed=11)
    assert heavy.p50 < light.p50
    assert light.p50 == pytest.approx(5e-3 + 1.1e-3, rel=0.05)


def test_throughput_utilization_and_batch_sizes_are_consistent():
    node = qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3, instances=2)
    rate = 0.7 * node.capacity
    r = qm.simulate(node, rate=rate, requests=400_000, seed=12)
    assert r.throughput == pytest.approx(rate, rel=0.01)
    dist = r.batch_size_distribution
    assert sum(dist.values()) == pytest.approx(1.0)
    assert set(dist) <= set(range(1, 9))
    # Work conservation: busy fraction = batches per second x mean batch time / instances.
    batches_per_s = r.throughput / r.mean_batch_size
    mean_service = sum(p * float(SVC.mean(k)) for k, p in dist.items())
    assert r.utilization == pytest.approx(batches_per_s * mean_service / 2, rel=0.02)
