"""The GI/G/c fast-server approximation: exact for M/M/c, GI/G/1 at c = 1, Allen-Cunneen's mean.

qmodel.theory.gigc replaces c servers by one server c times faster (service S/c, same
arrivals), solves that GI/G/1 queue by Lindley's recursion, and scales its probability of
waiting by Erlang C over rho. This module derives why: the scaling makes it exact for M/M/c,
leaves GI/G/1 alone, turns Kingman's mean for the fast server into Allen-Cunneen's, and keeps
the heavy-traffic limit of GI/G/c.

Sources: J. Köllerström (1974), "Heavy traffic theory for queues with several servers. I",
J. Appl. Prob. 11; A. O. Allen (1990), "Probability, Statistics, and Queueing Theory", 2nd ed.;
W. Whitt (1993), "Approximations for the GI/G/m queue", Production and Operations Management 2.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import kingman, mmc
from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, gt, le

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``erlang_c`` (C in c, a and rho), ``rho``, ``load`` (a = lambda/mu,
        mu = 1/E[S]), ``decay`` (gamma = c mu - lambda), ``waiting_sf`` (the approximation,
        through the fast server's P(W_1 > t)), ``fast_mm1_waiting_sf``, ``mmc_waiting_sf``,
        ``mmc_sojourn_cdf``, ``waiting_mean``, ``fast_kingman`` and ``allen_cunneen``;
        ``symbols["W1_sf"]`` is the label P(W_1 > t) and ``symbols["W1_mean"]`` the label
        E[W_1], to substitute.

    Examples
    --------
    >>> d = derive()
    >>> c, a, rho = d.symbols["c"], d.symbols["a"], d.symbols["rho"]
    >>> scale = (d.result("erlang_c") / rho).subs(rho, a / c)
    >>> sp.simplify(scale.subs(c, 1).doit())                  # one server: no scaling
    1
    """
    mm, kg = mmc.derive(), kingman.derive()
    lam, mu, t = (mm.symbols[k] for k in ("lam", "mu", "t"))
    x = sp.Symbol("x", positive=True)
    c, a, rho, C, gam = (mm.symbols[k] for k in ("c", "a", "rho", "C", "gamma"))
    ca2, cs2, m1 = kg.symbols["ca2"], kg.symbols["cs2"], kg.symbols["m1"]
    var_s = sp.Symbol("sigma_S^2", positive=True)
    B = sp.Symbol("B_c", positive=True)
    Wq, W1, T = sp.symbols("W_q W_1 T")                       # labels only
    Cf = sp.Function("C")
    k = sp.Symbol("k", integer=True, nonnegative=True)
    W1_sf, W1_mean = Prob(gt(W1, t)), Mean(W1)
    steps = []

    # --- the approximation ------------------------------------------------------------------
    erlang = mm.result("erlang_c")                           # in c, a and rho
    fast_load = sp.simplify(lam * m1 / c)
    scv_fast = sp.simplify((var_s / c ** 2) / (m1 / c) ** 2)
    check_zero(scv_fast - var_s / m1 ** 2, "S/c has the SCV of S")
    approx = C / rho * W1_sf
    steps.append(Step(
        "c identical servers share one FIFO queue; arrivals are renewal with rate λ, services "
        "i.i.d. S with mean E[S] = 1/μ. Replace the c servers by one server c times faster: "
        "service S/c, the same arrivals. Its utilization is ρ = a/c with a = λE[S], that of "
        "each of the c servers, and S/c has the squared coefficient of variation c_s² of S "
        "(sympy). Let W₁ be its FIFO waiting time (a GI/G/1 queue). The approximation keeps "
        "the shape of W₁'s tail and rescales the probability of waiting by C(c, a)/ρ, Erlang "
        "C over ρ (Erlang C from the M/M/c derivation).",
        (eq(lam * Mean(sp.Symbol("S") / c), fast_load),
         eq(sp.Function("Var")(sp.Symbol("S") / c) / Mean(sp.Symbol("S") / c) ** 2, scv_fast),
         eq(Prob(gt(Wq, t)), Cf(c, a) / rho * W1_sf),
         eq(C, erlang))))

    # --- exact for M/M/c ----------------------------------------------------------------------
    erlang_one = sp.simplify(erlang.subs(rho, a / c).subs(c, 1).doit())
    check_zero(erlang_one - a, "C(1, a) = a")
    mm_sf = mm.explicit("waiting_sf")                        # C exp(-gamma t), explicit
    fast_sf = sp.simplify(mm_sf.subs(c, 1).doit().subs(mu, c * mu))
    fast_sf_rho = rho * sp.exp(-gam * t)
    check_zero(fast_sf - fast_sf_rho.subs({rho: lam / (c * mu), gam: c * mu - lam}),
               "the M/M/1 fast server")
    steps.append(Step(
        "Poisson arrivals and exponential service of rate μ: the fast server is M/M/1 with "
        "service rate cμ. The M/M/c waiting time with one server has C(1, a) = a (sympy "
        "evaluates the sum); with μ replaced by cμ the load a becomes λ/(cμ) = ρ, so the fast "
        "server waits with probability ρ, and its tail decays at the rate γ = cμ - λ.",
        (eq(Cf(1, a), erlang_one), eq(W1_sf, fast_sf_rho), eq(gam, c * mu - lam))))

    mmc_sf = C * sp.exp(-gam * t)
    check_zero(mm.result("waiting_sf") - mmc_sf, "M/M/c tail")
    check_zero(mm.result("decay") - (c * mu - lam), "M/M/c decay rate")
    exact = sp.simplify(approx.subs(W1_sf, fast_sf_rho))
    check_zero(exact - mmc_sf, "the approximation is exact for M/M/c")
    steps.append(Step(
        "The M/M/c waiting time (M/M/c derivation) has the same decay rate γ = cμ - λ, "
        "because with all c servers busy departures are Poisson of rate cμ, just as from the "
        "fast server. Only the probability of waiting differs: C for c servers, ρ for the fast "
        "one. So C/ρ times the fast server's tail is the M/M/c tail identically (sympy checks "
        "that the difference is 0).",
        (eq(Prob(gt(Wq, t)), mmc_sf),
         eq(C / rho * W1_sf, sp.Mul(C / rho, fast_sf_rho, evaluate=False)),
         eq(C / rho * W1_sf, exact))))

    sojourn_sf = sp.exp(-mu * t) + sp.integrate(
        mu * sp.exp(-mu * x) * mmc_sf.subs(t, t - x), (x, 0, t), conds="none")
    sojourn_cdf = mm.result("sojourn_cdf")                   # in C, gamma, mu, t
    check_zero(1 - sojourn_sf - sojourn_cdf, "the sojourn time is the M/M/c one")
    steps.append(Step(
        "qmodel adds an independent service time S to the approximate wait, as FIFO M/M/c "
        "does (a customer's wait depends only on those ahead). With S ~ Exp(μ) sympy "
        "convolves, and the result is the M/M/c sojourn-time distribution (checked against "
        "the M/M/c derivation; removable singularity at γ = μ).",
        (eq(Prob(gt(T, t)), sp.exp(-mu * t) + sp.Integral(
            mu * sp.exp(-mu * x) * Prob(gt(Wq, t - x)), (x, 0, t))),
         eq(Prob(le(T, t)), sojourn_cdf))))

    # --- one server --------------------------------------------------------------------------
    scale_one = sp.simplify((erlang / rho).subs(rho, a / c).subs(c, 1).doit())
    if scale_one != 1:
        raise ArithmeticError("derivation check failed: the scale at c = 1 is not 1")
    steps.append(Step(
        "With one server the fast server is the server itself, ρ = a = C(1, a), and the scale "
        "is 1 at every load (sympy): the approximation is the GI/G/1 waiting time, whatever "
        "the arrival and service laws.",
        (eq(Cf(1, a), erlang_one), eq(rho, (a / c).subs(c, 1)),
         eq(Cf(1, a) / rho, scale_one))))

    # --- the mean: Allen-Cunneen ------------------------------------------------------------
    mean_wait = C / rho * W1_mean
    steps.append(Step(
        "The mean wait is the integral of the tail, so the mean scales the same way.",
        (eq(Mean(Wq), sp.Integral(Prob(gt(Wq, t)), (t, 0, sp.oo))),
         eq(Mean(Wq), mean_wait))))

    kingman_one = kg.result("kingman")                       # rho/(1-rho) (ca2+cs2)/2 E[S]
    fast_kingman = kingman_one.subs(m1, m1 / c)
    scaled_kingman = C / (1 - rho) * (ca2 + cs2) / 2 * m1 / c
    check_zero(C / rho * fast_kingman - scaled_kingman, "scaled Kingman")
    approx_mean = sp.simplify((mean_wait.subs(W1_mean, fast_kingman)).subs(rho, lam * m1 / c))
    allen = kg.result("allen_cunneen")                       # C/(c/E[S] - lambda) (ca2+cs2)/2
    check_zero(approx_mean - allen, "C/rho times the fast server's Kingman mean is Allen-Cunneen")
    allen_mu = allen.subs(m1, 1 / mu)
    steps.append(Step(
        "Take Kingman's approximation for the fast server's mean wait: its utilization is ρ, "
        "its SCVs are c_a² and c_s², its mean service time E[S]/c. Multiplied by C/ρ and with "
        "ρ = λE[S]/c, it is exactly Allen-Cunneen's GI/G/c formula (the Kingman derivation; "
        "sympy checks the difference is 0). Written with μ = 1/E[S] it is the M/M/c mean "
        "C/(cμ - λ) times the variability factor (c_a² + c_s²)/2.",
        (eq(Mean(W1), fast_kingman),
         eq(C / rho * Mean(W1), scaled_kingman),
         eq(Mean(Wq), allen), eq(Mean(Wq), allen_mu))))

    # --- heavy traffic -----------------------------------------------------------------------
    below = sp.Sum(a ** k / sp.factorial(k), (k, 0, c - 1))
    erlang_b = erlang.subs(below, B)
    rewritten = 1 / (1 + (1 - rho) * sp.factorial(c) * B / a ** c)
    check_zero(erlang_b - rewritten, "Erlang C rewritten")
    limit_c = sp.limit(rewritten, rho, 1, dir="-")
    bound_fast = kg.result("kingman_bound").subs(m1, m1 / c)   # lambda (Var A + Var(S/c)) / ...
    lam_rho = rho * c / m1
    heavy = sp.factor(sp.limit(sp.simplify(((1 - rho) * bound_fast).subs(kg.symbols["lam"],
                                                                          lam_rho)),
                               rho, 1, dir="-"))
    heavy_kingman = sp.factor(sp.limit(sp.simplify((1 - rho) * fast_kingman), rho, 1, dir="-"))
    check_zero(heavy - heavy_kingman, "heavy-traffic limits agree")
    if limit_c != 1:
        raise ArithmeticError("derivation check failed: Erlang C does not tend to 1")
    steps.append(Step(
        "Heavy traffic. Köllerström (1974) showed that as ρ → 1 the GI/G/c wait is "
        "approximately exponential with mean λ(Var A + Var S/c²)/(2(1 - ρ)): (1 - ρ)W_q has "
        "the limit of the fast single server (Kingman's bound for service S/c; Kingman 1961). "
        "Writing Erlang C with B_c, the sum of aᵏ/k! over k < c, shows that C → 1, so the "
        "scale C/ρ → 1 and the approximation has the same limit; sympy takes both limits.",
        (eq(B, below), eq(C, rewritten), eq(sp.Limit(C, rho, 1, dir="-"), limit_c),
         eq(sp.Limit((1 - rho) * Mean(Wq), rho, 1, dir="-"), heavy))))

    results = (
        Result("erlang_c", C, erlang, "Erlang C: the M/M/c probability of waiting"),
        Result("rho", rho, a / c, "utilization of each server, and of the fast server"),
        Result("load", a, lam / mu, "offered load, μ = 1/E[S]"),
        Result("decay", gam, c * mu - lam, "decay rate of the M/M/c (and fast M/M/1) tail"),
        Result("waiting_sf", Prob(gt(Wq, t)), approx,
               "the approximation (qmodel.theory.gigc); W₁: the fast server's wait"),
        Result("fast_mm1_waiting_sf", W1_sf, fast_sf_rho, "M/M/1 with service rate cμ"),
        Result("mmc_waiting_sf", Prob(gt(Wq, t)), mmc_sf,
               "M/M/c, exact; equal to waiting_sf with the M/M/1 fast server"),
        Result("mmc_sojourn_cdf", Prob(le(T, t)), sojourn_cdf,
               "M/M/c sojourn, exact, what gigc computes for Poisson arrivals and "
               "exponential service; γ ≠ μ"),
        Result("waiting_mean", Mean(Wq), mean_wait, "mean of the approximation"),
        Result("fast_kingman", Mean(W1), fast_kingman, "Kingman for the fast server"),
        Result("allen_cunneen", Mean(Wq), allen_mu,
               "waiting_mean with fast_kingman: Allen-Cunneen"),
    )
    return Derivation(
        key="fast_server",
        title="GI/G/c as one fast server, scaled by Erlang C",
        summary="The waiting time of c servers approximated by that of one server c times "
                "faster with its probability of waiting scaled by C/ρ: exact for M/M/c, GI/G/1 "
                "for one server, Allen-Cunneen's mean with Kingman's, and the heavy-traffic "
                "limit of GI/G/c.",
        sources=("J. Köllerström (1974), Heavy traffic theory for queues with several "
                 "servers. I, Journal of Applied Probability 11, 544-552",
                 "A. O. Allen (1990), Probability, Statistics, and Queueing Theory, 2nd ed., "
                 "Academic Press (the Allen-Cunneen approximation)",
                 "W. Whitt (1993), Approximations for the GI/G/m queue, Production and "
                 "Operations Management 2(2), 114-161",
                 "J. F. C. Kingman (1961), The single server queue in heavy traffic, "
                 "Proceedings of the Cambridge Philosophical Society 57"),
        assumptions=("renewal arrivals of rate λ (interarrival SCV c_a²)",
                     "c identical servers, i.i.d. service times S (mean E[S] = 1/μ, SCV "
                     "c_s²), one FIFO queue of unlimited size",
                     "stability: ρ = λE[S]/c < 1",
                     "exact for Poisson arrivals with exponential service, and for c = 1; an "
                     "approximation otherwise"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "c": c, "a": a, "rho": rho, "C": C, "t": t, "gamma": gam,
                 "ca2": ca2, "cs2": cs2, "m1": m1, "W1_sf": W1_sf, "W1_mean": W1_mean},
        implemented_by="qmodel.theory.lindley.gigc (the fast server by Lindley's recursion "
                       "on a lattice, or for Poisson arrivals the Pollaczek-Khinchine formula "
                       "on it, scaled by erlang_c / rho)")
