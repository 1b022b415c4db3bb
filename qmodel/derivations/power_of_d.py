"""The power-of-d choices (supermarket) model: the mean-field fixed point and the sojourn time.

Sources: N. D. Vvedenskaya, R. L. Dobrushin and F. I. Karpelevich (1996), "Queueing system with
selection of the shortest of two queues: an asymptotic approach", Problems of Information
Transmission 32(1); M. Mitzenmacher (1996), "The power of two choices in randomized load
balancing", PhD thesis, UC Berkeley, and (2001) IEEE Trans. Parallel Distrib. Syst. 12(10).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, gt

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``rho``, ``tail_fraction`` (s_i), ``sojourn_sf`` and ``mean_sojourn`` (both
        infinite sums; their terms fall doubly exponentially for d >= 2).

    Examples
    --------
    >>> d = derive()
    >>> rho, dd, i = d.symbols["rho"], d.symbols["d"], d.symbols["i"]
    >>> d.explicit("tail_fraction").subs({dd: 2, i: 3})
    lambda**7/mu**7
    """
    lam, mu, t, rho = sp.symbols("lambda mu t rho", positive=True)
    d = sp.Symbol("d", integer=True, positive=True)
    i, j = (sp.Symbol(v, integer=True, nonnegative=True) for v in "ij")
    s = sp.IndexedBase("s")
    u = sp.Function("u")
    T = sp.Symbol("T")
    steps = []

    rhs = lambda k: lam * (s[k - 1] ** d - s[k] ** d) - mu * (s[k] - s[k + 1])   # noqa: E731
    steps.append(Step(
        "N servers of rate μ, arrivals at rate Nλ; each arrival samples d servers at random and "
        "joins the one with the fewest requests (FIFO). Let s_i be the fraction of servers "
        "with at least i requests, s_0 = 1. An arrival raises a queue from i - 1 to i iff all "
        "d sampled queues have at least i - 1 and not all have at least i; a service lowers "
        "one from i to i - 1. As N → ∞ the fractions follow the mean-field equations "
        "(Vvedenskaya, Dobrushin & Karpelevich 1996; Mitzenmacher 1996).",
        (eq(sp.Derivative(sp.Function("s_i")(t), t), rhs(i)), eq(s[0], 1))))

    top = 4
    telescoped = lam * (s[0] ** d - s[top] ** d) - mu * (s[1] - s[top + 1])
    check_zero(sum(rhs(k) for k in range(1, top + 1)) - telescoped, "telescoping sum")
    k = sp.Symbol("k", integer=True, positive=True)
    steps.append(Step(
        "At the fixed point every right-hand side is 0. Adding them from i on telescopes "
        f"(sympy shows it from 1 to {top}); as the tail fractions vanish, what is left is a "
        "first-order recursion.",
        (eq(sp.Sum(rhs(k), (k, 1, top)), telescoped),
         eq(lam * s[i - 1] ** d, mu * s[i]))))

    log_sol = sp.rsolve(u(i) - d * u(i - 1) - sp.log(rho), u(i), {u(0): 0})
    exponent = (d ** i - 1) / (d - 1)
    check_zero(log_sol - sp.log(rho) * exponent, "rsolve")
    check_zero(d * exponent.subs(i, i - 1) + 1 - exponent, "fixed point")
    fraction = rho ** exponent
    mm1 = sp.limit(exponent, d, 1)
    steps.append(Step(
        "With ρ = λ/μ and u_i = log s_i the recursion is linear, u_i = d u_{i-1} + log ρ with "
        "u_0 = 0; sympy's rsolve solves it. So the tails fall doubly exponentially. For d = 1 "
        "(random routing) the exponent tends to i: the M/M/1 tail ρ^i.",
        (eq(u(i), d * u(i - 1) + sp.log(rho)), eq(u(i), log_sol),
         eq(s[i], fraction), eq(sp.Limit(exponent, d, 1), mm1))))

    a = sp.IndexedBase("a")
    g = sp.IndexedBase("g")
    top = 3
    lhs = sum((a[k] - a[k + 1]) * sum(g[m] for m in range(k + 1)) for k in range(top + 1))
    rhs_sum = sum(g[m] * (a[m] - a[top + 1]) for m in range(top + 1))
    check_zero(sp.expand(lhs - rhs_sum), "exchange of sums")
    poisson = sp.exp(-mu * t) * (mu * t) ** j / sp.factorial(j)
    sojourn_sf = sp.Sum(fraction.subs(i, j) ** d * poisson, (j, 0, sp.oo))
    mean = sp.Sum(fraction.subs(i, j) ** d, (j, 0, sp.oo)) / mu
    check_zero(sp.powsimp(sp.expand_power_base(fraction.subs(i, j) ** d * rho, force=True),
                          force=True).as_base_exp()[1] - exponent.subs(i, j + 1),
               "s_j^d rho = s_{j+1}")
    steps.append(Step(
        "A tagged arrival joins a queue with exactly i requests with probability "
        "s_i^d - s_{i+1}^d (all d sampled have at least i, not all at least i + 1) and stays "
        "for i + 1 exponential services, an Erlang(i + 1, μ) time. Exchanging the two sums "
        f"(sympy checks the finite version up to {top}) leaves one series; its integral is the "
        "mean, which equals Σ_{i>=1} s_i / λ (Little's law), since ρ s_j^d = s_{j+1}.",
        (eq(Prob(gt(T, t)), sp.Sum((s[i] ** d - s[i + 1] ** d) * sp.Sum(
            poisson, (j, 0, i)), (i, 0, sp.oo))),
         eq(Prob(gt(T, t)), sojourn_sf), eq(Mean(T), mean))))

    results = (
        Result("rho", rho, lam / mu, "load per server"),
        Result("tail_fraction", s[i], fraction, "fraction of servers with at least i requests"),
        Result("sojourn_sf", Prob(gt(T, t)), sojourn_sf, "mean-field limit N → ∞"),
        Result("mean_sojourn", Mean(T), mean, "mean-field limit N → ∞"),
    )
    return Derivation(
        key="power_of_d",
        title="Power of d choices: the mean-field fixed point",
        summary="The supermarket model's fixed point s_i = ρ^((d^i - 1)/(d - 1)) for exponential "
                "servers, and the sojourn-time distribution it implies.",
        sources=("N. D. Vvedenskaya, R. L. Dobrushin and F. I. Karpelevich (1996), Queueing "
                 "system with selection of the shortest of two queues: an asymptotic approach, "
                 "Problems of Information Transmission 32(1)",
                 "M. Mitzenmacher (1996), The power of two choices in randomized load "
                 "balancing, PhD thesis, University of California, Berkeley",
                 "M. Mitzenmacher (2001), The power of two choices in randomized load "
                 "balancing, IEEE Transactions on Parallel and Distributed Systems 12(10)"),
        assumptions=("Poisson arrivals of rate Nλ to N identical servers, N → ∞ (mean field)",
                     "each arrival samples d servers uniformly, joins the shortest queue",
                     "exponential service of rate μ, FIFO, no batching",
                     "stability: ρ = λ/μ < 1"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "rho": rho, "d": d, "i": i, "j": j, "t": t},
        implemented_by="not implemented in qmodel.theory yet (issue 4); the simulator "
                       "implements the router (finite N is worse than the mean field)")
