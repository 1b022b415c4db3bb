"""Predicting an Ensemble (issue 23, item 3), and clusters of Ensemble pods."""

import warnings

import numpy as np
import pytest

import qmodel as qm
from qmodel.checks import UnstableError
from qmodel.theory.pipeline import FAMILY, clumped_stage, ensemble_family

JITTERY = qm.Node(qm.ServiceTime.affine(1e-3, 2e-4, jitter=("lognormal", 0.3)),
                  max_batch_size=8, max_queue_delay=1e-3)
A = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4, jitter=("gamma", 0.5)), max_batch_size=8,
            max_queue_delay=0.5e-3)
B = qm.Node(qm.ServiceTime.affine(0.6e-3, 0.3e-3), max_batch_size=4, instances=2)


def _quiet_simulate(system, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qm.sim.window.ShortRunWarning)
        return qm.simulate(system, **kw)


def _within_stated(predicted, reference, level="p99", slack=0.0):
    """The relative error lies in the range the ensemble family states (its measured
    low..high, widened by ``slack`` for the reference's own sampling error)."""
    family = ensemble_family()
    rng = getattr(family, level)
    error = predicted / reference - 1.0
    assert rng.low - slack <= error <= rng.high + slack, (level, error, rng)


@pytest.mark.parametrize("rate", [2000.0, 3000.0])     # a model's answer; a fallback's
def test_a_one_stage_ensemble_predicts_as_the_node(rate):
    node = qm.predict(JITTERY, rate=rate)
    ens = qm.predict(qm.Ensemble({"m": JITTERY}), rate=rate)
    levels = [0.5, 0.95, 0.99, 0.999]
    np.testing.assert_array_equal(ens.quantile(levels), node.quantile(levels))
    assert ens.accuracy == node.accuracy and list(ens.stages) == ["m"]


def test_a_one_stage_ensemble_takes_a_trace_as_the_node_does():
    times = np.cumsum(np.random.default_rng(6).exponential(1 / 1000.0, 20_000))
    node = qm.predict(JITTERY, arrivals=qm.Trace(times), extrapolate=True)
    ens = qm.predict(qm.Ensemble({"m": JITTERY}), arrivals=qm.Trace(times), extrapolate=True)
    assert not node.accuracy.is_fallback      # the model's answer, with its trace note
    assert ens.accuracy == node.accuracy and ens.p99 == node.p99


def test_the_result_states_what_it_is():
    ens = qm.Ensemble({"a": A, "b": B, "join": qm.Node(qm.ServiceTime.affine(0.2e-3))},
                      [("a", "join"), ("b", "join")])
    r = qm.predict(ens, rate=1000.0)
    acc = r.accuracy
    assert acc.exactness == "approximation" and not acc.is_fallback
    keys = {a.key for a in acc.approximations}
    assert {"stage_arrivals_renewal", "stage_sojourns_independent"} <= keys
    assert acc.lattice_step > 0
    # the combination loses next to nothing: the mass the stages' own models state remains
    assert acc.truncated_mass == pytest.approx(max(s.accuracy.truncated_mass or 0.0
                                                   for s in r.stages.values()), abs=1e-9)
    assert [m.family for m in acc.measured] == [FAMILY]
    assert set(r.stages) == {"a", "b", "join"}
    assert r.stages["a"].p99 < r.p99 and r.stages["b"].p99 < r.p99
    # every stage's batches, per batch; every instance's busy time
    assert 0 < r.utilization < 1 and r.mean_batch_size >= 1


def test_a_deterministic_chain_is_within_the_stated_error_of_the_tandem_derivation(tandem):
    ens, rate, exact = tandem
    # one-request stages lie outside the ensemble family's measured domain: the model's own
    # answer, against the derivation
    r = qm.predict(ens, rate=rate, extrapolate=True)
    for name, p in (("p95", 0.95), ("p99", 0.99)):
        _within_stated(float(r.quantile(p)), exact(p), name)
    # the bottleneck is an M/D/1 on its own: predicted exactly, to the lattice
    assert r.stages["s0"].accuracy.exactness in ("exact", "numerical")


def test_a_fan_in_is_the_product_of_its_branches_cdfs():
    """Branches side by side, done when both are: the model takes them independent, so its
    cdf is the product of the branches' (to the lattice step)."""
    ens = qm.Ensemble({"a": A, "b": B})
    r = qm.predict(ens, rate=1000.0)
    assert not r.accuracy.is_fallback
    pa, pb = qm.predict(A, rate=1000.0), qm.predict(B, rate=1000.0)
    t = np.linspace(0.5e-3, 8e-3, 40)
    h = r.accuracy.lattice_step
    upper = pa.cdf(t + h) * pb.cdf(t + h)
    lower = pa.cdf(t - h) * pb.cdf(t - h)
    assert np.all(r.cdf(t) <= upper + 1e-9) and np.all(r.cdf(t) >= lower - 1e-9)


def test_a_fan_in_matches_the_maximum_of_simulated_branches():
    """Against the simulation of the same ensemble, which takes the maximum request by
    request (tests/test_ensemble_sim.py checks that against the branches replayed alone)."""
    ens = qm.Ensemble({"a": A, "b": B, "join": qm.Node(qm.ServiceTime.affine(1e-6),
                                                       max_batch_size=16)},
                      [("a", "join"), ("b", "join")])
    r = qm.predict(ens, rate=1000.0)
    assert not r.accuracy.is_fallback
    sim = qm.simulate(ens, rate=1000.0, requests=1_600_000, seed=7)
    for name, p in (("p95", 0.95), ("p99", 0.99)):
        lo, hi = sim.ci(p, 0.99)
        _within_stated(float(r.quantile(p)), sim.quantile(p), name,
                       slack=(hi - lo) / 2 / sim.quantile(p))


def test_a_stage_no_model_covers_makes_predict_simulate_and_say_which():
    # Triton's prefetching batcher: no model covers it, in an ensemble or not
    coarse = qm.Node(qm.ServiceTime.affine(1e-3, jitter=("lognormal", 0.8)), max_batch_size=8,
                     instances=2, max_queue_delay=2e-3, prefetch=0.3)
    ens = qm.Ensemble({"a": JITTERY, "b": coarse}, [("a", "b")])
    r = qm.predict(ens, rate=2000.0)
    assert r.accuracy.is_fallback and r.model == "simulation"
    assert r.accuracy.fallback_reason.startswith("ensemble stage 'b': ")
    assert set(r.stages) == {"a", "b"}          # the simulation's own per-stage results
    with pytest.raises(NotImplementedError, match="ensemble stage 'b'"):
        qm.predict(ens, rate=2000.0, fallback="raise")


def test_clumps_are_used_only_where_whole_clumps_keep_the_capacity():
    node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=16)
    assert clumped_stage(node, 4.0)[1].max_batch_size == 4
    assert clumped_stage(node, 1.2) is None                    # hardly clumped
    assert clumped_stage(node, 6.0) is None                    # 3 x 6 = 18, not 16
    assert clumped_stage(qm.Node(node.service, max_batch_size=2), 1.6) is None   # 1 x 1.6


def test_pods_behind_a_random_router_are_the_ensemble_at_their_share():
    ens = qm.Ensemble({"a": A, "b": B}, [("a", "b")])
    pods = qm.Cluster(ens, count=4)
    r, one = qm.predict(pods, rate=4000.0), qm.predict(ens, rate=1000.0)
    assert not one.accuracy.is_fallback
    np.testing.assert_allclose(r.quantile([0.5, 0.99]), one.quantile([0.5, 0.99]), rtol=1e-9)
    assert set(r.stages) == {"a", "b"}
    sim = _quiet_simulate(pods, rate=4000.0, requests=800_000, seed=3)
    alone = _quiet_simulate(ens, rate=1000.0, requests=800_000, seed=4)
    lo, hi = sim.ci(0.99, 0.99)
    lo1, hi1 = alone.ci(0.99, 0.99)
    assert abs(sim.p99 - alone.p99) <= (hi - lo) / 2 + (hi1 - lo1) / 2
    assert sim.stages["a"].utilization == pytest.approx(alone.stages["a"].utilization,
                                                        rel=0.03)
    assert sim.model == "simulation" and sim.accuracy.simulation.engine == "lookahead"


def test_pods_take_static_routers_only_and_name_the_stage_when_unstable():
    ens = qm.Ensemble({"a": A, "b": B}, [("a", "b")])
    with pytest.raises(ValueError, match="router='least_outstanding' is not modelled for "
                                         "pipelines"):
        qm.Cluster(ens, count=2, router="least_outstanding")
    with pytest.raises(UnstableError, match="ensemble stage 'a'"):
        qm.predict(qm.Cluster(ens, count=2), rate=2 * 1.01 * A.capacity)
    rr = qm.predict(qm.Cluster(ens, count=3, router="round_robin"), rate=3000.0)
    assert "round robin over 3 nodes" in rr.accuracy.basis


def test_an_extrapolated_ensemble_says_so():
    """Outside the ensemble family's measured domain, extrapolate=True answered without the
    "outside_measured_domain" mark a node carries, so sizing took it as measured (issue 35,
    defect 5)."""
    s = qm.ServiceTime.affine(1e-3, 1e-4)
    wide = qm.Ensemble({"a": qm.Node(s, max_batch_size=64), "b": qm.Node(s)}, [("a", "b")])
    rate = 0.5 * wide.capacity
    with pytest.raises(NotImplementedError, match="max_batch_size 64 is outside"):
        qm.predict(wide, rate=rate, fallback="raise")
    r = qm.predict(wide, rate=rate, fallback="raise", extrapolate=True)
    assert "outside_measured_domain" in r.accuracy.approximation_keys
    # near a measured ensemble (validation/ensemble_accuracy.py) in every feature
    model = qm.Node(qm.ServiceTime.affine(2e-3, 5e-4), max_batch_size=8, max_queue_delay=3e-3)
    narrow = qm.Ensemble({"pre": qm.Node(s, max_batch_size=4, instances=2), "model": model},
                         [("pre", "model")])
    inside = qm.predict(narrow, rate=400.0, fallback="raise", extrapolate=True)
    assert "outside_measured_domain" not in inside.accuracy.approximation_keys
