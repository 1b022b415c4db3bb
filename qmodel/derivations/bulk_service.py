"""The embedded chain of greedy batch service with size-dependent service times, and its pgf.

Sources: N. T. J. Bailey (1954), "On queueing processes with bulk service", J. R. Statist. Soc.
B 16; M. F. Neuts (1967), "A general class of bulk queues with Poisson input", Ann. Math.
Statist. 38; M. L. Chaudhry and J. G. C. Templeton (1983), "A First Course in Bulk Queues",
Wiley.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import Derivation, Mean, Prob, Result, Step, check_zero, eq, subscripted_function

__all__ = ["derive"]


@lru_cache(maxsize=None)
def derive() -> Derivation:
    """Build the derivation (cached).

    Returns
    -------
    Derivation
        Results ``pgf`` (Pi(z) in terms of pi_0..pi_{B-1} and the arrival pgfs A_k(z)),
        ``normalisation``, ``batch_size_pmf`` and ``stability``. ``symbols["A"]`` is the
        function A_k(z) (call it as ``A(k, z)``), ``symbols["pi"]`` the IndexedBase of the
        boundary probabilities.

    Examples
    --------
    >>> d = derive()
    >>> B = d.symbols["B"]
    >>> sp.factor(d.result("pgf").subs(B, 1).doit())          # B = 1: the M/G/1 form
    (z - 1)*A(1, z)*pi[0]/(z - A(1, z))
    """
    lam = sp.Symbol("lambda", positive=True)
    z = sp.Symbol("z")
    B = sp.Symbol("B", integer=True, positive=True)
    x, k, n = (sp.Symbol(v, integer=True, nonnegative=True) for v in "xkn")
    pi = sp.IndexedBase("pi")
    A = subscripted_function("A")
    S = sp.Function("S")
    X, Xn, An, K = sp.symbols("X_n X_{n+1} A_{n+1} K")
    Pi, Pis = sp.Function("Pi"), sp.Symbol("Pi")
    steps = []

    steps.append(Step(
        "One server, Poisson arrivals of rate λ, at most B requests per batch, and greedy "
        "batching: when the server frees it takes K = min(X, B) of the X waiting requests; if "
        "none waits it takes the next arrival alone, at once. A batch of k is served for S(k). "
        "Observed just after each completion, X is a Markov chain: the next batch has size "
        "k(X) = max(1, min(X, B)), and those not taken stay, joined by Aₙ₊₁, the arrivals "
        "during that batch's service.",
        (eq(Xn, sp.Max(X - B, 0) + An), eq(K, sp.Max(1, sp.Min(X, B))))))

    poisson = sp.simplify(sp.summation(z ** n * sp.exp(-lam * sp.Symbol("s")) *
                                       (lam * sp.Symbol("s")) ** n / sp.factorial(n),
                                       (n, 0, sp.oo)))
    arrivals = Mean(sp.exp(-lam * (1 - z) * S(k)))
    steps.append(Step(
        "Given a batch of k, the arrivals during its service have the generating function "
        "A_k(z): a Poisson(λs) count (pgf summed by sympy) averaged over s = S(k). For "
        "deterministic S(k) it is exp(λS(k)(z - 1)).",
        (eq(sp.Sum(z ** n * sp.exp(-lam * sp.Symbol("s")) * (lam * sp.Symbol("s")) ** n
                   / sp.factorial(n), (n, 0, sp.oo)), poisson),
         eq(A(k, z), arrivals))))

    head = pi[0] * A(1, z) + sp.Sum(pi[x] * A(x, z), (x, 1, B - 1))
    head_z = sp.Sum(pi[x] * z ** x, (x, 0, B - 1))
    balance = eq(Pis, head + z ** (-B) * A(B, z) * (Pis - head_z))
    solved = sp.solve(balance, Pis)[0]
    pgf = (z ** B * head - A(B, z) * head_z) / (z ** B - A(B, z))
    check_zero(solved - pgf, "pgf solved")
    steps.append(Step(
        "Take generating functions, Π(z) = E[z^X] in equilibrium. States x < B are emptied "
        "by their batch (x = 0 starts a batch of one); states x >= B leave x - B behind, which "
        "contributes z^(-B) A_B(z) (Π(z) - Σ πₓ z^x over x < B). sympy solves the linear "
        "equation.",
        (balance.subs(Pis, Pi(z)), eq(Pi(z), pgf))))

    num_term = z ** B * A(k, z) - z ** x * A(B, z)
    lam_es, lam_eb = Mean(S(k)), Mean(S(B))
    # A_k(1) = 1 and A_k'(1) = lambda E[S(k)]
    derivatives = {sp.Derivative(A(k, z), z).subs(z, 1): lam * lam_es,
                   sp.Derivative(A(B, z), z).subs(z, 1): lam * lam_eb}
    d_num = sp.diff(num_term, z).subs(z, 1).doit().subs({A(k, 1): 1, A(B, 1): 1})
    d_num = sp.expand(d_num.subs(derivatives))
    d_den = sp.expand(sp.diff(z ** B - A(B, z), z).subs(z, 1).subs(derivatives).subs(
        A(B, 1), 1))
    check_zero(d_num - (B - x + lam * (lam_es - lam_eb)), "derivative of a numerator term")
    check_zero(d_den - (B - lam * lam_eb), "derivative of the denominator")
    k_of_x = sp.Max(1, x)
    normalisation = eq(sp.Sum(pi[x] * d_num.subs(k, sp.Max(1, x)), (x, 0, B - 1)), d_den)
    steps.append(Step(
        "B unknowns remain, π₀, ..., π_(B-1). Π(1) = 1 gives one equation: at z = 1 the "
        "numerator and the denominator vanish (A_k(1) = 1), and by L'Hôpital the ratio of "
        "their derivatives (A_k'(1) = λE[S(k)], computed by sympy term by term) must be 1. "
        "The other B - 1: Π is analytic in the unit disk, so the numerator vanishes at the "
        "B - 1 roots of z^B = A_B(z) with |z| < 1, z ≠ 1 (there are B roots in the closed "
        "disk, by Rouché's theorem, when the queue is stable). Solving these linear equations "
        "is the classical method; qmodel truncates the chain instead.",
        (eq(sp.Derivative(z ** B * A(k, z) - z ** x * A(B, z), z).subs(z, 1), d_num),
         normalisation, sp.StrictLessThan(lam * lam_eb, B))))

    pmf = sp.Piecewise((pi[0] + pi[1], eq(k, 1)), (pi[k], k < B),
                       (1 - sp.Sum(pi[x], (x, 0, B - 1)), True))
    steps.append(Step(
        "The size of a batch follows from the state at the completion before it: k(x) for "
        "x < B (a batch of one after an empty queue, or after one waiting request), B "
        "otherwise (for B >= 2). The mean batch service E[S(K)] and the throughput "
        "E[K]/E[cycle] follow.",
        (eq(Prob(eq(K, k)), pmf), eq(sp.Symbol("k(x)"), k_of_x))))

    results = (
        Result("pgf", Pi(z), pgf, "stationary pgf of the queue left after a completion"),
        Result("normalisation", None, normalisation, "one of the B equations for π_x, x < B"),
        Result("batch_size_pmf", Prob(eq(K, k)), pmf, "for B >= 2"),
        Result("stability", None, sp.StrictLessThan(lam * lam_eb, B), "the queue is stable"),
    )
    return Derivation(
        key="bulk_service",
        title="Greedy batch service: the embedded chain and its generating function",
        summary="The queue left behind after each batch completion under greedy batching with "
                "size-dependent service times, and its probability generating function.",
        sources=("N. T. J. Bailey (1954), On queueing processes with bulk service, Journal of "
                 "the Royal Statistical Society B 16",
                 "M. F. Neuts (1967), A general class of bulk queues with Poisson input, "
                 "Annals of Mathematical Statistics 38",
                 "M. L. Chaudhry and J. G. C. Templeton (1983), A First Course in Bulk Queues, "
                 "Wiley"),
        assumptions=("Poisson arrivals of rate λ; one server", "greedy batching: a batch "
                     "takes min(waiting, B) when the server frees, or the next arrival alone",
                     "the service time S(k) of a batch of k is independent of everything else "
                     "given k (deterministic or random)",
                     "stability: λE[S(B)] < B"),
        steps=tuple(steps), results=results,
        symbols={"lam": lam, "z": z, "B": B, "pi": pi, "A": A, "S": S, "k": k, "x": x},
        implemented_by="qmodel.theory.batch.batch_node (the same chain, truncated and solved "
                       "as a banded linear system on a time lattice)")
