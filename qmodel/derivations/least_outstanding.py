"""Least outstanding over identical one-request nodes: the balanced-queue model.

qmodel.theory.jsq.balanced_least_outstanding models a least-outstanding (join the shortest
queue) router over N identical nodes that serve one request at a time. It takes the nodes'
counts to stay balanced, so that with n requests in the cluster the shortest node holds
q_c = floor(n/N); it takes n, as seen by an arrival, from the central-queue system with the same
N servers (M/M/N or Crommelin's M/D/N). How often a request waits at all it corrects with
qmodel's own Markov chain on the busy nodes b and the extra requests e (exponential service):
P(q > 0) is the central queue's P(q_c > 0) scaled by the chain's P(b = N) over Erlang C, and
the law of q given q > 0 is that of q_c given q_c > 0. A request that waits waits for the
equilibrium residual R of the service in progress, q - 1 full services and then its own. This
module states the chain's rates and solves it for one node (M/M/1), derives the rescaled count
law, the residual law, the latency transform and mean, and for exponential service the closed
forms: the node count is geometric with ratio rho^N beyond 0, the probability of waiting is the
chain's w = P(b = N), and the latency is the M/M/c sojourn law with Erlang C replaced by w and
the decay N mu - lambda by mu (1 - rho^N).

Sources: R. Nelson and T. Philips (1989), "An approximation to the response time for shortest
queue routing", ACM SIGMETRICS Performance Evaluation Review 17(1); C. D. Crommelin (1932),
"Delay probability formulae when the holding times are constant", Post Office Electrical
Engineers Journal 25; L. Kleinrock (1975), "Queueing Systems" vol. I (the residual life). The
busy-nodes/extras chain is qmodel's own construction.
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


class _Move(sp.Function):
    """A label: ``_Move(b, e, b2, e2)`` prints as Q((b, e) → (b2, e2)), the rate of that move."""

    nargs = 4

    def _latex(self, printer, exp=None):
        b, e, b2, e2 = (printer._print(a) for a in self.args)
        out = r"Q\left(\left(%s, %s\right) \to \left(%s, %s\right)\right)" % (b, e, b2, e2)
        return out if exp is None else r"%s^{%s}" % (out, exp)

    def _mathml_presentation(self, printer):
        dom = printer.dom
        row = dom.createElement("mrow")

        def add(tag, text):
            el = dom.createElement(tag)
            el.appendChild(dom.createTextNode(text))
            row.appendChild(el)

        add("mi", "Q")
        add("mo", "(")
        row.appendChild(printer._paren_comma_separated(*self.args[:2]))
        add("mo", "→")
        row.appendChild(printer._paren_comma_separated(*self.args[2:]))
        add("mo", ")")
        return row


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
        Results ``balanced_share`` (an Eq: q_c = floor(n/N)), ``md_count_pgf``, the chain's
        rates ``chain_idle``, ``chain_join``, ``chain_extra`` and ``chain_single`` (each with lhs
        Q((b, e) -> (b', e')), the move's target in its arguments), ``waiting_probability``
        (w = P(q > 0) from w_c = P(q_c > 0), the chain's P(b = N) and Erlang C:
        ``symbols["w_c"]``, ``symbols["busy"]``, ``symbols["C"]``), ``share_pmf``,
        ``residual_density``, ``residual_lst``, ``residual_mean`` (E[R]),
        ``deterministic_residual_lst``, ``exponential_residual_lst``, ``latency_lst``,
        ``latency_mean`` (in the labels P(q > 0) and E[max(q - 1, 0)], ``symbols["waiting"]``
        and ``symbols["excess"]``), ``excess_mean`` (E[max(q - 1, 0)] from w, w_c and the
        central E[max(q_c - 1, 0)], ``symbols["central_excess"]``), ``central_waiting`` and
        ``central_excess`` (P(q_c > 0) and E[max(q_c - 1, 0)] as sums over the count law
        p(k) = P(n = k), ``symbols["p"]``), ``latency_mean_central`` (the mean in w, w_c and
        the central E[max(q_c - 1, 0)]), and for exponential service ``mu``, ``load``,
        ``rho``, ``erlang_c``, ``mmn_waiting`` (w = P(b = N)), ``mmn_share_pmf``, ``decay``,
        ``mmn_latency_lst``, ``mmn_latency_cdf`` and ``mmn_latency_mean`` (in ``symbols["w"]``).

    Examples
    --------
    >>> d = derive()
    >>> m, s = d.symbols["m"], d.symbols["s"]
    >>> d.result("deterministic_residual_lst").series(s, 0, 2)     # mean m/2
    1 - m*s/2 + O(s**2)
    >>> sp.simplify(d.result("exponential_residual_lst") - 1 / (1 + m * s))
    0
    >>> sp.expand(d.result("chain_extra") + d.result("chain_single"))   # each busy node
    b*mu
    >>> C = d.symbols["C"]
    >>> d.result("waiting_probability").subs(d.symbols["w_c"], C)     # M/M/N: w = P(b = N)
    Min(1, Prob(Eq(b, N)))
    """
    mm, pk = mmc.derive(), pollaczek_khinchine.derive()
    lam, mu, t = (mm.symbols[v] for v in ("lam", "mu", "t"))
    a, rho, C = mm.symbols["a"], mm.symbols["rho"], mm.symbols["C"]
    c = mm.symbols["c"]
    m, x, y, s = sp.symbols("m x y s", positive=True)
    z = sp.Symbol("z")
    N = sp.Symbol("N", integer=True, positive=True)
    n, j, k, r, b, e = (sp.Symbol(v, integer=True, nonnegative=True) for v in "njkrbe")
    q, qc, S, R, L = sp.symbols("q q_c S R L")                  # labels only
    m2, m3, ER = Expect("S^2"), Expect("S^3"), Expect("R")
    eta = sp.Symbol("eta", positive=True)
    w, wc = sp.symbols("w w_c", positive=True)                  # P(q > 0), P(q_c > 0)
    Sst = sp.Function("S^*", _latex=_power_latex)
    Rst, Lst = sp.Function("R^*"), sp.Function("L^*")
    f_R, Pi, p = sp.Function("f_R"), sp.Function("Pi"), sp.Function("p")
    pi, pi1 = sp.Function("pi"), sp.Function("pi_1")
    waiting, excess = Prob(gt(q, 0)), Mean(sp.Max(q - 1, 0))
    central_waiting, central_excess = Prob(gt(qc, 0)), Mean(sp.Max(qc - 1, 0))
    busy = Prob(eq(b, N))
    steps = []

    # --- the balanced split ------------------------------------------------------------------
    check_zero(r * (qc + 1) + (N - r) * qc - (qc * N + r), "balanced counts add up to n")
    steps.append(Step(
        "N identical nodes, each serving one request at a time (max_batch_size 1, one "
        "instance), FIFO; Poisson arrivals of rate λ; i.i.d. service times S with mean m and "
        "transform S*(s) = E[exp(-sS)]. The least-outstanding router sends each request to a "
        "node with the fewest outstanding requests. qmodel's approximation: the counts stay "
        "balanced, within one of each other. Writing n = q_cN + r with 0 ≤ r < N, r nodes hold "
        "q_c + 1 requests and N - r hold q_c (sympy checks that they add up to n), so the node "
        "that a request joins holds q_c = ⌊n/N⌋, n being the count the request finds. A block "
        "of N values of n gives each q_c. (The subscript c: n comes from the central queue, "
        "steps 2 and 3; the count q that the model uses differs from q_c only in how often it "
        "is 0, steps 4 to 6.)",
        (eq(n, qc * N + r), eq(qc, sp.floor(n / N)),
         eq(Prob(eq(qc, j)), sp.Sum(p(k), (k, j * N, j * N + N - 1))))))

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

    # --- how often a request waits: the busy-nodes/extras chain ------------------------------
    idle = sp.Piecewise((lam, b < N), (0, True))
    join = sp.Piecewise((lam, sp.Eq(b, N)), (0, True))
    extra = sp.Min(e, b) * mu
    single = (b - sp.Min(e, b)) * mu
    moves = ((_Move(b, e, b + 1, e), idle), (_Move(b, e, b, e + 1), join),
             (_Move(b, e, b, e - 1), extra), (_Move(b, e, b - 1, e), single))
    check_zero(sp.expand(extra + single - b * mu), "departures at rate b mu")
    check_zero((idle + join).subs(b, N) - lam, "arrivals at rate lambda, all busy")
    check_zero((idle + join).subs(b, N - 1 - r) - lam, "arrivals at rate lambda, one idle")
    steps.append(Step(
        "How often a request waits. With n from the central queue q_c > 0 iff n ≥ N: the "
        "central queue has every server busy whenever n ≥ N, more often than least "
        "outstanding, whose nodes can sit idle while others still hold a queue (a node "
        "empties while another holds two). qmodel's own construction corrects this: a "
        "continuous-time Markov chain on (b, e), b busy nodes and e extra requests queued "
        "behind those in service, for exponential service of rate μ per node and Poisson "
        "arrivals of rate λ. An arrival takes an idle node if there is one (b + 1), and "
        "otherwise joins a shortest queue (e + 1). The extras are taken to be spread evenly "
        "over the busy nodes, so min(e, b) nodes hold extras: each finishes at rate μ and "
        "starts its next request (e - 1), while each of the b - min(e, b) nodes holding a "
        "single request finishes and idles (b - 1). The table gives the rates Q of the four "
        "moves (all others 0). The departures add up to bμ and the arrivals to λ (sympy), as "
        "in the central queue with n = b + e, but b can be below min(n, N). The stationary "
        "law π (πQ = 0, Σπ = 1) gives P(b = N), which by PASTA is the probability that an "
        "arrival finds every node busy; qmodel solves the chain numerically "
        "(qmodel.theory.jsq.waiting_probability, with e cut where its geometric tail, of "
        "ratio ρ, is below 10⁻¹²).",
        tuple(eq(move, rate) for move, rate in moves)
        + (eq(moves[2][0] + moves[3][0], b * mu),
           eq(busy, sp.Sum(pi(N, e), (e, 0, sp.oo))))))

    e1 = sp.Symbol("e", integer=True, positive=True)            # e >= 1
    one_node = {N: 1, b: 1}
    check_zero(extra.subs(one_node).subs(e, e1) - mu, "N = 1: an extra finishes at rate mu")
    check_zero(single.subs(one_node).subs(e, e1), "N = 1: no lone request behind extras")
    check_zero(single.subs(one_node).subs(e, 0) - mu, "N = 1: the lone request finishes")
    check_zero(extra.subs(one_node).subs(e, 0), "N = 1: no extra to finish")
    check_zero(join.subs(one_node) - lam, "N = 1: arrivals join the queue")
    check_zero(idle.subs({N: 1, b: 0}) - lam, "N = 1: an arrival takes the idle node")
    mm1 = (1 - a) * a ** n
    check_zero((lam - mu * mm1.subs(n, n + 1) / mm1).subs(a, lam / mu), "M/M/1 cut equations")
    tail_sum, _ = geometric_sum(a, j)
    check_zero((1 - a) * tail_sum - 1, "M/M/1 law sums to 1")
    busy_one = sp.simplify((1 - a) * a * tail_sum)
    check_zero(busy_one - a, "P(b = 1) = a")
    erlang_one = mm.result("erlang_c").subs(c, 1)
    check_zero(sp.cancel(erlang_one.doit().subs(rho, a) - busy_one),
               "Erlang C with one server is P(b = 1)")
    steps.append(Step(
        "One node, N = 1: sympy sets N = 1 and b = 1 in the rates. From (1, e) with e ≥ 1 the "
        "only departure is the extra's, at rate μ, to (1, e - 1); from (1, 0) the lone "
        "request's, at rate μ, to (0, 0); arrivals go up at rate λ. So n = b + e is the "
        "birth-death chain of M/M/1, its law π₁ is geometric in a = λ/μ (= ρ for one node; "
        "sympy checks the cut equations and sums the law to 1), and P(b = 1) = P(n ≥ 1) = a, "
        "which is Erlang C with one server (sympy). The ratio P(b = N)/C used in the next "
        "step is 1 for one node: the correction leaves a single node alone.",
        (eq(_Move(1, e1, 1, e1 - 1), extra.subs(one_node).subs(e, e1)),
         eq(_Move(1, e1, 0, e1), single.subs(one_node).subs(e, e1)),
         eq(_Move(1, 0, 0, 0), single.subs(one_node).subs(e, 0)),
         eq(_Move(1, e, 1, e + 1), join.subs(one_node)),
         eq(lam * pi1(n), mu * pi1(n + 1)), eq(pi1(n), mm1),
         eq(Prob(eq(b, 1)), sp.Sum(pi1(n), (n, 1, sp.oo))), eq(Prob(eq(b, 1)), busy_one),
         eq(C, erlang_one), eq(C, a))))

    waiting_rule = sp.Min(wc * busy / C, 1)
    pc = sp.Function("pc")                                       # P(q_c = j) meanwhile
    rescaled = w / wc * pc(j)
    total = _split_sums((1 - w) + sp.Sum(rescaled, (j, 1, sp.oo)))
    check_zero(total.subs(sp.Sum(pc(j), (j, 1, sp.oo)), wc) - 1, "rescaled law sums to 1")
    check_zero(rescaled / w - pc(j) / wc, "the law given q > 0 is that of q_c given q_c > 0")
    check_zero(_split_sums(sp.Sum((j - 1) * rescaled, (j, 1, sp.oo)))
               - sp.expand(w / wc * _split_sums(sp.Sum((j - 1) * pc(j), (j, 1, sp.oo)))),
               "E[max(q - 1, 0)] scales with P(q > 0)")
    excess_rule = w / wc * central_excess
    share_rule = w / wc * Prob(eq(qc, j))
    steps.append(Step(
        "qmodel's approximation for any service law: a request waits (probability "
        "w = P(q > 0)) as often as in the central queue (w_c = P(q_c > 0): Erlang C for "
        "M/M/N, Crommelin's M/D/N otherwise) times the chain's P(b = N) over Erlang C, C, "
        "both for exponential service at the same offered load a = λm; w is capped at 1. The "
        "law of the node count given that it is positive stays that of q_c: P(q = j), j ≥ 1, "
        "is P(q_c = j) scaled by w/w_c, and P(q = 0) = 1 - w. sympy checks that the law "
        "still sums to 1 (the P(q_c = j), j ≥ 1, add up to w_c), that given q > 0 it is the "
        "law of q_c given q_c > 0, and that the mean queued ahead beyond one, "
        "E[max(q - 1, 0)], scales by the same factor w/w_c. For exponential service w_c = C "
        "(step 11), so w is the chain's P(b = N) itself; for other service laws the scaling "
        "is an approximation whose error is measured (see the assumptions). At N = 128 and "
        "load 0.9, for example, P(b = N) is 0.045 against C = 0.169.",
        (eq(waiting, w), eq(central_waiting, wc), eq(w, waiting_rule),
         eq(Prob(eq(q, 0)), 1 - w), eq(Prob(eq(q, j)), share_rule),
         eq(sp.Sum(Prob(eq(q, j)), (j, 0, sp.oo)),
            1 - w + w / wc * sp.Sum(Prob(eq(qc, j)), (j, 1, sp.oo))),
         eq(sp.Sum(Prob(eq(q, j)), (j, 0, sp.oo)), 1),
         eq(Prob(eq(q, j), gt(q, 0)), Prob(eq(qc, j), gt(qc, 0))),
         eq(excess, excess_rule))))

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
        "Given q (with the law of step 6): with q = 0 the request starts at once and L = S. "
        "With q ≥ 1 it waits for the residual R, then the q - 1 requests queued ahead of it, "
        "i.i.d. services Sᵢ, then its own service S; these are independent, so the transform "
        "is a product and E[L | q] = E[R] + qm (sympy differentiates at s = 0). Averaging "
        "over q gives L*(s); qmodel evaluates it on a time lattice of step h = m/100 with "
        "FFTs (the sum by Horner's rule in S*(s)).",
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
    latency_mean_central = m + w * ER + m * w / wc * central_excess
    check_zero(sp.expand(latency_mean.subs({excess: excess_rule, waiting: w})
                         - latency_mean_central),
               "mean in the central queue's labels")
    from_lst = as_label(from_lst)
    pos = sp.Sum(Prob(eq(q, j)), (j, 1, sp.oo))
    mean_q = sp.Sum(j * Prob(eq(q, j)), (j, 1, sp.oo))
    # the central labels in the count law, checked on N = 2 and n < TRUNCATED with symbolic p(n)
    share = {jj: sum(p(kk) for kk in range(TRUNCATED) if kk // 2 == jj)
             for jj in range((TRUNCATED - 1) // 2 + 1)}
    by_share = sum(max(jj - 1, 0) * pj for jj, pj in share.items())
    by_count = sum((sp.floor(sp.Rational(kk, 2)) - 1) * p(kk) for kk in range(2, TRUNCATED))
    check_zero(by_share - by_count, "E[max(q_c - 1, 0)] from the count law")
    waiting_sum = sp.Sum(p(k), (k, N, sp.oo))
    excess_count = sp.Sum((sp.floor(k / N) - 1) * p(k), (k, N, sp.oo))
    steps.append(Step(
        "The mean is -d/ds L*(s) at s = 0. sympy differentiates the transform with the moment "
        "series S*(s) = 1 - ms + E[S²]s²/2 - ... and R*(s) = 1 - E[R]s + ..., and checks that "
        "the result is the direct expectation Σ P(q = j) E[L | q = j]. Using ΣP(q = j) = "
        "P(q > 0) and E[q] = P(q > 0) + E[max(q - 1, 0)], it is m plus the residual for a "
        "request that waits plus m per request queued ahead. In the central queue's count: "
        "q_c > 0 iff n ≥ N, and q_c - 1 = ⌊n/N⌋ - 1 (sympy checks the regrouping for N = 2 "
        f"with n < {TRUNCATED}). With step 6 (w = P(q > 0), w_c = P(q_c > 0)) the mean in "
        "those central labels has the residual term and the term of the requests ahead both "
        "scaled by w/w_c against the uncorrected model's (sympy substitutes).",
        (eq(Mean(L), from_lst),
         eq(Mean(L), latency_mean),
         eq(waiting, pos), eq(mean_q, excess + waiting),
         eq(central_waiting, sp.Sum(Prob(eq(qc, j)), (j, 1, sp.oo))),
         eq(central_waiting, waiting_sum),
         eq(central_excess, sp.Sum((j - 1) * Prob(eq(qc, j)), (j, 1, sp.oo))),
         eq(central_excess, excess_count),
         eq(Mean(L), latency_mean_central))))

    # --- exponential service: the M/M/N count in closed form ---------------------------------
    block = sp.summation(above, (n, j * N, j * N + N - 1)).replace(
        lambda e: isinstance(e, sp.Piecewise),       # the branch for rho != 1
        lambda e: next(value for value, cond in e.args if cond == sp.true))
    erlang = mm.result("erlang_c").subs(c, N)
    central_pmf = C * (1 - rho ** N) * rho ** (N * (j - 1))
    share_pmf = w * (1 - rho ** N) * rho ** (N * (j - 1))
    p0_value = 1 / (sp.Sum(a ** k / sp.factorial(k), (k, 0, N - 1))
                    + a ** N / (sp.factorial(N) * (1 - rho)))
    check_zero(block - central_pmf.subs(C, p0 * a ** N / (sp.factorial(N) * (1 - rho))),
               "block sum")
    check_zero(erlang - p0_value * a ** N / (sp.factorial(N) * (1 - rho)),
               "Erlang C is p_0 a^N/(N!(1 - rho))")
    ratio_sum, cond = geometric_sum(rho ** N, j)
    total = sp.simplify(C * (1 - rho ** N) * ratio_sum)
    check_zero(total - C, "P(q_c > 0) is Erlang C")
    check_zero(waiting_rule.subs(wc, total) - sp.Min(busy, 1), "M/M/N: P(q > 0) = P(b = N)")
    check_zero(share_rule.subs({wc: C, Prob(eq(qc, j)): central_pmf}) - share_pmf,
               "rescaled geometric law")
    check_zero(sp.simplify(w * (1 - rho ** N) * ratio_sum) - w, "P(q > 0) = w")
    excess_mmn = sp.simplify(w * (1 - rho ** N) * rho ** N
                             * sp.diff(geometric_sum(y, j)[0], y).subs(y, rho ** N))
    check_zero(excess_mmn - w * rho ** N / (1 - rho ** N), "E[max(q-1,0)] for M/M/N")
    steps.append(Step(
        "Exponential service, M/M/N count. For j ≥ 1 the block n = jN, ..., jN + N - 1 lies "
        "in the geometric part of p; sympy sums it. With Erlang C, C = p(0)a^N/(N!(1 - ρ)) "
        "(the M/M/c derivation), P(q_c = j) is geometric in j with ratio ρ^N, and summing it "
        "over j ≥ 1 (sympy; it converges for ρ^N < 1) gives P(q_c > 0) = C, the central "
        "queue's probability of waiting: w_c = C. So step 6 gives w = min(P(b = N), 1) = "
        "P(b = N), the chain's own (the Erlang C of the ratio cancels), and "
        "P(q = j) = w(1 - ρ^N)ρ^(N(j-1)): still geometric with ratio ρ^N, and summing to w "
        "(sympy). The mean number queued ahead beyond one follows from the derivative of the "
        "geometric series.",
        (eq(sp.Sum(above, (n, j * N, j * N + N - 1)), sp.factor(block)),
         eq(Prob(eq(qc, j)), central_pmf),
         eq(central_waiting, C * (1 - rho ** N) * sp.Sum(rho ** (N * (j - 1)), (j, 1, sp.oo))),
         eq(central_waiting, total), eq(C, erlang),
         eq(w, waiting_rule.subs(wc, C)), eq(w, busy),
         eq(Prob(eq(q, j)), share_pmf),
         eq(excess, w * rho ** N / (1 - rho ** N)))))

    # --- exponential service: the latency ----------------------------------------------------
    exp_s = mu / (mu + s)
    summed, _ = geometric_sum(rho ** N * exp_s, j)
    mmn_lst = sp.simplify((1 - w) * exp_s + exp_s * exp_s * w * (1 - rho ** N) * summed)
    mmn_lst_tidy = (1 - w) * exp_s + w * exp_s * eta / (eta + s)
    check_zero(mmn_lst - mmn_lst_tidy.subs(eta, mu * (1 - rho ** N)), "M/M/N latency transform")
    sojourn = mm.result("sojourn_cdf").subs(mm.symbols["gamma"], eta).subs(C, w)
    check_zero(sp.laplace_transform(sp.diff(sojourn, t), t, s, noconds=True)
               + sojourn.subs(t, 0) - mmn_lst_tidy, "latency cdf by its transform")
    survival = ((1 - w) * sp.exp(-mu * t)
                + w * (mu * sp.exp(-eta * t) - eta * sp.exp(-mu * t)) / (mu - eta))
    check_zero(1 - sojourn - survival, "latency survival function")
    mmn_mean = sp.simplify(-sp.diff(mmn_lst_tidy, s).subs(s, 0))
    check_zero(mmn_mean - (1 / mu + w / eta), "M/M/N mean from the transform")
    check_zero((latency_mean.subs({ER: 1 / mu, m: 1 / mu, waiting: w, excess: excess_mmn})
                - mmn_mean).subs(eta, mu * (1 - rho ** N)), "general mean, M/M/N count")
    ratio3 = sp.factor(sp.cancel((1 - rho ** 3) / (1 - rho)))
    steps.append(Step(
        "With R*(s) = S*(s) = μ/(μ + s) and the geometric law of q, sympy sums L*(s): a "
        "request that waits (probability w) adds to its own Exp(μ) service an Exp(η) wait, "
        "η = μ(1 - ρ^N), a geometric number of exponential services. Its distribution is "
        "the M/M/c sojourn formula with Erlang C replaced by w and the decay γ = Nμ - λ by η "
        "(sympy checks the transform of its density; removable singularity at η = μ), and "
        "its mean adds w/η to 1/μ, as the general mean with E[R] = m does. In the survival "
        "function the waiting part, the second term, is the uncorrected model's (Erlang C in "
        "place of w) scaled by w/C. Since 1 - ρ^N = (1 - ρ)(1 + ρ + ... + ρ^(N-1)) < "
        "N(1 - ρ) for N > 1 (shown for N = 3), the tail decays more slowly than the central "
        "queue's: a request is bound to the node it joined.",
        (eq(Lst(s), (1 - w) * exp_s + exp_s ** 2 * w * (1 - rho ** N)
            * sp.Sum((rho ** N * exp_s) ** j, (j, 0, sp.oo))),
         eq(Lst(s), mmn_lst_tidy), eq(eta, mu * (1 - rho ** N)),
         eq(Prob(le(L, t)), sojourn), eq(Prob(gt(L, t)), survival),
         eq(Mean(L), 1 / mu + w / eta),
         eq((1 - rho ** 3) / (1 - rho), ratio3))))

    results = (
        Result("balanced_share", None, eq(qc, sp.floor(n / N)),
               "qmodel's approximation: the node a request joins holds ⌊n/N⌋ of the central "
               "queue's n"),
        Result("md_count_pgf", Pi(z), pgf_tidy, "M/D/N count (Crommelin); a = λm"),
        Result("chain_idle", moves[0][0], idle, "the busy-nodes/extras chain (qmodel's "
                                                "own): an arrival takes an idle node"),
        Result("chain_join", moves[1][0], join, "all busy: it joins a shortest queue"),
        Result("chain_extra", moves[2][0], extra, "a node holding extras finishes"),
        Result("chain_single", moves[3][0], single, "a node holding one request finishes"),
        Result("waiting_probability", waiting, waiting_rule,
               "w; w_c = P(q_c > 0), P(b = N) from the chain (exponential service, load "
               "a = λm), C Erlang C"),
        Result("share_pmf", Prob(eq(q, j)), share_rule, "j ≥ 1; P(q = 0) = 1 - w"),
        Result("residual_density", f_R(x), Prob(gt(S, x)) / m, "equilibrium residual R of S"),
        Result("residual_lst", Rst(s), residual_lst, ""),
        Result("residual_mean", ER, residual_mean, ""),
        Result("deterministic_residual_lst", Rst(s), det_lst, "S = m: R uniform on (0, m)"),
        Result("exponential_residual_lst", Rst(s), exp_residual, "exponential S: R*(s) = "
                                                                 "S*(s)"),
        Result("latency_lst", Lst(s), latency_lst, "what qmodel inverts on its lattice"),
        Result("latency_mean", Mean(L), latency_mean, "in the labels of q"),
        Result("excess_mean", excess, excess_rule, ""),
        Result("central_waiting", central_waiting, waiting_sum,
               "p(k) = P(n = k), the central queue's count"),
        Result("central_excess", central_excess, excess_count, ""),
        Result("latency_mean_central", Mean(L), latency_mean_central,
               "w = P(q > 0), w_c = P(q_c > 0)"),
        Result("mu", mu, 1 / m, "exponential service: rate"),
        Result("load", a, lam / mu, "offered load"),
        Result("rho", rho, a / N, "load per node"),
        Result("erlang_c", C, erlang, "M/M/N (central queue) probability of waiting"),
        Result("mmn_waiting", waiting, busy, "exponential service: w, the chain's"),
        Result("mmn_share_pmf", Prob(eq(q, j)), share_pmf, "j ≥ 1; P(q = 0) = 1 - w"),
        Result("decay", eta, mu * (1 - rho ** N), "decay rate of the latency tail"),
        Result("mmn_latency_lst", Lst(s), mmn_lst_tidy, "exponential service"),
        Result("mmn_latency_cdf", Prob(le(L, t)), sojourn, "t ≥ 0, η ≠ μ"),
        Result("mmn_latency_mean", Mean(L), 1 / mu + w / eta, ""),
    )
    return Derivation(
        key="least_outstanding",
        title="Least outstanding over one-request nodes: the balanced-queue model",
        summary="The latency behind a least-outstanding router when the nodes' counts are "
                "taken as balanced, the cluster's count from the central queue and how often "
                "a request waits from a chain on busy nodes and extra requests (qmodel's own): "
                "the chain's rates and its one-node case M/M/1, the rescaled count law, the "
                "equilibrium residual, the latency transform and mean, and for exponential "
                "service a geometric node count, the chain's P(b = N) in place of Erlang C "
                "and an M/M/c-like sojourn law with decay μ(1 - ρ^N).",
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
                     "qmodel's approximation, its own construction: how often a request waits "
                     "comes from a Markov chain on busy nodes and extra requests with the "
                     "extras spread evenly over the busy nodes, solved for exponential "
                     "service; for other service laws the central queue's probability of "
                     "waiting is scaled by that chain's ratio to Erlang C at the same load",
                     "measured against qmodel's simulator (validation/router_accuracy.py): "
                     "over 30 configurations with deterministic service (N = 2-128, loads "
                     "0.3-0.95) p99 within 0.5% (median) and 5.0% (worst), p95 within 0.5% "
                     "and 4.5%; lognormal jitter with cv 0.3 and exponential service within "
                     "6% on p99, except one exponential case at load 0.95 where the "
                     "simulator's own 99% confidence interval is ±9.5%"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "m": m, "N": N, "a": a, "rho": rho, "C": C, "s": s,
                 "t": t, "x": x, "z": z, "j": j, "k": k, "n": n, "q": q, "q_c": qc, "b": b,
                 "e": e, "w": w, "w_c": wc, "eta": eta, "m2": m2, "m3": m3, "ER": ER,
                 "S_star": Sst, "R_star": Rst, "p": p, "waiting": waiting, "excess": excess,
                 "central_waiting": central_waiting, "central_excess": central_excess,
                 "busy": busy},
        implemented_by="qmodel.theory.jsq.balanced_least_outstanding (L*(s) on a lattice of "
                       "step m/100 by FFT, count from _central_count: M/M/N, or M/D/N through "
                       "qmodel.theory.classical.mdc; P(q > 0) corrected with the chain's "
                       "P(b = N) from qmodel.theory.jsq.waiting_probability)")
