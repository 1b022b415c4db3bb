"""``qmodel size``: the cheapest deployment meeting an SLO, from the command line.

The service comes from ``--service-base/--per-item/--jitter``, a measured ``--profile``, or a
Triton ensemble (``--triton-repo DIR --model NAME`` with ``--service STAGE=...`` or
``--profile STAGE=FILE`` per stage); the search space from lists (``--max-batch-size
1,2,4,8``, ``--max-queue-delay 0,0.5ms,1ms``, ``--nodes 1-64``). ``--spec FILE.toml`` gives
any of these in a file (:func:`spec_arguments`); flags on the command line come after it and
win. The plan is printed and written to ``--out`` (config.pbtxt, report.md, figures).
"""

from __future__ import annotations

from pathlib import Path

from .args import (read_duration, read_int_list, read_jitter, read_service_duration,
                   read_size_ranges)
from .output import refused

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "spec_arguments", "expand_spec"]

HELP = "the cheapest deployment whose tail latency meets an SLO"
DESCRIPTION = ("Search batching knobs, instances and node counts for the cheapest deployment "
               "meeting --slo at --rate, verify it by simulation, and write config.pbtxt, "
               "report.md and figures to --out. Exit status 1 when no deployment meets the SLO "
               "(the report says why).")

# spec keys written as flags: a list joins with commas, a path is taken from the spec's folder
SPEC_KEYS = {"rate", "network", "peak", "failures", "nodes", "gpus_per_node",
             "instances_per_gpu", "max_batch_size", "max_queue_delay", "routers",
             "cost_per_gpu", "seed", "out", "name", "no_verify", "slo", "service",
             "sharing", "preferred_batch_sizes", "traffic", "autoscale", "scale_up_delay",
             "min_pods", "max_pods", "stabilization", "window"}
SERVICE_KEYS = {"base", "per_item", "jitter", "profile", "triton_repo", "model", "stages"}


def add_arguments(parser) -> None:
    g = parser.add_argument_group("service (one of)")
    g.add_argument("--service-base", type=read_service_duration, default=None, metavar="TIME",
                   help="S(k) = base + per_item k of one instance")
    g.add_argument("--per-item", type=read_service_duration, default=0.0, metavar="TIME")
    g.add_argument("--jitter", type=read_jitter, default="deterministic", metavar="NAME[:CV]")
    g.add_argument("--profile", action="append", default=[], metavar="[STAGE=]FILE",
                   help="a measured profile (qmodel profile --out): concurrency i gives the "
                        "service of i instances per GPU; with --triton-repo, STAGE=FILE per "
                        "stage")
    g.add_argument("--triton-repo", default=None, metavar="DIR",
                   help="with --model: a Triton ensemble to size pod by pod")
    g.add_argument("--model", default=None, metavar="NAME")
    g.add_argument("--service", action="append", default=[], metavar="STAGE=S",
                   help="an ensemble stage's S(k), as for qmodel ensemble")
    parser.add_argument("--spec", default=None, metavar="FILE.toml",
                        help="the sizing question in a TOML file (keys as the flags, with "
                             "underscores); flags given too override it")
    g = parser.add_argument_group("target")
    g.add_argument("--rate", type=_rate_range, default=None, metavar="REQ/S[:PEAK]",
                   help="the rate, or a range LOW:PEAK at every rate of which the SLO holds")
    g.add_argument("--traffic", default=None, metavar="FILE.csv",
                   help="instead of --rate: rows of (time s, rate req/s); sizes its range, or "
                        "with --autoscale plans pods over it")
    g.add_argument("--slo", action="append", required=True, metavar="KEY=TIME",
                   help="e.g. p95=5ms (repeat for several quantiles)")
    g.add_argument("--network", type=read_duration, default=0.0, metavar="TIME",
                   help="each target's share spent outside the servers")
    g.add_argument("--peak", type=float, default=1.0, help="peak factor on the rate")
    g.add_argument("--failures", type=int, default=0, metavar="K",
                   help="nodes that may be down while the SLO holds")
    g = parser.add_argument_group("search space")
    g.add_argument("--nodes", type=read_size_ranges, default=tuple(range(1, 65)), metavar="N-N")
    g.add_argument("--gpus-per-node", type=int, default=1, metavar="G")
    g.add_argument("--instances-per-gpu", type=read_int_list, default=(1,), metavar="I,I")
    g.add_argument("--max-batch-size", type=read_int_list, default=(1, 2, 4, 8, 16, 32, 64),
                   metavar="B,B")
    g.add_argument("--max-queue-delay", type=_delays, default=(0.0, 0.5e-3, 1e-3, 2e-3, 5e-3),
                   metavar="D,D", help="durations, e.g. 0,0.5ms,1ms")
    g.add_argument("--preferred-batch-sizes", type=_preferred, default=((),), metavar="SETS",
                   help="preferred-size sets to try, ';'-separated, e.g. 'none;1/2/4'")
    g.add_argument("--routers", type=_names, default=("round_robin",), metavar="R,R")
    g.add_argument("--sharing", choices=("independent", "time-sliced"), default=None,
                   help="how instances sharing a GPU run where no profile measured them "
                        "(an assumption; default: refuse)")
    g = parser.add_argument_group("autoscaling (with --traffic)")
    g.add_argument("--autoscale", default=None, metavar="METRIC[=TARGET]",
                   help="utilization or in_flight, with a target (e.g. utilization=0.6), or "
                        "without one for the plan to choose it")
    g.add_argument("--scale-up-delay", type=_long_duration, default=90.0, metavar="TIME",
                   help="pod start and model load (default 90s)")
    g.add_argument("--stabilization", type=_long_duration, default=300.0, metavar="TIME",
                   help="scale-down stabilization window (default 300s)")
    g.add_argument("--min-pods", type=int, default=1)
    g.add_argument("--max-pods", type=int, default=64)
    g.add_argument("--window", type=_long_duration, default=60.0, metavar="TIME",
                   help="the SLO holds over each settled window of this length (default 60s)")
    g.add_argument("--cost-per-gpu", type=float, default=1.0)
    g = parser.add_argument_group("output")
    g.add_argument("--no-verify", action="store_true", help="skip the plan's simulation")
    g.add_argument("--seed", type=int, default=1, help="seed of the verification")
    g.add_argument("--out", default="plan", metavar="DIR",
                   help="where config.pbtxt, report.md and the figures go (default plan/)")
    g.add_argument("--name", default=None,
                   help="the model's name in config.pbtxt (default --model, else 'model')")


def _delays(text: str) -> tuple:
    return tuple(read_duration(x.strip()) for x in text.split(",") if x.strip())


def _names(text: str) -> tuple:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _rate_range(text: str):
    """REQ/S or LOW:PEAK."""
    import argparse

    low, sep, high = text.partition(":")
    try:
        if not sep:
            return float(text)
        return (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rate {text!r}: write a rate in requests per "
                                         "second, or a range LOW:PEAK such as 1000:10000") \
            from None


def _preferred(text: str) -> tuple:
    """Preferred-size sets: 'none;1/2/4;4/8'."""
    import argparse

    out = []
    for item in text.split(";"):
        item = item.strip()
        if item in ("", "none", "-"):
            out.append(())
            continue
        try:
            out.append(tuple(int(x) for x in item.split("/")))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--preferred-batch-sizes {text!r}: write sets "
                                             "separated by ';', sizes by '/', e.g. "
                                             "'none;1/2/4'") from None
    return tuple(out)


def _long_duration(text: str) -> float:
    """Seconds of autoscaling (minutes are common): '90', '90s', '2min'."""
    import argparse

    text = text.strip()
    for unit, factor in (("min", 60.0), ("ms", 1e-3), ("s", 1.0), ("h", 3600.0)):
        if text.endswith(unit) and text[:-len(unit)].strip():
            try:
                return float(text[:-len(unit)]) * factor
            except ValueError:
                break
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: write seconds, or "
                                         "'90s', '2min'") from None


def _autoscaler(args):
    """The Autoscaler of --autoscale and its flags, or None."""
    from ..autoscaler import Autoscaler

    if args.autoscale is None:
        return None
    if args.traffic is None:
        raise ValueError("--autoscale plans pods over a traffic: give --traffic FILE.csv")
    metric, sep, target = args.autoscale.partition("=")
    try:
        value = float(target) if sep else None
    except ValueError:
        raise ValueError(f"--autoscale {args.autoscale!r}: write METRIC or METRIC=TARGET, e.g. "
                         "utilization=0.6") from None
    return Autoscaler(metric=metric.strip(), target=value,
                      scale_up_delay=args.scale_up_delay, stabilization=args.stabilization,
                      min_pods=args.min_pods, max_pods=args.max_pods)


def _service(args):
    """(service, stage profiles or None) from the service flags."""
    from .ensemble import stage_profiles, stage_services
    from ..profiling import Profile
    from ..system import ServiceTime
    from ..triton import read_config

    given = [args.service_base is not None, bool(args.profile) and args.triton_repo is None,
             args.triton_repo is not None]
    if sum(given) != 1:
        raise ValueError("give the service one way: --service-base (with --per-item, "
                         "--jitter), --profile FILE, or --triton-repo DIR --model NAME")
    if args.service_base is not None:
        return ServiceTime.affine(args.service_base, args.per_item, jitter=args.jitter), None
    if args.triton_repo is None:
        if len(args.profile) > 1:
            raise ValueError("--profile: one file sizes one model; per stage of an ensemble "
                             "write --triton-repo DIR --model NAME --profile STAGE=FILE")
        return Profile.load(args.profile[0]), None
    if args.model is None:
        raise ValueError("--triton-repo needs --model NAME (the ensemble)")
    config = read_config(f"{args.triton_repo}/{args.model}")
    if not hasattr(config, "ensemble"):
        raise ValueError(f"{config.source}: {args.model!r} is not an ensemble; size one model "
                         "with --service-base or --profile")
    profiles = stage_profiles(args.profile)
    services = stage_services(args.service)
    services.update({stage: p.service(1) for stage, p in profiles.items()})
    return config.ensemble(services), profiles or None


def expand_spec(argv) -> list:
    """``qmodel size`` arguments with ``--spec FILE`` replaced by the flags the file stands
    for, placed first so that flags on the command line win."""
    argv = list(argv)
    for i, item in enumerate(argv):
        if item == "--spec" or item.startswith("--spec="):
            value = item.partition("=")[2] if "=" in item else None
            if value is None:
                if i + 1 >= len(argv):
                    raise ValueError("--spec needs a file: --spec plan.toml")
                value = argv[i + 1]
                rest = argv[:i] + argv[i + 2:]
            else:
                rest = argv[:i] + argv[i + 1:]
            return rest[:1] + spec_arguments(value) + rest[1:]
    return argv


def spec_arguments(path) -> list:
    """The flags a TOML spec file stands for, in the order ``qmodel size`` parses them.

    Keys are the flags' names with underscores; a list is joined with commas (``nodes`` may
    also be a range such as "1-16"); ``slo`` is a table of quantile to duration; ``service``
    a table with ``base``/``per_item``/``jitter``, ``profile``, or ``triton_repo`` and
    ``model`` with a ``stages`` table of ``{service = "..."}`` or ``{profile = "..."}``.
    Paths in ``service`` are read from the spec file's folder.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> spec = pathlib.Path(tempfile.mkdtemp()) / "s.toml"
    >>> _ = spec.write_text('rate = 3000\\nslo = {p99 = "6ms"}\\nmax_batch_size = [1, 4]\\n'
    ...                     '[service]\\nbase = "1ms"\\njitter = "lognormal:0.2"\\n')
    >>> spec_arguments(spec)
    ['--rate', '3000', '--slo', 'p99=6ms', '--max-batch-size', '1,4', '--service-base', '1ms', '--jitter', 'lognormal:0.2']
    """
    try:
        import tomllib
    except ImportError:                     # Python 3.10: the same parser, as a package
        import tomli as tomllib
    path = Path(path)
    try:
        body = tomllib.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"--spec {path}: cannot read it ({err.strerror})") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"--spec {path}: not TOML: {err}") from None
    unknown = sorted(set(body) - SPEC_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r}; the keys are "
                         f"{', '.join(sorted(SPEC_KEYS))}")
    argv = []
    for key, value in body.items():
        if key == "slo":
            if not isinstance(value, dict):
                raise ValueError(f'{path}: slo must be a table, e.g. slo = {{p95 = "5ms"}}')
            for level, target in value.items():
                argv += ["--slo", f"{level}={_scalar(path, f'slo.{level}', target)}"]
        elif key == "service":
            argv += _service_arguments(path, value)
        elif key == "rate" and isinstance(value, list):
            argv += ["--rate", ":".join(_scalar(path, key, v) for v in value)]
        elif key == "preferred_batch_sizes":
            if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
                raise ValueError(f"{path}: preferred_batch_sizes must be a list of lists, e.g. "
                                 "[[], [1, 2, 4]]")
            argv += ["--preferred-batch-sizes",
                     ";".join("/".join(_scalar(path, key, x) for x in v) or "none"
                              for v in value)]
        elif key == "no_verify":
            if not isinstance(value, bool):
                raise ValueError(f"{path}: no_verify must be true or false")
            argv += ["--no-verify"] if value else []
        else:
            flag = "--" + key.replace("_", "-")
            if isinstance(value, list):
                argv += [flag, ",".join(_scalar(path, key, v) for v in value)]
            else:
                argv += [flag, _scalar(path, key, value)]
    return argv


def _scalar(path, key, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{path}: {key} = {value!r} must be a number or a string such as "
                         '"0.5ms"')
    return str(value)


def _service_arguments(path, service) -> list:
    if not isinstance(service, dict):
        raise ValueError(f"{path}: service must be a table, e.g. [service] base = \"2ms\"")
    unknown = sorted(set(service) - SERVICE_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key service.{unknown[0]}; the keys are "
                         f"{', '.join(sorted(SERVICE_KEYS))}")
    here = path.parent
    argv = []
    for key, flag in (("base", "--service-base"), ("per_item", "--per-item"),
                      ("jitter", "--jitter"), ("model", "--model")):
        if key in service:
            argv += [flag, _scalar(path, f"service.{key}", service[key])]
    for key, flag in (("profile", "--profile"), ("triton_repo", "--triton-repo")):
        if key in service:
            argv += [flag, str(here / _scalar(path, f"service.{key}", service[key]))]
    stages = service.get("stages", {})
    if not isinstance(stages, dict):
        raise ValueError(f"{path}: service.stages must be a table of stage = {{profile = "
                         "...}} or {service = ...}")
    for stage, given in stages.items():
        if not isinstance(given, dict) or len(given) != 1 \
                or not set(given) <= {"profile", "service"}:
            raise ValueError(f"{path}: service.stages.{stage} must be {{profile = \"FILE\"}} "
                             "or {service = \"BASE+PER_ITEM:JITTER\"}")
        (kind, value), = given.items()
        value = _scalar(path, f"service.stages.{stage}.{kind}", value)
        argv += ([f"--{kind}", f"{stage}={here / value}"] if kind == "profile"
                 else [f"--{kind}", f"{stage}={value}"])
    return argv


def _slo(items) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--slo {item!r}: write KEY=TIME, e.g. p95=5ms")
        out[key.strip()] = read_duration(value.strip())
    return out


def run(args) -> int:
    from ..sizing import size

    try:
        service, profiles = _service(args)
        if (args.rate is None) == (args.traffic is None):
            raise ValueError("give --rate REQ/S (or LOW:PEAK), or --traffic FILE.csv")
        traffic = None
        if args.traffic is not None:
            from ..traffic import Traffic

            traffic = Traffic.from_csv(args.traffic)
        plan = size(service, rate=args.rate, slo=_slo(args.slo), nodes=args.nodes,
                    gpus_per_node=args.gpus_per_node,
                    instances_per_gpu=args.instances_per_gpu,
                    max_batch_size=args.max_batch_size, max_queue_delay=args.max_queue_delay,
                    preferred_batch_sizes=args.preferred_batch_sizes,
                    routers=args.routers, cost_per_gpu=args.cost_per_gpu,
                    network=args.network, peak=args.peak, failures=args.failures,
                    verify=not args.no_verify, seed=args.seed, profiles=profiles,
                    sharing=args.sharing, traffic=traffic, autoscale=_autoscaler(args),
                    window=args.window)
        paths = plan.write(args.out, args.name or args.model or "model")
    except (NotImplementedError, ValueError, OSError) as err:
        return refused(err)
    print(plan.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if plan.feasible else 1
