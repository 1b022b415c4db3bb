"""Kingman's bound and heavy-traffic approximation of the GI/G/1 mean wait, and Allen-Cunneen.

Sources: J. F. C. Kingman (1961), "The single server queue in heavy traffic", Proc. Cambridge
Phil. Soc. 57; J. F. C. Kingman (1962), "Some inequalities for the queue GI/G/1", Biometrika 49;
A. O. Allen (1990), "Probability, Statistics, and Queueing Theory", 2nd ed., Academic Press.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import mmc, pollaczek_khinchine
from .core import Derivation, Expect, Mean, Result, Step, check_zero, eq

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``rho``, ``lindley_mean`` (exact, in terms of the idle-period moments),
        ``kingman_bound``, ``kingman``, ``erlang_c`` and ``allen_cunneen``.

    Examples
    --------
    >>> d = derive()
    >>> v = {d.symbols[k]: x for k, x in (("lam", 0.8), ("m1", 1), ("ca2", 1), ("cs2", 0))}
    >>> d.explicit("kingman").subs(v)                     # M/D/1: the exact P-K mean
    2.00000000000000
    """
    lam, rho, mu = sp.symbols("lambda rho mu", positive=True)
    ca2, cs2 = sp.symbols("c_a^2 c_s^2", nonnegative=True)
    var_a, var_s = sp.symbols("sigma_A^2 sigma_S^2", nonnegative=True)
    c = sp.Symbol("c", integer=True, positive=True)
    m1 = Expect("S")
    EW, EW2, EU2, EI, EI2 = (Expect(v) for v in ("W", "W^2", "U^2", "I", "I^2"))
    EU = Expect("U", real=True)                   # negative when the queue is stable
    W, Wn, U, X, I = sp.symbols("W W' U X I")
    C = sp.Symbol("C")
    steps = []

    steps.append(Step(
        "Lindley's recursion: the wait of the next customer is W' = max(W + U, 0) with "
        "U = S - A (a service time minus the next interarrival time), U independent of W. "
        "Split X = W + U into its positive part W' and its negative part I = max(-X, 0) (the "
        "idle time the next customer's arrival ends): X = W' - I and W'·I = 0.",
        (eq(Wn, sp.Max(W + U, 0)), eq(X, Wn - I), eq(Wn * I, 0))))

    mean_eq = eq(EW, EW + EU + EI)                 # E[W'] = E[X] + E[I], stationarity
    idle_mean = sp.solve(mean_eq, EI)[0]
    steps.append(Step(
        "In equilibrium W' has the law of W. Taking means of W' = X + I gives the mean idle "
        "time per customer, -E[U] = 1/λ - E[S] = (1 - ρ)/λ.",
        (mean_eq, eq(EI, idle_mean))))

    square = eq(EW2 + EI2, EW2 + 2 * EW * EU + EU2)
    lindley = sp.solve(square, EW)[0]
    steps.append(Step(
        "Square W' - I = X and take means; the cross term vanishes (W'·I = 0) and W, U are "
        "independent. The second moments of W cancel, and sympy solves for E[W]: an exact "
        "expression, but through the unknown E[I²].",
        (square, eq(EW, lindley))))

    var_u = var_s + var_a
    bound = lindley.subs(EU2, var_u + EU ** 2).subs(EI2, EU ** 2)
    bound = sp.simplify(bound.subs(EU, m1 - 1 / lam))
    bound_rho = lam * (var_a + var_s) / (2 * (1 - rho))
    check_zero(bound - bound_rho.subs(rho, lam * m1), "Kingman's bound")
    steps.append(Step(
        "E[U²] = Var A + Var S + E[U]², and E[I²] >= E[I]² = E[U]² (Jensen). Dropping the "
        "difference gives Kingman's upper bound (1962).",
        (eq(EU2, var_u + EU ** 2), sp.LessThan(EW, bound_rho, evaluate=False))))

    scv = {var_a: ca2 / lam ** 2, var_s: cs2 * m1 ** 2}
    bound_scv = (ca2 / lam + lam * cs2 * m1 ** 2) / (2 * (1 - rho))
    check_zero(bound_scv - bound_rho.subs(scv), "bound in SCVs")
    heavy = sp.factor(sp.limit(((1 - rho) * bound_scv).subs(lam, rho / m1), rho, 1, dir="-"))
    steps.append(Step(
        "In squared coefficients of variation, Var A = c_a²/λ² and Var S = c_s² E[S]². As "
        "ρ → 1 the bound times (1 - ρ) tends to E[S](c_a² + c_s²)/2: in heavy traffic the "
        "bound is tight (Kingman 1961).",
        (eq(sp.Symbol("bound"), bound_scv),
         eq(sp.Limit((1 - rho) * sp.Symbol("bound"), rho, 1, dir="-"), heavy))))

    kingman = rho / (1 - rho) * (ca2 + cs2) / 2 * m1
    ratio = sp.limit(sp.simplify((kingman / bound_scv).subs(lam, rho / m1)), rho, 1, dir="-")
    pk_mean = pollaczek_khinchine.derive()
    pk_wait = pk_mean.result("waiting_mean").subs(
        {pk_mean.symbols["lam"]: lam, pk_mean.symbols["rho"]: rho,
         pk_mean.symbols["m2"]: m1 ** 2 * (1 + cs2)}).subs(lam, rho / m1)
    check_zero(kingman.subs(ca2, 1) - pk_wait, "Kingman is exact for M/G/1")
    if ratio != 1:
        raise ArithmeticError("derivation check failed: Kingman's heavy-traffic limit")
    steps.append(Step(
        "Kingman's approximation keeps that heavy-traffic term with the factor ρ in front "
        "(equivalently, 1/λ = E[S]/ρ replaced by E[S]), so that it vanishes as ρ → 0. Its ratio "
        "to the bound tends to 1 as ρ → 1, and for Poisson arrivals (c_a² = 1) it is exactly "
        "the Pollaczek-Khinchine mean λE[S²]/(2(1 - ρ)) with E[S²] = E[S]²(1 + c_s²).",
        (eq(Mean(sp.Symbol("W_q")), kingman),
         eq(sp.Limit(Mean(sp.Symbol("W_q")) / sp.Symbol("bound"), rho, 1, dir="-"), ratio),
         eq(kingman.subs(ca2, 1), lam * Expect("S^2") / (2 * (1 - rho))))))

    mm = mmc.derive()
    a_sym, rho_mm = mm.symbols["a"], mm.symbols["rho"]
    erlang = mm.result("erlang_c").subs(rho_mm, a_sym / c).subs(mm.symbols["c"], c)
    erlang = erlang.subs(a_sym, lam * m1)
    allen = C / (c / m1 - lam) * (ca2 + cs2) / 2
    check_zero((allen.subs(C, erlang).subs(c, 1).doit() - kingman.subs(rho, lam * m1)),
               "Allen-Cunneen with one server is Kingman")
    steps.append(Step(
        "Allen-Cunneen (GI/G/c) is the same idea for c servers, a heuristic rather than a "
        "derivation: the exact M/M/c mean wait C/(cμ - λ) (see the M/M/c derivation, with "
        "μ = 1/E[S] and a = λE[S]) times the variability factor (c_a² + c_s²)/2, which is 1 "
        "for M/M/c. With one server C = ρ and it is Kingman's formula (sympy checks).",
        (eq(Mean(sp.Symbol("W_q")), allen), eq(C, erlang))))

    results = (
        Result("rho", rho, lam * m1, "utilization of the single server"),
        Result("lindley_mean", EW, lindley, "exact; E[I²] is the unknown second moment of the "
                                            "idle time"),
        Result("kingman_bound", sp.Symbol("bound"), bound_scv, "upper bound on E[W_q]"),
        Result("kingman", Mean(sp.Symbol("W_q")), kingman, "approximation; exact for M/G/1"),
        Result("erlang_c", C, erlang, "Erlang C with a = λE[S]"),
        Result("allen_cunneen", Mean(sp.Symbol("W_q")), allen, "approximation; exact for "
                                                               "M/M/c"),
    )
    return Derivation(
        key="kingman",
        title="Kingman's approximation and Allen-Cunneen",
        summary="Kingman's bound on the GI/G/1 mean wait from Lindley's recursion, its "
                "heavy-traffic approximation, and the Allen-Cunneen GI/G/c analogue.",
        sources=("J. F. C. Kingman (1961), The single server queue in heavy traffic, "
                 "Proceedings of the Cambridge Philosophical Society 57",
                 "J. F. C. Kingman (1962), Some inequalities for the queue GI/G/1, "
                 "Biometrika 49",
                 "A. O. Allen (1990), Probability, Statistics, and Queueing Theory, 2nd ed., "
                 "Academic Press"),
        assumptions=("renewal arrivals (i.i.d. interarrival times A, mean 1/λ, SCV c_a²)",
                     "i.i.d. service times S independent of the arrivals (SCV c_s²)",
                     "FIFO, unlimited queue, ρ < 1, finite second moments",
                     "Kingman: one server; Allen-Cunneen: c servers (a heuristic)"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "rho": rho, "m1": m1, "ca2": ca2, "cs2": cs2, "c": c, "C": C,
                 "mu": mu},
        implemented_by="qmodel.theory.baselines.kingman_wait, allen_cunneen_wait")
