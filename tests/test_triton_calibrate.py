"""qmodel.triton.calibrate on the real run of tests/data/triton, compared with what
perf_analyzer measured; Node.overhead in predict and simulate (issue 22, item 2)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import qmodel as qm
from qmodel.triton import calibrate, read_perf_analyzer, read_stats

pytest.importorskip("tritonclient.grpc", reason="the [triton] extra is not installed")

DATA = Path(__file__).parent / "data" / "triton"
STATS = (DATA / "stats_before.json", DATA / "stats_after.json")
METRICS = (DATA / "metrics_before.txt", DATA / "metrics_after.txt")
LEVELS = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def errors(node, row):
    """predict's p50/p95/p99 at the measured throughput, relative to perf_analyzer's."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")         # a calibrated node extrapolates nothing
        r = qm.predict(node, rate=row.throughput)
    return {name: r.quantile(q) / getattr(row, name) - 1 for name, q in LEVELS}


def test_calibrated_node_takes_each_quantity_from_its_source():
    node = calibrate(DATA / "config.pbtxt", STATS, perf_analyzer=DATA / "perf_analyzer.csv")
    s = read_stats(*STATS)
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    assert (node.max_batch_size, node.max_queue_delay, node.instances) == (8, 2e-3, 1)
    for k, seconds in s.batch_time().items():
        if s.executions[k] >= 5:
            assert node.service.mean(k) == pytest.approx(seconds)
    assert node.overhead == pytest.approx(row.client_send + row.network + row.client_recv)
    c = node.calibration
    assert "perf_analyzer" in c.overhead and "statistics API" in c.service
    assert "sizes 6-8" in c.service and c.jitter.startswith("unknown")
    assert float(node.service.mean(8)) > float(node.service.mean(5))


def test_calibrated_prediction_against_the_real_server():
    """The done-when comparison: the mean-only model (the statistics' means, nothing else)
    against the calibrated one (the trace's executions, perf_analyzer's time outside the
    batcher, the pickup gap and Triton's prefetching batcher from the trace), at the measured
    rate, on the committed run. Measured here: mean-only p50/p95/p99 -11.6/-17.2/-21.2%,
    calibrated -0.5/+0.6/-1.2%."""
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    mean_only = errors(calibrate(DATA / "config.pbtxt", STATS), row)
    calibrated = errors(calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz",
                                  perf_analyzer=DATA / "perf_analyzer.csv"), row)
    for name, _ in LEVELS:
        assert abs(calibrated[name]) < abs(mean_only[name])
    assert abs(calibrated["p50"]) < 0.03 and abs(calibrated["p99"]) < 0.05
    summary = calibrate(DATA / "config.pbtxt", STATS, metrics=METRICS,
                        perf_analyzer=DATA / "perf_analyzer.csv")
    assert summary.calibration.jitter.startswith("lognormal cv")
    assert abs(errors(summary, row)["p50"]) < abs(mean_only["p50"])


def test_overhead_sources_in_order():
    trace = calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz")
    assert 0 < trace.overhead < 0.5e-3 and "trace" in trace.calibration.overhead
    metrics = calibrate(DATA / "config.pbtxt", STATS, metrics=METRICS)
    assert 0 < metrics.overhead < 0.5e-3 and "metrics" in metrics.calibration.overhead
    none = calibrate(DATA / "config.pbtxt", STATS)
    assert none.overhead == 0 and none.calibration.overhead.startswith("unknown")


@pytest.mark.parametrize("router, count, B", [(None, 1, 8), ("round_robin", 3, 8),
                                              ("least_outstanding", 4, 4),
                                              ("power_of_two", 8, 8)])
def test_overhead_adds_to_every_sojourn_in_predict_and_simulate(router, count, B):
    service = qm.ServiceTime.affine(2e-3, 0.5e-3, jitter=("lognormal", 0.2))
    plain = qm.Node(service, max_batch_size=B, max_queue_delay=1e-3)
    slow = qm.Node(service, max_batch_size=B, max_queue_delay=1e-3, overhead="0.4ms")
    make = (lambda n: n) if router is None else (lambda n: qm.Cluster(n, count=count,
                                                                       router=router))
    rate = 0.6 * make(plain).capacity
    a, b = qm.predict(make(plain), rate=rate), qm.predict(make(slow), rate=rate)
    assert b.p99 - a.p99 == pytest.approx(0.4e-3, abs=1e-9)
    assert b.mean - a.mean == pytest.approx(0.4e-3, abs=1e-9)
    a = qm.simulate(make(plain), rate=rate, requests=60_000, seed=2)
    b = qm.simulate(make(slow), rate=rate, requests=60_000, seed=2)
    assert np.allclose(np.sort(b.samples) - np.sort(a.samples), 0.4e-3, atol=1e-6)
    assert b.utilization == a.utilization


def test_overhead_is_checked():
    with pytest.raises(ValueError, match="Node.overhead"):
        qm.Node(qm.ServiceTime.affine(1e-3), overhead=-1e-3)
    assert "overhead=0.4ms" in qm.Node(qm.ServiceTime.affine(1e-3), overhead=4e-4).describe()


def test_snapshot_pairs_are_checked():
    with pytest.raises(ValueError, match=r"calibrate\(stats=...\) takes the pair \(before, "
                                         r"after\)"):
        calibrate(DATA / "config.pbtxt", str(DATA / "stats_after.json"))
    with pytest.raises(ValueError, match=r"calibrate\(metrics=...\) takes the pair"):
        calibrate(DATA / "config.pbtxt", STATS, metrics=[METRICS[0]])


def test_the_trace_gives_the_pickup_gap_and_the_prefetch_join():
    from qmodel.triton.batcher import pickup_gap, prefetch_join
    from qmodel.triton.trace import read_trace

    trace = read_trace(DATA / "trace.json.gz")
    gap = pickup_gap(trace, 2e-3)
    assert 0 < gap < 0.5e-3
    fraction, joined, late = prefetch_join(trace, 2e-3, largest=8, lag=gap)
    assert (joined, late) == (37, 213) and fraction == pytest.approx(37 / 213)
    node = calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz")
    assert node.prefetch == pytest.approx(fraction)
    assert "37 of the 213" in node.calibration.batcher
    assert f"pickup gap {gap * 1e3:.3f} ms" in node.calibration.service
    # the traced executions keep their spread and take the statistics' mean over the whole
    # run, and every execution carries the gap
    whole = read_stats(*STATS).batch_time()
    ones = np.array(trace.samples()[1])
    assert float(node.service.mean(1)) == pytest.approx(whole[1] + gap)
    assert "scaled to the statistics API's mean" in node.calibration.service
    drawn = np.array(dict(node.service.samples)[1])
    assert np.std(drawn) == pytest.approx(np.std(ones) * whole[1] / np.mean(ones), rel=1e-6)


def test_prefetch_is_left_out_where_triton_does_not_prefetch_or_a_trace_cannot_say():
    without = calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz",
                        prefetch=False)
    assert without.prefetch is None and "prefetch=False" in without.calibration.batcher
    no_trace = calibrate(DATA / "config.pbtxt", STATS)
    assert no_trace.prefetch is None and "no trace" in no_trace.calibration.batcher
    with pytest.raises(ValueError, match="cannot measure prefetching: .*no trace"):
        calibrate(DATA / "config.pbtxt", STATS, prefetch=True)
    limited = (DATA / "config.pbtxt").read_text().replace(
        "max_queue_delay_microseconds: 2000",
        "max_queue_delay_microseconds: 2000\n  default_queue_policy { max_queue_size: 64 }")
    node = calibrate(limited, STATS, trace=DATA / "trace.json.gz")
    assert node.prefetch is None and "turns Triton's prefetching off" in node.calibration.batcher
    with pytest.raises(ValueError, match="prefetch="):
        calibrate(DATA / "config.pbtxt", STATS, prefetch="yes")
