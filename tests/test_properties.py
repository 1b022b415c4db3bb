"""Properties every answer of predict and simulate keeps, on systems Hypothesis draws.

A CI-sized sample of validation/fuzz.py's campaign: the draws are derandomized (the same
examples on every run), and the explicit ``@example`` cases are the ones issue 21 reported.
Properties:

- quantiles ordered, cdf monotone in t and inside [0, 1], figures finite;
- p99 non-decreasing in the arrival rate for a fixed node (up to the lattice's stated error);
- utilization in [0, 1] and mean batch size in [1, max_batch_size], for predict and for small
  simulate runs;
- hostile input raises only the library's own errors (a ValueError or NotImplementedError with
  a message, from qmodel's code: :func:`classify_error` of the fuzz decides);
- predict's p99 within its stated error (``Accuracy.p99_bounds``) of a simulation's,
  widened by the simulation's 95% confidence interval, on small systems: every exact or
  numerical answer; approximations as their families promise, with misses at a share of at
  most MISS_SHARE (a measured error range holds for most configurations like the measured
  ones, not for every one: validation/domain_check.py finds 1.6% outside).

The figures' properties take predict's answer outside its families' measured domains too
(``extrapolate=True``): an extrapolated answer may be off, but it must still be a
distribution. A draw that predict refuses (NotImplementedError with the reason) or a run that
simulate refuses with its own error has no answer to check; each property states the least
share of its draws that must be checked (:func:`checked_share`), so a predict that refused
everything fails them instead of passing them all. A RuntimeWarning is an error under the
suite's settings, so a warning leaked from numpy fails a property too. The wider comparison
with the simulator (clusters, 400,000 requests) is marked slow.
"""

import importlib.util
import math
import warnings
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

import qmodel as qm
from qmodel.routers import ROUTER_NAMES


def _fuzz():
    """validation/fuzz.py, loaded by path (validation/ holds scripts, not a package)."""
    path = Path(__file__).resolve().parents[1] / "validation" / "fuzz.py"
    spec = importlib.util.spec_from_file_location("qmodel_validation_fuzz", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUZZ = _fuzz()
classify_error, SLACK = FUZZ.classify_error, FUZZ.SLACK

# derandomized: CI sees the same examples on every run; no example database on disk
CI = dict(deadline=None, derandomize=True, database=None)


@pytest.fixture(autouse=True)
def _draws_independent_of_imports(monkeypatch):
    """Hypothesis mixes the constants of every local module imported so far into its draws,
    so derandomized draws changed with what the suite had imported before (a share of 20 of
    30 draws checked alone fell to 14 in the suite once a module was added). Without those
    constants the draws are the same alone and in the suite. (A private hook of Hypothesis
    6.1xx; where it is gone, nothing is patched.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        yield
        return
    hooks = ("_get_local_constants", "Constants", "CONSTANTS_CACHE")
    if not all(hasattr(providers, name) for name in hooks):
        # the shares in MINIMUM were measured with the draws fixed: say they no longer are
        warnings.warn("Hypothesis no longer has the hooks _draws_independent_of_imports "
                      "patches: the draws depend on the imported modules again")
        yield
        return
    monkeypatch.setattr(providers, "_get_local_constants", providers.Constants)
    providers.CONSTANTS_CACHE.cache.clear()
    yield
    providers.CONSTANTS_CACHE.cache.clear()


# --------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------
def log_uniform(lo, hi):
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


JITTERS = st.one_of(st.sampled_from(["deterministic", "exponential"]),
                    st.tuples(st.sampled_from(["gamma", "lognormal"]),
                              st.floats(0.05, 2.0)))

# the service laws most models were measured on (jitter cv up to 0.5)
STEADY = st.one_of(st.sampled_from(["deterministic", "exponential"]),
                   st.tuples(st.sampled_from(["gamma", "lognormal"]), st.floats(0.05, 0.5)))


@st.composite
def services(draw, B, jitters=JITTERS, monotone=False):
    """Affine (every jitter law), a table over 1..B or empirical samples; their means
    non-decreasing in the batch size where ``monotone``, else in any order."""
    kind = draw(st.sampled_from(["affine", "table", "empirical"]))
    base = draw(log_uniform(1e-5, 2e-2))
    if kind == "affine":
        per = draw(st.one_of(st.just(0.0), log_uniform(1e-3, 2.0))) * base
        return qm.ServiceTime.affine(base, per, jitter=draw(jitters))
    sizes = sorted({1, B, *draw(st.lists(st.integers(1, B), max_size=3))})
    factors = draw(st.lists(log_uniform(0.3, 3.0), min_size=len(sizes), max_size=len(sizes)))
    if monotone:
        factors = sorted(factors)
    means = {k: base * f for k, f in zip(sizes, factors)}
    if kind == "table":
        return qm.ServiceTime.table(means, jitter=draw(jitters))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    shape = draw(log_uniform(0.25, 400.0))
    samples = {k: rng.gamma(shape, 1 / shape, draw(st.integers(1, 50))) for k in means}
    # scaled to the drawn means exactly, so that monotone means stay monotone
    return qm.ServiceTime.empirical({k: (x * means[k] / x.mean()).tolist()
                                     for k, x in samples.items()})


@st.composite
def nodes(draw, max_batch=32, max_instances=4, finite=True, jitters=JITTERS, delay=True,
          monotone=False):
    B = draw(st.integers(1, max_batch))
    prefs = ()
    if B > 1 and draw(st.booleans()):
        prefs = tuple(draw(st.lists(st.integers(1, B), min_size=1, max_size=3, unique=True)))
    delays = st.one_of(st.just(0.0), log_uniform(1e-6, 5e-2)) if delay else st.just(0.0)
    return qm.Node(draw(services(B, jitters, monotone)), max_batch_size=B,
                   max_queue_delay=draw(delays),
                   preferred_batch_sizes=prefs,
                   instances=draw(st.integers(1, max_instances)),
                   max_queue_size=draw(st.one_of(st.just(0), st.integers(1, 4 * B + 8)))
                   if finite else 0)


@st.composite
def systems(draw, max_nodes=8):
    """A node, or identical nodes behind any router."""
    node = draw(nodes())
    if draw(st.booleans()):
        return node
    count = draw(st.integers(2, max_nodes))
    router = draw(st.sampled_from(ROUTER_NAMES))
    choices = draw(st.integers(1, count)) if router == "power_of_d" else None
    return qm.Cluster(node, count=count, router=router, choices=choices)


LOADS = st.floats(1e-3, 0.98)


def predicted(system, load, **kw):
    """predict at ``load`` of the capacity where a model answers; None where predict refuses
    (NotImplementedError with the reason: no answer, so nothing to check; the fallback
    simulation is too slow for a property test)."""
    try:
        return qm.predict(system, rate=load * system.capacity, fallback="raise", **kw)
    except NotImplementedError as err:
        REFUSED.append(str(err))
        return None


def simulated(system, load, requests, seed):
    """simulate at ``load`` of the capacity; None where the library refuses the run with its
    own error (e.g. one too short to measure anything, which says so): no answer to check."""
    try:
        return qm.simulate(system, rate=load * system.capacity, requests=requests, seed=seed)
    except ValueError as err:
        if classify_error(err)["outcome"] != "library_error":
            raise
        return None


def largest_batch(system) -> int:
    members = system.nodes if isinstance(system, qm.Cluster) else (system,)
    return max(n.max_batch_size for n in members)


# --------------------------------------------------------------------------------------------
# how many draws a property checked
# --------------------------------------------------------------------------------------------
TALLY = {}
REFUSED = []      # why predict refused, for the message of a share that falls short
# the least share of each property's draws that must have an answer to check
# The least share of each property's draws that must have an answer to check, set below the
# measured share (checked / drawn, the same alone and in the suite since the draws no longer
# take the imported modules' constants: _draws_independent_of_imports).
MINIMUM = {
    "predict_quantiles_ordered": 0.25,                      # 18 / 40
    "predict_cdf_monotone_within_unit_interval": 0.55,      # 20 / 30
    "predict_figures_finite": 0.30,                         # 16 / 42
    "predict_utilization_and_batch_size_in_range": 0.40,    # 15 / 30
    "predict_p99_non_decreasing_in_rate": 0.40,             # 23 / 41
    "simulate_utilization_in_unit_interval": 0.85,          # 31 / 31
    "simulate_mean_batch_size_in_range": 0.85,              # 31 / 31
    "predict_within_stated_error_small_nodes": 0.40,        # 11 / 21
    "predict_within_stated_error": 0.15,                    # 12 / 64 alone (slow)
}


def drawn(name: str, answer) -> bool:
    """Count a draw of property ``name`` and whether it has an ``answer`` to check (not
    None); returns whether it has."""
    counts = TALLY.setdefault(name, [0, 0])
    counts[0] += 1
    counts[1] += answer is not None
    return answer is not None


def checked_share(name: str, prop):
    """Run the Hypothesis property ``prop`` and fail unless at least ``MINIMUM[name]`` of its
    draws had an answer to check."""
    minimum = MINIMUM[name]
    TALLY[name] = [0, 0]
    REFUSED.clear()
    prop()
    total, checked = TALLY[name]
    reasons = "\n".join(sorted({r[:160] for r in REFUSED}))
    assert total > 0 and checked / total >= minimum, (
        f"{name}: {checked} of {total} draws checked, below the stated {minimum:.0%}; "
        f"predict refused:\n{reasons}")
    return checked, total


# issue 21's cases, as systems
NAN_MEAN = qm.Node(qm.ServiceTime.affine(8e-3, 1e-3, jitter=("lognormal", 1.0)),
                   max_batch_size=128, instances=7, max_queue_size=159)
COARSE_LATTICE = qm.Node(qm.ServiceTime.affine(7.36e-4, 7.16e-4, jitter=("lognormal", 1.5)),
                         max_batch_size=43)
MASS_ABOVE_ONE = qm.Node(qm.ServiceTime.affine(0.0152, 0.0175, jitter="exponential"),
                         max_batch_size=32, max_queue_delay=0.0032, instances=8)
LIGHT_ROUND_ROBIN = qm.Cluster(qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=4),
                               count=9, router="round_robin")
NOT_MONOTONE = qm.Node(qm.ServiceTime.affine(2.64e-4, 2.9e-6), max_batch_size=8, instances=7)


# --------------------------------------------------------------------------------------------
# predict's figures
# --------------------------------------------------------------------------------------------
@settings(max_examples=40, **CI)
@given(system=systems(), load=LOADS)
def _predict_quantiles_ordered(system, load):
    r = predicted(system, load, extrapolate=True)
    if not drawn("predict_quantiles_ordered", r):
        return
    q = [r.p50, r.p95, r.p99, r.quantile(0.999)]
    assert all(math.isfinite(x) and x >= 0 for x in q), q
    assert q == sorted(q), q


def test_predict_quantiles_ordered():
    checked_share("predict_quantiles_ordered", _predict_quantiles_ordered)


@settings(max_examples=30, **CI)
@given(system=systems(), load=LOADS)
def _predict_cdf_monotone_within_unit_interval(system, load):
    r = predicted(system, load, extrapolate=True)
    if not drawn("predict_cdf_monotone_within_unit_interval", r):
        return
    t = np.concatenate([[0.0], np.geomspace(r.p50 / 100, 10 * r.quantile(0.999), 40)])
    c = r.cdf(t)
    assert np.all(np.isfinite(c))
    # up to rounding (a mixture's cdf is a weighted sum of its nodes')
    assert np.all((c >= -SLACK) & (c <= 1 + SLACK)), c
    assert np.all(np.diff(c) >= -SLACK), c
    assert r.cdf(r.p99) >= 0.99 - 1e-9


def test_predict_cdf_monotone_within_unit_interval():
    checked_share("predict_cdf_monotone_within_unit_interval",
                  _predict_cdf_monotone_within_unit_interval)


@settings(max_examples=40, **CI)
@given(system=systems(), load=LOADS)
@example(system=NAN_MEAN, load=0.3)
@example(system=MASS_ABOVE_ONE, load=0.383)
def _predict_figures_finite(system, load):
    r = predicted(system, load, extrapolate=True)
    if not drawn("predict_figures_finite", r):
        return
    for name in ("mean", "p99", "throughput", "utilization", "mean_batch_size"):
        assert math.isfinite(getattr(r, name)), name
    assert math.isfinite(r.cdf(2 * r.p99))
    mass = r.accuracy.truncated_mass
    assert mass is None or 0 <= mass <= 1, mass


def test_predict_figures_finite():
    checked_share("predict_figures_finite", _predict_figures_finite)


@settings(max_examples=30, **CI)
@given(system=systems(), load=LOADS)
def _predict_utilization_and_batch_size_in_range(system, load):
    r = predicted(system, load, extrapolate=True)
    if not drawn("predict_utilization_and_batch_size_in_range", r):
        return
    assert 0 <= r.utilization <= 1, r.utilization
    assert 1 <= r.mean_batch_size <= largest_batch(system), r.mean_batch_size


def test_predict_utilization_and_batch_size_in_range():
    checked_share("predict_utilization_and_batch_size_in_range",
                  _predict_utilization_and_batch_size_in_range)


# A node whose larger batches run faster (a non-monotone table) or that waits for fuller
# batches (a delay) may truly answer faster at a higher rate (the simulator agrees: a table
# {1: 49.8 ms, 2: 18.3 ms} at B = 2 gives p99 97.4 / 94.1 ms at load 0.25 / 0.5), so the
# property is drawn on nodes without either (at loads where the models were measured).
@settings(max_examples=40, **CI)
@given(node=nodes(delay=False, monotone=True, max_instances=2, finite=False, jitters=STEADY),
       loads=st.lists(st.floats(0.3, 0.95), min_size=3, max_size=3, unique=True).map(sorted))
@example(node=NOT_MONOTONE, loads=[0.3, 0.6, 0.9])
def _predict_p99_non_decreasing_in_rate(node, loads):
    results = [predicted(node, load) for load in loads]
    if not drawn("predict_p99_non_decreasing_in_rate", None if None in results else results):
        return
    for lo, hi in zip(results, results[1:]):
        slack = sum(r.accuracy.quantile_error or r.accuracy.lattice_step or 0.0
                    for r in (lo, hi))
        assert lo.p99 <= hi.p99 + slack, [r.p99 for r in results]


def test_predict_p99_non_decreasing_in_rate():
    checked_share("predict_p99_non_decreasing_in_rate", _predict_p99_non_decreasing_in_rate)


# --------------------------------------------------------------------------------------------
# simulate's figures (small runs: the library's warnings about short replicas are expected)
# --------------------------------------------------------------------------------------------
SHORT_WINDOW = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=32,
                       max_queue_delay=0.05)


@settings(max_examples=30, **CI)
@given(system=systems(), load=LOADS, requests=st.integers(200, 20_000),
       seed=st.integers(0, 2**16))
@example(system=qm.Cluster(qm.Node(qm.ServiceTime.affine(math.exp(-4.0)), max_batch_size=4),
                           count=3, router="round_robin"), load=0.5, requests=200, seed=0)
def _simulate_utilization_in_unit_interval(system, load, requests, seed):
    r = simulated(system, load, requests, seed)
    if not drawn("simulate_utilization_in_unit_interval", r):
        return
    assert 0 <= r.utilization <= 1, r.utilization


@pytest.mark.filterwarnings("ignore:.*replicas leave:UserWarning")
def test_simulate_utilization_in_unit_interval():
    checked_share("simulate_utilization_in_unit_interval", _simulate_utilization_in_unit_interval)


@settings(max_examples=30, **CI)
@given(system=systems(), load=LOADS, requests=st.integers(200, 20_000),
       seed=st.integers(0, 2**16))
@example(system=SHORT_WINDOW, load=0.13, requests=200, seed=0)
def _simulate_mean_batch_size_in_range(system, load, requests, seed):
    r = simulated(system, load, requests, seed)
    if not drawn("simulate_mean_batch_size_in_range", r):
        return
    assert r.requests > 0
    assert 1 <= r.mean_batch_size <= largest_batch(system), r.mean_batch_size
    assert r.p50 <= r.p95 <= r.p99


@pytest.mark.filterwarnings("ignore:.*replicas leave:UserWarning")
def test_simulate_mean_batch_size_in_range():
    checked_share("simulate_mean_batch_size_in_range", _simulate_mean_batch_size_in_range)


# --------------------------------------------------------------------------------------------
# hostile input
# --------------------------------------------------------------------------------------------
NODE = qm.Node(qm.ServiceTime.affine(2e-3, 2.5e-4), max_batch_size=8)
SVC = qm.ServiceTime.affine(2e-3)

# calls that take one hostile value (the field each sets)
CALLS = {
    "ServiceTime.affine base": lambda v: qm.ServiceTime.affine(v),
    "ServiceTime.affine per_item": lambda v: qm.ServiceTime.affine(2e-3, v),
    "ServiceTime.affine jitter": lambda v: qm.ServiceTime.affine(2e-3, jitter=v),
    "ServiceTime.affine jitter cv": lambda v: qm.ServiceTime.affine(2e-3, jitter=("gamma", v)),
    "ServiceTime.table": lambda v: qm.ServiceTime.table({1: 1e-3, 4: v}),
    # an unhashable value cannot be a key: Python refuses that dict before qmodel sees it
    "ServiceTime.table size": lambda v: qm.ServiceTime.table({1: 1e-3, v: 2e-3})
    if isinstance(v, Hashable) else None,
    "ServiceTime.empirical": lambda v: qm.ServiceTime.empirical({1: [1e-3, v]}),
    "Node.service": lambda v: qm.Node(v),
    "Node.max_batch_size": lambda v: qm.Node(SVC, max_batch_size=v),
    "Node.max_queue_delay": lambda v: qm.Node(SVC, max_queue_delay=v),
    "Node.preferred_batch_sizes": lambda v: qm.Node(SVC, max_batch_size=8,
                                                    preferred_batch_sizes=v),
    "Node.instances": lambda v: qm.Node(SVC, instances=v),
    "Node.max_queue_size": lambda v: qm.Node(SVC, max_queue_size=v),
    "Cluster.count": lambda v: qm.Cluster(NODE, count=v),
    "Cluster.router": lambda v: qm.Cluster(NODE, count=3, router=v),
    "Cluster.weights": lambda v: qm.Cluster(NODE, count=2, weights=[1.0, v]),
    "Cluster.choices": lambda v: qm.Cluster(NODE, count=4, router="power_of_d", choices=v),
    "predict rate": lambda v: qm.predict(NODE, rate=v),
    "predict resolution": lambda v: qm.predict(NODE, rate=1000.0, resolution=v),
    "simulate rate": lambda v: qm.simulate(NODE, rate=v, requests=2_000, seed=1),
    # a valid count above a million is a long run, not a hostile one (its memory is checked:
    # tests/test_messages.py)
    "simulate requests": lambda v: qm.simulate(NODE, rate=1000.0, requests=v, seed=1)
    if not (isinstance(v, (int, float)) and 1e6 < v < math.inf) else None,
    "simulate seed": lambda v: qm.simulate(NODE, rate=1000.0, requests=2_000, seed=v),
    "simulate replicas": lambda v: qm.simulate(NODE, rate=1000.0, requests=2_000, replicas=v),
    "simulate warmup": lambda v: qm.simulate(NODE, rate=1000.0, requests=2_000, warmup=v),
    "Renewal scv": lambda v: qm.Renewal(1000.0, scv=v),
    "Trace times": lambda v: qm.Trace([0.0, 1e-3, v]),
    "parse_duration": lambda v: qm.parse_duration(v),
    "Latency.cdf": lambda v: _result().cdf(v),
    "Latency.quantile": lambda v: _result().quantile(v),
    "SampledLatency.ci": lambda v: _sampled().ci(v),
}
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**5),
    st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(max_magnitude=10),
    st.text(max_size=6), st.sampled_from(["2ms", "-2ms", "nan ms", "1e400", "0.99", "2 furlongs"]),
    st.lists(st.floats(-1, 1), max_size=3), st.just(object()), st.just({}))

_cache = {}


def _result():
    if "predict" not in _cache:
        _cache["predict"] = qm.predict(NODE, rate=1000.0)
    return _cache["predict"]


def _sampled():
    if "simulate" not in _cache:
        _cache["simulate"] = qm.simulate(NODE, rate=1000.0, requests=20_000, seed=1)
    return _cache["simulate"]



@settings(max_examples=300, **CI)
@given(call=st.sampled_from(sorted(CALLS)), value=HOSTILE)
@example(call="Latency.cdf", value="x")
@example(call="parse_duration", value="-2ms")
def test_hostile_input_raises_only_library_errors(call, value):
    try:
        CALLS[call](value)
    except Exception as err:          # noqa: BLE001 - which error it is, is the property
        verdict = classify_error(err)
        assert verdict["outcome"] == "library_error", verdict


# --------------------------------------------------------------------------------------------
# predict against simulate
# --------------------------------------------------------------------------------------------
# an approximation among the small nodes whatever the draws (a delay: family
# batch_one_instance), so that their miss share is judged on at least one
DELAYED_SMALL_NODE = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3), max_batch_size=4,
                             max_queue_delay=1e-3)

# property -> [approximate answers checked, the misses' descriptions]
MISSES = {}
# what the measured families promise (issue 35): at most this share of the answers inside
# their domains lies outside their stated error and the simulation's CI
MISS_SHARE = 0.05


def check_within_stated(system, load, name, requests=200_000):
    """predict's p99 interval (its stated error) meets the simulated p99's 95% CI; a stated
    truncated or discretised mass of 0.01 or more would leave the p99 itself undetermined.
    An exact or numerical answer must meet it every time; an approximation's miss is counted
    under ``name`` (:func:`assert_few_misses` judges the share). Returns the prediction, None
    where predict refuses the system."""
    rate = load * system.capacity
    r = predicted(system, load)
    if r is None:
        return None
    assert (r.accuracy.truncated_mass or 0.0) < 0.01, r.accuracy.statement
    low, high = r.accuracy.p99_bounds(r.p99)
    sim = qm.simulate(system, rate=rate, requests=requests, seed=1)
    s_low, s_high = sim.ci(0.99)
    met = s_low <= high and s_high >= low
    message = (f"predicted p99 {r.p99 * 1e3:.4g} ms, stated [{low * 1e3:.4g}, "
               f"{high * 1e3:.4g}] ms; simulated {sim.p99 * 1e3:.4g} ms, CI "
               f"[{s_low * 1e3:.4g}, {s_high * 1e3:.4g}] ms ({system!r} at load {load:.3g})")
    if r.accuracy.exactness in ("exact", "numerical"):
        assert met, message           # its only error is the stated lattice or truncation
    else:
        tally = MISSES.setdefault(name, [0, []])
        tally[0] += 1
        if not met:
            tally[1].append(message)
    return r


def assert_few_misses(name):
    """Fail when property ``name``'s approximate answers missed their stated error more
    often than a share of MISS_SHARE allows: more misses than a binomial(checked,
    MISS_SHARE) count exceeds with probability 0.01."""
    checked, misses = MISSES.get(name, [0, []])
    assert checked > 0, f"{name}: no approximate answer was checked"
    allowed = int(stats.binom.isf(0.01, checked, MISS_SHARE))
    assert len(misses) <= allowed, (
        f"{name}: {len(misses)} of {checked} approximate answers outside their stated error "
        f"(at most {allowed} at a {MISS_SHARE:.0%} share):\n" + "\n".join(misses))


@settings(max_examples=20, **CI)
@given(node=nodes(max_batch=8, max_instances=1, finite=False, jitters=STEADY),
       load=st.floats(0.1, 0.8))
@example(node=COARSE_LATTICE, load=0.125)
@example(node=DELAYED_SMALL_NODE, load=0.5)
def _predict_within_stated_error_small_nodes(node, load):
    name = "predict_within_stated_error_small_nodes"
    drawn(name, check_within_stated(node, load, name))


def test_predict_within_stated_error_small_nodes():
    name = "predict_within_stated_error_small_nodes"
    MISSES.pop(name, None)
    checked_share(name, _predict_within_stated_error_small_nodes)
    assert_few_misses(name)


# the two draws issue 35's last session found: an approximate chain's 3.3% mass defect read
# as truncation (B 3, two measured samples of S(3), a 50 ms delay), and three instances of
# two-sample S(13) whose p99 lies 2.7% beyond the stated range (counted as a miss)
DEFECT_NOT_TRUNCATION = qm.Cluster(qm.Node(
    qm.ServiceTime.empirical({1: [0.01831563888873418],
                              3: [0.035933239744284994, 0.0006980380331833596]}),
    max_batch_size=3, max_queue_delay=0.049787068367863944), count=2, router="random")
TWO_SAMPLE_INSTANCES = qm.Cluster(qm.Node(
    qm.ServiceTime.empirical({1: [0.01831563888873418],
                              13: [0.010944576517260505, 0.025686701260207855]}),
    max_batch_size=13, instances=3), count=2, router="random")


@settings(max_examples=60, **CI)
@given(system=systems(), load=st.floats(0.05, 0.9))
@example(system=MASS_ABOVE_ONE, load=0.383)
@example(system=LIGHT_ROUND_ROBIN, load=0.1)
@example(system=DEFECT_NOT_TRUNCATION, load=0.5)
@example(system=TWO_SAMPLE_INSTANCES, load=0.25)
def _predict_within_stated_error(system, load):
    name = "predict_within_stated_error"
    drawn(name, check_within_stated(system, load, name, requests=400_000))


@pytest.mark.slow
def test_predict_within_stated_error():
    MISSES.pop("predict_within_stated_error", None)
    checked_share("predict_within_stated_error", _predict_within_stated_error)
    assert_few_misses("predict_within_stated_error")


