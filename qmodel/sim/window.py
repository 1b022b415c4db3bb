"""The measured window of a replica and what is counted inside it.

Each replica starts empty and runs until its last arrival has been served. The arrivals of
its first ``warmup`` fraction are discarded; the measured window runs from the first kept
arrival, ``t_warm``, to the last arrival, ``t_end``. Utilization is the busy time that lies
inside the window (:func:`busy_time`): each batch's ``[start, start + service)`` clipped to
``[t_warm, t_end]``, over instances x window length. An instance serves one batch at a time,
so this is at most 1; the same rule serves both engines and both backends.
"""

from __future__ import annotations

__all__ = ["busy_time"]


def busy_time(xp, start, service, t_warm, t_end):
    """Part of each batch's run ``[start, start + service)`` inside ``[t_warm, t_end]``.

    Elementwise over arrays of the array module ``xp`` (numpy or cupy); ``t_warm`` and
    ``t_end`` broadcast against ``start``. A batch that starts at +inf (a finished lane of the
    look-ahead engine) is busy for 0.

    Examples
    --------
    >>> import numpy as np
    >>> busy_time(np, np.array([0.0, 1.0, 4.0, 9.0]), np.array([1.0, 3.0, 3.0, 3.0]),
    ...           2.0, 10.0).tolist()
    [0.0, 2.0, 3.0, 1.0]
    """
    return xp.maximum(xp.minimum(start + service, t_end) - xp.maximum(start, t_warm), 0.0)
