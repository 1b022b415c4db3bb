"""qm.Traffic: rates over time, its builders and readers, and the arrivals drawn from it."""

import json

import numpy as np
import pytest
from scipy import stats

import qmodel as qm
from qmodel.traffic import counter_rates


def test_builders_hold_the_rates_they_describe():
    sale = qm.Traffic.flash_sale(3000, 10_000, ramp=120, hold=7200)
    assert sale.rate_at(300.0) == 3000 and sale.rate_at(660.0) == 6500
    assert sale.rate_at(4000.0) == 10_000 and sale.rate_at(sale.end - 1) == 3000
    assert sale.duration == 600 + 120 + 7200 + 120 + 600
    day = qm.Traffic.diurnal(1000, 9000, peak_at=14 * 3600)
    assert day.rate_at(14 * 3600.0) == pytest.approx(9000)
    assert day.rate_at(2 * 3600.0) == pytest.approx(1000)
    flat = qm.Traffic.constant(250.0, 40.0, start=10.0)
    assert (flat.start, flat.end, flat.expected()) == (10.0, 50.0, 10_000.0)
    step = qm.Traffic.flash_sale(100, 200, ramp=0, hold=10, before=10, after=10)
    assert step.rate_at(9.0) == 100 and step.rate_at(11.0) == 200


def test_the_cumulative_rate_and_its_inverse_agree():
    sale = qm.Traffic.flash_sale(3000, 10_000, ramp=120, hold=600, before=300, after=300)
    t = np.linspace(sale.start, sale.end, 997)
    u = sale.cumulative(t)
    np.testing.assert_allclose(sale.inverse_cumulative(u), t, rtol=1e-9, atol=1e-6)
    # the integral of the rate, by quadrature
    from scipy import integrate
    assert sale.expected(250, 800) == pytest.approx(
        integrate.quad(lambda x: float(sale.rate_at(x)), 250, 800, limit=200)[0], rel=1e-9)


@pytest.mark.parametrize("traffic", [
    qm.Traffic([0, 30, 60, 90], [800.0, 2400.0, 0.0]),
    qm.Traffic.flash_sale(500, 3000, ramp=20, hold=20, before=10, after=10),
], ids=["steps", "ramps"])
def test_arrivals_are_a_poisson_process_of_the_rate(traffic):
    """Counts in 1 s bins are independent Poisson of the expected counts: their standardised
    squares sum to a chi-square; the gaps inside a window of constant rate are exponential."""
    t = traffic.sample(np.random.default_rng(3))
    assert np.all(np.diff(t) >= 0) and t[0] >= traffic.start and t[-1] <= traffic.end
    edges = np.arange(traffic.start, traffic.end + 1e-9, 1.0)
    counts, _ = np.histogram(t, edges)
    expected = np.diff(traffic.cumulative(edges))
    keep = expected > 0
    assert counts[~keep].sum() == 0
    chi2 = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
    assert chi2 < stats.chi2.ppf(0.999, keep.sum())
    first = t[t < traffic.times[1]]
    gaps = np.diff(first)
    assert stats.kstest(gaps, "expon", args=(0, 1 / traffic.rate_at(1.0))).pvalue > 1e-3


def test_a_renewal_shape_keeps_the_rate_and_its_scv():
    tr = qm.Traffic([0, 100, 200], [500.0, 1500.0], scv=0.25)
    t = tr.sample(np.random.default_rng(4))
    counts = [np.sum((t >= a) & (t < b)) for a, b in ((0, 100), (100, 200))]
    for n, expected in zip(counts, (50_000, 150_000)):
        assert abs(n - expected) < 4 * np.sqrt(expected * 0.25) + 2
    gaps = np.diff(t[t < 100]) * 500.0
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(0.25, rel=0.03)


def test_a_csv_file_gives_step_windows(tmp_path):
    path = tmp_path / "rates.csv"
    path.write_text("time_s,rate\n0,100\n60,300\n# a comment\n120,200\n")
    tr = qm.Traffic.from_csv(path)
    assert tr.times.tolist() == [0, 60, 120, 180] and tr.rates.tolist() == [100, 300, 200]
    ms = tmp_path / "ms.csv"
    ms.write_text("time_ms,rate\n0,100\n60000,300\n")
    assert qm.Traffic.from_csv(ms).times.tolist() == [0, 60, 120]
    lin = qm.Traffic.from_csv(path, shape="linear")
    assert lin.rate_at(30.0) == 200


@pytest.mark.parametrize("body, message", [
    ("", "needs at least two rows"),
    ("time,rate\n0,100\n", "needs at least two rows"),
    ("0,100\n60,50\n30,10\n", r"rates.csv:3: time 30 s does not follow 60 s"),
    ("0,100\n60,-5\n", r"rates.csv:2: rate -5 must be a number >= 0"),
    ("0,100\n60,lots\n", r"rates.csv:2: '60,lots' is not two numbers"),
    ("0\n", r"rates.csv:1: expected two columns"),
])
def test_a_bad_csv_names_the_file_and_line(tmp_path, body, message):
    path = tmp_path / "rates.csv"
    path.write_text(body)
    with pytest.raises(ValueError, match=message):
        qm.Traffic.from_csv(path)


def test_counter_samples_give_rates_restarts_included():
    edges, rates = counter_rates([0, 15, 30, 45], [100, 1600, 4600, 300])
    assert rates.tolist() == [100.0, 200.0, 20.0]
    tr = qm.Traffic.from_counter([0, 15, 30, 45], [100, 1600, 4600, 300])
    assert tr.expected() == pytest.approx(1500 + 3000 + 300)


def test_a_prometheus_range_query_sums_its_servers(tmp_path):
    def series(server, model, values):
        return {"metric": {"__name__": "nv_inference_request_success", "model": model,
                           "instance": server},
                "values": [[1700000000 + 15 * i, str(v)] for i, v in enumerate(values)]}
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [
        series("a", "rec", [0, 1500, 3000]), series("b", "rec", [10, 310, 910]),
        series("a", "other", [0, 15, 30])]}}
    tr = qm.Traffic.from_prometheus(answer, model="rec")
    assert tr.times.tolist() == [0, 15, 30] and tr.rates.tolist() == [120.0, 140.0]
    path = tmp_path / "q.json"
    path.write_text(json.dumps(answer))
    assert qm.Traffic.from_prometheus(path).rates.tolist() == [121.0, 141.0]
    bad = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with pytest.raises(ValueError, match="a range query .matrix. is needed"):
        qm.Traffic.from_prometheus(bad)
    # servers come and go: b is scraped only in the middle; each adds where it has samples
    gaps = {"status": "success", "data": {"resultType": "matrix", "result": [
        series("a", "rec", [0, 150, 300, 450]),
        {**series("b", "rec", []), "values": [[1700000015, "0"], [1700000030, "300"]]}]}}
    tr = qm.Traffic.from_prometheus(gaps)
    assert tr.rates.tolist() == [10.0, 30.0, 10.0]
    no_list = {"status": "success", "data": {"resultType": "matrix", "result": None}}
    short = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": None, "values": [[1, "2"], [2]]}]}}
    for broken, message in ((no_list, "data.result must be a list"),
                            (short, "values must be .timestamp")):
        with pytest.raises(ValueError, match=message):
            qm.Traffic.from_prometheus(broken)


@pytest.mark.parametrize("kwargs, message", [
    (dict(times=[0, 10, 10], rates=[1.0, 2.0]), r"must increase: 10 s \(edge 2\)"),
    (dict(times=[0, 10], rates=[-1.0]), r"Traffic.rates\[0\]=-1 is negative"),
    (dict(times=[0, 10], rates=[1.0, 2.0]), "has 2 values for 2 edges"),
    (dict(times=[0, 4e10], rates=[1.0]), "more than 400 days: qmodel takes seconds"),
    (dict(times=[0, 10], rates=[0.0]), "all below 0.001 requests per second"),
    (dict(times=[0, 10], rates=[1.0], scv=-1), "Traffic.scv=-1 must be a number"),
    (dict(times=[0, 10], rates=[1.0], shape="smooth"), "Traffic.shape='smooth'"),
    (dict(times=[0], rates=[]), "needs at least 2 edges"),
    (dict(times=[0, float("nan")], rates=[1.0]), "has a non-finite value at edge 1"),
    (dict(times="0,10", rates=[1.0]), "Traffic.times must be a sequence"),
])
def test_bad_traffic_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qm.Traffic(**kwargs)


def test_bad_builders_name_the_field():
    with pytest.raises(ValueError, match="flash_sale ramp must be a number of seconds >= 0"):
        qm.Traffic.flash_sale(100, 200, ramp=-5, hold=60)
    with pytest.raises(ValueError, match="diurnal low=9 exceeds peak=1"):
        qm.Traffic.diurnal(9, 1)
    with pytest.raises(ValueError, match="flash_sale base=5000 exceeds peak=1000"):
        qm.Traffic.flash_sale(5000, 1000, ramp=60, hold=60)
    with pytest.raises(ValueError, match="between.*must lie in"):
        qm.Traffic.constant(1.0, 10.0).between(5, 20)
