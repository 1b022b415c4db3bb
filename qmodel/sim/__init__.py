"""The Monte Carlo engine: Triton's batching rules, vectorised over independent replicas."""

from .backend import get_backend, gpu_available
from .run import simulate

__all__ = ["simulate", "get_backend", "gpu_available"]
