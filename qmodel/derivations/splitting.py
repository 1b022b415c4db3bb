"""The arrival stream a static router gives each node: random thinning and round robin.

qmodel.predict solves a cluster behind a static router node by node, each node under the
renewal stream it receives. A random router with share p thins the input independently: the
node's gap is a geometric sum of input gaps, with mean m/p and squared coefficient of variation
p c_a^2 + 1 - p (the QNA splitting rule, here exact for the gap law). Round robin over N nodes
sends every N-th arrival: the gap is a sum of N input gaps, mean N m and scv c_a^2 / N, and a
gamma input stays gamma.

Sources: E. Cinlar (1975), "Introduction to Stochastic Processes", Prentice-Hall (thinning of
Poisson and renewal processes); L. Kleinrock (1975), "Queueing Systems" vol. I, Wiley
(transforms, sums of a random number of random variables); W. Whitt (1983), "The Queueing
Network Analyzer", Bell System Technical Journal 62(9) (the splitting rule).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Expect, Mean, Prob, Result, Step, check_zero, eq, geometric_sum

__all__ = ["derive"]


def _power_latex(self, printer, exp=None):
    """A*(s)^J, not sympy's (A*)^J(s)."""
    out = r"A^{*}\left(%s\right)" % ", ".join(printer._print(a) for a in self.args)
    return out if exp is None else r"%s^{%s}" % (out, exp)


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``thinned_mean``, ``thinned_scv``, ``thinned_lst``, ``thinned_poisson_lst``,
        ``thinned_third_moment`` (how far the thinned gap is from a gamma law),
        ``round_robin_mean``, ``round_robin_scv``, ``round_robin_lst`` and
        ``round_robin_gamma_lst``; symbols ``p`` (share), ``m`` (mean input gap), ``ca2``
        (its scv), ``N`` (nodes), ``k`` (gamma shape), ``theta`` (Poisson rate), ``s``, ``A``.

    Examples
    --------
    >>> d = derive()
    >>> p, ca2 = d.symbols["p"], d.symbols["ca2"]
    >>> d.result("thinned_scv").subs({p: sp.Rational(1, 4), ca2: 3})       # 3/4 + 3/4
    3/2
    """
    p, m, s, z, theta, t = sp.symbols("p m s z theta t", positive=True)
    ca2 = sp.Symbol("c_a^2", positive=True)
    k = sp.Symbol("k", positive=True)
    N = sp.Symbol("N", integer=True, positive=True)
    n, i = sp.Symbol("n", integer=True, positive=True), sp.Symbol("i", integer=True,
                                                                    positive=True)
    j = sp.Symbol("j", integer=True, nonnegative=True)
    J, G, R, H = sp.symbols("J G R H")                      # labels only
    A = sp.IndexedBase("A")
    Astar = sp.Function("A^*", _latex=_power_latex)
    Gstar, Rstar = sp.Function("G^*"), sp.Function("R^*")
    Var = sp.Function("Var")
    EA, EA2, EA3 = Expect("A"), Expect("A^2"), Expect("A^3")
    cG2, cR2 = sp.Symbol("c_G^2", positive=True), sp.Symbol("c_R^2", positive=True)
    steps = []

    # --- random thinning ---------------------------------------------------------------------
    ratio_sum, cond = geometric_sum((1 - p) * z, j)
    pgf = sp.simplify(p * z * ratio_sum)
    pgf_tidy = p * z / (1 - (1 - p) * z)
    check_zero(pgf - pgf_tidy, "pgf of the geometric law")
    steps.append(Step(
        "A random router sends each arrival to a given node with probability p (its share), "
        "independently of everything else. The input is renewal: i.i.d. gaps Aᵢ with mean "
        "m and squared coefficient of variation c_a². Between two arrivals the node receives, "
        "the input delivers J gaps, J the number of tosses up to the next success: "
        "Geometric(p) on {1, 2, ...}, independent of the gaps. The node's gap G is their sum, "
        "and successive G are i.i.d. (what follows a chosen arrival is independent of what "
        "came before), so the node sees a renewal stream. sympy sums J's generating function "
        "(it converges for |(1 - p)z| < 1).",
        (eq(Prob(eq(J, n)), p * (1 - p) ** (n - 1)),
         eq(G, sp.Sum(A[i], (i, 1, J))),
         eq(Mean(z ** J), sp.Sum(p * (1 - p) ** (n - 1) * z ** n, (n, 1, sp.oo))),
         eq(Mean(z ** J), pgf_tidy))))

    mean_j = sp.simplify(sp.diff(pgf, z).subs(z, 1))
    var_j = sp.simplify(sp.diff(pgf, z, 2).subs(z, 1) + mean_j - mean_j ** 2)
    mean_g = mean_j * m
    var_g = mean_j * ca2 * m ** 2 + var_j * m ** 2                 # total variance
    scv_g = sp.expand(sp.simplify(var_g / mean_g ** 2))
    check_zero(scv_g - (p * ca2 + 1 - p), "thinned scv")
    steps.append(Step(
        "J's mean and variance follow from the derivatives of its generating function at "
        "z = 1. The law of total variance, conditioning on J, gives the mean and variance of "
        "G, with Var A = c_a² m²; sympy simplifies the squared coefficient of variation.",
        (eq(Mean(J), mean_j), eq(Var(J), var_j),
         eq(Mean(G), Mean(J) * EA), eq(Mean(G), mean_g),
         eq(Var(G), Mean(J) * Var(sp.Symbol("A")) + Var(J) * EA ** 2),
         eq(Var(G), sp.factor(var_g)),
         eq(cG2, Var(G) / Mean(G) ** 2), eq(cG2, scv_g))))

    second = m ** 2 * (1 + ca2)
    a_series = 1 - m * s + EA2 * s ** 2 / 2 + sp.O(s ** 3)
    g_lst = p * Astar(s) / (1 - (1 - p) * Astar(s))
    g_series = sp.series(g_lst.subs(Astar(s), a_series.removeO()), s, 0, 3).removeO()
    g1, g2 = -g_series.coeff(s, 1), 2 * g_series.coeff(s, 2)
    g2_tidy = (p * EA2 + 2 * m ** 2 * (1 - p)) / (2 * p ** 2)
    check_zero(g_series.coeff(s, 2) - g2_tidy, "second-order coefficient")
    check_zero(g1 - m / p, "mean from the transform")
    check_zero(((g2 - g1 ** 2) / g1 ** 2).subs(EA2, second) - scv_g, "scv from the transform")
    steps.append(Step(
        "The same from the transform. Conditioning on J, the Laplace-Stieltjes transform of "
        "G is the generating function of J at A*(s), the transform of a gap. Expanding A*(s) "
        "to second order (E[A] = m, E[A²] = m²(1 + c_a²)), sympy expands G*(s): the first two "
        "moments of G, and the same squared coefficient of variation.",
        (eq(Gstar(s), Mean(Astar(s) ** J)), eq(Gstar(s), g_lst),
         eq(Astar(s), a_series),
         eq(Gstar(s), 1 - g1 * s + g2_tidy * s ** 2 + sp.O(s ** 3)),
         eq(EA2, second))))

    exp_lst = sp.laplace_transform(theta * sp.exp(-theta * t), t, s, noconds=True)
    poisson_lst = sp.simplify(g_lst.subs(Astar(s), exp_lst))
    check_zero(poisson_lst - p * theta / (p * theta + s), "Poisson thinning")
    if sp.simplify(scv_g.subs(ca2, 1)) != 1:
        raise ArithmeticError("derivation check failed: Poisson scv")
    steps.append(Step(
        "Poisson input: c_a² = 1 gives c_G² = 1. More, the law is exponential: with A*(s) "
        "the transform of Exp(θ) (sympy transforms the density), G*(s) is the transform of "
        "Exp(pθ). So a random split of a Poisson stream is Poisson of rate pθ at every node "
        "(and the nodes' streams are independent): the decomposition is exact.",
        (eq(cG2, scv_g.subs(ca2, 1)),
         eq(sp.LaplaceTransform(theta * sp.exp(-theta * t), t, s), exp_lst),
         eq(Gstar(s), poisson_lst))))

    third = m ** 3 * (1 + ca2) * (1 + 2 * ca2)                     # gamma with mean m, scv ca2
    g_series3 = sp.series(g_lst.subs(Astar(s), 1 - m * s + second * s ** 2 / 2
                                     - third * s ** 3 / 6), s, 0, 4).removeO()
    g3 = -6 * g_series3.coeff(s, 3)
    gamma_third = (m / p) ** 3 * (1 + scv_g) * (1 + 2 * scv_g)
    gap_third = sp.factor(sp.simplify(g3 - gamma_third))
    check_zero(gap_third - m ** 3 * (1 - p) * (1 - ca2) / p ** 2, "third-moment gap")
    steps.append(Step(
        "Otherwise a thinned gamma stream is not gamma: with gamma input gaps (E[A³] = "
        "m³(1 + c_a²)(1 + 2c_a²)), G's third moment differs from that of a gamma law H with "
        "the same mean and scv unless p = 1 or c_a² = 1 (sympy expands G*(s) to third order). "
        "qmodel gives the node gamma gaps with G's mean and scv, the two-moment approximation "
        "of Whitt's Queueing Network Analyzer (1983), whose splitting rule is this scv.",
        (eq(EA3, third),
         eq(Mean(G ** 3) - Mean(H ** 3), gap_third))))

    # --- round robin -------------------------------------------------------------------------
    r_lst = Astar(s) ** N
    r_series = sp.series(r_lst.subs(Astar(s), a_series.removeO()), s, 0, 3).removeO()
    r1, r2 = -r_series.coeff(s, 1), 2 * r_series.coeff(s, 2)
    check_zero(r1 - N * m, "round-robin mean")
    scv_r = sp.simplify(((r2 - r1 ** 2) / r1 ** 2).subs(EA2, second))
    check_zero(scv_r - ca2 / N, "round-robin scv")
    steps.append(Step(
        "Round robin over N nodes sends arrivals j, j + N, j + 2N, ... to node j: its gap R is "
        "the sum of N consecutive input gaps, and disjoint blocks of gaps are independent, so "
        "the node's stream is renewal. Its transform is the N-th power of A*(s); sympy "
        "expands it: mean N m, variance N times that of a gap, scv c_a²/N.",
        (eq(R, sp.Sum(A[i], (i, 1, N))), eq(Rstar(s), r_lst),
         eq(Rstar(s), 1 - r1 * s + sp.factor(r_series.coeff(s, 2)) * s ** 2 + sp.O(s ** 3)),
         eq(Mean(R), r1), eq(cR2, scv_r))))

    density = (k / m) ** k * t ** (k - 1) * sp.exp(-k * t / m) / sp.gamma(k)
    gamma_lst = sp.laplace_transform(density, t, s, noconds=True)
    check_zero(gamma_lst - (1 + m * s / k) ** (-k), "gamma transform")
    rr_gamma = (1 + m * s / k) ** (-N * k)
    check_zero(gamma_lst ** N - rr_gamma, "power of the gamma transform")
    if sp.simplify(scv_r.subs(ca2, 1 / k) - 1 / (N * k)) != 0:
        raise ArithmeticError("derivation check failed: gamma shape N k")
    steps.append(Step(
        "Gamma input gaps with shape k (scv 1/k) and mean m: sympy transforms the density. Its "
        "N-th power is the transform of a gamma law with shape Nk and the same scale m/k: mean "
        "N m and scv 1/(Nk) = c_a²/N. So round robin over a gamma renewal stream (qmodel's "
        "Renewal arrivals) gives each node exactly gamma gaps with that scv; for Poisson input "
        "(k = 1) they are Erlang-N.",
        (eq(sp.LaplaceTransform(sp.Function("f")(t), t, s), gamma_lst),
         eq(sp.Function("f")(t), density),
         eq(Rstar(s), rr_gamma))))

    results = (
        Result("thinned_mean", Expect("G"), m / p, "random router, share p: the node's mean gap"),
        Result("thinned_scv", cG2, scv_g, "its scv (Whitt's splitting rule); exact"),
        Result("thinned_lst", Gstar(s), g_lst, "the node's gap law, from the input's A*(s)"),
        Result("thinned_poisson_lst", Gstar(s), poisson_lst, "Poisson(θ) input: Exp(pθ) gaps"),
        Result("thinned_third_moment", Mean(G ** 3) - Mean(H ** 3), gap_third,
               "gamma input; H gamma with G's mean and scv: 0 only for Poisson input or "
               "p = 1"),
        Result("round_robin_mean", Expect("R"), N * m, "round robin over N nodes"),
        Result("round_robin_scv", cR2, ca2 / N, "exact"),
        Result("round_robin_lst", Rstar(s), r_lst, ""),
        Result("round_robin_gamma_lst", Rstar(s), rr_gamma,
               "gamma input of shape k: gamma of shape Nk"),
    )
    return Derivation(
        key="splitting",
        title="Splitting a renewal stream: random thinning and round robin",
        summary="The arrival stream each node behind a static router sees: a random share p "
                "gives gaps of mean m/p and scv p c_a² + 1 - p (Poisson stays Poisson); round "
                "robin over N nodes gives gaps of mean N m and scv c_a²/N (gamma stays gamma).",
        sources=("E. Çinlar (1975), Introduction to Stochastic Processes, Prentice-Hall "
                 "(thinning of Poisson and renewal processes)",
                 "L. Kleinrock (1975), Queueing Systems, vol. I: Theory, Wiley (transforms; "
                 "sums of a random number of random variables)",
                 "W. Whitt (1983), The Queueing Network Analyzer, Bell System Technical "
                 "Journal 62(9), 2779-2815 (the splitting rule p c² + 1 - p)"),
        assumptions=("renewal input: i.i.d. gaps with mean m and scv c_a²",
                     "random router: each arrival goes to the node with probability p, "
                     "independently of the gaps and of the other choices",
                     "round robin: arrivals go to the N nodes in a fixed cyclic order",
                     "each node is solved under its own stream; the streams of different "
                     "nodes are dependent unless the input is Poisson and the split random"),
        steps=tuple(steps), results=results,
        symbols={"p": p, "m": m, "ca2": ca2, "s": s, "theta": theta, "k": k, "N": N,
                 "A": Astar, "t": t},
        implemented_by="qmodel.stationary._cluster (node rate λp and scv p c_a² + 1 - p for a "
                       "random router, gamma gaps; rate λ/N and scv c_a²/N for round robin)")
