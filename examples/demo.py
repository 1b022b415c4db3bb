"""The main job on an example deployment: what p50/p95/p99 does it see, and why.

A Triton model measured at S(k) = 2.4 ms + 0.54 ms per request (lognormal jitter, cv 0.1),
dynamic batching with max_batch_size 8, max_queue_delay 2 ms, preferred sizes 4 and 8, two
instances per node, eight nodes, 16,000 requests per second. Run: make demo
"""

import argparse
import time

import qmodel as qm
from qmodel.plots import plot_latency


def main(out: str) -> None:
    service = qm.ServiceTime.affine(base=2.4e-3, per_item=0.54e-3, jitter=("lognormal", 0.1))
    node = qm.Node(service, max_batch_size=8, max_queue_delay=2e-3,
                   preferred_batch_sizes=(4, 8), instances=2)
    rate = 16_000.0
    results = {}
    print(f"node: {node.describe()}\nload: {rate:,.0f} req/s over 8 nodes "
          f"({rate / (8 * node.capacity):.0%} of capacity)\n")
    print(f"{'router':20}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}  {'p99 95% CI':>18}"
          f"{'batch':>7}{'time':>7}")
    for router in ("random", "round_robin", "power_of_two", "least_outstanding"):
        cluster = qm.Cluster(node, count=8, router=router)
        start = time.perf_counter()
        r = qm.simulate(cluster, rate=rate, requests=1_000_000, seed=1)
        took = time.perf_counter() - start
        lo, hi = r.ci(0.99)
        print(f"{router:20}{r.p50 * 1e3:9.2f}{r.p95 * 1e3:9.2f}{r.p99 * 1e3:9.2f}  "
              f"[{lo * 1e3:6.2f}, {hi * 1e3:6.2f}]{r.mean_batch_size:7.2f}{took:6.1f}s")
        results[router] = r
    path = plot_latency(results, f"{out}/demo_latency.png",
                        title="8 nodes x 2 instances, B=8, delay 2 ms, 16k req/s (simulated)")
    print(f"\nplot: {path}")
    print("predicted (analytic) percentiles arrive with qmodel.predict (issue 3);"
          " these are Monte Carlo results with 95% confidence intervals.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="demo-out", help="folder for the plot")
    main(parser.parse_args().out)
