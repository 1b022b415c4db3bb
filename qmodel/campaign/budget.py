"""How many requests a validation campaign simulates per configuration.

The run-to-run spread of a simulated p99 is about 3.5 sqrt(R / requests), R the node's
relaxation length in arrivals (:func:`qmodel.sim.replicas.relaxation_arrivals`; measured by
validation/replica_bias.py, where it held from B = 1 to B = 64, deterministic and lognormal
service, 90% and 95% load), so :func:`requests_for` simulates 54,000 R requests, which holds
that spread near 1.5%: 19.5 M for a deterministic node at 95% load, 73 M for B = 32 with
lognormal cv 0.3 jitter there. The simulator's default replicas (100 R arrivals each) keep the
start-up transient out of the tail.

A cluster (:func:`cluster_requests`) gets enough requests for the simulator's own minimum of
replicas, each long enough for the start-up transient of every node.
"""

from __future__ import annotations

from ..sim.replicas import MIN_REPLICAS, arrivals_per_replica_node, relaxation_arrivals
from ..system import Cluster, Node

__all__ = ["REQUESTS_PER_RELAXATION", "requests_for", "cluster_requests"]

# simulated requests per relaxation length R: a p99 spread of 3.5 sqrt(R / requests) = 1.5%
REQUESTS_PER_RELAXATION = 54_000


def requests_for(node: Node, rate: float, least: int, most: int,
                 arrival_scv: float = 1.0) -> int:
    """Simulated requests for a p99 spread near 1.5%, between ``least`` and ``most``.

    Parameters
    ----------
    node : Node
    rate : float
        Arrival rate, requests/s.
    least, most : int
        The bounds.
    arrival_scv : float
        Of renewal arrivals' gaps, which lengthen the relaxation.

    Examples
    --------
    >>> from qmodel.campaign.grids import GRID_SERVICE
    >>> node = GRID_SERVICE.node(1)
    >>> requests_for(node, 0.95 * node.capacity, 2_000_000, 64_000_000)
    19493999
    """
    wanted = REQUESTS_PER_RELAXATION * relaxation_arrivals(Cluster(node), rate, arrival_scv)
    return int(min(most, max(least, wanted)))


def cluster_requests(cluster: Cluster, rate: float, least: int = 1_000_000,
                     per_node: int = 20_000, most: int = 64_000_000) -> int:
    """Simulated requests for a cluster: ``least``, ``per_node`` per node, or more where the
    simulator's minimum of replicas (``MIN_REPLICAS``), each long enough for the start-up
    transient, needs more; at most ``most``."""
    n = len(cluster.nodes)
    return int(min(most, max(least, per_node * n,
                             MIN_REPLICAS * n * arrivals_per_replica_node(cluster, rate))))
