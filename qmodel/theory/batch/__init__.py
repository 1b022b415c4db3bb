"""One Triton batching node: the sojourn-time distribution on a time lattice.

The model follows the node from one dispatch to the next (an embedded Markov chain in the
spirit of Bailey 1954 and Neuts 1967 for bulk service, with Triton's dispatch rule from
docs/triton-semantics.md), then computes what a request arriving at a random time experiences
(PASTA for Poisson arrivals). Every law lives on a time lattice of step h. The experiments
behind the model's choices (variants measured and not adopted) are in
docs/notes/batch-model.md.

Dispatch records (:mod:`.chain`)
    The chain's state is the record of a dispatch: its batch size k and the number m of
    requests it left waiting (m > 0 only when a queue longer than the batch was waiting). After
    a dispatch the queue is blocked until an instance is free: for one instance that is S(k);
    the arrivals meanwhile are Poisson counts mixed over that time (:mod:`.blocking`). At the
    free epoch the batcher dispatches at once (pmin or more waiting, or the oldest request's
    delay D already ran out, or D = 0), or forms a batch (:mod:`.formation`): it waits until
    pmin requests are there or the oldest reaches D. The age of the oldest request matters
    there; after a batch that left nobody it follows exactly from the arrival times during the
    blocking (the first of n arrivals). The chain is truncated where its stationary tail mass,
    from the Cramer-Lundberg decay rate of the homogeneous part, is below ``tail``; it is
    solved as a banded linear system (:mod:`.banded`).

A request's sojourn (:mod:`.sojourn`, :mod:`.members`)
    A request arriving while the queue is blocked finds q waiting and a residual blocking time;
    every batch ahead of it is a full one, so it leaves after f = floor(q / K) more blockings
    (K the size a long queue dispatches), in a batch holding its position plus the requests
    that arrived behind it: its own batch size depends on later arrivals. Requests whose batch
    forms at a free epoch with fewer than pmin waiting, or while the node idles, are counted
    directly from the formation: their waits are their ages at that epoch plus the formation
    time. The sojourn adds the batch's own service S(k).

Several instances (approximation, :mod:`.instances`)
    The blocking after a dispatch is the time until some instance is free. A dispatch to an
    instance that had just freed while the others were busy (group 1) blocks for S(k)/c, the
    spacing of evenly staggered instances that take batches in turn (its mean is right in
    saturation; its spread is not). Any other dispatch (group 0) blocks for min over the
    instances taken j = 1..c-1 dispatches ago of their remaining time, each started G_j
    earlier, G_j = X_1 + ... + X_j the partial sums of gamma gaps with the mean and spread of
    the gaps between dispatches measured in the previous pass, given that the instance it
    reuses (taken c dispatches ago) had finished: S'_c <= G_c. The expectation over the nested
    G_j is a backward recursion. The model is defined as a first pass with S(k)/c for every
    blocking and at most 2 more passes of that gap iteration (``passes``), stopping early once
    the gaps settle to 1e-3 (the passes before the last only feed the next one its batch sizes
    and gaps, so their chains are truncated at 1e-5; group 0's records that left requests
    behind are never reached, since group 1's S(k)/c takes time, and are left out of the
    linear system). The pass count is part of the approximation, not a truncation of a
    converging solve: iterated to convergence the gaps settle on values that put p99 further
    from the simulator.

    What the approximation misses. With deterministic service the instances keep the phases
    they had when their busy period began (they started at arrival times, close together), so
    the real spacing between free instances is much more spread than S(k)/c and queued
    requests wait longer than modelled; the several-instance nodes furthest off are of that
    kind, all low. The derivation ``instance_phases`` (docs/derivations) shows why no spread
    drawn about S(k)/c can stand for it: the evenly staggered spacing is an unstable
    equilibrium of the instances' phases. Modelling how the phases arise and mix is open.
    The chain also does not tie the time between dispatches to the instances' service time, so
    its implied utilization (mean service per dispatch over c times the mean time between
    dispatches) can exceed 1, with batch sizes too small there; the result then reports
    utilization 1 and says so (validation/batch_size_accuracy.py measures the means).

Renewal arrivals (approximation, :mod:`.arrivals`)
    Counts in an interval follow the stationary renewal law (exact for Erlang interarrival
    times), and a request is taken to see the time-average state.

Finite queue (max_queue_size = Q >= B)
    At most Q requests wait; arrivals beyond are rejected. The chain's queue then ends at Q
    (no truncation, and no stability condition: an overloaded node sheds load), the arrivals
    counted during a blocking stop at Q, and an arrival that finds Q waiting (PASTA) is
    rejected: ``rejection_fraction``; the distribution is that of served requests. Exact up
    to the lattice for one instance and D = 0 (the M/G/1/K queue when B = 1).

What is exact and what is not
    One instance, D = 0 and a single preferred size (Triton's default {B}), Poisson arrivals:
    exact up to the lattice step h (quantiles within about h) and the truncation mass, both
    stated in ``accuracy`` ("numerical"). Everything else is an "approximation" whose
    statement lists the rules it simplifies: several preferred sizes (a request passed over by
    a smaller preferred batch leaves in the next one, sized at its mean), a delay with requests
    left behind (the oldest left-behind request is taken to be the blocking time plus m / rate
    old), several instances, renewal arrivals. Measured errors: validation/predict_accuracy.py.

The modules, in the order :func:`~.node.solve_batch_node` uses them: :mod:`.rules` (the
dispatch rule as numbers), :mod:`.lattice` (laws on the lattice), :mod:`.instances` (blocking
laws), :mod:`.blocking` (arrivals during a blocking), :mod:`.chain` (the records' stationary
law, the cycle between dispatches), :mod:`.sojourn` (the tagged request), :mod:`.node` (the
entry point and the result).

References
----------
Bailey, N. T. J. (1954). On queueing processes with bulk service. J. R. Stat. Soc. B 16, 80-87.
Neuts, M. F. (1967). A general class of bulk queues with Poisson input. Ann. Math. Stat. 38.
Inoue, Y. (2021). Queueing analysis of GPU-based inference servers with dynamic batching: a
closed-form characterization. Performance Evaluation 147 (mean sojourn, used as a check).
"""

from .instances import PASSES
from .node import DEFAULT_RESOLUTION, DEFAULT_TAIL, BatchNodeLatency, batch_node, check_resolution

__all__ = ["batch_node", "BatchNodeLatency", "DEFAULT_RESOLUTION", "DEFAULT_TAIL",
           "check_resolution", "PASSES"]

