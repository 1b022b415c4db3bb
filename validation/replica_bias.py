"""Start-up bias against replica length: the evidence behind simulate()'s default lanes.

Every replica starts empty, so short replicas under-estimate the tail. For an 8-node
least_outstanding cluster of batching nodes at 84% and 97% load, the same 4M requests are cut
into more and more replicas; p99 should stay put until replicas get too short.
Run: .venv/bin/python validation/replica_bias.py (about a minute)
"""

import time
import warnings

import qmodel as qm


def main() -> None:
    warnings.simplefilter("ignore")      # short replicas draw the bias warning on purpose
    service = qm.ServiceTime.affine(2.4e-3, 0.54e-3, jitter=("lognormal", 0.1))
    node = qm.Node(service, max_batch_size=8, max_queue_delay=2e-3,
                   preferred_batch_sizes=(4, 8), instances=2)
    cluster = qm.Cluster(node, count=8, router="least_outstanding")
    requests = 4_000_000
    for rate in (16_000.0, 18_500.0):
        for lanes in (32, 128, 512, 2048):
            start = time.perf_counter()
            r = qm.simulate(cluster, rate=rate, requests=requests, seed=2, lanes=lanes)
            lo, hi = r.ci(0.99)
            print(f"load {rate / cluster.capacity:.0%}  {requests // lanes // 8:6d} arrivals/node"
                  f"/replica  p99 {r.p99 * 1e3:.3f} ms [{lo * 1e3:.3f}, {hi * 1e3:.3f}]  "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
