"""The measured window of ``qmodel.simulate``: what is counted inside it."""

import numpy as np
import pytest

import qmodel as qm
from qmodel.sim.window import busy_time

aff = qm.ServiceTime.affine
ENGINES = ("lookahead", "events")


def test_busy_time_clips_each_batch_to_the_window():
    # window [2, 10): a batch before it, one straddling each edge, one inside, one after it
    start = np.array([0.0, 1.0, 4.0, 9.0, 12.0])
    service = np.array([1.0, 3.0, 3.0, 3.0, 1.0])
    busy = busy_time(np, start, service, 2.0, 10.0)
    assert busy.tolist() == [0.0, 2.0, 3.0, 1.0, 0.0]
    # finished lanes of the look-ahead engine record start +inf and service 0: no busy time
    assert busy_time(np, np.array([np.inf]), np.array([0.0]), 2.0, 10.0).tolist() == [0.0]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_utilization_of_long_jittery_batches_stays_at_most_one(engine, seed):
    # Before: 1.11 to 1.31; batches that start in the window counted their whole service,
    # which with lognormal cv 1.5 often runs far past its end.
    node = qm.Node(aff(0.0152, 0.0175, jitter=("lognormal", 1.5)), max_batch_size=32,
                   instances=8)
    with pytest.warns(UserWarning, match="replicas leave"):
        r = qm.simulate(node, rate=0.95 * node.capacity, requests=2000, seed=seed,
                        engine=engine)
    assert 0.0 <= r.utilization <= 1.0


@pytest.mark.parametrize("engine", ENGINES)
def test_utilization_with_a_non_monotone_table_stays_at_most_one(engine):
    # Before: 25.2. Batches of 2 take half a second, 250 times a batch of 4.
    node = qm.Node(qm.ServiceTime.table({1: 1e-3, 2: 0.5, 4: 2e-3}), max_batch_size=4)
    r = qm.simulate(node, rate=0.3 * node.capacity, requests=100, seed=1, engine=engine)
    assert 0.0 <= r.utilization <= 1.0


@pytest.mark.parametrize("engine", ENGINES)
def test_utilization_is_the_busy_fraction_of_the_window(engine):
    # One replica of a recorded trace: replay gives every batch, from which the busy time
    # inside [t_warm, t_end] follows by hand.
    node = qm.Node(aff(2e-3, 5e-4, jitter=("lognormal", 1.0)), max_batch_size=8,
                   max_queue_delay=1e-3, instances=3)
    times = np.cumsum(np.random.default_rng(5).exponential(1 / 2500.0, 20_000))
    r = qm.simulate(node, arrivals=qm.Trace(times), replicas=1, seed=7, engine=engine)
    rep = qm.replay(node, times, seed=7, engine=engine)
    t_warm, t_end = times[int(0.1 * times.size)], times[-1]
    end = rep.batch_start + rep.batch_service
    busy = np.clip(np.minimum(end, t_end) - np.maximum(rep.batch_start, t_warm), 0, None)
    assert r.utilization == pytest.approx(busy.sum() / (3 * (t_end - t_warm)), rel=1e-12)
