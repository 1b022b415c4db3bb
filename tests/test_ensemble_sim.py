"""Simulating an Ensemble (issue 23, item 2): the stages coupled by their completion times."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import qmodel as qm
from qmodel.checks import UnstableError
from qmodel.sim.backend import get_backend
from qmodel.sim.ensemble import run_stages
from qmodel.sim.lookahead import run_lookahead
from qmodel.sim.nodetypes import NodeTypes

JITTERY = qm.Node(qm.ServiceTime.affine(1e-3, 2e-4, jitter=("lognormal", 0.3)),
                  max_batch_size=8, max_queue_delay=1e-3, instances=2)


def _quiet_simulate(system, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qm.sim.window.ShortRunWarning)
        return qm.simulate(system, **kw)


def test_a_one_stage_ensemble_is_the_node():
    """Same seed, same draws: the samples, utilization and batch sizes agree exactly."""
    for arrivals in (None, qm.Trace(np.cumsum(np.random.default_rng(4).exponential(1 / 5e3,
                                                                                  60_000)))):
        kw = {"arrivals": arrivals} if arrivals else {"rate": 5000.0, "requests": 300_000}
        node = _quiet_simulate(JITTERY, seed=3, **kw)
        ens = _quiet_simulate(qm.Ensemble({"m": JITTERY}), seed=3, **kw)
        np.testing.assert_array_equal(ens.samples, node.samples)
        assert ens.utilization == node.utilization
        assert ens.batch_size_distribution == node.batch_size_distribution
        assert ens.throughput == node.throughput
        assert list(ens.stages) == ["m"]
        np.testing.assert_array_equal(ens.stages["m"].samples, node.samples)


def _tandem(arrivals, times):
    """The tandem recursion of single deterministic servers, computed directly."""
    dep = np.array(arrivals, float)
    for stage in times:
        last, out = -np.inf, np.empty_like(dep)
        for i, ready in enumerate(dep):
            last = out[i] = max(ready, last) + stage
        dep = out
    return dep - arrivals


def test_a_deterministic_chain_is_the_tandem_customer_by_customer():
    """Bursty arrivals through three deterministic B = 1 stages: every request's sojourn is
    the tandem recursion's, which is the bottleneck queue's plus the other stages' times
    (derivation 'tandem', Friedman 1965)."""
    rng = np.random.default_rng(10)
    times = [0.4e-3, 1.1e-3, 0.7e-3]
    ens = qm.Ensemble({f"s{j}": qm.Node(qm.ServiceTime.affine(d)) for j, d in enumerate(times)},
                      [("s0", "s1"), ("s1", "s2")])
    arrivals = np.cumsum(rng.lognormal(-7.5, 1.2, (2, 3000)), axis=1)
    out = run_stages(get_backend("numpy", 0), ens, arrivals, np.array([3000, 3000]))
    for lane in range(2):
        sojourn = out["s2"]["finish"][lane] - arrivals[lane]
        np.testing.assert_allclose(sojourn, _tandem(arrivals[lane], times), atol=1e-12)
        np.testing.assert_allclose(sojourn, _tandem(arrivals[lane], [1.1e-3]) + 1.1e-3,
                                   atol=1e-12)


def test_a_deterministic_chain_matches_the_tandem_derivation(tandem):
    """Poisson arrivals: p50, p95, p99 of the simulation against the derivation's exact cdf,
    within the simulation's 99% confidence interval."""
    ens, rate, exact = tandem
    sim = qm.simulate(ens, rate=rate, requests=2_000_000, seed=1)
    for p in (0.5, 0.95, 0.99):
        lo, hi = sim.ci(p, 0.99)
        assert lo <= exact(p) <= hi, (p, exact(p), lo, hi)
    # the faster stages never queue behind the bottleneck: their sojourn is their service
    assert sim.stages["s1"].p99 == pytest.approx(1e-3, rel=1e-6)
    assert sim.stages["s2"].p99 == pytest.approx(0.5e-3, rel=1e-5)
    assert sim.stages["s0"].utilization == pytest.approx(rate * 2e-3, rel=0.01)


def test_a_fan_in_is_the_maximum_of_its_branches_customer_by_customer():
    """Two branches on the same requests (no edge between them), the request done when both
    are: the end-to-end time is, request by request, the larger of the two branches' sojourns
    replayed alone on the same arrivals."""
    a = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)), max_batch_size=8,
                max_queue_delay=0.5e-3)
    b = qm.Node(qm.ServiceTime.affine(0.6e-3, 0.3e-3), max_batch_size=4, instances=2)
    ens = qm.Ensemble({"a": a, "b": b})
    arrivals = np.cumsum(np.random.default_rng(2).exponential(1 / 3000, 20_000))[None, :]
    out = run_stages(get_backend("numpy", 5), ens, arrivals, np.array([20_000]))
    # the same service draws: stage a is run first, then b, from one generator
    bk = get_backend("numpy", 5)
    alone = {name: _alone(bk, node, arrivals) for name, node in (("a", a), ("b", b))}
    end = np.maximum(out["a"]["finish"], out["b"]["finish"]) - arrivals
    np.testing.assert_allclose(end, np.maximum(alone["a"], alone["b"]), atol=1e-12)


def _alone(bk, node, arrivals):
    """Each row of ``arrivals`` through ``node`` alone, on the node's look-ahead engine."""
    types = NodeTypes(bk, [node])
    lanes, n = arrivals.shape
    t = np.concatenate([arrivals, np.full((lanes, 2 * types.bmax + 2), np.inf)], axis=1)
    rec = run_lookahead(bk, types, t, np.full(lanes, n), np.zeros(lanes, dtype=np.int64))
    done = np.repeat((rec["start"] + rec["service"]).T.ravel(), rec["size"].T.ravel())
    return done.reshape(lanes, n) - arrivals


def test_a_fan_in_matches_the_maximum_of_simulated_branch_samples():
    """A join stage after two branches: the simulated p99 against the maximum taken directly,
    request by request, over the branches replayed alone on independent Poisson streams,
    plus the join's own service (deterministic, never queueing at this load)."""
    a = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)), max_batch_size=8,
                max_queue_delay=0.5e-3)
    b = qm.Node(qm.ServiceTime.affine(0.6e-3, 0.3e-3), max_batch_size=4, instances=2)
    join = qm.Node(qm.ServiceTime.affine(1e-6), max_batch_size=16)   # takes clumps whole
    ens = qm.Ensemble({"a": a, "b": b, "join": join}, [("a", "join"), ("b", "join")])
    rate = 3000.0
    sim = qm.simulate(ens, rate=rate, requests=1_600_000, seed=7)
    bk = get_backend("numpy", 8)
    arrivals = np.cumsum(bk.rng.exponential(1 / rate, (16, 100_000)), axis=1)
    both = np.maximum(_alone(bk, a, arrivals), _alone(bk, b, arrivals))
    # drop each stream's start (empty queues) and its end (no successors)
    direct = np.quantile(both[:, 10_000:-1_000], 0.99, axis=1) + 1e-6
    half = stats.t.ppf(0.995, direct.size - 1) * direct.std(ddof=1) / math.sqrt(direct.size)
    lo, hi = sim.ci(0.99, 0.99)
    # the two 99% intervals overlap: the estimates differ by less than their half-widths
    assert abs(sim.p99 - direct.mean()) <= (hi - lo) / 2 + half, (sim.p99, direct.mean())
    assert sim.stages["join"].p99 < 3e-6


def test_stage_results_carry_batches_and_utilization():
    ens = qm.Ensemble({"a": JITTERY, "b": qm.Node(qm.ServiceTime.affine(0.2e-3, 0.05e-3),
                                                   max_batch_size=16)}, [("a", "b")])
    sim = _quiet_simulate(ens, rate=6000.0, requests=400_000, seed=2)
    a, b = sim.stages["a"], sim.stages["b"]
    # stage b receives a's batches whole: it never runs a batch smaller than... it may merge
    # two, but at this load mostly runs what a released, so its mean batch is at least a's
    mean = lambda r: sum(k * p for k, p in r.batch_size_distribution.items())
    assert mean(b) >= mean(a) - 0.05
    assert a.utilization == pytest.approx(6000 / JITTERY.instances
                                          * (1e-3 + 2e-4 * mean(a)) / mean(a), rel=0.03)
    assert sim.p99 <= a.p99 + b.p99 + 1e-9
    assert sim.p50 >= max(a.p50, b.p50)


def test_ensemble_errors_name_the_stage():
    slow = qm.Node(qm.ServiceTime.affine(2e-3))
    ens = qm.Ensemble({"fast": JITTERY, "slow": slow}, [("fast", "slow")])
    with pytest.raises(UnstableError, match="ensemble stage 'slow'"):
        qm.simulate(ens, rate=600.0, requests=10_000)
    with pytest.raises(ValueError, match="stage 'q' has max_queue_size=4"):
        qm.Ensemble({"q": qm.Node(qm.ServiceTime.affine(1e-3), max_queue_size=4)})
    with pytest.raises(ValueError, match="engine='events' does not run an Ensemble"):
        qm.simulate(ens, rate=100.0, requests=10_000, engine="events")


def test_pods_cut_every_stage_by_arrival_at_the_ensemble():
    """Two pods behind round robin: every stage measures the requests that arrived in the
    end-to-end window, no more, no fewer (its window was cut by the stage's own ready times,
    so a downstream stage counted 179,949 of 179,982 here)."""
    s = qm.ServiceTime.affine(1e-3, 2e-4, jitter=("lognormal", 0.5))
    ens = qm.Ensemble({"a": qm.Node(s, max_batch_size=8, max_queue_delay=1e-3, instances=2),
                       "b": qm.Node(qm.ServiceTime.affine(2e-3, 1e-4), max_batch_size=4,
                                    instances=2)}, [("a", "b")])
    pods = qm.Cluster(ens, count=2, router="round_robin")
    r = _quiet_simulate(pods, rate=0.7 * pods.capacity, requests=200_000, seed=5)
    assert {name: stage.requests for name, stage in r.stages.items()} == \
        {"a": r.requests, "b": r.requests}


def test_each_batch_first_request_is_found_in_its_own_lane():
    """The batch statistics' first-arrival times, lane by lane, against a loop over the
    batches: with several lanes per replica (pods) they were read from the replica's row,
    wrong for 14,696 of 15,688 batches of a two-pod run."""
    from qmodel.sim.ensemble import _requests_record

    rng = np.random.default_rng(8)
    lanes, width = 4, 300
    arrival = np.cumsum(rng.exponential(1 / 3e3, (lanes, width)), axis=1)
    totals = np.full(lanes, width)
    ens = qm.Ensemble({"a": JITTERY, "b": qm.Node(qm.ServiceTime.affine(
        1e-3, 1e-4, jitter=("lognormal", 0.5)), max_batch_size=4, instances=3)}, [("a", "b")])
    out = run_stages(get_backend("numpy", 1), ens, arrival, totals)
    lane_replica = np.arange(lanes) // 2            # two pods per replica
    for name in ("a", "b"):
        stage = out[name]
        rec = _requests_record(arrival, stage["finish"] - stage["ready"], totals, lane_replica,
                               2, stage["record"], stage["order"])
        got = rec["batch_first_arrival"]()
        sizes = stage["record"]["size"]
        checked = 0
        for lane in range(lanes):
            place = 0
            for step in range(sizes.shape[0]):
                k = int(sizes[step, lane])
                if k == 0:
                    assert got[step, lane] == np.inf
                    continue
                first = stage["order"][lane, place]
                assert got[step, lane] == arrival[lane, first]
                place += k
                checked += 1
            assert place == width
        assert checked > 100
