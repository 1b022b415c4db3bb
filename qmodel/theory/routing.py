"""Dynamic routers (least outstanding, power of d) in front of identical batching nodes.

A cavity (mean-field) model. One node is followed exactly; the others enter only through the
routing rule, as independent copies of the node's own stationary law (the independence ansatz
of the supermarket model: Vvedenskaya, Dobrushin & Karpelevich 1996; Mitzenmacher 2001; made
rigorous for general service by Bramson, Lu & Prabhakar 2012). A request samples d of the N
nodes (least outstanding: d = N) and joins the one with the fewest outstanding requests
(queued + in service), ties at random. If the other nodes' outstanding counts are i.i.d. with
survival S(n) = P(count >= n), a node with n outstanding is picked at rate

    lambda(n) = (Lambda / N) * (S(n)^d - S(n+1)^d) / P(count = n),

Lambda the total rate (the power-of-d mean field, with the node itself among the d). The
node then sees Poisson arrivals at a rate that depends on its own state; its stationary law
gives S(n) back, and the two are iterated to a fixed point (the "cavity" method of the theory
notes; Gupta, Harchol-Balter, Sigman & Whitt 2007 use the same idea for JSQ with a
state-dependent single-queue approximation).

The node (one instance, no delay, no preferred sizes): at each batch completion q
requests wait; it dispatches min(q, B) at once (q = 0: it idles until the next arrival, which
it serves alone). During a batch's service nothing leaves, so the outstanding count is a pure
birth process with rates lambda(n); its transition law over one lattice step h is the
matrix exponential of the (bidiagonal) generator, and the law after t steps follows by
repeated products. The embedded chain on q at completions is solved exactly (up to the
lattice and the truncation of the count), and the time-average law of the count comes from
the occupancy of each service.

With a delay (max_queue_delay > 0) the node is not followed by the cavity model itself: the
answer without the delay fixes a renewal stream (the arrival scv at which the batch-node model
gives the same p99), and the node with its delay is solved under that stream.

A request arriving at a node with n outstanding (Palm weights pi(n) lambda(n)) finds n - k
waiting ahead of it and a residual service r: it leaves after r, then f = floor((n - k) / B)
full batches, in a batch of its position plus the requests that arrive behind it before it
goes (their mean, from the same birth process, split between the two nearest sizes; after
full batches, at the node's mean rate); then that batch's service.

Approximations (the result says so): the independence of the other nodes (exact only as
N -> infinity with d fixed), the size of the tagged request's own batch from the mean
arrivals behind it. Errors against the simulator (validation/router_accuracy.py): power of
two within 9.5% on p99 where N >= 8 and N (1 - load) >= 2.4 (max_batch_size below 8) or
N >= 4 and N (1 - load) >= 0.8 (max_batch_size 8 and more), which is where ``qmodel.predict``
uses it; optimistic by up to 83% with few nodes near saturation. Least outstanding (d = N)
never decouples, even for large N: the model ran 25-60% optimistic at N = 32 and 128, and
``predict`` does not use it for that router.

Work: each solve of the node charges its estimated work to :mod:`qmodel.theory.budget` before
it runs; a fixed point that has not settled when the budget runs out declines (with its
iteration count and movement), and ``predict`` then simulates.
"""

from __future__ import annotations

import math

import numpy as np
from dataclasses import replace

from scipy import fft, linalg, optimize

from ..latency import Accuracy, Approximation, LatticeLatency
from ..system import Node
from . import budget
from .batch import batch_node
from .blas import one_blas_thread
from .service_law import service_lattice, service_upper

__all__ = ["dynamic_router"]

MAX_SERVICE_POINTS = 200       # lattice points across the longest service time
MAX_COUNT = 600                # outstanding requests per node the model follows at most
COARSE_RESOLUTION = 15         # lattice steps per S(1) while the routing rates settle
FINE_TOLERANCE = 1e-5          # count-law movement that ends the iterations on the fine lattice
MIN_STREAM_SCV = 0.005         # the smoothest routed stream the delay calibration considers
MODEL = "the router model"     # how the budget's messages name it


def _pick_rate(pmf: np.ndarray, total_per_node: float, d: int) -> np.ndarray:
    """lambda(n) = (rate per node) (S(n)^d - S(n+1)^d) / P(n), with its limit d S(n)^(d-1).

    Examples
    --------
    Two equally likely states and d = 2: the emptier node is picked 3 times out of 4.

    >>> _pick_rate(np.array([0.5, 0.5]), 1.0, 2).round(3).tolist()
    [1.5, 0.5]
    """
    surv = np.clip(np.cumsum(pmf[::-1])[::-1], 0.0, 1.0)        # S(n) = P(count >= n)
    nxt = np.concatenate([surv[1:], [0.0]])
    diff = surv - nxt
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff > 1e-13 * np.maximum(surv, 1e-300),
                         (surv ** d - nxt ** d) / np.where(diff > 0, diff, 1.0),
                         d * surv ** (d - 1))
    return total_per_node * ratio


def _birth_sums_source(bands, start, w_end, w_surv, after, occ):
    """after[i] += sum_t w_end[i, t] V_t[start[i]] and occ[i] += sum_t w_surv[i, t]
    V_t[start[i]], V_t the t-step law of the births (:meth:`_Cavity._steps`), each row
    carried as a vector from its start over its support only. The sums run in the order of
    :meth:`_Cavity._steps`' numpy products, so the two agree to the last bit."""
    width = bands.shape[0] - 1
    M = start.size
    steps = w_end.shape[1]
    row = np.zeros(M)
    nxt = np.zeros(M)
    for i in range(M):
        s = start[i]
        if s < 0 or s >= M:
            raise IndexError("a start row lies outside the outstanding counts")
        row[:] = 0.0
        row[s] = 1.0
        hi = s                                       # the row is zero past hi
        for t in range(steps):
            we = w_end[i, t]
            ws = w_surv[i, t]
            for j in range(s, hi + 1):
                after[i, j] += we * row[j]
                occ[i, j] += ws * row[j]
            if t == steps - 1:
                break
            top = min(hi + width, M - 1)
            for j in range(s, top + 1):
                acc = row[j] * bands[0, j]
                for w in range(1, width + 1):
                    if j - w < s:
                        break
                    acc += row[j - w] * bands[w, j - w]
                nxt[j] = acc
            for j in range(s, top + 1):
                row[j] = nxt[j]
            hi = top


_compiled = {}


def _birth_sums():
    """:func:`_birth_sums_source` compiled (numba, cached beside the source on first use;
    uncached where no cache directory is writable), or None where numba is missing or its
    JIT is off (NUMBA_DISABLE_JIT): the caller then takes numpy's products, the same sums."""
    if "birth_sums" not in _compiled:
        try:
            import numba
        except ImportError:
            _compiled["birth_sums"] = None
            return None
        if numba.config.DISABLE_JIT:
            # interpreted, the loop is 30-60x slower than numpy's products
            return None
        try:
            kernel = numba.njit(cache=True)(_birth_sums_source)
        except RuntimeError:                 # "cannot cache function ...: no locator"
            kernel = numba.njit(cache=False)(_birth_sums_source)
        _compiled["birth_sums"] = kernel
    return _compiled["birth_sums"]


class _Cavity:
    """The computation behind :func:`dynamic_router`."""

    def __init__(self, node: Node, rate: float, nodes: int, choices: int, resolution: int,
                 tail: float):
        self.node, self.rate, self.N, self.d = node, rate, nodes, choices
        self.per_node = rate / nodes
        self.B, self.tail = node.max_batch_size, tail
        service = node.service
        sizes = range(1, self.B + 1)
        mean1 = float(service.mean(1))
        upper = service_upper(service, sizes, tail)
        self.h = max(mean1 / resolution, upper / MAX_SERVICE_POINTS)
        self.Ls = int(math.ceil(upper / self.h)) + 2
        self.ps, self.overflow = service_lattice(service, sizes, self.h, self.Ls)
        self.surv = np.clip(1.0 - np.cumsum(self.ps, axis=1), 0.0, 1.0)
        self.surv = np.concatenate([np.ones((self.B, 1)), self.surv[:, :-1]], axis=1)
        self.smeans = self.ps @ (np.arange(self.Ls) * self.h)

    # --- the node under state-dependent arrivals -----------------------------------------
    def _propagator(self, lam: np.ndarray, extra: float, what: str):
        """(bands, width): the one-step transition law of the births, E = exp(G h), as its
        ``width + 1`` diagonals (``bands[w, m] = E[m, m + w]``, zero past the matrix), E upper
        triangular and banded (births only).

        Charge the budget for the ``self.Ls`` steps that follow: the banded products, and the
        caller's own ``extra`` element operations per count pair and step, for ``what``.
        """
        M = lam.size
        G = np.zeros((M, M))
        idx = np.arange(M - 1)
        G[idx, idx] = -lam[:-1]
        G[idx, idx + 1] = lam[:-1]                   # the top state absorbs (truncation)
        E = linalg.expm(G * self.h)
        rows, cols = np.nonzero(E > 1e-16)
        width = int(np.max(cols - rows)) if rows.size else 0
        budget.charge(budget.elements(2.0 * self.Ls * M * M * (width + 1 + extra)), MODEL,
                      f"{what} ({M} outstanding counts, up to {width} births in each of "
                      f"{self.Ls} lattice steps)")
        bands = np.zeros((width + 1, M))
        for w in range(width + 1):
            bands[w, :M - w] = np.diag(E, w)
        return bands, width

    def _steps(self, lam: np.ndarray, extra: float, what: str):
        """Yield (t, V_t) with V_t[n0, n] = P(count n after t steps | count n0), births only
        (the budget charged first, as :meth:`_propagator` says)."""
        yield from self._products(self._propagator(lam, extra, what)[0])

    def _products(self, bands: np.ndarray):
        """(t, V_t) for t < Ls from the one-step law's ``bands``: V_{t+1} = V_t E."""
        width, M = bands.shape[0] - 1, bands.shape[1]
        V = np.eye(M)
        for t in range(self.Ls):
            yield t, V
            nxt = V * bands[0]
            for w in range(1, width + 1):
                nxt[:, w:] += V[:, :-w] * bands[w, :M - w]
            V = nxt

    def _solve_node(self, lam: np.ndarray):
        """Stationary law of the completion chain (psi) and the time-average count law."""
        M, B = lam.size, self.B
        q = np.arange(M)
        k_of = np.minimum(np.maximum(q, 1), B)        # batch dispatched after completion q
        start = np.maximum(q, 1)                      # count when that batch starts
        after = np.zeros((M, M))                      # count at its end, given q
        occ = np.zeros((M, M))                        # time spent at each count, given q
        w_end = self.ps[k_of - 1]                     # (M, Ls)
        w_surv = self.surv[k_of - 1] * self.h
        # the matrix exponential and the least-squares solve: a few dozen M^3 flops
        budget.charge(budget.flops(25.0 * M ** 3), MODEL,
                      f"the node's law under routed arrivals ({M} outstanding counts)")
        bands, _ = self._propagator(lam, 3.0, "the node's law under routed arrivals")
        # the rows V_t[start] summed over the steps, compiled: numpy's products over whole
        # count matrices took 80% of a power-of-two prediction (benchmarks/predict_speed.py)
        kernel = _birth_sums()
        if kernel is not None:
            kernel(bands, start, np.ascontiguousarray(w_end), np.ascontiguousarray(w_surv),
                   after, occ)
        else:
            for t, V in self._products(bands):
                rows = V[start]
                after += w_end[:, t][:, None] * rows
                occ += w_surv[:, t][:, None] * rows
        # next q = count at the end minus the batch that leaves
        P = np.zeros((M, M))
        for i in range(M):
            k = k_of[i]
            P[i, :M - k] = after[i, k:]
        P /= P.sum(axis=1, keepdims=True)
        A = P.T - np.eye(M)
        A[-1] = 1.0
        rhs = np.zeros(M)
        rhs[-1] = 1.0
        # counts the chain never visits make the system singular in their rows: least
        # squares still gives the stationary law on the ones it does
        psi = np.clip(linalg.lstsq(A, rhs)[0], 0.0, None)
        psi /= psi.sum()
        idle = 1.0 / lam[0]
        time = psi @ occ
        time[0] += psi[0] * idle
        cycle = float(time.sum())
        return psi, time / cycle, cycle, k_of, start

    def fixed_point(self, lam0=None, max_iterations: int = 300, tolerance: float = 1e-6):
        """Iterate lambda(n) <- routing rule(stationary law under lambda(n)).

        The first iterate is the routing rule applied to a node whose count law is the
        exponential-service mean field s_n = rho^((d^n - 1) / (d - 1)) (Mitzenmacher 2001),
        rho the node's load at full batches: close to the answer, so the truncation is sized
        for the routed node rather than for a randomly fed one.
        """
        if lam0 is not None:
            lam = np.asarray(lam0, float).copy()
        else:
            rho = min(self.per_node / self.node.capacity, 0.999)
            n = np.arange(4 * self.B + 60)
            d = self.d
            # (d^n - 1) / (d - 1), capped where rho^expo is 0 anyway (d^n overflows for d = 128)
            expo = np.expm1(np.minimum(n * math.log(d), 700.0)) / (d - 1) if d > 1 else n
            surv = rho ** np.minimum(expo, 1e6)
            lam = np.maximum(_pick_rate(surv - np.append(surv[1:], 0.0), self.per_node, d),
                             1e-12 * self.per_node)
        M = lam.size
        damping = 0.5                 # plain steps swing (measured): least outstanding is stiff
        prev = None
        moved = 1.0
        history = []                  # (x, g(x) - x, weights) for Anderson mixing
        for it in range(max_iterations):
            try:
                psi, pi, cycle, k_of, start = self._solve_node(lam)
            except budget.OverBudget as err:
                if it == 0:
                    raise
                raise budget.OverBudget(
                    f"{MODEL}'s fixed point had not settled after {it} iterations (the count "
                    f"law still moved {moved:.1e}, to settle below {tolerance:.0e}), and "
                    f"{err}") from None
            # the count must stay well inside the truncation: grow it otherwise
            if pi[-max(self.B, 10):].sum() > self.tail and M < MAX_COUNT:
                M = min(MAX_COUNT, 2 * M)
                lam = np.concatenate([lam, np.full(M - lam.size, lam[-1])])
                prev, history = None, []
                continue
            # ... and no longer than it needs: the work grows like M^2 per step
            reach = np.flatnonzero(pi > self.tail * 1e-3)
            needed = max(int(reach[-1]) if reach.size else 0, 1) + max(16, self.B)
            if needed < M // 2:
                M = needed
                lam, pi = lam[:M], pi[:M] / pi[:M].sum()
                prev, history = None, []
            target = _pick_rate(pi, self.per_node, self.d)
            target = np.maximum(target, 1e-12 * self.per_node)
            if prev is not None:
                moved = float(np.max(np.abs(pi - prev)))
            prev = pi
            if moved < tolerance:
                break
            lam = np.exp(self._mix(history, np.log(lam), np.log(target), pi, damping))
        self.iterations = it + 1
        self.moved = moved
        self.lam, self.psi, self.pi, self.cycle = lam, psi, pi, cycle
        self.k_of, self.start, self.M = k_of, start, lam.size
        if pi[-max(self.B, 10):].sum() > self.tail:
            raise ValueError(
                f"the router model needs more than {MAX_COUNT} outstanding requests per node at "
                f"rate {self.rate:g}/s: too close to capacity for it. Lower the rate or use "
                f"qmodel.simulate")

    @staticmethod
    def _mix(history, x, gx, pi, damping, depth: int = 5):
        """Next iterate in log-rate space: Anderson mixing over the last ``depth`` steps.

        The residual g(x) - x is weighted by sqrt(pi): rates at counts the node never reaches
        do not matter. Anderson (1965) mixing, in the form of Walker & Ni (2011), with a
        damped plain step whenever the history is short or the least-squares step is wild.
        """
        f = gx - x
        w = np.sqrt(np.maximum(pi, 0.0)) + 1e-12
        history.append((x, f))
        del history[:-depth - 1]
        plain = x + damping * f
        if len(history) < 3:
            return plain
        X = np.array([h[0] for h in history])
        F = np.array([h[1] for h in history])
        dX, dF = np.diff(X, axis=0).T, np.diff(F, axis=0).T
        gamma, *_ = np.linalg.lstsq(dF * w[:, None], f * w, rcond=None)
        step = x + damping * f - (dX + damping * dF) @ gamma
        if not np.all(np.isfinite(step)) or np.max(np.abs(step - x)) > 5.0:
            history.clear()
            return plain
        return step

    # --- what a request sees --------------------------------------------------------------
    def sojourn(self) -> np.ndarray:
        """Lattice pmf of a request's sojourn time."""
        B, M, Ls, h = self.B, self.M, self.Ls, self.h
        lam, psi = self.lam, self.psi
        # X and Y below, and the arrivals' index arrays (up to one per entry of Y)
        what = (f"the arrivals' view ({B} batch sizes x {Ls} lattice steps x {M} outstanding "
                f"counts)")
        budget.check_memory(8.0 * 7 * B * Ls * M, MODEL, what)
        # the products with the batch groups each step, the residuals' Hankel products, and
        # the arrays' passes
        budget.charge(budget.flops(2.0 * B * Ls * M * (M + Ls))
                      + budget.elements(8.0 * B * Ls * M), MODEL, what)
        # X[k, t, n]: completion-chain mass whose batch k started t steps ago, count n now
        group = np.zeros((B, M))
        group[self.k_of - 1, np.arange(M)] = psi
        X = np.zeros((B, Ls, M))
        behind = np.zeros((Ls, M))                    # mean arrivals behind, capped at B
        for t, V in self._steps(lam, 8.0, "the arrivals' view"):
            X[:, t, :] = group @ V[self.start]
            # a request that arrives at count n starts the births behind it at n + 1
            shifted = np.zeros((M, M))
            shifted[:M - 1] = V[1:]
            rel = np.arange(M)[None, :] - np.arange(1, M + 1)[:, None]    # arrivals behind
            behind[t] = np.sum(shifted * np.minimum(np.maximum(rel, 0), B), axis=1)
        # Y[k, r, n] = sum_t X[k, t, n] p_k(t + r): arrival at elapsed t, residual r
        Y = np.zeros((B, Ls, M))
        for k in range(B):
            p = self.ps[k]
            hank = np.zeros((Ls, Ls))
            for t in range(Ls):
                hank[t, :Ls - t] = p[t:]
            Y[k] = hank.T @ X[k] * h
        Y *= lam[None, None, :]
        total_busy = Y.sum()
        idle_mass = psi[0]                             # arrivals to an idle node: psi0/lam0*lam0
        norm = (total_busy + idle_mass)
        # arrivals by (k, r, n): ahead = n - k, full batches f, position, own batch size
        k_idx, r_idx, n_idx = np.nonzero(Y > 1e-16 * total_busy)
        mass = Y[k_idx, r_idx, n_idx] / norm
        ahead = n_idx - (k_idx + 1)
        ok = ahead >= 0
        k_idx, r_idx, n_idx, mass, ahead = (a[ok] for a in (k_idx, r_idx, n_idx, mass, ahead))
        f = ahead // B
        pos = ahead - f * B + 1
        extra = np.where(f == 0, behind[r_idx, np.minimum(n_idx, M - 1)],
                         self.per_node * (r_idx * h + f * self.smeans[B - 1]))
        size = np.clip(pos + extra, 1.0, B)
        lo = np.floor(size).astype(int)
        frac = size - lo
        hi = np.minimum(lo + 1, B)
        F = int(f.max()) + 1 if f.size else 1
        H = np.zeros((F, B + 1, Ls))
        np.add.at(H, (f, lo, r_idx), mass * (1 - frac))
        np.add.at(H, (f, hi, r_idx), mass * frac)
        H[0, 1, 0] += idle_mass / norm                 # idle node: served at once, alone
        L = fft.next_fast_len((F + 2) * Ls)
        own = fft.rfft(self.ps, L, axis=1)              # (B, L/2+1)
        full = fft.rfft(self.ps[B - 1], L)
        spec = np.zeros(L // 2 + 1, complex)
        power = np.ones(L // 2 + 1, complex)
        for fi in range(F):
            part = (fft.rfft(H[fi, 1:], L, axis=1) * own).sum(axis=0)
            spec += part * power
            power = power * full
        pmf = np.clip(fft.irfft(spec, L), 0.0, None)
        self.mean_batch = float(np.sum(self.psi * self.k_of))
        return pmf


@one_blas_thread
def dynamic_router(node: Node, rate: float, nodes: int, choices: int,
                   resolution: int = 100, tail: float = 1e-9) -> LatticeLatency:
    """Sojourn-time distribution behind a least-outstanding or power-of-d router.

    Parameters
    ----------
    node : Node
        The (identical) node: one instance, no preferred sizes, unlimited queue. With a
        max_queue_delay the answer goes through :func:`_with_delay`.
    rate : float
        Total Poisson arrival rate into the cluster (requests per second).
    nodes : int
        N, the number of nodes.
    choices : int
        d, nodes sampled per request (N for least outstanding).
    resolution : int
        Lattice steps per batch-of-one service time.
    tail : float
        Time-average mass of outstanding counts left out of the truncation.

    Returns
    -------
    LatticeLatency
        ``method`` names the cavity model; ``accuracy`` is an approximation.

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(2e-3, 0.2e-3), max_batch_size=8)
    >>> r = dynamic_router(node, rate=0.7 * 4 * node.capacity, nodes=4, choices=2)
    >>> r.accuracy.exactness
    'approximation'
    """
    if node.max_queue_delay > 0:
        return _with_delay(node, float(rate), int(nodes), int(choices), resolution, tail)
    return _no_delay(node, float(rate), int(nodes), int(choices), resolution, tail)


def _with_delay(node: Node, rate: float, nodes: int, choices: int, resolution: int,
                tail: float) -> LatticeLatency:
    """A node with a delay behind the router: a renewal stream calibrated without the delay.

    The cavity model follows Triton's rule without a delay only. Its answer for the same node
    with max_queue_delay 0 fixes how smooth the routed stream is: the arrival scv x at which
    the batch-node model fed renewal arrivals (:func:`~qmodel.theory.batch.batch_node`) gives
    the same p99. The node with its delay is then solved under that renewal stream. Measured
    within 5.6% of the simulator on p99 inside predict's domain (validation/router_accuracy.py,
    delay S(1)); the median runs up to 12% low.
    """
    twin = replace(node, max_queue_delay=0.0)
    reference = _no_delay(twin, rate, nodes, choices, resolution, tail)
    per_node = rate / nodes

    def gap(log_scv):
        return batch_node(twin, per_node, arrival_scv=math.exp(log_scv)).p99 - reference.p99

    lo, hi = math.log(MIN_STREAM_SCV), 0.0               # routing smooths: scv below Poisson's
    if gap(lo) >= 0:
        log_scv = lo                                      # smoother than the family reaches
    elif gap(hi) <= 0:
        log_scv = hi
    else:
        log_scv = optimize.brentq(gap, lo, hi, xtol=0.02)
    x = math.exp(log_scv)
    result = batch_node(node, per_node, arrival_scv=x)
    result.throughput = rate * (1.0 - result.rejection_fraction)     # the cluster's, not a node's
    policy = "least outstanding" if choices == nodes else f"power of {choices}"
    result.method = (f"{policy} over {nodes} nodes with a delay: batch node under renewal "
                     f"arrivals (scv {x:.3g}) calibrated on the cavity model without the delay")
    result.accuracy = result.accuracy.extended(
        exactness="approximation", approximations=[Approximation(
            "calibrated_stream", f"the routed stream as renewal arrivals with scv {x:.3g}, the "
            f"value at which the node without its delay matches the mean-field p99 "
            f"{reference.p99 * 1e3:.4g} ms (state dependence of the arrivals during a "
            f"formation ignored)", value=x)])
    return result


def _no_delay(node: Node, rate: float, nodes: int, choices: int, resolution: int,
              tail: float) -> LatticeLatency:
    """The cavity model itself (max_queue_delay 0)."""
    # the rates lambda(n) do not depend on the lattice: settle them on a coarse one (cheap
    # iterations), then finish on the requested one from there
    coarse = _Cavity(node, float(rate), int(nodes), int(choices), COARSE_RESOLUTION, tail)
    coarse.fixed_point()
    cav = _Cavity(node, float(rate), int(nodes), int(choices), resolution, tail)
    cav.fixed_point(lam0=coarse.lam, tolerance=FINE_TOLERANCE)
    cav.iterations += coarse.iterations
    pmf = cav.sojourn()
    policy = "least outstanding" if choices == nodes else f"power of {choices}"
    sizes = np.bincount(cav.k_of, weights=cav.psi, minlength=cav.B + 1)
    # utilization by conservation from the model's own batch sizes: the cavity chain's busy
    # fraction (sum of pi[1:]) is off it by the mean-field approximation (0.819 for 0.800)
    utilization = node.service.utilization(rate / nodes, sizes, 1)
    notes = [Approximation(
        "mean_field", "other nodes independent with the node's own stationary law "
        "(mean field), own batch size from the mean arrivals behind")]
    if utilization > 1.0:
        # its batch sizes run a little small near capacity: said, and checked by the
        # self-checks as the batch chain's are
        notes.append(Approximation(
            "utilization_capped", f"the model's batch sizes imply a utilization of "
            f"{utilization:.3f}, capped at 1"))
        utilization = 1.0
    return LatticeLatency(
        pmf, cav.h,
        model="cavity",
        method=f"{policy} over {nodes} nodes: cavity (mean-field) model, state-dependent "
               f"arrivals",
        accuracy=Accuracy(
            "approximation", f"fixed point after {cav.iterations} iterations (count law moved "
            f"{cav.moved:.1e})", lattice_step=cav.h,
            approximations=notes),
        throughput=rate,
        utilization=utilization,
        batch_size_distribution={int(k): float(v) for k, v in enumerate(sizes) if v > 0})
