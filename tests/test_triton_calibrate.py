"""qmodel.triton.calibrate on the real run of tests/data/triton, compared with what
perf_analyzer measured; Node.overhead in predict and simulate (issue 22, item 2)."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import qmodel as qm
from qmodel.triton import calibrate, read_perf_analyzer, read_stats, read_trace
from qmodel.triton.calibrate import (MODELLED_GAP_BASE, MODELLED_GAP_PER_REQUEST,
                                     MODELLED_PREFETCH)

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


def test_without_a_trace_the_gap_is_fitted_to_the_statistics_time_in_the_batcher():
    """With perf_analyzer's throughput, the pickup gap makes the calibrated node's mean
    sojourn (without the time outside the batcher) equal the statistics API's mean queue
    time (which holds the gap) plus the request-weighted mean execution; the same node at
    the line's gap does not."""
    from dataclasses import replace

    node = calibrate(DATA / "config.pbtxt", STATS, perf_analyzer=DATA / "perf_analyzer.csv")
    s = read_stats(*STATS)
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    how, source = node.calibration.origin("pickup gap")
    assert how == "measured" and "mean time in the batcher" in source
    assert "perf_analyzer" in source
    times = s.batch_time()
    k0 = min(k for k in times if s.executions[k] >= 5)
    gap = float(node.service.mean(k0)) - times[k0]
    assert 0 < gap < 0.5 * times[k0]
    requests = sum(k * n for k, n in s.executions.items())
    inside = s.queue + sum(k * n * times[k] for k, n in s.executions.items()) / requests

    def mean(n):
        return qm.predict(replace(n, overhead=0.0), rate=row.throughput).mean

    assert mean(node) == pytest.approx(inside, rel=1e-3)
    line = calibrate(DATA / "config.pbtxt", STATS, perf_analyzer=DATA / "perf_analyzer.csv",
                     gap=MODELLED_GAP_BASE + MODELLED_GAP_PER_REQUEST * (s.mean_batch_size - 1))
    assert abs(mean(line) / inside - 1) > 0.02


def test_with_a_trace_and_a_rate_the_gap_is_fitted_too_and_the_trace_s_is_said():
    """A trace measures the batcher's lag; with the rate known the gap is fitted to the
    statistics' time in the batcher all the same (it also takes up what the model misses of
    the mean), the record giving the trace's own; gap= keeps the trace's."""
    from dataclasses import replace

    from qmodel.triton.batcher import pickup_gap
    from qmodel.triton.trace import read_trace

    trace = read_trace(DATA / "trace.json.gz")
    own = pickup_gap(trace, 2e-3)
    node = calibrate(DATA / "config.pbtxt", STATS, trace=trace,
                     perf_analyzer=DATA / "perf_analyzer.csv")
    s = read_stats(*STATS)
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    how, source = node.calibration.origin("pickup gap")
    assert how == "measured" and "mean time in the batcher" in source
    assert f"the trace, {own * 1e3:.3f} ms" in source
    assert f"fitted to the statistics' queue time; the trace's own {own * 1e3:.3f} ms" \
        in node.calibration.service
    assert node.calibration.origin("jitter") == ("measured", "the trace")
    gap = float(node.service.mean(1)) - s.batch_time()[1]
    assert 0 <= gap < 0.5 * s.batch_time()[1] and abs(gap - own) > 1e-6
    times = s.batch_time()
    requests = sum(k * n for k, n in s.executions.items())
    inside = s.queue + sum(k * n * times[k] for k, n in s.executions.items()) / requests
    assert qm.predict(replace(node, overhead=0.0), rate=row.throughput).mean \
        == pytest.approx(inside, rel=1e-3)
    kept = calibrate(DATA / "config.pbtxt", STATS, trace=trace,
                     perf_analyzer=DATA / "perf_analyzer.csv", gap=own)
    assert kept.calibration.origin("pickup gap")[0] == "given"
    assert float(kept.service.mean(1)) == pytest.approx(times[1] + own)
    # no rate: the trace's gap
    bare = calibrate(DATA / "config.pbtxt", STATS, trace=trace)
    assert bare.calibration.origin("pickup gap") == ("measured", "the trace")
    assert float(bare.service.mean(1)) == pytest.approx(times[1] + own)


CAMPAIGN = Path(__file__).parent.parent / "validation" / "reports" / "triton"


def _run_files(run):
    return dict(config=run / "config.pbtxt",
                stats=(run / "stats_before.json", run / "stats_after.json"),
                metrics=(run / "metrics_before.txt", run / "metrics_after.txt"),
                trace=read_trace(run / "trace.json.gz"), perf_analyzer=run / "perf_analyzer.csv")


def test_with_a_fitted_gap_the_prefetch_share_is_measured_at_that_gap():
    """Found by review: the share a trace gives depends on the gap (a late request is one
    queued after the formed batch's pickup); it is measured at the gap fitted, and
    prefetch=True holds for that gap, not for every gap the fit tries (held-out B 8 with 1
    ms on two instances at 500 req/s was refused)."""
    from qmodel.triton.batcher import pickup_gap, prefetch_join

    files = _run_files(CAMPAIGN / "runs" / "b16-d0.5-i2-cv0.3" / "920-1")
    node = calibrate(**files)
    bare = calibrate(**files, gap=0.0)
    fitted = float(node.service.mean(1) - bare.service.mean(1))
    own = pickup_gap(files["trace"], 0.5e-3)
    assert fitted > own * 1.1
    at_fitted = prefetch_join(files["trace"], 0.5e-3, 16, lag=fitted)[0]
    assert node.prefetch == pytest.approx(at_fitted, abs=1e-12)
    assert abs(prefetch_join(files["trace"], 0.5e-3, 16, lag=own)[0] - at_fitted) > 1e-3
    held = _run_files(CAMPAIGN / "runs-heldout" / "b8-d1-i2" / "500-1")
    assert calibrate(**held, prefetch=True).prefetch == calibrate(**held).prefetch > 0


def test_calibrated_node_takes_each_quantity_from_its_source():
    node = calibrate(DATA / "config.pbtxt", STATS, perf_analyzer=DATA / "perf_analyzer.csv")
    s = read_stats(*STATS)
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    assert (node.max_batch_size, node.max_queue_delay, node.instances) == (8, 2e-3, 1)
    assert node.overhead == pytest.approx(row.client_send + row.network + row.client_recv)
    c = node.calibration
    assert "perf_analyzer" in c.overhead and "statistics API" in c.service
    assert "sizes 6-8" in c.service and c.jitter.startswith("unknown")
    assert float(node.service.mean(8)) > float(node.service.mean(5))
    # the record says, per quantity, measured or modelled and from which source
    assert c.origin("execution means") == ("measured", "the statistics API")
    assert c.origin("overhead") == ("measured", "perf_analyzer")
    assert c.origin("jitter")[0] == "assumed"
    assert c.origin("pickup gap")[0] == "measured"
    # a delay and the default queue policy: Triton prefetches, and no trace measures how much
    assert node.prefetch == MODELLED_PREFETCH and c.origin("prefetch")[0] == "modelled"
    # no trace and no rate (the snapshots alone say nothing of how long they lay apart): the
    # pickup gap is modelled from the mean batch size and joins every execution
    bare = calibrate(DATA / "config.pbtxt", STATS)
    gap = MODELLED_GAP_BASE + MODELLED_GAP_PER_REQUEST * (s.mean_batch_size - 1)
    for k, seconds in s.batch_time().items():
        if s.executions[k] >= 5:
            assert bare.service.mean(k) == pytest.approx(seconds + gap)
    assert bare.calibration.origin("pickup gap")[0] == "modelled"
    assert f"{gap * 1e3:.3f} ms" in bare.calibration.service
    traced = calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz").calibration
    assert traced.origin("pickup gap") == traced.origin("prefetch") == ("measured", "the trace")
    with pytest.raises(KeyError, match="names execution means, jitter"):
        c.origin("speed")


def test_calibrated_prediction_against_the_real_server():
    """The done-when comparison: the mean-only model (the statistics' means, nothing else)
    against the calibrated one (the trace's executions, perf_analyzer's time outside the
    batcher, Triton's prefetching batcher from the trace, the pickup gap fitted to the
    statistics' queue time), at the measured rate, on the committed run. Measured here:
    mean-only p50/p95/p99 -11.6/-17.2/-21.2%, calibrated -0.7/+0.3/-1.4% (with the trace's
    own gap -0.5/+0.6/-1.2%)."""
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    mean_only = errors(calibrate(DATA / "config.pbtxt", STATS, prefetch=False, gap=0.0), row)
    calibrated = errors(calibrate(DATA / "config.pbtxt", STATS, trace=DATA / "trace.json.gz",
                                  perf_analyzer=DATA / "perf_analyzer.csv"), row)
    for name, _ in LEVELS:
        assert abs(calibrated[name]) < abs(mean_only[name])
    assert abs(calibrated["p50"]) < 0.03 and abs(calibrated["p99"]) < 0.05
    summary = calibrate(DATA / "config.pbtxt", STATS, metrics=METRICS,
                        perf_analyzer=DATA / "perf_analyzer.csv")
    assert summary.calibration.jitter.startswith("lognormal cv")
    untraced = errors(summary, row)
    assert abs(untraced["p50"]) < abs(mean_only["p50"])
    assert abs(untraced["p99"]) < abs(mean_only["p99"])


def test_untraced_calibration_meets_the_campaign_medians():
    """Issue 37's target with the traces withheld, from the stored run of
    validation/triton_untraced.py (leave one configuration out): median |error| p50 <= 5%
    and p99 <= 8% over the runs below 0.95 utilization, and better than nothing modelled."""
    import json
    stored = json.loads((Path(__file__).parent.parent / "validation" / "results" /
                         "triton_untraced.json").read_text())
    summary = stored["summary"]
    assert summary["modelled"]["runs"] >= 30
    assert summary["modelled"]["median_p50"] <= 0.05
    assert summary["modelled"]["median_p99"] <= 0.08
    assert summary["modelled"]["median_p99"] < summary["untraced"]["median_p99"]
    # calibrate's own default without a trace: the gap fitted to the statistics' queue time
    assert summary["queue"]["runs"] == summary["modelled"]["runs"]
    assert summary["queue"]["median_p50"] <= 0.05 and summary["queue"]["median_p99"] <= 0.08
    assert summary["queue"]["within_10_15"] >= summary["modelled"]["within_10_15"]
    # with the trace: the gap fitted to the queue time (calibrate's default) against the
    # trace's own gap
    assert summary["traced"]["median_p50"] <= 0.05 and summary["traced"]["median_p99"] <= 0.08
    assert summary["traced"]["within_10_15"] >= summary["trace_gap"]["within_10_15"]


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
    assert no_trace.prefetch == MODELLED_PREFETCH and "no trace" in no_trace.calibration.batcher
    assert calibrate(DATA / "config.pbtxt", STATS, prefetch=True).prefetch == MODELLED_PREFETCH
    no_delay = (DATA / "config.pbtxt").read_text().replace(
        "max_queue_delay_microseconds: 2000", "max_queue_delay_microseconds: 0")
    assert calibrate(no_delay, STATS).prefetch is None
    with pytest.raises(ValueError, match="cannot measure prefetching: no delay"):
        calibrate(no_delay, STATS, prefetch=True)
    # batches of one are full when formed: nothing joins them, so there is no share to keep
    # (sizing would otherwise carry it into planned nodes of larger batches)
    ones = (DATA / "config.pbtxt").read_text().replace("max_batch_size: 8", "max_batch_size: 1")
    node = calibrate(ones, STATS)
    assert node.prefetch is None and node.calibration.origin("prefetch")[0] == "given"
    limited = (DATA / "config.pbtxt").read_text().replace(
        "max_queue_delay_microseconds: 2000",
        "max_queue_delay_microseconds: 2000\n  default_queue_policy { max_queue_size: 64 }")
    node = calibrate(limited, STATS, trace=DATA / "trace.json.gz")
    assert node.prefetch is None and "turns Triton's prefetching off" in node.calibration.batcher
    with pytest.raises(ValueError, match="prefetch="):
        calibrate(DATA / "config.pbtxt", STATS, prefetch="yes")


def _stats_with(sizes, tmp_path):
    """The committed run's statistics snapshots with only ``sizes`` in their batch_stats."""
    import json
    out = []
    for path in STATS:
        d = json.loads(path.read_text())
        for m in d["model_stats"]:
            m["batch_stats"] = [b for b in m["batch_stats"] if b["batch_size"] in sizes]
        target = tmp_path / path.name
        target.write_text(json.dumps(d))
        out.append(target)
    return tuple(out)


def test_one_measured_batch_size_invents_no_service_law(tmp_path):
    # issue 37, defect 1: with batch size 1 alone the table was flat, every S(k) = S(1), and
    # size() planned 1 node at B 64 for 2,000 req/s where B 1 serves 335 req/s
    stats = _stats_with({1}, tmp_path)
    with pytest.raises(ValueError, match=r"only batch size 1 was executed .* S\(k\) of sizes "
                                         r"2-8 is unknown .* calibrate\(service=\.\.\.\)"):
        calibrate(DATA / "config.pbtxt", stats)
    # given the shape of S(k) (a kernel profile's, say), it is scaled to the measured size
    shape = qm.ServiceTime.affine(1e-3, 0.5e-3)
    node = calibrate(DATA / "config.pbtxt", stats, service=shape, gap=0.0)
    s1 = read_stats(*stats).batch_time()[1]
    assert float(node.service.mean(1)) == pytest.approx(s1)
    assert float(node.service.mean(8)) == pytest.approx(s1 * 5e-3 / 1.5e-3)
    assert "given service law's shape" in node.calibration.service
    assert "sizes 2-8" in node.calibration.service
    with pytest.raises(ValueError, match="takes a ServiceTime"):
        calibrate(DATA / "config.pbtxt", stats, service=3e-3)


def test_a_line_below_the_origin_is_fitted_through_it_not_through_size_one():
    # issue 37, defect 1: sizes 8/16/32 whose line meets the axis below 0 gave S(7) = 4 ms and
    # S(8) = 1 ms (the fallback assumed the smallest size was 1)
    from qmodel.profiling import fit_line
    base, per_item = fit_line([8, 16, 32], [1e-3, 2.5e-3, 6e-3])
    assert base == 0.0 and per_item > 0
    S = [base + per_item * k for k in range(1, 33)]
    assert all(b > a for a, b in zip(S, S[1:]))
    assert S[7] == pytest.approx(1e-3, rel=0.5)                 # S(8) near its measured mean
    with pytest.raises(ValueError, match="at least two batch sizes"):
        fit_line([8, 8], [1e-3, 1.1e-3])


def test_the_record_says_which_sizes_were_extrapolated(tmp_path):
    node = calibrate(DATA / "config.pbtxt", _stats_with({2, 3, 4}, tmp_path))
    assert "sizes 1, 5-8 (too rarely executed)" in node.calibration.service
    assert "sizes 1, 5-8 extrapolated beyond the measured 2-4" in node.calibration.service


@pytest.mark.parametrize("cv", [0.3, 2.5])
def test_the_summary_jitter_fit_does_not_stop_at_cv_1_5(cv):
    # issue 37, defect 4: the grid ended at 1.5 and a wider spread came back as 1.5, unsaid
    from scipy import stats as sps
    from qmodel.triton.calibrate import _summary_jitter
    sigma = np.sqrt(np.log1p(cv * cv))
    quantiles = {p: float(np.exp(-sigma * sigma / 2 + sigma * sps.norm.ppf(p)) * 1e-3)
                 for p in (0.5, 0.9, 0.95, 0.99)}
    assert _summary_jitter({4: 100}, {4: 1e-3}, quantiles) == pytest.approx(cv, abs=0.01)


def _two_instance_trace(gap, n=2000, seed=4):
    """Two instances always busy: each starts its next batch ``gap`` after freeing."""
    from qmodel.triton.trace import TritonTrace
    rng = np.random.default_rng(seed)
    free = [0.0, 0.37e-3]
    starts, executions = [], []
    for i in range(n):
        k = int(np.argmin(free))
        start = free[k] + (gap if i >= 2 else 0.0)
        run = float(rng.uniform(1e-3, 3e-3))
        starts.append(start)
        executions.append(run)
        free[k] = start + run
    starts = np.array(starts)
    return TritonTrace(model="m", starts=starts, sizes=np.ones(n, int),
                       executions=np.array(executions), waits=np.zeros(n),
                       outside=np.zeros(n), queued=starts - 5e-3, batch=np.arange(n),
                       dropped=0)


def test_the_pickup_gap_over_two_instances_is_the_instance_own():
    # issue 37, defect 2: the latest completion on any instance made a true 0.1 ms gap
    # come out short; matching each batch to the instance that freed first recovers it
    from qmodel.triton.batcher import pickup_gap
    assert pickup_gap(_two_instance_trace(0.1e-3), 0.0) == pytest.approx(0.1e-3, rel=1e-6)


def _trace_of(batches):
    """A TritonTrace of batches given as (size, execution seconds), back to back, each
    request queued 0.1 ms before its batch starts."""
    from qmodel.triton.trace import TritonTrace
    sizes = np.array([k for k, _ in batches])
    executions = np.array([x for _, x in batches])
    starts = np.concatenate([[0.0], np.cumsum(executions[:-1] + 1e-3)])
    batch = np.repeat(np.arange(sizes.size), sizes)
    return TritonTrace(model="affine", starts=starts, sizes=sizes, executions=executions,
                       waits=np.full(batch.size, 1e-4), outside=np.zeros(batch.size),
                       queued=starts[batch] - 1e-4, batch=batch, dropped=0)


def test_a_size_the_statistics_saw_often_keeps_its_mean_when_rarely_traced():
    # issue 37, defect 3: sizes 3-5, executed 584, 206 and 45 times over the run but traced
    # fewer than 5 times, took the line fitted to sizes 1 and 2 instead of their means
    rng = np.random.default_rng(5)
    batches = [(k, float(rng.uniform(2.5e-3, 3.5e-3)) * (1 + 0.2 * k))
               for k in (1, 2) for _ in range(30)] + [(4, 4e-3)] * 3
    node = calibrate(DATA / "config.pbtxt", STATS, trace=_trace_of(batches), prefetch=False)
    whole = read_stats(*STATS).batch_time()
    for k in (1, 2, 3, 4, 5):
        assert float(node.service.mean(k)) == pytest.approx(whole[k], rel=1e-9)
    assert "sizes [3, 4, 5] (executed often, traced rarely)" in node.calibration.service


def test_each_size_first_execution_may_be_a_cold_start():
    # issue 37, defect 3: only the first c - 1 batches were dropped as cold; a GPU backend
    # compiles per batch shape, so each size's first execution can be 10-19 times its median
    batches = [(1, 3e-3)] * 20 + [(2, 40e-3)] + [(2, 4e-3)] * 20
    node = calibrate(DATA / "config.pbtxt", STATS, trace=_trace_of(batches), prefetch=False)
    assert "1 left out as cold starts" in node.calibration.service
    drawn = dict(node.service.samples)[2]
    assert max(drawn) < 2 * min(drawn)          # the 40 ms cold start is not among them


def test_the_jitter_fit_at_its_bound_gives_a_law_not_an_error():
    # issue 37, review: the second grid ended at 10.000000000000007, above the largest cv a
    # jitter law takes, and calibrate raised instead of saying it stopped at the bound
    from scipy import stats as sps
    from qmodel.triton.calibrate import MAX_JITTER_CV, _summary_jitter
    sigma = np.sqrt(np.log1p(30.0 ** 2))
    quantiles = {p: float(np.exp(-sigma * sigma / 2 + sigma * sps.norm.ppf(p)) * 1e-3)
                 for p in (0.5, 0.9, 0.95, 0.99)}
    cv = _summary_jitter({4: 100}, {4: 1e-3}, quantiles)
    assert cv == MAX_JITTER_CV
    qm.ServiceTime.affine(1e-3, jitter=("lognormal", cv))          # a law takes it


def test_a_size_of_weight_zero_is_not_a_measured_size():
    from qmodel.profiling import fit_line
    with pytest.raises(ValueError, match="at least two batch sizes"):
        fit_line([1, 8], [1e-3, 3e-3], [10, 0])


@pytest.mark.parametrize("gap, expected", [(np.float32(1e-4), 1e-4), (np.int64(0), 0.0),
                                           ("0.1ms", 1e-4), ("100us", 1e-4)])
def test_a_given_gap_takes_numbers_and_units(gap, expected):
    node = calibrate(DATA / "config.pbtxt", STATS, gap=gap)
    s1 = read_stats(*STATS).batch_time()[1]
    assert float(node.service.mean(1)) == pytest.approx(s1 + expected, rel=1e-6)
    assert node.calibration.origin("pickup gap")[0] == "given"


@pytest.mark.parametrize("gap, message", [
    (0.1, r"gap=0.1 s\) is longer than the shortest mean execution .*'0.1ms'"),
    (-1e-4, "negative"), (float("nan"), "not finite"), (True, "number of seconds"),
    ("soon", "not a duration")])
def test_a_bad_gap_says_what_to_give(gap, message):
    with pytest.raises(ValueError, match=message):
        calibrate(DATA / "config.pbtxt", STATS, gap=gap)


def test_the_modelled_constants_are_the_stored_fit():
    """calibrate's MODELLED_* are validation/triton_untraced.py's fit over the campaign's
    traced runs, as stored by its last --write (to the digits the constants carry)."""
    import json
    stored = json.loads((Path(__file__).parent.parent / "validation" / "results" /
                         "triton_untraced.json").read_text())["fit"]
    assert stored["runs"] == 72
    assert MODELLED_PREFETCH == pytest.approx(stored["prefetch"], abs=5e-4)
    assert MODELLED_GAP_BASE == pytest.approx(stored["gap_base"], abs=5e-8)
    assert MODELLED_GAP_PER_REQUEST == pytest.approx(stored["gap_per_request"], abs=5e-8)


def test_statistics_and_perf_analyzer_of_two_runs_are_refused(tmp_path):
    """Found by review: the gap was fitted at one run's rate to another run's queue time
    (0 or its bound, silently). One run's statistics and perf_analyzer's server queue agree
    within 3% on the 165 committed runs."""
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    text = (DATA / "perf_analyzer.csv").read_text()
    queue_us = f"{row.queue * 1e6:g}"
    assert queue_us in text
    other = tmp_path / "other.csv"
    other.write_text(text.replace(queue_us, f"{row.queue * 4e6:g}", 1))
    with pytest.raises(ValueError, match="differ by more than half: give the statistics "
                                         "snapshots and the perf_analyzer CSV of one run"):
        calibrate(DATA / "config.pbtxt", STATS, perf_analyzer=other)


def test_a_series_alone_gives_the_rate_the_gap_is_fitted_at():
    """Without perf_analyzer the polled series' requests over its span are the rate."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_drift import polled_series

    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.5e-3), max_batch_size=8,
                   max_queue_delay=2e-3)
    series = polled_series(node, 600.0, 20.0, 0.1, seed=11, queue=3e-3)
    out = calibrate(DATA / "config.pbtxt", series=series)
    how, source = out.calibration.origin("pickup gap")
    assert how == "measured" and "polled statistics' requests over their span" in source
    rate = float(source.split(" req/s")[0].rsplit(" ", 1)[1])
    assert rate == pytest.approx(600.0, rel=0.05)
