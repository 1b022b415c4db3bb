"""Paired timing of qmodel.predict: the working tree against an older revision, node by node.

The machine this project is developed on varies by 10-25% in speed from one run to the next,
more than many single changes move the model. So this script imports the package as it was at
``--rev`` (exported with ``git archive`` into a temporary folder, as ``qmodel_old``) next to
the working tree's, and times both on each node of benchmarks/predict_speed.py's grid in turn
(best of three warm calls each), so that both see the same machine. It prints both
distributions and the median ratio. ``--clusters`` times the script's clusters instead (the
static routers and power of two, load 0.7; one warm call each, after one warm-up).

Run: ``.venv/bin/python benchmarks/predict_speed_paired.py --rev <commit> [--quick | --smoke]
[--clusters]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from predict_speed import cluster_grid, cluster_of, grid, node_of, warm_time  # noqa: E402


def export(rev: str, into: Path) -> None:
    """The package at ``rev`` as ``into/qmodel_old`` (its imports are relative)."""
    done = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "qmodel"],
                          capture_output=True)
    if done.returncode:
        raise SystemExit(f"--rev {rev!r}: git cannot export qmodel/ at that revision "
                         f"({done.stderr.decode().strip()}); give a commit of this repository")
    archive = done.stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "qmodel").rename(into / "qmodel_old")


def model(package, node, rate):
    """The model's answer, outside its measured domain too (as benchmarks/predict_speed.py
    times it); a revision older than ``extrapolate`` answers without it."""
    try:
        return package.predict(node, rate=rate, fallback="raise", extrapolate=True)
    except TypeError:
        return package.predict(node, rate=rate, fallback="raise")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="git revision to compare with")
    ap.add_argument("--quick", action="store_true", help="fewer configurations")
    ap.add_argument("--smoke", action="store_true", help="two nodes (seconds)")
    ap.add_argument("--show", type=int, default=0, metavar="N",
                    help="also list the N nodes that slowed down most and the N that sped up most")
    ap.add_argument("--clusters", action="store_true",
                    help="time the clusters of benchmarks/predict_speed.py instead of nodes")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import qmodel as new
    with tempfile.TemporaryDirectory() as tmp:
        export(args.rev, Path(tmp))
        sys.path.insert(0, tmp)
        import qmodel_old as old
        if args.clusters:
            return clusters(old, new, args.rev, args.smoke)
        times = {"old": [], "new": []}
        nodes = list(grid(args.quick, args.smoke))
        for jitter, B, d, c, load in nodes:
            for name, package in (("old", old), ("new", new)):
                node = node_of(B, d, c, jitter, package)
                rate = load * node.capacity
                times[name].append(warm_time(lambda: model(package, node, rate)))
    print(f"predict() on {len(times['new'])} nodes, best of three warm calls each, "
          f"{args.rev} against the working tree:")
    for name, label in (("old", args.rev), ("new", "working tree")):
        t = np.array(times[name]) * 1e3
        print(f"  {label:14} median {np.median(t):6.1f} ms, 90th percentile "
              f"{np.percentile(t, 90):6.1f} ms, worst {t.max():7.1f} ms, total "
              f"{t.sum() / 1e3:5.2f} s, {np.mean(t <= 10) * 100:3.0f}% within 10 ms")
    ratio = np.array(times["old"]) / np.array(times["new"])
    print(f"  median speed-up per node {np.median(ratio):.2f}x "
          f"(10th-90th percentile {np.percentile(ratio, 10):.2f}-{np.percentile(ratio, 90):.2f}x)")
    order = np.argsort(ratio)
    for title, picks in (("slowed down most", order[:args.show]),
                         ("sped up most", order[::-1][:args.show])):
        if args.show:
            print(f"  {title}:")
        for i in picks:
            jitter, B, d, c, load = nodes[i]
            print(f"    B = {B:2}, D = {d} S(1), {c} instance(s), {jitter}, load {load}: "
                  f"{times['old'][i] * 1e3:7.1f} -> {times['new'][i] * 1e3:7.1f} ms")


def clusters(old, new, rev: str, smoke: bool) -> None:
    """Each cluster timed on both revisions in turn, with the two answers' p99."""
    print(f"predict() on clusters (load 0.7), one warm call each, {rev} against the working "
          f"tree:")
    for router, N, B in cluster_grid(smoke):
        seconds, p99 = {}, {}
        for name, package in (("old", old), ("new", new)):
            cluster = cluster_of(router, N, B, package)
            rate = 0.7 * cluster.capacity
            seconds[name] = warm_time(lambda: model(package, cluster, rate), repeat=1)
            p99[name] = model(package, cluster, rate).p99
        print(f"  {router:13} N={N:<4} B={B:<3} {seconds['old'] * 1e3:8.1f} -> "
              f"{seconds['new'] * 1e3:8.1f} ms ({seconds['old'] / seconds['new']:.2f}x); p99 "
              f"{p99['old'] * 1e3:.6f} -> {p99['new'] * 1e3:.6f} ms", flush=True)


if __name__ == "__main__":
    main()
