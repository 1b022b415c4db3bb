"""Inoue's mean latency of greedy batching with linear batch service and unbounded batches.

Source: Y. Inoue (2021), "Queueing analysis of GPU-based inference servers with dynamic
batching: a closed-form characterization", Performance Evaluation 147 (arXiv 1912.06322).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy import stats

from .core import Derivation, Expect, Mean, Result, Step, check_zero, eq

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``mean_batch`` (E[b] in terms of p_0 = P(no arrival during a service)),
        ``second_moment`` (lambda^2 E[S^2] = E[b^2] - E[b]), ``renewal_reward`` and
        ``mean_sojourn`` (Inoue's closed form in E[b] and E[b^2]).

    Examples
    --------
    >>> d = derive()
    >>> v = {d.symbols[k]: x for k, x in (("lam", 1), ("tau0", 1), ("alpha", 0), ("Eb", 1),
    ...                                     ("Eb2", 1))}
    >>> d.result("mean_sojourn").subs(v)            # always alone: just the service
    1
    """
    lam, tau0, alpha, u, sv = sp.symbols("lambda tau_0 alpha u s", positive=True)
    Eb, Eb2, ES, ES2 = Expect("b"), Expect("b^2"), Expect("S"), Expect("S^2")
    p0 = sp.Symbol("p_0", positive=True)
    b, bn, N, S, T = sp.symbols("b b' N S T")
    steps = []

    steps.append(Step(
        "Greedy batching without a size limit: when the server frees it takes every waiting "
        "request; if none waits, the next arrival starts a batch of one at once. A batch of b "
        "takes S = τ₀ + αb. The size of the next batch is the number N of arrivals during "
        "the current service, or 1 if there were none: a Markov chain on batch sizes (the "
        "bulk-service chain with B = ∞).",
        (eq(bn, sp.Piecewise((N, N > 0), (1, True))), eq(S, tau0 + alpha * b))))

    count = stats.Poisson("N", lam * sv)
    first, second = stats.E(count), sp.expand(stats.E(count ** 2))
    mean_eq = eq(Eb, lam * ES + p0)
    second_eq = eq(Eb2, lam * ES + lam ** 2 * ES2 + p0)
    mean_b = sp.solve(mean_eq.subs(ES, tau0 + alpha * Eb), Eb)[0]
    steps.append(Step(
        "Given S = s, N is Poisson(λs); sympy's moments are E[N] = λs and E[N²] = λs + λ²s². "
        "Since b' = N + 1{N = 0}, and N·1{N = 0} = 0, in equilibrium (b' and b have the same "
        "law; p₀ = E[exp(-λS)] is the chance that a service sees no arrival):",
        (eq(Mean(N, eq(S, sv)), first), eq(Mean(N ** 2, eq(S, sv)), second), mean_eq,
         second_eq, eq(Eb, mean_b))))

    identity = sp.solve([mean_eq, second_eq], [ES2, p0], dict=True)[0][ES2] * lam ** 2
    identity = sp.expand(identity)
    check_zero(identity - (Eb2 - Eb), "second-moment identity")
    steps.append(Step(
        "Subtracting the two equations eliminates p₀ and E[S]:",
        (eq(lam ** 2 * ES2, identity),)))

    wait_given = sp.integrate((sv - u) / sv, (u, 0, sv))
    steps.append(Step(
        "Account per batch. The members of a batch formed during the previous service (of "
        "length s) arrived at independent uniform times u in [0, s]; each waits s - u for the "
        "server, on average s/2 (sympy integrates). With N of them, E[N s/2 | S = s] = λs²/2. "
        "A batch formed after an idle period has one member, who does not wait. Every member "
        "of a batch of b is then served for τ₀ + αb. So the members' waits for the server add "
        "up to W_tot and their services to V_tot per batch, on average:",
        (eq(sp.Integral((sv - u) / sv, (u, 0, sv)), wait_given),
         eq(Mean(sp.Symbol("W_tot")), lam * ES2 / 2),
         eq(Mean(sp.Symbol("V_tot")), tau0 * Eb + alpha * Eb2))))

    reward = (lam * ES2 / 2 + tau0 * Eb + alpha * Eb2) / Eb
    closed = sp.simplify(reward.subs(ES2, identity / lam ** 2))
    inoue = alpha + tau0 + (1 + 2 * lam * alpha) * (Eb2 - Eb) / (2 * lam * Eb)
    check_zero(closed - inoue, "Inoue's form")
    steps.append(Step(
        "By renewal-reward over batches, the mean sojourn time of a request is the mean total "
        "sojourn of a batch's members over the mean batch size. With the identity above it "
        "becomes Inoue's closed form (sympy checks). Only E[S(b) | b] = τ₀ + αb entered the "
        "accounting; E[b] and E[b²] come from the batch-size chain (solved numerically).",
        (eq(Mean(T), reward), eq(Mean(T), inoue))))

    results = (
        Result("mean_batch", Eb, mean_b, "p₀ = E[exp(-λ(τ₀ + αb))] over the batch-size law"),
        Result("second_moment", lam ** 2 * ES2, Eb2 - Eb, ""),
        Result("renewal_reward", Mean(T), reward, ""),
        Result("mean_sojourn", Mean(T), inoue, "Inoue (2021)"),
    )
    return Derivation(
        key="inoue",
        title="Inoue's mean latency of greedy batching (linear batch service)",
        summary="The mean sojourn time of a request under greedy, unbounded batching with "
                "S(b) = τ₀ + αb, in terms of the first two moments of the batch size.",
        sources=("Y. Inoue (2021), Queueing analysis of GPU-based inference servers with "
                 "dynamic batching: a closed-form characterization, Performance Evaluation 147 "
                 "(arXiv 1912.06322)",),
        assumptions=("Poisson arrivals of rate λ; one server", "greedy batching with no "
                     "limit on the batch size (B = ∞), no delay",
                     "batch service time with mean τ₀ + αb (Inoue: deterministic)",
                     "stability: λα < 1"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "tau0": tau0, "alpha": alpha, "Eb": Eb, "Eb2": Eb2, "p0": p0,
                 "ES": ES, "ES2": ES2},
        implemented_by="not used by a solver; tests/test_batch_node.py checks "
                       "qmodel.theory.batch.batch_node against it")
