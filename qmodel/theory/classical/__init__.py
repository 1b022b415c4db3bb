"""Sojourn-time distributions of the classical FIFO queues M/M/c, M/D/1, M/D/c and M/G/1.

These are the ground truth the simulator is tested against: M/M/c and M/D/1 in closed form
(:mod:`.mmc`, :mod:`.mdc`), M/D/c exact up to a stated truncation (:mod:`.mdc`), M/G/1 by
numerical transform inversion with a stated, measured error (:mod:`.mg1`). Each solver returns
a :class:`~qmodel.theory.queue_latency.QueueLatency` of the sojourn time (waiting time in queue
plus the request's own service); the waiting time alone is available through
``waiting_cdf``, ``waiting_sf``, ``waiting_quantile`` and ``waiting_mean``, and the
probability of waiting at all through ``waiting_probability``.

Time units are whatever the caller uses consistently (seconds in qmodel); rates are per that
unit. Each module lists its references.
"""

from .mdc import MD1Latency, MDcLatency, md1, mdc
from .mg1 import MG1Latency, mg1
from .mmc import MMcLatency, erlang_c, mmc

__all__ = ["mmc", "md1", "mdc", "mg1", "MMcLatency", "MD1Latency", "MDcLatency",
           "MG1Latency", "erlang_c"]
