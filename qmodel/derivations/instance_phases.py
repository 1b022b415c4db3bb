"""Why deterministic instances bunch: evenly staggered phases are an unstable equilibrium.

The batch model's several-instance approximation (``qmodel.theory.batch``) spaces the dispatches
of instances taken in turn evenly, S(k)/c apart. This derivation shows that for deterministic
batch times S(k) = a + b k, no delay and batches below max_batch_size, that spacing is an
equilibrium that every pattern of phases moves away from, by a factor of about
1 + (b λ / c)(1 - cos(2πj/c)) per dispatch for the pattern of frequency j. It explains the
error the model keeps there (predictions low, see validation/predict_accuracy.py). The
linearisation of a recursion around its fixed point and the first-order perturbation of a
simple root are textbook (e.g. Elaydi 2005, chapters 2 and 4); the recursion is qmodel's own.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Result, Step, check_zero, eq

__all__ = ["derive"]

CHECKED = (2, 3, 4, 5, 6)      # instance counts for which sympy checks the general steps


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``spacing`` (the even spacing, the fixed point), ``characteristic`` (the
        polynomial whose roots are the per-dispatch factors of the phase patterns),
        ``growth_first_order`` (the squared modulus of the factor of pattern j, to first order
        in the gain g = bλ) and ``two_instances`` (c = 2: the factor of the alternating
        pattern, exactly).

    Examples
    --------
    >>> d = derive()
    >>> g = d.symbols["g"]
    >>> d.result("two_instances").subs(g, 2)     # c = 2, gain 2: the pattern doubles
    -2
    """
    a, b, lam, g = sp.symbols("a b lambda g", positive=True)
    z, eps = sp.symbols("z epsilon")
    theta = sp.Symbol("theta", real=True)
    c = sp.Symbol("c", integer=True, positive=True)
    i = sp.Symbol("i", integer=True)
    t, k = sp.IndexedBase("t"), sp.IndexedBase("k")
    U = sp.IndexedBase("u")
    sigma = sp.Symbol("sigma", positive=True)
    steps = []

    steps.append(Step(
        "c instances, deterministic batch time S(k) = a + bk, no delay, Poisson arrivals of "
        "rate λ, every instance busy. Dispatch i + c goes to the instance of dispatch i "
        "(instances are taken in turn while all are busy) the moment it frees, so "
        "t_(i+c) = t_i + a + b k_i. With no delay and the queue below max_batch_size the "
        "dispatch takes every request waiting: those that arrived since the previous "
        "dispatch, k_i = N(t_(i-1), t_i], mean λ(t_i - t_(i-1)).",
        (eq(t[i + c], t[i] + a + b * k[i]),
         eq(Mean(k[i]), lam * (t[i] - t[i - 1])))))

    fixed = a / (c - b * lam)
    check_zero(c * fixed - (a + b * lam * fixed), "even spacing")
    steps.append(Step(
        "Evenly staggered instances dispatch σ apart with c σ = a + b λ σ (a round of c "
        "spacings is one batch time): the fixed point, finite while g = bλ < c, which holds "
        "below capacity (λ < c B / S(B) gives g < c b B / (a + b B) < c).",
        (eq(sigma, fixed),)))

    # t_i = i sigma + u_i, k_i = lam (t_i - t_(i-1)) + noise
    lhs = (i + c) * fixed + U[i + c]
    rhs = (i * fixed + U[i] + a
           + b * (lam * ((i * fixed + U[i]) - ((i - 1) * fixed + U[i - 1])) + eps))
    linear = U[i] + b * lam * (U[i] - U[i - 1]) + b * eps
    check_zero((lhs - rhs) - (U[i + c] - linear), "linearised recursion")
    steps.append(Step(
        "Write t_i = iσ + u_i and k_i = λ(t_i - t_(i-1)) + ε_i (ε_i the Poisson noise, mean "
        "0). The constants cancel at the fixed point and the deviations follow a linear "
        "recursion with gain g = bλ, the service the arrivals of one spacing add:",
        (eq(U[i + c], U[i] + g * (U[i] - U[i - 1]) + b * eps),)))

    char = z ** (c + 1) - (1 + g) * z + g
    pattern = sp.Sum(z ** sp.Symbol("m", integer=True, positive=True),
                     (sp.Symbol("m", integer=True, positive=True), 1, c)) - g
    for n in CHECKED:
        check_zero(sp.expand(char.subs(c, n) - (z - 1) * (pattern.subs(c, n).doit())),
                   f"factorisation, c = {n}")
    steps.append(Step(
        "Without the noise, u_i = z^i solves it when z^(c+1) - (1 + g) z + g = 0. The root "
        "z = 1 shifts every epoch alike (time invariance); the other c roots are those of "
        "P(z) below (sympy checks the factorisation for c = "
        f"{', '.join(map(str, CHECKED))}). A root with |z| > 1 is a pattern of phases that "
        "grows by |z| per dispatch.",
        (eq(char, (z - 1) * pattern),)))

    for n in CHECKED:
        for j in range(1, n):
            w = sp.exp(2 * sp.pi * sp.I * j / n)
            P = sum(z ** m for m in range(1, n + 1))
            if abs(complex(sp.N(P.subs(z, w), 40))) > 1e-30:
                raise ArithmeticError(f"derivation check failed: root of unity, c = {n}")
            slope = sp.diff(P, z).subs(z, w) - n / (w - 1)
            if abs(complex(sp.N(slope, 40))) > 1e-30:
                raise ArithmeticError(f"derivation check failed: P'(ω), c = {n}, j = {j}")
    omega = sp.exp(sp.I * theta)
    steps.append(Step(
        "At g = 0 (batch time independent of batch size) P(z) = z(z^c - 1)/(z - 1): its roots "
        "are 0 and the c-th roots of unity ω_j = exp(2πij/c), j = 1..c-1, all on the unit "
        "circle: any pattern of phases persists, neither growing nor decaying. For g > 0 "
        "each ω_j moves by g / P'(ω_j) to first order, and P'(ω_j) = c / (ω_j - 1) (checked "
        f"for every j at c = {', '.join(map(str, CHECKED))}).",
        (eq(sp.Symbol("z_j"), omega + g * (omega - 1) / c),)))

    zj = omega + g * (omega - 1) / c
    growth = 1 + 2 * (1 - sp.cos(theta)) * (g / c + g ** 2 / c ** 2)
    residual = sp.expand(sp.expand_complex(zj * sp.conjugate(zj)) - growth)
    check_zero(sp.expand(residual.subs(sp.sin(theta) ** 2, 1 - sp.cos(theta) ** 2)),
               "modulus of the moved root")
    steps.append(Step(
        "The moved root's squared modulus exceeds 1 for every pattern j (θ = 2πj/c) and "
        "every g > 0: evenly staggered phases are an unstable equilibrium. The fastest "
        "pattern is the one that alternates (θ = π for even c), about 1 + 2g/c per "
        "dispatch, about e^(2g) per round of c dispatches while g is small.",
        (eq(sp.Abs(sp.Symbol("z_j")) ** 2, growth),)))

    roots = sp.solve(z ** 2 + z - g, z)
    alternating = min(roots, key=lambda r: float(r.subs(g, 1)))
    check_zero(alternating - (-1 - sp.sqrt(1 + 4 * g)) / 2, "two instances, exact root")
    steps.append(Step(
        "Two instances, exactly: P(z) = z² + z - g, and the alternating pattern's factor is "
        "below -1 for every g > 0 (the other root, near g, decays).",
        (eq(sp.Symbol("z_alt"), alternating),)))

    steps.append(Step(
        "The growth stops only where the linearisation does: (1) a short spacing reaches the "
        "point where no request arrives in it, the instance idles and restarts at the next "
        "arrival: the instances bunch, a few spacings of an interarrival time and one long one; "
        "(2) batches reach max_batch_size, k_i - k_(i-1) = 0, the gain vanishes and whatever "
        "pattern there is persists (the g = 0 case); (3) a delay D > 0 times dispatches from "
        "the oldest request rather than from the previous dispatch, which the recursion does "
        "not describe. Jitter in S adds noise to t_(i+c) that moves the phases at random and "
        "keeps them from settling in one pattern. Measured with qmodel.replay (4 instances, "
        "max_batch_size 8, no delay, 50% load, 100,000 Poisson arrivals, the V100 fit a = "
        "1.887 ms, b = 0.144 ms, so g = 0.76): the correlation of spacings a round (4 "
        "dispatches) apart is 0.88 with deterministic service and 0.26 with lognormal cv 0.3 "
        "jitter, and the spacings' scv is 0.98, above the 0.6 of uniformly random phases "
        "(0.52 with the jitter; tests/test_derivations.py).",
        ()))

    results = (
        Result("spacing", sigma, fixed, "the even spacing of instances taken in turn"),
        Result("characteristic", None, sp.Eq(pattern, 0),
               "its roots are the per-dispatch factors of the phase patterns"),
        Result("growth_first_order", sp.Abs(sp.Symbol("z_j")) ** 2, growth,
               "θ = 2πj/c; first order in g; above 1 for every pattern"),
        Result("two_instances", sp.Symbol("z_alt"), alternating,
               "c = 2: the alternating pattern's factor, exactly"),
    )
    return Derivation(
        key="instance_phases",
        title="Instances taken in turn: why deterministic instances bunch",
        summary="With deterministic batch time a + bk and no delay, evenly staggered instances "
                "are an unstable equilibrium: every pattern of phases grows by about "
                "1 + (bλ/c)(1 - cos 2πj/c) per dispatch, until instances idle or batches fill.",
        sources=("S. Elaydi (2005), An Introduction to Difference Equations, 3rd ed., Springer "
                 "(linear recursions, stability of fixed points)",),
        assumptions=("c >= 2 instances, all busy, taken in turn",
                     "deterministic batch time S(k) = a + b k",
                     "no delay, batches below max_batch_size: a dispatch takes every request "
                     "that arrived since the previous one",
                     "Poisson arrivals of rate λ, the counts linearised about their mean"),
        steps=tuple(steps), results=results,
        symbols={"a": a, "b": b, "lam": lam, "g": g, "c": c, "z": z, "theta": theta},
        implemented_by="nothing computes it: it explains why qmodel.theory.batch's evenly "
                       "staggered spacing S(k)/c misses deterministic nodes without a delay "
                       "(qmodel.theory.batch.instances; tests/test_derivations.py checks the "
                       "roots with numpy and the bunching with qmodel.replay)")
