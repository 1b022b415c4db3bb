"""The batch model states its measured error, and the statement matches the campaigns' results."""

import sys
from pathlib import Path

import pytest

import qmodel as qm
from qmodel.theory.measured import (MEASURED, SUMMARIES, family_of, measured_statement,
                                    summary_statement)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
import measured_errors  # noqa: E402

SVC = qm.ServiceTime.affine(base=1.8874e-3, per_item=0.1438e-3)


def test_measured_table_matches_the_stored_campaign_results():
    # a rerun campaign (or a changed pass count) that moves any figure fails here until
    # validation/measured_errors.py's output is pasted over MEASURED
    assert MEASURED == measured_errors.measured()


def test_router_and_multi_server_figures_match_the_campaigns_summaries():
    assert SUMMARIES == measured_errors.summaries()


@pytest.mark.parametrize("system, family", [
    (qm.Cluster(qm.Node(SVC, max_batch_size=8), count=8, router="round_robin"), "round_robin"),
    (qm.Cluster(qm.Node(SVC, max_batch_size=8), count=16, router="power_of_two"),
     "power_of_two (in predict)"),
    (qm.Cluster(qm.Node(qm.ServiceTime.affine(2e-3)), count=8, router="least_outstanding"),
     "least_outstanding (in predict), B = 1 balanced"),
    (qm.Node(qm.ServiceTime.affine(2e-3, jitter=("lognormal", 0.3)), instances=4),
     "GI/G/c fast server"),
])
def test_router_and_multi_server_approximations_state_their_measured_error(system, family):
    r = qm.predict(system, rate=0.7 * system.capacity)
    assert r.accuracy.exactness == "approximation"
    assert summary_statement(family) in r.accuracy.statement


def test_every_family_a_node_can_fall_in_is_measured():
    for c in (1, 2, 8):
        for deterministic in (True, False):
            for delay in (True, False):
                for renewal in (True, False):
                    assert family_of(c, deterministic, delay, renewal) in MEASURED


@pytest.mark.parametrize("node, family", [
    (qm.Node(SVC, max_batch_size=8, instances=2), "several instances, deterministic, no delay"),
    (qm.Node(qm.ServiceTime.affine(1.9e-3, 0.14e-3, jitter=("gamma", 0.2)), max_batch_size=8,
             max_queue_delay=1e-3, instances=3), "several instances, jittery, with a delay"),
    (qm.Node(SVC, max_batch_size=8, max_queue_delay=1e-3), "1 instance, approximation"),
])
def test_an_approximate_result_states_its_familys_measured_error(node, family):
    r = qm.predict(node, rate=0.6 * node.capacity)
    assert r.accuracy.exactness == "approximation"
    assert measured_statement(family) in r.accuracy.statement


def test_a_numerical_result_claims_no_measured_error():
    node = qm.Node(SVC, max_batch_size=8)                 # one instance, no delay: numerical
    r = qm.predict(node, rate=0.6 * node.capacity)
    assert r.accuracy.exactness == "numerical"
    assert "measured on" not in r.accuracy.statement


def test_renewal_arrivals_state_the_renewal_campaigns_figures():
    # one instance, no delay: numerical under Poisson arrivals, an approximation under renewal
    # ones, which borrows no Poisson family's figures
    node = qm.Node(SVC, max_batch_size=8)
    r = qm.predict(node, arrivals=qm.Renewal(0.6 * node.capacity, scv=0.5))
    assert r.accuracy.exactness == "approximation"
    family = family_of(1, deterministic=True, delay=False, renewal=True)
    assert family.startswith("renewal arrivals")
    assert measured_statement(family) in r.accuracy.statement
    assert r.accuracy.statement.count("measured on") == 1


def test_utilisation_above_one_is_capped_and_said():
    # four instances, deterministic service, no delay, 30% load: the model's dispatch epochs
    # come too often (1.105 instance-seconds of service per second and instance; the
    # simulator measures 0.918, validation/results/batch_size_accuracy.txt)
    node = qm.Node(SVC, max_batch_size=8, instances=4)
    r = qm.predict(node, rate=0.3 * node.capacity)
    assert r.utilization == 1.0
    assert "implies a utilisation of 1.1" in r.accuracy.statement
    assert "capped at 1" in r.accuracy.statement


def test_an_unknown_family_is_a_clear_error():
    with pytest.raises(ValueError, match="family must be one of"):
        measured_statement("two instances")
    with pytest.raises(ValueError, match="family must be one of"):
        summary_statement("least_outstanding")
