"""Queueing-theory solvers.

- :mod:`.classical`: exact M/M/c, M/D/1, M/D/c and numerical M/G/1 sojourn distributions;
- :mod:`.tails`: the Cramer-Lundberg exponential tail of GI/G/1;
- :mod:`.baselines`: textbook approximations (Kingman, Allen-Cunneen, exponential tail);
- :mod:`.lindley`: GI/G/1 under renewal arrivals by Lindley's recursion on a lattice;
- :mod:`.batch`: Triton's batching node (max_batch_size, delay, preferred sizes, instances);
- :mod:`.routing`, :mod:`.jsq`: dynamic routers in front of identical nodes.

Shared by them: :mod:`.service_law` (service-time laws, on a lattice and with their
transforms), :mod:`.queue_latency` (the FIFO queues' result type), :mod:`.arguments` (checks of
plain-number arguments), :mod:`.measured` (measured errors of the approximations) and
:mod:`.blas` (one BLAS thread for the lattice solvers).
"""

from .baselines import allen_cunneen_wait, baseline_latency, exponential_tail, kingman_wait
from .batch import BatchNodeLatency, batch_node
from .classical import MD1Latency, MDcLatency, MG1Latency, MMcLatency, md1, mdc, mg1, mmc
from .lindley import gig1, gigc
from .tails import CramerLundbergLatency, cramer_lundberg

__all__ = ["mmc", "md1", "mdc", "mg1", "MMcLatency", "MD1Latency", "MDcLatency", "MG1Latency",
           "cramer_lundberg", "CramerLundbergLatency", "kingman_wait", "allen_cunneen_wait",
           "exponential_tail", "baseline_latency", "batch_node", "BatchNodeLatency", "gig1",
           "gigc"]
