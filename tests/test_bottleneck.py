"""The bottleneck view and `qmodel ensemble` (issue 23, item 5)."""

import json

import pytest

import qmodel as qm
from qmodel.cli import main

S = qm.ServiceTime.affine(1e-3, 1e-4)
ENS = qm.Ensemble({"pre": qm.Node(S, max_batch_size=4, instances=2),
                   "model": qm.Node(qm.ServiceTime.affine(2e-3, 5e-4), max_batch_size=8)},
                  [("pre", "model")])


def test_the_stage_that_holds_the_tail_is_named_and_its_knobs_tried():
    report = qm.bottleneck(ENS, rate=300.0, fallback="raise")
    assert report.dominant == "model"
    assert report.stages["model"] > report.stages["pre"]
    assert report.latency == pytest.approx(report.result.p99)
    changes = {(c.stage, c.change) for c in report.changes}
    assert ("model", "max_batch_size 8 -> 16") in changes
    assert ("pre", "instances 2 -> 3") in changes
    assert ("model", "max_queue_delay 0 -> 2.5 ms") in changes      # delay 0: tried at S(1)
    # a second instance of the model takes the wait for a free instance away: the tail shrinks
    more = next(c for c in report.changes if c.change == "instances 1 -> 2"
                and c.stage == "model")
    assert more.latency < report.latency
    assert report.best.latency <= more.latency
    text = report.table()
    assert "dominant stage: model" in text and "pre" in text


def test_a_change_that_saturates_a_stage_is_reported_not_raised():
    tight = qm.Ensemble({"a": qm.Node(qm.ServiceTime.affine(1e-3, 1e-3), max_batch_size=2),
                         "b": qm.Node(S)}, [("a", "b")])
    rate = 0.9 * tight.capacity
    report = qm.bottleneck(tight, rate=rate, fallback="raise")
    halved = next(c for c in report.changes if c.stage == "a" and "-> 1" in c.change)
    assert halved.latency is None and "capacity" in halved.note


def test_bottleneck_takes_pipelines_only():
    with pytest.raises(ValueError, match="takes an Ensemble or a Cluster of Ensemble pods"):
        qm.bottleneck(qm.Node(S), rate=100.0)


def _repository(tmp_path):
    for model, text in qm.triton.write_config(ENS, "pipe", kind="KIND_CPU").items():
        (tmp_path / model).mkdir()
        (tmp_path / model / "config.pbtxt").write_text(text)
    return tmp_path


def test_qmodel_ensemble_reads_the_repository_and_predicts(tmp_path, capsys):
    pytest.importorskip("tritonclient.grpc", reason="needs the triton extra")
    repo = _repository(tmp_path)
    args = ["ensemble", "--triton-repo", str(repo), "--model", "pipe",
            "--service", "pre=1ms+0.1ms", "--service", "model=2ms+0.5ms", "--rate", "300"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    direct = qm.predict(ENS, rate=300.0)
    assert out["predicted"]["p99"] == pytest.approx(direct.p99)
    assert set(out["stages"]) == {"pre", "model"}
    assert main(args + ["--pods", "2", "--bottleneck", "--plot", str(tmp_path / "b.png")]) == 0
    text = capsys.readouterr().out
    assert "Cluster(2 x Ensemble(" in text and "dominant stage: model" in text
    assert (tmp_path / "b.png").stat().st_size > 0


def test_qmodel_ensemble_errors_are_one_line(tmp_path, capsys):
    pytest.importorskip("tritonclient.grpc", reason="needs the triton extra")
    repo = _repository(tmp_path)
    base = ["ensemble", "--triton-repo", str(repo), "--model", "pipe", "--rate", "300"]
    assert main(base + ["--service", "pre=1ms"]) == 2
    assert "no ServiceTime for 'model'" in capsys.readouterr().err
    assert main(base + ["--service", "pre", "--service", "model=2ms"]) == 2
    assert "write STAGE=BASE[+PER_ITEM][:JITTER]" in capsys.readouterr().err
    assert main(["ensemble", "--triton-repo", str(repo), "--model", "pre", "--rate", "1",
                 "--service", "pre=1ms"]) == 2
    assert "'pre' is not an ensemble" in capsys.readouterr().err


def _patched_predict(monkeypatch, answer):
    """qmodel.bottleneck's predict replaced: ``answer(system)`` for every call."""
    import sys

    monkeypatch.setattr(sys.modules["qmodel.bottleneck"], "predict", lambda system, **kwargs: answer(system))


def test_a_change_that_cuts_nothing_is_not_called_the_largest_cut(monkeypatch):
    """Every change answered with the configured latency (+0.0%): no best change, and the
    table says so (it printed "largest cut: ... (+0.0%)")."""
    base = qm.predict(ENS, rate=300.0)
    _patched_predict(monkeypatch, lambda system: base)
    report = qm.bottleneck(ENS, rate=300.0)
    assert all(c.latency == pytest.approx(report.latency) for c in report.changes)
    assert report.best is None
    text = report.table()
    assert "largest cut" not in text and "no change tried cuts the end-to-end p99" in text


def test_the_dominant_stage_says_which_rule_chose_it(monkeypatch):
    """Where the answer carries no stage's own latency, the stage nearest saturation is named
    and the report says so (it claimed "largest own p99" silently)."""
    from dataclasses import replace

    base = qm.predict(ENS, rate=300.0)
    bare = qm.predict(qm.Node(qm.ServiceTime.affine(2e-3, 5e-4), max_batch_size=8), rate=300.0)
    assert bare.stages is None
    _patched_predict(monkeypatch, lambda system: bare if system is ENS else base)
    report = qm.bottleneck(ENS, rate=300.0)
    assert report.stages == {} and report.dominant == ENS.bottleneck
    assert report.dominant_by == "utilization"
    assert "nearest saturation" in report.table()
    _patched_predict(monkeypatch, lambda system: base)
    assert qm.bottleneck(ENS, rate=300.0).dominant_by == "own quantile"
    assert replace(report, dominant_by="own quantile").table().count("saturation") == 0


def test_a_simulated_change_is_marked_by_its_accuracy_record_not_its_wording(monkeypatch):
    """A change answered by the simulator is flagged from ``accuracy.exactness``: rewording
    its ``method`` does not lose the mark (the table tested the method's first word)."""
    base = qm.predict(ENS, rate=300.0, extrapolate=True)      # a model's answer
    assert base.accuracy.exactness == "approximation"
    simulated = qm.simulate(ENS, rate=300.0, requests=40_000, seed=3)
    simulated.method = "Monte Carlo run of the changed ensemble"
    assert simulated.accuracy.exactness == "simulation"
    _patched_predict(monkeypatch, lambda system: base if system is ENS else simulated)
    report = qm.bottleneck(ENS, rate=300.0)
    assert report.changes and all(c.simulated for c in report.changes)
    rows = [line for line in report.table().splitlines() if "->" in line]
    assert len(rows) == len(report.changes)
    assert all(line.endswith("(simulated)") for line in rows)
    _patched_predict(monkeypatch, lambda system: base)
    assert not any(c.simulated for c in qm.bottleneck(ENS, rate=300.0).changes)
