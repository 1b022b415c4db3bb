"""How accurate is the GI/G/c fast-server approximation (max_batch_size 1, c > 1)?

``qmodel.predict`` answers a node without batching and with several instances by
:func:`qmodel.theory.gigc` when arrivals are renewal (or the service law is neither
deterministic nor exponential): one server c times faster, its waiting probability scaled by
Erlang C / rho. This script compares it with the simulator over jitter in {deterministic,
exponential, lognormal cv 0.3, gamma cv 1.5}, c in {2, 4, 8}, arrival scv in {0.25, 1, 2} and
load in {0.5, 0.8, 0.9}, S(1) = 2 ms, and prints p95/p99 errors with the simulator's 99%
confidence interval ("in CI": both model quantiles inside it). Where an exact solver exists
(M/D/c, M/M/c) the simulator is replaced by it ("-" in that column).

Run from the repository root: ``python validation/renewal_multi_server.py [--requests N]
[--out FILE]`` (about 10 minutes; results in validation/results/renewal_multi_server.txt,
whose summary lines qmodel/theory/measured.py carries).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import qmodel as qm
from qmodel.campaign.summaries import figures
from qmodel.theory import gigc, mdc, mmc

JITTER_LAWS = ("deterministic", "exponential", ("lognormal", 0.3), ("gamma", 1.5))
S1 = 2e-3


def rows(requests: int, seed: int):
    for jitter in JITTER_LAWS:
        for c in (2, 4, 8):
            for scv in (0.25, 1.0, 2.0):
                for load in (0.5, 0.8, 0.9):
                    service = qm.ServiceTime.affine(S1, jitter=jitter)
                    rate = load * c / S1
                    model = gigc(rate, service, scv, c)
                    if scv == 1.0 and jitter in ("deterministic", "exponential"):
                        exact = (mdc(rate, S1, c) if jitter == "deterministic"
                                 else mmc(rate, 1 / S1, c))
                        ref = {p: (exact.quantile(p),) * 3 for p in (0.95, 0.99)}
                        source = "exact"
                    else:
                        node = qm.Node(service, max_batch_size=1, instances=c)
                        arrivals = qm.Renewal(rate, scv)
                        sim = qm.simulate(node, arrivals=arrivals, requests=requests, seed=seed)
                        ref = {p: (sim.quantile(p), *sim.ci(p, level=0.99)) for p in (0.95, 0.99)}
                        source = "sim"
                    name = jitter if isinstance(jitter, str) else f"{jitter[0]} {jitter[1]}"
                    out = {"jitter": name, "c": c, "scv": scv, "load": load, "ref": source}
                    for p in (0.95, 0.99):
                        value, lo, hi = ref[p]
                        q = model.quantile(p)
                        out[f"p{round(p * 100)}"] = (q, value, lo, hi)
                    yield out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    lines = [f"{'jitter':<15}{'c':>3}{'scv':>6}{'load':>6}  {'ref':<6}"
             f"{'p95 model':>10}{'ref':>9}{'err':>8}  {'p99 model':>10}{'ref':>9}{'err':>8}  in CI"]
    errs = {95: [], 99: []}
    for r in rows(args.requests, args.seed):
        cells, inside = [], []
        for p in (95, 99):
            q, value, lo, hi = r[f"p{p}"]
            err = q / value - 1
            errs[p].append(err)
            inside.append(lo <= q <= hi)
            cells.append(f"{q * 1e3:>10.3f}{value * 1e3:>9.3f}{err:>+8.1%}")
        verdict = "-" if r["ref"] == "exact" else ("yes" if all(inside) else "no")
        lines.append(f"{r['jitter']:<15}{r['c']:>3}{r['scv']:>6}{r['load']:>6}  {r['ref']:<6}"
                     + "  ".join(cells) + f"  {verdict}")
        print(lines[-1], flush=True)
    for p in (95, 99):
        f = figures(errs[p])
        lines.append(f"p{p}: median |error| {f.median:.1%}, worst {f.worst:.1%} over "
                     f"{f.count} configurations")
        print(lines[-1])
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
