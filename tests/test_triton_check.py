"""qmodel triton-check (issue 25): the comparison re-made from a server's files, and the
harness against a live server (slow)."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import qmodel as qm

pytest.importorskip("tritonclient.grpc", reason="the [triton] extra is not installed")
from qmodel.triton.check import BANDS, compare, report  # noqa: E402

DATA = Path(__file__).parent / "data" / "triton"
RUN_FILES = ("config.pbtxt", "stats_before.json", "stats_after.json", "metrics_before.txt",
             "metrics_after.txt", "perf_analyzer.csv", "trace.json.gz")


@pytest.fixture
def triton_installed():
    """Skip, saying why, where no Triton server can be found."""
    server = pytest.importorskip("qmodel.triton.server")
    try:
        server.find_installation()
    except RuntimeError as err:
        pytest.skip(f"no Triton server here: {err}")


def _runs(tmp_path, repeats=2):
    """The committed run copied as ``repeats`` repeats of one configuration."""
    for repeat in range(1, repeats + 1):
        run = tmp_path / "b8-d2" / f"400-{repeat}"
        run.mkdir(parents=True)
        for name in RUN_FILES:
            shutil.copy(DATA / name, run / name)
        (run / "run.json").write_text(json.dumps({"rate": 400.0, "repeat": repeat}))
    return tmp_path


def test_compare_reproduces_the_calibrated_errors_of_the_committed_run():
    row, = compare(DATA, requests=200_000)
    # the committed run (issue 22, held out of the campaign): Triton's prefetching batcher,
    # 37 of 213 late requests joined, brings p50/p99 within 2% (measured: -0.7%, -1.4%, the
    # pickup gap fitted to the statistics' queue time; -0.5%, -1.2% with the trace's own)
    assert row.prefetch == pytest.approx(37 / 213)
    assert abs(row.error("calibrated", "p50")) < 0.03
    assert abs(row.error("calibrated", "p99")) < 0.05
    assert row.error("mean_only", "p99") == pytest.approx(-0.212, abs=0.005)
    # batches formed when an instance frees instead: p99 10% low (-10.0%; the prediction is
    # analytic there, so the figure is exact; -15.0% with the trace's own gap: the fitted gap
    # takes up part of the mean the rule misses, not the tail)
    at_free, = compare(DATA, requests=200_000, prefetch=False)
    assert at_free.prefetch is None
    assert at_free.error("calibrated", "p99") == pytest.approx(-0.100, abs=0.005)
    # the calibrated simulation agrees with the calibrated prediction (the model is checked
    # against the simulator elsewhere; here they must tell the same story)
    assert row.simulated["p99"] == pytest.approx(row.calibrated["p99"], rel=0.05)
    assert set(row.triton) == {"p50", "p95", "p99"} and row.mean_batch > 1


def test_a_run_recorded_untraced_is_calibrated_from_what_production_reports(tmp_path):
    """A run without trace.json.gz (record_run(traced=0): the server untraced) is calibrated
    from its statistics, metrics and perf_analyzer, the gap and prefetch share modelled: its
    calibrated prediction is the untraced one."""
    run = _runs(tmp_path, repeats=1) / "b8-d2" / "400-1"
    (run / "trace.json.gz").unlink()
    row, = compare(tmp_path, requests=100_000)
    assert row.calibrated == pytest.approx(row.untraced)
    assert row.notes["batcher"].startswith("Triton's prefetching batcher") \
        and "no trace to measure it" in row.notes["batcher"]
    assert abs(row.error("calibrated", "p50")) < 0.05


@pytest.mark.parametrize("missing", ["metrics_after.txt", "stats_before.json"])
def test_a_run_missing_a_file_is_named_with_the_file(tmp_path, missing):
    run = _runs(tmp_path, repeats=1) / "b8-d2" / "400-1"
    (run / missing).unlink()
    with pytest.raises(ValueError, match=rf"run {run}: .*{missing}"):
        compare(tmp_path, requests=100_000)


def test_report_states_the_repeat_spread_and_the_errors(tmp_path):
    rows = compare(_runs(tmp_path), requests=200_000)
    assert [r.repeat for r in rows] == [1, 2] and {r.config for r in rows} == {"b8-d2"}
    text = report(rows)
    assert text.count("| b8-d2 | 400 |") == 2 and "| 0.0% |" in text
    assert "2 of 2 steady runs have repeats that agree within 10% on p99" in text
    e50, e99 = rows[0].error("calibrated", "p50"), rows[0].error("calibrated", "p99")
    assert (f"| calibrated prediction | {abs(e50):.1%} / {e50:+.1%} | {abs(e99):.1%} / "
            f"{e99:+.1%} |") in text
    assert "2 of those 2 runs have the calibrated prediction within 10% on p50" in text
    band = next(label for low, high, label in BANDS if low <= rows[0].utilization < high)
    assert f"| {band} | 2 |" in text and "The others" not in text
    # a run off the target is listed with its errors and utilization
    rows[1].calibrated = {k: 1.3 * v for k, v in rows[1].measured.items()}
    text = report(rows)
    assert "1 of those 2 runs have the calibrated prediction within 10%" in text
    assert f"| b8-d2 | 400 | 2 | +30.0% | +30.0% | {rows[1].utilization:.3f} |" in text


def test_a_run_the_server_could_not_carry_is_marked_and_left_out(tmp_path):
    folder = _runs(tmp_path, repeats=1)
    (folder / "b8-d2" / "400-1" / "run.json").write_text(json.dumps({"rate": 2000.0}))
    row, = compare(folder, requests=100_000)
    assert row.overloaded                       # 393 req/s carried of 2,000 offered
    text = report([row])
    assert "(overloaded)" in text and "0 of 0 steady runs" in text
    assert "calibrated prediction" not in text


def test_qmodel_triton_check_from_a_folder(tmp_path, capsys):
    from qmodel.cli import main

    folder = _runs(tmp_path, repeats=1)
    assert main(["triton-check", "--from", str(folder), "--requests", "100000"]) == 0
    assert "| b8-d2 | 400 | 1 |" in capsys.readouterr().out
    assert "| config |" in (folder / "report.md").read_text()
    assert (folder / "report.png").stat().st_size > 0
    assert main(["triton-check", "--from", str(tmp_path / "none")]) == 2
    assert "no run found" in capsys.readouterr().err
    assert main(["triton-check", "--rates", "100"]) == 2
    assert "either --service-base" in capsys.readouterr().err
    assert main(["triton-check"]) == 2
    assert "give --from DIR" in capsys.readouterr().err


@pytest.mark.slow
def test_the_harness_measures_a_live_server(tmp_path, triton_installed):
    from qmodel.triton.check import measure

    node = qm.Node(qm.ServiceTime.affine(2e-3, 0.5e-3), max_batch_size=8,
                   max_queue_delay=2e-3)
    folders = measure(node, [250], tmp_path / "b8-d2", repeats=1, interval_ms=3000)
    assert [f.name for f in folders] == ["250-1"]
    for name in RUN_FILES + ("run.json", "perf_analyzer.txt"):
        assert (folders[0] / name).is_file(), name
    row, = compare(tmp_path, requests=200_000)
    assert row.throughput == pytest.approx(250, rel=0.15) and row.mean_batch > 1
    # the calibrated model is nearer perf_analyzer's p50 than the mean-only one, as on the
    # committed run
    assert abs(row.error("calibrated", "p50")) < abs(row.error("mean_only", "p50")) + 0.02


def test_the_workload_model_computes_a_profiling_workload(tmp_path):
    from qmodel.triton.server import write_workload_model

    node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=4, max_queue_delay=5e-4)
    folder = write_workload_model(tmp_path, "m", node, "item-tower", blas_threads=1)
    config = (folder / "config.pbtxt").read_text()
    assert "max_batch_size: 4" in config and "max_queue_delay_microseconds: 500" in config
    model = (folder / "1" / "model.py").read_text()
    assert "'item-tower'" in model and "WORKLOADS[WORKLOAD](k, rng, xp)" in model
    compile(model, "model.py", "exec")          # a valid Python file
    with pytest.raises(ValueError, match="workload 'resnet' is unknown"):
        write_workload_model(tmp_path, "m", node, "resnet")
    with pytest.raises(ValueError, match="blas_threads"):
        write_workload_model(tmp_path, "m", node, "item-tower", blas_threads=0)
    with pytest.raises(ValueError, match="backend must be 'numpy'.*or 'cupy'"):
        write_workload_model(tmp_path, "m", node, "item-tower", backend="torch")
    gpu = (write_workload_model(tmp_path, "g", node, "item-tower", backend="cupy")
           / "config.pbtxt").read_text()
    assert "kind: KIND_GPU" in gpu and "gpus: 0" in gpu and "count: 1" in gpu
    assert "kind: KIND_CPU" in config


def test_measure_checks_its_backend_before_any_server_starts(tmp_path):
    from qmodel.triton.check import measure

    node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=4)
    with pytest.raises(ValueError, match="backend must be 'numpy'"):
        measure(node, [100], tmp_path, workload="item-tower", backend="torch")
    with pytest.raises(ValueError, match="needs a workload"):
        measure(node, [100], tmp_path, backend="cupy")


def test_the_workload_model_answers_each_request_of_a_batch(tmp_path, monkeypatch):
    """The model.py that the server runs, executed here against a stand-in for the Python
    backend's pb_utils: it builds a call per batch size and answers every request with the
    sum of its input, through DLPack or, where DLPack fails, the plain tensor."""
    import types

    from qmodel.triton.server import write_workload_model

    class Tensor:
        def __init__(self, name, array):
            self.name, self.array = name, np.asarray(array)

        @classmethod
        def from_dlpack(cls, name, array):
            if dlpack_fails:
                raise RuntimeError("PyCapsule_GetPointer called with incorrect name")
            return cls(name, np.from_dlpack(array))

    class Input:
        def __init__(self, array):
            self.array = array

        def as_numpy(self):
            return self.array

    pb = types.ModuleType("triton_python_backend_utils")
    pb.Tensor = Tensor
    pb.InferenceResponse = lambda tensors: tensors
    pb.get_input_tensor_by_name = lambda request, name: Input(request[name])
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    node = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=3)
    folder = write_workload_model(tmp_path, "m", node, "scoring")
    namespace = {"__name__": "model"}
    exec(compile((folder / "1" / "model.py").read_text(), "model.py", "exec"), namespace)
    model = namespace["TritonPythonModel"]()
    model.initialize({})
    assert len(model.calls) == 4                # a call for each batch size 1..3
    for dlpack_fails in (False, True):
        requests = [{"x": np.full((1, 4), i, dtype=np.float32)} for i in range(3)]
        responses = model.execute(requests)
        assert [r[0].array.tolist() for r in responses] == [[[0.0]], [[4.0]], [[8.0]]]
        assert all(r[0].name == "y" for r in responses)


def test_triton_check_takes_a_workload_or_a_sleep_not_both(capsys):
    from qmodel.cli import main

    assert main(["triton-check", "--rates", "100", "--out", "x", "--service-base", "2ms",
                 "--workload", "item-tower"]) == 2
    assert "either --service-base" in capsys.readouterr().err


@pytest.mark.slow
def test_the_harness_serves_a_numpy_workload(tmp_path, triton_installed):
    from qmodel.triton.check import measure

    knobs = qm.Node(qm.ServiceTime.affine(1e-3), max_batch_size=8, max_queue_delay=5e-4)
    folder, = measure(knobs, [200], tmp_path / "item-tower", repeats=1, interval_ms=3000,
                      workload="item-tower")
    assert json.loads((folder / "run.json").read_text())["workload"] == "item-tower"
    row, = compare(tmp_path, requests=200_000)
    assert row.throughput == pytest.approx(200, rel=0.15)
    # the server's own executions are the service law, not the knobs' placeholder S(k)
    assert "traced executions" in row.notes["service"]
    assert abs(row.error("calibrated", "p50")) < abs(row.error("mean_only", "p50")) + 0.05


def test_triton_check_takes_the_knobs_from_a_config_pbtxt(tmp_path, monkeypatch, capsys):
    from qmodel.cli import main
    import qmodel.triton.check as check
    import qmodel.triton.server as server

    seen = {}

    def measure(node, rates, out, **kw):          # what the harness was asked to run
        seen.update(node=node, rates=rates, workload=kw["workload"], traced=kw["traced"])
        return []

    def compare(*args, **kw):
        raise ValueError("no runs (measure was replaced)")

    monkeypatch.setattr(server, "find_installation", lambda: None)
    monkeypatch.setattr(check, "measure", measure)
    monkeypatch.setattr(check, "compare", compare)
    config = tmp_path / "config.pbtxt"
    config.write_text('name: "m"\nbackend: "python"\nmax_batch_size: 8\ndynamic_batching {\n'
                      '  max_queue_delay_microseconds: 500\n  preferred_batch_size: [4]\n}\n'
                      'instance_group [{ count: 2 kind: KIND_CPU }]\n')
    assert main(["triton-check", "--rates", "100", "--out", str(tmp_path / "runs"),
                 "--workload", "item-tower", "--config", str(config),
                 "--traced", "40000"]) == 2
    node = seen["node"]
    assert (node.max_batch_size, node.max_queue_delay, node.preferred_batch_sizes,
            node.instances) == (8, 5e-4, (4,), 2)
    assert seen["workload"] == "item-tower" and seen["rates"] == (100.0,)
    assert seen["traced"] == 40000
    assert "no runs (measure was replaced)" in capsys.readouterr().err
    assert main(["triton-check", "--rates", "100", "--out", str(tmp_path / "runs"),
                 "--service-base", "2ms", "--config", str(config),
                 "--instances", "3"]) == 2
    assert "drop --instances" in capsys.readouterr().err


@pytest.mark.parametrize("poll", [0, -0.1, 1e-6, True, float("nan"), "0.1"])
def test_record_run_refuses_a_poll_it_cannot_keep(tmp_path, poll):
    from qmodel.triton.check import record_run

    with pytest.raises(ValueError, match="poll=.*at least 0.01"):
        record_run(tmp_path, "m", 100.0, tmp_path / "run", poll=poll)
