"""The main job on an example deployment: what p50/p95/p99 does it see, and why.

A Triton model measured at S(k) = 2.4 ms + 0.54 ms per request (lognormal jitter, cv 0.2),
dynamic batching with max_batch_size 8, max_queue_delay 2 ms, preferred sizes 4 and 8, two
instances per node, eight nodes, 16,000 requests per second. Run: make demo

1. Predicted (queueing model, milliseconds of compute) against simulated (Monte Carlo, with
   95% confidence intervals) for the cluster behind a random router, which splits Poisson
   traffic into eight independent nodes.
2. The four routers side by side (qmodel.compare_routers): round robin predicted from its
   Erlang-8 per-node arrivals, every router simulated; power of two and least outstanding are
   simulated only (their model takes single-instance nodes without a delay so far).
"""

import argparse
import time

import qmodel as qm
from qmodel.plots import plot_latency


def _row(label, r, took, ci=True):
    band = ""
    if ci:
        lo, hi = r.ci(0.99)
        band = f"[{lo * 1e3:6.2f}, {hi * 1e3:6.2f}]"
    return (f"{label:28}{r.p50 * 1e3:9.2f}{r.p95 * 1e3:9.2f}{r.p99 * 1e3:9.2f}  {band:>16}"
            f"{r.mean_batch_size:7.2f}{took * 1e3:9.0f} ms")


def main(out: str) -> None:
    service = qm.ServiceTime.affine(base=2.4e-3, per_item=0.54e-3, jitter=("lognormal", 0.2))
    node = qm.Node(service, max_batch_size=8, max_queue_delay=2e-3,
                   preferred_batch_sizes=(4, 8), instances=2)
    rate = 16_000.0
    print(f"node: {node.describe()}\nload: {rate:,.0f} req/s over 8 nodes "
          f"({rate / (8 * node.capacity):.0%} of capacity)\n")
    header = (f"{'':28}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}  {'p99 95% CI':>16}"
              f"{'batch':>7}{'time':>12}")

    print("1. random router: predicted against simulated")
    print(header)
    cluster = qm.Cluster(node, count=8, router="random")
    start = time.perf_counter()
    pred = qm.predict(cluster, rate=rate)
    took = time.perf_counter() - start
    print(_row("predicted (qmodel.predict)", pred, took, ci=False))
    start = time.perf_counter()
    sim = qm.simulate(cluster, rate=rate, requests=1_000_000, seed=1)
    print(_row("simulated (qmodel.simulate)", sim, time.perf_counter() - start))
    print(f"   model: {pred.method}\n   claims: {pred.accuracy.exactness}: "
          f"{pred.accuracy.statement}\n")

    print("2. which router? qmodel.compare_routers: predicted where a model exists, and "
          "simulated")
    start = time.perf_counter()
    rows = qm.compare_routers(node, 8, rate, requests=1_000_000, seed=1)
    print(qm.router_table(rows))
    print(f"   ({time.perf_counter() - start:.1f} s for the four routers)")
    results = {"random (predicted)": pred, "random (simulated)": sim}
    for r in rows[1:]:
        if r.predicted is not None:
            results[f"{r.router} (predicted)"] = r.predicted
        results[f"{r.router} (simulated)"] = r.simulated
    path = plot_latency(results, f"{out}/demo_latency.png",
                        title="8 nodes x 2 instances, B=8, delay 2 ms, 16k req/s")
    print(f"\nplot: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="demo-out", help="folder for the plot")
    main(parser.parse_args().out)
