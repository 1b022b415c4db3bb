"""``qmodel predict``: the queueing models' latency distribution of a node or cluster, which
model answered and how exact it is; ``--check`` simulates beside it."""

from __future__ import annotations

import json

from .args import add_system_args, arrivals_from, read_count, system_from
from .output import accuracy_lines, labelled, rate_line, refused, simulation_report

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "queueing-theory latency distribution of a node or cluster"
DESCRIPTION = ("Predict p50/p95/p99 from the queueing models (milliseconds of compute) and say "
               "which model answered and how exact it is. Durations take units: 2ms, 500us, "
               "0.002 (seconds).")


def add_arguments(parser) -> None:
    add_system_args(parser)
    g = parser.add_argument_group("output")
    g.add_argument("--resolution", type=read_count, default=None, metavar="STEPS",
                   help="lattice steps per batch-of-one service time (default 100)")
    g.add_argument("--check", type=read_count, nargs="?", const=2_000_000, default=None,
                   metavar="REQUESTS",
                   help="also simulate (default 2e6 requests) and print both side by side")
    g.add_argument("--seed", type=read_count, default=1, help="seed of the --check simulation")
    g.add_argument("--no-fallback", action="store_true",
                   help="where no model covers the system, fail (exit 3) instead of answering "
                        "by simulation")
    g.add_argument("--extrapolate", action="store_true",
                   help="answer with the model also outside its family's measured domain "
                        "(the accuracy line says so)")
    g.add_argument("--json", action="store_true", help="print JSON instead of a table")


def prediction_report(result, system, rate) -> dict:
    out = {"system": system.describe(), "arrival_rate": rate, "load": rate / system.capacity}
    out.update(result.summary())
    out["p999"] = result.quantile(0.999)
    return out


def prediction_text(rep: dict, check: dict | None) -> str:
    def ms(x):
        return f"{x * 1e3:9.3f} ms"

    lines = [rep["system"], rate_line(rep), ""]
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
              *accuracy_lines(labelled(rep["exactness"], rep["accuracy"]["clauses"]))]
    return "\n".join(lines)


def run(args) -> int:
    from ..predict import predict
    from ..sim import simulate

    try:
        system = system_from(args)
        arrivals = arrivals_from(args)
        kwargs = {} if args.resolution is None else {"resolution": args.resolution}
        result = predict(system, arrivals=arrivals,
                         fallback="raise" if args.no_fallback else "simulate",
                         extrapolate=args.extrapolate, **kwargs)
        check = None
        if args.check is not None:
            sim = simulate(system, arrivals=arrivals, requests=args.check, seed=args.seed)
            check = simulation_report(sim, system, arrivals)
    except (NotImplementedError, ValueError) as err:   # UnstableError is a ValueError
        return refused(err)
    rep = prediction_report(result, system, arrivals.rate)
    if args.json:
        if check is not None:
            rep["simulated"] = check
        print(json.dumps(rep, indent=2))
    else:
        print(prediction_text(rep, check))
    return 0
