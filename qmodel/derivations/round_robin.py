"""Round robin over N exponential servers: each sees Erlang-N interarrivals, a GI/M/1 queue.

Sources: L. Kleinrock (1975), "Queueing Systems" vol. I, ch. 6 (the G/M/m queue: the
geometric law at arrival epochs and the root sigma = A*(mu - mu sigma)); D. G. Kendall (1953),
Ann. Math. Statist. 24 (the embedded chain at arrivals).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, geometric_sum, gt, le

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``interarrival_lst``, ``sigma_equation`` (an Eq in sigma, lambda, mu and N),
        ``sigma_two_nodes`` (the explicit root for N = 2), ``waiting_sf`` and ``sojourn_cdf``.

    Examples
    --------
    >>> d = derive()
    >>> lam, mu = d.symbols["lam"], d.symbols["mu"]
    >>> round(float(d.result("sigma_two_nodes").subs({lam: 1.6, mu: 1})), 6)
    0.739853
    """
    lam, mu, t, s, sigma = sp.symbols("lambda mu t s sigma", positive=True)
    N = sp.Symbol("N", integer=True, positive=True)
    k, j = (sp.Symbol(v, integer=True, nonnegative=True) for v in "kj")
    A = sp.Function("A^*")
    Wq, T, Q = sp.symbols("W_q T Q")
    steps = []

    exp_lst = sp.laplace_transform(lam * sp.exp(-lam * t), t, s, noconds=True)
    erlang_lst = sp.simplify(sp.laplace_transform(
        lam ** 3 * t ** 2 * sp.exp(-lam * t) / 2, t, s, noconds=True))
    check_zero(erlang_lst - exp_lst ** 3, "Erlang-3 transform")
    steps.append(Step(
        "A round-robin router sends every N-th request of a Poisson(λ) stream to a given node, "
        "so a node's interarrival time is a sum of N independent Exp(λ) times: Erlang(N, λ), "
        "with mean N/λ. Its transform is the N-th power of the exponential one (sympy "
        "transforms the densities; shown for N = 3). Each node, one exponential server of rate "
        "μ, is then a GI/M/1 queue (the nodes are dependent, each node's law is exact).",
        (eq(A(s), exp_lst ** N), eq(sp.LaplaceTransform(
            lam ** 3 * t ** 2 * sp.exp(-lam * t) / 2, t, s), erlang_lst))))

    beta = sp.Symbol("beta_k")
    poisson_sum = sp.simplify(sp.summation(sigma ** k * sp.exp(-mu * t) * (mu * t) ** k
                                           / sp.factorial(k), (k, 0, sp.oo)))
    check_zero(poisson_sum - sp.exp(-mu * (1 - sigma) * t), "geometric Poisson sum")
    steps.append(Step(
        "Embedded chain at arrival epochs: Q, the number an arrival finds, gains 1 and loses the "
        "departures during the next interarrival time. While busy, departures are Poisson(μ), so "
        "j + 1 - i of them (i the new count) happen with probability β_k, k = j + 1 - i, the "
        "Poisson(μt) law mixed over the interarrival law. Try a geometric law "
        "P(Q = j) = (1 - σ)σ^j in the balance equations for i >= 1: they reduce to "
        "σ = Σ_k σ^k β_k, and sympy sums the series inside the mixture.",
        (eq(beta, sp.Integral(sp.exp(-mu * t) * (mu * t) ** k / sp.factorial(k)
                              * sp.Function("a")(t), (t, 0, sp.oo))),
         eq(sp.Sum(sigma ** k * sp.exp(-mu * t) * (mu * t) ** k / sp.factorial(k),
                   (k, 0, sp.oo)), poisson_sum),
         eq(sigma, A(mu * (1 - sigma))))))

    equation = eq(sigma, (lam / (lam + mu * (1 - sigma))) ** N)
    cubic = sp.factor(sigma * (lam + mu * (1 - sigma)) ** 2 - lam ** 2)
    roots = [r for r in sp.solve(cubic, sigma) if r != 1]
    # the root in (0, 1) when lambda/2 < mu: the smaller one
    root = sp.simplify(min(roots, key=lambda r: float(r.subs({lam: 1, mu: 1}))))
    value = float(root.subs({lam: sp.Rational(8, 5), mu: 1}))
    if not 0 < value < 1:
        raise ArithmeticError("derivation check failed: the N = 2 root is not in (0, 1)")
    steps.append(Step(
        "For Erlang(N, λ) interarrivals the equation is below. σ = 1 always solves it; when "
        "the node is stable (λ/N < μ) there is exactly one root in (0, 1), which is the one "
        "meant. For N = 2 sympy factors out σ - 1 and solves the quadratic left; the smaller "
        "root lies in (0, 1) (σ = "
        f"{value:.6f} at λ = 1.6, μ = 1). For larger N solve numerically.",
        (equation, eq(cubic, 0), eq(sigma, root))))

    ratio_sum, _ = geometric_sum(sigma * mu / (mu + s), j)
    wait_lst = sp.simplify((1 - sigma) * ratio_sum)
    split = (1 - sigma) + sigma * mu * (1 - sigma) / (mu * (1 - sigma) + s)
    check_zero(wait_lst - split, "waiting-time transform")
    wait_sf = sigma * sp.exp(-mu * (1 - sigma) * t)
    sojourn = 1 - sp.exp(-mu * (1 - sigma) * t)
    check_zero(sp.laplace_transform(sp.diff(sojourn, t), t, s, noconds=True)
               - wait_lst * mu / (mu + s), "sojourn transform")
    steps.append(Step(
        "An arrival finding j waits for j exponential services (FIFO; the one in progress is "
        "memoryless): the geometric mixture of Erlang(j, μ) laws, summed by sympy, is an atom "
        "1 - σ at 0 plus σ times Exp(μ(1 - σ)). Adding its own Exp(μ) service makes the "
        "sojourn time exactly Exp(μ(1 - σ)) (sympy checks the transforms).",
        (eq(Mean(sp.exp(-s * Wq)), wait_lst), eq(Mean(sp.exp(-s * Wq)), split),
         eq(Prob(gt(Wq, t)), wait_sf), eq(Prob(le(T, t)), sojourn))))

    results = (
        Result("interarrival_lst", A(s), (lam / (lam + s)) ** N, "Erlang(N, λ)"),
        Result("sigma_equation", None, equation, "σ: the root in (0, 1)"),
        Result("sigma_two_nodes", sigma, root, "N = 2"),
        Result("waiting_sf", Prob(gt(Wq, t)), wait_sf, "t >= 0"),
        Result("sojourn_cdf", Prob(le(T, t)), sojourn, "t >= 0"),
    )
    return Derivation(
        key="round_robin",
        title="Round robin over exponential servers: the GI/M/1 root",
        summary="Each of N nodes behind a round-robin router sees Erlang-N interarrival times; "
                "with one exponential server per node the sojourn time is exponential, with a "
                "rate from the GI/M/1 root σ.",
        sources=("L. Kleinrock (1975), Queueing Systems, vol. I: Theory, Wiley, ch. 6 (the "
                 "queue G/M/m)",
                 "D. G. Kendall (1953), Stochastic processes occurring in the theory of queues "
                 "and their analysis by the method of the imbedded Markov chain, Annals of "
                 "Mathematical Statistics 24"),
        assumptions=("Poisson arrivals of total rate λ, routed cyclically to N nodes",
                     "each node: one server, exponential service of rate μ, FIFO, no batching",
                     "stability: λ/N < μ"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "mu": mu, "t": t, "sigma": sigma, "N": N},
        implemented_by="not implemented in qmodel.theory yet (issue 4); the simulator "
                       "implements the router")
