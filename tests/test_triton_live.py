"""Calibration from a running server (issue 37, deliverable 4), against a stand-in server on
loopback that answers Triton's HTTP endpoints with the committed run of tests/data/triton:
the configuration as Triton's JSON, the statistics and the metrics before the window, then
after it. The live calibration must equal the one from the files."""

import json
import re
import threading
from dataclasses import replace
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
    # versions "1" and "2" of affine where set: version 2's executions take twice as long
    two_versions = False

    def do_GET(self):  # noqa: N802 (http.server's name)
        seen = self.calls.get(self.path, 0)
        self.calls[self.path] = seen + 1
        which = 0 if seen == 0 else 1
        versions = ("1", "2") if self.two_versions else ("1",)
        stats_path = re.fullmatch(r"/v2/models/affine(?:/versions/(\d+))?/stats", self.path)
        config_path = re.fullmatch(r"/v2/models/affine(?:/versions/(\d+))?/config", self.path)
        if self.path == "/v2/models/stats":
            models = [{"name": "affine", "version": v, "inference_count": 1}
                      for v in versions] + [
                {"name": m, "inference_count": 1} for m in self.extra_models]
            body = json.dumps({"model_stats": models}).encode()
        elif config_path and config_path[1] in (None, *versions):
            body = json.dumps(_config_json()).encode()
        elif stats_path and stats_path[1] in (None, *versions):
            entry, = json.loads(STATS[which].read_text())["model_stats"]
            entries = [_at_version(entry, v) for v in versions
                       if stats_path[1] in (None, v)]
            body = json.dumps({"model_stats": entries}).encode()
        elif self.path == "/metrics":
            body = METRICS[which].read_text()
            if self.two_versions:      # each sample of version 1 again as version 2
                body = re.sub(r'^(nv_\w+\{model="affine",version=)"1"(.*)$',
                              r'\g<0>\n\1"2"\2', body, flags=re.M)
            body = body.encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _at_version(entry: dict, version: str) -> dict:
    """The committed statistics as version ``version``: version 2 took twice as long."""
    entry = json.loads(json.dumps(entry))
    entry["version"] = version
    if version == "2":
        for size in entry["batch_stats"]:
            for phase in ("compute_input", "compute_infer", "compute_output"):
                size[phase]["ns"] = 2 * int(size[phase]["ns"])
    return entry


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
    _Triton.two_versions = False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Triton)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_live_calibration_is_the_calibration_of_the_same_reports(server):
    live = calibrate(url=server, metrics_url=f"{server}/metrics", window=1.0, poll=None)
    files = calibrate(DATA / "config.pbtxt", STATS, METRICS)
    # the window's length gives the rate, at which the pickup gap is fitted, as
    # perf_analyzer's throughput gives it to the files (the stand-in's window is the run's
    # requests over that throughput)
    rated = calibrate(DATA / "config.pbtxt", STATS, METRICS,
                      perf_analyzer=DATA / "perf_analyzer.csv")
    assert (live.max_batch_size, live.max_queue_delay, live.instances) == \
        (files.max_batch_size, files.max_queue_delay, files.instances) == (8, 2e-3, 1)
    for k in range(1, 9):
        assert float(live.service.mean(k)) == pytest.approx(float(rated.service.mean(k)))
    law, law_files = live.service.jitter_law, files.service.jitter_law
    assert (law.name, law.cv) == (law_files.name, law_files.cv)
    assert live.overhead == pytest.approx(files.overhead) and live.prefetch == files.prefetch
    assert live.calibration.origin("pickup gap") == (
        "measured", rated.calibration.origin("pickup gap")[1].replace(
            "perf_analyzer's throughput", "the statistics' requests over the sampled window"))
    assert [o for o in live.calibration.origins if o[0] != "pickup gap"] == \
        [o for o in files.calibration.origins if o[0] != "pickup gap"]
    # the snapshots were taken once before the window and once after it
    assert _Triton.calls["/v2/models/affine/stats"] == 2 and _Triton.calls["/metrics"] == 2
    same = replace(rated, overhead=files.overhead)
    assert qm.predict(live, rate=100.0).p99 == pytest.approx(qm.predict(same, rate=100.0).p99)


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


def test_a_model_served_at_two_versions_is_sampled_at_the_one_named(server, capsys):
    """Triton answers /v2/models/<m>/stats with every version it serves, each under the
    model's name; a version's own statistics are at /v2/models/<m>/versions/<v>/stats."""
    from qmodel.cli import main
    from qmodel.triton import read_metrics, read_stats

    _Triton.two_versions = True
    with pytest.raises(ValueError, match="serves model 'affine' at versions 1, 2: name one "
                                         "with version="):
        calibrate(url=server, window=1.0)
    _Triton.calls = {}
    one = calibrate(url=server, version=1, metrics_url=f"{server}/metrics", window=1.0,
                    poll=None)
    assert _Triton.calls["/v2/models/affine/versions/1/stats"] == 2
    # the window's rate fits the gap as perf_analyzer's throughput does for the files
    files = calibrate(DATA / "config.pbtxt", STATS, METRICS,
                      perf_analyzer=DATA / "perf_analyzer.csv")
    for k in range(1, 9):
        assert float(one.service.mean(k)) == pytest.approx(float(files.service.mean(k)))
    assert [o[:2] for o in one.calibration.origins if o[0] != "overhead"] == \
        [o[:2] for o in files.calibration.origins if o[0] != "overhead"]
    _Triton.calls = {}
    two = calibrate(url=server, version="2", metrics_url=f"{server}/metrics", window=1.0)
    assert float(two.service.mean(1)) > 1.5 * float(one.service.mean(1))
    # the same snapshots as files: the version chooses
    _Triton.calls = {}
    url = f"http://{server}/v2/models/affine/stats"
    before, after = json.loads(fetch_text(url)), json.loads(fetch_text(url))
    with pytest.raises(ValueError, match=r"several model statistics.*pass version="):
        read_stats(before, after)
    assert read_stats(before, after, version=2).version == "2"
    scrape = (fetch_text(f"http://{server}/metrics"), fetch_text(f"http://{server}/metrics"))
    with pytest.raises(ValueError, match="several models.*pass version="):
        read_metrics(*scrape)
    assert read_metrics(*scrape, version="1").version == "1"
    with pytest.raises(ValueError, match="version='v2': give the model version as a whole"):
        calibrate(url=server, version="v2", window=1.0)
    _Triton.calls = {}
    code = main(["triton-check", "--from-server", server, "--model-version", "2",
                 "--metrics-url", f"{server}/metrics", "--window", "1"])
    assert code == 0 and "model affine" in capsys.readouterr().out


def fetch_text(url: str) -> str:
    from urllib.request import urlopen

    with urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def test_second_review_of_versions():
    """Found by review: a trace holding two versions was read as one model whatever version
    calibrate was given; read_metrics told a user with the right model to pass model=; a
    numpy integer was refused as a version."""
    import numpy as np
    from qmodel.triton import read_metrics, read_trace
    from qmodel.triton.stats import checked_version

    def request(i, version, start, end):
        stamps = {"QUEUE_START": start - 100, "COMPUTE_START": start, "COMPUTE_END": end,
                  "REQUEST_START": start - 200, "REQUEST_END": end + 100}
        return [{"id": i, "model_name": "m", "model_version": version}] + [
            {"id": i, "timestamps": [{"name": n, "ns": ns}]} for n, ns in stamps.items()]

    events = []
    for i in range(8):
        version = 1 + i % 2
        start = i * 10_000_000
        events += request(i, version, start, start + 1_000_000 * version)
    with pytest.raises(ValueError, match="holds versions 1, 2 of 'm': pass version="):
        read_trace(events, edges=False)
    assert set(read_trace(events, edges=False, version=2).executions.round(6)) == {0.002}
    with pytest.raises(ValueError, match="no requests of 'm' version 3"):
        read_trace(events, version=3)
    scrape = METRICS[0].read_text(), METRICS[1].read_text()
    with pytest.raises(ValueError, match="pass the model= and version= of one listed"):
        read_metrics(*scrape, model="affine", version=9)
    assert checked_version(np.int64(2)) == "2"
    with pytest.raises(ValueError, match="as a whole number"):
        checked_version("²")


def test_a_version_the_server_does_not_serve_names_those_it_does(server):
    _Triton.two_versions = True
    with pytest.raises(ValueError, match="serves 'affine' at versions 1, 2"):
        calibrate(url=server, version=9, window=1.0)


def test_versions_without_numbers_are_refused_before_the_window(server, monkeypatch):
    """Found by review: statistics entries without a "version" key (Triton always sends one,
    a proxy may not) were refused only after the window, with a fix that could not be
    followed."""
    import sys

    module = sys.modules[__name__]
    plain = module._at_version
    monkeypatch.setattr(module, "_at_version", lambda entry, version: {
        k: v for k, v in plain(entry, version).items() if k != "version"})
    _Triton.two_versions = True
    waited = []
    from qmodel.triton import live
    monkeypatch.setattr(live, "_sleep", waited.append)
    with pytest.raises(ValueError, match="serves model 'affine' at several versions"):
        calibrate(url=server, window=1.0)
    assert waited == []
