"""Node.drift: the description, the compiled engine's speed factor, the fit, calibration."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import qmodel as qm
from qmodel.drift import MIN_DRIFT_WINDOWS, fit_drift, fit_drift_windows

ms = 1e-3
FULLTRACE = (Path(__file__).resolve().parent.parent
             / "validation/reports/triton/runs-fulltrace/b8-d0.5-i2/1370-1")


# ---------------------------------------------------------------- the description
@pytest.mark.parametrize("kwargs, field", [
    ({"cv": -0.1, "period": 1.0}, "Drift.cv"),
    ({"cv": 11, "period": 1.0}, "Drift.cv"),
    ({"cv": True, "period": 1.0}, "Drift.cv"),
    ({"cv": 0.1, "period": 0}, "Drift.period"),
    ({"cv": 0.1, "period": -1.0}, "Drift.period"),
    ({"cv": 0.1, "period": "fast"}, "Drift.period"),
    ({"cv": 0.1, "period": 1.0, "correlation": 1.0}, "Drift.correlation"),
    ({"cv": 0.1, "period": 1.0, "correlation": -0.2}, "Drift.correlation"),
])
def test_bad_drift_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        qm.Drift(**kwargs)


def test_drift_takes_a_unit_and_a_node_checks_its_type():
    assert qm.Drift(0.05, "250ms").period == 0.25
    service = qm.ServiceTime.affine(1 * ms)
    with pytest.raises(ValueError, match="Node.drift"):
        qm.Node(service, drift=0.05)
    assert qm.Node(service, drift=qm.Drift(0.0, 1.0)).drift is None      # cv 0: none
    assert "drift cv 0.05" in qm.Node(service, drift=qm.Drift(0.05, 1.0)).describe()


# ---------------------------------------------------------------- the simulator
def test_the_factor_holds_over_a_step_and_is_correlated_between_steps():
    """Deterministic S(1) = 0.5 ms, one request a millisecond (never queued: factors stay
    far below 2): each batch's service over 0.5 ms is the factor itself. Batches starting in
    one step share it; the steps' log factors have the stated deviation and lag-1
    correlation (tolerances: 4 standard errors of 2,000 steps of an AR(1) process)."""
    d = qm.Drift(cv=0.1, period=0.05, correlation=0.6)
    node = qm.Node(qm.ServiceTime.affine(0.5 * ms), drift=d)
    times = np.arange(100_000) * 1e-3 + 1e-4             # one batch a millisecond, 100 s
    r = qm.replay(node, times, seed=3)
    assert np.array_equal(r.batch_start, times)
    factor = r.batch_service / 0.5e-3
    # steps start at a random phase: label them by the factor's changes
    change = np.flatnonzero(np.abs(np.diff(factor)) > 1e-12) + 1
    runs = np.diff(np.concatenate([[0], change, [factor.size]]))
    assert np.all(runs[1:-1] == 50)                      # 0.05 s of 1 ms batches per step
    steps = np.log(factor[np.concatenate([[0], change])])
    n = steps.size
    assert abs(steps.mean() + d.sigma ** 2 / 2) < 4 * d.sigma * np.sqrt((1 + 0.6) / (1 - 0.6) / n)
    assert abs(steps.std() / d.sigma - 1) < 4 * np.sqrt((1 + 0.36) / (1 - 0.36) / (2 * n))
    x = steps - steps.mean()
    lag1 = np.mean(x[:-1] * x[1:]) / x.var()
    assert abs(lag1 - 0.6) < 4 * np.sqrt((1 - 0.36) / n)


def test_drift_much_faster_than_the_batches_is_lognormal_jitter():
    """Exact equivalence: with steps far shorter than a batch and no correlation, every
    batch draws an independent lognormal factor of mean 1, which is the lognormal jitter
    law of the same cv."""
    drift = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms), max_batch_size=8,
                    max_queue_delay=1 * ms, instances=2,
                    drift=qm.Drift(cv=0.4, period=1e-9))
    jitter = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms, jitter=("lognormal", 0.4)),
                     max_batch_size=8, max_queue_delay=1 * ms, instances=2)
    a = qm.simulate(drift, rate=1500, requests=600_000, seed=4)
    b = qm.simulate(jitter, rate=1500, requests=600_000, seed=5)
    for q in (0.5, 0.99):
        lo_a, hi_a = a.ci(q)
        lo_b, hi_b = b.ci(q)
        assert lo_a <= hi_b and lo_b <= hi_a, (q, a.ci(q), b.ci(q))


def test_slow_drift_lengthens_the_tail_near_capacity():
    """A 5% wander over half-second steps at 90% load: the mean is kept (p50 moves little)
    and p99 grows beyond both runs' confidence intervals."""
    base = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms, jitter=("lognormal", 0.1)),
                   max_batch_size=8, max_queue_delay=0.5 * ms, instances=2)
    rate = 0.9 * base.capacity
    steady = qm.simulate(base, rate=rate, requests=600_000, seed=6)
    drifting = qm.simulate(replace(base, drift=qm.Drift(0.05, 0.5, 0.8)), rate=rate,
                           requests=600_000, seed=6)
    assert drifting.ci(0.99)[0] > steady.ci(0.99)[1]
    assert abs(drifting.p50 / steady.p50 - 1) < 0.1


def test_drift_runs_in_an_ensemble_on_the_compiled_engine():
    stage = qm.Node(qm.ServiceTime.affine(1 * ms, 0.2 * ms), max_batch_size=4,
                    max_queue_delay=0.2 * ms)
    plain = qm.Ensemble({"a": stage, "b": stage}, [("a", "b")])
    drifting = qm.Ensemble({"a": stage, "b": replace(stage, drift=qm.Drift(0.3, 0.2, 0.9))},
                           [("a", "b")])
    rate = 0.8 * stage.capacity
    lo = qm.simulate(plain, rate=rate, requests=200_000, seed=7)
    hi = qm.simulate(drifting, rate=rate, requests=200_000, seed=7)
    assert hi.ci(0.99)[0] > lo.ci(0.99)[1]


def test_engines_without_drift_refuse_it_with_the_fix():
    node = qm.Node(qm.ServiceTime.affine(1 * ms), max_batch_size=4,
                   drift=qm.Drift(0.05, 0.1))
    for kwargs in ({"backend": "numpy"}, {"engine": "lookahead"}, {"engine": "events"}):
        with pytest.raises(ValueError, match="compiled engine only"):
            qm.simulate(node, rate=500, requests=10_000, **kwargs)
    with pytest.raises(ValueError, match="compiled engine only"):
        qm.replay(node, [0.0, 0.1], engine="lookahead")
    with pytest.raises(ValueError, match="Node.drift"):
        qm.simulate(node, arrivals=qm.Traffic.constant(500.0, 60.0))


def test_predict_simulates_a_drifting_node_and_says_so():
    node = qm.Node(qm.ServiceTime.affine(1 * ms, 0.2 * ms), max_batch_size=4,
                   drift=qm.Drift(0.05, 0.1, 0.5))
    r = qm.predict(node, rate=1000)
    assert r.accuracy.exactness == "simulation"
    assert r.accuracy.simulation.engine == "compiled"


# ---------------------------------------------------------------- the fit
def drifting_replays(first_seed):
    """Twelve replays, a minute each at 900 req/s, of a batching node drifting with cv 0.05
    over 0.1 s steps, correlation 0.6."""
    node = qm.Node(qm.ServiceTime.affine(1 * ms, 0.3 * ms, jitter=("gamma", 0.1)),
                   max_batch_size=4, max_queue_delay=0.2 * ms, drift=qm.Drift(0.05, 0.1, 0.6))
    for seed in range(12):
        times = np.cumsum(np.random.default_rng(first_seed + seed).exponential(1 / 900,
                                                                              54_000))
        yield qm.replay(node, times, seed=seed)


def assert_recovered(fits, cv, rho):
    """The fits' mean cv and correlation within 4 standard errors between them (plus 0.001
    and 0.01) of the truth."""
    cvs = np.array([f.cv for f in fits])
    rhos = np.array([f.correlation for f in fits])
    se_cv = cvs.std(ddof=1) / np.sqrt(cvs.size)
    se_rho = rhos.std(ddof=1) / np.sqrt(rhos.size)
    assert abs(cvs.mean() - cv) < 4 * se_cv + 1e-3, (cvs.mean(), se_cv)
    assert abs(rhos.mean() - rho) < 4 * se_rho + 0.01, (rhos.mean(), se_rho)


def test_fit_recovers_the_drift_over_twelve_seeds():
    """Replays of a drifting node (cv 0.05, 0.1 s steps, correlation 0.6; a minute each):
    the fit's mean over 12 seeds lies within 4 standard errors of the truth (the spread
    between seeds measured 0.0022 on cv and 0.034 on the correlation)."""
    assert_recovered([qm.Drift.fit(r.batch_start, r.batch_size, r.batch_service, period=0.1)
                      for r in drifting_replays(100)], 0.05, 0.6)


def test_fit_finds_no_drift_in_independent_executions_and_refuses_short_traces():
    rng = np.random.default_rng(2)
    starts = np.sort(rng.uniform(0, 30, 9_000))
    sizes = rng.integers(1, 5, starts.size)
    executions = 1e-3 * sizes * np.exp(0.05 * rng.standard_normal(starts.size))
    fit = qm.Drift.fit(starts, sizes, executions, period=0.1)
    assert fit.cv < 0.01               # sampling noise only: 300 windows of 30 executions
    with pytest.raises(ValueError, match=f"needs {MIN_DRIFT_WINDOWS} windows"):
        qm.Drift.fit(starts[starts < 2], sizes[starts < 2], executions[starts < 2])
    for bad in (-executions, np.where(starts > 10, np.inf, executions)):
        with pytest.raises(ValueError, match="positive, finite execution times"):
            qm.Drift.fit(starts, sizes, bad)
    with pytest.raises(ValueError, match="given none"):
        qm.Drift.fit([], [], [])
    with pytest.raises(ValueError, match="window > 0"):
        qm.Drift(0.1, 0.1).window_cv(0)
    assert qm.Drift(1.2, 0.1).cv == 1.2           # a fit may read a drift above 1


@pytest.mark.parametrize("cv", [0.08, 0.4])
def test_steady_executions_take_the_drift_out_and_keep_the_mean(cv):
    """Dividing by each window's estimated factor leaves less correlation between windows
    and the same mean (review: factors centred in logs moved it by exp(-σ²/2), 7% at cv
    0.4)."""
    d = qm.Drift(cv, 0.1, 0.7)
    node = qm.Node(qm.ServiceTime.affine(1 * ms, jitter=("gamma", 0.05)), drift=d)
    times = np.cumsum(np.random.default_rng(9).exponential(1 / 500, 30_000))
    r = qm.replay(node, times, seed=9)
    fit, steady = fit_drift(r.batch_start, r.batch_size, r.batch_service, 0.1)
    again = qm.Drift.fit(r.batch_start, r.batch_size, steady, 0.1)
    assert again.cv < 0.3 * fit.cv
    assert abs(steady.mean() / r.batch_service.mean() - 1) < 0.01


# ---------------------------------------------------------------- calibration
def test_calibrate_measures_drift_from_a_long_trace_only():
    run = FULLTRACE
    node = qm.triton.calibrate(run / "config.pbtxt",
                               (run / "stats_before.json", run / "stats_after.json"),
                               trace=run / "trace.json.gz")
    assert node.calibration.origin("drift") == ("measured", "the trace")
    assert 0.02 < node.drift.cv < 0.06 and node.drift.period == 0.1
    assert "drift cv" in node.calibration.drift
    short = Path(__file__).resolve().parent / "data" / "triton"
    plain = qm.triton.calibrate(short / "config.pbtxt",
                                (short / "stats_before.json", short / "stats_after.json"),
                                trace=short / "trace.json.gz")
    assert plain.drift is None
    assert plain.calibration.origin("drift")[0] == "assumed"
    assert "covers" in plain.calibration.drift


# ---------------------------------------------------------------- the fit from counters
def counter_windows(replay, period):
    """(counts, totals) per window of ``period`` and batch size, by completion time, as a
    server's statistics polled every ``period`` report them."""
    ends = replay.batch_start + replay.batch_service
    window = np.floor((ends - ends.min()) / period).astype(int)
    sizes, column = np.unique(replay.batch_size, return_inverse=True)
    counts = np.zeros((window.max() + 1, sizes.size))
    totals = np.zeros_like(counts)
    np.add.at(counts, (window, column), 1)
    np.add.at(totals, (window, column), replay.batch_service)
    return counts, totals


def test_counter_fit_recovers_the_drift_over_twelve_seeds():
    """Replays of a drifting batching node (cv 0.05, 0.1 s steps, correlation 0.6; a minute
    each), seen only through counters per 0.1 s window: the fit's mean over 12 seeds lies
    within 4 standard errors of the truth."""
    assert_recovered([fit_drift_windows(*counter_windows(r, 0.1), 0.1)
                      for r in drifting_replays(200)], 0.05, 0.6)


def model_windows(seed, windows, executions, jitter, cv, rho):
    """(counts, totals) of one size: windows as long as the drift's steps at a random phase,
    each with its executions' own lognormal jitter."""
    rng = np.random.default_rng(seed)
    s = np.sqrt(np.log1p(cv ** 2))
    x = np.empty(windows + 1)
    x[0] = s * rng.standard_normal()
    for j in range(1, windows + 1):
        x[j] = rho * x[j - 1] + np.sqrt(1 - rho ** 2) * s * rng.standard_normal()
    u = rng.uniform()
    sj = np.sqrt(np.log1p(jitter ** 2))
    late = rng.uniform(size=(windows, executions)) >= 1 - u      # in the next step
    logs = np.where(late, x[1:, None], x[:-1, None]) + sj * rng.standard_normal(
        (windows, executions))
    totals = 3e-3 * np.exp(logs - s * s / 2 - sj * sj / 2).sum(axis=1)
    return np.full((windows, 1), float(executions)), totals[:, None]


def test_counter_fit_is_unbiased_on_the_model_over_24_seeds():
    """3,000 windows of 30 executions (jitter 0.2), drift cv 0.05 and correlation 0.6: the
    mean over 24 seeds lies within 4 standard errors (plus 0.01) of the truth; the
    correlation through the windows' variance instead (C_1 / V, V holding the executions'
    noise) reads 0.46."""
    assert_recovered([fit_drift_windows(*model_windows(seed, 3000, 30, 0.2, 0.05, 0.6), 0.1)
                      for seed in range(24)], 0.05, 0.6)


def test_counter_fit_finds_no_drift_leaves_out_a_stall_and_refuses_short_series():
    rng = np.random.default_rng(4)
    counts = rng.poisson(40, (600, 3)).astype(float)
    # each window's total: its executions at 1, 2 and 4 ms, 10% jitter each
    totals = np.array([[np.sum(m * np.exp(0.1 * rng.standard_normal(int(n)) - 0.005))
                        for n, m in zip(row, (1 * ms, 2 * ms, 4 * ms))] for row in counts])
    fit = fit_drift_windows(counts, totals, 0.1)
    assert fit.cv < 0.01, fit                       # sampling noise only
    stalled = totals.copy()
    stalled[300:302] *= 20.0                        # a stall: 20 times slower for two windows
    assert fit_drift_windows(counts, stalled, 0.1).cv < 0.01
    # windows of fewer than three executions of a size do not count: none left adjacent
    sparse = np.zeros_like(counts)
    sparse[::2] = counts[::2]
    with pytest.raises(ValueError, match="0 pairs of neighbouring windows"):
        fit_drift_windows(sparse, np.where(sparse > 0, totals, 0.0), 0.1)
    with pytest.raises(ValueError, match=f"the drift needs {MIN_DRIFT_WINDOWS}"):
        fit_drift_windows(counts[:40], totals[:40], 0.1)
    with pytest.raises(ValueError, match="two arrays of one shape"):
        fit_drift_windows(counts, totals[:, :2], 0.1)
    with pytest.raises(ValueError, match="positive summed seconds"):
        fit_drift_windows(counts, np.where(counts > 0, 0.0, totals), 0.1)
    with pytest.raises(ValueError, match="Drift.period"):
        fit_drift_windows(counts, totals, 0)


# ---------------------------------------------------------------- calibration from a series
def polled_series(node, rate, seconds, period, seed, name="affine", queue=0.0):
    """A replay of ``node`` for ``seconds`` at ``rate``, as a server's statistics polled every
    ``period``: [(seconds, snapshot)], each snapshot the cumulative counters by batch size
    (and ``queue`` seconds of queue time per request)."""
    times = np.cumsum(np.random.default_rng(seed).exponential(1 / rate,
                                                              int(rate * seconds)))
    r = qm.replay(node, times, seed=seed)
    ends = r.batch_start + r.batch_service
    series = []
    for t in np.arange(0.0, ends.max(), period):
        done = ends <= t
        sizes = []
        for k in np.unique(r.batch_size[done]):
            mine = done & (r.batch_size == k)
            ns = int(r.batch_service[mine].sum() * 1e9)
            sizes.append({"batch_size": int(k),
                          "compute_input": {"count": int(mine.sum()), "ns": 0},
                          "compute_infer": {"count": int(mine.sum()), "ns": ns},
                          "compute_output": {"count": int(mine.sum()), "ns": 0}})
        requests = int(r.batch_size[done].sum())
        series.append((float(t), {"model_stats": [{
            "name": name, "version": "1", "inference_count": requests,
            "execution_count": int(done.sum()),
            "inference_stats": {"success": {"count": requests, "ns": 0},
                                "queue": {"count": requests,
                                          "ns": int(requests * queue * 1e9)}},
            "batch_stats": sizes}]}))
    return series


DATA = Path(__file__).resolve().parent / "data" / "triton"


def test_calibrate_fits_the_drift_from_polled_statistics_and_takes_it_out_of_the_jitter():
    """The committed run's summary quantiles give a jitter cv of 0.03: a drift of cv 0.02
    leaves sqrt(1.03² / 1.02² - 1) of it, one of 0.06 none (the note says why)."""
    stats = (DATA / "stats_before.json", DATA / "stats_after.json")
    metrics = (DATA / "metrics_before.txt", DATA / "metrics_after.txt")
    plain = qm.triton.calibrate(DATA / "config.pbtxt", stats, metrics)
    cv0 = plain.service.jitter_law.cv
    assert cv0 > 0
    for cv, rho, seed in ((0.02, 0.5, 5), (0.06, 0.5, 8)):
        node = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms, jitter=("lognormal", 0.1)),
                       max_batch_size=8, max_queue_delay=2 * ms, drift=qm.Drift(cv, 0.1, rho))
        series = polled_series(node, 600.0, 60.0, 0.1, seed=seed)
        fitted = qm.triton.calibrate(DATA / "config.pbtxt", stats, metrics, series=series)
        how, source = fitted.calibration.origin("drift")
        assert how == "measured" and "polled every 100 ms" in source
        assert fitted.drift.period == pytest.approx(0.1)
        assert abs(fitted.drift.cv - cv) < 0.25 * cv and abs(fitted.drift.correlation - rho) < 0.2
        # the summary quantiles' spread holds the drift: the jitter keeps the rest
        law = fitted.service.jitter_law
        if fitted.drift.cv < cv0:
            assert law.name == "lognormal"
            assert (1 + cv0 ** 2) == pytest.approx((1 + law.cv ** 2) * (1 + fitted.drift.cv ** 2))
            assert "less the drift's cv" in fitted.calibration.jitter
        else:
            assert not law.random
            assert "no more than the drift's" in fitted.calibration.jitter
    # the series alone: its first and last snapshots are the statistics
    alone = qm.triton.calibrate(DATA / "config.pbtxt", series=series)
    assert alone.drift == fitted.drift
    assert float(alone.service.mean(1)) == pytest.approx(2.5 * ms, rel=0.05)


def test_a_series_too_short_for_drift_says_so():
    node = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms), max_batch_size=8,
                   max_queue_delay=2 * ms)
    series = polled_series(node, 600.0, 3.0, 0.1, seed=6)
    out = qm.triton.calibrate(DATA / "config.pbtxt", series=series)
    assert out.drift is None
    how, why = out.calibration.origin("drift")
    assert how == "assumed" and f"the drift needs {MIN_DRIFT_WINDOWS}" in why


def test_a_live_calibration_polls_the_statistics_and_fits_the_drift(monkeypatch):
    """A stand-in server on loopback answers the statistics of a drifting node at the time
    of a clock that the window's waits advance: calibrate(url=...) polls it every 0.1 s."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from qmodel.triton import live

    pytest.importorskip("google.protobuf", reason="the [triton] extra is not installed")
    d = qm.Drift(0.05, 0.1, 0.6)
    node = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms, jitter=("lognormal", 0.1)),
                   max_batch_size=8, max_queue_delay=2 * ms, drift=d)
    series = polled_series(node, 600.0, 62.0, 0.1, seed=7)
    now = [0.0]
    monkeypatch.setattr(live, "_clock", lambda: now[0])
    monkeypatch.setattr(live, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    config = {"name": "affine", "max_batch_size": 8, "backend": "python",
              "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
              "dynamic_batching": {"max_queue_delay_microseconds": "2000"}}
    polls = []

    class Server(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/v2/models/affine/config":
                body = json.dumps(config)
            elif self.path == "/v2/models/affine/stats":
                polls.append(now[0])
                i = min(int(round(now[0] / 0.1)) + 5, len(series) - 1)
                body = json.dumps(series[i][1])
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = qm.triton.calibrate(url=f"127.0.0.1:{httpd.server_address[1]}",
                                  model="affine", window=60.0)
    finally:
        httpd.shutdown()
    assert len(polls) == 601                      # before, 599 polls, after
    assert np.allclose(np.diff(polls), 0.1)
    assert out.calibration.origin("drift")[0] == "measured"
    assert 0.035 < out.drift.cv < 0.065 and 0.4 < out.drift.correlation < 0.8
    with pytest.raises(ValueError, match="poll=0.5: .* at most a tenth of the window"):
        qm.triton.calibrate(url="127.0.0.1:1", window=4.0, poll=0.5)


def test_a_trace_long_enough_for_its_drift_wins_over_a_series():
    run = FULLTRACE
    stats = (run / "stats_before.json", run / "stats_after.json")
    node = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms), max_batch_size=8,
                   max_queue_delay=0.5 * ms, drift=qm.Drift(0.2, 0.1, 0.5))
    series = polled_series(node, 600.0, 30.0, 0.1, seed=9, name="model")
    alone = qm.triton.calibrate(run / "config.pbtxt", stats, trace=run / "trace.json.gz")
    both = qm.triton.calibrate(run / "config.pbtxt", stats, trace=run / "trace.json.gz",
                               series=series)
    assert both.drift == alone.drift and both.calibration.origin("drift") == (
        "measured", "the trace")


def test_a_series_of_another_model_is_refused():
    node = qm.Node(qm.ServiceTime.affine(2 * ms, 0.5 * ms), max_batch_size=8,
                   max_queue_delay=2 * ms)
    series = polled_series(node, 600.0, 8.0, 0.1, seed=10, name="other")
    with pytest.raises(ValueError, match="holds no statistics of 'affine'"):
        qm.triton.calibrate(DATA / "config.pbtxt",
                            (DATA / "stats_before.json", DATA / "stats_after.json"),
                            series=series)
