"""Calibration from a running server (issue 37, deliverable 4), against a stand-in server on
loopback that answers Triton's HTTP endpoints with the committed run of tests/data/triton:
the configuration as Triton's JSON, the statistics and the metrics before the window, then
after it. The live calibration must equal the one from the files."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import qmodel as qm
from qmodel.triton import calibrate

pytest.importorskip("tritonclient.grpc", reason="the [triton] extra is not installed")

DATA = Path(__file__).parent / "data" / "triton"
STATS = (DATA / "stats_before.json", DATA / "stats_after.json")
METRICS = (DATA / "metrics_before.txt", DATA / "metrics_after.txt")


def _config_json() -> dict:
    from google.protobuf import json_format, text_format
    from qmodel.triton.pbtxt import proto

    _, pb = proto()
    message = text_format.Parse((DATA / "config.pbtxt").read_text(), pb.ModelConfig())
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


class _Triton(BaseHTTPRequestHandler):
    """Answers like Triton: the first statistics and metrics requests get the snapshots from
    before the window, later ones those from after."""

    calls: dict = {}
    extra_models: tuple = ()

    def do_GET(self):  # noqa: N802 (http.server's name)
        seen = self.calls.get(self.path, 0)
        self.calls[self.path] = seen + 1
        which = 0 if seen == 0 else 1
        if self.path == "/v2/models/stats":
            models = [{"name": "affine", "inference_count": 1}] + [
                {"name": m, "inference_count": 1} for m in self.extra_models]
            body = json.dumps({"model_stats": models}).encode()
        elif self.path == "/v2/models/affine/config":
            body = json.dumps(_config_json()).encode()
        elif self.path == "/v2/models/affine/stats":
            body = STATS[which].read_bytes()
        elif self.path == "/metrics":
            body = METRICS[which].read_bytes()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    # The window: as long as the committed run's (its requests at perf_analyzer's
    # throughput), without waiting for it.
    from qmodel.triton import live, read_perf_analyzer, read_stats

    row, = read_perf_analyzer(DATA / "perf_analyzer.csv")
    now = [0.0]
    monkeypatch.setattr(live, "_clock", lambda: now[0])
    monkeypatch.setattr(live, "_sleep", lambda seconds: now.__setitem__(
        0, now[0] + read_stats(*STATS).requests / row.throughput))
    _Triton.calls = {}
    _Triton.extra_models = ()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Triton)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_live_calibration_is_the_calibration_of_the_same_reports(server):
    live = calibrate(url=server, metrics_url=f"{server}/metrics", window=1.0)
    files = calibrate(DATA / "config.pbtxt", STATS, METRICS)
    assert (live.max_batch_size, live.max_queue_delay, live.instances) == \
        (files.max_batch_size, files.max_queue_delay, files.instances) == (8, 2e-3, 1)
    for k in range(1, 9):
        assert float(live.service.mean(k)) == pytest.approx(float(files.service.mean(k)))
    law, law_files = live.service.jitter_law, files.service.jitter_law
    assert (law.name, law.cv) == (law_files.name, law_files.cv)
    assert live.overhead == pytest.approx(files.overhead) and live.prefetch == files.prefetch
    assert live.calibration.origins == files.calibration.origins
    # the snapshots were taken once before the window and once after it
    assert _Triton.calls["/v2/models/affine/stats"] == 2 and _Triton.calls["/metrics"] == 2
    assert qm.predict(live, rate=100.0).p99 == pytest.approx(qm.predict(files, rate=100.0).p99)


def test_the_served_model_is_found_or_asked_for(server):
    node = calibrate(url=f"http://{server}/", window=1.0)        # scheme and slash: fine
    assert node.max_batch_size == 8 and node.calibration.origin("overhead")[0] == "assumed"
    _Triton.calls, _Triton.extra_models = {}, ("other",)
    with pytest.raises(ValueError, match=r"serves 2 models \(affine, other\): name one"):
        calibrate(url=server, window=1.0)
    _Triton.calls = {}
    assert calibrate(url=server, model="affine", window=1.0).max_batch_size == 8


@pytest.mark.parametrize("kwargs, message", [
    (dict(url="127.0.0.1:1", window=1.0), "127.0.0.1:1/v2/models/stats could not be read"),
    (dict(url="127.0.0.1:1", window=0.1), r"window=0.1: .* at least 1"),
    (dict(url="127.0.0.1:1", window=float("nan")), "window=nan"),
    (dict(url="", window=1.0), "give the server's HTTP endpoint"),
    (dict(config=DATA / "config.pbtxt", url="127.0.0.1:1"), "drop config"),
    (dict(config=DATA / "config.pbtxt", stats=STATS, model="affine"), "go with url="),
    (dict(), "or url= of a running server"),
])
def test_bad_live_arguments_say_what_to_give(kwargs, message):
    with pytest.raises(ValueError, match=message):
        calibrate(**kwargs)


def test_triton_check_from_server_prints_prediction_against_the_server(server, capsys):
    from qmodel.cli import main

    code = main(["triton-check", "--from-server", server, "--metrics-url",
                 f"{server}/metrics", "--window", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "model affine" in out and "calibrated prediction" in out
    # the committed run's metrics hold Triton's summary quantiles of the request duration
    assert "Triton's own" in out and "p99" in out


def test_second_review_of_live_calibration(server):
    """Found by review: a model name with a space left urllib's InvalidURL unhandled; an
    empty or HTML metrics body was read as a file path; numpy windows were refused; an upper
    case scheme or a query string made a wrong URL."""
    import numpy as np
    from qmodel.triton.live import normal_url

    assert normal_url("HTTP://Host:8000/") == "http://Host:8000"
    with pytest.raises(ValueError, match="without a query"):
        normal_url("localhost:8000?x=1")
    with pytest.raises(ValueError, match="could not be read"):
        calibrate(url=server, model="my model", window=1.0)
    with pytest.raises(ValueError, match="returned no Prometheus text"):
        calibrate(url=server, metrics_url=f"{server}/v2/models/stats", window=1.0)
    _Triton.calls = {}
    assert calibrate(url=server, window=np.float32(2.0)).max_batch_size == 8
    with pytest.raises(ValueError, match="traced=-1"):
        from qmodel.triton.check import record_run
        record_run("repo", "m", 100.0, "out", traced=-1)
