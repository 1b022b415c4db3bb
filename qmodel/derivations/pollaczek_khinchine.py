"""The Pollaczek-Khinchine transform and mean of the M/G/1 waiting time.

Sources: F. Pollaczek (1930), "Über eine Aufgabe der Wahrscheinlichkeitstheorie",
Math. Zeitschrift 32; A. Y. Khinchine (1932), Mat. Sbornik 39; D. G. Kendall (1953), "Stochastic
processes occurring in the theory of queues and their analysis by the method of the imbedded
Markov chain", Ann. Math. Statist. 24; L. Kleinrock (1975), "Queueing Systems" vol. I, ch. 5.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Expect, Mean, Prob, Result, Step, check_zero, eq, gt

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``rho``, ``arrivals_pgf``, ``queue_pgf``, ``transform`` (W*(s)),
        ``geometric_sum`` and ``residual_transform`` (the same W*(s) as a geometric sum),
        ``waiting_mean``, ``sojourn_mean`` and ``mm1_waiting_sf``.

    Examples
    --------
    >>> d = derive()
    >>> lam, m1, m2 = d.symbols["lam"], d.symbols["m1"], d.symbols["m2"]
    >>> d.explicit("waiting_mean").subs({lam: 0.8, m1: 1, m2: 1})     # M/D/1, rho 0.8
    2.00000000000000
    """
    lam, mu, t, x = sp.symbols("lambda mu t x", positive=True)
    s, z, u = sp.symbols("s z u")
    rho, pi0 = sp.symbols("rho pi_0", positive=True)
    k = sp.Symbol("k", integer=True, nonnegative=True)
    m1, m2, m3 = Expect("S"), Expect("S^2"), Expect("S^3")
    Sst, A, Pi, T, W = (sp.Function(name) for name in ("S^*", "A", "Pi", "T^*", "W^*"))
    Pis, Wq = sp.Symbol("Pi"), sp.Symbol("W_q")
    steps = []

    # --- arrivals during one service ------------------------------------------------------------
    poisson_pgf = sp.simplify(sp.summation(z ** k * sp.exp(-lam * x) * (lam * x) ** k
                                           / sp.factorial(k), (k, 0, sp.oo)))
    check_zero(poisson_pgf - sp.exp(-lam * (1 - z) * x), "Poisson pgf")
    arrivals = Sst(lam * (1 - z))
    steps.append(Step(
        "Kendall's embedded chain: Nₙ, the number left behind by the n-th departure, obeys "
        "Nₙ₊₁ = Nₙ - 1{Nₙ > 0} + Aₙ₊₁, where Aₙ₊₁ counts the Poisson arrivals during "
        "the (n+1)-th service S. Given S = x the count is Poisson(λx), whose generating "
        "function sympy sums; averaging over S gives the service transform S*(s) = E[exp(-sS)] "
        "at s = λ(1 - z).",
        (eq(sp.Sum(z ** k * sp.exp(-lam * x) * (lam * x) ** k / sp.factorial(k),
                      (k, 0, sp.oo)), poisson_pgf),
         eq(A(z), arrivals))))

    # --- the stationary pgf -------------------------------------------------------------------
    balance = eq(Pis, pi0 * A(z) + (Pis - pi0) * A(z) / z)
    queue = sp.factor(sp.solve(balance, Pis)[0])
    steps.append(Step(
        "Take generating functions of the recursion in equilibrium (Π(z) = E[z^N]): the term "
        "N - 1{N > 0} contributes π₀ + (Π(z) - π₀)/z, independent of A. sympy solves for Π.",
        (balance.subs(Pis, Pi(z)), eq(Pi(z), queue))))

    # --- pi_0 from Pi(1) = 1 ----------------------------------------------------------------
    moments = 1 - m1 * u + m2 * u ** 2 / 2 - m3 * u ** 3 / 6
    near_one = queue.subs(A(z), moments.subs(u, lam * (1 - z)))
    limit = sp.limit(near_one, z, 1)
    p0 = sp.solve(eq(limit, 1), pi0)[0]
    check_zero(p0 - (1 - lam * m1), "pi_0 = 1 - rho")
    steps.append(Step(
        "Π(1) = 1 fixes π₀. At z = 1 numerator and denominator vanish; sympy takes the limit "
        "with the moment expansion S*(u) = 1 - E[S] u + E[S²] u²/2 - ... . So π₀ = 1 - ρ with "
        "ρ = λE[S], and the chain is positive recurrent iff ρ < 1.",
        (eq(sp.Limit(Pi(z), z, 1), limit), eq(pi0, p0))))

    # --- the sojourn and waiting-time transforms ----------------------------------------------
    queue_1 = queue.subs({pi0: 1 - rho, A(z): arrivals})
    sojourn = sp.simplify(queue_1.subs(z, 1 - s / lam))
    wait = sp.simplify(sojourn / Sst(s))
    target = (1 - rho) * s / (s - lam + lam * Sst(s))
    check_zero(wait - target, "Pollaczek-Khinchine form")
    steps.append(Step(
        "FIFO: the customers a departing customer leaves behind are exactly those that arrived "
        "during its sojourn time T, so Π(z) = T*(λ(1 - z)). Substituting z = 1 - s/λ gives "
        "T*(s); the sojourn is the wait plus the customer's own, independent, service, so "
        "W*(s) = T*(s)/S*(s): the Pollaczek-Khinchine transform.",
        (eq(T(s), sojourn), eq(W(s), target))))

    # --- the mean ---------------------------------------------------------------------------
    expanded = target.subs({Sst(s): moments.subs(u, s)}).subs(rho, lam * m1)
    series = sp.series(expanded, s, 0, 2).removeO()
    series = sp.simplify(series.coeff(s, 0)) + sp.factor(series.coeff(s, 1)) * s
    wait_mean = sp.factor(-series.coeff(s, 1))
    wait_mean_rho = lam * m2 / (2 * (1 - rho))
    check_zero(wait_mean - wait_mean_rho.subs(rho, lam * m1), "P-K mean")
    steps.append(Step(
        "Moments come from the expansion at s = 0: E[W_q] = -d/ds W*(s) at 0. sympy expands W*(s) "
        "with the moment series of S*(s).",
        (eq(W(s), series + sp.Order(s ** 2)), eq(Mean(Wq), wait_mean_rho))))

    # --- the geometric-sum form (what the lattice computes) ----------------------------------
    Se = sp.Function("S_e^*")
    residual = (1 - Sst(s)) / (s * m1)
    geometric = (1 - rho) / (1 - rho * Se(s))
    check_zero(sp.simplify(geometric.subs(Se(s), residual).subs(rho, lam * m1)
                           - target.subs(rho, lam * m1)), "geometric-sum form")
    steps.append(Step(
        "Divide numerator and denominator by s: with the equilibrium residual service time "
        "S_e, density P(S > x)/E[S] and transform S_e*(s) = (1 - S*(s))/(s E[S]), the "
        "transform is that of a geometric sum, W_q = Y₁ + ... + Y_N with P(N = n) = "
        "(1 - ρ)ρⁿ and Yᵢ i.i.d. ~ S_e (Beneš's form; Asmussen 2003, VIII.5). sympy checks "
        "the two forms agree. On a lattice this is one FFT: (1 - ρ)/(1 - ρ ŷ), ŷ the discrete "
        "Fourier transform of S_e's lattice law.",
        (eq(Se(s), residual), eq(W(s), geometric))))

    # --- exponential service ------------------------------------------------------------------
    mm1 = sp.apart(sp.simplify(target.subs(Sst(s), mu / (mu + s)).subs(rho, lam / mu)), s)
    tail = sp.inverse_laplace_transform(sp.simplify((1 - mm1) / s), s, t)
    mm1_sf = sp.simplify(tail.subs(sp.Heaviside(t), 1))
    check_zero(mm1_sf - lam / mu * sp.exp(-(mu - lam) * t), "M/M/1 waiting tail")
    steps.append(Step(
        "Check with exponential service, S*(s) = μ/(μ + s): W*(s) splits into an atom 1 - ρ at "
        "zero and an exponential part; sympy inverts (1 - W*(s))/s, the transform of "
        "P(W_q > t), and recovers the M/M/1 waiting time.",
        (eq(W(s), mm1), eq(Prob(gt(Wq, t)), mm1_sf))))

    results = (
        Result("rho", rho, lam * m1, "utilization"),
        Result("arrivals_pgf", A(z), arrivals, "arrivals during one service"),
        Result("queue_pgf", Pi(z), queue.subs(pi0, 1 - rho), "number left behind by a "
                                                             "departure (= seen by an arrival)"),
        Result("transform", W(s), target, "waiting-time transform, inverted numerically by "
                                          "mg1"),
        Result("geometric_sum", W(s), geometric, "the same transform as a geometric sum of "
                                                 "equilibrium residual service times S_e*(s)"),
        Result("residual_transform", Se(s), residual, "transform of S_e, density "
                                                      "P(S > x)/E[S]"),
        Result("waiting_mean", Mean(Wq), wait_mean_rho, ""),
        Result("sojourn_mean", Mean(sp.Symbol("T")), m1 + wait_mean_rho, ""),
        Result("mm1_waiting_sf", Prob(gt(Wq, t)), mm1_sf, "exponential service"),
    )
    return Derivation(
        key="pollaczek_khinchine",
        title="The Pollaczek-Khinchine transform and mean (M/G/1)",
        summary="The waiting-time transform of the FIFO M/G/1 queue from Kendall's embedded "
                "chain, and its mean.",
        sources=("F. Pollaczek (1930), Über eine Aufgabe der Wahrscheinlichkeitstheorie, "
                 "Mathematische Zeitschrift 32",
                 "A. Y. Khinchine (1932), Mathematical theory of a stationary queue, "
                 "Matematicheskii Sbornik 39",
                 "D. G. Kendall (1953), Stochastic processes occurring in the theory of queues "
                 "and their analysis by the method of the imbedded Markov chain, Annals of "
                 "Mathematical Statistics 24",
                 "L. Kleinrock (1975), Queueing Systems, vol. I: Theory, Wiley, ch. 5",
                 "S. Asmussen (2003), Applied Probability and Queues, 2nd ed., Springer, "
                 "ch. VIII.5 (the geometric-sum form)"),
        assumptions=("Poisson arrivals of rate λ", "one server; i.i.d. service times S with "
                     "transform S*(s) and finite second moment, independent of the arrivals",
                     "FIFO, unlimited queue", "stability: ρ = λE[S] < 1"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "s": s, "z": z, "t": t, "rho": rho, "m1": m1, "m2": m2,
                 "S_star": Sst, "Se_star": Se},
        implemented_by="qmodel.theory.classical.mg1 (transform inverted by Euler summation; "
                       "waiting_mean) and qmodel.theory.lindley._pollaczek_khinchine_wait (the "
                       "geometric sum on a lattice, for gig1 and gigc under Poisson arrivals)")
