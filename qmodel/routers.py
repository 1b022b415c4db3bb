"""Routers: how a load balancer in front of the nodes picks one for each request.

One small object per routing policy carries everything qmodel knows about it, in the manner of
Ciw's routing objects: its name and parameters (checked once, when a
:class:`~qmodel.system.Cluster` is built), the simulator's dispatch (the array code that picks
a node, over NumPy or CuPy), which of ``qmodel.predict``'s cluster models answers it, and that
model's domain (where it has been measured to hold). The CLI, :func:`qmodel.compare_routers`
and the validation campaigns read the policies from :data:`ROUTERS`.

=====================  ========  ====================================================
policy                 kind      predict's model
=====================  ========  ====================================================
``random``             static    exact decomposition into independent nodes (Poisson
                                 thinning), weighted for canary splits
``round_robin``        static    each node sees every N-th arrival (Erlang-N gaps for
                                 Poisson input), exact marginally
``least_outstanding``  dynamic   balanced queues (one-request nodes) or round robin
                                 (batching nodes), measured approximations
``power_of_d``         dynamic   the cavity (mean-field) model inside its measured
                                 domain; ``power_of_two`` is d = 2
=====================  ========  ====================================================
"""

from __future__ import annotations

import numpy as np

from .checks import MOST_NODES, positive_int, real_array, shown

__all__ = ["RouterPolicy", "ROUTERS", "ROUTER_NAMES", "COMPARED_ROUTERS", "router_policy"]

# Ties are broken by 16 random low bits under the outstanding count: tied nodes are chosen
# uniformly, except that two tied nodes drawing the same 16 bits (probability 2**-16) fall to
# the lower index, a bias far below any Monte Carlo error. Cheaper than a float per node.
TIE_BITS = 16


class RouterPolicy:
    """What one routing policy is and does. Subclasses fill in the class attributes and the
    methods their kind needs (static: :meth:`assign`; dynamic: :meth:`choose`).

    Attributes
    ----------
    name : str
        The policy's name in :class:`~qmodel.system.Router`.
    static : bool
        True when the choice ignores node state (the nodes then decouple).
    summary : str
        What shapes a cluster's latency under it, in one line.
    example : str
        The router name that stands for the policy in comparisons (its parameter's usual
        value where it has one).
    model : str
        The key of predict's cluster model that answers it.
    samples_nodes : bool
        True when it samples ``choices`` nodes per request.
    """

    name: str = ""
    example: str = ""
    static: bool = True
    samples_nodes: bool = False
    summary: str = ""
    model: str = ""

    # ---- the description -------------------------------------------------------------------
    def checked_parameters(self, weights, choices, nodes: int, explicit: bool,
                           written: str | None = None, size: str | None = None):
        """(weights, choices) validated for ``nodes`` nodes, or a ValueError naming the field.

        ``explicit``: given through a Router object (whose ``choices`` defaults to 2).
        ``written``: the router's name as the user wrote it (``power_of_two`` for power_of_d);
        ``size``: how the nodes were given ("node, count=1", or "[3 nodes]" for a list); both
        only word the messages.
        """
        if weights is not None:
            raise ValueError(f"Cluster.weights only apply to router='random', not "
                             f"{(written or self.name)!r}")
        if choices is not None and not explicit:
            raise ValueError(f"Cluster.choices only applies to router='power_of_d', not "
                             f"{(written or self.name)!r}")
        return None, 2

    def display_name(self, router) -> str:
        return self.name

    def shares(self, router, nodes: int):
        """Each node's long-run share of requests (static routers); None for dynamic ones."""
        return None

    def node_arrival_scv(self, share: float, arrival_scv: float, nodes: int) -> float:
        """Static routers: the interarrival scv of the stream a node with this ``share`` sees
        when the cluster's arrivals are renewal with ``arrival_scv``."""
        raise AssertionError(f"{self.name} is not a static router")

    # ---- the simulator ---------------------------------------------------------------------
    def assign(self, router, xp, rng, nodes: int, shape):
        """Static routers: the node of every request, an int array of ``shape`` (replicas,
        requests), drawn with the backend's generator ``rng``."""
        raise AssertionError(f"{self.name} is not a static router")

    def tie_width(self, router, nodes: int) -> int:
        """Dynamic routers: how many random tie-breakers one decision needs."""
        raise AssertionError(f"{self.name} is not a dynamic router")

    def choose(self, router, xp, rng, outstanding, ties):
        """Dynamic routers: the node chosen in each replica from the outstanding requests
        (queued + in service) per node, ``outstanding`` an int array (replicas, nodes), with
        ``ties`` (replicas, :meth:`tie_width`) random 16-bit tie-breakers."""
        raise AssertionError(f"{self.name} is not a dynamic router")

    # ---- predict's model -------------------------------------------------------------------
    def unmodelled(self, cluster, load: float, arrival_scv: float) -> str | None:
        """Why ``qmodel.predict`` has no model of ``cluster`` behind this router at ``load``
        (the fraction of the cluster's capacity) and this arrival scv; None where its model
        answers (inside the domain where it was measured)."""
        return None

    def __repr__(self) -> str:
        return f"<router policy {self.name}>"


def _more(size: str, n: int) -> str:
    """The fix "more nodes" in the words the nodes were given in (``size``: "node, count=1"
    for one node copied, "[3 nodes]" for a list)."""
    return f"count >= {n}" if size.startswith("node") else f"a list of at least {n} nodes"


def _mixed_nodes(cluster) -> str | None:
    if any(node != cluster.nodes[0] for node in cluster.nodes):
        return (f"predict() models router {cluster.router.name!r} over identical nodes only; "
                f"use qmodel.simulate for a mix of nodes")
    return None


def several_instance_gap(name: str, node, arrival_scv: float) -> str | None:
    """Why predict has no model of router ``name`` over copies of ``node``, a node of several
    instances (None: the model "as round robin" answers, inside its measured domain).

    Examples
    --------
    >>> from qmodel.system import Node, ServiceTime
    >>> node = Node(ServiceTime.affine(2e-3, 0.3e-3), max_batch_size=8, instances=2)
    >>> several_instance_gap("least_outstanding", node, 1.0) is None
    True
    >>> several_instance_gap("least_outstanding", node, 0.5)[-73:]
    'arrivals of interarrival scv 0.5, not Poisson. Use qmodel.simulate for it'
    """
    what = []
    if node.max_queue_size:
        what.append(f"a finite queue (max_queue_size {node.max_queue_size})")
    if arrival_scv != 1.0:
        what.append(f"arrivals of interarrival scv {arrival_scv:.3g}, not Poisson")
    if not what:
        return None
    return (f"predict() models router {name!r} over nodes of several instances without a "
            f"finite queue, under Poisson arrivals (as round robin, measured in "
            f"validation/several_instance_routers.py and validation/wide_domain.py); this "
            f"cluster has "
            f"{', '.join(what)}. Use qmodel.simulate for it")


class RandomRouter(RouterPolicy):
    """Independent draws, optionally weighted (canary splits)."""

    name = example = "random"
    static, model = True, "split"
    summary = "each node sees Poisson arrivals (interarrival scv 1)"

    def checked_parameters(self, weights, choices, nodes, explicit, written=None, size=None):
        if choices is not None and not explicit:
            raise ValueError("Cluster.choices only applies to router='power_of_d', not 'random'")
        if weights is None:
            return None, 2
        w = real_array(weights, "Cluster.weights", "one number per node, e.g. [9, 1] for a "
                       "90/10 split").ravel()
        if w.size != nodes:
            raise ValueError(f"Cluster.weights has {w.size} entries for {nodes} nodes; "
                             "give one weight per node")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("Cluster.weights must be finite, >= 0 and sum to a positive "
                             f"number, got {shown(w.tolist())}")
        return tuple((w / w.sum()).tolist()), 2

    def shares(self, router, nodes):
        return np.asarray(router.weights) if router.weights else np.full(nodes, 1 / nodes)

    def node_arrival_scv(self, share, arrival_scv, nodes):
        # independent thinning of a renewal stream is renewal, its gaps a geometric sum of the
        # input's (Poisson stays Poisson)
        return share * arrival_scv + (1.0 - share)

    def assign(self, router, xp, rng, nodes, shape):
        if router.weights is None:
            return rng.integers(0, nodes, shape)
        cum = xp.asarray(np.cumsum(router.weights)[:-1])
        return xp.searchsorted(cum, rng.random(shape), side="right")


class RoundRobin(RouterPolicy):
    """Nodes in turn, from a random start in each replica."""

    name = example = "round_robin"
    static, model = True, "split"
    summary = "each node sees every N-th arrival (interarrival scv 1/N): smoother queues"

    def shares(self, router, nodes):
        return np.full(nodes, 1 / nodes)

    def node_arrival_scv(self, share, arrival_scv, nodes):
        # every N-th arrival: a gap is the sum of N input gaps (Erlang-N for Poisson input)
        return arrival_scv / nodes

    def assign(self, router, xp, rng, nodes, shape):
        start = rng.integers(0, nodes, (shape[0], 1))
        return (xp.arange(shape[1])[None, :] + start) % nodes


class LeastOutstanding(RouterPolicy):
    """The node with the fewest queued plus in-service requests, ties at random (NGINX
    least_conn)."""

    name = example = "least_outstanding"
    static, model = False, "least_outstanding"
    summary = ("joins the shortest queue of all; with batching the levelled queues take "
               "requests in turn, so it is predicted as round robin (tails); without, a "
               "request waits only when every node is busy")

    # predict's domain: one-request nodes (the balanced-queue model) with steady service up to
    # this jitter cv (lognormal/gamma jitter takes its count from M/D/N: measured within 8% at
    # cv 0.3)
    BALANCED_MAX_CV = 0.3
    # batching nodes: answered as round robin from this max_batch_size up, for service times
    # this steady (jitter cv); at B = 2 the p99 was up to twice the simulated one, with jitter
    # cv 0.3 29% off (validation/least_outstanding_small_batch.py, router_accuracy.py)
    AS_ROUND_ROBIN_MIN_BATCH, AS_ROUND_ROBIN_MAX_CV = 4, 0.1
    # under renewal arrivals, from this max_batch_size (not measured below)
    RENEWAL_MIN_BATCH = 8

    def tie_width(self, router, nodes):
        return nodes

    def choose(self, router, xp, rng, outstanding, ties):
        return xp.argmin((outstanding << TIE_BITS) | ties, axis=1)

    def unmodelled(self, cluster, load, arrival_scv):
        return _mixed_nodes(cluster) or self.node_gap(cluster.nodes[0], arrival_scv)

    def node_gap(self, node, arrival_scv: float) -> str | None:
        """Why predict has no least-outstanding model over copies of ``node`` (None: it has)."""
        B = node.max_batch_size
        if node.instances > 1:
            return several_instance_gap(self.name, node, arrival_scv)
        if arrival_scv != 1.0 and B < self.RENEWAL_MIN_BATCH:
            return (f"predict() models router 'least_outstanding' under renewal arrivals only "
                    f"for batching nodes with max_batch_size >= {self.RENEWAL_MIN_BATCH} (as "
                    f"round robin); this node has max_batch_size {B}. Use qmodel.simulate for it")
        if B == 1:
            why = self.balanced_gap(node)
            return None if why is None else (
                f"predict() models router 'least_outstanding' over one-request nodes with one "
                f"instance, an unlimited queue and steady service; this node has {why}. Use "
                f"qmodel.simulate for it")
        service = node.service
        steady = service.jitter == "deterministic" or (
            service.jitter in ("lognormal", "gamma") and service.cv <= self.AS_ROUND_ROBIN_MAX_CV)
        if B < self.AS_ROUND_ROBIN_MIN_BATCH \
                or node.preferred_batch_sizes or node.max_queue_size or not steady:
            return (f"predict() models router 'least_outstanding' for one-request nodes "
                    f"(max_batch_size 1) and for single-instance nodes with max_batch_size >= "
                    f"{self.AS_ROUND_ROBIN_MIN_BATCH}, service-time jitter cv <= "
                    f"{self.AS_ROUND_ROBIN_MAX_CV:g}, no preferred sizes and an unlimited queue "
                    f"(as round robin; with more jitter the router reacts to service times and "
                    f"round robin does not); this node: {node.describe()}. Use qmodel.simulate "
                    f"for it")
        return None

    def balanced_gap(self, node) -> str | None:
        """None if the balanced-queue model covers one-request ``node``, else why not.

        Examples
        --------
        >>> from qmodel.system import Node, ServiceTime
        >>> ROUTERS["least_outstanding"].balanced_gap(Node(ServiceTime.affine(2e-3))) is None
        True
        >>> ROUTERS["least_outstanding"].balanced_gap(Node(ServiceTime.affine(2e-3),
        ...                                                  instances=2))
        '2 instances per node, not 1'
        """
        service = node.service
        if node.instances != 1:
            return f"{node.instances} instances per node, not 1"
        if node.max_queue_size:
            return f"a finite queue (max_queue_size {node.max_queue_size})"
        if service.jitter in ("deterministic", "exponential"):
            return None
        if service.jitter in ("lognormal", "gamma") and service.cv <= self.BALANCED_MAX_CV:
            return None
        return (f"service-time jitter {service.jitter} with cv {service.cv:g} (measured for "
                f"deterministic, exponential, and lognormal/gamma up to cv "
                f"{self.BALANCED_MAX_CV:g})")


class PowerOfD(RouterPolicy):
    """``choices`` = d distinct nodes sampled uniformly, the least outstanding of them (Envoy's
    LEAST_REQUEST samples 2)."""

    name, example = "power_of_d", "power_of_two"
    static, model, samples_nodes = False, "power_of_d", True
    summary = "joins the shortest of d sampled queues (power_of_two: d = 2)"

    def checked_parameters(self, weights, choices, nodes, explicit, written=None, size=None):
        written = written or self.name
        size = size or f"node, count={nodes}"
        if weights is not None:
            raise ValueError(f"Cluster.weights only apply to router='random', not {written!r}")
        if written in ALIASES:
            # the name fixes d: power_of_two samples 2 nodes, whatever Router.choices defaults to
            d = ALIASES[written][1]
            if choices not in (None, d):
                raise ValueError(f"router {written!r} samples {d} nodes; for another number use "
                                 f"router='power_of_d' with choices=d")
            if nodes < d:
                default = " (count defaults to 1)" if size == "node" else ""
                few = "a single node" if nodes == 1 else f"{nodes} nodes"
                raise ValueError(
                    f"Cluster({size}, router={written!r}): {written} sends each request to the "
                    f"less loaded of {d} distinct nodes sampled at random, so it needs at least "
                    f"{d} nodes, and this cluster has {nodes}{default}; give {_more(size, d)}, "
                    f"or for {few} router='random', 'round_robin' or 'least_outstanding'")
            return None, d
        if choices is None:
            raise ValueError("router 'power_of_d' needs choices=d, how many nodes to sample per "
                             "request, e.g. Cluster(node, count=8, router='power_of_d', "
                             "choices=3); router='power_of_two' is choices=2")
        choices = positive_int(choices, "Cluster.choices", maximum=MOST_NODES)
        if choices > nodes:
            raise ValueError(
                f"Cluster({size}, router='power_of_d', choices={choices}): choices={choices} "
                f"exceeds the {nodes} node{'s' if nodes > 1 else ''}; sample at most as many "
                f"nodes as there are (choices={nodes} samples every node, which is "
                f"least_outstanding), or give {_more(size, choices)}")
        return None, choices

    def display_name(self, router):
        return "power_of_two" if router.choices == 2 else f"power_of_{router.choices}"

    def tie_width(self, router, nodes):
        return router.choices

    # Where the mean-field model answers: N >= min_nodes and N (1 - load) >= slack, by
    # max_batch_size (the row with the largest key not above it). Chosen from
    # validation/router_accuracy.py's full grid: outside, the model ran more than 10%
    # optimistic; batching nodes decouple sooner.
    MEAN_FIELD_DOMAIN = {1: (8, 2.4), 8: (4, 0.8)}

    def unmodelled(self, cluster, load, arrival_scv):
        why = _mixed_nodes(cluster)
        if why is not None:
            return why
        N, node = len(cluster.nodes), cluster.nodes[0]
        if cluster.router.choices >= N:
            # power of N samples every node and breaks ties at random: least outstanding
            return ROUTERS["least_outstanding"].node_gap(node, arrival_scv)
        name = cluster.router.name
        if node.instances > 1:
            return several_instance_gap(name, node, arrival_scv)
        if node.max_queue_size or node.preferred_batch_sizes:
            return (f"predict() models router {name!r} over nodes with one instance, no "
                    f"preferred sizes and an unlimited queue so far; use qmodel.simulate for "
                    f"this cluster")
        if arrival_scv != 1.0:
            return (f"predict() models router {name!r} for Poisson arrivals only; use "
                    f"qmodel.simulate for renewal or trace arrivals")
        B = node.max_batch_size
        if not self.in_mean_field_domain(N, load, B):
            min_nodes, slack = self.mean_field_bounds(B)
            return (f"router {name!r}: the mean-field model is validated for N >= {min_nodes} "
                    f"nodes with N x (1 - load) >= {slack:g} at max_batch_size {B}; this "
                    f"cluster has N = {N} at load {load:.2f} (N x (1 - load) = "
                    f"{N * (1 - load):.2f}), where the nodes fill up together and the model is "
                    f"optimistic. Use qmodel.simulate for it")
        return None

    def mean_field_bounds(self, max_batch_size: int) -> tuple:
        """(min_nodes, slack) of the mean-field domain at this max_batch_size."""
        domain = self.MEAN_FIELD_DOMAIN
        return domain[max(k for k in domain if k <= max_batch_size)]

    def in_mean_field_domain(self, nodes: int, load: float, max_batch_size: int = 1) -> bool:
        """Whether predict answers power of d (d < N) with the mean-field model.

        Examples
        --------
        >>> pod = ROUTERS["power_of_d"]
        >>> pod.in_mean_field_domain(32, 0.9), pod.in_mean_field_domain(4, 0.3)
        (True, False)
        >>> pod.in_mean_field_domain(4, 0.8, max_batch_size=8)
        True
        """
        min_nodes, slack = self.mean_field_bounds(max_batch_size)
        # a hair of slack for loads such as 0.8 whose N (1 - load) rounds below the bound
        return nodes >= min_nodes and nodes * (1.0 - load) >= slack - 1e-9

    def choose(self, router, xp, rng, outstanding, ties):
        replicas, nodes = outstanding.shape
        d = router.choices
        # The d smallest of iid uniform keys are a uniformly random d-subset of the nodes:
        # one draw and one partition per step (a draw per choice cost d numpy calls a step:
        # power of 64 over 64 nodes ran 10 times slower than power of two).
        chosen = xp.argpartition(rng.random((replicas, nodes)), d - 1, axis=1)[:, :d]
        seen = xp.take_along_axis(outstanding, chosen, axis=1)
        return chosen[xp.arange(replicas), xp.argmin((seen << TIE_BITS) | ties, axis=1)]


ROUTERS = {p.name: p for p in (RandomRouter(), RoundRobin(), LeastOutstanding(), PowerOfD())}
# names a user may write: the policies, and power_of_two for power_of_d with d = 2
ALIASES = {"power_of_two": ("power_of_d", 2)}
ROUTER_NAMES = tuple(ROUTERS) + tuple(ALIASES)
# the routers a comparison shows by default: one per policy
COMPARED_ROUTERS = tuple(p.example for p in ROUTERS.values())


def router_policy(name: str) -> RouterPolicy:
    """The policy object of a router name (``power_of_two`` is ``power_of_d``).

    Examples
    --------
    >>> router_policy("round_robin").static, router_policy("power_of_two").name
    (True, 'power_of_d')
    """
    name = ALIASES.get(name, (name,))[0]
    if name not in ROUTERS:
        raise ValueError(f"router {name!r} is unknown; use one of "
                         f"{', '.join(repr(n) for n in ROUTER_NAMES)}")
    return ROUTERS[name]
