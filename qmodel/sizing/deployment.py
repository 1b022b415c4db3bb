"""What a plan deploys: copies of a unit (a Node or an Ensemble pod) behind a router, and the
one-line description of its knobs. Shared by the search, the plan, the report and autoscaling
(a floor below all of them)."""

from __future__ import annotations

from ..ensemble import Ensemble
from ..system import Cluster

__all__ = ["system_of", "unit", "knobs"]


def system_of(node, router, count):
    """``count`` copies of ``node`` (a Node or an Ensemble pod) behind ``router``; the node
    itself where one serves."""
    return node if count == 1 else Cluster(node, count=count, router=router)


def unit(system):
    """What a plan repeats: its Node or Ensemble pod (the system itself where it is one)."""
    return system.nodes[0] if isinstance(system, Cluster) else system


def knobs(system) -> str:
    """A node's description, or for an Ensemble pod each stage's batching knobs on one line.

    >>> import qmodel as qm
    >>> s = qm.ServiceTime.affine(1e-3)
    >>> pod = qm.Ensemble({"a": qm.Node(s, max_batch_size=4, max_queue_delay=1e-3),
    ...                    "b": qm.Node(s, instances=2)}, [("a", "b")])
    >>> knobs(pod)
    'a: B 4, delay 1 ms, 1 instance; b: B 1, delay 0 ms, 2 instances'
    """
    if not isinstance(system, Ensemble):
        return system.describe()
    return "; ".join(
        f"{name}: B {n.max_batch_size}, delay {n.max_queue_delay * 1e3:g} ms, "
        + (f"preferred {'/'.join(map(str, n.preferred_batch_sizes))}, "
           if n.preferred_batch_sizes else "")
        + f"{n.instances} instance{'s' * (n.instances > 1)}"
        for name, n in ((m, system.stages[m]) for m in system.order))
