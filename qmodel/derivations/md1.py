"""Erlang's formula for the M/D/1 waiting-time distribution.

Sources: A. K. Erlang (1909), "The theory of probabilities and telephone conversations", Nyt
Tidsskrift for Matematik B 20; G. J. Franx (2001), "A simple solution for the M/D/c waiting
time distribution", Oper. Res. Letters 29(5); V. B. Iversen and L. Staalhagen (1999), "Waiting
time distribution in M/D/1 queueing systems", Electronics Letters 35(25).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import pollaczek_khinchine
from .core import Derivation, Prob, Result, Step, check_zero, eq, le

__all__ = ["derive"]

TERMS_CHECKED = 5      # series coefficients compared with the general term


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``rho``, ``waiting_cdf`` (Erlang's finite sum), ``first_interval`` (the cdf on
        [0, D)) and ``sojourn_cdf``.

    Examples
    --------
    >>> d = derive()
    >>> lam, D, t = d.symbols["lam"], d.symbols["D"], d.symbols["t"]
    >>> w = d.explicit("waiting_cdf").subs({lam: sp.Rational(4, 5), D: 1, t: 2})
    >>> round(float(w.doit()), 6)                  # published: 0.634520
    0.63452
    """
    pk = pollaczek_khinchine.derive()
    lam, D, t, rho = sp.symbols("lambda D t rho", positive=True)
    s, x = sp.symbols("s x")
    k = sp.Symbol("k", integer=True, nonnegative=True)
    Sst, W = pk.symbols["S_star"], sp.Function("W")
    Wq = sp.Symbol("W_q")
    steps = []

    transform = pk.result("transform").subs(pk.symbols["lam"], lam).subs(pk.symbols["s"], s)
    transform = transform.subs(pk.symbols["rho"], rho).subs(Sst(s), sp.exp(-s * D))
    cdf_transform = (1 - rho) / (s - lam + lam * sp.exp(-s * D))
    check_zero(transform / s - cdf_transform, "transform of the cdf")
    steps.append(Step(
        "Start from the Pollaczek-Khinchine transform with constant service, S*(s) = exp(-sD). "
        "The cdf W(t) = P(W_q <= t) has the Laplace transform W*(s)/s.",
        (eq(sp.Function("W^*")(s), transform),
         eq(sp.LaplaceTransform(W(t), t, s), cdf_transform))))

    general = (-lam) ** k * x ** k / (s - lam) ** (k + 1)
    expansion = sp.series(1 / (s - lam + lam * x), x, 0, TERMS_CHECKED).removeO()
    for i in range(TERMS_CHECKED):
        check_zero(expansion.coeff(x, i) - general.subs(k, i).coeff(x, i), f"coefficient {i}")
    steps.append(Step(
        "Write x = exp(-sD) and expand in powers of x, a geometric series that converges for "
        f"Re s large enough. sympy's series agrees with the general term for k < {TERMS_CHECKED}.",
        (eq(1 / (s - lam + lam * x), expansion + sp.Order(x ** TERMS_CHECKED)),
         eq(1 / (s - lam + lam * x), sp.Sum(general, (k, 0, sp.oo))))))

    pair = sp.laplace_transform(t ** k * sp.exp(lam * t) / sp.factorial(k), t, s, noconds=True)
    pair = sp.simplify(sp.gammasimp(pair))
    check_zero(pair - 1 / (s - lam) ** (k + 1), "Laplace pair")
    shifted = sp.inverse_laplace_transform(sp.exp(-2 * s * D) / (s - lam) ** 3, s, t)
    steps.append(Step(
        "Invert term by term. sympy's Laplace transform of t^k exp(λt)/k! is 1/(s - λ)^(k+1); "
        "the factor exp(-ksD) shifts the original by kD (shown for k = 2, θ the unit step). "
        "At a given t only the terms with kD <= t are non-zero, so the sum is finite.",
        (eq(sp.LaplaceTransform(t ** k * sp.exp(lam * t) / sp.factorial(k), t, s), pair),
         eq(sp.InverseLaplaceTransform(sp.exp(-2 * s * D) / (s - lam) ** 3, s, t, None),
               shifted))))

    check_zero((-lam) ** k * (t - k * D) ** k - (lam * (k * D - t)) ** k, "sign identity")
    term = (lam * (k * D - t)) ** k / sp.factorial(k) * sp.exp(-lam * (k * D - t))
    erlang = (1 - rho) * sp.Sum(term, (k, 0, sp.floor(t / D)))
    first = sp.simplify(erlang.subs(t, x).subs(sp.floor(x / D), 0).doit()).subs(x, t)
    steps.append(Step(
        "Collect the terms, using (-λ)^k (t - kD)^k = (λ(kD - t))^k for whole k: Erlang's "
        "formula. It alternates in sign, so it loses digits in floating point for large t or ρ "
        "near 1 (qmodel sums it in high precision). On [0, D) it is (1 - ρ) exp(λt), with the "
        "atom 1 - ρ at t = 0.",
        (eq(W(t), erlang), eq(W(t), first))))

    sojourn = erlang.subs(t, t - D)
    steps.append(Step(
        "The sojourn time is the wait plus the constant service D.",
        (eq(Prob(le(sp.Symbol("T"), t)), sojourn),)))

    results = (
        Result("rho", rho, lam * D, "utilization"),
        Result("waiting_cdf", Prob(le(Wq, t)), erlang, "t >= 0"),
        Result("first_interval", Prob(le(Wq, t)), first, "0 <= t < D"),
        Result("sojourn_cdf", Prob(le(sp.Symbol("T"), t)), sojourn, "t >= D"),
    )
    return Derivation(
        key="md1",
        title="Erlang's M/D/1 waiting-time formula",
        summary="The waiting-time distribution of the FIFO M/D/1 queue as a finite sum, "
                "inverted term by term from the Pollaczek-Khinchine transform.",
        sources=("A. K. Erlang (1909), The theory of probabilities and telephone "
                 "conversations, Nyt Tidsskrift for Matematik B 20",
                 "G. J. Franx (2001), A simple solution for the M/D/c waiting time "
                 "distribution, Operations Research Letters 29(5)",
                 "V. B. Iversen and L. Staalhagen (1999), Waiting time distribution in M/D/1 "
                 "queueing systems, Electronics Letters 35(25)"),
        assumptions=("Poisson arrivals of rate λ", "one server, constant service time D",
                     "FIFO, unlimited queue", "stability: ρ = λD < 1"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "D": D, "t": t, "rho": rho},
        implemented_by="qmodel.theory.classical.md1 (summed in mpmath at a precision chosen "
                       "from the largest term)")
