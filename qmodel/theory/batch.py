"""One Triton batching node with one instance: the sojourn-time distribution on a time lattice.

The model follows the node from one instance-free epoch to the next (an embedded Markov chain
in the spirit of Bailey 1954 and Neuts 1967 for bulk service, with Triton's dispatch rule from
triton-semantics.md), then analyses a tagged request that arrives at a random time (PASTA).

Embedded chain
    X = number of requests waiting when the instance frees. With D = 0 the batcher dispatches
    k(X) at once: the largest preferred size <= min(X, B), or all X when X is below every
    preferred size; an empty queue waits for the next arrival and dispatches it alone.
    During the batch's service S(k) the Poisson arrivals A_k join, so
    X' = X - k(X) + A_k. A_k is Poisson mixed over the law of S(k), so S(k) may depend on k
    and carry any jitter. The chain is truncated where its stationary tail mass, estimated from
    the Cramer-Lundberg decay rate of the homogeneous part, is below ``tail``.

Tagged request
    It arrives during the service of some batch (elapsed u, residual R) and finds q requests
    ahead, or it finds the node idle. With preferred sizes {B} every batch ahead of it is full,
    so it leaves in the (floor(q/B)+1)-th batch after f = floor(q/B) full services; its own
    batch holds its position j plus everyone who arrived behind it until that batch goes
    (its own batch size depends on later arrivals). Its sojourn is
    T = R + S_1(B) + ... + S_f(B) + S(k_own). All of this is computed on a lattice of step h.

What is exact and what is not
    With D = 0 and preferred sizes {B} (Triton's default) the result is exact up to the lattice
    step h (service laws and residual times are discretised to h; the quantiles move by at most
    about h) and the truncation mass, both stated in ``accuracy``. With other preferred sizes the
    batches ahead of the tagged request are taken to be of the size a long queue dispatches,
    an approximation.

References
----------
Bailey, N. T. J. (1954). On queueing processes with bulk service. J. R. Stat. Soc. B 16, 80-87.
Neuts, M. F. (1967). A general class of bulk queues with Poisson input. Ann. Math. Stat. 38.
Inoue, Y. (2021). Queueing analysis of GPU-based inference servers with dynamic batching: a
closed-form characterization. Performance Evaluation 147 (mean sojourn, used as a check).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import fft, optimize, signal, stats

from ..latency import Accuracy, Latency
from ..system import Node, UnstableError
from .service_law import service_lattice, service_upper

__all__ = ["batch_node", "BatchNodeLatency"]

# The lattice step is the batch-of-one mean service time divided by this, unless a caller asks
# for another resolution. 100 keeps the quantile error near 1% of S(1) and a solve in
# milliseconds for deterministic service.
DEFAULT_RESOLUTION = 100


class BatchNodeLatency(Latency):
    """Sojourn-time distribution held as probabilities on a time lattice.

    ``pmf[i]`` is the probability of the cell ``((i - 1/2) h, (i + 1/2) h]``; the cdf
    interpolates linearly between cell edges.
    """

    def __init__(self, pmf: np.ndarray, h: float, **metrics):
        super().__init__(**metrics)
        pmf = np.clip(np.asarray(pmf, float), 0.0, None)
        self.h = float(h)
        self.pmf = pmf / pmf.sum()
        # cdf at the upper cell edges (i + 1/2) h
        self._edges = (np.arange(pmf.size) + 0.5) * h
        self._cum = np.minimum(np.cumsum(self.pmf), 1.0)

    def _cdf(self, t):
        return np.interp(t, np.concatenate([[0.0], self._edges]),
                         np.concatenate([[0.0], self._cum]), right=1.0)

    def _sf(self, t):
        tail = np.concatenate([[1.0], np.clip(1.0 - self._cum, 0.0, 1.0)])
        return np.interp(t, np.concatenate([[0.0], self._edges]), tail, right=0.0)

    def _quantile(self, p):
        xs = np.concatenate([[0.0], self._edges])
        ys = np.concatenate([[0.0], self._cum])
        # first cell whose upper cdf reaches p, then linear inside it
        i = np.searchsorted(ys, p, side="left").clip(1, ys.size - 1)
        y0, y1 = ys[i - 1], ys[i]
        frac = np.where(y1 > y0, (p - y0) / np.where(y1 > y0, y1 - y0, 1.0), 1.0)
        return xs[i - 1] + frac * (xs[i] - xs[i - 1])

    @property
    def mean(self) -> float:
        return float(np.dot(self.pmf, np.arange(self.pmf.size) * self.h))


# --------------------------------------------------------------------------------------------
def _poisson_table(rate: float, times: np.ndarray, count: int) -> np.ndarray:
    """P[t, j] = P(Poisson(rate * times[t]) = j), j < count."""
    return stats.poisson.pmf(np.arange(count)[None, :], rate * np.asarray(times)[:, None])


def _decay_rate(increment_pmf: np.ndarray, step: int) -> float:
    """theta > 0 with E[exp(theta (A - step))] = 1 (Cramer-Lundberg rate of the queue tail)."""
    j = np.arange(increment_pmf.size)

    def log_mgf(theta):
        return float(np.log(np.dot(increment_pmf, np.exp(theta * (j - step)))))

    hi = 1.0
    while log_mgf(hi) < 0:
        hi *= 2
    return optimize.brentq(log_mgf, 1e-9, hi) if log_mgf(1e-9) < 0 else 1e-9


def _fft_len(n: int) -> int:
    return fft.next_fast_len(int(n), real=True)


def batch_node(node: Node, rate: float, resolution: int = DEFAULT_RESOLUTION,
               tail: float = 1e-10) -> BatchNodeLatency:
    """Sojourn-time distribution of a batching node with one instance and Poisson arrivals.

    Parameters
    ----------
    node : Node
        One instance (``instances == 1``), ``max_queue_delay == 0`` (greedy batching), no
        queue limit.
    rate : float
        Poisson arrival rate, requests per second; below the node's capacity.
    resolution : int
        Lattice steps per batch-of-one mean service time; the quantile error shrinks like 1/it.
    tail : float
        Truncation: stationary queue-length mass left out of the embedded chain.

    Returns
    -------
    BatchNodeLatency

    Examples
    --------
    With B = 1 the node is an M/D/1 queue, whose exact sojourn p99 is 11.3559 (D = 1, rho = 0.8):

    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(base=1.0), max_batch_size=1)
    >>> round(batch_node(node, rate=0.8).p99, 2)
    11.36
    """
    if node.instances != 1:
        raise ValueError(f"batch_node models one instance; this node has instances="
                         f"{node.instances}")
    if node.max_queue_delay != 0:
        raise ValueError("batch_node handles max_queue_delay=0 (greedy batching)")
    if node.max_queue_size:
        raise ValueError("batch_node assumes an unlimited queue (max_queue_size=0)")
    rate = float(rate)
    if not rate > 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate}")
    if rate >= node.capacity:
        raise UnstableError(f"rate {rate:g}/s is at or above the node's capacity "
                            f"{node.capacity:g}/s; lower the rate or add instances")
    return _GreedyNode(node, rate, resolution, tail).solve()


class _GreedyNode:
    """The computation behind :func:`batch_node`, in steps named after the docstring."""

    def __init__(self, node: Node, rate: float, resolution: int, tail: float):
        self.node, self.rate, self.tail = node, rate, tail
        self.B = node.max_batch_size
        table = node.preferred_table()
        self.pmin = min(node.effective_preferred)
        sizes = np.arange(self.B + 1)
        # k(n) for n = 0..B: the D = 0 rule; n = 0 means "the next arrival goes alone"
        self.k_small = np.where(sizes >= self.pmin, table, sizes)
        self.k_small[0] = 1
        self.K = int(table[self.B])        # what a long queue dispatches
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.means = np.asarray(node.service.mean(np.arange(1, self.B + 1)), float)
        self.h = float(self.means[0]) / resolution
        upper = service_upper(node.service, range(1, self.B + 1), tail)
        self.Ls = int(math.ceil(upper / self.h)) + 2
        self.ps, self.service_overflow = service_lattice(node.service, range(1, self.B + 1),
                                                         self.h, self.Ls)
        self.times = np.arange(self.Ls) * self.h

    # --- embedded chain ----------------------------------------------------------------
    def arrivals_during_service(self):
        """A[k-1, j] = P(j Poisson arrivals during S(k))."""
        mu = self.rate * float(self.times[-1])
        self.J = int(mu + 12 * math.sqrt(mu) + 30)
        self.pois_s = _poisson_table(self.rate, self.times, self.J)
        self.A = self.ps @ self.pois_s

    def chain(self):
        K, B = self.K, self.B
        theta = _decay_rate(self.A[K - 1], K)
        N = B + self.J + int(math.ceil(-math.log(self.tail) / theta)) + 1
        self.N = N
        n = np.arange(N)
        k = np.where(n <= B, self.k_small[np.minimum(n, B)], K)
        m = np.where(n == 0, 0, n - k)
        self.k_of, self.m_of = k, m
        T = np.zeros((N, N))
        cols = m[:, None] + np.arange(self.J)[None, :]
        rows = np.broadcast_to(n[:, None], cols.shape)
        np.add.at(T, (rows, np.minimum(cols, N - 1)), self.A[k - 1])
        # pi (T - I) = 0 with sum(pi) = 1: replace one balance equation by the normalisation
        M = T.T - np.eye(N)
        M[-1, :] = 1.0
        rhs = np.zeros(N)
        rhs[-1] = 1.0
        pi = np.linalg.solve(M, rhs)
        self.pi = np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()
        self.chain_tail = float(self.pi[N - self.J:].sum())

    # --- tagged request ----------------------------------------------------------------
    def arrival_view(self):
        """Z[q, r]: probability a Poisson arrival finds q waiting and residual service r*h."""
        pi, k, m = self.pi, self.k_of, self.m_of
        mean_s = self.means[k - 1]
        cycle = pi * (mean_s + np.where(np.arange(self.N) == 0, 1.0 / self.rate, 0.0))
        self.cycle = float(cycle.sum())
        self.p_idle = float(pi[0] / self.rate / self.cycle)
        self.busy = float(np.dot(pi, mean_s) / self.cycle)
        self.served_per_time = float(np.dot(pi, k) / self.cycle)
        Z = np.zeros((self.N, self.Ls))
        for size in np.unique(k):
            mine = k == size
            weights = np.bincount(m[mine], weights=pi[mine], minlength=self.N)[:self.N]
            weights /= self.cycle
            # Y[q, r] = h * sum_i p(i) Pois(q; rate (i - r) h): residual r with q arrivals so far
            p = self.ps[size - 1]
            Y = signal.fftconvolve(p[::-1, None], self.pois_s, axes=0)[self.Ls - 1::-1][:self.Ls]
            Y = np.clip(Y, 0.0, None).T * self.h          # (J, Ls)
            # trapezoid rule in the elapsed time u: the ends u = 0 and u = s count half
            Y[0] -= 0.5 * self.h * p
            Y[:, 0] -= 0.5 * self.h * self.A[size - 1]
            nz = np.flatnonzero(weights)
            if nz.size == 1:
                q0 = nz[0]
                top = min(self.N, q0 + self.J)
                Z[q0:top] += weights[q0] * Y[:top - q0]
            else:
                Z += signal.fftconvolve(weights[:, None], Y, axes=0)[:self.N]
        self.Z = np.clip(Z, 0.0, None)

    def before_own_batch(self):
        """M[j-1, e]: the tagged request is j-th in the batch that takes it, after e*h."""
        K = self.K
        F = (self.N + K - 1) // K
        pK = self.ps[K - 1]
        reach = self.Ls + (F - 1) * (self.Ls - 1)
        self.Le = _fft_len(reach + self.Ls)
        Zp = np.zeros((F * K, self.Ls))
        Zp[:self.N] = self.Z
        blocks = Zp.reshape(F, K, self.Ls)
        phi = fft.rfft(pK, self.Le)
        acc = np.zeros((K, self.Le // 2 + 1), complex)
        power = np.ones_like(phi)
        for f in range(F):
            if blocks[f].any():
                acc += fft.rfft(blocks[f], self.Le, axis=1) * power
            power = power * phi
        Mje = fft.irfft(acc, self.Le, axis=1)
        self.Mje = np.clip(Mje, 0.0, None)
        self.E = np.arange(self.Le) * self.h

    def own_batch(self):
        """H[k-1, e]: the tagged request's batch has k requests and leaves e*h after it came."""
        B, K = self.B, self.K
        pois = _poisson_table(self.rate, self.E, B)              # (Le, B): x arrivals behind
        pois_T = pois.T
        # n = j + x requests waiting at the dispatch that takes it, n capped at B
        G = signal.fftconvolve(np.vstack([np.zeros((1, self.Le)), self.Mje]), pois_T,
                               axes=0)[:B + 1]
        G = np.clip(G, 0.0, None)
        total = self.Mje.sum(axis=0)
        G[B] = np.clip(total - G[:B].sum(axis=0), 0.0, None)    # everything at B or more
        n_to_k = np.arange(B + 1)
        table = self.node.preferred_table()
        n_to_k = np.where(n_to_k >= self.pmin, table, n_to_k)
        H = np.zeros((B, self.Le))
        for n_ in range(1, B + 1):
            H[n_to_k[n_] - 1] += G[n_]
        self.H = H

    def sojourn(self):
        L = _fft_len(self.Le + self.Ls)
        spec = (fft.rfft(self.H, L, axis=1) * fft.rfft(self.ps, L, axis=1)).sum(axis=0)
        pmf = fft.irfft(spec, L)
        pmf[:self.Ls] += self.p_idle * self.ps[0]
        self.pmf = np.clip(pmf, 0.0, None)

    def final_batch_exact(self) -> bool:
        """Whether the dispatch that reaches the tagged request always takes it.

        True for preferred sizes {B} or any single preferred size; with several preferred
        sizes a queue of n may dispatch fewer than the tagged request's position j.
        """
        table = self.node.preferred_table()
        for j in range(1, self.K + 1):
            for n in range(j, self.B + 1):
                k = table[n] if n >= self.pmin else n
                if k < j:
                    return False
        return True

    def solve(self) -> BatchNodeLatency:
        self.arrivals_during_service()
        self.chain()
        self.arrival_view()
        self.before_own_batch()
        self.own_batch()
        self.sojourn()
        lost = max(self.chain_tail, abs(1.0 - self.pmf.sum()), self.service_overflow)
        exact = self.final_batch_exact()
        statement = (f"lattice step h = {self.h * 1e3:.4g} ms (quantiles within about h); "
                     f"truncated mass {lost:.1e}")
        if not exact:
            statement += ("; several preferred sizes: the tagged request is taken to leave in the "
                          "first batch that reaches it (approximation)")
        batches = np.bincount(self.k_of, weights=self.pi, minlength=self.B + 1)
        return BatchNodeLatency(
            self.pmf, self.h,
            method="batch node, embedded chain (greedy, 1 instance)",
            accuracy=Accuracy("numerical" if exact else "approximation", statement),
            throughput=self.rate, utilization=self.busy,
            batch_size_distribution={int(i): float(v) for i, v in enumerate(batches) if v > 0})
