"""Least outstanding over identical one-request nodes: the balanced-queue model.

qmodel.theory.jsq.balanced_least_outstanding models a least-outstanding (join the shortest
queue) router over N identical nodes that serve one request at a time. It takes the nodes'
counts to stay balanced, so that with n requests in the cluster the shortest node holds
q = floor(n/N); it takes n, as seen by an arrival, from the central-queue system with the same
N servers (M/M/N or Crommelin's M/D/N), and lets the request wait for the equilibrium residual
R of the service in progress there, q - 1 full services and then its own. This module derives
the residual law, the latency transform and mean, and for exponential service the closed forms:
the node count is geometric with ratio rho^N beyond 0, the probability of waiting is Erlang C,
and the latency is the M/M/c sojourn law with the decay N mu - lambda replaced by
mu (1 - rho^N).

Sources: R. Nelson and T. Philips (1989), "An approximation to the response time for shortest
queue routing", ACM SIGMETRICS Performance Evaluation Review 17(1); C. D. Crommelin (1932),
"Delay probability formulae when the holding times are constant", Post Office Electrical
Engineers Journal 25; L. Kleinrock (1975), "Queueing Systems" vol. I (the residual life).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import mmc, pollaczek_khinchine
from .core import (Derivation, Expect, Mean, Prob, Result, Step, check_zero, eq,
                   geometric_sum, gt, le)

__all__ = ["derive"]

TRUNCATED = 7          # the count values n < TRUNCATED in the finite checks (N = 2)


def _power_latex(self, printer, exp=None):
    """S*(s)^J, not sympy's (S*)^J(s)."""
    out = r"S^{*}\left(%s\right)" % ", ".join(printer._print(a) for a in self.args)
    return out if exp is None else r"%s^{%s}" % (out, exp)


def _split_sums(expr):
    """expr with every sum split into sums of single terms, constant factors taken out."""
    def split(total):
        index = total.limits[0][0]
        out = 0
        for term in sp.Add.make_args(sp.expand(total.function)):
            const, var = term.as_independent(index, as_Add=False)
            out += const * sp.Sum(var, *total.limits)
        return out
    return sp.expand(expr.replace(lambda e: isinstance(e, sp.Sum), split))


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``balanced_share`` (an Eq: q = floor(n/N)), ``residual_density``,
        ``residual_lst``, ``residual_mean`` (E[R]), ``deterministic_residual_lst``,
        ``exponential_residual_lst``, ``md_count_pgf``, ``latency_lst``, ``latency_mean``
        (in the labels P(q > 0) and E[max(q - 1, 0)], ``symbols["waiting"]`` and
        ``symbols["excess"]``), ``waiting_probability`` and ``excess_mean`` (those labels as
        sums over the count law p(k) = P(n = k), ``symbols["p"]``), and for exponential
        service ``mu``, ``load``, ``rho``, ``erlang_c``, ``mmn_share_pmf``, ``decay``,
        ``mmn_latency_lst``, ``mmn_latency_cdf`` and ``mmn_latency_mean``.

    Examples
    --------
    >>> d = derive()
    >>> m, s = d.symbols["m"], d.symbols["s"]
    >>> d.result("deterministic_residual_lst").series(s, 0, 2)     # mean m/2
    1 - m*s/2 + O(s**2)
    >>> sp.simplify(d.result("exponential_residual_lst") - 1 / (1 + m * s))
    0
    """
    mm, pk = mmc.derive(), pollaczek_khinchine.derive()
    lam, mu, t = (mm.symbols[v] for v in ("lam", "mu", "t"))
    a, rho, C = mm.symbols["a"], mm.symbols["rho"], mm.symbols["C"]
    c = mm.symbols["c"]
    m, x, y, s = sp.symbols("m x y s", positive=True)
    z = sp.Symbol("z")
    N = sp.Symbol("N", integer=True, positive=True)
    n, j, k, r = (sp.Symbol(v, integer=True, nonnegative=True) for v in "njkr")
    q, S, R, L = sp.symbols("q S R L")                          # labels only
    m2, m3, ER = Expect("S^2"), Expect("S^3"), Expect("R")
    eta = sp.Symbol("eta", positive=True)
    Sst = sp.Function("S^*", _latex=_power_latex)
    Rst, Lst = sp.Function("R^*"), sp.Function("L^*")
    f_R, Pi, p = sp.Function("f_R"), sp.Function("Pi"), sp.Function("p")
    waiting, excess = Prob(gt(q, 0)), Mean(sp.Max(q - 1, 0))
    steps = []

    # --- the balanced split ------------------------------------------------------------------
    check_zero(r * (q + 1) + (N - r) * q - (q * N + r), "balanced counts add up to n")
    steps.append(Step(
        "N identical nodes, each serving one request at a time (max_batch_size 1, one "
        "instance), FIFO; Poisson arrivals of rate λ; i.i.d. service times S with mean m and "
        "transform S*(s) = E[exp(-sS)]. The least-outstanding router sends each request to a "
        "node with the fewest outstanding requests. qmodel's approximation: the counts stay "
        "balanced, within one of each other. Writing n = qN + r with 0 ≤ r < N, r nodes hold "
        "q + 1 requests and N - r hold q (sympy checks that they add up to n), so the node "
        "that a request joins holds q = ⌊n/N⌋, n being the count the request finds. A block of "
        "N values of n gives each q.",
        (eq(n, q * N + r), eq(q, sp.floor(n / N)),
         eq(Prob(eq(q, j)), sp.Sum(p(k), (k, j * N, j * N + N - 1))))))

    # --- the count: M/M/N and M/D/N ----------------------------------------------------------
    p0 = sp.Symbol("p_0", positive=True)
    below = p0 * a ** n / sp.factorial(n)
    above = p0 * a ** N / sp.factorial(N) * rho ** (n - N)
    steps.append(Step(
        "With balanced counts min(n, N) nodes are busy, as in the central queue that holds all "
        "requests in one FIFO line before N servers; the model takes the law of n from that "
        "system, as Nelson & Philips (1989) approximate the response time of shortest-queue "
        "routing from the central queue's state probabilities. By PASTA an arrival finds n "
        "with the time-stationary law, p(k) = P(n = k). For exponential service (rate "
        "μ = 1/m) the central queue is M/M/N, a birth-death chain with death rate "
        "min(n, N)μ, and p is the law of the M/M/c derivation with c = N, a = λ/μ, ρ = a/N.",
        (eq(p(n), sp.Piecewise((below, n <= N), (above, True))),)))

    P0s, Bz = sp.Symbol("B_0"), sp.Symbol("B_z")              # the finite sums, solved for
    PiS = sp.Symbol("Pi")
    arrivals = sp.exp(a * (z - 1))
    crommelin = eq(PiS, arrivals * (P0s + z ** (-N) * (PiS - Bz)))
    pgf = sp.factor(sp.solve(crommelin, PiS)[0])
    sum_low = sp.Sum(p(k), (k, 0, N - 1))
    sum_low_z = sp.Sum(p(k) * z ** k, (k, 0, N - 1))
    pgf_tidy = arrivals * sp.Sum(p(k) * (z ** N - z ** k), (k, 0, N - 1)) / (z ** N - arrivals)
    check_zero(pgf - (arrivals * (z ** N * P0s - Bz) / (z ** N - arrivals)), "Crommelin pgf")
    one = pgf_tidy.subs(N, 1).doit()
    pk0 = sp.solve(eq(sp.limit(one, z, 1), 1), p(0))[0]
    check_zero(pk0 - (1 - a), "p(0) = 1 - a for one server")
    pk_queue = pk.result("queue_pgf").subs(pk.symbols["rho"], a).subs(
        sp.Function("A")(z), arrivals)
    check_zero(one.subs(p(0), pk0) - pk_queue, "Crommelin with N = 1 is Pollaczek-Khinchine")
    steps.append(Step(
        "For constant service S = m the central queue is M/D/N. Crommelin (1932): the "
        "min(n, N) requests in service at time τ have all left by τ + m, while those waiting "
        "at τ and those arriving in (τ, τ + m] are all still there, so the count n′ one "
        "service later is max(n - N, 0) plus a Poisson(a) number A of arrivals, a = λm. In "
        "equilibrium its generating function Π(z) = E[zⁿ] satisfies the equation below (the "
        "values n < N contribute p(k), those n ≥ N contribute p(k)z^(k-N)); sympy solves it "
        "for Π. "
        "The N unknowns p(0), ..., p(N - 1) are fixed by Π(1) = 1 and by the numerator "
        "vanishing at the N - 1 roots of z^N = exp(a(z - 1)) in the unit disc other than "
        "z = 1 (Π is analytic there); qmodel computes the law in "
        "qmodel.theory.classical.mdc. With N = 1 the condition Π(1) = 1 gives p(0) = 1 - a "
        "(sympy takes the limit), and Π is the Pollaczek-Khinchine generating function with "
        "S*(s) = exp(-ms) (sympy checks the difference is 0).",
        (eq(sp.Symbol("n'"), sp.Max(n - N, 0) + sp.Symbol("A")),
         eq(Pi(z), arrivals * (sum_low + z ** (-N) * (Pi(z) - sum_low_z))),
         eq(Pi(z), pgf_tidy),
         eq(p(0), pk0.subs(a, lam * m)))))

    # --- the equilibrium residual ------------------------------------------------------------
    inner_lst = sp.integrate(sp.exp(-s * x), (x, 0, y))
    check_zero(inner_lst - (1 - sp.exp(-s * y)) / s, "inner integral")
    residual_lst = (1 - Sst(s)) / (m * s)
    inner_mean = sp.integrate(x, (x, 0, y))
    residual_mean = m2 / (2 * m)
    moments = 1 - m * s + m2 * s ** 2 / 2 - m3 * s ** 3 / 6
    series = sp.expand(sp.series(residual_lst.subs(Sst(s), moments), s, 0, 3).removeO())
    check_zero(-series.coeff(s, 1) - residual_mean, "mean of R from its transform")
    check_zero(2 * series.coeff(s, 2) - m3 / (3 * m), "second moment of R")
    steps.append(Step(
        "A request that waits finds the node's server busy; the model gives the service in "
        "progress the equilibrium residual R of S, with density P(S > x)/m (the residual life "
        "of the renewal process of services, Kleinrock 1975, sec. 5.2), independent of q. Its "
        "transform: write P(S > x) = E[1{x < S}] and exchange integral and expectation; sympy "
        "integrates exp(-sx) and x over (0, y) for y = S. So R*(s) = (1 - S*(s))/(ms) and "
        "E[R] = E[S²]/(2m); the expansion of R*(s) with the moment series of S*(s) gives the "
        "same mean (and E[R²] = E[S³]/(3m)).",
        (eq(f_R(x), Prob(gt(S, x)) / m),
         eq(sp.Integral(sp.exp(-s * x), (x, 0, y)), inner_lst),
         eq(Rst(s), residual_lst),
         eq(sp.Integral(x, (x, 0, y)), inner_mean),
         eq(ER, residual_mean),
         eq(Rst(s), series + sp.Order(s ** 3)))))

    det_lst = (1 - sp.exp(-m * s)) / (m * s)
    check_zero(residual_lst.subs(Sst(s), sp.exp(-m * s)) - det_lst, "constant service")
    uniform_lst = sp.integrate(sp.exp(-s * x) / m, (x, 0, m))
    check_zero(det_lst - uniform_lst, "deterministic residual is uniform")
    det_mean = residual_mean.subs(m2, m ** 2)
    exp_density = sp.exp(-x / m) / m
    exp_lst = sp.simplify(sp.laplace_transform(exp_density, x, s, noconds=True))
    exp_residual = sp.simplify(residual_lst.subs(Sst(s), exp_lst))
    check_zero(exp_residual - exp_lst, "exponential residual is the service law")
    check_zero(sp.integrate(exp_density, (x, y, sp.oo)) / m - exp_density.subs(x, y),
               "P(S > x)/m is the exponential density")
    exp_mean = residual_mean.subs(m2, 2 * m ** 2)
    steps.append(Step(
        "Constant service, S = m: P(S > x) = 1 on (0, m), so R is uniform on (0, m); sympy "
        "checks that R*(s) with S*(s) = exp(-ms) is the transform of the uniform density, "
        "and E[S²] = m² gives E[R] = m/2. Exponential service with mean m: P(S > x)/m is the "
        "density of S itself (sympy), R*(s) = S*(s), and E[S²] = 2m² gives E[R] = m: the "
        "residual is memoryless, so here the model's residual is exact.",
        (eq(Rst(s), det_lst), eq(Rst(s), sp.Integral(sp.exp(-s * x) / m, (x, 0, m))),
         eq(ER, det_mean),
         eq(Sst(s), exp_lst), eq(Rst(s), exp_residual), eq(ER, exp_mean))))

    # --- the latency given q, its transform --------------------------------------------------
    cond_lst = Rst(s) * Sst(s) ** (q - 1) * Sst(s)
    cond_mean = sp.expand(-sp.diff(cond_lst.subs({Rst(s): 1 - ER * s,
                                                  Sst(s): 1 - m * s}), s).subs(s, 0))
    check_zero(cond_mean - (ER + q * m), "conditional mean")
    latency_lst = (Prob(eq(q, 0)) * Sst(s)
                   + Rst(s) * Sst(s) * sp.Sum(Prob(eq(q, j)) * Sst(s) ** (j - 1),
                                              (j, 1, sp.oo)))
    steps.append(Step(
        "Given q: with q = 0 the request starts at once and L = S. With q ≥ 1 it waits for "
        "the residual R, then the q - 1 requests queued ahead of it, i.i.d. services Sᵢ, "
        "then its own service S; these are independent, so the transform is a product and "
        "E[L | q] = E[R] + qm (sympy differentiates at s = 0). Averaging over q gives L*(s); "
        "qmodel evaluates it on a time lattice of step h = m/100 with FFTs (the sum by "
        "Horner's rule in S*(s)).",
        (eq(L, sp.Piecewise((S, sp.Eq(q, 0)), (R + sp.Sum(sp.Indexed("S", j), (j, 1, q - 1))
                                                + S, True))),
         eq(Mean(sp.exp(-s * L), q), cond_lst),
         eq(Mean(L, q), cond_mean),
         eq(Lst(s), latency_lst))))

    # --- the mean ----------------------------------------------------------------------------
    pq = sp.Function("pq")                      # P(q = j) while sympy differentiates
    as_label = lambda e: e.replace(pq, lambda jj: Prob(eq(q, jj)))          # noqa: E731
    expanded = latency_lst.replace(Prob, lambda event: pq(event.rhs)).subs(
        {Rst(s): 1 - ER * s + sp.Symbol("E2") * s ** 2 / 2, Sst(s): moments})
    from_lst = _split_sums(sp.expand((-sp.diff(expanded, s).subs(s, 0)).doit()))
    direct = pq(0) * m + sp.Sum(pq(j) * cond_mean.subs(q, j), (j, 1, sp.oo))
    check_zero(from_lst - _split_sums(direct), "mean from the transform = direct expectation")
    W, X = sp.symbols("W X")                    # P(q > 0) and E[max(q - 1, 0)] meanwhile
    as_moments = from_lst.subs({sp.Sum(j * pq(j), (j, 1, sp.oo)): X + W,
                                sp.Sum(pq(j), (j, 1, sp.oo)): W, pq(0): 1 - W})
    check_zero(as_moments - (m + W * ER + m * X), "mean rewritten")
    latency_mean = m + waiting * ER + m * excess
    from_lst = as_label(from_lst)
    pos = sp.Sum(Prob(eq(q, j)), (j, 1, sp.oo))
    mean_q = sp.Sum(j * Prob(eq(q, j)), (j, 1, sp.oo))
    excess_sum = sp.Sum((j - 1) * Prob(eq(q, j)), (j, 1, sp.oo))
    # the labels in the count law, checked on N = 2 and n < TRUNCATED with symbolic p(n)
    share = {jj: sum(p(kk) for kk in range(TRUNCATED) if kk // 2 == jj)
             for jj in range((TRUNCATED - 1) // 2 + 1)}
    by_share = sum(max(jj - 1, 0) * pj for jj, pj in share.items())
    by_count = sum((sp.floor(sp.Rational(kk, 2)) - 1) * p(kk) for kk in range(2, TRUNCATED))
    check_zero(by_share - by_count, "E[max(q - 1, 0)] from the count law")
    waiting_sum = sp.Sum(p(k), (k, N, sp.oo))
    excess_count = sp.Sum((sp.floor(k / N) - 1) * p(k), (k, N, sp.oo))
    steps.append(Step(
        "The mean is -d/ds L*(s) at s = 0. sympy differentiates the transform with the moment "
        "series S*(s) = 1 - ms + E[S²]s²/2 - ... and R*(s) = 1 - E[R]s + ..., and checks that "
        "the result is the direct expectation Σ P(q = j) E[L | q = j]. Using ΣP(q = j) = "
        "P(q > 0) and E[q] = P(q > 0) + E[max(q - 1, 0)], it is m plus the residual for a "
        "request that waits plus m per request queued ahead. In the central queue's count: q > 0 "
        "iff n ≥ N, and q - 1 = ⌊n/N⌋ - 1 (sympy checks the regrouping for N = 2 with "
        f"n < {TRUNCATED}).",
        (eq(Mean(L), from_lst),
         eq(Mean(L), latency_mean),
         eq(waiting, pos), eq(waiting, waiting_sum),
         eq(excess, excess_sum), eq(excess, excess_count),
         eq(mean_q, excess + waiting))))

    # --- exponential service: the M/M/N count in closed form ---------------------------------
    block = sp.summation(above, (n, j * N, j * N + N - 1)).replace(
        lambda e: isinstance(e, sp.Piecewise),       # the branch for rho != 1
        lambda e: next(value for value, cond in e.args if cond == sp.true))
    erlang = mm.result("erlang_c").subs(c, N)
    share_pmf = C * (1 - rho ** N) * rho ** (N * (j - 1))
    p0_value = 1 / (sp.Sum(a ** k / sp.factorial(k), (k, 0, N - 1))
                    + a ** N / (sp.factorial(N) * (1 - rho)))
    check_zero(block - share_pmf.subs(C, p0 * a ** N / (sp.factorial(N) * (1 - rho))),
               "block sum")
    check_zero(erlang - p0_value * a ** N / (sp.factorial(N) * (1 - rho)),
               "Erlang C is p_0 a^N/(N!(1 - rho))")
    ratio_sum, cond = geometric_sum(rho ** N, j)
    total = sp.simplify(C * (1 - rho ** N) * ratio_sum)
    check_zero(total - C, "P(q > 0) is Erlang C")
    excess_mmn = sp.simplify(C * (1 - rho ** N) * rho ** N
                             * sp.diff(geometric_sum(y, j)[0], y).subs(y, rho ** N))
    check_zero(excess_mmn - C * rho ** N / (1 - rho ** N), "E[max(q-1,0)] for M/M/N")
    steps.append(Step(
        "Exponential service, M/M/N count. For j ≥ 1 the block n = jN, ..., jN + N - 1 lies "
        "in the geometric part of p; sympy sums it. With Erlang C, C = p(0)a^N/(N!(1 - ρ)) "
        "(the M/M/c derivation), P(q = j) is geometric in j with ratio ρ^N, and summing it "
        "over j ≥ 1 (sympy; it converges for ρ^N < 1) gives P(q > 0) = C: the model's "
        "probability of waiting is the central queue's, Erlang C. The mean number queued "
        "ahead follows from the derivative of the geometric series.",
        (eq(sp.Sum(above, (n, j * N, j * N + N - 1)), sp.factor(block)),
         eq(Prob(eq(q, j)), share_pmf),
         eq(waiting, C * (1 - rho ** N) * sp.Sum(rho ** (N * (j - 1)), (j, 1, sp.oo))),
         eq(waiting, total), eq(C, erlang),
         eq(excess, C * rho ** N / (1 - rho ** N)))))

    # --- exponential service: the latency ----------------------------------------------------
    exp_s = mu / (mu + s)
    summed, _ = geometric_sum(rho ** N * exp_s, j)
    mmn_lst = sp.simplify((1 - C) * exp_s + exp_s * exp_s * C * (1 - rho ** N) * summed)
    mmn_lst_tidy = (1 - C) * exp_s + C * exp_s * eta / (eta + s)
    check_zero(mmn_lst - mmn_lst_tidy.subs(eta, mu * (1 - rho ** N)), "M/M/N latency transform")
    sojourn = mm.result("sojourn_cdf").subs(mm.symbols["gamma"], eta)
    check_zero(sp.laplace_transform(sp.diff(sojourn, t), t, s, noconds=True)
               + sojourn.subs(t, 0) - mmn_lst_tidy, "latency cdf by its transform")
    mmn_mean = sp.simplify(-sp.diff(mmn_lst_tidy, s).subs(s, 0))
    check_zero(mmn_mean - (1 / mu + C / eta), "M/M/N mean from the transform")
    check_zero((latency_mean.subs({ER: 1 / mu, m: 1 / mu, waiting: C, excess: excess_mmn})
                - mmn_mean).subs(eta, mu * (1 - rho ** N)), "general mean, M/M/N count")
    ratio3 = sp.factor(sp.cancel((1 - rho ** 3) / (1 - rho)))
    steps.append(Step(
        "With R*(s) = S*(s) = μ/(μ + s) and the geometric law of q, sympy sums L*(s): a "
        "request that waits (probability C) adds to its own Exp(μ) service an Exp(η) wait, "
        "η = μ(1 - ρ^N), a geometric number of exponential services. Its distribution is "
        "the M/M/c sojourn formula with the decay γ = Nμ - λ replaced by η (sympy checks "
        "the transform of its density; removable singularity at η = μ), and its mean adds "
        "C/η to 1/μ, as the general mean with E[R] = m does. Since 1 - ρ^N = (1 - ρ)(1 + ρ "
        "+ ... + ρ^(N-1)) < N(1 - ρ) for N > 1 (shown for N = 3), the tail decays more "
        "slowly than the central queue's: a request is bound to the node it joined.",
        (eq(Lst(s), (1 - C) * exp_s + exp_s ** 2 * C * (1 - rho ** N)
            * sp.Sum((rho ** N * exp_s) ** j, (j, 0, sp.oo))),
         eq(Lst(s), mmn_lst_tidy), eq(eta, mu * (1 - rho ** N)),
         eq(Prob(le(L, t)), sojourn), eq(Mean(L), 1 / mu + C / eta),
         eq((1 - rho ** 3) / (1 - rho), ratio3))))

    results = (
        Result("balanced_share", None, eq(q, sp.floor(n / N)),
               "qmodel's approximation: the node a request joins holds ⌊n/N⌋"),
        Result("residual_density", f_R(x), Prob(gt(S, x)) / m, "equilibrium residual R of S"),
        Result("residual_lst", Rst(s), residual_lst, ""),
        Result("residual_mean", ER, residual_mean, ""),
        Result("deterministic_residual_lst", Rst(s), det_lst, "S = m: R uniform on (0, m)"),
        Result("exponential_residual_lst", Rst(s), exp_residual, "exponential S: R*(s) = "
                                                                 "S*(s)"),
        Result("md_count_pgf", Pi(z), pgf_tidy, "M/D/N count (Crommelin); a = λm"),
        Result("latency_lst", Lst(s), latency_lst, "what qmodel inverts on its lattice"),
        Result("latency_mean", Mean(L), latency_mean, "in the labels below"),
        Result("waiting_probability", waiting, waiting_sum, "p(k) = P(n = k), the central "
                                                            "queue's count"),
        Result("excess_mean", excess, excess_count, ""),
        Result("mu", mu, 1 / m, "exponential service: rate"),
        Result("load", a, lam / mu, "offered load"),
        Result("rho", rho, a / N, "load per node"),
        Result("erlang_c", C, erlang, "M/M/N probability of waiting"),
        Result("mmn_share_pmf", Prob(eq(q, j)), share_pmf, "j ≥ 1; P(q = 0) = 1 - C"),
        Result("decay", eta, mu * (1 - rho ** N), "decay rate of the latency tail"),
        Result("mmn_latency_lst", Lst(s), mmn_lst_tidy, "exponential service"),
        Result("mmn_latency_cdf", Prob(le(L, t)), sojourn, "t ≥ 0, η ≠ μ"),
        Result("mmn_latency_mean", Mean(L), 1 / mu + C / eta, ""),
    )
    return Derivation(
        key="least_outstanding",
        title="Least outstanding over one-request nodes: the balanced-queue model",
        summary="The latency behind a least-outstanding router when the nodes' counts are "
                "taken as balanced and the cluster's count from the central queue: the "
                "equilibrium residual, the latency transform and mean, and for exponential "
                "service a geometric node count, Erlang C and an M/M/c-like sojourn law "
                "with decay μ(1 - ρ^N).",
        sources=("R. Nelson and T. Philips (1989), An approximation to the response time for "
                 "shortest queue routing, ACM SIGMETRICS Performance Evaluation Review 17(1), "
                 "181-189 (JSQ from the central queue's state probabilities)",
                 "C. D. Crommelin (1932), Delay probability formulae when the holding times "
                 "are constant, Post Office Electrical Engineers Journal 25 (the M/D/c count)",
                 "L. Kleinrock (1975), Queueing Systems, vol. I: Theory, Wiley, sec. 5.2 (the "
                 "residual life)"),
        assumptions=("N identical nodes, each with one instance serving one request at a "
                     "time (max_batch_size 1), FIFO, unlimited queue",
                     "Poisson arrivals of total rate λ; i.i.d. service times S with mean m, "
                     "independent of the arrivals; stability: λm < N",
                     "least-outstanding router: each request joins a node with the fewest "
                     "outstanding requests",
                     "qmodel's approximation, not a theorem: the counts stay balanced, so the "
                     "node joined holds ⌊n/N⌋ of the n requests present, and n (seen by an "
                     "arrival, PASTA) has the law of the central-queue M/D/N or M/M/N system; "
                     "the service in progress has the equilibrium residual law, independent "
                     "of n",
                     "measured against qmodel's simulator (validation/router_accuracy.py): p99 "
                     "within about 5% where the p99 lies among waiting requests; pessimistic "
                     "near where waiting starts, because the central queue has every server "
                     "busy more often than least outstanding does"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "m": m, "N": N, "a": a, "rho": rho, "C": C, "s": s,
                 "t": t, "x": x, "z": z, "j": j, "k": k, "n": n, "q": q, "eta": eta,
                 "m2": m2, "m3": m3, "ER": ER, "S_star": Sst, "R_star": Rst, "p": p,
                 "waiting": waiting, "excess": excess},
        implemented_by="qmodel.theory.jsq.balanced_least_outstanding (L*(s) on a lattice of "
                       "step m/100 by FFT, count from _central_count: M/M/N, or M/D/N through "
                       "qmodel.theory.classical.mdc)")
