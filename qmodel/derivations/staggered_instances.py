"""Several instances taken in turn: how likely the others are busy at a dispatch to a free one.

The closed form behind the test oracle of the batch model's group-0 blocking law
(``qmodel.theory.batch``, several instances): deterministic batch time, exponential gaps between
dispatches. The conditioning on the reused instance being free is qmodel's own step; the
Erlang-Poisson identities it uses are textbook (Kleinrock 1975, vol. 1, sections 2.6 and 4.3).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Prob, Result, Derivation, Step, check_zero, eq

__all__ = ["derive"]

CHECKED = (2, 3, 4, 5)      # instance counts for which sympy integrates the general step


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``joint`` (others busy at v and the reused instance free), ``reused_free``,
        ``others_busy_given_free`` (the law the model uses) and ``others_busy`` (without the
        condition, for comparison).

    Examples
    --------
    >>> d = derive()
    >>> lam, s, v, c = (d.symbols[k] for k in ("lam", "s", "v", "c"))
    >>> p = d.result("others_busy_given_free").subs({lam: 2, s: 1, v: 0, c: 2})
    >>> sp.nsimplify(p.doit())                 # rate S / (1 + rate S)
    2/3
    """
    lam, s, v, x = sp.symbols("lambda s v x", positive=True)
    c = sp.Symbol("c", integer=True, positive=True)
    j = sp.Symbol("j", integer=True, nonnegative=True)
    G = sp.Function("G")
    steps = []

    def erlang_density(n, at):
        return lam ** n * at ** (n - 1) * sp.exp(-lam * at) / sp.factorial(n - 1)

    steps.append(Step(
        "c instances take batches in turn, each for a deterministic time s. A dispatch at time 0 "
        "goes to the instance taken c dispatches earlier; the instance taken j dispatches "
        "earlier started G_j = X_1 + ... + X_j ago, with the gaps X_i independent exponentials "
        "of rate λ, so G_j is Erlang(j, λ). That instance is busy at time v >= 0 when "
        "G_j < s - v; since G_j grows with j, all c - 1 others are busy when G_(c-1) < s - v.",
        (eq(Prob(sp.StrictLessThan(G(c - 1), s - v)),
            sp.Integral(erlang_density(c - 1, x), (x, 0, s - v))),)))

    joint = sp.exp(-lam * s) * (lam * (s - v)) ** (c - 1) / sp.factorial(c - 1)
    for n in CHECKED:
        by_sympy = sp.integrate(erlang_density(n - 1, x) * sp.exp(-lam * (s - x)),
                                (x, 0, s - v))
        check_zero(by_sympy - joint.subs(c, n), f"joint probability, c = {n}")
    steps.append(Step(
        "The dispatch goes to a free instance: the one taken c dispatches earlier had finished, "
        "G_c = G_(c-1) + X_c >= s. Given G_(c-1) = x < s - v this has probability "
        "exp(-λ(s - x)); integrating over the Erlang density of G_(c-1), the exponentials "
        "combine into exp(-λs) and the integral is a power (sympy integrates it for c = "
        f"{', '.join(map(str, CHECKED))}).",
        (eq(sp.Symbol("P_joint"),
            sp.Integral(erlang_density(c - 1, x) * sp.exp(-lam * (s - x)), (x, 0, s - v))),
         eq(sp.Symbol("P_joint"), joint))))

    reused_free = sp.exp(-lam * s) * sp.Sum((lam * s) ** j / sp.factorial(j), (j, 0, c - 1))
    for n in CHECKED:
        by_sympy = sp.integrate(erlang_density(n, x), (x, s, sp.oo))
        check_zero(by_sympy - reused_free.subs(c, n).doit(), f"Erlang survival, c = {n}")
    steps.append(Step(
        "The chance that the reused instance was free is the Erlang(c, λ) survival at s, the "
        "chance of fewer than c Poisson(λs) gaps in s (sympy integrates the density for the "
        "same c).",
        (eq(Prob(sp.GreaterThan(G(c), s)), reused_free),)))

    given = (lam * (s - v)) ** (c - 1) / sp.factorial(c - 1) / sp.Sum(
        (lam * s) ** j / sp.factorial(j), (j, 0, c - 1))
    check_zero(sp.simplify(joint / reused_free - given), "conditional probability")
    others = 1 - sp.exp(-lam * (s - v)) * sp.Sum((lam * (s - v)) ** j / sp.factorial(j),
                                                  (j, 0, c - 2))
    steps.append(Step(
        "Divide: the others are all busy at v, given that the dispatch found its instance "
        "free. Without the condition the chance is the Erlang(c - 1, λ) cdf at s - v, larger: "
        "for c = 2 and v = 0 it is 1 - exp(-λs) against λs / (1 + λs) (0.86 against 0.67 at "
        "λs = 2), because the gaps before a dispatch to a free instance are longer than "
        "typical.",
        (eq(sp.Symbol("P_busy_given_free"), given), eq(sp.Symbol("P_busy"), others))))

    results = (
        Result("joint", sp.Symbol("P_joint"), joint,
               "the c - 1 others busy at v and the reused instance free"),
        Result("reused_free", Prob(sp.GreaterThan(G(c), s)), reused_free,
               "the instance taken c dispatches earlier had finished"),
        Result("others_busy_given_free", sp.Symbol("P_busy_given_free"), given,
               "0 <= v <= s; the law of qmodel.theory.batch's group-0 blocking"),
        Result("others_busy", sp.Symbol("P_busy"), others, "the same without the condition"),
    )
    return Derivation(
        key="staggered_instances",
        title="Instances taken in turn: the others busy at a dispatch to a free instance",
        summary="With deterministic batch time and exponential gaps between dispatches, the "
                "chance that every other instance is still busy v after a dispatch, given "
                "that the instance it reuses was free, in closed form.",
        sources=("L. Kleinrock (1975), Queueing Systems, Volume 1: Theory, Wiley (the Erlang "
                 "distribution and its Poisson-count form)",),
        assumptions=("c >= 2 instances taken in turn (dispatch n goes to the instance of "
                     "dispatch n - c)", "every batch takes the same time s",
                     "gaps between dispatches independent exponentials of rate λ"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "s": s, "v": v, "c": c},
        implemented_by="qmodel.theory.batch.instances.staggered_law (the several-instance "
                       "group-0 blocking law, for any batch-time mix and gamma gaps, by a "
                       "backward recursion on the lattice; tests/test_batch_node.py compares "
                       "it with this result)")
