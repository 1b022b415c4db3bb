"""``qmodel size``: the cheapest deployment meeting an SLO, from the command line.

The service comes from ``--service-base/--per-item/--jitter``, a measured ``--profile``, or a
Triton ensemble (``--triton-repo DIR --model NAME --service STAGE=...``); the search space
from lists (``--max-batch-size 1,2,4,8``, ``--max-queue-delay 0,0.5ms,1ms``, ``--nodes 1-64``).
The plan is printed and written to ``--out`` (config.pbtxt, report.md, figures).
"""

from __future__ import annotations

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    from .cli import _duration, _int_list, _jitter, _service_duration, _size_ranges

    g = parser.add_argument_group("service (one of)")
    g.add_argument("--service-base", type=_service_duration, default=None, metavar="TIME",
                   help="S(k) = base + per_item k of one instance")
    g.add_argument("--per-item", type=_service_duration, default=0.0, metavar="TIME")
    g.add_argument("--jitter", type=_jitter, default="deterministic", metavar="NAME[:CV]")
    g.add_argument("--profile", default=None, metavar="FILE",
                   help="a measured profile (qmodel profile --out): concurrency i gives the "
                        "service of i instances per GPU")
    g.add_argument("--triton-repo", default=None, metavar="DIR",
                   help="with --model: a Triton ensemble to size pod by pod")
    g.add_argument("--model", default=None, metavar="NAME")
    g.add_argument("--service", action="append", default=[], metavar="STAGE=S",
                   help="an ensemble stage's S(k), as for qmodel ensemble")
    g = parser.add_argument_group("target")
    g.add_argument("--rate", type=float, required=True, metavar="REQ/S")
    g.add_argument("--slo", action="append", required=True, metavar="KEY=TIME",
                   help="e.g. p95=5ms (repeat for several quantiles)")
    g.add_argument("--network", type=_duration, default=0.0, metavar="TIME",
                   help="each target's share spent outside the servers")
    g.add_argument("--peak", type=float, default=1.0, help="peak factor on the rate")
    g.add_argument("--failures", type=int, default=0, metavar="K",
                   help="nodes that may be down while the SLO holds")
    g = parser.add_argument_group("search space")
    g.add_argument("--nodes", type=_size_ranges, default=tuple(range(1, 65)), metavar="N-N")
    g.add_argument("--gpus-per-node", type=int, default=1, metavar="G")
    g.add_argument("--instances-per-gpu", type=_int_list, default=(1,), metavar="I,I")
    g.add_argument("--max-batch-size", type=_int_list, default=(1, 2, 4, 8, 16, 32, 64),
                   metavar="B,B")
    g.add_argument("--max-queue-delay", type=_delays, default=(0.0, 0.5e-3, 1e-3, 2e-3, 5e-3),
                   metavar="D,D", help="durations, e.g. 0,0.5ms,1ms")
    g.add_argument("--routers", type=_names, default=("round_robin",), metavar="R,R")
    g.add_argument("--cost-per-gpu", type=float, default=1.0)
    g = parser.add_argument_group("output")
    g.add_argument("--no-verify", action="store_true", help="skip the plan's simulation")
    g.add_argument("--seed", type=int, default=1, help="seed of the verification")
    g.add_argument("--out", default="plan", metavar="DIR",
                   help="where config.pbtxt, report.md and the figures go (default plan/)")
    g.add_argument("--name", default=None,
                   help="the model's name in config.pbtxt (default --model, else 'model')")


def _delays(text: str) -> tuple:
    from .cli import _duration

    return tuple(_duration(x.strip()) for x in text.split(",") if x.strip())


def _names(text: str) -> tuple:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _service(args):
    from .ensemble_command import stage_services
    from .profiling import Profile
    from .system import ServiceTime
    from .triton import read_config

    given = [args.service_base is not None, args.profile is not None,
             args.triton_repo is not None]
    if sum(given) != 1:
        raise ValueError("give the service one way: --service-base (with --per-item, "
                         "--jitter), --profile FILE, or --triton-repo DIR --model NAME")
    if args.profile is not None:
        return Profile.load(args.profile)
    if args.service_base is not None:
        return ServiceTime.affine(args.service_base, args.per_item, jitter=args.jitter)
    if args.model is None:
        raise ValueError("--triton-repo needs --model NAME (the ensemble)")
    config = read_config(f"{args.triton_repo}/{args.model}")
    if not hasattr(config, "ensemble"):
        raise ValueError(f"{config.source}: {args.model!r} is not an ensemble; size one model "
                         "with --service-base or --profile")
    return config.ensemble(stage_services(args.service))


def _slo(items) -> dict:
    from .cli import _duration

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--slo {item!r}: write KEY=TIME, e.g. p95=5ms")
        out[key.strip()] = _duration(value.strip())
    return out


def run(args) -> int:
    from .cli import _say
    from .sizing import size

    try:
        plan = size(_service(args), rate=args.rate, slo=_slo(args.slo), nodes=args.nodes,
                    gpus_per_node=args.gpus_per_node,
                    instances_per_gpu=args.instances_per_gpu,
                    max_batch_size=args.max_batch_size, max_queue_delay=args.max_queue_delay,
                    routers=args.routers, cost_per_gpu=args.cost_per_gpu,
                    network=args.network, peak=args.peak, failures=args.failures,
                    verify=not args.no_verify, seed=args.seed)
        paths = plan.write(args.out, args.name or args.model or "model")
    except NotImplementedError as err:
        _say("not modelled yet", err)
        return 3
    except (ValueError, OSError) as err:
        _say("error", err)
        return 2
    print(plan.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if plan.feasible else 1
