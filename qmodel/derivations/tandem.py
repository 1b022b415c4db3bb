"""The deterministic tandem pipeline: the sojourn time is that of the bottleneck stage alone
plus the other stages' service times, customer by customer, for any arrival times.

Sources: H. D. Friedman (1965), "Reduction methods for tandem queuing systems", Operations
Research 13(1); B. Avi-Itzhak (1965), "A sequence of service stations with arbitrary input and
regular service times", Management Science 11(5).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product

import sympy as sp

from . import md1
from .core import Derivation, MaxOver, Prob, Result, Step, eq, le

__all__ = ["derive"]


def _maxplus_departures(arrivals, times):
    """Departure times of the last customer from the last stage, as a max-plus polynomial.

    A max of sums is held as the set of its terms: max(A, B) is A | B and X + c adds c to
    every term. The recursion is d(n, j) = max(d(n, j-1), d(n-1, j)) + D_j, d(n, 0) = a_n.
    """
    m = len(times)
    d = {}
    for n, a in enumerate(arrivals):
        d[n, 0] = {a}
        for j in range(1, m + 1):
            terms = d[n, j - 1] | (d[n - 1, j] if n else set())
            d[n, j] = {sp.expand(x + times[j - 1]) for x in terms}
    return d[len(arrivals) - 1, m]


def _path_weights(arrivals, times):
    """The same max as the weights of monotone lattice paths: a_k + sum D_j + extra steps."""
    n, m = len(arrivals), len(times)
    out = set()
    for k in range(n):
        extra = n - 1 - k                      # customer-index steps, each taken at a stage
        for split in product(range(extra + 1), repeat=m):
            if sum(split) == extra:
                out.add(sp.expand(arrivals[k] + sum((1 + e) * x for e, x in zip(split,
                                                                                times))))
    return out


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``departure`` (closed form of the last departure), ``sojourn_identity`` and
        ``sojourn_cdf`` (Poisson arrivals, in terms of the bottleneck time ``D^*`` and the
        total ``D_tot`` of all stage times; ``symbols["Dstar"]``, ``symbols["Dtot"]``).

    Examples
    --------
    >>> d = derive()
    >>> lam, Ds, Dt, t = (d.symbols[k] for k in ("lam", "Dstar", "Dtot", "t"))
    >>> w = d.result("sojourn_cdf").subs({lam: sp.Rational(4, 5), Ds: 1, Dt: 2, t: 4})
    >>> round(float(w.doit()), 6)          # the M/D/1 waiting cdf at 2: 0.634520
    0.63452
    """
    lam, t = sp.symbols("lambda t", positive=True)
    Dstar, Dtot = sp.symbols("D^* D_tot", positive=True)
    n, k = sp.Symbol("n", integer=True, positive=True), sp.Symbol("k", integer=True,
                                                                   positive=True)
    j, m = sp.symbols("j m", integer=True, positive=True)
    a, dep, D = sp.IndexedBase("a"), sp.Function("d"), sp.IndexedBase("D")
    T, Tstar = sp.symbols("T_n T_n^*")
    steps = []

    steps.append(Step(
        "Stations 1..m in series, each one FIFO server with a constant service time D_j and "
        "an unlimited buffer; customer n arrives at a_n (any times, in order). Customer n "
        "starts at station j when it has left station j - 1 and customer n - 1 has left "
        "station j.",
        (eq(dep(n, j), sp.Max(dep(n, j - 1), dep(n - 1, j)) + D[j]), eq(dep(n, 0), a[n]))))

    arrivals3 = [a[i] for i in (1, 2, 3)]
    times2 = [D[1], D[2]]
    terms = _maxplus_departures(arrivals3, times2)
    if terms != _path_weights(arrivals3, times2):
        raise ArithmeticError("derivation check failed: max-plus unfolding, 3 x 2")
    for n_cust, n_stat in ((4, 3), (3, 4)):
        arr = [a[i] for i in range(1, n_cust + 1)]
        tim = [D[i] for i in range(1, n_stat + 1)]
        if _maxplus_departures(arr, tim) != _path_weights(arr, tim):
            raise ArithmeticError(f"derivation check failed: unfolding {n_cust} x {n_stat}")
    small = _maxplus_departures([a[1], a[2]], times2)
    shown = sp.Max(*sorted(small, key=sp.default_sort_key), evaluate=False)
    steps.append(Step(
        "Unfold the recursion: a max of sums is a max over paths. sympy expands it (shown for "
        "2 customers and 2 stations) and checks, for 3 x 2, 4 x 3 and 3 x 4, that its terms are "
        "exactly a_k + Σ_j (1 + e_j) D_j over k <= n and e_j >= 0 with Σ e_j = n - k: each "
        "customer from k to n passes every station once, and the n - k extra steps are taken "
        "at some stations.",
        (eq(dep(2, 2), shown),)))

    closed = eq(dep(n, m), MaxOver(a[k] + (n - k) * Dstar, k, n) + sp.Sum(D[j], (j, 1, m)))
    single = eq(sp.Symbol("d_n^*"), MaxOver(a[k] + (n - k + 1) * Dstar, k, n))
    steps.append(Step(
        "Each extra step weighs at most the bottleneck time D* = max_j D_j, and putting all "
        "of them at the bottleneck attains it. The same unfolding with one station of time "
        "D* gives the departures d*_n of a single FIFO queue. Subtracting, the last "
        "departure of the tandem is that of the single bottleneck queue plus the other "
        "stations' times.",
        (closed, single, eq(dep(n, m) - sp.Symbol("d_n^*"), sp.Sum(D[j], (j, 1, m)) - Dstar))))

    identity = eq(T, Tstar + Dtot - Dstar)
    steps.append(Step(
        "So, customer by customer and for any arrival times, the sojourn T_n in the tandem is "
        "the sojourn T*_n in a single FIFO queue with service time D* fed by the same "
        "arrivals, plus the other stations' times (D_tot = Σ_j D_j); it does not depend on the "
        "order of the stations (Friedman 1965; Avi-Itzhak 1965).",
        (identity,)))

    md = md1.derive()
    wait = md.explicit("waiting_cdf").subs({md.symbols["lam"]: lam, md.symbols["D"]: Dstar})
    sojourn = wait.subs(md.symbols["t"], t - Dtot)
    steps.append(Step(
        "With Poisson arrivals of rate λ the single queue is M/D/1 with D = D*; its sojourn "
        "is its wait plus D*, so T is the M/D/1 wait plus D_tot, with Erlang's formula (see "
        "the M/D/1 derivation). Stable iff λD* < 1.",
        (eq(Prob(le(sp.Symbol("T"), t)), sojourn),)))

    results = (
        Result("departure", None, closed, "any arrival times"),
        Result("sojourn_identity", None, identity, "customer by customer"),
        Result("sojourn_cdf", Prob(le(sp.Symbol("T"), t)), sojourn,
               "Poisson arrivals, t >= D_tot"),
    )
    return Derivation(
        key="tandem",
        title="The deterministic tandem pipeline",
        summary="Stages in series with constant service times: the sojourn time is the "
                "bottleneck stage's queueing plus the sum of the stage times.",
        sources=("H. D. Friedman (1965), Reduction methods for tandem queuing systems, "
                 "Operations Research 13(1)",
                 "B. Avi-Itzhak (1965), A sequence of service stations with arbitrary input "
                 "and regular service times, Management Science 11(5)"),
        assumptions=("stations in series, each a single FIFO server with a constant service "
                     "time D_j and an unlimited buffer (no blocking)",
                     "any arrival process for the identity; Poisson of rate λ for the cdf, "
                     "stable iff λ max_j D_j < 1",
                     "no batching at the stations"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "t": t, "Dstar": Dstar, "Dtot": Dtot},
        implemented_by="qmodel.simulate on an Ensemble of deterministic stages reproduces "
                       "it (tests/test_ensemble_sim.py); qmodel.predict approximates it "
                       "(independent stage sojourns). The published check is "
                       "D = (0.5, 1.0, 0.7), λ = 0.8: p99 = 12.5559")
