"""Kernel profiles: measured batch execution times S(k), every sample kept.

:func:`profile` times a batch workload over batch sizes, after a warm-up, ``repeats`` times
each, at one or more concurrencies: ``m`` copies running at once on the same device, as
Triton's instances on one GPU (or CPU) share it. The result, a :class:`Profile`, saves to and
loads from JSON (device, library versions, every sample), and gives the service law qmodel
needs: :meth:`Profile.service` (``ServiceTime.empirical``, the jitter kept) or
:meth:`Profile.fit` (an affine law with lognormal jitter, and its fit error).

Workloads: the built-in ``"two-tower"`` (the recommender of the case study: a user and an
item MLP tower and a dot-product score, in one call), its three models of the ensemble
apart, larger (``"user-tower"``, ``"item-tower"``, ``"scoring"``), ``"matmul"`` and
``"conv"`` (a small 3x3 convolution), all in float32, or any callable ``f(batch_size)`` that runs one batch
(``"module:function"`` names one). On the CPU they run with NumPy, copies at concurrency m in
m threads (NumPy's BLAS releases the GIL), timed by the wall clock; on a GPU with CuPy, as
Triton times an execution: m host threads, each with its own CUDA stream, each run timed by
the wall clock from the call to its stream's synchronisation, after the clocks were warmed
(optionally replaying a CUDA graph of the call). Sizes are timed in rounds of shuffled order;
:meth:`Profile.check` flags what cannot be right (S(k) falling with k beyond its spread,
copies that run faster together than alone).

Examples
--------
>>> p = profile("matmul", batch_sizes=[1, 8], repeats=5, warmup=1)
>>> sorted(p.samples[1]), len(p.samples[1][8])
([1, 8], 5)
>>> float(p.service().mean(8)) > 0
True
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import numbers
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .checks import read_json
from .system import ServiceTime
from .version import __version__

__all__ = ["Profile", "profile", "fit_line", "WORKLOADS"]

FORMAT = "qmodel-profile-1"
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _two_tower(k: int, rng, xp=np) -> callable:
    """User and item towers (64 -> 256 -> 128, ReLU) and the dot product of their outputs."""
    user, item = (xp.asarray(rng.standard_normal((k, 64)), dtype=xp.float32) for _ in "ui")
    w = [xp.asarray(rng.standard_normal(s) * 0.1, dtype=xp.float32)
         for s in ((64, 256), (256, 128), (64, 256), (256, 128))]

    def run():
        u = xp.maximum(xp.maximum(user @ w[0], 0) @ w[1], 0)
        v = xp.maximum(xp.maximum(item @ w[2], 0) @ w[3], 0)
        return (u * v).sum(axis=1)
    return run


def _mlp(dims, k: int, rng, xp=np) -> callable:
    """A batch of k inputs through dense layers of the given widths, ReLU after each."""
    x = xp.asarray(rng.standard_normal((k, dims[0])), dtype=xp.float32)
    w = [xp.asarray(rng.standard_normal((a, b)) * 0.05, dtype=xp.float32)
         for a, b in zip(dims, dims[1:])]

    def run():
        h = x
        for layer in w:
            h = xp.maximum(h @ layer, 0)
        return h
    return run


def _user_tower(k: int, rng, xp=np) -> callable:
    """The case study's user tower as one model: 512 -> 2048 -> 1024 -> 256 (13.6 MB)."""
    return _mlp((512, 2048, 1024, 256), k, rng, xp)


def _item_tower(k: int, rng, xp=np) -> callable:
    """The case study's item tower as one model: 512 -> 2048 -> 2048 -> 256 (22 MB)."""
    return _mlp((512, 2048, 2048, 256), k, rng, xp)


def _scoring(k: int, rng, xp=np) -> callable:
    """The case study's scoring model: both towers' outputs, 512 -> 512 -> 128 -> 1."""
    return _mlp((512, 512, 128, 1), k, rng, xp)


def _matmul(k: int, rng, xp=np) -> callable:
    """(k x 512) @ (512 x 512), float32."""
    a = xp.asarray(rng.standard_normal((k, 512)), dtype=xp.float32)
    b = xp.asarray(rng.standard_normal((512, 512)), dtype=xp.float32)
    return lambda: a @ b


def _conv(k: int, rng, xp=np) -> callable:
    """k images of 3 x 32 x 32, 16 filters of 3 x 3 (valid), by im2col and one product."""
    x = xp.asarray(rng.standard_normal((k, 3, 32, 32)), dtype=xp.float32)
    w = xp.asarray(rng.standard_normal((16, 27)), dtype=xp.float32)
    # im2col as 9 shifted views stacked: the same on NumPy and CuPy
    shifts = [(i, j) for i in range(3) for j in range(3)]

    def run():
        cols = xp.stack([x[:, :, i:i + 30, j:j + 30] for i, j in shifts], axis=2)
        cols = cols.reshape(k, 27, 900).transpose(0, 2, 1)
        return cols @ w.T
    return run


# name -> builder(batch_size, rng) returning the timed call (inputs made outside the timing)
WORKLOADS = {"two-tower": _two_tower, "user-tower": _user_tower, "item-tower": _item_tower,
             "scoring": _scoring, "matmul": _matmul, "conv": _conv}


def fit_line(sizes, means, weights=None) -> tuple[float, float]:
    """(base, per_item) of S(k) = base + per_item k fitted to measured means of at least two
    batch sizes by least squares (Legendre's; weighted by ``weights``, e.g. the executions of
    each size) with base >= 0 and per_item >= 0, so that every S(k) with k >= 1 is positive:
    where the free line falls (per_item < 0) the fit is the weighted mean, where it meets
    the axis at or below 0 (base <= 0) the line through the origin (the least squares
    optimum on that bound).

    Examples
    --------
    >>> [round(x, 9) for x in fit_line([1, 2, 4], [3.0, 4.0, 6.0])]
    [2.0, 1.0]
    >>> [round(x, 9) for x in fit_line([8, 16, 32], [1.0, 2.5, 6.0])]   # superlinear
    [0.0, 0.178571429]
    >>> fit_line([8], [5.0])
    Traceback (most recent call last):
    ...
    ValueError: a line needs the means of at least two batch sizes, got sizes [8]
    """
    k = np.asarray(sizes, float)
    y = np.asarray(means, float)
    w = np.ones_like(k) if weights is None else np.asarray(weights, float)
    k, y, w = k[w > 0], y[w > 0], w[w > 0]          # a size of weight 0 was not measured
    if np.unique(k).size < 2:
        raise ValueError(f"a line needs the means of at least two batch sizes, got sizes "
                         f"{[int(x) for x in k]}")
    per_item, base = np.polyfit(k, y, 1, w=np.sqrt(w))
    if per_item < 0:
        return float(np.average(y, weights=w)), 0.0
    if base <= 0:
        return 0.0, float(np.sum(w * k * y) / np.sum(w * k * k))
    return float(base), float(per_item)


@dataclass
class Profile:
    """Measured batch times: ``samples[m][k]`` lists every timed run of a batch of k at
    concurrency m (seconds), in the order measured.

    Attributes
    ----------
    workload, device : str
    versions : dict
        Library versions (numpy, qmodel, Python).
    samples : dict of int to dict of int to list of float
    """

    workload: str
    device: str
    versions: dict
    samples: dict = field(default_factory=dict)

    def service(self, concurrency: int = 1) -> ServiceTime:
        """The measured times at ``concurrency`` as ``ServiceTime.empirical`` (jitter kept)."""
        return ServiceTime.empirical(self._at(concurrency))

    def fit(self, concurrency: int = 1) -> tuple[ServiceTime, dict]:
        """An affine law with lognormal jitter fitted to the samples at ``concurrency``, and
        its error: ``{"mean_error": largest |fitted / measured mean - 1| over the sizes,
        "cv": the jitter's cv (pooled over sizes)}``.

        The line is fitted to the per-size means by least squares (Legendre's, :func:`fit_line`:
        at least two sizes; a line through the origin comes back as ``ServiceTime.table``),
        the cv is the root mean square of the per-size cvs.
        """
        data = self._at(concurrency)
        k = np.array(sorted(data), float)
        means = np.array([np.mean(data[int(x)]) for x in k])
        base, per_item = fit_line(k, means)
        cvs = [np.std(data[int(x)]) / np.mean(data[int(x)]) for x in k
               if len(data[int(x)]) > 1]
        cv = float(math.sqrt(np.mean(np.square(cvs)))) if cvs else 0.0
        fitted = base + per_item * k
        error = float(np.max(np.abs(fitted / means - 1)))
        jitter = ("lognormal", round(cv, 4)) if cv >= 1e-4 else "deterministic"
        if base == 0.0:      # a line through the origin: S(k) proportional to k
            law = ServiceTime.table({1: per_item, int(k[-1]): per_item * k[-1]}, jitter=jitter)
        else:
            law = ServiceTime.affine(base, per_item, jitter=jitter)
        return law, {"mean_error": error, "cv": cv}

    def slowdown(self, instances: int) -> tuple:
        """``Node.slowdown`` for ``instances`` instances from the copies profiled together:
        the factor at m busy instances is the profile's time at concurrency m over its time
        alone, the ratio of the summed per-size means over the sizes measured at both (a
        concurrency between two measured ones is interpolated linearly; past the largest the
        last factor holds).

        Examples
        --------
        >>> p = Profile("w", "cpu", {}, {1: {1: [1.0, 1.0], 8: [2.0]},
        ...                             2: {1: [1.5], 8: [3.0]}, 4: {1: [3.5], 8: [7.0]}})
        >>> p.slowdown(4)
        (1.0, 1.5, 2.5, 3.5)
        """
        if isinstance(instances, bool) or not isinstance(instances, numbers.Integral) \
                or instances < 2:
            raise ValueError(f"Profile.slowdown(instances={instances!r}): give the node's "
                             f"instance count, at least 2")
        if 1 not in self.samples:
            raise ValueError(f"the profile has concurrency {sorted(self.samples)}, not 1: "
                             f"profile one copy alone too (qmodel profile --concurrency "
                             f"1,2,4), the time the factors are relative to")
        alone = self._at(1)
        if not all(values and min(values) > 0 for values in alone.values()):
            raise ValueError("the profile's times at concurrency 1 must be positive and "
                             "present for every size measured")
        measured = {1: 1.0}
        for m in sorted(self.samples):
            if m == 1:
                continue
            sizes = [k for k in self._at(m) if k in alone]
            if not sizes:
                raise ValueError(f"concurrency {m} shares no batch size with concurrency 1: "
                                 f"profile both at the same sizes")
            measured[m] = (sum(float(np.mean(self._at(m)[k])) for k in sizes)
                           / sum(float(np.mean(alone[k])) for k in sizes))
        if len(measured) == 1:
            raise ValueError("the profile has concurrency 1 only: profile copies together "
                             "(qmodel profile --concurrency 1,2,4) to measure how they slow "
                             "each other")
        levels = sorted(measured)
        factors = np.interp(np.arange(1, instances + 1), levels,
                            [measured[m] for m in levels])
        return tuple(float(f) for f in factors)

    def spread(self, concurrency: int = 1) -> dict:
        """``{k: (median, spread)}`` in seconds at ``concurrency``; the spread is half the
        interquartile range of the samples (robust to the odd slow run)."""
        out = {}
        for k, values in sorted(self._at(concurrency).items()):
            q1, q2, q3 = np.percentile(values, [25, 50, 75])
            out[k] = (float(q2), float(q3 - q1) / 2)
        return out

    def check(self, alpha: float = 0.01) -> list[str]:
        """What makes the profile untrustworthy, one line each (empty: nothing found).

        A batch cannot take less time than a smaller one of the same work, and m copies
        sharing a device cannot each run faster than one copy alone. Each size's median gets
        a distribution-free confidence interval from its order statistics (the binomial
        interval, which holds for bimodal and quantised timings alike), at a level that
        makes the chance of flagging a profile that is monotone in truth at most ``alpha``
        however many sizes it has (Bonferroni over every pair compared). A size is flagged
        where its interval lies wholly below a smaller size's (or one copy's). Where the
        runs per size are too few to reach that level, the check says so instead.

        Examples
        --------
        >>> fast = [0.50, 0.51, 0.49, 0.52, 0.48] * 6
        >>> p = Profile("w", "cpu", {}, {1: {1: [x + 0.5 for x in fast], 2: fast}})
        >>> p.check()
        ["concurrency 1: S(2) median 500 ms lies below S(1) median 1000 ms beyond both medians' intervals (a test at level 0.01: not monotone in k)"]
        """
        from scipy import stats

        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
                or not 0 < alpha < 1:
            raise ValueError(f"alpha must be a probability strictly between 0 and 1, e.g. "
                             f"0.01, got {alpha!r}")
        levels = sorted(self.samples)
        for m in levels:
            for k, values in self.samples[m].items():
                if len(values) == 0:
                    raise ValueError(f"concurrency {m}, batch size {k} has no runs to check")
        pairs = sum(len(self.samples[m]) * (len(self.samples[m]) - 1) // 2 for m in levels)
        if 1 in self.samples:
            pairs += sum(len(self.samples[m]) for m in levels if m != 1)
        if pairs == 0:
            return []                       # nothing to compare
        level = alpha / pairs               # per comparison, both intervals together
        fewest = min(len(v) for m in levels for v in self.samples[m].values())
        # the interval [x_(l), x_(n+1-l)] misses the median with probability 2 P(Bin < l)
        each = level / 2
        needed = math.ceil(math.log2(2 / each))
        if fewest < needed:
            return [f"too few runs per size to check ({fewest}; {needed} are needed for the "
                    f"medians' intervals at this profile's {pairs} comparisons): raise "
                    "repeats"]

        def interval(values):
            x = np.sort(values)
            n = x.size
            low = int(stats.binom.ppf(each / 2, n, 0.5))     # P(Bin < low) <= each / 2
            while low > 0 and stats.binom.cdf(low - 1, n, 0.5) > each / 2:
                low -= 1
            low = max(low, 1)
            return float(np.median(x)), float(x[low - 1]), float(x[n - low])

        findings = []
        for m in levels:
            rows = [(k, interval(v)) for k, v in sorted(self.samples[m].items())]
            for i, (k, (median, lo, hi)) in enumerate(rows):
                above = [(j, row) for j, row in rows[:i] if row[1] > hi]
                if above:
                    j, row = max(above, key=lambda item: item[1][1])
                    findings.append(
                        f"concurrency {m}: S({k}) median {median * 1e3:.4g} ms lies below "
                        f"S({j}) median {row[0] * 1e3:.4g} ms beyond both medians' "
                        f"intervals (a test at level {alpha:.2g}: not monotone in k)")
        if 1 in self.samples:
            alone = {k: interval(v) for k, v in self.samples[1].items()}
            for m in levels:
                if m == 1:
                    continue
                for k, v in sorted(self.samples[m].items()):
                    median, lo, hi = interval(v)
                    if k in alone and alone[k][1] > hi:
                        findings.append(
                            f"concurrency {m}: S({k}) median {median * 1e3:.4g} ms lies below "
                            f"one copy's {alone[k][0] * 1e3:.4g} ms beyond both medians' "
                            f"intervals (a test at level {alpha:.2g}: copies sharing the "
                            "device ran faster than one alone)")
        return findings

    def _at(self, concurrency: int) -> dict:
        if concurrency not in self.samples:
            raise ValueError(f"the profile has concurrency {sorted(self.samples)}, not "
                             f"{concurrency!r}")
        return self.samples[concurrency]

    def save(self, path) -> None:
        """Write the profile as JSON."""
        body = {"format": FORMAT, "workload": self.workload, "device": self.device,
                "versions": self.versions,
                "samples": {str(m): {str(k): v for k, v in by_k.items()}
                            for m, by_k in self.samples.items()}}
        Path(path).write_text(json.dumps(body, indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "Profile":
        """Read a profile written by :meth:`save`; errors name the file."""
        body = read_json(path, "profile", "write one with qmodel.profile(...).save(path)")
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError(f"{path}: not a qmodel profile (format {FORMAT!r}); write one "
                             f"with qmodel.profile(...).save(path)")
        try:
            samples = {int(m): {int(k): [float(x) for x in v] for k, v in by_k.items()}
                       for m, by_k in body["samples"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"{path}: samples must map concurrency to batch size to a list "
                             f"of seconds") from None
        return cls(body.get("workload", ""), body.get("device", ""), body.get("versions", {}),
                   samples)


def _cpu_name() -> str:
    """The CPU's model name where /proc/cpuinfo gives it, else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _workload(workload):
    """(name, builder(k, rng) -> timed call) for a built-in name, 'module:function' or a
    callable f(batch_size) (which is then timed whole)."""
    if callable(workload):
        return getattr(workload, "__name__", "callable"), lambda k, rng, xp: lambda: workload(k)
    if workload in WORKLOADS:
        return workload, WORKLOADS[workload]
    if isinstance(workload, str) and ":" in workload:
        module, _, name = workload.partition(":")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"workload {workload!r}: cannot import it ({err})") from None
        return workload, lambda k, rng, xp: lambda: fn(k)
    raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, 'module:function' or a "
                     f"callable taking a batch size; got {workload!r}")


def _checked_sizes(batch_sizes) -> list[int]:
    try:
        sizes = sorted({int(k) for k in batch_sizes})
    except (TypeError, ValueError):
        raise ValueError(f"batch_sizes must be whole numbers such as range(1, 65), got "
                         f"{batch_sizes!r}") from None
    if not sizes or sizes[0] < 1:
        raise ValueError(f"batch_sizes must be whole numbers >= 1, got {batch_sizes!r}")
    return sizes


def _time_threads(calls, warmup: int, repeats: int, streams=None) -> list:
    """The m calls in m threads, started together each run; the wall time of each. With
    ``streams`` (a GPU), each thread runs on its own CUDA stream and the time runs to that
    stream's synchronisation, as Triton times an execution (CUDA events would time the
    device's timeline, which for a model bound by its kernel launches is the host's gaps
    between them)."""
    m = len(calls)
    times = [[] for _ in range(m)]
    barrier = threading.Barrier(m)

    def worker(i):
        stream = contextlib.nullcontext() if streams is None else streams[i]
        with stream:
            for r in range(warmup + repeats):
                barrier.wait()                       # the m copies start each run together
                t0 = time.perf_counter()
                calls[i]()
                if streams is not None:
                    streams[i].synchronize()
                if r >= warmup:
                    times[i].append(time.perf_counter() - t0)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(m)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [float(x) for run in zip(*times) for x in run]


def _as_graphs(cp, streams, calls) -> list:
    """Each copy's call captured into a CUDA graph on its stream (as Triton's TensorRT
    backend can), replayed by the timed call; the call runs once first so that its memory
    comes from the pool, not from an allocation inside the capture."""
    out = []
    for stream, call in zip(streams, calls):
        with stream:
            call()
            stream.synchronize()
            try:
                stream.begin_capture()
                call()
                graph = stream.end_capture()
            except Exception as err:    # CuPy names what could not be captured
                raise ValueError(f"the workload cannot be captured in a CUDA graph: {err}") \
                    from None
        out.append(lambda graph=graph, stream=stream: graph.launch(stream))
    return out


WARM_SECONDS = 1.0


def _warm_gpu(cp, call, seconds: float = WARM_SECONDS) -> None:
    """Run ``call`` for ``seconds`` before timing: an idle GPU's clocks are low (an H200 was
    seen at 345 MHz idle, 1980 MHz under load) and rise only under work."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        call()
        cp.cuda.get_current_stream().synchronize()


def _copy_worker(conn, barrier, workload, sizes, seed, backend, cuda_graph, warm_seconds):
    """One copy in a process of its own (``copies="processes"``): builds the workload at
    every size, then times the size the parent names, in step with the other copies. A
    failure is sent to the parent as its message."""
    try:
        _copy_loop(conn, barrier, workload, sizes, seed, backend, cuda_graph, warm_seconds)
    except threading.BrokenBarrierError:   # another copy failed: it names the cause
        conn.send("error: ")
    except Exception as err:      # the parent raises it as a ValueError naming the cause
        barrier.abort()
        conn.send(f"error: {type(err).__name__}: {err}")


def _copy_loop(conn, barrier, workload, sizes, seed, backend, cuda_graph, warm_seconds):
    if backend == "cupy":
        import cupy as xp
        stream = xp.cuda.Stream(non_blocking=True)
        stream.use()
        sync = stream.synchronize
    else:
        xp, sync = np, (lambda: None)
    _, build = _workload(workload)
    rng = np.random.default_rng(seed)
    calls = {k: build(k, rng, xp) for k in sizes}
    if backend == "cupy":
        if cuda_graph:
            calls = dict(zip(calls, _as_graphs(xp, [stream] * len(calls), list(calls.values()))))
        _warm_gpu(xp, calls[sizes[-1]], warm_seconds)
    conn.send("ready")
    while True:
        order = conn.recv()
        if order is None:
            return
        k, warm, runs = order
        out = []
        for r in range(warm + runs):
            barrier.wait()
            t0 = time.perf_counter()
            calls[k]()
            sync()
            if r >= warm:
                out.append(time.perf_counter() - t0)
        conn.send(out)


class _Copies:
    """m copies of a named workload, each in a process of its own (as Triton runs an
    instance of its Python backend), started by :func:`profile` and told which size to time."""

    def __init__(self, m, workload, sizes, seed, backend, cuda_graph):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")       # a CUDA context does not survive a fork
        self.barrier = ctx.Barrier(m)
        self.pipes, self.procs = [], []
        for i in range(m):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_copy_worker, daemon=True,
                               args=(child, self.barrier, workload, sizes, seed + i, backend,
                                     cuda_graph, WARM_SECONDS))
            proc.start()
            child.close()           # so that a copy that dies ends the parent's wait
            self.pipes.append(parent)
            self.procs.append(proc)
        self._receive()

    def _receive(self) -> list:
        """Every copy's answer; where one failed, the cause it gave (the others, stopped at
        the barrier it broke, give none)."""
        got = []
        for pipe in self.pipes:
            try:
                got.append(pipe.recv())
            except EOFError:
                got.append("error: the process ended")
        errors = [g[7:] for g in got if isinstance(g, str) and g.startswith("error")]
        if errors:
            self.close()
            raise ValueError(f"a profiling copy failed: {max(errors, key=len)}")
        return got

    def time(self, k, warm, runs) -> list:
        for pipe in self.pipes:
            pipe.send((k, warm, runs))
        got = self._receive()
        return [float(x) for run in zip(*got) for x in run]

    def close(self):
        for pipe in self.pipes:
            try:
                pipe.send(None)
            except OSError:         # that copy has ended already
                pass
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()


def profile(workload="two-tower", batch_sizes=range(1, 65), *, repeats: int = 30,
            warmup: int = 5, concurrency=(1,), backend: str = "numpy",
            seed: int = 0, blas_threads: int | None = None,
            cuda_graph: bool = False, copies: str = "threads") -> Profile:
    """Time ``workload`` at each batch size, ``repeats`` times after ``warmup`` runs, at each
    concurrency (m copies at once: m threads on the CPU, m host threads with a CUDA stream
    each on a GPU).

    The sizes are timed in rounds, each round in a fresh random order (seeded by ``seed``),
    so that a drift of the machine over the run (clocks, temperature, other work) spreads
    over all sizes instead of bending S(k). On a GPU the clocks are warmed first by running
    the largest batch for :data:`WARM_SECONDS`.

    Parameters
    ----------
    backend : {"numpy", "cupy"}
        CPU with NumPy (wall time per call), or the GPU with CuPy (CUDA events per call; a
        callable workload must then launch its own GPU work).
    blas_threads : int, optional
        BLAS threads per copy on the CPU (threadpoolctl's limit during the timing, recorded in
        ``versions``). One makes m copies share the cores as m instances would; the default
        leaves the BLAS's own choice, under which concurrent copies oversubscribe the cores.
    cuda_graph : bool
        On a GPU: capture each copy's call in a CUDA graph and time its replay (recorded in
        ``versions``).
    copies : {"threads", "processes"}
        How the m copies of a concurrency level run: threads of this process (they share
        its interpreter lock while they launch work), or a process each, as Triton runs each
        instance of its Python backend (a named workload only; recorded in ``versions``).
        On a GPU the copies in threads of one Python process were seen to serialise on the
        lock (2 copies at 1.6-1.8 times one copy's time on an H200).

    Returns
    -------
    Profile
        Every timed sample, by concurrency and batch size.
    """
    name, build = _workload(workload)
    sizes = _checked_sizes(batch_sizes)
    for value, what in ((repeats, "repeats"), (warmup, "warmup")):
        if isinstance(value, bool) or not isinstance(value, int) or value < (what == "repeats"):
            raise ValueError(f"{what} must be a whole number >= {int(what == 'repeats')}, got "
                             f"{value!r}")
    levels = sorted({int(m) for m in np.atleast_1d(concurrency)})
    if levels[0] < 1:
        raise ValueError(f"concurrency must be whole numbers >= 1, got {concurrency!r}")
    versions = {"numpy": np.__version__, "qmodel": __version__,
                "python": platform.python_version()}
    # BLAS threads decide what m copies sharing the CPU means: say how many each copy had
    versions.update({name: os.environ[name] for name in BLAS_THREADS if name in os.environ})
    if backend == "numpy":
        xp, device = np, f"cpu: {_cpu_name()}, {os.cpu_count()} cores, numpy"
        timed = _time_threads
    elif backend == "cupy":
        try:
            import cupy as cp
            props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        except Exception as err:        # no CuPy, no driver or no device: say which
            raise ValueError(f"backend='cupy' needs CuPy and a CUDA GPU: {err}") from None
        xp = cp
        device = f"gpu: {props['name'].decode()}, cupy"
        versions.update(cupy=cp.__version__, cuda_runtime=cp.cuda.runtime.runtimeGetVersion())

        streams_of: dict = {}

        def streams_for(m):
            return streams_of.setdefault(m, [cp.cuda.Stream(non_blocking=True)
                                             for _ in range(m)])

        def timed(calls, warmup, repeats):
            return _time_threads(calls, warmup, repeats, streams_for(len(calls)))
    else:
        raise ValueError(f"backend must be 'numpy' or 'cupy', got {backend!r}")
    if cuda_graph and backend != "cupy":
        raise ValueError("cuda_graph=True needs backend='cupy' (a GPU)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
    limit = contextlib.nullcontext()
    if blas_threads is not None:
        if isinstance(blas_threads, bool) or not isinstance(blas_threads, int) \
                or blas_threads < 1:
            raise ValueError(f"blas_threads must be a whole number >= 1, got {blas_threads!r}")
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=blas_threads, user_api="blas")
        versions["blas_threads"] = blas_threads
    rng = np.random.default_rng(seed)
    if cuda_graph:
        versions["cuda_graph"] = True
    samples: dict = {m: {k: [] for k in sizes} for m in levels}
    if copies not in ("threads", "processes"):
        raise ValueError(f"copies must be 'threads' or 'processes', got {copies!r}")
    if copies == "processes":
        if not isinstance(workload, str):
            raise ValueError("copies='processes' needs a named workload (a built-in name or "
                             "'module:function'), which each process imports")
        versions["copies"] = "processes"
        with limit:
            for m in levels:
                group = _Copies(m, workload, sizes, seed, backend, cuda_graph)
                try:
                    for r in range(warmup + repeats):
                        for k in rng.permutation(sizes):
                            samples[m][int(k)] += group.time(int(k), int(r < warmup),
                                                             int(r >= warmup))
                finally:
                    group.close()
        return Profile(name, device, versions, samples)
    with limit:
        calls = {(m, k): [build(k, rng, xp) for _ in range(m)] for m in levels for k in sizes}
        if backend == "cupy":
            if cuda_graph:
                calls = {key: _as_graphs(xp, streams_for(len(c)), c)
                         for key, c in calls.items()}
            _warm_gpu(xp, calls[(levels[0], sizes[-1])][0])
        for m in levels:
            for r in range(warmup + repeats):
                for k in rng.permutation(sizes):
                    got = timed(calls[(m, int(k))], int(r < warmup), int(r >= warmup))
                    samples[m][int(k)] += got
    return Profile(name, device, versions, samples)
