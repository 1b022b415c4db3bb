"""Erlang C and the sojourn-time distribution of the FIFO M/M/c queue.

Sources: A. K. Erlang (1917), "Solution of some problems in the theory of probabilities of
significance in automatic telephone exchanges", Elektroteknikeren 13; L. Kleinrock (1975),
"Queueing Systems" vol. I, sec. 3.5.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, geometric_sum, gt, le

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached: sympy takes a moment).

    Returns
    -------
    Derivation
        Results ``erlang_c`` (C in terms of c, a and rho = a/c), ``rho``, ``load`` (a),
        ``decay`` (gamma),
        ``waiting_sf``,
        ``waiting_mean`` and ``sojourn_cdf``.

    Examples
    --------
    >>> d = derive()
    >>> c, a, rho = d.symbols["c"], d.symbols["a"], d.symbols["rho"]
    >>> erlang = d.result("erlang_c").subs(rho, a / c)
    >>> round(float(erlang.subs({c: 1, a: 0.8}).doit()), 12)         # C(1, a) = rho
    0.8
    """
    lam, mu, t, s, x = sp.symbols("lambda mu t s x", positive=True)
    a, rho = sp.symbols("a rho", positive=True)
    c = sp.Symbol("c", integer=True, positive=True)
    n, j, k = (sp.Symbol(v, integer=True, nonnegative=True) for v in "njk")
    p0, C, gam = sp.Symbol("p_0", positive=True), sp.Symbol("C"), sp.Symbol("gamma",
                                                                             positive=True)
    Wq, T = sp.Symbol("W_q"), sp.Symbol("T")              # labels only
    steps = []

    # --- the birth-death chain ---------------------------------------------------------------
    below = p0 * a ** n / sp.factorial(n)                       # n <= c
    above = p0 * a ** c / sp.factorial(c) * rho ** (n - c)      # n >= c
    p = sp.Function("p")
    # cut between n and n+1: lambda p_n = min(n+1, c) mu p_{n+1}
    check_zero((lam * below - (n + 1) * mu * below.subs(n, n + 1)).subs(a, lam / mu),
               "cut equations below c")
    check_zero((lam * above - c * mu * above.subs(n, n + 1)).subs(rho, lam / (c * mu)),
               "cut equations from c on")
    steps.append(Step(
        "The number in system N is a birth-death process: up at rate λ, down at rate "
        "min(n, c) μ. Balancing the flow across the cut between n and n + 1 gives the "
        "stationary law, with the offered load a = λ/μ and ρ = a/c (sympy checks that both "
        "forms satisfy the cut equations).",
        (eq(lam * p(n), sp.Min(n + 1, c) * mu * p(n + 1)),
         eq(p(n), sp.Piecewise((below, n <= c), (above, True))))))

    tail_sum, cond = geometric_sum(rho, j)
    norm = eq(1 / p0, sp.Sum(a ** k / sp.factorial(k), (k, 0, c - 1))
                 + a ** c / sp.factorial(c) * tail_sum)
    steps.append(Step(
        "Normalise. The states n >= c form a geometric series in ρ, which sympy sums; it "
        "converges (the queue is stable) exactly when ρ < 1.",
        (eq(sp.Sum(rho ** j, (j, 0, sp.oo)), tail_sum), cond, norm)))

    erlang = (a ** c / (sp.factorial(c) * (1 - rho))) / (
        sp.Sum(a ** k / sp.factorial(k), (k, 0, c - 1)) + a ** c / (sp.factorial(c) * (1 - rho)))
    p_wait = p0 * a ** c / sp.factorial(c) * tail_sum          # sum of p_n over n >= c
    check_zero(p_wait.subs(p0, 1 / norm.rhs) - erlang, "Erlang C is the mass of n >= c")
    steps.append(Step(
        "An arrival waits iff it finds all c servers busy. By PASTA (Poisson arrivals see time "
        "averages) that probability is the stationary mass of n >= c: Erlang's C formula.",
        (eq(C, erlang),)))

    # --- the conditional waiting time ----------------------------------------------------------
    r = rho * c * mu / (c * mu + s)
    ratio_sum, _ = geometric_sum(r, j)
    lst = sp.simplify((1 - rho) * c * mu / (c * mu + s) * ratio_sum)
    lst = sp.simplify(lst.subs(rho, lam / (c * mu)))
    check_zero(lst - (gam / (gam + s)).subs(gam, c * mu - lam), "conditional wait is exponential")
    density = sp.inverse_laplace_transform(gam / (gam + s), s, x)
    steps.append(Step(
        "Given that it waits, the arrival finds j = N - c customers in the queue, "
        "geometrically distributed: P(N - c = j | N >= c) = (1 - ρ) ρ^j. With all servers "
        "busy, departures form a Poisson process of rate cμ, so it waits for j + 1 of them, "
        "an Erlang(j + 1, cμ) time. The Laplace-Stieltjes transform of the mixture, summed by "
        "sympy, is that of an exponential law with rate γ = cμ - λ; sympy inverts it.",
        (eq(Mean(sp.exp(-s * Wq), gt(Wq, 0)),
               sp.Sum((1 - rho) * rho ** j * (c * mu / (c * mu + s)) ** (j + 1), (j, 0, sp.oo))),
         eq(Mean(sp.exp(-s * Wq), gt(Wq, 0)), lst),
         eq(sp.Function("f")(x), density))))

    wait_sf = C * sp.exp(-gam * t)
    wait_mean = sp.integrate(wait_sf, (t, 0, sp.oo))
    steps.append(Step(
        "So the waiting time has an atom 1 - C at zero and an exponential tail; its mean is the "
        "integral of the survival function.",
        (eq(Prob(gt(Wq, t)), wait_sf), eq(Mean(Wq), wait_mean))))

    # --- the sojourn time ---------------------------------------------------------------------
    conv = sp.integrate(gam * sp.exp(-gam * x) * (1 - sp.exp(-mu * (t - x))), (x, 0, t),
                        conds="none")
    conv = sp.simplify(conv)
    sojourn = sp.simplify((1 - C) * (1 - sp.exp(-mu * t)) + C * conv)
    closed = (1 - (1 - C) * sp.exp(-mu * t)
              - C * (mu * sp.exp(-gam * t) - gam * sp.exp(-mu * t)) / (mu - gam))
    check_zero(sojourn - closed, "sojourn cdf, tidy form")
    at_equal = sp.simplify(sp.limit(closed, gam, mu))
    steps.append(Step(
        "The sojourn time adds the customer's own service X ~ Exp(μ), independent of its wait "
        "(FIFO: the wait depends only on those ahead). sympy convolves the exponential part "
        "of the wait with X. The expression has a removable singularity at γ = μ; its limit "
        "there is shown second.",
        (eq(Prob(le(T, t)),
               (1 - C) * (1 - sp.exp(-mu * t))
               + C * sp.Integral(gam * sp.exp(-gam * x) * (1 - sp.exp(-mu * (t - x))),
                                 (x, 0, t))),
         eq(Prob(le(T, t)), closed),
         eq(sp.Limit(Prob(le(T, t)), gam, mu), sp.expand(at_equal)))))

    results = (
        Result("erlang_c", C, erlang, "probability of waiting, P(W_q > 0)"),
        Result("rho", rho, a / c, "utilization"),
        Result("load", a, lam / mu, "offered load (Erlangs)"),
        Result("decay", gam, c * mu - lam, "decay rate of the waiting-time tail"),
        Result("waiting_sf", Prob(gt(Wq, t)), wait_sf, "t >= 0"),
        Result("waiting_mean", Mean(Wq), wait_mean, ""),
        Result("sojourn_cdf", Prob(le(T, t)), closed, "t >= 0, γ ≠ μ"),
    )
    return Derivation(
        key="mmc",
        title="Erlang C and the M/M/c sojourn time",
        summary="The probability of waiting in M/M/c and the exact sojourn-time distribution "
                "of a FIFO customer.",
        sources=("A. K. Erlang (1917), Solution of some problems in the theory of "
                 "probabilities of significance in automatic telephone exchanges, "
                 "Elektroteknikeren 13",
                 "L. Kleinrock (1975), Queueing Systems, vol. I: Theory, Wiley, sec. 3.5"),
        assumptions=("Poisson arrivals of rate λ", "c identical servers, exponential service "
                     "times of rate μ, independent of everything else",
                     "one FIFO queue of unlimited size", "stability: ρ = λ/(cμ) < 1"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "c": c, "a": a, "rho": rho, "t": t, "C": C,
                 "gamma": gam},
        implemented_by="qmodel.theory.classical.mmc (Erlang C by the Erlang B recursion, "
                       "erlang_c)")
