"""Answers outside their stated error, inside the measured domain (issue 35, defects 1, 2,
5, 6 and 7): each case was answered by a model quoting a family's error that the simulator
(2 M requests, seed 7) showed did not hold. Now the domains bound what the errors depend on
and admit a configuration only near measured ones, the self-checks test conservation, a
trace with correlated gaps is outside every family, and an extrapolated answer carries the
measured error of extrapolation rather than its family's.
"""

import math

import numpy as np
import pytest

import qmodel as qm
from qmodel.accuracy import NEIGHBOURHOOD, ErrorRange, MeasuredError
from qmodel.latency import Accuracy, LatticeLatency
from qmodel.selfcheck import APPROXIMATION_MASS_BOUND, UTILIZATION_TOLERANCE, defects
from qmodel.sizing import trusted_quantile
from qmodel.theory.measured import (FEATURES, configuration_features, measured,
                                    measured_table)

AFF = qm.ServiceTime.affine


def _declined(system, load, match, **kw):
    with pytest.raises(NotImplementedError, match=match):
        qm.predict(system, rate=load * system.capacity, fallback="raise", **kw)


@pytest.mark.parametrize("B, c, load, times", [(80, 8, 0.96, 7.08), (32, 4, 0.9, 2.93)])
def test_defect1_batches_that_cannot_carry_the_load_are_refused(B, c, load, times):
    # S(k) = 1 + 0.9 k ms: the model implied utilization 1.51 (B 80) and 1.35 (B 32), capped
    # it and answered; simulated p99 81.9 ms against 21.6 predicted (-74%), and -39%. Its
    # batches average about 2 requests where 20 (B 80) and 8 are needed to carry the load.
    node = qm.Node(AFF(1e-3, 0.9e-3), max_batch_size=B, instances=c)
    _declined(node, load, rf"its batches cannot carry the load .* {times} times as long",
              extrapolate=True)


def test_defect1_a_corner_no_configuration_measured_is_outside_the_domain():
    # inside every feature's range of its family, but no measured configuration of its
    # steep S(k) (growth 0.47) with B 120 near it: the nearest is 1.8 radii away. (The
    # corners tested before were measured since: B 80 with 8 instances left the box when
    # validation/several_instance_jitter.py cut it to B 31, and B 2 with 3 instances at
    # load 0.1 was measured by the ordinary draws of seed 3502.)
    node = qm.Node(AFF(1e-3, 0.9e-3), max_batch_size=120, instances=3)
    family = measured("batch_several_deterministic_no_delay")
    features = configuration_features(node, 0.9)
    assert all(lo <= features[f] <= hi for f, lo, hi in family.domain)
    assert family.nearest(features)[0] > 1.5
    assert "was measured near this one" in family.outside(features)


@pytest.mark.parametrize("preferred, load, delay", [((1, 32), 0.6, 0.0), ((2, 32), 0.5, 0.0),
                                                    ((4, 32), 0.8, 1.0)])
def test_defect2_a_small_preferred_size_is_outside_the_measured_domain(preferred, load, delay):
    # -23%, -35% and +20% on p99 against a stated -2.4% to +17.4%: the measured rows all had
    # the smallest preferred size at 0.25 B or more
    service = AFF(2e-3, 0.2e-3)
    node = qm.Node(service, max_batch_size=32, preferred_batch_sizes=preferred,
                   max_queue_delay=delay * float(service.mean(1)))
    _declined(node, load, "smallest_preferred_over_max .* is outside|missed by more than its "
                          "tolerance on a configuration measured near this one")


def test_every_feature_a_domain_bounds_has_a_neighbourhood():
    assert set(FEATURES) <= set(NEIGHBOURHOOD)
    for family in measured_table().values():
        assert all(len(p) == len(family.domain) for p in family.points)


def test_a_domain_admits_only_points_near_measured_ones():
    m = MeasuredError("demo", "demo nodes", 2, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=(("max_batch_size", 2, 64), ("load", 0.1, 0.9),
                              ("smallest_preferred_over_max", 0.25, 1.0)),
                      points=((2, 0.1, 1.0), (64, 0.9, 0.25)))
    assert m.outside({"max_batch_size": 4, "load": 0.2, "smallest_preferred_over_max": 1.0}) \
        is None
    # inside the box in every feature, two factors of 2 from the nearest in max_batch_size
    assert "differs in max_batch_size: 16 against 64" in m.outside(
        {"max_batch_size": 16, "load": 0.9, "smallest_preferred_over_max": 0.25})
    # a corner: B near the one point, the preferred size near the other
    assert "near this one" in m.outside(
        {"max_batch_size": 2, "load": 0.1, "smallest_preferred_over_max": 0.25})
    with pytest.raises(ValueError, match="one value per domain feature"):
        MeasuredError("demo", "", 1, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=(("load", 0.1, 0.9),), points=((0.5, 1.0),))


def test_a_configuration_next_to_a_measured_miss_is_outside():
    """A family keeps the configurations where it missed: near one of them a configuration is
    outside, however near a good one (the peeled boxes gave up whole regions to keep a few
    misses out, and still let in points between the rows)."""
    m = MeasuredError("demo", "demo nodes", 2, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=(("max_batch_size", 2, 64), ("load", 0.1, 0.9)),
                      points=((8, 0.5), (8, 0.7)), misses=((8, 0.9),))
    assert m.outside({"max_batch_size": 8, "load": 0.6}) is None
    assert "missed by more than its tolerance" in m.outside({"max_batch_size": 8,
                                                             "load": 0.8})
    with pytest.raises(ValueError, match="misses must have one value per domain feature"):
        MeasuredError("demo", "", 1, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=(("load", 0.1, 0.9),), misses=((0.5, 1.0),))


def test_no_stored_miss_lies_inside_its_familys_domain():
    """Every configuration a family missed by more than 20% on, in any campaign, is outside
    its domain, and every one it states the errors of is inside (all of them, not a
    sample)."""
    for family in measured_table().values():
        names = [f for f, _, _ in family.domain]
        for point in family.misses:
            assert family.outside(dict(zip(names, point))) is not None, (family.family, point)
        for point in family.points:
            assert family.outside(dict(zip(names, point))) is None, (family.family, point)
        assert family.family == "extrapolated" or family.points


def test_defect5_an_extrapolated_answer_carries_the_error_of_extrapolation():
    # sixteen deterministic instances with a nearly flat S(k), at a load where they do not
    # bunch: more instances than the family was measured on (2-8)
    node = qm.Node(AFF(2.64e-4, 2.9e-6), max_batch_size=8, instances=16)
    r = qm.predict(node, rate=0.2 * node.capacity, fallback="raise", extrapolate=True)
    families = [m.family for m in r.accuracy.measured]
    assert families == ["batch_several_deterministic_no_delay", "extrapolated"]
    wide = measured("extrapolated")
    own = measured("batch_several_deterministic_no_delay")
    assert wide.p99.low < own.p99.low and wide.p99.high > own.p99.high
    p99, step = r.quantile(0.99), r.accuracy.quantile_error
    low, high = r.accuracy.p99_bounds(p99)
    assert high == pytest.approx((p99 + step) / (1 + wide.p99.low))
    assert low == pytest.approx((p99 - step) / (1 + wide.p99.high))
    # a search ranks by the family's own range (the plan's simulation vouches for it)
    assert trusted_quantile(r, 0.99) == pytest.approx(p99 / (1 + own.p99.low) + step)


def test_defect6_the_mass_bound_can_trip():
    assert APPROXIMATION_MASS_BOUND < 1.0


def _lattice(throughput, utilization, sizes):
    pmf = np.zeros(400)
    pmf[100:300] = 1.0 / 200
    return LatticeLatency(pmf, 1e-4, method="demo",
                          accuracy=Accuracy("numerical", "demo", truncated_mass=0.0),
                          throughput=throughput, utilization=utilization,
                          batch_size_distribution=sizes)


def test_defect6_the_self_checks_test_conservation():
    node = qm.Node(AFF(2e-3, 0.5e-3), max_batch_size=4)
    # 200/s in batches of 2: 100 batches/s of 3 ms, utilization 0.3
    assert defects(_lattice(200.0, 0.3, {2: 1.0}), node, 200.0) is None
    assert "throughput 20/s is not the arrival rate" in defects(
        _lattice(20.0, 0.3, {2: 1.0}), node, 200.0)
    off = 0.3 + 2 * UTILIZATION_TOLERANCE
    assert f"utilization {off:.4f} is not the 0.3000" in defects(
        _lattice(200.0, off, {2: 1.0}), node, 200.0)
    # without the system and rate only the answer itself is checked
    assert defects(_lattice(20.0, off, {2: 1.0})) is None


@pytest.mark.parametrize("B, delay", [(1, 0.0), (8, 0.0), (8, 1e-3)])
def test_defect6_power_of_two_conserves_work(B, delay):
    node = qm.Node(AFF(2e-3, 0.2e-3), max_batch_size=B, max_queue_delay=delay)
    cluster = qm.Cluster(node, count=16, router="power_of_two")
    rate = 0.8 * cluster.capacity
    r = qm.predict(cluster, rate=rate, fallback="raise", extrapolate=True)
    assert r.throughput == pytest.approx(rate, rel=1e-12)      # the cluster's, not a node's
    if B == 1:
        assert r.utilization == pytest.approx(0.8, abs=1e-9)    # it reported 0.819
    sizes = r.batch_size_distribution
    mean_s = sum(float(node.service.mean(k)) * p for k, p in sizes.items())
    mean_k = sum(k * p for k, p in sizes.items())
    implied = rate * mean_s / mean_k / 16
    if r.accuracy.approximation("utilization_capped") is None:
        assert r.utilization == pytest.approx(implied, abs=1e-6)
    else:       # batch sizes a little small near capacity: capped, and said with the figure
        assert r.utilization == 1.0 and implied > 1.0
        assert f"{implied:.3f}" in r.accuracy.approximation("utilization_capped").text


def test_defect7_a_trace_with_correlated_gaps_is_outside_every_family():
    node = qm.Node(AFF(1.8874e-3, 0.1438e-3), max_batch_size=8, max_queue_delay=1e-3)
    rate = 0.6 * node.capacity
    rng = np.random.default_rng(3)
    independent = qm.Trace(np.cumsum(rng.exponential(1 / rate, 100_000)))
    r = qm.predict(node, arrivals=independent, fallback="raise")
    assert "trace_as_renewal" in r.accuracy.approximation_keys
    # the same mean gap, in bursts of 10 equal gaps: lag-1 autocorrelation about 0.9
    bursts = qm.Trace(np.cumsum(np.repeat(rng.exponential(1 / rate, 10_000), 10)))
    with pytest.raises(NotImplementedError, match=r"gaps are correlated \(lag-1 "
                                                  r"autocorrelation \+0\.9"):
        qm.predict(node, arrivals=bursts, fallback="raise")
    r = qm.predict(node, arrivals=bursts, fallback="raise", extrapolate=True)
    assert "outside_measured_domain" in r.accuracy.approximation_keys
    assert not math.isnan(r.p99)


# ---- found by review ---------------------------------------------------------------------

def test_a_weighted_split_is_checked_at_its_busiest_node():
    # 3:1 over two nodes puts the heavy node at 0.96 load, where the node alone is refused;
    # the check took each node at 1/N of the rate and let the answer (-48%) through
    node = qm.Node(AFF(1e-3, 0.9e-3), max_batch_size=32, instances=8)
    cluster = qm.Cluster(node, count=2, router="random", weights=[3, 1])
    with pytest.raises(NotImplementedError, match="cannot carry the load"):
        qm.predict(cluster, rate=0.96 * node.capacity / 0.75, fallback="raise",
                   extrapolate=True)


def test_a_feature_known_on_one_side_only_is_no_neighbour():
    # B = 1 points have no service growth; a B = 2 node with growth 0.47 was "near" them
    node = qm.Node(AFF(1e-3, 0.9e-3), max_batch_size=2)
    features = configuration_features(node, 0.6, 1.0, nodes=4)
    assert features["service_growth"] == pytest.approx(0.4737, abs=1e-4)
    names = ("max_batch_size", "load", "service_growth", "nodes")
    m = MeasuredError("demo", "demo nodes", 1, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=tuple((f, 0.0, 100.0) for f in names),
                      points=((1, 0.6, None, 4),))
    assert "differs in service_growth: 0.4737 against none" in m.outside(features)
    # and a miss known on one side only is no neighbour either
    m = MeasuredError("demo", "demo nodes", 1, ErrorRange(0, 0, 0), ErrorRange(0, 0, 0), (),
                      domain=tuple((f, 0.0, 100.0) for f in names),
                      points=((2, 0.6, 0.45, 4),), misses=((1, 0.6, None, 4),))
    assert m.outside(features) is None


@pytest.mark.parametrize("law", ["lognormal", "pareto"])
def test_independent_long_tailed_gaps_are_not_called_correlated(law):
    # the gaps' own autocorrelation strays far wider than 1 / sqrt(n) for long-tailed gaps
    # (lognormal scv 2 flagged 1-2% of independent traces); ranks do not
    from qmodel.stationary import correlated_gaps
    flagged = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        gaps = (rng.lognormal(0.0, np.sqrt(np.log(3.0)), 1000) if law == "lognormal"
                else rng.pareto(1.5, 1000) + 1e-6)
        flagged += correlated_gaps(qm.Trace(np.cumsum(gaps))) is not None
    # 10 one-sided tests at 4 sigma: about 3e-4 a trace, so 0 of 200 is the likely count and
    # 2 or more has probability below 2e-3
    assert flagged <= 1


def test_timestamps_rounded_to_a_clock_are_not_called_correlated():
    # rounding makes successive gaps negatively correlated: smoother, not burstier
    from qmodel.stationary import correlated_gaps
    rng = np.random.default_rng(2)
    times = np.cumsum(rng.exponential(0.77e-3, 200_000))
    for clock in (0.2e-3, 0.5e-3):
        assert correlated_gaps(qm.Trace(np.round(times / clock) * clock)) is None


def test_a_correlated_trace_has_no_measured_error_to_state():
    # the extrapolated family was measured under Poisson arrivals, not bursts (-68% there)
    node = qm.Node(AFF(1.8874e-3, 0.1438e-3), max_batch_size=8, max_queue_delay=1e-3)
    rate = 0.6 * node.capacity
    rng = np.random.default_rng(3)
    bursts = qm.Trace(np.cumsum(np.repeat(rng.exponential(1 / rate, 10_000), 10)))
    r = qm.predict(node, arrivals=bursts, fallback="raise", extrapolate=True)
    assert "extrapolated" not in [m.family for m in r.accuracy.measured]
    assert r.accuracy.p99_bounds(r.p99) == (0.0, math.inf)
