"""The bunched-instance model: which nodes it answers, what it says, and the simulator."""

from dataclasses import replace

import pytest

import qmodel as qm
from qmodel.theory.batch import batch_node
from qmodel.theory.batch.bunched import (BUNCH_ARRIVALS, BUNCH_ITEM_WORK, FAMILY, bunched_node,
                                         bunches, instance_batches)
from qmodel.theory.measured import measured_table

# Flat deterministic service (S(16) only 0.8% above S(1)), four instances at half capacity:
# 7.9 arrivals per instance in S(1), per-item work 0.016 of an instance.
FLAT = qm.Node(qm.ServiceTime.affine(2e-3, 1e-6), max_batch_size=16, instances=4)
HALF = 0.5 * FLAT.capacity


def test_which_nodes_bunch():
    assert bunches(FLAT, HALF)
    # each condition alone turns it off
    assert not bunches(replace(FLAT, instances=1), HALF / 4)
    assert not bunches(replace(FLAT, max_queue_delay=1e-3), HALF)
    assert not bunches(replace(FLAT, preferred_batch_sizes=(8, 16)), HALF)
    assert not bunches(replace(FLAT, max_queue_size=64), HALF)
    assert not bunches(FLAT, HALF, arrival_scv=0.5)
    jittery = replace(FLAT, service=qm.ServiceTime.affine(2e-3, 1e-6, jitter=("lognormal", 0.1)))
    assert not bunches(jittery, HALF)
    # the two thresholds, each on its boundary
    s1 = float(FLAT.service.mean(1))
    assert bunches(FLAT, BUNCH_ARRIVALS * 4 / s1)
    assert not bunches(FLAT, 0.999 * BUNCH_ARRIVALS * 4 / s1)
    per_item = 1e-4
    steep = replace(FLAT, service=qm.ServiceTime.affine(2e-3, per_item))
    assert bunches(steep, BUNCH_ITEM_WORK / per_item)
    assert not bunches(steep, 1.001 * BUNCH_ITEM_WORK / per_item)


def test_the_wide_instance_and_its_batches():
    wide = bunched_node(FLAT)
    assert (wide.max_batch_size, wide.instances, wide.max_queue_delay) == (64, 1, 0.0)
    assert [float(wide.service.mean(k)) for k in (1, 4, 5, 64)] == pytest.approx(
        [float(FLAT.service.mean(k)) for k in (1, 1, 2, 16)])
    # a bunch of k over c instances, as evenly as S(ceil(k / c)) takes it
    assert instance_batches({1: 1.0}, 4) == {1: 1.0}
    assert instance_batches({6: 1.0}, 4) == pytest.approx({1: 0.5, 2: 0.5})
    assert instance_batches({64: 1.0}, 4) == {16: 1.0}


def test_predict_answers_with_the_bunched_model_and_states_it():
    r = qm.predict(FLAT, rate=HALF, fallback="raise", extrapolate=True)
    assert r.method == "batch node, 4 bunched instances as one of max_batch_size 64"
    assert r.accuracy.exactness == "approximation"
    assert "bunched_instances" in r.accuracy.approximation_keys
    assert FAMILY in [m.family for m in r.accuracy.measured]
    # the instances' own batch sizes and utilization, by conservation
    implied = FLAT.service.utilization(r.throughput, r.batch_size_distribution, 4)
    assert r.utilization == pytest.approx(min(implied, 1.0))
    assert sum(r.batch_size_distribution.values()) == pytest.approx(1.0)
    assert max(r.batch_size_distribution) <= 16
    # a random router's nodes see a Poisson share of the rate: the same model
    cluster = qm.Cluster(FLAT, count=3, router="random")
    rc = qm.predict(cluster, rate=3 * HALF, fallback="raise", extrapolate=True)
    assert rc.p99 == pytest.approx(r.p99, rel=1e-9)


def test_the_family_is_measured_and_has_no_misses():
    m = measured_table()[FAMILY]
    assert m.configurations >= 60 and not m.misses
    assert m.p99.worst < 0.2


@pytest.mark.parametrize("base, per_item, B, c, load", [
    (2e-3, 1e-6, 16, 4, 0.5),                # flat: the staggered model was 33% low on p99
    (2e-3, 0.0, 26, 6, 0.31),                # as the wide draws' row 357: 33.5% low
    (1.8874e-3, 0.1438e-3, 8, 2, 0.7),       # the accuracy grid's B 8 on two instances
])
def test_bunched_nodes_against_the_simulator(base, per_item, B, c, load):
    """The simulated p99 lies in the interval the answer states (its family's measured range
    and lattice step), widened by the simulation's 99% CI; the staggered model's answer for
    the same node does not, where the service time hardly grows."""
    node = qm.Node(qm.ServiceTime.affine(base, per_item), max_batch_size=B, instances=c)
    rate = load * node.capacity
    assert bunches(node, rate)
    r = qm.predict(node, rate=rate, fallback="raise", extrapolate=True)
    sim = qm.simulate(node, rate=rate, requests=600_000, seed=2035)
    lo, hi = sim.ci(0.99, level=0.99)
    low, high = r.accuracy.p99_bounds(r.p99)
    assert low <= hi and lo <= high, (r.p99, sim.p99, (low, high), (lo, hi))
    assert r.mean_batch_size == pytest.approx(sim.mean_batch_size, rel=0.03)
    if per_item < 1e-5:
        assert batch_node(node, rate).p99 < 0.75 * lo      # what the bunched model replaced
