"""The command line's shared readers: durations, counts, lists, jitter, size ranges, and the
node, cluster and load flags that several subcommands take.

Every subcommand module imports this one; it imports none of them. A reader raises
``argparse.ArgumentTypeError`` with the fix in its message, which :class:`Parser` prints as
the command's one line.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from .. import system as qs
from ..jitter import CLI_FORM, parse_jitter
from ..profiling import Profile
from ..routers import ROUTER_NAMES

__all__ = ["Parser", "read_duration", "read_service_duration", "read_real", "read_count",
           "read_number_list", "read_int_list", "read_float_list", "read_jitter",
           "read_size_ranges", "read_table", "add_system_args", "system_from", "arrivals_from"]


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


def read_duration(text: str) -> float:
    try:
        return qs.parse_duration(text if any(c.isalpha() for c in text) else float(text), "TIME")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def read_service_duration(text: str) -> float:
    """A batch's service time; a bare number of a second or more is read as seconds, with a
    hint, since it is more often milliseconds written without the unit."""
    seconds = read_duration(text)
    if seconds >= 1.0 and not any(c.isalpha() for c in text):
        warnings.warn(f"a service time of {text} is read as {seconds:g} s; for milliseconds "
                      f"write {text}ms")
    return seconds


def read_real(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def read_count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(value)


def read_number_list(convert, what: str, example: str):
    def parse(text: str) -> tuple:
        try:
            return tuple(convert(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {what}, "
                                             f"e.g. {example}") from None
    return parse


read_int_list = read_number_list(int, "whole numbers", "4,8")
read_float_list = read_number_list(float, "numbers", "9,1")


def read_jitter(text: str) -> tuple:
    """NAME or NAME:CV, checked by the jitter registry, its messages in this syntax."""
    name, _, cv = text.partition(":")
    try:
        return parse_jitter((name, float(cv)) if cv else name, form=CLI_FORM)
    except ValueError as err:
        if cv and not _is_number(cv):
            err = f"jitter {text!r}: write NAME or NAME:CV, e.g. lognormal:0.3"
        raise argparse.ArgumentTypeError(str(err)) from None


def read_size_ranges(text: str) -> tuple:
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


def read_table(text: str) -> dict:
    out = {}
    for item in text.split(","):
        k, sep, v = item.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"service table entry {item!r}: write SIZE:TIME, "
                                             "e.g. 1:3.1ms,8:6.7ms")
        out[read_count(k.strip())] = read_duration(v.strip())
    return out


def add_system_args(parser) -> None:
    """The flags that describe a node, a cluster and the load (shared by the subcommands)."""
    g = parser.add_argument_group("service time of a batch of k: S(k) = base + per_item * k")
    g.add_argument("--service-base", type=read_service_duration, default=None, metavar="TIME",
                   help="fixed part of S(k) (default 2.4ms unless --service-table)")
    g.add_argument("--per-item", type=read_service_duration, default=0.0, metavar="TIME",
                   help="added per request in the batch (default 0)")
    g.add_argument("--service-table", type=read_table, default=None, metavar="K:TIME,...",
                   help="measured mean S(k) per batch size instead, e.g. 1:3.1ms,8:6.7ms")
    g.add_argument("--jitter", type=read_jitter, default="deterministic", metavar="NAME[:CV]",
                   help="deterministic, exponential, lognormal:CV or gamma:CV")
    g.add_argument("--profile", default=None, metavar="FILE",
                   help="a measured profile (qmodel profile --out) as S(k), every sample kept")
    g.add_argument("--profile-concurrency", type=read_count, default=1, metavar="M",
                   help="which of the profile's concurrencies (copies sharing the device)")
    g = parser.add_argument_group("node (Triton model config)")
    g.add_argument("--max-batch-size", type=read_count, default=1, metavar="B")
    g.add_argument("--max-queue-delay", type=read_duration, default=0.0, metavar="TIME")
    g.add_argument("--preferred", type=read_int_list, default=(), metavar="K,K",
                   help="preferred_batch_size list, e.g. 4,8")
    g.add_argument("--instances", type=read_count, default=1, metavar="C")
    g.add_argument("--max-queue-size", type=read_count, default=0, metavar="Q",
                   help="reject arrivals beyond Q pending requests (0 = unlimited)")
    g = parser.add_argument_group("cluster")
    g.add_argument("--nodes", type=read_count, default=1, metavar="N")
    g.add_argument("--router", default="random", choices=ROUTER_NAMES)
    g.add_argument("--weights", type=read_float_list, default=None, metavar="W,W",
                   help="with --router random: each node's share, e.g. 9,1")
    g.add_argument("--choices", type=read_count, default=None, metavar="D",
                   help="with --router power_of_d: nodes sampled per request")
    g = parser.add_argument_group("load")
    g.add_argument("--rate", type=read_real, default=None, metavar="REQ/S",
                   help="arrival rate in requests per second")
    g.add_argument("--arrival-scv", type=read_real, default=1.0, metavar="SCV",
                   help="squared coefficient of variation of interarrival times "
                        "(1 Poisson, 0 deterministic, >1 bursty)")
    g.add_argument("--trace", default=None, metavar="FILE",
                   help="replay arrival times (seconds, one per line) instead of --rate")


def system_from(args):
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


def arrivals_from(args):
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
