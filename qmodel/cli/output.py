"""What the subcommands print in common: the simulated report, the rate line, the accuracy
record's clauses, and errors and warnings as one line each."""

from __future__ import annotations

import sys
import textwrap

__all__ = ["simulation_report", "simulation_text", "rate_line", "accuracy_lines", "labelled",
           "say", "refused", "one_line_warning"]


def simulation_report(result, system, arrivals) -> dict:
    out = {"system": system.describe(), "arrival_rate": arrivals.rate,
           "load": arrivals.rate / system.capacity}
    out.update(result.summary())
    out["p999"] = result.quantile(0.999)
    if result.sections >= 2:
        for name, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            out[f"{name}_ci95"] = list(result.ci(p))
    out["requests_measured"] = result.requests
    return out


def simulation_text(rep: dict) -> str:
    def ms(x):
        return f"{x * 1e3:9.3f} ms"

    lines = [rep["system"], rate_line(rep), "",
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
              *accuracy_lines(rep["accuracy"]["clauses"])]
    return "\n".join(lines)


def rate_line(rep: dict) -> str:
    """The offered rate, the load it puts on the system (a fraction of its capacity) and the
    method."""
    return (f"rate {rep['arrival_rate']:,.1f} req/s   load {rep['load']:.3f} of capacity   "
            f"method: {rep['method']}")


def accuracy_lines(clauses: list) -> list:
    """The accuracy record's clauses under its label, one per line, wrapped at 99 columns and
    indented under the first."""
    indent = " " * 18
    out = []
    for i, clause in enumerate(clauses):
        out += textwrap.wrap(clause, 99, initial_indent="accuracy          " if i == 0 else indent,
                             subsequent_indent=indent + "  ", break_on_hyphens=False)
    return out


def labelled(exactness: str, clauses: list) -> list:
    """The clauses with the exactness in front of the first ("approximation: ...")."""
    return [f"{exactness}: {clauses[0]}", *clauses[1:]] if clauses else [exactness]


def refused(err: Exception) -> int:
    """A run the library refused, as the command's one line; its exit status: 3 where no
    model covers the system (NotImplementedError), 2 for what the user must change (a
    ValueError, UnstableError included, or a file that cannot be read)."""
    if isinstance(err, NotImplementedError):
        say("not modelled yet", err)
        return 3
    say("error", err)
    return 2


def say(what: str, err: Exception) -> None:
    """An error on stderr as the command's one line: "qmodel: error: ..."."""
    print(f"qmodel: {what}: {' '.join(str(err).split())}", file=sys.stderr)


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings on the command line read like its errors: one line, no source location."""
    return f"qmodel: warning: {message}\n"
