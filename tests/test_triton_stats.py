"""qmodel.triton.read_stats: the statistics API's snapshots of a real server (tests/data/triton,
made by its capture.py) and malformed ones (issue 22, items 2 and 4)."""

import json
from pathlib import Path

import pytest

import qmodel as qm
from qmodel.triton import read_stats

DATA = Path(__file__).parent / "data" / "triton"


def test_real_snapshots_give_the_executed_batches():
    s = read_stats(DATA / "stats_before.json", DATA / "stats_after.json")
    assert s.model == "affine" and set(s.executions) <= set(range(1, 9))
    # every request that succeeded was in exactly one executed batch
    assert sum(k * n for k, n in s.executions.items()) == s.requests
    assert 1 < s.mean_batch_size < 8
    # the model sleeps 2 ms + 0.5 ms x k: the measured infer time is at least that, and not
    # far above it on the sizes executed often
    for k, n in s.executions.items():
        assert s.compute_infer[k] >= 2e-3 + 0.5e-3 * k
        if n >= 50:
            assert s.compute_infer[k] < 1.5 * (2e-3 + 0.5e-3 * k)
    table = qm.ServiceTime.table(s.batch_time())
    assert table.mean(1) > s.compute_infer[1]


def test_snapshots_as_dicts_and_the_model_chosen_by_name():
    before = json.loads((DATA / "stats_before.json").read_text())
    after = json.loads((DATA / "stats_after.json").read_text())
    assert read_stats(before, after, model="affine") == read_stats(
        DATA / "stats_before.json", DATA / "stats_after.json")
    with pytest.raises(ValueError, match=r"before: no model statistics for 'other'; the "
                                         r"snapshot has affine \(version 1\): pass model="):
        read_stats(before, after, model="other")


def test_snapshots_in_the_wrong_order_or_from_two_runs_are_refused():
    with pytest.raises(ValueError, match=r"inference_stats.success fell from \d+ to 0 .* take both from "
                                         r"one server run"):
        read_stats(DATA / "stats_after.json", DATA / "stats_before.json")
    with pytest.raises(ValueError, match="executed no batch between the snapshots"):
        read_stats(DATA / "stats_after.json", DATA / "stats_after.json")


def test_malformed_snapshots_name_the_file(tmp_path):
    bad = tmp_path / "stats.json"
    bad.write_text('{"model_stats": [\n  {"name": "m",\n}')
    with pytest.raises(ValueError, match=rf"^{bad}:3: not JSON"):
        read_stats(bad, DATA / "stats_after.json")
    with pytest.raises(ValueError, match=r"before: no 'model_stats' list"):
        read_stats({"models": []}, DATA / "stats_after.json")
    with pytest.raises(ValueError, match=r"snapshot must be a dict, a JSON file path or an "
                                         r"http URL"):
        read_stats(3, DATA / "stats_after.json")
    with pytest.raises(ValueError, match="could not be read"):
        read_stats("http://127.0.0.1:9/v2/models/m/stats", DATA / "stats_after.json")


def _polled(n, ns, name="m"):
    phase = {"count": n, "ns": ns}
    return {"model_stats": [{"name": name, "version": "1", "batch_stats": [
        {"batch_size": 1, "compute_input": phase, "compute_infer": phase,
         "compute_output": phase}]}]}


def test_a_series_of_snapshots_reads_as_windows_and_from_a_file(tmp_path):
    import gzip

    from qmodel.triton import read_stats_series

    pairs = [(0.0, _polled(0, 0)), (0.1, _polled(10, 10_000_000)),
             (0.2, _polled(30, 40_000_000))]
    s = read_stats_series(pairs)
    assert s.counts[:, 0].tolist() == [10, 20]
    assert s.totals[:, 0] == pytest.approx([0.03, 0.09])        # three phases each
    path = tmp_path / "stats_series.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"seconds": [t for t, _ in pairs], "snapshots": [x for _, x in pairs]}, f)
    assert read_stats_series(path).counts.tolist() == s.counts.tolist()


@pytest.mark.parametrize("pairs, message", [
    ([(0.0, _polled(0, 0))], "1 snapshot"),
    ([(0.0, _polled(0, 0)), (0.0, _polled(1, 1))], "seconds must be finite and increase"),
    ([(0.0, _polled(5, 5)), (0.1, _polled(3, 3))], "fell between snapshots 0 and 1"),
    ([(0.0, _polled(0, 0)), (0.1, _polled(1, 1, name="other"))], "snapshot 1 holds no statistics of .m."),
    ("nowhere.json", "not a statistics series"),
    (42, "list of \\(seconds, snapshot\\) pairs"),
])
def test_a_bad_series_names_the_fix(pairs, message):
    from qmodel.triton import read_stats_series

    with pytest.raises(ValueError, match=message):
        read_stats_series(pairs)
