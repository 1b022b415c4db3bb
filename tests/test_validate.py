"""Validation campaigns: rows, verdicts, cache, not-modelled systems, config files, Dask, lab."""

import json

import pytest

from qmodel import campaign as qc
from qmodel.campaign import runner
from qmodel.campaign.lab import lab_point, largest_under_wall
from qmodel.cli import main

TINY = [
    {"name": "b4", "service": {"base": "2ms", "per_item": "0.25ms"}, "max_batch_size": 4,
     "max_queue_delay": "1ms", "load": 0.6},
    {"name": "md1", "service": {"base": "2ms"}, "load": 0.5},
]
# least_outstanding over 2 nodes lies outside the mean-field model's domain: simulated only
UNMODELLED = {"name": "lo2", "service": {"base": "2ms"}, "max_batch_size": 2,
              "cluster": {"nodes": 2, "router": "least_outstanding"}, "load": 0.5}
REQUESTS = 20_000


def _campaign(configs, out=None, **kw):
    return qc.run_campaign(configs, out, requests=REQUESTS, seed=3, workers=1, progress=False,
                           **kw)


def test_tiny_campaign_writes_rows_and_a_report(tmp_path):
    camp = _campaign(TINY + [UNMODELLED], tmp_path)
    assert [r["name"] for r in camp.rows] == ["b4", "md1", "lo2"]
    for row in camp.rows[:2]:
        assert row["modelled"] and row["family"] in ("exact", "numerical", "approximation")
        for q in ("p50", "p95", "p99"):
            sim, pred = row["simulated"][q], row["predicted"][q]
            lo, hi = row["simulated"]["ci99"][q]
            assert lo <= sim <= hi
            assert row["error"][q] == pytest.approx(pred / sim - 1)
            assert row["baseline"]["error"][q] == pytest.approx(
                row["baseline"]["quantiles"][q] / sim - 1)
        assert row["predict_seconds"] > 0 and row["simulate_seconds"] > 0
        assert row["verdict"] in ("pass", "fail") and set(row["checks"]) == {"p95", "p99"}
    # the M/D/1 queue is solved to within its lattice: it must sit inside the 99% interval
    assert camp.rows[1]["verdict"] == "pass"
    report = qc.write_report(camp, tmp_path)
    text = report.read_text()
    for word in ("## Summary", "b4", "md1", "lo2", "not modelled", "textbook baseline"):
        assert word in text
    assert (tmp_path / "figures" / "cdf_overlays.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["name"] for r in saved["rows"]] == ["b4", "md1", "lo2"]


def test_a_system_predict_does_not_model_is_reported_not_failed():
    (row,) = _campaign([UNMODELLED]).rows
    assert row["verdict"] == "not modelled" and row["family"] == "not modelled"
    assert row["predicted"] is None and "least_outstanding" in row["not_modelled_reason"]
    assert row["simulated"]["p99"] > row["simulated"]["p50"] > 0


def test_the_cache_skips_finished_work(tmp_path, monkeypatch):
    first = _campaign(TINY, tmp_path)
    assert (first.stats["computed"], first.stats["cached"], first.stats["errors"]) == (2, 0, 0)
    assert len(list((tmp_path / "cache").glob("config-*.json"))) == 2
    calls = []
    real = runner.run_task

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(runner, "run_task", counting)
    again = _campaign(TINY, tmp_path)
    assert calls == [] and again.stats["cached"] == 2
    assert [r["simulated"]["p99"] for r in again.rows] == \
        [r["simulated"]["p99"] for r in first.rows]
    # other simulation settings are other results: recomputed, not read back
    qc.run_campaign(TINY, tmp_path, requests=REQUESTS + 1000, seed=3, workers=1,
                    progress=False)
    assert len(calls) == 2


def test_judge_applies_the_stated_tolerances():
    def row(family, pred, sim, ci, h=0.0):
        return {"modelled": True, "family": family, "lattice_step": h,
                "predicted": {"p95": pred, "p99": pred},
                "simulated": {"p95": sim, "p99": sim, "ci99": {"p95": ci, "p99": ci}}}

    assert qc.judge(row("numerical", 10.3, 10.0, [9.9, 10.1]))["verdict"] == "fail"
    assert qc.judge(row("numerical", 10.3, 10.0, [9.9, 10.1], h=0.25))["verdict"] == "pass"
    assert qc.judge(row("approximation", 10.75, 10.0, [9.9, 10.1]))["verdict"] == "pass"
    assert qc.judge(row("approximation", 10.95, 10.0, [9.9, 10.1]))["verdict"] == "fail"
    loose = qc.Tolerance(approx=0.10)
    assert qc.judge(row("approximation", 10.95, 10.0, [9.9, 10.1]), loose)["verdict"] == "pass"


@pytest.mark.parametrize("text, suffix, message", [
    ('[[config]]\nservice = {base = "2ms"}\nmax_batch_size = "eight"\nload = 0.5\n', ".toml",
     "max_batch_size"),
    ('[[config]]\nservice = {base = "2ms"}\nmax_batch = 8\nload = 0.5\n', ".toml",
     "did you mean 'max_batch_size'"),
    ('[[config]]\nservice = {base = "2ms"}\nmax_batch_size = 8\n', ".toml", "'load'"),
    ('[[config]]\nservice = {base = "2ms"}\nload = 1.5\n', ".toml", "field 'load'"),
    ('[[config]]\nservice = {base = "2ms", jitter = "lognormal:x"}\nload = 0.5\n', ".toml",
     "service.jitter"),
    ('[{"service": {"base": "2 parsecs"}, "load": 0.5}]', ".json", "service.base"),
    ('[{"service": {"base": "2ms"}, "rate": 900}]', ".json", "field 'rate'"),
    ('[[config]\n', ".toml", "not valid"),
])
def test_a_malformed_configs_file_names_the_field(tmp_path, text, suffix, message):
    path = tmp_path / f"configs{suffix}"
    path.write_text(text)
    with pytest.raises(ValueError, match="entry 1|not valid") as info:
        qc.load_configs(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_the_command_runs_a_configs_file_and_fails_cleanly(tmp_path, capsys):
    good = tmp_path / "mine.toml"
    good.write_text('[[config]]\nname = "b4"\nservice = {base = "2ms", per_item = "0.25ms"}\n'
                    'max_batch_size = 4\nmax_queue_delay = "1ms"\nload = 0.6\n\n'
                    '[[config]]\nname = "md1"\nservice = {base = "2ms"}\nrate = 250.0\n')
    out = tmp_path / "report"
    argv = ["validate", "--configs", str(good), "--out", str(out), "--requests", "20000",
            "--workers", "2", "--no-progress"]
    assert main(argv) == 0                       # two local processes
    printed = capsys.readouterr().out
    assert "model family" in printed and (out / "report.md").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text('[[config]]\nservice = {base = "2ms"}\ninstances = 0\nload = 0.5\n')
    assert main(["validate", "--configs", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qmodel: error:") and "instances" in err and "Traceback" not in err


MINE = ('[[config]]\nname = "b4"\nservice = {base = "2ms", per_item = "0.25ms"}\n'
        'max_batch_size = 4\nmax_queue_delay = "1ms"\nload = 0.6\n\n'
        '[[config]]\nname = "md1"\nservice = {base = "2ms"}\nrate = 250.0\n')


def test_the_command_writes_a_new_folder_by_default(tmp_path, monkeypatch, capsys):
    (tmp_path / "mine.toml").write_text(MINE)
    monkeypatch.chdir(tmp_path)
    argv = ["validate", "--configs", "mine.toml", "--requests", "20000", "--workers", "1",
            "--no-progress"]
    assert main(argv) == 0 and main(argv) == 0       # twice: two folders, nothing overwritten
    folders = sorted(tmp_path.glob("validate-mine-*"))
    assert len(folders) == 2 and all((f / "report.md").exists() for f in folders)
    printed = capsys.readouterr().out
    assert all(f"report: {f.name}/report.md" in printed for f in folders)


def test_an_existing_report_is_kept_unless_resume_or_fresh(tmp_path, capsys):
    configs = tmp_path / "mine.toml"
    configs.write_text(MINE)
    out = tmp_path / "committed"
    out.mkdir()
    (out / "report.md").write_text("keep me")
    argv = ["validate", "--configs", str(configs), "--out", str(out), "--requests", "20000",
            "--workers", "1", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("qmodel: error:") and "--resume" in err and "--fresh" in err
    assert (out / "report.md").read_text() == "keep me"
    assert main(argv + ["--resume"]) == 0             # an empty cache: computed, then cached
    assert "## Summary" in (out / "report.md").read_text()
    camp, report = qc.run_validation(configs=configs, out=out, resume=True, requests=20_000,
                                     workers=1, progress=False)
    assert camp.stats["cached"] == 2 and camp.stats["computed"] == 0 and report.parent == out
    camp, _ = qc.run_validation(configs=configs, out=out, fresh=True, requests=20_000,
                                workers=1, progress=False)
    assert camp.stats["computed"] == 2 and camp.settings["source"] == str(configs)
    with pytest.raises(FileExistsError, match="already holds files"):
        qc.run_validation(configs=configs, out=out, requests=20_000, workers=1,
                          progress=False)
    with pytest.raises(ValueError, match="--out DIR"):    # nothing to resume in a new folder
        qc.run_validation(configs=configs, resume=True, requests=20_000, workers=1,
                          progress=False)


def test_a_campaign_runs_on_a_dask_cluster():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        camp = qc.run_campaign(TINY + [UNMODELLED], requests=REQUESTS, seed=3,
                               executor=client.get_executor(), progress=False)
    assert [r["verdict"] for r in camp.rows][2] == "not modelled"
    assert all(r["simulated"]["p99"] > 0 for r in camp.rows)
    assert camp.settings["executor"] == "ClientExecutor" and camp.stats["computed"] == 3
    local = _campaign(TINY)                     # same seed, same numbers wherever it ran
    assert [r["simulated"]["p99"] for r in camp.rows[:2]] == \
        [r["simulated"]["p99"] for r in local.rows]


def test_the_lab_rule_picks_the_largest_batch_under_the_wall():
    points = [lab_point(B, requests=40_000, seed=5, search=False) for B in (8, 16, 32, 64)]
    wall = points[0]["wall"]
    both = [p["B"] for p in points
            if p["sweep"]["p99"]["predicted"] <= wall and p["sweep"]["p99"]["simulated"] <= wall]
    assert largest_under_wall(points) == max(both) == 16   # 32 and 64 break the 10 ms wall
    # a B is taken only if theory AND simulation keep it under the wall
    points[1]["sweep"]["p99"]["simulated"] = 1.05 * wall
    assert largest_under_wall(points) == 8
    assert largest_under_wall(points, by="predicted") == 16


def test_the_example_configs_file_parses():
    from pathlib import Path

    configs = qc.load_configs(Path(__file__).parents[1] / "validation/configs/example.toml")
    assert len(configs) == 4 and configs[2].system.router.name == "round_robin"
    assert configs[1].rate == 900.0 and configs[0].system.preferred_batch_sizes == (4, 8)
