"""One array namespace for NumPy and CuPy.

The engines write ``bk.xp.maximum(...)`` and ``bk.rng.random(...)`` and run unchanged on either
library. CuPy is used only when asked for (``backend="cupy"``), and then only when it imports
*and* a GPU answers: on an H100 it ran the engines at 0.54-0.71x NumPy's speed and the events
engine at 0.04x (benchmarks/results/gpu-h100-2026-11-25), because each step of the engines is a
few small kernels and launch latency sets the pace. So "auto" takes NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

__all__ = ["Backend", "get_backend", "gpu_available"]


@dataclass
class Backend:
    """The array module, its random generator, and the way back to NumPy."""

    name: str
    xp: ModuleType
    rng: object

    def asnumpy(self, a) -> np.ndarray:
        return a.get() if self.name == "cupy" else np.asarray(a)

    def asarray(self, a):
        return self.xp.asarray(a)

    def random_bits16(self, shape):
        """Uniform random integers in [0, 65536) as int64 (cheap tie-breakers)."""
        if self.name == "numpy":
            count = int(np.prod(shape))
            bits = np.frombuffer(self.rng.bytes(2 * count), dtype=np.uint16)
            return bits.reshape(shape).astype(np.int64)
        return self.rng.integers(0, 1 << 16, shape, dtype=self.xp.int64)


def gpu_available() -> bool:
    """True when CuPy imports and can run a kernel on a GPU."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False
        cupy.arange(2).sum().item()
        return True
    except Exception:  # no cupy, no driver, no device: all mean "use NumPy"
        return False


def get_backend(name: str = "auto", seed=None) -> Backend:
    """Resolve ``backend=`` ("auto", "numpy" or "cupy") to a Backend seeded with ``seed``.

    Examples
    --------
    >>> bk = get_backend("numpy", seed=1)
    >>> bk.name, bk.xp.__name__
    ('numpy', 'numpy')
    """
    if name not in ("auto", "numpy", "cupy"):
        raise ValueError(f"backend={name!r} is unknown; use 'auto', 'numpy' or 'cupy'")
    if name == "cupy" and not gpu_available():
        raise ValueError("backend='cupy' needs CuPy and a working GPU; install the 'gpu' extra "
                         "(pip install qmodel[gpu]) or use backend='numpy'")
    if name == "cupy":
        import cupy
        return Backend("cupy", cupy, cupy.random.default_rng(seed))
    return Backend("numpy", np, np.random.default_rng(seed))
