"""qm.Autoscaler: the Horizontal Pod Autoscaler's control loop, replayed; its schedule and
manifest."""

import numpy as np
import pytest

import qmodel as qm
from qmodel.autoscaler import FluidCohorts

CAP = 1000.0                     # a pod serves 1,000 req/s at most


def util(x):
    return np.asarray(x) / CAP


def test_a_step_settles_at_the_pods_the_target_asks_for():
    # the metric read at each decision (no averaging window): the arithmetic is exact
    hpa = qm.Autoscaler(target=0.5, scale_up_delay=60, min_pods=1, max_pods=50,
                        metric_window=0)
    s = hpa.run(qm.Traffic([0, 600, 2400], [2000.0, 6000.0]), util, CAP)
    # 2,000 req/s: 4 pods at 0.5; 6,000: 1 / 0.5 (a pod capped at 1) asks for 8, then
    # 0.75 / 0.5 of 8 for 12, at 0.5
    assert s.ready_at(590.0) == 4 and s.ready_at(2390.0) == 12
    # decisions every 15 s; pods serve 60 s after the decision that asked for them
    ups = [(t, r, q) for t, r, q in s.changes() if q > r]
    first_decision = ups[0][0]
    assert first_decision % 15 == 0 and 600 <= first_decision <= 600 + 15
    assert s.ready_at(first_decision + 59.9) == 4
    assert s.ready_at(first_decision + 60.0) > 4
    # at most max(4 pods, 100%) more per period
    assert ups[0][2] <= max(2 * 4, 4 + 4)


def test_scale_down_waits_for_the_stabilization_window():
    hpa = qm.Autoscaler(target=0.5, scale_up_delay=30, stabilization=300, min_pods=1)
    s = hpa.run(qm.Traffic([0, 900, 2000], [6000.0, 1000.0]), util, CAP)
    # 6,000 req/s starts at the fewest pods within the tolerance: 11 (0.545, 9% above)
    assert s.ready_at(890.0) == 11
    # the rate drops at 900 s: no pod leaves within the next 300 s
    assert s.ready_at(900 + 280.0) == 11
    assert s.ready_at(1990.0) == 2


def test_within_the_tolerance_nothing_changes_and_the_bounds_hold():
    hpa = qm.Autoscaler(target=0.5, tolerance=0.1, min_pods=2, max_pods=6)
    # 4 pods at 2,100 req/s: 0.525, 5% above the target
    s = hpa.run(qm.Traffic.constant(2100.0, 600.0), util, CAP, start_pods=4)
    assert s.changes() == [(0.0, 4, 4)]
    low = hpa.run(qm.Traffic.constant(10.0, 900.0), util, CAP, start_pods=4)
    assert low.ready_at(890.0) == 2
    high = hpa.run(qm.Traffic.constant(20_000.0, 900.0), util, CAP, start_pods=4)
    assert high.requested.max() == 6


def test_pods_working_off_a_backlog_read_busy():
    """Below capacity but draining a backlog, a pod is busy all the time: utilization 1, as
    a real HPA reads it, so the autoscaler adds pods."""
    hpa = qm.Autoscaler(target=0.9, scale_up_delay=30, min_pods=1)
    s = hpa.run(qm.Traffic([0, 300, 320, 900], [950.0, 1500.0, 950.0]), util, CAP,
                start_pods=1)
    assert s.ready.max() >= 2


def test_an_overload_is_followed_as_a_fluid_and_counted_in_flight():
    f = FluidCohorts(CAP)
    f.add(2)
    f.step(1500.0, 10.0)
    assert f.backlog == 2 * 500 * 10
    f.add(2)
    f.step(750.0, 4.0)
    assert [c.backlog for c in f.cohorts] == [5000 - 250 * 4, 0.0]
    f.remove(3)
    assert f.pods == 1 and f.backlog == 4000
    in_flight = qm.Autoscaler(metric="in_flight", target=20.0, scale_up_delay=60, max_pods=40)
    # in flight: x / (1000 - x) per pod (M/M/1 by Little's law); the backlog adds to it
    s = in_flight.run(qm.Traffic([0, 120, 600], [1500.0, 4000.0]),
                      lambda x: np.asarray(x) / (CAP - np.asarray(x)), CAP, start_pods=2)
    assert s.ready_at(600 - 1) * CAP > 4000


def test_the_schedule_counts_pods_and_their_seconds():
    s = qm.PodSchedule([0.0, 100.0], [2, 3], [3, 3], end=200.0)
    assert s.pod_seconds() == 600.0 and s.pod_seconds(50, 150) == 300.0
    assert s.most == 3 and s.ready_at([50.0, 150.0]).tolist() == [2, 3]
    with pytest.raises(ValueError, match="requested pods include the ready ones"):
        qm.PodSchedule([0.0], [3], [2], end=10.0)
    with pytest.raises(ValueError, match="end must follow them"):
        qm.PodSchedule([0.0, 5.0], [1, 1], [1, 1], end=5.0)


def test_the_manifest_is_an_autoscaling_v2_hpa():
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the manifest back")
    hpa = qm.Autoscaler(metric="in_flight", target=12.5, min_pods=2, max_pods=16,
                        stabilization=240, scale_up_delay=120)
    doc = yaml.safe_load(hpa.manifest("recommender", deployment="triton"))
    assert doc["apiVersion"] == "autoscaling/v2" and doc["kind"] == "HorizontalPodAutoscaler"
    spec = doc["spec"]
    assert spec["scaleTargetRef"]["name"] == "triton"
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 16)
    metric = spec["metrics"][0]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] == "triton_in_flight"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "12500m"}
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 240
    with pytest.raises(ValueError, match="Autoscaler.target is None"):
        qm.Autoscaler().manifest("m")
    # quantities Kubernetes reads exactly; a tolerance other than 0.1 written where it applies
    odd = yaml.safe_load(qm.Autoscaler(metric="in_flight", target=12345.6789,
                                       tolerance=0.2).manifest("m"))
    assert odd["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "12345.6789"
    assert odd["spec"]["behavior"]["scaleUp"]["tolerance"] == 0.2
    for policy in odd["spec"]["behavior"]["scaleUp"]["policies"]:
        assert isinstance(policy["periodSeconds"], int) and 0 < policy["periodSeconds"] <= 1800


@pytest.mark.parametrize("kwargs, message", [
    (dict(scale_up_delay=90_000), "90000 s is more than an hour: qmodel takes seconds"),
    (dict(scale_up_delay=-1), "scale_up_delay=-1 s must be >= 0"),
    (dict(target=60), "a utilization target is a fraction in"),
    (dict(metric="cpu"), "Autoscaler.metric='cpu'"),
    (dict(min_pods=5, max_pods=2), "min_pods=5 exceeds max_pods=2"),
    (dict(min_pods=0), "min_pods must be a whole number >= 1"),
    (dict(sync_period=0), "sync_period=0 s must be whole seconds from 1 to 1800"),
    (dict(sync_period=0.5), "sync_period=0.5 s must be whole seconds"),
    (dict(stabilization=7200), "stabilization=7200 s must be whole seconds from 0 to 3600"),
    (dict(scale_up_delay=0.09), "is under a second, shorter than any pod start"),
    (dict(metric="in_flight", target=1e-4), "at least 0.001"),
    (dict(tolerance=1.5), "tolerance=1.5 must be in"),
    (dict(scale_up_delay="90s"), "scale_up_delay must be a finite number"),
])
def test_bad_autoscalers_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qm.Autoscaler(**kwargs)
