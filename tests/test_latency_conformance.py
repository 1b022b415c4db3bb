"""One conformance suite over every Latency subclass, as scipy.stats checks every distribution.

Each result type, whichever solver or engine made it, must behave as one distribution: cdf
and sf add up to one, the cdf is monotone and within [0, 1], quantiles are monotone and
invert the cdf (quantile(cdf(x)) = x at every quantile point x), and the mean is the integral
of the survival function. A new Latency subclass without an instance below fails
``test_every_latency_subclass_is_covered``.
"""

import numpy as np
import pytest
from scipy import integrate

import qmodel as qm
import qmodel.theory as th
from qmodel.latency import Latency

LEVELS = np.array([0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999])
AFFINE = qm.ServiceTime.affine(2e-3, 0.3e-3)
NODE = qm.Node(AFFINE, max_batch_size=8, max_queue_delay=1e-3)


def _instances():
    """name -> a result of that type, each from a public function."""
    lognormal = qm.ServiceTime.affine(2e-3, jitter=("lognormal", 0.5))
    gamma = qm.ServiceTime.affine(2e-3, jitter=("gamma", 0.5))
    return {
        "SampledLatency": qm.simulate(NODE, rate=0.7 * NODE.capacity, requests=200_000, seed=3),
        "HistogramLatency": qm.simulate(NODE, rate=0.7 * NODE.capacity, requests=200_000, seed=3,
                                        engine="compiled"),
        # the distributions as they are, also outside the measured domains
        "BatchNodeLatency": qm.predict(NODE, rate=0.7 * NODE.capacity, extrapolate=True),
        "LatticeLatency": th.gig1(300.0, lognormal, arrival_scv=0.5),
        "MixtureLatency": qm.predict(qm.Cluster(NODE, count=3, router="round_robin"),
                                     rate=2 * NODE.capacity, extrapolate=True),
        "MMcLatency": th.mmc(1500.0, 1000.0, 2),
        "MD1Latency": th.md1(400.0, 2e-3),
        "MDcLatency": th.mdc(1200.0, 2e-3, 3),
        "MG1Latency": th.mg1(300.0, gamma),       # a closed-form transform: fast to invert
        "CramerLundbergLatency": th.cramer_lundberg(300.0, gamma),
        "ExponentialWaitLatency": th.baseline_latency(300.0, 2e-3, 0.25),
        # a node whose requests spend 0.5 ms outside the batcher (Node.overhead)
        "ShiftedLatency": qm.predict(qm.Node(AFFINE, max_batch_size=8, max_queue_delay=1e-3,
                                             overhead=0.5e-3),
                                     rate=0.7 * NODE.capacity, extrapolate=True),
    }


def _over_time():
    """The results of traffic that changes: simulated, predicted (a window of it is a
    WeightedMixture), and the backlog's law of an overload."""
    from qmodel.theory.transient import BacklogLatency

    cap = NODE.capacity
    steps = qm.Traffic([0, 30, 40, 90], [0.5 * cap, 1.2 * cap, 0.6 * cap])
    prediction = qm.predict(NODE, arrivals=steps)
    return {
        "TrafficLatency": qm.simulate(NODE, arrivals=qm.Traffic.constant(0.7 * cap, 60.0),
                                      seed=3),
        "TrafficPrediction": prediction,
        "WeightedMixture": prediction.window(30, 60),
        "BacklogLatency": BacklogLatency(400.0, 1.0e4, cap, 3e-3, 1e-7, model="fluid_backlog",
                                         method="demo",
                                         accuracy=qm.Accuracy("approximation",
                                                              approximations=[
                                                                  qm.latency.Approximation(
                                                                      "fluid_backlog", "demo")]),
                                         throughput=cap, utilization=1.0,
                                         batch_size_distribution={8: 1.0}),
    }


INSTANCES = {**_instances(), **_over_time()}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_latency_subclass_is_covered():
    # a base class that no solver returns as such is covered through its subclasses; the
    # package's own classes (a test may define a user's subclass elsewhere)
    for cls in (c for c in _subclasses(Latency) if c.__module__.startswith("qmodel.")):
        covered = {cls, *_subclasses(cls)} & {type(r) for r in INSTANCES.values()}
        assert covered, f"{cls.__name__} has no instance in the conformance suite"
    for name, r in INSTANCES.items():
        assert type(r).__name__ == name


@pytest.fixture(params=sorted(INSTANCES), ids=sorted(INSTANCES))
def result(request):
    return INSTANCES[request.param]


def _grid(r, n=400):
    return np.linspace(0.0, 1.5 * r.quantile(0.9999), n)


def test_cdf_and_sf_add_to_one_and_stay_in_bounds(result):
    t = _grid(result)
    cdf, sf = result.cdf(t), result.sf(t)
    assert np.all((cdf >= 0) & (cdf <= 1)) and np.all((sf >= 0) & (sf <= 1))
    np.testing.assert_allclose(cdf + sf, 1.0, atol=1e-9)
    assert result.cdf(-1.0) == 0.0 and result.sf(-1.0) == 1.0


def test_cdf_is_monotone(result):
    assert np.all(np.diff(result.cdf(_grid(result, 2000))) >= -1e-12)


def test_quantiles_are_monotone_and_invert_the_cdf(result):
    q = result.quantile(LEVELS)
    assert np.all(np.diff(q) >= 0)
    assert np.all(result.cdf(q) >= LEVELS - 1e-9)
    for x in q:
        assert result.quantile(min(float(result.cdf(x)), 1 - 1e-12)) == pytest.approx(
            x, rel=1e-6, abs=1e-12)
    assert (result.p50, result.p95, result.p99) == tuple(result.quantile([0.5, 0.95, 0.99]))


def test_mean_is_the_integral_of_the_survival_function(result):
    upper = result.quantile(1 - 1e-9)
    points = np.linspace(0.0, upper, 4_001)
    integral = integrate.trapezoid(result.sf(points), points)
    # the trapezoid rule's own error on a step of upper / 4000 (up to half a step where the
    # sf jumps), and the tail beyond upper
    assert result.mean == pytest.approx(integral, rel=2e-3, abs=upper / 4_000)


def test_the_accuracy_record_is_complete(result):
    a = result.accuracy
    assert a.exactness in ("exact", "numerical", "approximation", "simulation")
    assert a.statement == "; ".join(a.clauses())
    if a.exactness == "approximation":
        assert a.approximations, "an approximation names what it approximates"
    if a.exactness == "simulation":
        assert a.simulation is not None and a.simulation.requests > 0
    if a.lattice_step is not None:
        assert a.lattice_step > 0


def test_the_model_is_a_key_that_agrees_with_the_exactness(result):
    """Which model answered is a key, not prose; a simulation says so in both fields."""
    assert result.model.isidentifier() and result.model == result.summary()["model"]
    assert (result.model == "simulation") == (result.accuracy.exactness == "simulation")
