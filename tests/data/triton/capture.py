"""Make the real Triton files of this folder: one run of a real Triton 2.51 server (CPU,
Python backend) under open-loop Poisson load from perf_analyzer.

The model ("affine") sleeps S(k) = 2 ms + 0.5 ms x k per batch of k requests, behind Triton's
dynamic batcher with max_batch_size 8, max_queue_delay 2 ms and one CPU instance. The server
runs with summary latencies on and its request trace switched on for the measured window
only; perf_analyzer drives 400 requests/s over gRPC (three 5 s windows after its warm-up).

Files written here:

- config.pbtxt: the model's configuration as served;
- stats_before.json, stats_after.json: ``GET /v2/models/affine/stats`` around the run;
- metrics_before.txt, metrics_after.txt: the Prometheus metrics endpoint around the run;
- trace.json.gz: Triton's TIMESTAMPS trace of the first 1,500 requests of the window;
- perf_analyzer.csv: perf_analyzer's ``-f`` output (latencies in microseconds);
- perf_analyzer.txt: its printed report.

Run (about a minute; needs the server and perf_analyzer, see docs/triton-server.md):
``QMODEL_TRITON_DIST=/path/to/dist .venv/bin/python tests/data/triton/capture.py``
"""

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import qmodel as qm
from qmodel.triton.server import TritonServer, run_perf_analyzer, write_sleeping_model

HERE = Path(__file__).parent
NODE = qm.Node(qm.ServiceTime.affine(2e-3, 0.5e-3), max_batch_size=8, max_queue_delay=2e-3)
RATE = 400.0
TRACED = 1500


def main():
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folder = write_sleeping_model(scratch / "repo", "affine", NODE)
        trace = scratch / "trace.json"
        with TritonServer(scratch / "repo", trace_file=trace, trace_count=TRACED) as server:
            before = server.stats("affine"), server.metrics()
            server.trace("TIMESTAMPS")
            report = run_perf_analyzer(server, "affine", RATE, HERE / "perf_analyzer.csv")
            server.trace("OFF")
            after = server.stats("affine"), server.metrics()
        for name, (stats, metrics) in (("before", before), ("after", after)):
            (HERE / f"stats_{name}.json").write_text(json.dumps(stats, indent=1) + "\n")
            (HERE / f"metrics_{name}.txt").write_text(metrics)
        (HERE / "perf_analyzer.txt").write_text(report)
        shutil.copy(folder / "config.pbtxt", HERE / "config.pbtxt")
        # Triton writes the trace as trace.json.0 (and .1, ... when it rotates): one list
        events = []
        for part in sorted(scratch.glob("trace.json*"), key=lambda p: int(p.suffix[1:])):
            events += json.loads(part.read_text())
        with gzip.open(HERE / "trace.json.gz", "wt") as packed:
            json.dump(events, packed, separators=(",", ":"))
    print(report)


if __name__ == "__main__":
    main()
