"""The simulator against exact M/M/c, M/D/1 and M/D/c percentiles (same seeds as the tests).

Prints a Markdown table: exact p95/p99 of the sojourn time, the simulated value and its 99%
confidence interval.

Run from the repository root: ``python validation/sim_vs_exact.py`` (a few minutes).
"""

import qmodel as qm
from qmodel.theory import classical

CASES = [  # name, servers, load, seed, deterministic service
    ("M/M/1 rho .8", 1, .8, 1, False), ("M/M/3 rho .7", 3, .7, 2, False),
    ("M/M/8 rho .9", 8, .9, 3, False), ("M/D/1 rho .5", 1, .5, 4, True),
    ("M/D/1 rho .8", 1, .8, 5, True), ("M/D/2 rho .8", 2, .8, 6, True),
    ("M/D/4 rho .9", 4, .9, 7, True),
]


def main(requests: int = 4_000_000) -> None:
    print("| queue | p | exact (ms) | simulated (ms) | 99% CI (ms) |")
    print("|---|---|---|---|---|")
    mu = 1000.0
    for name, c, rho, seed, det in CASES:
        rate = rho * c * mu
        jitter = "deterministic" if det else "exponential"
        node = qm.Node(qm.ServiceTime.affine(1 / mu, jitter=jitter), instances=c)
        sim = qm.simulate(node, rate=rate, requests=requests, seed=seed)
        if not det:
            exact = classical.mmc(rate, mu, c)
        else:
            exact = classical.mdc(rate, 1 / mu, c) if c > 1 else classical.md1(rate, 1 / mu)
        for p in (0.95, 0.99):
            lo, hi = sim.ci(p, level=0.99)
            print(f"| {name} | p{int(p * 100)} | {exact.quantile(p) * 1e3:.4f} | "
                  f"{sim.quantile(p) * 1e3:.4f} | [{lo * 1e3:.4f}, {hi * 1e3:.4f}] |")


if __name__ == "__main__":
    main()
