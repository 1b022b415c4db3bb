"""Kernel profiles: measured batch execution times S(k), every sample kept.

:func:`profile` times a batch workload over batch sizes, after a warm-up, ``repeats`` times
each, at one or more concurrencies: ``m`` copies running at once on the same device, as
Triton's instances on one GPU (or CPU) share it. The result, a :class:`Profile`, saves to and
loads from JSON (device, library versions, every sample), and gives the service law qmodel
needs: :meth:`Profile.service` (``ServiceTime.empirical``, the jitter kept) or
:meth:`Profile.fit` (an affine law with lognormal jitter, and its fit error).

Workloads: the built-in ``"two-tower"`` (the recommender of the case study: a user and an
item MLP tower and a dot-product score), ``"matmul"`` and ``"conv"`` (a small 3x3
convolution), or any callable ``f(batch_size)`` that runs one batch (``"module:function"``
names one). On the CPU they run with NumPy; copies at concurrency m run in m threads (NumPy's
BLAS releases the GIL).

Examples
--------
>>> p = profile("matmul", batch_sizes=[1, 8], repeats=5, warmup=1)
>>> sorted(p.samples[1]), len(p.samples[1][8])
([1, 8], 5)
>>> float(p.service().mean(8)) > 0
True
"""

from __future__ import annotations

import importlib
import json
import math
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .system import ServiceTime

__all__ = ["Profile", "profile", "WORKLOADS"]

FORMAT = "qmodel-profile-1"


def _two_tower(k: int, rng) -> callable:
    """User and item towers (64 -> 256 -> 128, ReLU) and the dot product of their outputs."""
    user, item = rng.standard_normal((k, 64)), rng.standard_normal((k, 64))
    w = [rng.standard_normal(s) * 0.1 for s in ((64, 256), (256, 128), (64, 256), (256, 128))]

    def run():
        u = np.maximum(np.maximum(user @ w[0], 0) @ w[1], 0)
        v = np.maximum(np.maximum(item @ w[2], 0) @ w[3], 0)
        return np.einsum("ij,ij->i", u, v)
    return run


def _matmul(k: int, rng) -> callable:
    """(k x 512) @ (512 x 512)."""
    a, b = rng.standard_normal((k, 512)), rng.standard_normal((512, 512))
    return lambda: a @ b


def _conv(k: int, rng) -> callable:
    """k images of 3 x 32 x 32, 16 filters of 3 x 3 (valid), by im2col and one product."""
    x, w = rng.standard_normal((k, 3, 32, 32)), rng.standard_normal((16, 3 * 3 * 3))

    def run():
        cols = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
        cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(k, 30 * 30, 27)
        return cols @ w.T
    return run


# name -> builder(batch_size, rng) returning the timed call (inputs made outside the timing)
WORKLOADS = {"two-tower": _two_tower, "matmul": _matmul, "conv": _conv}


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

        The line is fitted to the per-size means by least squares (Legendre's), the cv is the
        root mean square of the per-size cvs.
        """
        data = self._at(concurrency)
        k = np.array(sorted(data), float)
        means = np.array([np.mean(data[int(x)]) for x in k])
        if k.size >= 2:
            per_item, base = np.polyfit(k, means, 1)
        else:
            per_item, base = 0.0, float(means[0])
        per_item = max(float(per_item), 0.0)
        base = float(base)
        if base <= 0:                      # a line through the origin or below: keep S(1) > 0
            base, per_item = float(means[0]) / 2, float(means[0]) / 2
        cvs = [np.std(data[int(x)]) / np.mean(data[int(x)]) for x in k
               if len(data[int(x)]) > 1]
        cv = float(math.sqrt(np.mean(np.square(cvs)))) if cvs else 0.0
        fitted = base + per_item * k
        error = float(np.max(np.abs(fitted / means - 1)))
        jitter = ("lognormal", round(cv, 4)) if cv >= 1e-4 else "deterministic"
        return ServiceTime.affine(base, per_item, jitter=jitter), {"mean_error": error,
                                                                   "cv": cv}

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
        try:
            body = json.loads(Path(path).read_text())
        except OSError as err:
            raise ValueError(f"cannot read profile {path}: {err}") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not JSON ({err.msg})") from None
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


def _workload(workload):
    """(name, builder(k, rng) -> timed call) for a built-in name, 'module:function' or a
    callable f(batch_size) (which is then timed whole)."""
    if callable(workload):
        return getattr(workload, "__name__", "callable"), lambda k, rng: lambda: workload(k)
    if workload in WORKLOADS:
        return workload, WORKLOADS[workload]
    if isinstance(workload, str) and ":" in workload:
        module, _, name = workload.partition(":")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"workload {workload!r}: cannot import it ({err})") from None
        return workload, lambda k, rng: lambda: fn(k)
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


def profile(workload="two-tower", batch_sizes=range(1, 65), *, repeats: int = 30,
            warmup: int = 5, concurrency=(1,), seed: int = 0) -> Profile:
    """Time ``workload`` at each batch size, ``repeats`` times after ``warmup`` runs, at each
    concurrency (m copies at once, in m threads), on the CPU with NumPy.

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
    rng = np.random.default_rng(seed)
    samples: dict = {}
    for m in levels:
        samples[m] = {}
        for k in sizes:
            calls = [build(k, rng) for _ in range(m)]
            times = [[] for _ in range(m)]
            barrier = threading.Barrier(m)

            def worker(i):
                for r in range(warmup + repeats):
                    barrier.wait()               # the m copies start each run together
                    t0 = time.perf_counter()
                    calls[i]()
                    if r >= warmup:
                        times[i].append(time.perf_counter() - t0)
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(m)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            samples[m][k] = [float(x) for run in zip(*times) for x in run]
    from . import __version__
    versions = {"numpy": np.__version__, "qmodel": __version__,
                "python": platform.python_version()}
    device = f"cpu: {platform.processor() or platform.machine()}, numpy"
    return Profile(name, device, versions, samples)
