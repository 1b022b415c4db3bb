"""Ensembles: the latest of independent branches, and what a batching stage sends downstream.

A request done at a fan-in when its last branch is done takes the maximum of the branches'
times: for independent branches its cdf is the product of theirs. A batching stage releases
the K requests of a batch together at the batch's completion: downstream sees clumps, and over
long windows the count of requests has the index of dispersion ``E[K] c_e^2 + Var K / E[K]``
(c_e^2: the scv of the gaps between completions), from the law of total variance and the
renewal central limit theorem.

Sources: D. R. Cox (1962), "Renewal Theory", Methuen (the variance of a renewal count); D. R.
Cox and P. A. W. Lewis (1966), "The Statistical Analysis of Series of Events", Methuen
(compound processes, index of dispersion); W. Whitt (1983), "The Queueing Network Analyzer",
Bell System Technical Journal 62(9) (batch departures in a network of queues).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import (Derivation, Expect, MaxOver, Mean, Prob, Result, Step, check_zero, eq,
                   le)

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``fan_in_cdf`` (the latest of n independent branches), ``max_exp_mean`` (two
        exponential branches of rates mu_1, mu_2) and ``clump_dispersion`` (the long-run index
        of dispersion of a stream of clumps); symbols ``mu1``, ``mu2``, ``t``, ``EK``
        (mean clump), ``VK`` (its variance), ``ce2`` (scv of the gaps between clumps).

    Examples
    --------
    >>> d = derive()
    >>> EK, VK, ce2 = d.symbols["EK"], d.symbols["VK"], d.symbols["ce2"]
    >>> d.result("clump_dispersion").subs({EK: 8, VK: 0, ce2: 1})    # clumps of 8, Poisson
    8
    """
    t = sp.Symbol("t", positive=True)
    mu1, mu2 = sp.symbols("mu_1 mu_2", positive=True)
    n, i = sp.Symbol("n", integer=True, positive=True), sp.Symbol("i", integer=True,
                                                                    positive=True)
    F = sp.IndexedBase("F")
    T, Ti = sp.Symbol("T"), sp.IndexedBase("T")
    steps = []

    # --- the fan-in ---------------------------------------------------------------------------
    product = sp.Product(F[i], (i, 1, n))
    steps.append(Step(
        "A step with several upstream branches runs when the last of them is done; a request "
        "leaving an ensemble with several exit steps is done when the last exit is. The time "
        "is the maximum T = max_i T_i of the branches' times, and T <= t exactly when every "
        "T_i <= t. For independent branches the probabilities multiply.",
        (eq(T, MaxOver(Ti[i], i, n)), eq(Prob(le(T, t)), product))))

    F1, F2 = 1 - sp.exp(-mu1 * t), 1 - sp.exp(-mu2 * t)
    mean_max = sp.simplify(sp.integrate(1 - F1 * F2, (t, 0, sp.oo)))
    tidy = 1 / mu1 + 1 / mu2 - 1 / (mu1 + mu2)
    check_zero(mean_max - tidy, "mean of the larger of two exponentials")
    steps.append(Step(
        "For example two exponential branches of rates mu_1 and mu_2: sympy integrates the "
        "survival function 1 - F_1 F_2 of the maximum. The mean of the maximum exceeds the "
        "larger mean by 1/mu_1 + 1/mu_2 - 1/(mu_1 + mu_2) - max(1/mu_1, 1/mu_2) > 0: waiting "
        "for the last of two branches costs more than the slower branch alone.",
        (eq(Mean(T), sp.Integral(1 - F1 * F2, (t, 0, sp.oo))), eq(Mean(T), tidy))))

    # --- the departure process of a batching stage -----------------------------------------
    Var = sp.Function("Var")
    EK, VK = Expect("K"), Var(sp.Symbol("K"))
    me, ce2 = sp.Symbol("m_e", positive=True), sp.Symbol("c_e^2", nonnegative=True)
    M, N, K = sp.Function("M")(t), sp.Function("N")(t), sp.IndexedBase("K")
    mean_m, var_m = t / me, ce2 * t / me
    mean_n = mean_m * EK
    var_n = mean_m * VK + var_m * EK ** 2                   # law of total variance
    idc = sp.simplify(sp.limit(var_n / mean_n, t, sp.oo))
    tidy_idc = EK * ce2 + VK / EK
    check_zero(idc - tidy_idc, "index of dispersion of clumps")
    steps.append(Step(
        "A batching stage completes batches at epochs whose gaps have mean m_e and squared "
        "coefficient of variation c_e^2; batch i releases its K_i requests at once, the K_i "
        "i.i.d. and independent of the epochs. In a window of length t, M(t) batches complete "
        "and N(t) = K_1 + ... + K_M(t) requests leave. For long windows a renewal count has "
        "mean t / m_e and variance c_e^2 t / m_e (Cox 1962); conditioning on M(t), the law "
        "of total variance gives N(t)'s.",
        (eq(N, sp.Sum(K[i], (i, 1, M))), eq(Mean(M), mean_m), eq(Var(M), var_m),
         eq(Mean(N), Mean(M) * EK), eq(Var(N), Mean(M) * VK + Var(M) * EK ** 2),
         eq(Var(N), sp.expand(var_n)))))

    steps.append(Step(
        "The index of dispersion Var N(t) / E N(t) no longer depends on t. A renewal stream "
        "of single requests has index c^2 (its gaps' scv), so the stream of clumps counts as "
        "one of scv E[K] c_e^2 + Var K / E[K]: clumps of K requests are K times as bursty as "
        "their epochs, plus the spread of their sizes. Compound Poisson epochs (c_e^2 = 1) "
        "give E[K^2] / E[K]; one request per batch gives back c_e^2.",
        (eq(Var(N) / Mean(N), tidy_idc),
         eq(tidy_idc.subs({ce2: 1}), (VK + EK ** 2) / EK),
         eq(tidy_idc.subs({EK: 1, VK: 0}), ce2))))

    results = (
        Result("fan_in_cdf", Prob(le(T, t)), product, "independent branches"),
        Result("max_exp_mean", Mean(T), tidy, "two independent exponential branches"),
        Result("clump_dispersion", Var(N) / Mean(N), tidy_idc,
               "clumps i.i.d. and independent of renewal epochs, long windows"),
    )
    return Derivation(
        key="pipeline",
        title="Ensembles: the latest branch, and the clumps a batching stage releases",
        summary="A fan-in takes the maximum of its branches (the product of their cdfs when "
                "independent); a batching stage's output, clumps of K requests, is as bursty "
                "over long windows as a renewal stream of scv E[K] c_e^2 + Var K / E[K].",
        sources=("D. R. Cox (1962), Renewal Theory, Methuen",
                 "D. R. Cox and P. A. W. Lewis (1966), The Statistical Analysis of Series of "
                 "Events, Methuen",
                 "W. Whitt (1983), The Queueing Network Analyzer, Bell System Technical "
                 "Journal 62(9)"),
        assumptions=("fan-in: the branches' times independent (shared upstream stages and "
                     "shared arrivals make them positively correlated in truth)",
                     "clumps: sizes i.i.d. and independent of the completion epochs, which "
                     "form a renewal process; windows long against the gaps"),
        steps=tuple(steps), results=results,
        symbols={"t": t, "mu1": mu1, "mu2": mu2, "EK": EK, "VK": VK, "ce2": ce2},
        implemented_by="qmodel.theory.pipeline: combine (products of cdfs at fan-ins, "
                       "convolutions along paths), departure_scv (the clumps' index of "
                       "dispersion as the scv downstream)")
