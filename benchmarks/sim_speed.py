"""How fast qmodel's simulator runs, against SimPy and Ciw on the same models, in one run.

Cases (all at 80% of capacity, S(k) = 2.4 ms + 0.54 ms x k unless stated):
  (a) one node, max_batch_size 8, max_queue_delay 1 ms, one instance
  (b) one node, max_batch_size 32, 4 instances (greedy batching)
  (c) 16 nodes of (a) behind least_outstanding
  (e) 4 pods behind round_robin of an ensemble: pre (B 4) -> (a) on 2 instances -> post (B 4)
  M/M/1 (B = 1, exponential service) for the peers that only do classical queues
Peers: case (a) written in SimPy (benchmarks/peers.py); M/M/1 in SimPy and in Ciw.

Each case runs in its own Python process (so one case's memory state cannot slow another: on
this machine a page fault on fresh memory costs ~10x a second touch), once to warm up and then
``--repeat`` times; the best time counts. Every line prints p99 with its 95% confidence
interval, so speed is never bought with wrong answers. Run: make bench

Backends: "numpy" and "cupy" run the vectorised engines on that array library, "cpu" and
"gpu" the compiled engine (qmodel.sim.compiled) on the CPU's cores or a GPU. The default run
times the vectorised engines and the compiled engine on the CPU, with their ratio. On a GPU
machine, ``--backends numpy,cpu,gpu --big numpy=64000000,cpu=640000000,gpu=10000000000``
times every case on each backend in the same run, with as many requests as keep each busy
for seconds, and prints the speed ratios to the first backend (benchmarks/gpu_check.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

import qmodel as qm  # noqa: E402

BASE, PER_ITEM, LOAD = 2.4e-3, 0.54e-3, 0.8


def best_of(repeat, fn):
    fn()                                        # warm-up: first touch of memory
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def line(name, requests, seconds, p99, lo, hi):
    rate = requests / seconds
    print(f"{name:56} {requests:>11,} {seconds:8.2f} s {rate / 1e6:9.2f} M/s   "
          f"p99 {p99 * 1e3:8.3f} ms  [{lo * 1e3:.3f}, {hi * 1e3:.3f}]", flush=True)
    return rate


CASES = {
    "(a) B=8, D=1ms, c=1": lambda svc: qm.Node(svc, max_batch_size=8, max_queue_delay=1e-3),
    "(b) B=32, c=4": lambda svc: qm.Node(svc, max_batch_size=32, instances=4),
    "(c) 16 nodes, least_outstanding": lambda svc: qm.Cluster(
        qm.Node(svc, max_batch_size=8, max_queue_delay=1e-3), count=16,
        router="least_outstanding"),
    "M/M/1 rho 0.8": lambda svc: qm.Node(qm.ServiceTime.affine(1e-3, jitter="exponential")),
    "(e) ensemble pre -> (a) with c=2 -> post, 4 pods": lambda svc: qm.Cluster(qm.Ensemble(
        {"pre": qm.Node(qm.ServiceTime.affine(1e-3, 0.2e-3), max_batch_size=4),
         "model": qm.Node(svc, max_batch_size=8, max_queue_delay=1e-3, instances=2),
         "post": qm.Node(qm.ServiceTime.affine(1e-3, 0.2e-3), max_batch_size=4)},
        [("pre", "model"), ("model", "post")]), count=4, router="round_robin"),
}


def run_case(name, requests, repeat, backend="auto"):
    """One qmodel case in this process; prints a JSON line for the parent."""
    system = CASES[name](qm.ServiceTime.affine(BASE, PER_ITEM))
    cluster = system if isinstance(system, qm.Cluster) else qm.Cluster(system)
    rate = LOAD * cluster.capacity
    seconds, r = best_of(repeat, lambda: qm.simulate(system, rate=rate, requests=requests,
                                                     seed=1, backend=backend))
    lo, hi = r.ci(0.99)
    print(json.dumps({"seconds": seconds, "p99": r.p99, "lo": lo, "hi": hi,
                      "engine": r.accuracy.simulation.engine,
                      "backend": r.accuracy.simulation.backend}))


def qmodel_case(name, requests, repeat, backend="auto"):
    out = subprocess.run([sys.executable, __file__, "--case", name, "--requests", str(requests),
                          "--repeat", str(repeat), "--backend", backend],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"qmodel {name} [{backend}] failed: {out.stderr.strip().splitlines()[-1]}")
        return float("nan")
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return line(f"qmodel {name} [{rec['engine']} engine, {rec['backend']}]", requests,
                rec["seconds"], rec["p99"],
                rec["lo"], rec["hi"])


def peer_case(name, fn, requests, **kw):
    sojourn, seconds = peers.timed(fn, requests=requests, seed=1, **kw)
    p99, half = peers.batch_means(sojourn, 0.99)
    return line(name, requests, seconds, p99, p99 - half, p99 + half)


def compare_backends(requests, repeat, backends, cases):
    """The qmodel cases on each backend, and the speed ratio to the first; ``requests`` is
    one count for all or a dict by backend."""
    print(f"qmodel {qm.__version__}, numpy {np.__version__}, {os.cpu_count()} cores, "
          f"{gpu_name()}")
    print(f"{'case':56} {'requests':>11} {'time':>10} {'speed':>11}")
    count = requests if isinstance(requests, dict) else {b: requests for b in backends}
    for name in CASES:
        if name.strip("(")[0] not in cases:
            continue
        speeds = [qmodel_case(name, count[b], 1 if name.startswith("(c)") else repeat, b)
                  for b in backends]
        print("  " + ", ".join(f"{b} / {backends[0]} {s / speeds[0]:.2f}x"
                               for b, s in zip(backends[1:], speeds[1:])))


def gpu_name() -> str:
    """The GPU that the compiled engine would use, or "no GPU"."""
    from qmodel.sim.compiled import gpu_present
    if not gpu_present():
        return "no GPU"
    from qmodel.sim.compiled import _cuda
    device = _cuda().get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    return f"GPU {name}"


def read_big(text):
    """--big: one count, or backend=count pairs."""
    if text is None or "=" not in text:
        return None if text is None else int(float(text))
    return {k: int(float(v)) for k, v in (pair.split("=") for pair in text.split(","))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs (about 30 s in all)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--backends", default="auto",
                    help="comma-separated array libraries to time the qmodel cases on")
    ap.add_argument("--no-peers", action="store_true", help="skip SimPy and Ciw")
    ap.add_argument("--big", type=read_big,
                    help="requests per qmodel case (default 16 M), or per backend: "
                         "numpy=64e6,gpu=1e10")
    ap.add_argument("--cases", default="a,b,c,e,M",
                    help="with --backends: the cases to time, by their first letter")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="auto", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:
        return run_case(args.case, args.requests, args.repeat, args.backend)
    big = args.big or (4_000_000 if args.quick else 16_000_000)
    backends = args.backends.split(",")
    if isinstance(big, dict) and backends == ["auto"]:
        ap.error("--big backend=count needs --backends")
    if backends != ["auto"]:
        return compare_backends(big, args.repeat, backends, args.cases.split(","))
    peer_n = 50_000 if args.quick else 200_000

    print(f"qmodel {qm.__version__}, numpy {np.__version__}, {platform.processor() or 'cpu'}, "
          f"{os.cpu_count()} cores, backend numpy")
    print(f"{'case':56} {'requests':>11} {'time':>10} {'speed':>11}")

    a = qmodel_case("(a) B=8, D=1ms, c=1", big, args.repeat)
    b = qmodel_case("(b) B=32, c=4", big, args.repeat)
    c = qmodel_case("(c) 16 nodes, least_outstanding", big, 1)
    m = qmodel_case("M/M/1 rho 0.8", big, args.repeat)
    ca = qmodel_case("(a) B=8, D=1ms, c=1", big, args.repeat, "cpu")
    cb = qmodel_case("(b) B=32, c=4", big, args.repeat, "cpu")
    cc = qmodel_case("(c) 16 nodes, least_outstanding", big, 1, "cpu")
    print(f"{'exact M/M/1 p99':56} {'':>11} {'':>10} {'':>11}   "
          f"p99 {np.log(100) / 200 * 1e3:8.3f} ms")

    cap_a = 8 / (BASE + 8 * PER_ITEM)
    sa = peer_case("SimPy (a) B=8, D=1ms, c=1", peers.simpy_batching_node, peer_n,
                   rate=LOAD * cap_a, base=BASE, per_item=PER_ITEM,
                   max_batch_size=8, max_queue_delay=1e-3, instances=1)
    sm = peer_case("SimPy M/M/1 rho 0.8", peers.simpy_mm1, peer_n, rate=800.0,
                   service_rate=1000.0)
    cm = peer_case("Ciw M/M/1 rho 0.8", peers.ciw_mm1, peer_n // 2, rate=800.0,
                   service_rate=1000.0)

    print("\nratios (requests simulated per second)")
    print(f"  qmodel (a) / SimPy (a)      {a / sa:10.0f}x")
    print(f"  qmodel M/M/1 / SimPy M/M/1  {m / sm:10.0f}x")
    print(f"  qmodel M/M/1 / Ciw M/M/1    {m / cm:10.0f}x")
    print(f"  compiled (a) / look-ahead (a)  {ca / a:8.2f}x")
    print(f"  compiled (b) / look-ahead (b)  {cb / b:8.2f}x")
    print(f"  compiled (c) / events (c)      {cc / c:8.2f}x")
    print("targets on a 2-core CPU: (a) 20 M/s (10 M/s minimum), >= 100x SimPy; compiled "
          "engine >= the look-ahead engine on (a) and (b), (c) >= 10 M/s")
    print(f"  vectorised: (a) {a / 1e6:.1f} M/s  (b) {b / 1e6:.1f} M/s  (c) {c / 1e6:.2f} M/s")
    print(f"  compiled:   (a) {ca / 1e6:.1f} M/s  (b) {cb / 1e6:.1f} M/s  (c) {cc / 1e6:.2f} M/s")


if __name__ == "__main__":
    main()
