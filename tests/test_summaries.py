"""The campaigns' groups and figures (qmodel.campaign.summaries) on the stored results: the
groups the scripts' summaries and the docs' tables print partition the rows they claim to, and
the router grid's classes agree with the router registry."""

import pytest

from qmodel.campaign.results import stored_results
from qmodel.campaign.summaries import (batch_size_groups, figures, grid_groups, router_class,
                                       router_groups, several_instance_groups,
                                       single_instance_groups)
from qmodel.routers import router_policy
from qmodel.theory.measured import DESCRIPTIONS


def _ids(groups):
    return sorted(id(r) for g in groups for r in g.rows)


def test_figures_of_errors():
    f = figures([0.02, -0.05, 0.01, 0.03])
    assert (f.count, f.low, f.high, f.signed_worst, f.worst) == (4, -0.05, 0.03, -0.05, 0.05)
    assert f.median == pytest.approx(0.025)


def test_the_grid_groups_partition_its_rows():
    rows = stored_results("predict_accuracy.json")
    groups = grid_groups(rows)
    families = [g for g in groups if "," not in g.name]
    by_instances = [g for g in groups if g.name.startswith("approximation, ")]
    assert _ids(families) == sorted(map(id, rows))
    assert _ids(by_instances) == sorted(id(r) for r in rows if r["family"] == "approximation")
    for g in groups:
        assert g.figures["p99"].count == len(g.rows) and 0 <= min(g.figures["in_ci"])


def test_holdout_and_batch_size_groups_partition_their_rows():
    rows = stored_results("single_instance_holdout.json")
    assert _ids(single_instance_groups(rows)) == sorted(map(id, rows))
    rows = stored_results("batch_size_accuracy.json")
    assert _ids(batch_size_groups(rows)) == sorted(map(id, rows))
    rows = stored_results("multi_instance_holdout.json")
    groups = several_instance_groups(rows, [2])
    assert groups[0].name == "all" and len(groups[0].rows) == len(rows)
    assert _ids(groups[1:]) == sorted(map(id, rows))


def test_router_classes_follow_the_registry():
    rows = [r for r in stored_results("router_accuracy_full.json") if "declined" not in r]
    groups = router_groups(rows)
    assert _ids(groups) == sorted(map(id, rows))
    for r in rows:
        c = router_class(r)
        # a measured family only inside predict's domain; every family is one predict states
        assert c.family is None or (c.in_predict and c.family in DESCRIPTIONS)
        if router_policy(r["router"]).static:
            assert c.in_predict and c.model is None
        elif c.in_predict and c.family != "power_of_two_mean_field":
            assert c.model == ("balanced" if r["B"] == 1 else "as round robin")
