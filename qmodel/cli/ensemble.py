"""``qmodel ensemble``: a Triton ensemble from its model repository, predicted end to end.

The ensemble's config.pbtxt and its composing models' configs give the graph and each stage's
batching knobs (:func:`qmodel.triton.read_config`); ``--service STAGE=TIME[+TIME][:JITTER]``
or ``--profile STAGE=FILE`` gives each stage's batch execution time. The command prints the
end-to-end p50/p95/p99 (predicted, and simulated with ``--check``), each stage's own
latency, utilization and batch size, and with ``--bottleneck`` what each stage's knobs do to
the tail (:func:`qmodel.bottleneck.bottleneck`).
"""

from __future__ import annotations

import json

from .args import read_jitter
from .output import refused

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "a Triton ensemble from its model repository, predicted end to end"
DESCRIPTION = ("Read an ensemble's config.pbtxt and its composing models' configs, take each "
               "stage's S(k) from --service or --profile, and predict the end-to-end p50/p95/p99"
               " with each stage's share (--check: also simulate; --bottleneck: what each "
               "stage's knobs do to p99).")


def add_arguments(parser) -> None:
    parser.add_argument("--triton-repo", required=True, metavar="DIR",
                        help="the model repository holding the ensemble and its models")
    parser.add_argument("--model", required=True, metavar="NAME", help="the ensemble's name")
    parser.add_argument("--service", action="append", default=[], metavar="STAGE=S",
                        help="a stage's S(k): BASE[+PER_ITEM][:JITTER[:CV]], e.g. "
                             "user_tower=1.2ms+0.1ms:lognormal:0.1 (once per stage)")
    parser.add_argument("--profile", action="append", default=[], metavar="STAGE=FILE",
                        help="a stage's S(k) from a measured profile (qmodel profile --out)")
    parser.add_argument("--gpus", type=int, default=None, metavar="N",
                        help="GPUs per pod, for instance groups that list none")
    parser.add_argument("--rate", type=float, required=True, metavar="REQ/S",
                        help="Poisson arrivals (to all pods together)")
    parser.add_argument("--pods", type=int, default=1, metavar="N",
                        help="pods, each serving the whole ensemble (default 1)")
    parser.add_argument("--router", default="round_robin", choices=["round_robin", "random"],
                        help="how requests are spread over the pods")
    parser.add_argument("--check", type=int, nargs="?", const=2_000_000, default=None,
                        metavar="REQUESTS", help="also simulate (default 2e6 requests)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the --check simulation")
    parser.add_argument("--bottleneck", action="store_true",
                        help="what each stage's knobs do to the end-to-end p99")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="with --bottleneck: a bar chart of the knob changes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def stage_services(services, profiles=()) -> dict:
    """{stage: ServiceTime} from ``--service STAGE=BASE[+PER_ITEM][:JITTER[:CV]]`` and
    ``--profile STAGE=FILE`` values."""
    import argparse

    from ..system import ServiceTime, parse_duration

    out = {}
    for item in services:
        stage, sep, spec = item.partition("=")
        if not sep or not spec:
            raise ValueError(f"--service {item!r}: write STAGE=BASE[+PER_ITEM][:JITTER], "
                             "e.g. scoring=0.4ms+0.05ms:lognormal:0.05")
        times, _, jitter = spec.partition(":")
        base, _, per_item = times.partition("+")
        try:
            law = read_jitter(jitter) if jitter else "deterministic"
        except argparse.ArgumentTypeError as err:
            raise ValueError(f"--service {stage}: {err}") from None
        out[stage] = ServiceTime.affine(parse_duration(base, f"--service {stage} base"),
                                        parse_duration(per_item, f"--service {stage} "
                                                                 "per item")
                                        if per_item else 0.0, jitter=law)
    for stage, profile in stage_profiles(profiles).items():
        out[stage] = profile.service(1)
    return out


def stage_profiles(items) -> dict:
    """{stage: Profile} from ``--profile STAGE=FILE`` values, each file loaded once."""
    from ..profiling import Profile

    out = {}
    for item in items:
        stage, sep, path = item.partition("=")
        if not sep or not path:
            raise ValueError(f"--profile {item!r}: write STAGE=FILE")
        out[stage] = Profile.load(path)
    return out


def run(args) -> int:
    from ..bottleneck import bottleneck
    from ..predict import predict
    from ..sim import simulate
    from ..system import Cluster
    from ..triton import read_config

    try:
        config = read_config(f"{args.triton_repo}/{args.model}", gpus=args.gpus)
        if not hasattr(config, "ensemble"):
            raise ValueError(f"{config.source}: {args.model!r} is not an ensemble; use "
                             "qmodel predict for one model")
        ensemble = config.ensemble(stage_services(args.service, args.profile))
        system = (ensemble if args.pods == 1 else
                  Cluster(ensemble, count=args.pods, router=args.router))
        result = predict(system, rate=args.rate)
        check = None
        if args.check is not None:
            check = simulate(system, rate=args.rate, requests=args.check, seed=args.seed)
        report = bottleneck(system, args.rate) if args.bottleneck else None
    except (NotImplementedError, ValueError, OSError) as err:
        return refused(err)
    if args.plot and report is not None:
        from ..plots import plot_bottleneck
        plot_bottleneck(report, args.plot)
    if args.json:
        out = {"system": system.describe(), "arrival_rate": args.rate,
               "predicted": result.summary(),
               "stages": {n: r.summary() for n, r in (result.stages or {}).items()}}
        if check is not None:
            out["simulated"] = check.summary()
            out["simulated_stages"] = {n: r.summary() for n, r in check.stages.items()}
        if report is not None:
            out["bottleneck"] = {
                "dominant": report.dominant, "dominant_by": report.dominant_by,
                "best": None if report.best is None else report.best.change,
                "changes": [{"stage": c.stage, "change": c.change, "p99": c.latency,
                             "simulated": c.simulated, "note": c.note}
                            for c in report.changes]}
        print(json.dumps(out, indent=2))
        return 0
    print(_text(system, args.rate, result, check))
    if report is not None:
        print("\n" + report.table())
    return 0


def _text(system, rate, result, check) -> str:
    def ms(x):
        return f"{x * 1e3:9.3f} ms"

    lines = [system.describe(), f"rate {rate:,.1f} req/s   method: {result.method}", ""]
    if check is None:
        # where no model covers the system, predict's answer is a simulation: say so
        heading = "simulated" if result.accuracy.exactness == "simulation" else "predicted"
        lines.append(f"{'':8}{heading:>12}")
        lines += [f"{n:8}{ms(getattr(result, n))}" for n in ("p50", "p95", "p99")]
    else:
        lines.append(f"{'':8}{'predicted':>12}{'simulated':>13}   95% CI of simulated   error")
        for n, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            lo, hi = check.ci(p)
            lines.append(f"{n:8}{ms(result.quantile(p))}{ms(check.quantile(p))}   "
                         f"[{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms   "
                         f"{result.quantile(p) / check.quantile(p) - 1:+.1%}")
    lines += ["", f"{'stage':16}{'own p50':>12}{'own p99':>12}{'utilization':>13}"
                  f"{'mean batch':>12}"]
    for name, r in (result.stages or {}).items():
        lines.append(f"{name:16}{ms(r.p50)}{ms(r.p99)}{r.utilization:13.3f}"
                     f"{r.mean_batch_size:12.2f}")
    lines.append(f"accuracy: {result.accuracy.exactness}: {result.accuracy.statement}")
    return "\n".join(lines)

