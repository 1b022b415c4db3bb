"""Triton's prefetching batcher (``Node.prefetch``) on hand-made traces.

Times are in milliseconds in the comments; service is deterministic, so with prefetch 0 or 1
every number is exact. The rule: docs/triton-semantics.md, "Prefetch".
"""

from dataclasses import replace

import numpy as np
import pytest

import qmodel as qm

ms = 1e-3


def node(base=5.0, **kw):
    return qm.Node(qm.ServiceTime.affine(base * ms), **kw)


def run(system, times_ms, seed=0):
    return qm.replay(system, np.asarray(times_ms, dtype=float) * ms, seed=seed)


def test_a_batch_formed_while_the_instance_runs_leaves_as_formed():
    # B=8, D=2, S=5. Batch 1 = {0, 1} forms at 2 and runs 2-7. Batch 2 opens at that pickup
    # (2); its oldest queued at 2.5, so it forms at 4.5 with {2.5, 3, 4} and waits for the
    # instance (7). The request of 6.5 came after the forming: it waits for batch 3, formed at
    # 8.5 (its own delay), started at 12 when the instance frees.
    t = [0, 1, 2.5, 3, 4, 6.5]
    frozen = run(node(max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.0), t)
    assert frozen.batch_size.tolist() == [2, 3, 1]
    assert frozen.batch_start == pytest.approx([2 * ms, 7 * ms, 12 * ms], abs=1e-12)
    assert frozen.sojourn[-1] == pytest.approx(10.5 * ms, abs=1e-12)
    # prefetch 1: batch 2 takes in the request of 6.5 before it starts, as when the batch is
    # formed at the instance's freeing
    joined = run(node(max_batch_size=8, max_queue_delay=2 * ms, prefetch=1.0), t)
    assert joined.batch_size.tolist() == [2, 4]
    at_free = run(node(max_batch_size=8, max_queue_delay=2 * ms), t)
    assert joined.sojourn == pytest.approx(at_free.sojourn, abs=1e-12)


def test_a_full_batch_lets_the_batcher_open_the_next_at_once():
    # B=2, D=2, S=5. {0} forms at 2 and runs 2-7. {3, 3.1} is full at 3.1: the batcher opens
    # the next batch then, not at its pickup (7). So {3.5} forms at 5.5, its delay, and the
    # request of 6 misses it; were the next batch opened at the pickup (7), both would go.
    t = [0, 3, 3.1, 3.5, 6]
    r = run(node(max_batch_size=2, max_queue_delay=2 * ms, prefetch=0.0), t)
    assert r.batch_size.tolist() == [1, 2, 1, 1]
    assert r.batch_start == pytest.approx([2 * ms, 7 * ms, 12 * ms, 17 * ms], abs=1e-12)


@pytest.mark.parametrize("late, sizes", [([4, 4.1, 4.2, 5], [1, 8]),
                                         ([4, 4.1, 4.2], [1, 4, 3])])
def test_a_preferred_batch_grows_only_to_a_larger_preferred_size(late, sizes):
    # B=16, P={4, 8}, D=2, S=5. {0} runs 2-7. Four requests from 3 to 3.3 reach the
    # preferred 4 at 3.3: that batch forms then and waits for the instance (7). By 7 it
    # grows to 8 when four more queued; with three it stays at 4 (7 is no preferred size).
    t = [0, 3, 3.1, 3.2, 3.3] + late
    r = run(node(max_batch_size=16, max_queue_delay=2 * ms, preferred_batch_sizes=(4, 8),
                 prefetch=1.0), t)
    assert r.batch_size.tolist() == sizes


@pytest.mark.parametrize("engine", ["lookahead", "compiled"])
@pytest.mark.parametrize("batch, later, sizes, starts", [
    # {2.1-2.4} reaches the preferred 4 at 2.4, full: the batcher opens the next batch at
    # once. {3, 3.1} forms at its delay (5). When the instance frees (7) the oldest of it has
    # waited 4 ms > D: it is merged in, 4 + 2 <= B = 8.
    (8, [3.0, 3.1], [1, 6], [2, 7]),
    # the same with B = 6 and four late requests: they form a full 4 at 3.3, which does not
    # fit beside the first 4 (8 > 6) and runs on its own
    (6, [3.0, 3.1, 3.2, 3.3], [1, 4, 4], [2, 7, 12]),
    # late requests of 5.5 and 5.6 form at 7.5, after the instance freed: no merge
    (8, [5.5, 5.6], [1, 4, 2], [2, 7, 12]),
])
def test_batches_formed_behind_a_full_one_merge_when_an_instance_takes_it(engine, batch, later,
                                                                         sizes, starts):
    # B, P={4}, D=2, S=5; {0} forms at 2 and runs 2-7; prefetch 0 draws nothing
    t = [0, 2.1, 2.2, 2.3, 2.4] + later
    n = node(max_batch_size=batch, max_queue_delay=2 * ms, preferred_batch_sizes=(4,),
             prefetch=0.0)
    r = qm.replay(n, np.asarray(t) * ms, engine=engine)
    assert r.batch_size.tolist() == sizes
    assert r.batch_start == pytest.approx(np.asarray(starts) * ms, abs=1e-12)


@pytest.mark.parametrize("engine", ["lookahead", "compiled"])
def test_at_most_two_batches_per_instance_wait_formed(engine):
    # B=16, P={2}, D=1, S=10; one instance, requests every 0.1 ms. {0, 0.1} runs at 0.1.
    # {0.2, 0.3} forms full at 0.3 and {0.4, 0.5} behind it at 0.5: two formed batches wait,
    # the most for one instance, so the batcher forms no more. At 10.1 the instance takes
    # the first and merges the second (its oldest waited past the delay); the rest form only
    # then, past their delay, as one batch of 12 (review: without the limit all 16 merged).
    n = node(base=10.0, max_batch_size=16, max_queue_delay=1 * ms, preferred_batch_sizes=(2,),
             prefetch=0.0)
    r = qm.replay(n, np.arange(18) * 0.1 * ms, engine=engine)
    assert r.batch_size.tolist() == [2, 4, 12]
    assert r.batch_start == pytest.approx([0.1 * ms, 10.1 * ms, 20.1 * ms], abs=1e-12)


def test_merging_lanes_simulate_without_warnings():
    """Review: finished lanes compared inf - inf when merging (a RuntimeWarning, an error
    under this suite's settings)."""
    n = qm.Node(qm.ServiceTime.affine(2 * ms), max_batch_size=8, max_queue_delay=1 * ms,
                preferred_batch_sizes=(4,), prefetch=0.0)
    r = qm.simulate(n, rate=1500, requests=20_000, seed=1, engine="lookahead")
    assert np.isfinite(r.p99)


def test_prefetch_one_is_the_rule_at_the_instance_freeing_for_one_instance():
    arrivals = np.cumsum(np.random.default_rng(3).exponential(1 / 600, 5000))
    kw = dict(max_batch_size=8, max_queue_delay=2 * ms)
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    a = qm.replay(qm.Node(service, prefetch=1.0, **kw), arrivals, seed=1)
    b = qm.replay(qm.Node(service, **kw), arrivals, seed=1)
    assert a.batch_size.tolist() == b.batch_size.tolist()
    assert a.sojourn == pytest.approx(b.sojourn, abs=1e-12)


def test_without_a_delay_prefetch_changes_nothing():
    # Triton's batcher wakes on every arrival when there is no delay: the batch it prefetched
    # keeps growing until an instance takes it, which is the rule at the freeing.
    arrivals = np.cumsum(np.random.default_rng(4).exponential(1 / 900, 3000))
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    a = qm.replay(qm.Node(service, max_batch_size=8, prefetch=0.0), arrivals)
    b = qm.replay(qm.Node(service, max_batch_size=8), arrivals)
    assert a.sojourn == pytest.approx(b.sojourn, abs=1e-12)


def test_batches_grow_with_the_join_probability():
    # Poisson load on one instance, the same arrivals: the more often a batch formed ahead
    # takes in later requests, the larger the batches.
    arrivals = np.cumsum(np.random.default_rng(5).exponential(1 / 700, 60000))
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    grown = {}
    for p in (0.0, 0.3, 1.0):
        r = qm.replay(qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=p),
                      arrivals, seed=7)
        grown[p] = r.batch_size.mean()
    assert grown[0.0] < grown[0.3] < grown[1.0]


def test_prefetch_lengthens_the_tail_and_predict_simulates_it():
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    plain = qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms)
    prefetching = qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.3)
    model = qm.predict(plain, rate=600)
    fallback = qm.predict(prefetching, rate=600)
    assert fallback.accuracy.is_fallback
    assert "prefetching batcher" in fallback.accuracy.fallback_reason
    with pytest.raises(NotImplementedError, match="prefetching batcher"):
        qm.predict(prefetching, rate=600, fallback="raise")
    # batches formed ahead and left as formed keep later requests waiting longer
    assert fallback.quantile(0.99) > 1.05 * model.quantile(0.99)


def test_prefetch_changes_nothing_at_max_batch_size_one():
    # a batch of one is full when formed: nothing can join it, and batches leave in order
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    plain = qm.Node(service, max_batch_size=1, max_queue_delay=2 * ms, instances=2)
    node = replace(plain, prefetch=0.3)
    assert not node.prefetches
    answer = qm.predict(node, rate=600, fallback="raise")
    assert answer.p99 == qm.predict(plain, rate=600, fallback="raise").p99
    assert answer.accuracy.exactness in ("exact", "numerical")        # not a simulation


def test_sizing_ranks_a_prefetching_node_to_the_error_measured_against_it():
    from qmodel.sizing.trust import is_extrapolated, model_answer, trusted_quantile
    service = qm.ServiceTime.affine(2 * ms, 0.5 * ms)
    node = qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.9)
    ranked = model_answer(node, 600.0)
    plain = qm.predict(replace(node, prefetch=None), rate=600, fallback="raise")
    assert ranked.p99 == plain.p99                    # the at-free node's numbers ...
    # ... stated to the error measured against the prefetching node, not the at-free one's
    assert [m.family for m in ranked.accuracy.measured] == ["prefetch_one_instance"]
    assert "prefetch_ranked_without" in ranked.accuracy.approximation_keys
    assert ranked.accuracy.exactness == "approximation" and not is_extrapolated(ranked)
    low, high = ranked.accuracy.p99_bounds(ranked.p99)
    sim = qm.simulate(node, rate=600, requests=400_000, seed=5)
    s_low, s_high = sim.ci(0.99, level=0.99)
    assert low <= s_high and s_low <= high
    # the family ran up to 20% low: the search ranks by p99 / (1 - 0.2)
    assert trusted_quantile(ranked, 0.99) > 1.2 * ranked.p99
    # prefetch 0.3 at load 0.45: next to nodes where the at-free model ran more than 20% low
    near_miss = model_answer(replace(node, prefetch=0.3), 600.0)
    assert is_extrapolated(near_miss)
    assert "'prefetch_one_instance' missed" in near_miss.accuracy.approximation(
        "outside_measured_domain").text
    # two instances: the other family; renewal arrivals: outside (measured under Poisson)
    two = replace(node, instances=2, prefetch=0.3)
    assert [m.family for m in model_answer(two, 1200.0).accuracy.measured] == \
        ["prefetch_several_instances"]
    assert is_extrapolated(model_answer(two, 1200.0, scv=0.5))
    # behind a router no family measured it: the at-free nodes' own families
    cluster = model_answer(qm.Cluster(two, count=2, router="round_robin"), 2400.0)
    assert all(not m.family.startswith("prefetch") for m in cluster.accuracy.measured)


def test_prefetch_is_checked_where_it_is_described():
    service = qm.ServiceTime.affine(2 * ms)
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="Node.prefetch"):
            qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=bad)
    with pytest.raises(ValueError, match="max_queue_size=0"):
        qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.5,
                max_queue_size=10)
    n = qm.Node(service, max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.5)
    assert "prefetch=0.50" in n.describe() and "S(k)" not in n.describe(service=False)
    assert n.prefetches
    assert not replace(n, max_queue_delay=0.0).prefetches                   # no delay
    assert not replace(n, max_batch_size=1).prefetches                      # batches of one


def test_the_event_engine_refuses_prefetching_nodes_and_names_the_engine_that_runs_them():
    n = node(max_batch_size=8, max_queue_delay=2 * ms, prefetch=0.5)
    cluster = qm.Cluster([n, n], router="least_outstanding")
    with pytest.raises(ValueError, match="does not run Node.prefetch.*compiled engine"):
        qm.simulate(cluster, rate=100, requests=2000, seed=1, engine="events")


@pytest.mark.parametrize("batch, preferred, join, instances", [
    (8, (3, 6), 1.0, 1), (8, (3, 6), 0.5, 1), (8, (3, 6), 0.0, 1), (8, (4,), 1.0, 1),
    (12, (5,), 0.0, 4), (10, (3,), 0.3, 3), (16, (2, 4), 1.0, 2), (16, (7,), 0.7, 4)])
def test_an_overloaded_prefetching_node_drains_at_its_capacity(batch, preferred, join,
                                                              instances):
    """Review of the prefetch change: Node.capacity against the rule itself, as the rate at
    which an overloaded node (twice its capacity) drains. Once 2c formed batches wait, the
    batcher forms the next from requests past their delay: batches of B. (Without that cap
    batches formed behind full ones merged only up to a multiple of the preferred size: 5 +
    5 of B 12 on four instances drained 6.7% below the capacity; before merging, prefetch 1
    stopped at the largest preferred size.)"""
    service = qm.ServiceTime.affine(2 * ms, 0.3 * ms)
    n = qm.Node(service, max_batch_size=batch, max_queue_delay=1 * ms,
                preferred_batch_sizes=preferred, prefetch=join, instances=instances)
    assert n.saturated_batch_size == batch
    arrivals = np.cumsum(np.random.default_rng(1).exponential(1 / (2 * n.capacity), 20_000))
    r = qm.replay(n, arrivals, engine="lookahead")
    drained = arrivals.size / float(np.max(arrivals + r.sojourn))
    assert drained == pytest.approx(n.capacity, rel=0.01), (drained, n.capacity)


def test_an_overloaded_prefetching_cluster_is_refused():
    service = qm.ServiceTime.affine(2 * ms, 0.3 * ms)
    cluster = qm.Cluster(qm.Node(service, max_batch_size=8, max_queue_delay=1 * ms,
                                 preferred_batch_sizes=(3, 6), prefetch=1.0),
                         count=2, router="least_outstanding")
    with pytest.raises(qm.UnstableError):
        qm.predict(cluster, rate=1.02 * cluster.capacity)
