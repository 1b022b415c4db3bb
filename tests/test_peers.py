"""The SimPy and Ciw peers of benchmarks/peers.py agree with exact results and with qmodel.

Statistical checks use 99% confidence intervals with fixed seeds: batch means over consecutive
blocks of one long run for the peers, qmodel's own sectioning CI for qmodel. Each also asserts
that its interval is narrow, so that passing means something.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("simpy")
pytest.importorskip("ciw")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import peers  # noqa: E402

import qmodel as qm  # noqa: E402

LEVEL = 0.99
BASE, PER_ITEM, B = 2e-3, 5e-4, 8


def batch_means(x, p, level=LEVEL):
    return peers.batch_means(x, p, level=level)


def node(delay, instances):
    return qm.Node(qm.ServiceTime.affine(BASE, PER_ITEM), max_batch_size=B,
                   max_queue_delay=delay, instances=instances)


def capacity(instances):
    return instances * B / (BASE + PER_ITEM * B)


# ------------------------------------------------------------------------------------------
# M/M/1: p99 of the sojourn time is exactly ln(100) / (mu - lambda)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("peer, requests", [(peers.simpy_mm1, 400_000),
                                            (peers.ciw_mm1, 200_000)])
def test_mm1_p99_matches_exact(peer, requests):
    lam, mu = 800.0, 1000.0
    sojourn = peer(lam, mu, requests, seed=7)
    assert sojourn.shape == (requests,) and np.all(sojourn > 0)
    exact = np.log(100) / (mu - lam)
    p99, half = batch_means(sojourn, 0.99)
    _, half95 = batch_means(sojourn, 0.99, level=0.95)
    assert half95 < 0.15 * exact, f"CI too wide to test anything: +/-{half95 / exact:.1%}"
    assert abs(p99 - exact) <= half, (f"{peer.__name__} p99 {p99 * 1e3:.3f} ms vs exact "
                                      f"{exact * 1e3:.3f} ms, 99% CI +/-{half * 1e3:.3f} ms")


def test_peers_are_reproducible():
    a = peers.simpy_mm1(800.0, 1000.0, 2_000, seed=3)
    b = peers.simpy_mm1(800.0, 1000.0, 2_000, seed=3)
    c = peers.ciw_mm1(800.0, 1000.0, 2_000, seed=3)
    d = peers.ciw_mm1(800.0, 1000.0, 2_000, seed=3)
    e = peers.simpy_batching_node(900.0, BASE, PER_ITEM, B, 1e-3, 2, 2_000, seed=3)
    f = peers.simpy_batching_node(900.0, BASE, PER_ITEM, B, 1e-3, 2, 2_000, seed=3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)
    np.testing.assert_array_equal(e, f)
    assert c.shape == (2_000,) and e.shape == (2_000,)


# ------------------------------------------------------------------------------------------
# the batching node: deterministic cases first, then Poisson statistics against qmodel
# ------------------------------------------------------------------------------------------
def test_batching_node_hand_worked_case():
    """B = 4, D = 1 ms, S(k) = 2 + 0.5 k ms, one instance; sojourns worked out by hand."""
    ms = 1e-3
    times = np.array([0.0, 1.5, 1.6, 1.7, 1.8, 8.0, 8.2, 20.0, 20.1, 20.2, 20.3,
                      21.0, 22.0, 23.0, 23.5, 24.0]) * ms
    expected = np.array([
        3.5,                      # alone: waits its full delay, leaves at 1, done at 3.5
        6.0, 5.9, 5.8, 5.7,       # queued behind it; delay exceeded at 3.5, batch of 4 -> 7.5
        4.0, 3.8,                 # 2 pending when the delay of the one at 8.0 runs out -> 12
        4.3, 4.2, 4.1, 4.0,       # the 4th arrival makes B: leaves at 20.3 -> 24.3
        7.3, 6.3, 5.3, 4.8,       # 5 queued while busy: at 24.3 the oldest 4 go -> 28.3
        6.8,                      # the 5th waits for the instance: 28.3 -> 30.8
    ]) * ms
    # qmodel simulates at least 100 requests: pad with lone requests 50 ms apart, each of
    # which waits its delay and runs alone (1 + 2.5 ms)
    times = np.concatenate([times, 100 * ms + 50 * ms * np.arange(84)])
    expected = np.concatenate([expected, np.full(84, 3.5 * ms)])
    args = (None, 2 * ms, 0.5 * ms, 4, 1 * ms, 1, None, None)
    np.testing.assert_allclose(peers.simpy_batching_node(*args, times=times), expected,
                               rtol=0, atol=1e-12)
    model = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms), max_batch_size=4,
                    max_queue_delay=1 * ms)
    r = qm.simulate(model, arrivals=qm.Trace(times), replicas=1, warmup=0.0, seed=0)
    np.testing.assert_allclose(np.asarray(r.samples, float), np.sort(expected),
                               rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("delay, instances, load", [(1e-3, 1, 0.65), (0.0, 1, 0.65),
                                                    (2e-3, 2, 0.8), (5e-4, 3, 0.9)])
def test_batching_node_replays_a_trace_like_qmodel(delay, instances, load):
    """The same arrivals give the same sojourn times, request for request (sorted)."""
    rng = np.random.default_rng(11)
    times = np.cumsum(rng.exponential(1 / (load * capacity(instances)), 5_000))
    mine = peers.simpy_batching_node(None, BASE, PER_ITEM, B, delay, instances, None, None,
                                     times=times)
    r = qm.simulate(node(delay, instances), arrivals=qm.Trace(times), replicas=1, warmup=0.0,
                    seed=0)
    # qmodel keeps its samples in float32
    np.testing.assert_allclose(np.asarray(r.samples, float), np.sort(mine), rtol=1e-6,
                               atol=1e-12)


def _compare_with_qmodel(delay, instances, load, requests, seed, width=0.05):
    rate = load * capacity(instances)
    mine = peers.simpy_batching_node(rate, BASE, PER_ITEM, B, delay, instances, requests, seed)
    r = qm.simulate(node(delay, instances), rate=rate, seed=seed, requests=4 * requests)
    for p in (0.5, 0.95, 0.99):
        centre, half = batch_means(mine, p)
        lo, hi = r.ci(p, level=LEVEL)
        both = np.hypot(half, (hi - lo) / 2)
        assert both < width * centre, f"p{p * 100:g} CIs too wide: +/-{both / centre:.1%}"
        assert abs(centre - r.quantile(p)) <= both, (
            f"p{p * 100:g}: SimPy {centre * 1e3:.4f} ms +/- {half * 1e3:.4f}, qmodel "
            f"{r.quantile(p) * 1e3:.4f} ms [{lo * 1e3:.4f}, {hi * 1e3:.4f}]")


def test_batching_node_matches_qmodel_poisson():
    _compare_with_qmodel(delay=1e-3, instances=1, load=0.65, requests=400_000, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("delay, instances, load, width", [(2e-3, 2, 0.7, 0.05),
                                                           (0.0, 1, 0.65, 0.05),
                                                           (1e-3, 1, 0.9, 0.10)])
def test_batching_node_matches_qmodel_poisson_more(delay, instances, load, width):
    # near saturation (90%) the p99 interval is about +/-6% at this length
    _compare_with_qmodel(delay, instances, load, requests=1_000_000, seed=2, width=width)
