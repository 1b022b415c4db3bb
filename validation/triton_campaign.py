"""The real-server campaign of issue 25: predicted against measured on Triton 2.51.

Eight configurations of a Python-backend model that sleeps S(k) = 2 ms + 0.5 ms x k (two
with lognormal jitter on the sleep), behind Triton's dynamic batcher on CPU instances, each at
three rates, twice: 48 runs of about 22 s, on loopback, one fresh server per run. Raw files
go to validation/reports/triton/runs/<config>/<rate>-<repeat>/, the comparison to
validation/reports/triton/report.md (``qmodel triton-check --from
validation/reports/triton/runs --report validation/reports/triton/report.md`` remakes it
without a server).

The rates. The two lower ones are 30% and 55% of a first guess of each configuration's
capacity, its S(k) with 0.4 ms more per batch. That guess was low for batching: the
server's executions measured about 0.55 ms + 0.14 ms x k above the sleep (S(8) 7.7 ms
against 6 ms slept: the Python backend's work per request), so the third rate, 80% of the
guess, overloaded six configurations (throughput at capacity, batches full, latency in
seconds). Their third rate was measured again at 85% of the capacity calibrated from that
overloaded run (TOP below); the other two kept 80% of the guess, which is 88-91% of their
real capacity.

The NumPy workload. ``item-tower-b8-d0.5`` serves the case study's item tower (qmodel's
``item-tower`` profiling workload, 22 MB of weights, one BLAS thread) instead of a sleep, so
its service law is the server's own: measured on the server at 600 req/s, batches of 1, 2
and 8 took 2.2-2.4, 4.5-4.8 and 6.7-6.8 ms (a batch of 2 costs twice a batch of 1: BLAS's
matrix-vector path). Its rates, 300, 600 and 850 req/s, are about 25%, 50% and 75% of the 1,170
req/s that batches of 8 carry. (``two-tower``, the 64-256-128 towers, takes 15-60 us per batch,
below the Python backend's own 0.55 ms: it would measure the backend, not the workload.)

One more run, ``runs-fulltrace/b8-d0.5-i2/1370-1``, traced the whole run (``traced=40000``,
6,353 batches) to see whether the trace's length explains the low p99 near capacity; it was
made with ``measure(CONFIGS["b8-d0.5-i2"][0], [1370], HERE / "runs-fulltrace" / "b8-d0.5-i2",
repeats=1, traced=40000, seed=1)`` and is reported apart (``qmodel triton-check --from validation/reports/triton/runs-fulltrace``).

Run (about 25 minutes; nothing else busy on the machine, which the server and perf_analyzer
share): ``QMODEL_TRITON_DIST=/path/to/dist .venv/bin/python validation/triton_campaign.py``
(``--heldout``: the three configurations measured to judge calibration without a trace,
about 8 minutes, into runs-heldout/; ``--untraced --configs ...``: the server untraced, as in
production, into runs-untraced/)
(``--configs b8-d0 --rates-only top`` re-measures one configuration's third rate;
``--fulltrace --configs b8-d0.5-i2,b16-d0.5-i2-cv0.3,b8-d0,b8-d2 --rates-only top`` traced
every request of the top rates, into runs-fulltrace/, for drift;
``--configs b8-d2,b8-d0.5,b8-d0 --pinned`` made the runs with the server on CPU 0 and
perf_analyzer on CPU 1; ``--poll 0.1`` polls the statistics every 0.1 s during each run, from
which calibrate fits the drift without a trace: ``--configs b1-i2-cv0.2 --rates 550
--interval-ms 20000 --poll 0.1 --out validation/reports/triton/runs-polled``).
"""

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path

import qmodel as qm
from qmodel.triton.check import measure

HERE = Path(__file__).parent / "reports" / "triton"
SLEEP = qm.ServiceTime.affine(2e-3, 0.5e-3)
PER_BATCH_EXTRA = 0.4e-3          # seen here: input, output and the stub, per batch
LOADS = (0.30, 0.55, 0.80)


def node(B, delay=0.0, preferred=(), instances=1):
    return qm.Node(SLEEP, max_batch_size=B, max_queue_delay=delay,
                   preferred_batch_sizes=preferred, instances=instances)


# name -> (node, lognormal cv of the sleep)
CONFIGS = {
    "b1": (node(1), 0.0),
    "b1-i2-cv0.2": (node(1, instances=2), 0.2),
    "b8-d0": (node(8), 0.0),
    "b8-d0.5": (node(8, 0.5e-3), 0.0),
    "b8-d2": (node(8, 2e-3), 0.0),
    "b16-d2-pref4.8": (node(16, 2e-3, (4, 8)), 0.0),
    "b8-d0.5-i2": (node(8, 0.5e-3, instances=2), 0.0),
    "b16-d0.5-i2-cv0.3": (node(16, 0.5e-3, instances=2), 0.3),
}


# Issue 37: configurations measured after calibrate's modelled gap and prefetch share were
# fitted on the runs above, to judge them held out (validation/triton_untraced.py
# --heldout): two instances with and without a delay, and one instance at a batch size and
# delay not measured before. Rates at 30%, 50% and 62% of the first guess of the capacity
# (80% overloaded most configurations above). Runs go to runs-heldout/.
HELDOUT = {
    "b8-d0-i2": (node(8, instances=2), 0.0),
    "b8-d1-i2": (node(8, 1e-3, instances=2), 0.0),
    "b12-d1": (node(12, 1e-3), 0.0),
}
HELDOUT_LOADS = (0.30, 0.50, 0.62)


# name -> (the batching knobs (their S(k) unused), the workload computed per batch, rates)
WORKLOADS = {
    "item-tower-b8-d0.5": (node(8, 0.5e-3), "item-tower", [300, 600, 850]),
}


# the third rate where 80% of the first guess overloaded the server: 85% of the capacity
# calibrated from the overloaded run (b8-d0 1,044 req/s, b8-d0.5 1,012, b8-d2 1,041,
# b16-d2-pref4.8 1,166, b8-d0.5-i2 1,855, b16-d0.5-i2-cv0.3 2,344)
TOP = {"b8-d0": 880, "b8-d0.5": 860, "b8-d2": 880, "b16-d2-pref4.8": 990,
       "b8-d0.5-i2": 1570, "b16-d0.5-i2-cv0.3": 1990}


def rates(name) -> list:
    """LOADS of the first guess of the capacity (PER_BATCH_EXTRA more per batch), rounded
    down to 10, the third replaced by TOP where that overloaded the server; HELDOUT_LOADS
    for the held-out configurations."""
    n = (CONFIGS.get(name) or HELDOUT[name])[0]
    slower = replace(n, service=qm.ServiceTime.affine(SLEEP.base + PER_BATCH_EXTRA,
                                                      SLEEP.per_item))
    loads = HELDOUT_LOADS if name in HELDOUT else LOADS
    guess = [10 * math.floor(load * slower.capacity / 10) for load in loads]
    return guess[:2] + [TOP.get(name, guess[2])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join([*CONFIGS, *WORKLOADS]))
    parser.add_argument("--heldout", action="store_true",
                        help="measure the HELDOUT configurations into runs-heldout/")
    parser.add_argument("--untraced", action="store_true",
                        help="run the server untraced (as in production) into "
                             "runs-untraced/: does tracing change what is measured?")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--interval-ms", type=int, default=5000)
    parser.add_argument("--out", default=str(HERE / "runs"))
    parser.add_argument("--rates", default=None,
                        help="comma-separated rates (req/s) instead of each configuration's")
    parser.add_argument("--rates-only", choices=["all", "top"], default="all",
                        help="top: only the third rate")
    parser.add_argument("--fulltrace", action="store_true",
                        help="trace every request of the run (traced=40000) into "
                             "runs-fulltrace/: drift needs 5 s of executions or more")
    parser.add_argument("--poll", type=float, default=None,
                        help="poll the statistics every POLL seconds during each run "
                             "(stats_series.json.gz: the drift without a trace)")
    parser.add_argument("--pinned", action="store_true",
                        help="server on CPU 0, perf_analyzer on CPU 1 (taskset); runs go to "
                             "<config>-pinned")
    args = parser.parse_args(argv)
    if args.heldout:
        args.configs, args.out = ",".join(HELDOUT), str(HERE / "runs-heldout")
    if args.untraced and args.out == str(HERE / "runs"):
        args.out = str(HERE / "runs-untraced")
    if args.fulltrace and args.out == str(HERE / "runs"):
        args.out = str(HERE / "runs-fulltrace")
    start = time.monotonic()
    for name in args.configs.split(","):
        if name in WORKLOADS:
            n, workload, todo = WORKLOADS[name]
            cv, what = 0.0, f"workload {workload}"
        else:
            (n, cv), workload, todo = (CONFIGS.get(name) or HELDOUT[name]), None, rates(name)
            what = f"{n.describe()}, sleep cv {cv}"
        todo = todo[2:] if args.rates_only == "top" else todo
        if args.rates:
            todo = [float(r) for r in args.rates.split(",")]
        folder = Path(args.out) / (name + ("-pinned" if args.pinned else ""))
        print(f"{name}: {what}, rates {todo}", flush=True)
        pins = dict(server_cpus="0", client_cpus="1") if args.pinned else {}
        measure(n, todo, folder, repeats=args.repeats, cv=cv, interval_ms=args.interval_ms,
                traced=0 if args.untraced else 40000 if args.fulltrace else 1000, seed=1,
                workload=workload, poll=args.poll, **pins)
        print(f"  done at {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
