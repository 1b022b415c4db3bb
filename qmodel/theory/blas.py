"""One BLAS thread while the batch model computes.

The batch model's matrices are small (a few thousand rows at most) and its BLAS calls short,
so a multi-threaded BLAS spends more on waking and syncing its threads than it gains, and on a
busy machine much more: on the 2-core development machine, with OpenBLAS's default 2 threads, the
batch model of a 4-instance node (max_batch_size 16, load 0.7) took 44-250 ms per call against
30-37 ms with one thread, and no node of benchmarks/predict_speed.py ran faster with two.
threadpoolctl sets the limit for the call only and restores it after.
"""

from __future__ import annotations

import functools

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]

_controller = None


def _limit():
    """The BLAS libraries loaded by now (numpy's and scipy's), limited to one thread."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def one_blas_thread(fn):
    """Decorator: run ``fn`` with BLAS limited to one thread (restored afterwards)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _limit():
            return fn(*args, **kwargs)
    return wrapper
