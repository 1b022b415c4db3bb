"""``qmodel profile``: measure S(k) of a batch workload at each batch size and concurrency,
every sample kept, and plot it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .args import read_count, read_size_ranges
from .output import say

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "measure S(k) of a batch workload, every sample kept"
DESCRIPTION = ("Time a batch workload at each batch size (after a warm-up) on the CPU with "
               "NumPy or on the GPU with CuPy, at one or more concurrencies, and write the "
               "profile (JSON) and a plot of S(k) with its spread.")


def add_arguments(parser) -> None:
    parser.add_argument("--workload", default="two-tower", metavar="NAME",
                        help="two-tower, user-tower, item-tower, scoring, matmul, conv, or "
                             "module:function taking a batch size")
    parser.add_argument("--batch-sizes", type=read_size_ranges, default=tuple(range(1, 65)),
                        metavar="K-K,K", help="e.g. 1-64 or 1,2,4,8 (default 1-64)")
    parser.add_argument("--repeats", type=read_count, default=30, metavar="N")
    parser.add_argument("--warmup", type=read_count, default=5, metavar="N")
    parser.add_argument("--concurrency", type=read_size_ranges, default=(1,), metavar="M-M,M",
                        help="copies running at once, e.g. 1-4 or 1,2 (default 1)")
    parser.add_argument("--backend", default="numpy", choices=["numpy", "cupy"],
                        help="CPU with NumPy, or the GPU with CuPy (a host thread and a "
                             "stream per copy, wall time to the stream's synchronisation)")
    parser.add_argument("--copies", default="threads", choices=["threads", "processes"],
                        help="run the --concurrency copies as threads of one process, or a "
                             "process each as Triton's Python backend runs instances")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="with --backend cupy: also time the calls captured in CUDA "
                             "graphs, written beside --out as NAME-graph.json")
    parser.add_argument("--blas-threads", type=read_count, default=None, metavar="N",
                        help="BLAS threads per copy on the CPU (1: copies share the cores as "
                             "instances would; default: the BLAS's own choice)")
    parser.add_argument("--out", required=True, metavar="FILE", help="the profile (JSON)")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="the plot (default: --out with .png)")


def run(args) -> int:
    from ..plots import plot_profile
    from ..profiling import profile

    runs = [(False, args.out, args.plot or str(Path(args.out).with_suffix(".png")))]
    if args.cuda_graph:
        out = Path(args.out)
        graph = out.with_name(out.stem + "-graph" + out.suffix)
        runs.append((True, str(graph), str(graph.with_suffix(".png"))))
    for cuda_graph, path, plot in runs:
        try:
            result = profile(args.workload, args.batch_sizes, repeats=args.repeats,
                             warmup=args.warmup, concurrency=args.concurrency,
                             backend=args.backend, blas_threads=args.blas_threads,
                             cuda_graph=cuda_graph, copies=args.copies)
            result.save(path)
        except (ValueError, OSError) as err:
            say("error", err)
            return 2
        plot_profile(result, plot)
        _report(result, args, path, plot)
    return 0


def _report(result, args, path, plot) -> None:
    graph = " (CUDA graphs)" if result.versions.get("cuda_graph") else ""
    print(f"{result.workload} on {result.device}{graph}: {args.repeats} runs per size after "
          f"{args.warmup} warm-up runs, sizes in shuffled order")
    for m, by_k in sorted(result.samples.items()):
        law, error = result.fit(m)
        spread = result.spread(m)
        print(f"concurrency {m}:   k  median ms  spread ms    mean ms    p99 ms    cv")
        for k, values in sorted(by_k.items()):
            v = np.asarray(values)
            print(f"               {k:3d}  {spread[k][0] * 1e3:9.4f}  {spread[k][1] * 1e3:9.4f}"
                  f"  {v.mean() * 1e3:9.4f}  {np.percentile(v, 99) * 1e3:8.4f}"
                  f"  {v.std() / v.mean():5.3f}")
        print(f"  fitted: {law.describe()} (largest mean error {error['mean_error']:.1%})")
    findings = result.check()
    for line in findings:
        print(f"check: {line}")
    if not findings:
        print("check: S(k) monotone in k within its spread; no concurrency faster than one copy")
    print(f"profile: {path}\nplot: {plot}")
