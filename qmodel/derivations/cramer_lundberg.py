"""The Cramer-Lundberg equation and constant of the M/G/1 waiting time.

Sources: F. Lundberg (1903) and H. Cramér (1930) in risk theory; W. Feller (1971), "An
Introduction to Probability Theory and Its Applications" vol. II, ch. XI-XII; J. Abate,
G. L. Choudhury and W. Whitt (1995), "Exponential approximations for tail probabilities in
queues, I: waiting times", Operations Research 43(5).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import pollaczek_khinchine
from .core import Derivation, Expect, Prob, Result, Step, check_zero, eq, gt

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``rho``, ``equation`` (an Eq in theta and the service MGF ``M``),
        ``constant``, ``tail``, and the closed forms ``mm1_decay``, ``mm1_constant``,
        ``md1_decay``, ``md1_constant``.

    Examples
    --------
    >>> d = derive()
    >>> lam, mu = d.symbols["lam"], d.symbols["mu"]
    >>> d.result("mm1_decay"), d.result("mm1_constant")
    (-lambda + mu, lambda/mu)
    """
    pk = pollaczek_khinchine.derive()
    lam, mu, D, t, rho = sp.symbols("lambda mu D t rho", positive=True)
    theta = sp.Symbol("theta", positive=True)
    s = sp.Symbol("s")
    M, C = sp.Function("M"), sp.Symbol("C")
    Sst, W = pk.symbols["S_star"], sp.Function("W^*")
    Wq = sp.Symbol("W_q")
    m1 = Expect("S")
    steps = []

    transform = pk.result("transform").subs({pk.symbols["lam"]: lam, pk.symbols["rho"]: rho,
                                             pk.symbols["s"]: s})
    transform = transform.subs(Sst(s), M(-s))
    num, den = sp.fraction(sp.together(transform))
    at_pole = sp.expand(den.subs(s, -theta))
    equation = eq(lam * (M(theta) - 1), theta)
    check_zero(at_pole + theta - (lam * (M(theta) - 1) - theta) - theta, "pole equation")
    steps.append(Step(
        "Write the Pollaczek-Khinchine transform with the service law's moment generating "
        "function M(θ) = E[exp(θS)], so S*(s) = M(-s). W*(s) continues analytically to the "
        "left of 0 as long as M is finite; its first singularity there is the zero s = -θ of "
        "the denominator, where θ solves the Cramér-Lundberg equation.",
        (eq(W(s), transform), eq(den.subs(s, -theta), 0), equation)))

    f = lam * (M(theta) - 1) - theta
    slope0 = sp.diff(f, theta).subs(theta, 0)
    slope0 = slope0.replace(lambda e: isinstance(e, sp.Subs), lambda e: m1)
    check_zero(slope0 - (lam * m1 - 1), "slope at 0")
    steps.append(Step(
        "The root θ > 0 is unique: f(θ) = λ(M(θ) - 1) - θ is convex (M'' = E[S² exp(θS)] > 0), "
        "f(0) = 0, and its slope at 0 is ρ - 1 < 0 (M'(0) = E[S]). It exists when M grows "
        "fast enough before the end of its domain: for light-tailed service (not lognormal).",
        (eq(sp.Derivative(f, theta).subs(theta, 0), slope0),)))

    dden = sp.diff(den, s).subs(s, -theta).doit()
    residue = sp.simplify(num.subs(s, -theta) / dden)
    tail_residue = sp.simplify(-residue / (-theta))
    constant = (1 - rho) / (lam * sp.Derivative(M(theta), theta) - 1)
    check_zero(tail_residue - constant, "Cramer-Lundberg constant")
    steps.append(Step(
        "Near s = -θ, W*(s) behaves like R/(s + θ), with R the numerator over the derivative of "
        "the denominator. P(W_q > t) has the transform (1 - W*(s))/s, whose residue at -θ is "
        "R/θ: the tail decays like C exp(-θt) as t grows (Feller 1971, XI.6; Abate, Choudhury & "
        "Whitt 1995).",
        (eq(sp.Symbol("R"), residue), eq(C, constant),
         eq(sp.Limit(sp.exp(theta * t) * Prob(gt(Wq, t)), t, sp.oo), C))))

    # --- exponential service -------------------------------------------------------------------
    mgf_exp = mu / (mu - theta)
    roots = sp.solve(equation.subs(M(theta), mgf_exp), theta)
    mm1_theta = [r for r in roots if r != 0][0]
    mm1_c = sp.simplify(constant.subs(M(theta), mgf_exp).doit().subs(
        {theta: mm1_theta, rho: lam / mu}))
    check_zero(mm1_theta - (mu - lam), "M/M/1 decay")
    steps.append(Step(
        "Exponential service, M(θ) = μ/(μ - θ): sympy solves the equation; with the constant "
        "this is the exact M/M/1 waiting tail ρ exp(-(μ - λ)t), not only an asymptote.",
        (eq(theta, mm1_theta), eq(C, mm1_c))))

    # --- constant service --------------------------------------------------------------------
    solved = sp.solve(equation.subs(M(theta), sp.exp(theta * D)), theta)[0]
    principal = solved.subs(lam, rho / D)
    md1_theta = sp.simplify(principal.replace(sp.LambertW, lambda arg: sp.LambertW(arg, -1)))
    half = {rho: sp.Rational(1, 2), D: 1}
    trivial = sp.N(principal.subs(half))
    positive = sp.N(md1_theta.subs(half))
    residual = sp.N((lam * (sp.exp(theta * D) - 1) - theta).subs(lam, rho / D).subs(
        theta, md1_theta).subs(half))
    if not (abs(trivial) < 1e-12 and positive > 0 and abs(residual) < 1e-12):
        raise ArithmeticError("derivation check failed: M/D/1 Lambert W branch")
    md1_c = sp.simplify((1 - rho) / (rho + theta * D - 1))
    check_zero(constant.subs(M(theta), sp.exp(theta * D)).doit().subs(
        lam, (lam + theta) * sp.exp(-theta * D)).subs(rho, lam * D)
        - md1_c.subs(rho, lam * D), "M/D/1 constant")
    steps.append(Step(
        "Constant service D, M(θ) = exp(θD): sympy's solution uses the principal branch W₀ of "
        "Lambert's W, which gives the trivial root θ = 0 (W₀(-ρ exp(-ρ)) = -ρ for ρ < 1, "
        "checked numerically at ρ = 1/2). The positive root is on the branch W₋₁ "
        f"(θD = {float(positive):.6f} at ρ = 1/2). With λ exp(θD) = λ + θ the constant "
        "simplifies.",
        (eq(theta, solved), eq(theta, md1_theta), eq(C, md1_c))))

    results = (
        Result("rho", rho, lam * m1, "utilization"),
        Result("equation", None, equation, "the decay rate θ is its positive root"),
        Result("constant", C, constant, "M'(θ) is the derivative of the MGF"),
        Result("tail", Prob(gt(Wq, t)), C * sp.exp(-theta * t), "asymptotically as t → ∞ (an "
                                                                 "approximation; qmodel caps it "
                                                                 "at ρ)"),
        Result("mm1_decay", theta, mm1_theta, "exponential service"),
        Result("mm1_constant", C, mm1_c, "exponential service"),
        Result("md1_decay", theta, md1_theta, "constant service D, ρ = λD"),
        Result("md1_constant", C, md1_c, "constant service D"),
    )
    return Derivation(
        key="cramer_lundberg",
        title="The Cramér-Lundberg equation and constant (M/G/1)",
        summary="The exponential decay rate and constant of the M/G/1 waiting-time tail, from "
                "the pole of the Pollaczek-Khinchine transform.",
        sources=("F. Lundberg (1903), Approximerad framställning av sannolikhetsfunktionen, "
                 "Uppsala; H. Cramér (1930), On the mathematical theory of risk, Skandia "
                 "Jubilee Volume",
                 "W. Feller (1971), An Introduction to Probability Theory and Its Applications, "
                 "vol. II, 2nd ed., Wiley, ch. XI-XII",
                 "J. Abate, G. L. Choudhury and W. Whitt (1995), Exponential approximations for "
                 "tail probabilities in queues, I: waiting times, Operations Research 43(5)"),
        assumptions=("Poisson arrivals of rate λ, one FIFO server, ρ = λE[S] < 1",
                     "light-tailed service: M(θ) = E[exp(θS)] finite beyond the root θ",
                     "the pole at -θ is simple and the rightmost singularity left of 0"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "D": D, "t": t, "rho": rho, "theta": theta, "M": M,
                 "C": C, "m1": m1},
        implemented_by="qmodel.theory.tails.cramer_lundberg (decay_rate, constant)")
