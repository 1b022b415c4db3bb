"""The qmodel command: flags with units in, a table or JSON out, one-line errors."""

import json

import pytest

from qmodel.cli import main

NODE = ["--service-base", "2.4ms", "--per-item", "540us", "--max-batch-size", "8",
        "--max-queue-delay", "1ms"]


def test_simulate_prints_a_table(capsys):
    assert main(["simulate", *NODE, "--rate", "800", "--requests", "60000"]) == 0
    out = capsys.readouterr().out
    for word in ("p50", "p95", "p99", "95% confidence interval", "mean batch size"):
        assert word in out
    assert "B=8, delay=1ms" in out


def test_simulate_json_matches_the_api(capsys):
    import qmodel as qm

    argv = ["simulate", *NODE, "--instances", "2", "--nodes", "3", "--router", "round_robin",
            "--rate", "3000", "--requests", "60000", "--seed", "5", "--json"]
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    node = qm.Node(qm.ServiceTime.affine(2.4e-3, 0.54e-3), max_batch_size=8,
                   max_queue_delay=1e-3, instances=2)
    r = qm.simulate(qm.Cluster(node, count=3, router="round_robin"), rate=3000.0,
                    requests=60_000, seed=5)
    assert rep["p99"] == pytest.approx(r.p99)
    assert rep["p99_ci95"][0] < rep["p99"] < rep["p99_ci95"][1]
    assert rep["mean_batch_size"] == pytest.approx(r.mean_batch_size)


def test_service_table_trace_and_jitter(tmp_path, capsys):
    trace = tmp_path / "arrivals.txt"
    trace.write_text("\n".join(str(i * 2e-3) for i in range(5000)))
    argv = ["simulate", "--service-table", "1:1ms,4:2ms,8:3ms", "--jitter", "lognormal:0.2",
            "--max-batch-size", "8", "--trace", str(trace), "--json"]
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["arrival_rate"] == pytest.approx(500.0)
    assert rep["mean_batch_size"] == pytest.approx(1.0)   # 2 ms apart, 1 ms service: alone


@pytest.mark.parametrize("argv, message", [
    (["--max-queue-delay", "2000", "--rate", "100"], "looks like micro"),
    (["--max-batch-size", "0", "--rate", "10"], "no batching"),
    (["--rate", "1e6"], "capacity"),
    (["--rate", "-5"], "rate"),
    ([], "give the arrival rate"),
    (["--service-base", "1ms", "--service-table", "1:1ms,2:2ms", "--rate", "10"], "not both"),
    (["--router", "round_robin", "--nodes", "2", "--weights", "1,1", "--rate", "10"],
     "weights only apply"),
    (["--trace", "/nonexistent/file", "--max-batch-size", "2"], "--trace"),
])
def test_errors_are_one_line_with_the_fix(argv, message, capsys):
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qmodel: error:") and message in err
    assert "Traceback" not in err


def test_malformed_flags_are_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--max-queue-delay", "2 parsecs", "--rate", "1"])
    assert "duration" in capsys.readouterr().err


def test_predict_prints_the_model_and_its_claim(capsys):
    assert main(["predict", *NODE, "--rate", "800"]) == 0
    out = capsys.readouterr().out
    for word in ("predicted", "p99", "method: batch node", "accuracy", "approximation"):
        assert word in out


def test_predict_json_matches_the_api_and_check_simulates(capsys):
    import qmodel as qm

    assert main(["predict", *NODE, "--rate", "800", "--json", "--check", "100000"]) == 0
    rep = json.loads(capsys.readouterr().out)
    node = qm.Node(qm.ServiceTime.affine(2.4e-3, 0.54e-3), max_batch_size=8,
                   max_queue_delay=1e-3)
    assert rep["p99"] == pytest.approx(qm.predict(node, rate=800.0).p99)
    # --check is the simulation of the same node, at the same rate, seed and length
    sim = qm.simulate(node, rate=800.0, requests=100_000, seed=1)
    assert rep["simulated"]["p99"] == pytest.approx(sim.p99, rel=1e-6)
    assert rep["simulated"]["p99_ci95"] == pytest.approx(list(sim.ci(0.99)), rel=1e-6)
    assert rep["exactness"] == "approximation"


def test_predict_errors_are_one_line(capsys):
    assert main(["predict", *NODE, "--rate", "1e6"]) == 2              # unstable
    assert "capacity" in capsys.readouterr().err
    no_model = [*NODE, "--rate", "800", "--nodes", "4", "--instances", "2",
                "--router", "least_outstanding"]
    assert main(["predict", *no_model, "--no-fallback"]) == 3          # not modelled yet
    assert "not modelled yet" in capsys.readouterr().err


def test_predict_without_a_model_answers_by_simulation(capsys):
    no_model = [*NODE, "--rate", "800", "--nodes", "4", "--instances", "2",
                "--router", "least_outstanding"]
    assert main(["predict", *no_model, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["model"] == "simulation" and rep["accuracy"]["fallback_reason"]
    assert rep["exactness"] == "simulation" and rep["p99"] > rep["p50"] > 0


def test_routers_compares_every_router(tmp_path, capsys):
    plot = tmp_path / "routers.png"
    argv = ["routers", "--service-base", "2ms", "--per-item", "0.2ms", "--max-batch-size", "8",
            "--nodes", "4", "--rate", "6000", "--plot", str(plot), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["router"]: r for r in out["routers"]}
    assert set(rows) == {"random", "round_robin", "power_of_two", "least_outstanding"}
    # round robin smooths each node's arrivals: a lower p99 than random at the same load
    assert rows["round_robin"]["predicted"]["p99"] < rows["random"]["predicted"]["p99"]
    assert plot.stat().st_size > 0
    assert main(argv[:-3]) == 0
    assert "lowest p99:" in capsys.readouterr().out


def test_routers_and_predict_bad_input(tmp_path, capsys):
    base = ["--service-base", "2ms", "--max-batch-size", "8", "--nodes", "4"]
    assert main(["routers", *base, "--rate", "6000", "--router", "round_robin"]) == 2
    assert "drop --router" in capsys.readouterr().err
    assert main(["routers", *base, "--rate", "1e6"]) == 2
    assert "capacity" in capsys.readouterr().err
    # predict takes a trace: renewal arrivals with its rate and scv, said in the accuracy line
    trace = tmp_path / "arrivals.txt"
    trace.write_text("\n".join(str(i * 1e-3) for i in range(3000)))
    # (a trace of even gaps lies outside the renewal family's measured scv: extrapolated)
    assert main(["predict", "--service-base", "2ms", "--max-batch-size", "8", "--trace",
                 str(trace), "--extrapolate"]) == 0
    out = capsys.readouterr().out
    assert "trace replaced by renewal arrivals" in out and "extrapolated" in out


def test_warnings_are_one_line_too():
    # too few requests for the start-up transient at 94% load: the simulator warns, and the
    # command line prints it like its errors, without a source location
    import subprocess
    import sys
    code = ("import sys; from qmodel.cli import main; sys.exit(main(sys.argv[1:]))")
    argv = ["simulate", "--service-base", "2ms", "--per-item", "0.1ms", "--max-batch-size",
            "64", "--jitter", "lognormal:0.3", "--rate", "7200", "--requests", "1e5"]
    run = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(
        "qmodel: warning: requests=100000 is too short: 8 replicas leave")
    assert "ask for at least 1,521,704 requests" in lines[0]
    assert "p99" in run.stdout


def test_predict_and_simulate_label_the_same_quantiles_and_the_load(capsys):
    for command in (["predict"], ["simulate", "--requests", "200000"]):
        assert main(command + NODE + ["--rate", "1000"]) == 0
        out = capsys.readouterr().out
        assert "\np99.9 " in out and "p999" not in out
        assert "rate 1,000.0 req/s   load 0." in out


def test_a_bare_service_time_of_seconds_gets_a_unit_hint(recwarn):
    with pytest.warns(UserWarning, match="for milliseconds write 2ms"):
        assert main(["predict", "--service-base", "2", "--rate", "0.2"]) == 0
    recwarn.clear()
    assert main(["predict", "--service-base", "2ms", "--rate", "100"]) == 0
    assert not [w for w in recwarn if "milliseconds" in str(w.message)]


@pytest.mark.parametrize("jitter, message", [
    ("lognormal", "needs a coefficient of variation: lognormal:0.3"),
    ("weibull:2", "use deterministic, exponential, gamma:0.3, lognormal:0.3"),
    ("gamma:x", "write NAME or NAME:CV"),
])
def test_jitter_errors_are_written_in_the_command_line_syntax(jitter, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--jitter", jitter, "--rate", "10"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "('" not in err


def test_profile_writes_the_profile_and_its_plot_and_predict_uses_it(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", "--workload", "matmul", "--batch-sizes", "1-3,8", "--repeats", "3",
                 "--warmup", "1", "--concurrency", "1-2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "concurrency 2:" in text and "fitted:" in text and "largest mean error" in text
    assert out.exists() and out.with_suffix(".png").stat().st_size > 1000
    from qmodel.profiling import Profile
    assert sorted(Profile.load(out).samples[2]) == [1, 2, 3, 8]
    for command in (["predict"], ["simulate", "--requests", "40000"]):
        assert main([*command, "--profile", str(out), "--max-batch-size", "8",
                     "--profile-concurrency", "2", "--rate", "300"]) == 0
        assert "empirical" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["predict", "--profile", "/nonexistent.json", "--rate", "10"], "cannot read profile"),
    (["predict", "--profile", "p.json", "--service-base", "1ms", "--rate", "10"],
     "give --profile, --service-base/--per-item or --service-table, one of them"),
    (["profile", "--workload", "resnet", "--out", "x.json"], "workload must be one of"),
])
def test_profile_errors_are_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("qmodel: error:") and message in err and "\n" == err[-1]
    assert err.count("\n") == 1


def test_profile_batch_sizes_are_checked_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--batch-sizes", "8-1", "--out", "x.json"])
    assert "must go up from 1" in capsys.readouterr().err
