"""The two engines implement one rule: on the same arrivals they must agree exactly.

With deterministic service the only randomness is in the arrivals and the static routing, which
both engines draw identically from the seed, so every sojourn time must match bit for bit.
"""

import numpy as np
import pytest

import qmodel as qm

SVC = qm.ServiceTime.affine(2.4e-3, 0.54e-3)
KNOBS = [
    dict(max_batch_size=8, max_queue_delay=2e-3, preferred_batch_sizes=(4,), instances=2),
    dict(max_batch_size=32, instances=4),
    dict(max_batch_size=7, preferred_batch_sizes=(2, 4)),
    dict(max_batch_size=1, instances=3),
    dict(max_batch_size=16, max_queue_delay=5e-3, preferred_batch_sizes=(3, 7, 12), instances=3),
]


def systems(knobs):
    node = qm.Node(SVC, **knobs)
    other = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=5, instances=2)
    return [
        node,
        qm.Cluster(node, count=3, router="round_robin"),
        qm.Cluster(node, count=3, router="random", weights=[5, 3, 2]),
        qm.Cluster([node, other], router="random"),
    ]


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_engines_agree_exactly(knobs):
    for system in systems(knobs):
        cluster = system if isinstance(system, qm.Cluster) else qm.Cluster(system)
        rate = 0.7 * cluster.capacity
        a = qm.simulate(system, rate=rate, requests=20_000, seed=3, engine="lookahead")
        b = qm.simulate(system, rate=rate, requests=20_000, seed=3, engine="events")
        assert np.array_equal(a.samples, b.samples), cluster.describe()
        assert a.batch_size_distribution == b.batch_size_distribution
        assert a.utilization == pytest.approx(b.utilization, rel=1e-12)
        assert a.throughput == pytest.approx(b.throughput, rel=1e-12)


def test_same_seed_same_result_and_other_seed_differs():
    node = qm.Node(qm.ServiceTime.affine(2e-3, 5e-4, jitter=("lognormal", 0.3)),
                   max_batch_size=8, max_queue_delay=1e-3, instances=2)
    a = qm.simulate(node, rate=2000.0, requests=50_000, seed=11)
    b = qm.simulate(node, rate=2000.0, requests=50_000, seed=11)
    c = qm.simulate(node, rate=2000.0, requests=50_000, seed=12)
    assert np.array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, c.samples)


def test_progress_callback_reaches_the_end():
    seen = []
    node = qm.Node(SVC, max_batch_size=8)
    qm.simulate(node, rate=500.0, requests=20_000, seed=1, progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)
    seen.clear()
    qm.simulate(qm.Cluster(node, count=2, router="least_outstanding"), rate=500.0,
                requests=20_000, seed=1, progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)


def test_auto_backend_is_numpy():
    # CuPy runs the engines slower than NumPy (benchmarks/results/gpu-h100-2026-11-25), so
    # "auto" must not pick it even where a GPU answers
    r = qm.simulate(qm.Node(SVC), rate=100.0, requests=5_000, seed=1)
    assert r.accuracy.simulation.backend == "numpy"


def test_cupy_backend_matches_numpy_statistically():
    pytest.importorskip("cupy")
    if not qm.sim.gpu_available():
        pytest.skip("no usable GPU")
    node = qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3)
    a = qm.simulate(node, rate=0.7 * node.capacity, requests=1_000_000, seed=1, backend="numpy")
    b = qm.simulate(node, rate=0.7 * node.capacity, requests=1_000_000, seed=1, backend="cupy")
    lo_a, hi_a = a.ci(0.99)
    lo_b, hi_b = b.ci(0.99)
    assert lo_a <= hi_b and lo_b <= hi_a


def test_progress_bar_renders_to_stderr(capsys):
    qm.simulate(qm.Node(SVC, max_batch_size=8), rate=500.0, requests=20_000, seed=1,
                progress=True)
    err = capsys.readouterr().err
    assert "simulating 20,000 requests" in err and "100%" in err
