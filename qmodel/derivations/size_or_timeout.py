"""Batch formation under size-or-timeout batching: the formation time and the batch size.

Triton's dynamic batcher with a queue delay D and an instance that is always free: a batch
starts with the first request after the previous dispatch and leaves when p_min requests are
there or when its first request has waited D, whichever comes first.

Sources: S. M. Ross, "Introduction to Probability Models", ch. 5 (the Poisson process and the
Erlang law of its arrival epochs); the same formation law for inference servers is used by
Horváth, Paolieri, Picano and Vicario (MASCOTS 2025), as cited in qmodel's theory notes.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, le

__all__ = ["derive"]

CHECKED_UP_TO = 4       # identities in n checked by sympy for n = 1..this


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``formation_cdf``, ``batch_size_pmf``, ``formation_mean``, ``batch_mean`` and
        ``request_wait_mean``, in terms of lambda, D and n = p_min - 1 (``symbols["n"]``).

    Examples
    --------
    >>> d = derive()
    >>> lam, D, n = d.symbols["lam"], d.symbols["D"], d.symbols["n"]
    >>> d.result("batch_mean").subs({n: 1}).doit()        # p_min = 2: 1 + P(N(D) >= 1)
    2 - exp(-D*lambda)
    """
    lam, D, t, x = sp.symbols("lambda D t x", positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    j, i = sp.Symbol("j", integer=True, nonnegative=True), sp.Symbol("i", integer=True)
    F, K, G, Nt, ND = sp.symbols("F K G_n N(t) N(D)")
    steps = []

    steps.append(Step(
        "After a dispatch the instance is free, so the next batch starts with the next "
        "arrival (an Exp(λ) time later, by memorylessness). Let G_n be the time from that "
        "first request to the n-th request after it, n = p_min - 1, and N(t) the number of "
        "arrivals in the t after it. The batch leaves at F = min(G_n, D) and holds the first "
        "request plus those arrived by then.",
        (eq(F, sp.Min(G, D)), eq(K, 1 + sp.Min(ND, n)), eq(sp.Symbol("p_min"), n + 1))))

    poisson_term = sp.exp(-lam * t) * (lam * t) ** j / sp.factorial(j)
    erlang_cdf = sp.simplify(1 - sp.summation(poisson_term, (j, 0, n - 1)))
    density = sp.simplify(sp.diff(erlang_cdf, t))
    check_zero(density - lam ** n * t ** (n - 1) * sp.exp(-lam * t) / sp.factorial(n - 1),
               "Erlang density")
    steps.append(Step(
        "G_n <= t iff at least n arrivals came in [0, t]: a Poisson(λt) tail, which sympy sums "
        "into the regularised lower incomplete gamma function. Its derivative is the "
        "Erlang(n, λ) density.",
        (eq(Prob(le(G, t)), 1 - sp.Sum(poisson_term, (j, 0, n - 1))),
         eq(Prob(le(G, t)), erlang_cdf), eq(sp.Function("f_G")(t), density))))

    formation = sp.Piecewise((erlang_cdf, t < D), (1, True))
    atom = sp.simplify(1 - erlang_cdf.subs(t, D))
    pmf = sp.Piecewise((poisson_term.subs(t, D).subs(j, i - 1), i <= n),
                       (erlang_cdf.subs(t, D), True))
    steps.append(Step(
        "So F has the Erlang cdf below D and an atom P(N(D) < n) at D, where the timer fires. "
        "The batch holds 1 + j requests if j < n arrived within D, and p_min otherwise "
        "(i = 1, ..., p_min below).",
        (eq(Prob(le(F, t)), formation), eq(Prob(eq(F, D)), atom),
         eq(Prob(eq(K, i)), pmf))))

    integral = sp.simplify(sp.gammasimp(sp.integrate(poisson_term, (t, 0, D))))
    tail_j = sp.lowergamma(j + 1, lam * D) / sp.factorial(j)            # P(N(D) > j)
    check_zero(integral - tail_j / lam, "integral of a Poisson term")
    formation_mean = sp.Sum(tail_j, (j, 0, n - 1)) / lam
    batch_mean = 1 + lam * formation_mean
    for m in range(1, CHECKED_UP_TO + 1):
        e_min = sum(min(v, m) * poisson_term.subs({t: D, j: v}) for v in range(m)) \
            + m * (1 - sum(poisson_term.subs({t: D, j: v}) for v in range(m)))
        check_zero(batch_mean.subs(n, m).doit() - 1 - e_min, f"E[K] for n = {m}")
    steps.append(Step(
        "The mean formation time is the integral of P(F > t) over [0, D], term by term; "
        "sympy integrates a Poisson term into P(N(D) > j)/λ (γ the lower incomplete gamma "
        "function). So λE[F] = E[min(N(D), n)] and E[K] = 1 + λE[F] (checked by sympy for "
        f"n = 1..{CHECKED_UP_TO}): every arrival belongs to exactly one batch, and a cycle "
        "from dispatch to dispatch lasts 1/λ + E[F] on average.",
        (eq(sp.Integral(poisson_term, (t, 0, D)), tail_j / lam),
         eq(Mean(F), formation_mean), eq(Mean(K), batch_mean))))

    wait_total = sp.Sum((1 + j) * tail_j, (j, 0, n - 1)) / lam
    wait_mean = wait_total / batch_mean
    steps.append(Step(
        "The waits of a batch's members until its dispatch add up to the integral over "
        "[0, F] of the number present, 1 + N(t) while t < F. Term by term as above, "
        "and divided by the mean batch size (renewal-reward over batches), this is the mean "
        "time a request spends in formation.",
        (eq(Mean(sp.Integral(1 + Nt, (t, 0, F))), wait_total),
         eq(Mean(sp.Symbol("W_form")), wait_mean))))

    results = (
        Result("formation_cdf", Prob(le(F, t)), formation, "t >= 0"),
        Result("batch_size_pmf", Prob(eq(K, i)), pmf, "i = 1, ..., n + 1 = p_min"),
        Result("formation_mean", Mean(F), formation_mean, ""),
        Result("batch_mean", Mean(K), batch_mean, ""),
        Result("request_wait_mean", Mean(sp.Symbol("W_form")), wait_mean,
               "a random request's wait from arrival to dispatch"),
    )
    return Derivation(
        key="size_or_timeout",
        title="Size-or-timeout batching: formation time and batch size",
        summary="With an always-free instance, the time a batch takes to form and its size "
                "when the batcher dispatches at p_min requests or after a delay D.",
        sources=("S. M. Ross (2014), Introduction to Probability Models, 11th ed., Academic "
                 "Press, ch. 5 (Poisson process, Erlang arrival epochs)",
                 "Horváth, Paolieri, Picano and Vicario (2025), MASCOTS, as cited in "
                 "qmodel's theory notes (batch formation for inference servers)"),
        assumptions=("Poisson arrivals of rate λ", "an instance is always free when a batch "
                     "is ready (service much shorter than formation, or many instances)",
                     "dispatch at p_min = n + 1 requests or when the first has waited D"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "D": D, "t": t, "n": n, "i": i},
        implemented_by="qmodel.theory.batch.batch_node computes formation on a lattice (with "
                       "busy instances too); the closed forms are not used directly")
