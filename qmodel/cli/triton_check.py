"""``qmodel triton-check``: qmodel against a real Triton server, or against the files of one.

With the node flags and ``--rates``, it measures (:func:`qmodel.triton.check.measure`: a
sleeping Python-backend model on a real server on loopback, perf_analyzer's Poisson load)
into ``--out``; with ``--from DIR`` it reads runs measured before, no server needed. Either
way it prints the comparison (:func:`qmodel.triton.check.report`) and writes it to
``<DIR>/report.md`` (or ``--report FILE``). With ``--from-server URL`` it samples a running
server over ``--window`` seconds of its own traffic, calibrates the model from what the server
reports and prints the prediction at the measured rate against the server's own summary
quantiles.
"""

from __future__ import annotations

from pathlib import Path

from .args import read_count, read_duration, read_int_list, read_real, read_service_duration
from .output import say

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "qmodel against a real Triton server (or the files of one)"
DESCRIPTION = ("Measure a sleeping model on a real Triton server on loopback under "
               "perf_analyzer's Poisson load (--rates, --out), or read runs measured before "
               "(--from DIR); calibrate, predict and simulate each run and print them against "
               "perf_analyzer's and Triton's quantiles.")

# --batcher: calibrate(prefetch=...)
BATCHER = {"auto": None, "prefetch": True, "at-free": False}


def add_arguments(parser) -> None:
    g = parser.add_argument_group("read runs measured before")
    g.add_argument("--from", dest="source", default=None, metavar="DIR",
                   help="a folder of runs (qmodel triton-check --out, or "
                        "validation/reports/triton/runs)")
    g = parser.add_argument_group("or sample a running server (its own traffic)")
    g.add_argument("--from-server", dest="server", default=None, metavar="URL",
                   help="the server's HTTP endpoint, e.g. localhost:8000")
    g.add_argument("--model", default=None, metavar="NAME",
                   help="which model (default: the one the server has run)")
    g.add_argument("--model-version", default=None, metavar="N",
                   help="which version of the model, where the server serves several")
    g.add_argument("--metrics-url", default=None, metavar="URL",
                   help="its metrics endpoint, e.g. localhost:8002/metrics (for the jitter, "
                        "the time outside the batcher and Triton's summary quantiles)")
    g.add_argument("--window", type=read_real, default=60.0, metavar="SECONDS",
                   help="seconds between the snapshots (default 60)")
    g = parser.add_argument_group("or measure: the sleeping model and its batcher")
    g.add_argument("--service-base", type=read_service_duration, default=None, metavar="TIME",
                   help="S(k) = base + per_item k, slept per batch")
    g.add_argument("--per-item", type=read_service_duration, default=0.0, metavar="TIME")
    g.add_argument("--workload", default=None, metavar="NAME",
                   help="compute this NumPy profiling workload per batch (e.g. item-tower) "
                        "instead of sleeping: the service law is then measured")
    g.add_argument("--blas-threads", type=read_count, default=1, metavar="N",
                   help="BLAS threads of the workload (default 1)")
    g.add_argument("--sleep-cv", type=float, default=0.0, metavar="CV",
                   help="lognormal jitter of each sleep (default 0)")
    g.add_argument("--config", default=None, metavar="FILE",
                   help="take the batching knobs from this config.pbtxt instead of the four "
                        "flags below")
    g.add_argument("--max-batch-size", type=read_count, default=None, metavar="B")
    g.add_argument("--max-queue-delay", type=read_duration, default=None, metavar="TIME")
    g.add_argument("--preferred", type=read_int_list, default=None, metavar="K,K")
    g.add_argument("--instances", type=read_count, default=None, metavar="C")
    g.add_argument("--rates", type=_rates, default=None, metavar="R,R",
                   help="requests per second, e.g. 200,400")
    g.add_argument("--repeats", type=read_count, default=2, metavar="N")
    g.add_argument("--interval-ms", type=read_count, default=5000, metavar="MS",
                   help="perf_analyzer's measurement window (three of them per run)")
    g.add_argument("--traced", type=read_count, default=1500, metavar="N",
                   help="requests traced from the start of each run (default 1500); near "
                        "capacity trace the whole run (e.g. 40000, about 2 MB gzipped); 0 runs "
                        "the server untraced, as in production")
    g.add_argument("--out", default=None, metavar="DIR", help="where the runs go")
    g = parser.add_argument_group("output")
    g.add_argument("--report", default=None, metavar="FILE",
                   help="the Markdown report (default <DIR>/report.md)")
    g.add_argument("--requests", type=read_count, default=400_000, metavar="N",
                   help="requests of each calibrated simulation")
    g.add_argument("--batcher", choices=tuple(BATCHER), default="auto",
                   help="the batching rule of the calibrated nodes: Triton's prefetching "
                        "measured from the trace, batches formed when an instance frees, or "
                        "auto (prefetch for one instance with a delay; default)")


def _rates(text: str) -> tuple:
    import argparse

    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"rates {text!r}: write requests per second, e.g. "
                                         "200,400") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"rates {text!r} must be positive")
    return values


def run(args) -> int:
    if args.server is not None:
        return _from_server(args)
    try:
        if (args.source is None) == (args.rates is None):
            raise ValueError("give --from DIR (runs measured before), --from-server URL (a "
                             "running server) or --rates R,R with the node flags and --out "
                             "DIR (measure now)")
        if args.source is not None:
            folder = Path(args.source)
        else:
            folder = _measure(args)
        from ..triton.check import compare, report

        rows = compare(folder, requests=args.requests, prefetch=BATCHER[args.batcher])
        path = Path(args.report) if args.report else folder / "report.md"
        from ..plots import plot_triton_check

        figure = plot_triton_check(rows, path.with_suffix(".png"))
        again = f"qmodel triton-check --from {args.source or args.out}" + (
            f" --report {args.report}" if args.report else "") + (
            f" --batcher {args.batcher}" if args.batcher != "auto" else "")
        text = (f"# qmodel against a real Triton server\n\n{len(rows)} run(s) read from "
                f"`{args.source or args.out}`; remade by `{again}`. Errors are relative to perf_analyzer's "
                "client-side percentiles; Triton's are its own summary quantiles of the "
                "request duration.\n\n" + report(rows)
                + f"\n![predicted against measured]({figure.name})\n")
    except RuntimeError as err:          # the server or perf_analyzer failed
        say("the server run failed", err)
        return 3
    except (ValueError, OSError) as err:
        say("error", err)
        return 2
    path.write_text(text)
    print(text + f"\nreport: {path}")
    return 0


def _measure(args) -> Path:
    from ..system import Node, ServiceTime
    from ..triton.check import measure

    if args.out is None or (args.service_base is None) == (args.workload is None):
        raise ValueError("measuring needs --out DIR and either --service-base (with "
                         "--per-item) for the sleeping model or --workload NAME")
    # with a workload the server's executions are the service law: S(k) here is not used
    service = (ServiceTime.affine(args.service_base, args.per_item) if args.workload is None
               else ServiceTime.affine(1e-3))
    knobs = dict(max_batch_size=args.max_batch_size, max_queue_delay=args.max_queue_delay,
                 preferred_batch_sizes=args.preferred, instances=args.instances)
    given = [f"--{k.replace('_', '-')}".replace("preferred-batch-sizes", "preferred")
             for k, v in knobs.items() if v is not None]
    if args.config is not None:
        if given:
            raise ValueError(f"--config {args.config} gives the batching knobs: drop "
                             f"{', '.join(given)}")
        from ..triton.config import read_config

        node = read_config(Path(args.config)).node(service)
    else:
        node = Node(service, **{k: v for k, v in knobs.items() if v is not None})
    if not 0 <= args.sleep_cv <= 2:
        raise ValueError(f"--sleep-cv {args.sleep_cv!r} must lie in [0, 2]")
    from ..triton.server import find_installation

    find_installation()                  # a missing server is said before anything starts
    measure(node, args.rates, args.out, repeats=args.repeats, cv=args.sleep_cv,
            interval_ms=args.interval_ms, workload=args.workload,
            blas_threads=args.blas_threads, traced=args.traced)
    return Path(args.out)


def _from_server(args) -> int:
    """Calibrate from a running server over a window and print the prediction at the measured
    rate against the server's own summary quantiles of the request duration."""
    from ..checks import UnstableError
    from ..predict import predict
    from ..triton.calibrate import DRIFT_PERIOD, calibrate
    from ..triton.live import sample_server
    from ..triton.metrics import read_metrics
    from ..triton.stats import read_stats

    try:
        if args.source is not None or args.rates is not None:
            raise ValueError("--from-server samples a running server: drop --from and --rates")
        # the statistics polled as calibrate(url=...) polls them: the drift, and the rate
        # the pickup gap is fitted at
        sample = sample_server(args.server, args.model, version=args.model_version,
                               metrics_url=args.metrics_url, window=args.window,
                               poll=min(DRIFT_PERIOD, args.window / 10))
        node = calibrate(sample.config, sample.stats, sample.metrics, version=sample.version,
                         series=sample.series)
        stats = read_stats(*sample.stats, model=sample.model, version=sample.version)
        rate = stats.requests / sample.window
        result = predict(node, rate=rate)
    except UnstableError as err:
        say("the calibrated node cannot carry the measured rate", err)
        return 2
    except (ValueError, OSError) as err:
        say("error", err)
        return 2
    summary = {}
    if sample.metrics is not None:
        summary = read_metrics(*sample.metrics, model=sample.model,
                               version=sample.version).quantiles.get("request", {})
    print(f"model {sample.model} at {sample.url}: {stats.requests:,} requests in "
          f"{sample.window:.1f} s ({rate:,.1f} req/s), mean batch {stats.mean_batch_size:.2f}")
    for line in node.calibration.lines():
        print(f"  {line}")
    levels = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
    print(f"{'':28}" + "".join(f"{name:>10}" for name, _ in levels))
    print(f"{'calibrated prediction':28}"
          + "".join(f"{result.quantile(q) * 1e3:>8.2f}ms" for _, q in levels))
    if summary:
        label = "Triton's own (summary)"
        print(f"{label:28}" + "".join(
            f"{summary[q] * 1e3:>8.2f}ms" if q in summary else f"{'-':>10}" for _, q in levels))
        print(f"{'error':28}" + "".join(
            f"{result.quantile(q) / summary[q] - 1:>+10.1%}" if q in summary else f"{'-':>10}"
            for _, q in levels))
        print("(Triton's summary quantiles cover the server's recent requests, not only the "
              "window; the prediction is server side: no network or client time)")
    else:
        print("(no metrics URL, or no summary latencies enabled: nothing to compare with)")
    return 0
