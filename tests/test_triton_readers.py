"""qmodel.triton.read_metrics and read_perf_analyzer on the real files of tests/data/triton
(made by its capture.py) and on malformed ones (issue 22, items 2 and 4)."""

from pathlib import Path

import pytest

from qmodel.triton import read_metrics, read_perf_analyzer, read_stats

pytest.importorskip("prometheus_client", reason="the [triton] extra is not installed")

DATA = Path(__file__).parent / "data" / "triton"


def test_real_metrics_agree_with_the_statistics_api():
    m = read_metrics(DATA / "metrics_before.txt", DATA / "metrics_after.txt")
    s = read_stats(DATA / "stats_before.json", DATA / "stats_after.json")
    assert m.model == "affine" and m.failures == 0
    assert m.requests == m.inferences == s.requests
    assert m.executions == sum(s.executions.values())
    assert m.mean_batch_size == pytest.approx(s.mean_batch_size)
    # the metrics add whole microseconds per request, the statistics nanoseconds
    assert m.queue == pytest.approx(s.queue, rel=1e-3)
    # a request's time in the server is its queue and its batch's phases (and a little more)
    phases = m.queue + m.compute_input + m.compute_infer + m.compute_output
    assert phases <= m.request < phases + 0.5e-3
    # summary latencies were on: quantiles ordered, in seconds
    q = m.quantiles["request"]
    assert list(q) == [0.5, 0.9, 0.95, 0.99, 0.999]
    assert 1e-3 < q[0.5] < q[0.9] < q[0.99] < q[0.999] < 0.1


def test_real_perf_analyzer_row():
    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    assert row.rate == 400.0 and row.concurrency is None
    assert 0.95 * 400 < row.throughput <= 400
    assert row.p50 < row.p90 < row.p95 < row.p99 < 0.1
    m = read_metrics(DATA / "metrics_before.txt", DATA / "metrics_after.txt")
    # perf_analyzer's server-side means are the server's, over its own windows
    assert row.queue == pytest.approx(m.queue, rel=0.05)
    assert row.compute_infer == pytest.approx(m.compute_infer, rel=0.05)


def test_metrics_errors_name_the_scrape_and_the_fix(tmp_path):
    after = (DATA / "metrics_after.txt").read_text()
    with pytest.raises(ValueError, match=r"fell from 7077 to 0 between the scrapes: take "
                                         r"both from one server run"):
        read_metrics(DATA / "metrics_after.txt", DATA / "metrics_before.txt")
    with pytest.raises(ValueError, match="served no request between the scrapes"):
        read_metrics(DATA / "metrics_after.txt", DATA / "metrics_after.txt")
    with pytest.raises(ValueError, match=r"no models named 'other'; the scrape has affine "
                                         r"\(version 1\): pass model="):
        read_metrics(DATA / "metrics_before.txt", after, model="other")
    bad = tmp_path / "metrics.txt"
    lines = after.splitlines()
    lines[3] = 'nv_inference_count{model="affine" 12'
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"^{bad}:4: not Prometheus text"):
        read_metrics(DATA / "metrics_before.txt", bad)
    with pytest.raises(ValueError, match="must be Prometheus text, a file path or an http URL"):
        read_metrics(3, after)


def test_perf_analyzer_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "pa.csv"
    good = (DATA / "perf_analyzer.csv").read_text().splitlines()
    bad.write_text(good[0] + "\n" + good[1].replace("6279", "n/a") + "\n")
    with pytest.raises(ValueError, match=rf"^{bad}:2: p50 latency is 'n/a', not a number"):
        read_perf_analyzer(bad)
    bad.write_text("Model,Latency\nm,3\n")
    with pytest.raises(ValueError, match=rf"^{bad}:1: no 'Request Rate'"):
        read_perf_analyzer(bad)
    bad.write_text(good[0] + "\n")
    with pytest.raises(ValueError, match="no rows below the header"):
        read_perf_analyzer(bad)
    with pytest.raises(ValueError, match="cannot read"):
        read_perf_analyzer(tmp_path / "missing.csv")
