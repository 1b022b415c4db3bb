"""The ``qmodel`` command.

``qmodel simulate`` takes a node's Triton knobs and a cluster's router as flags (durations with
units: 2ms, 500us) and prints the simulated latency distribution as a table or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np

from . import derive, ensemble_command, size_command, triton_check_command
from .campaign import validate
from . import system as qs
from .sim import simulate
from .jitter import CLI_FORM, parse_jitter
from .plots import plot_profile
from .profiling import Profile, profile
from .routers import COMPARED_ROUTERS, ROUTER_NAMES

__all__ = ["main", "build_parser", "Parser"]

# Above this many requests a progress bar is worth its line of output.
PROGRESS_FROM = 5_000_000


class Parser(argparse.ArgumentParser):
    """argparse with the command's error format: one line on stderr, exit status 2.

    argparse prints its whole usage block before an error; the usage of ``qmodel predict`` is
    a dozen lines that push the one line that matters off the screen. Here the error is that
    line, with a pointer to ``--help`` for the rest. Subcommands' parsers are of this class
    too (``add_subparsers`` makes them of the parent's class).
    """

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} "
                     f"(see {self.prog} --help)\n")


def _duration(text: str) -> float:
    try:
        return qs.parse_duration(text if any(c.isalpha() for c in text) else float(text), "TIME")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _service_duration(text: str) -> float:
    """A batch's service time; a bare number of a second or more is read as seconds, with a
    hint, since it is more often milliseconds written without the unit."""
    seconds = _duration(text)
    if seconds >= 1.0 and not any(c.isalpha() for c in text):
        warnings.warn(f"a service time of {text} is read as {seconds:g} s; for milliseconds "
                      f"write {text}ms")
    return seconds


def _real(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(value)


def _number_list(convert, what: str, example: str):
    def parse(text: str) -> tuple:
        try:
            return tuple(convert(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {what}, "
                                             f"e.g. {example}") from None
    return parse


_int_list = _number_list(int, "whole numbers", "4,8")
_float_list = _number_list(float, "numbers", "9,1")


def _jitter(text: str) -> tuple:
    """NAME or NAME:CV, checked by the jitter registry, its messages in this syntax."""
    name, _, cv = text.partition(":")
    try:
        return parse_jitter((name, float(cv)) if cv else name, form=CLI_FORM)
    except ValueError as err:
        if cv and not _is_number(cv):
            err = f"jitter {text!r}: write NAME or NAME:CV, e.g. lognormal:0.3"
        raise argparse.ArgumentTypeError(str(err)) from None


def _size_ranges(text: str) -> tuple:
    """Whole numbers >= 1 as ranges and lists: '1-64', '1,2,4,8', '1-8,16,32'."""
    sizes = set()
    for item in text.split(","):
        lo, dash, hi = item.strip().partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: write ranges and lists such as "
                                             f"1-64 or 1,2,4,8") from None
        if first < 1 or last < first:
            raise argparse.ArgumentTypeError(f"{text!r}: each range K-K must go up from 1 or "
                                             f"more")
        sizes.update(range(first, last + 1))
    return tuple(sorted(sizes))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _table(text: str) -> dict:
    out = {}
    for item in text.split(","):
        k, sep, v = item.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"service table entry {item!r}: write SIZE:TIME, "
                                             "e.g. 1:3.1ms,8:6.7ms")
        out[_count(k.strip())] = _duration(v.strip())
    return out


def _add_system_args(parser) -> None:
    """The flags that describe a node, a cluster and the load (shared by the subcommands)."""
    g = parser.add_argument_group("service time of a batch of k: S(k) = base + per_item * k")
    g.add_argument("--service-base", type=_service_duration, default=None, metavar="TIME",
                   help="fixed part of S(k) (default 2.4ms unless --service-table)")
    g.add_argument("--per-item", type=_service_duration, default=0.0, metavar="TIME",
                   help="added per request in the batch (default 0)")
    g.add_argument("--service-table", type=_table, default=None, metavar="K:TIME,...",
                   help="measured mean S(k) per batch size instead, e.g. 1:3.1ms,8:6.7ms")
    g.add_argument("--jitter", type=_jitter, default="deterministic", metavar="NAME[:CV]",
                   help="deterministic, exponential, lognormal:CV or gamma:CV")
    g.add_argument("--profile", default=None, metavar="FILE",
                   help="a measured profile (qmodel profile --out) as S(k), every sample kept")
    g.add_argument("--profile-concurrency", type=_count, default=1, metavar="M",
                   help="which of the profile's concurrencies (copies sharing the device)")
    g = parser.add_argument_group("node (Triton model config)")
    g.add_argument("--max-batch-size", type=_count, default=1, metavar="B")
    g.add_argument("--max-queue-delay", type=_duration, default=0.0, metavar="TIME")
    g.add_argument("--preferred", type=_int_list, default=(), metavar="K,K",
                   help="preferred_batch_size list, e.g. 4,8")
    g.add_argument("--instances", type=_count, default=1, metavar="C")
    g.add_argument("--max-queue-size", type=_count, default=0, metavar="Q",
                   help="reject arrivals beyond Q pending requests (0 = unlimited)")
    g = parser.add_argument_group("cluster")
    g.add_argument("--nodes", type=_count, default=1, metavar="N")
    g.add_argument("--router", default="random", choices=ROUTER_NAMES)
    g.add_argument("--weights", type=_float_list, default=None, metavar="W,W",
                   help="with --router random: each node's share, e.g. 9,1")
    g.add_argument("--choices", type=_count, default=None, metavar="D",
                   help="with --router power_of_d: nodes sampled per request")
    g = parser.add_argument_group("load")
    g.add_argument("--rate", type=_real, default=None, metavar="REQ/S",
                   help="arrival rate in requests per second")
    g.add_argument("--arrival-scv", type=_real, default=1.0, metavar="SCV",
                   help="squared coefficient of variation of interarrival times "
                        "(1 Poisson, 0 deterministic, >1 bursty)")
    g.add_argument("--trace", default=None, metavar="FILE",
                   help="replay arrival times (seconds, one per line) instead of --rate")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="qmodel",
        description="Tail latency of batched inference serving (Triton-style dynamic batching).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the subcommands' parsers, so that an error found by the top-level parser (an unknown
    # flag after the subcommand) is reported by the subcommand it belongs to
    parser.commands = sub.choices
    sim = sub.add_parser(
        "simulate", help="Monte Carlo latency distribution of a node or cluster",
        description="Simulate Triton's dynamic batcher and print p50/p95/p99 with confidence "
                    "intervals. Durations take units: 2ms, 500us, 0.002 (seconds).")
    _add_system_args(sim)
    g = sim.add_argument_group("run")
    g.add_argument("--requests", type=_count, default=None, metavar="N",
                   help="requests to simulate (default 2e6, or the whole trace)")
    g.add_argument("--seed", type=_count, default=1)
    g.add_argument("--replicas", type=_count, default=None, metavar="R",
                   help="independent replicas (default: automatic)")
    g.add_argument("--warmup", type=_real, default=0.1, metavar="FRACTION")
    g.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"])
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar (default: on from {PROGRESS_FROM:.0e} requests)")
    pred = sub.add_parser(
        "predict", help="queueing-theory latency distribution of a node or cluster",
        description="Predict p50/p95/p99 from the queueing models (milliseconds of compute) "
                    "and say which model answered and how exact it is. Durations take units: "
                    "2ms, 500us, 0.002 (seconds).")
    _add_system_args(pred)
    g = pred.add_argument_group("output")
    g.add_argument("--resolution", type=_count, default=None, metavar="STEPS",
                   help="lattice steps per batch-of-one service time (default 100)")
    g.add_argument("--check", type=_count, nargs="?", const=2_000_000, default=None,
                   metavar="REQUESTS",
                   help="also simulate (default 2e6 requests) and print both side by side")
    g.add_argument("--seed", type=_count, default=1, help="seed of the --check simulation")
    g.add_argument("--no-fallback", action="store_true",
                   help="where no model covers the system, fail (exit 3) instead of answering "
                        "by simulation")
    g.add_argument("--extrapolate", action="store_true",
                   help="answer with the model also outside its family's measured domain "
                        "(the accuracy line says so)")
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rout = sub.add_parser(
        "routers", help="compare routers for the same nodes and load",
        description="Predict p50/p95/p99 of --nodes copies of the node under each router "
                    f"({', '.join(COMPARED_ROUTERS)}), with the mean "
                    "batch size and utilization that explain the difference.")
    _add_system_args(rout)
    g = rout.add_argument_group("output")
    g.add_argument("--simulate", type=_count, nargs="?", const=1_000_000, default=None,
                   metavar="REQUESTS", help="also simulate each router (default 1e6 requests); "
                                            "routers without a model are then simulated")
    g.add_argument("--seed", type=_count, default=1, help="seed of the simulations")
    g.add_argument("--plot", default=None, metavar="FILE", help="write a bar chart (PNG/SVG)")
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")
    prof = sub.add_parser(
        "profile", help="measure S(k) of a batch workload, every sample kept",
        description="Time a batch workload at each batch size (after a warm-up) on the CPU "
                    "with NumPy or on the GPU with CuPy, at one or more concurrencies, and "
                    "write the profile (JSON) and a plot of S(k) with its spread.")
    prof.add_argument("--workload", default="two-tower", metavar="NAME",
                      help="two-tower, user-tower, item-tower, scoring, matmul, conv, or "
                           "module:function taking a batch size")
    prof.add_argument("--batch-sizes", type=_size_ranges, default=tuple(range(1, 65)),
                      metavar="K-K,K", help="e.g. 1-64 or 1,2,4,8 (default 1-64)")
    prof.add_argument("--repeats", type=_count, default=30, metavar="N")
    prof.add_argument("--warmup", type=_count, default=5, metavar="N")
    prof.add_argument("--concurrency", type=_size_ranges, default=(1,), metavar="M-M,M",
                      help="copies running at once, e.g. 1-4 or 1,2 (default 1)")
    prof.add_argument("--backend", default="numpy", choices=["numpy", "cupy"],
                      help="CPU with NumPy, or the GPU with CuPy (CUDA events, streams)")
    prof.add_argument("--blas-threads", type=_count, default=None, metavar="N",
                      help="BLAS threads per copy on the CPU (1: copies share the cores as "
                           "instances would; default: the BLAS's own choice)")
    prof.add_argument("--out", required=True, metavar="FILE", help="the profile (JSON)")
    prof.add_argument("--plot", default=None, metavar="FILE",
                      help="the plot (default: --out with .png)")
    size_command.add_arguments(sub.add_parser(
        "size", help="the cheapest deployment whose tail latency meets an SLO",
        description="Search batching knobs, instances and node counts for the cheapest "
                    "deployment meeting --slo at --rate, verify it by simulation, and write "
                    "config.pbtxt, report.md and figures to --out. Exit status 1 when no "
                    "deployment meets the SLO (the report says why)."))
    ensemble_command.add_arguments(sub.add_parser(
        "ensemble", help="a Triton ensemble from its model repository, predicted end to end",
        description="Read an ensemble's config.pbtxt and its composing models' configs, take "
                    "each stage's S(k) from --service or --profile, and predict the "
                    "end-to-end p50/p95/p99 with each stage's share (--check: also simulate; "
                    "--bottleneck: what each stage's knobs do to p99)."))
    triton_check_command.add_arguments(sub.add_parser(
        "triton-check", help="qmodel against a real Triton server (or the files of one)",
        description="Measure a sleeping model on a real Triton server on loopback under "
                    "perf_analyzer's Poisson load (--rates, --out), or read runs measured "
                    "before (--from DIR); calibrate, predict and simulate each run and print "
                    "them against perf_analyzer's and Triton's quantiles."))
    derive.add_arguments(sub.add_parser(
        "derive", help="render the sympy derivations of qmodel's closed forms",
        description="Write the derivations of qmodel/derivations as Markdown (LaTeX math) "
                    "and/or self-contained HTML (MathML)."))
    validate.add_arguments(sub.add_parser(
        "validate", help="validation campaign: theory against simulation, with a report",
        description="Predict and simulate a grid of configurations (or your own, --configs) "
                    "in parallel, judge the models against stated tolerances, and write a "
                    "Markdown report with figures, into a new folder unless --out names one. "
                    "Results are cached there, so --resume continues an interrupted run."))
    return parser


def _system_from(args):
    if args.profile is not None:
        if args.service_base is not None or args.service_table is not None:
            raise ValueError("give --profile, --service-base/--per-item or --service-table, "
                             "one of them")
        service = Profile.load(args.profile).service(args.profile_concurrency)
    elif args.service_table is not None:
        if args.service_base is not None:
            raise ValueError("give --service-base/--per-item or --service-table, not both")
        service = qs.ServiceTime.table(args.service_table, jitter=args.jitter)
    else:
        base = 2.4e-3 if args.service_base is None else args.service_base
        service = qs.ServiceTime.affine(base, args.per_item, jitter=args.jitter)
    node = qs.Node(service, max_batch_size=args.max_batch_size,
                   max_queue_delay=args.max_queue_delay,
                   preferred_batch_sizes=args.preferred, instances=args.instances,
                   max_queue_size=args.max_queue_size)
    if args.nodes == 1 and args.weights is None and args.choices is None:
        return node
    return qs.Cluster(node, count=args.nodes, router=args.router, weights=args.weights,
                      choices=args.choices)


def _arrivals_from(args):
    if args.trace is not None:
        if args.rate is not None:
            raise ValueError("give --rate or --trace, not both")
        try:
            times = np.loadtxt(args.trace, dtype=float, ndmin=1)
        except (OSError, ValueError) as err:
            raise ValueError(f"--trace {args.trace}: {err}") from None
        return qs.Trace(times)
    if args.rate is None:
        raise ValueError("give the arrival rate: --rate REQ/S (or --trace FILE)")
    if args.arrival_scv == 1.0:
        return qs.Poisson(args.rate)
    return qs.Renewal(args.rate, scv=args.arrival_scv)


def _report(result, system, arrivals) -> dict:
    out = {"system": system.describe(), "arrival_rate": arrivals.rate,
           "load": arrivals.rate / system.capacity}
    out.update(result.summary())
    out["p999"] = result.quantile(0.999)
    if result.sections >= 2:
        for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            out[f"{name}_ci95"] = list(result.ci(p))
    out["requests_measured"] = result.requests
    return out


def _table_text(rep: dict) -> str:
    def ms(x):
        return f"{x * 1e3:9.3f} ms"

    lines = [rep["system"], _rate_line(rep), "",
             f"{'':8}{'latency':>12}   95% confidence interval"]
    for name in ("p50", "p95", "p99"):
        ci = rep.get(f"{name}_ci95")
        band = f"[{ci[0] * 1e3:.3f}, {ci[1] * 1e3:.3f}] ms" if ci else "-"
        lines.append(f"{name:8}{ms(rep[name])}   {band}")
    lines += [f"{'p99.9':8}{ms(rep['p999'])}", f"{'mean':8}{ms(rep['mean'])}", "",
              f"throughput        {rep['throughput']:,.1f} req/s",
              f"utilization       {rep['utilization']:.3f}",
              f"mean batch size   {rep['mean_batch_size']:.3f}",
              f"rejected          {rep['rejection_fraction']:.4%}",
              f"requests measured {rep['requests_measured']:,}",
              *_accuracy_lines(rep["accuracy"]["clauses"])]
    return "\n".join(lines)


def _rate_line(rep: dict) -> str:
    """The offered rate, the load it puts on the system (a fraction of its capacity) and the
    method."""
    return (f"rate {rep['arrival_rate']:,.1f} req/s   load {rep['load']:.3f} of capacity   "
            f"method: {rep['method']}")


def _accuracy_lines(clauses: list) -> list:
    """The accuracy record's clauses under its label, one per line, wrapped at 99 columns and
    indented under the first."""
    indent = " " * 18
    out = []
    for i, clause in enumerate(clauses):
        out += textwrap.wrap(clause, 99, initial_indent="accuracy          " if i == 0 else indent,
                             subsequent_indent=indent + "  ", break_on_hyphens=False)
    return out


def _labelled(exactness: str, clauses: list) -> list:
    """The clauses with the exactness in front of the first ("approximation: ...")."""
    return [f"{exactness}: {clauses[0]}", *clauses[1:]] if clauses else [exactness]


def _say(what: str, err: Exception) -> None:
    """An error on stderr as the command's one line: "qmodel: error: ..."."""
    print(f"qmodel: {what}: {' '.join(str(err).split())}", file=sys.stderr)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings on the command line read like its errors: one line, no source location."""
    return f"qmodel: warning: {message}\n"


def main(argv=None) -> int:
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        return _run(argv)
    finally:
        warnings.formatwarning = previous


def _run(argv) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["size"]:
        try:
            argv = size_command.expand_spec(argv)
        except ValueError as err:
            _say("error", err)
            return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "predict":
        return _predict_command(args)
    if args.command == "routers":
        return _routers_command(args)
    if args.command == "profile":
        return _profile_command(args)
    if args.command == "derive":
        return derive.run(args)
    if args.command == "ensemble":
        return ensemble_command.run(args)
    if args.command == "size":
        return size_command.run(args)
    if args.command == "triton-check":
        return triton_check_command.run(args)
    if args.command == "validate":
        return validate.run(args)
    try:
        system = _system_from(args)
        arrivals = _arrivals_from(args)
        requests = args.requests
        progress = args.progress
        if progress is None:
            progress = (requests or 2_000_000) >= PROGRESS_FROM and sys.stderr.isatty()
        result = simulate(system, arrivals=arrivals, requests=requests, seed=args.seed,
                          replicas=args.replicas, warmup=args.warmup, backend=args.backend,
                          progress=progress)
    except ValueError as err:   # includes UnstableError: say what to change, no traceback
        _say("error", err)
        return 2
    rep = _report(result, system, arrivals)
    print(json.dumps(rep, indent=2) if args.json else _table_text(rep))
    return 0


def _predict_report(result, system, rate) -> dict:
    out = {"system": system.describe(), "arrival_rate": rate, "load": rate / system.capacity}
    out.update(result.summary())
    out["p999"] = result.quantile(0.999)
    return out


def _predict_text(rep: dict, check: dict | None) -> str:
    def ms(x):
        return f"{x * 1e3:9.3f} ms"

    lines = [rep["system"], _rate_line(rep), ""]
    if check is None:
        # where no model covers the system, predict's answer is a simulation: say so
        heading = "simulated" if rep.get("exactness") == "simulation" else "predicted"
        lines.append(f"{'':8}{heading:>12}")
        for name, label in (("p50", "p50"), ("p95", "p95"), ("p99", "p99"), ("p999", "p99.9"),
                            ("mean", "mean")):
            lines.append(f"{label:8}{ms(rep[name])}")
    else:
        lines.append(f"{'':8}{'predicted':>12}{'simulated':>13}   95% CI of simulated   error")
        for name in ("p50", "p95", "p99"):
            lo, hi = check[f"{name}_ci95"]
            err = rep[name] / check[name] - 1
            lines.append(f"{name:8}{ms(rep[name])}{ms(check[name])}   "
                         f"[{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms   {err:+.1%}")
        lines.append(f"{'mean':8}{ms(rep['mean'])}{ms(check['mean'])}")
    lines += ["", f"throughput        {rep['throughput']:,.1f} req/s",
              f"utilization       {rep['utilization']:.3f}",
              f"mean batch size   {rep['mean_batch_size']:.3f}",
              *_accuracy_lines(_labelled(rep["exactness"], rep["accuracy"]["clauses"]))]
    return "\n".join(lines)


def _predict_command(args) -> int:
    from .predict import predict

    try:
        system = _system_from(args)
        arrivals = _arrivals_from(args)
        kwargs = {} if args.resolution is None else {"resolution": args.resolution}
        result = predict(system, arrivals=arrivals,
                         fallback="raise" if args.no_fallback else "simulate",
                         extrapolate=args.extrapolate, **kwargs)
        check = None
        if args.check is not None:
            sim = simulate(system, arrivals=arrivals, requests=args.check, seed=args.seed)
            check = _report(sim, system, arrivals)
    except NotImplementedError as err:
        _say("not modelled yet", err)
        return 3
    except ValueError as err:   # includes UnstableError: say what to change, no traceback
        _say("error", err)
        return 2
    rep = _predict_report(result, system, arrivals.rate)
    if args.json:
        if check is not None:
            rep["simulated"] = check
        print(json.dumps(rep, indent=2))
    else:
        print(_predict_text(rep, check))
    return 0


def _routers_command(args) -> int:
    from .compare import compare_routers, router_table

    try:
        if args.router != "random" or args.weights is not None or args.choices is not None:
            raise ValueError("qmodel routers compares the routers itself; drop --router, "
                             "--weights and --choices")
        node = _system_from(argparse.Namespace(**{**vars(args), "nodes": 1}))
        if args.rate is None or args.trace is not None or args.arrival_scv != 1.0:
            raise ValueError("qmodel routers takes Poisson arrivals: give --rate REQ/S")
        rows = compare_routers(node, args.nodes, args.rate, requests=args.simulate,
                               seed=args.seed)
        if args.plot:
            from .plots import plot_router_comparison
            plot_router_comparison(rows, args.plot,
                                   title=f"{args.nodes} x {node.describe()} at "
                                         f"{args.rate:,.0f} req/s")
    except ValueError as err:   # includes UnstableError: say what to change, no traceback
        _say("error", err)
        return 2
    if args.json:
        out = []
        for r in rows:
            item = {"router": r.router, "note": r.note}
            for key, res in (("predicted", r.predicted), ("simulated", r.simulated)):
                item[key] = None if res is None else res.summary()
            out.append(item)
        print(json.dumps({"node": node.describe(), "nodes": args.nodes,
                          "arrival_rate": args.rate, "routers": out}, indent=2))
    else:
        print(f"{args.nodes} x {node.describe()}, {args.rate:,.1f} req/s\n")
        print(router_table(rows))
    return 0


def _profile_command(args) -> int:
    try:
        result = profile(args.workload, args.batch_sizes, repeats=args.repeats,
                         warmup=args.warmup, concurrency=args.concurrency,
                         backend=args.backend, blas_threads=args.blas_threads)
        result.save(args.out)
    except (ValueError, OSError) as err:
        _say("error", err)
        return 2
    plot = args.plot or str(Path(args.out).with_suffix(".png"))
    plot_profile(result, plot)
    print(f"{result.workload} on {result.device}: {args.repeats} runs per size after "
          f"{args.warmup} warm-up runs")
    for m, by_k in sorted(result.samples.items()):
        law, error = result.fit(m)
        print(f"concurrency {m}:   k   mean ms    p99 ms    cv")
        for k, values in sorted(by_k.items()):
            v = np.asarray(values)
            print(f"               {k:3d}  {v.mean() * 1e3:8.4f}  {np.percentile(v, 99) * 1e3:8.4f}"
                  f"  {v.std() / v.mean():5.3f}")
        print(f"  fitted: {law.describe()} (largest mean error {error['mean_error']:.1%})")
    print(f"profile: {args.out}\nplot: {plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
