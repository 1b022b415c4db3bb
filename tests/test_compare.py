"""compare_routers: one cluster under every router, predicted where modelled, else simulated."""

import pytest

import qmodel as qm
from qmodel.compare import compare_routers, router_table


def test_routers_without_a_model_are_simulated_on_request():
    # least outstanding over batches of at most 2: no model (round robin's is up to 2x off)
    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3), max_batch_size=2, max_queue_delay=1e-3)
    rate = 0.6 * 2 * node.capacity
    rows = compare_routers(node, 2, rate, routers=("random", "least_outstanding"))
    assert rows[0].predicted is not None and rows[0].simulated is None
    assert rows[1].predicted is None and rows[1].best is None
    assert "not predicted" in rows[1].note
    text = router_table(rows)
    assert "lowest p99: random" in text and "least_outstanding" in text
    rows = compare_routers(node, 2, rate, routers=("random", "least_outstanding"),
                           requests=200_000, seed=2)
    assert rows[1].best is rows[1].simulated
    # the simulated random split agrees with its exact prediction (99% CI + lattice step)
    lo, hi = rows[0].simulated.ci(0.99, level=0.99)
    h = max(part.h for part in rows[0].predicted.parts)
    assert lo - h <= rows[0].predicted.p99 <= hi + h


def test_bad_input():
    node = qm.Node(qm.ServiceTime.affine(2e-3), max_batch_size=4)
    with pytest.raises(ValueError, match="Node"):
        compare_routers(qm.Cluster(node, count=2), 2, 100.0)
    with pytest.raises(ValueError, match="count"):
        compare_routers(node, 0, 100.0)
    with pytest.raises(ValueError, match="at least one"):
        router_table([])
