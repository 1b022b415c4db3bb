"""The simulator against exact M/M/c, M/D/1 and M/D/c percentiles (same seeds as the tests).

Prints a Markdown table: exact p95/p99 of the sojourn time, the simulated value and its 99%
confidence interval.

Run from the repository root: ``python validation/sim_vs_exact.py [--json FILE] [--text FILE]``
(seconds; results in validation/results/sim_vs_exact.{json,txt}).
"""

import argparse

import qmodel as qm
from qmodel.campaign.doc_tables import simulator_vs_exact
from qmodel.campaign.measure import QUANTILES
from qmodel.campaign.results import add_output_arguments, write_outputs
from qmodel.theory import classical

CASES = [  # name, servers, load, seed, deterministic service
    ("M/M/1 rho .8", 1, .8, 1, False), ("M/M/3 rho .7", 3, .7, 2, False),
    ("M/M/8 rho .9", 8, .9, 3, False), ("M/D/1 rho .5", 1, .5, 4, True),
    ("M/D/1 rho .8", 1, .8, 5, True), ("M/D/2 rho .8", 2, .8, 6, True),
    ("M/D/4 rho .9", 4, .9, 7, True),
]
MU = 1000.0                      # service rate of one server (requests per second)


def run_case(name, c, rho, seed, det, requests) -> dict:
    """Exact and simulated p95/p99 (seconds) of one classical queue."""
    rate = rho * c * MU
    jitter = "deterministic" if det else "exponential"
    node = qm.Node(qm.ServiceTime.affine(1 / MU, jitter=jitter), instances=c)
    sim = qm.simulate(node, rate=rate, requests=requests, seed=seed)
    if not det:
        exact = classical.mmc(rate, MU, c)
    else:
        exact = classical.mdc(rate, 1 / MU, c) if c > 1 else classical.md1(rate, 1 / MU)
    row = {"queue": name, "servers": c, "load": rho, "seed": seed, "requests": requests}
    for q, p in QUANTILES[1:]:
        lo, hi = sim.ci(p, level=0.99)
        row[q] = {"exact": float(exact.quantile(p)), "simulated": float(sim.quantile(p)),
                  "ci99": [float(lo), float(hi)]}
    return row


def table(rows) -> str:
    """The Markdown table of docs/accuracy.md
    (:func:`qmodel.campaign.doc_tables.simulator_vs_exact`)."""
    return "\n".join(simulator_vs_exact(rows))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=4_000_000, help="per queue")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    rows = [run_case(*case, args.requests) for case in CASES]
    write_outputs(args, rows, table(rows))


if __name__ == "__main__":
    main()
