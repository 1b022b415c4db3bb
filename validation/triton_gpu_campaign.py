"""Issue 37's short GPU campaign: a CuPy model behind Triton's dynamic batcher on a lent GPU.

The case study's item tower (qmodel's ``item-tower`` profiling workload: a 512-2048-2048-256
MLP, 22 MB of weights) computed with CuPy in KIND_GPU instances of Triton's Python backend,
each execution ending when the GPU has finished its batch, so the service law is the server's
own. Three configurations: one instance and two with no delay, two with a 0.5 ms delay, at
three rates each, one repeat, each run traced from its start (``--traced``), so
calibration can be judged with and without the trace. Runs go to ``OUT/<config>/<rate>-1/``;
those of 2026-11-28 are in validation/reports/triton/runs-gpu/ (traced=1000, which on this
server covers only the run's first 0.2-1.0 s: docs/triton-server.md says what that hid).

On the device machine, which reaches no registry, Triton and protobuf travel in .gpu-carry/
(``bash validation/triton_gpu_pack.sh`` makes it and says how to run this script there).

A configuration whose run fails (perf_analyzer unable to hold the rate, say) is reported and
the campaign goes on, so one overloaded rate cannot take the others with it. The comparison
is made afterwards without a server: ``qmodel triton-check --from OUT``.
"""

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import qmodel as qm
from qmodel.triton.check import measure

# the batching knobs only: the workload's executions are the service law
PLACEHOLDER = qm.ServiceTime.affine(1e-3, 0.1e-3)


def knobs(B, delay=0.0, instances=1):
    return qm.Node(PLACEHOLDER, max_batch_size=B, max_queue_delay=delay, instances=instances)


# name -> (knobs, rates in requests per second), most wanted first: two instances without a
# delay are the configuration whose p99 the CPU campaign misses most. Rates are guesses
# below the capacity: about 0.5 ms of the Python backend per batch plus ~0.1 ms per request
# and ~0.15 ms on the GPU, about 5,000 req/s for one instance at B 8.
CONFIGS = {
    "gpu-item-tower-b8-d0-i2": (knobs(8, instances=2), [1500, 3000, 5000]),
    "gpu-item-tower-b8-d0": (knobs(8), [1000, 2000, 3200]),
    "gpu-item-tower-b8-d0.5-i2": (knobs(8, 0.5e-3, instances=2), [1500, 3000, 5000]),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder for the runs")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--interval-ms", type=int, default=3000)
    # 8,000 requests: 2-8 s of these runs, most of perf_analyzer's windows (1,000 covered
    # only the first second, whose tail was not the run's); about 1 MB of trace per run
    parser.add_argument("--traced", type=int, default=8000)
    args = parser.parse_args(argv)
    out = Path(args.out)
    start, log = time.monotonic(), []
    for name in args.configs.split(","):
        node, rates = CONFIGS[name]
        for rate in rates:
            # one rate at a time, so a failure costs that rate only
            try:
                measure(node, [rate], out / name, repeats=1, interval_ms=args.interval_ms,
                        traced=args.traced, seed=1, workload="item-tower", backend="cupy")
                status = "ok"
            except Exception as error:          # noqa: BLE001 - reported, campaign goes on
                status = f"failed: {type(error).__name__}: {str(error)[-1500:]}"
                traceback.print_exc()
            log.append({"config": name, "rate": rate, "status": status,
                        "at_s": round(time.monotonic() - start, 1)})
            print(json.dumps(log[-1]), flush=True)
            (out / "campaign.json").write_text(json.dumps(log, indent=1) + "\n")
    return 0 if all(e["status"] == "ok" for e in log) else 1


if __name__ == "__main__":
    sys.exit(main())
