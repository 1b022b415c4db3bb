"""The Monte Carlo engine: Triton's batching rules over independent replicas, vectorised or compiled."""

from .backend import get_backend, gpu_available
from .run import Replay, replay, simulate
from .window import ShortRunWarning

__all__ = ["simulate", "replay", "Replay", "ShortRunWarning", "get_backend", "gpu_available"]
