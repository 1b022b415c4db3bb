"""How many requests the validation scripts simulate per configuration.

The run-to-run spread of a simulated p99 is about 3.5 sqrt(R / requests), R the node's relaxation
length in arrivals (qmodel.sim.run.relaxation_arrivals; measured over validation/replica_bias.py's
runs, where it held from B = 1 to B = 64, deterministic and lognormal service, 90% and 95% load),
so 54,000 R requests hold it near 1.5%: 19.5 M for a deterministic node at 95% load, 73 M for
B = 32 with lognormal cv 0.3 jitter there. The simulator's default replicas (100 R arrivals
each) keep the start-up transient out of the tail.
"""

from __future__ import annotations

import qmodel as qm
from qmodel.sim.run import relaxation_arrivals

# simulated requests per relaxation length R: a p99 spread of 3.5 sqrt(R / requests) = 1.5%
REQUESTS_PER_RELAXATION = 54_000


def requests_for(node: qm.Node, rate: float, least: int, most: int,
                 arrival_scv: float = 1.0) -> int:
    """Simulated requests for a p99 spread near 1.5%, between ``least`` and ``most``
    (``arrival_scv``: of renewal arrivals' gaps, which lengthen the relaxation)."""
    wanted = REQUESTS_PER_RELAXATION * relaxation_arrivals(qm.Cluster(node), rate, arrival_scv)
    return int(min(most, max(least, wanted)))
