"""Least outstanding against round robin over batching nodes of several instances (issue 35).

No model covers least outstanding over nodes of several instances; before sizing ranks such
clusters by another router's model, this measures whether least outstanding is ever worse
than round robin there. 64 clusters: 2 and 4 instances, max_batch_size 8 and 32, no delay and
1 ms, 2 and 8 nodes, loads 0.5 and 0.85, deterministic and lognormal (cv 0.3) S(k) = 2 ms +
0.3 ms x k; each simulated under both routers on the compiled engine (400,000 requests, seed
3; p99 CIs about +-1%).

Run: ``python validation/least_outstanding_batching.py [--write]`` (about a minute on 2
cores); ``--write`` stores validation/results/least_outstanding_batching.json.
"""

import argparse
import itertools
import json
import warnings
from pathlib import Path

import numpy as np

import qmodel as qm

OUT = Path(__file__).parent / "results" / "least_outstanding_batching.json"
AFF = qm.ServiceTime.affine


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for c, B, D, N, load, jitter in itertools.product(
            (2, 4), (8, 32), (0.0, 1e-3), (2, 8), (0.5, 0.85),
            ("deterministic", ("lognormal", 0.3))):
        node = qm.Node(AFF(2e-3, 0.3e-3, jitter=jitter), max_batch_size=B, max_queue_delay=D,
                       instances=c)
        p99, batch = {}, {}
        for router in ("least_outstanding", "round_robin"):
            cluster = qm.Cluster(node, count=N, router=router)
            r = qm.simulate(cluster, rate=load * cluster.capacity, requests=400_000, seed=3,
                            backend="cpu")
            p99[router], batch[router] = r.p99, r.mean_batch_size
        row = dict(instances=c, max_batch_size=B, delay=D, nodes=N, load=load,
                   jitter="deterministic" if jitter == "deterministic" else "lognormal 0.3",
                   p99=p99, mean_batch=batch,
                   ratio=p99["least_outstanding"] / p99["round_robin"])
        rows.append(row)
        print(f"c {c} B {B:2} D {D * 1e3:g} ms N {N} load {load:.2f} {row['jitter']:13} "
              f"p99 LO / RR {row['ratio']:.3f}  mean batch {batch['least_outstanding']:.2f} / "
              f"{batch['round_robin']:.2f}", flush=True)
    ratio = np.array([r["ratio"] for r in rows])
    print(f"p99 least outstanding / round robin: min {ratio.min():.3f}, median "
          f"{np.median(ratio):.3f}, max {ratio.max():.3f}; above 1.05 in {(ratio > 1.05).sum()} "
          f"of {ratio.size}")
    if args.write:
        OUT.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
