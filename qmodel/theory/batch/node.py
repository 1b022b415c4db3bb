"""The batch node's sojourn-time distribution: :func:`batch_node` and the solver behind it.

:func:`solve_batch_node` runs the model's steps in order, each a function of the previous
steps' results: the lattice, the passes of the chain of dispatch records (several for
several instances, :mod:`.instances`), a coarser lattice when the queue is long, then the
tagged request (:mod:`.sojourn`) and the result with its accuracy statement.
"""

from __future__ import annotations


from ...latency import Accuracy, Approximation, LatticeLatency
from ...selfcheck import STEP_FRACTION
from ...system import Node
from .. import budget
from ..blas import one_blas_thread
from ..measured import family_of, measured
from .arrivals import Arrivals
from .chain import MAX_QUEUE_STATES, dispatch_pass
from .instances import PASS_TAIL, PASSES, settled
from .lattice import MAX_WAIT_POINTS, first_step, lattice
from .rules import Rules
from .sojourn import arrival_view, before_own_batch, own_batch, points_needed, sojourn_pmf

__all__ = ["batch_node", "BatchNodeLatency", "solve_batch_node", "approximations",
           "check_resolution", "DEFAULT_RESOLUTION", "DEFAULT_TAIL"]

# The lattice step is the batch-of-one mean service time divided by this, unless a caller asks
# for another resolution. 100 keeps the quantile error near 1% of S(1) and a solve in
# milliseconds for deterministic service.
DEFAULT_RESOLUTION = 100
# Mass the model may leave out (queue lengths beyond the chain, service times beyond the
# lattice): 1e-7 is 1e-4 of the mass above p99.9, and against 1e-10 it moved quantiles by at
# most 1.2% (lognormal jitter, where the shorter service support also makes the lattice finer;
# deterministic service: 7e-5) and cut the median predict time by 15% (72 nodes of the
# benchmarks/predict_speed.py grid; that script: median 40 -> 35 ms).
DEFAULT_TAIL = 1e-7

# A long-tailed S(B) (large max_batch_size, jitter, fast growth) stretches the lattice to its
# 1 - tail quantile in MAX_SERVICE_POINTS, which can leave the step past the self-check's
# STEP_FRACTION of the median (16 of 500 coverage draws declined so): such a node is solved
# once more with its step at REFINED_STEP_FRACTION of the median found, at most
# MAX_REFINEMENT times finer (more lattice points, charged to the budget as any).
REFINED_STEP_FRACTION = 0.05
MAX_REFINEMENT = 8


# a saturated node's utilization by conservation may pass 1 by its lattice's rounding (the
# chain and conservation agree to 3e-4 under Poisson arrivals): below this it is not capping
UTILIZATION_ROUNDING = 1e-3


class BatchNodeLatency(LatticeLatency):
    """The batch node's sojourn-time distribution (a :class:`~qmodel.latency.LatticeLatency`)."""


def check_resolution(resolution) -> int:
    """The lattice resolution as a whole number >= 4, or a ValueError that says so."""
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 4:
        raise ValueError(f"resolution must be a whole number of lattice steps per batch-of-one "
                         f"service time, at least 4 (default {DEFAULT_RESOLUTION}); got "
                         f"{resolution!r}")
    return resolution


def _check_passes(passes) -> int:
    """The several-instance gap passes: the shipped number, or a whole number >= 0."""
    if passes is None:
        return PASSES
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 0:
        raise ValueError(f"passes must be a whole number >= 0 of passes of the several-"
                         f"instance gap iteration, or None for the model's {PASSES}; got "
                         f"{passes!r}")
    return passes


@one_blas_thread
def batch_node(node: Node, rate: float, resolution: int = DEFAULT_RESOLUTION,
               tail: float = DEFAULT_TAIL, arrival_scv: float = 1.0, *,
               passes: int | None = None) -> BatchNodeLatency:
    """Sojourn-time distribution of a batching node with Poisson (or renewal) arrivals.

    Parameters
    ----------
    node : Node
        Any max_batch_size, max_queue_delay, preferred sizes, service law and instances. A
        finite ``max_queue_size`` (at least max_batch_size) is a loss system: an arrival that
        finds that many requests waiting is rejected, ``rejection_fraction`` says how many,
        and the distribution is that of served requests.
    rate : float
        Arrival rate, requests per second; below the node's capacity unless the queue is
        finite. Trusted, as ``node`` is: :func:`qmodel.predict` checks the load once
        (:func:`qmodel.check_stable`) before any solver runs.
    resolution : int
        Lattice steps per batch-of-one mean service time; the quantile error shrinks like 1/it.
    tail : float
        Truncation: stationary queue-length mass left out of the embedded chain, and the
        service-time mass beyond the lattice's longest service time.
    arrival_scv : float
        Squared coefficient of variation of the interarrival times (1: Poisson). Renewal
        arrivals are an approximation: counts in an interval follow the stationary renewal law
        (exact for Erlang interarrivals), and a request is taken to see the time-average state.
    passes : int or None
        Several instances only: the passes of the gap iteration after the first, a parameter
        of the model rather than of its numerics (see :mod:`qmodel.theory.batch.instances`).
        None takes the model's own, :data:`~qmodel.theory.batch.instances.PASSES` (2); other
        values are for studies of that choice (validation/multi_instance_holdout.py).

    Returns
    -------
    BatchNodeLatency

    Examples
    --------
    With B = 1 the node is an M/D/1 queue, whose exact sojourn p99 is 11.3559 (D = 1, rho = 0.8):

    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(base=1.0), max_batch_size=1)
    >>> round(batch_node(node, rate=0.8).p99, 2)
    11.36
    """
    passes = _check_passes(passes)
    queue = node.max_queue_size
    if queue and queue < node.max_batch_size:
        raise NotImplementedError(
            f"batch_node models a finite queue only when it holds a full batch: "
            f"max_queue_size={queue} < max_batch_size={node.max_batch_size}. Raise "
            f"max_queue_size to at least {node.max_batch_size}, or use qmodel.simulate")
    if queue > MAX_QUEUE_STATES:
        raise NotImplementedError(
            f"max_queue_size={queue} is more queue states than the batch model solves "
            f"({MAX_QUEUE_STATES}); use qmodel.simulate for this node, or "
            f"max_queue_size=0 (unlimited) if the load is below capacity")
    rules, arrivals = Rules.of(node), Arrivals(float(rate), max(float(arrival_scv), 1e-3))
    result = solve_batch_node(rules, arrivals, resolution, tail, passes)
    median = float(result.quantile(0.5))
    if result.h > STEP_FRACTION * median:
        step = max(REFINED_STEP_FRACTION * median, result.h / MAX_REFINEMENT)
        try:
            result = solve_batch_node(rules, arrivals, resolution, tail, passes, step=step)
        except budget.OverBudget:
            pass            # the first answer stands, and the self-check says why it is not
    return result


def solve_batch_node(rules: Rules, arrivals: Arrivals, resolution: int, tail: float,
                     passes: int, pass_tail: float = PASS_TAIL,
                     step: float | None = None) -> BatchNodeLatency:
    """The batch node's sojourn-time distribution, the model's steps in order (inputs
    checked by :func:`batch_node`); ``pass_tail`` truncates the chains of the several-instance
    passes before the last; ``step`` (seconds) replaces the lattice's first step
    (:func:`~qmodel.theory.batch.lattice.first_step`)."""
    grid = lattice(rules, arrivals, step or first_step(rules, resolution, tail), tail)
    # several instances: a first pass with S(k)/c for every blocking, then ``passes`` more,
    # each with group 0's blocking law from the previous pass's batch sizes and gaps
    passes = passes if rules.c > 1 else 0
    gaps = None
    run = dispatch_pass(rules, arrivals, grid, gaps, pass_tail if passes else tail)
    for i in range(passes):
        if gaps is not None and settled(gaps, run.cycle.mean, run.cycle.scv):
            break                                          # the fixed point has settled
        gaps = run.gaps(rules.B)
        run = dispatch_pass(rules, arrivals, grid, gaps, tail if i == passes - 1 else pass_tail)
    if run.cut != tail:                  # settled early: the last chain in full
        run = dispatch_pass(rules, arrivals, grid, gaps, tail)
    needed = points_needed(rules, grid, run, tail)
    if needed > MAX_WAIT_POINTS:
        # Long queues: a coarser lattice keeps the work bounded; the step stays small
        # against the quantiles, which grow in proportion.
        grid = lattice(rules, arrivals, grid.h * needed / MAX_WAIT_POINTS, tail)
        run = dispatch_pass(rules, arrivals, grid, gaps, tail)
    view = arrival_view(rules, grid, run)
    ahead = before_own_batch(rules, grid, run, view, tail)
    H = own_batch(rules, arrivals, grid, run, ahead, tail)
    pmf, H_total = sojourn_pmf(H, grid.ps_own)
    return _result(rules, arrivals, grid, run, view.rejection, pmf, H_total)


def approximations(rules: Rules, arrivals: Arrivals) -> list[Approximation]:
    """What this node's result approximates (empty: exact up to lattice and truncation)."""
    notes = []
    table = rules.table
    for j in range(1, rules.K + 1):
        if any((table[n] if n >= rules.pmin else n) < j for n in range(j, rules.B + 1)):
            notes.append(Approximation(
                "passed_over", "several preferred sizes: a request passed over by a smaller "
                "preferred batch leaves in the next one, sized at its mean"))
            break
    if arrivals.scv != 1.0:
        notes.append(Approximation(
            "renewal_counts", f"renewal arrivals (scv {arrivals.scv:g}): stationary counts, "
            f"requests see time averages"))
    if rules.c > 1:
        notes.append(Approximation(
            "staggered_instances", f"{rules.c} instances: the wait for a free instance assumes "
            f"instances taken in turn (staggered)"))
    if rules.D > 0 and rules.pmin > 1:
        notes.append(Approximation(
            "left_behind_age", "delay with a queue left behind: the age of the oldest "
            "left-behind request is approximated"))
    return notes


def _result(rules, arrivals, grid, run, rejection, pmf, H_total) -> BatchNodeLatency:
    """The result and its accuracy statement."""
    h, rate = grid.h, arrivals.rate
    lost = max(run.chain.truncated, grid.service_overflow)
    # the sojourn law's shortfall from 1: rounding for the exact chain; for an approximate
    # one (several instances, passed-over requests, ...) its rows are not exactly stochastic
    defect = abs(1.0 - rejection - H_total)
    notes = approximations(rules, arrivals)
    batches = run.chain.batch_sizes(rules.B)
    # by conservation from the model's own batch sizes (the chain's busy fraction agrees to
    # 3e-4 under Poisson arrivals; under renewal ones, whose requests are taken to see time
    # averages, it was up to 0.08 off)
    utilization = rules.service.utilization(rate * (1.0 - rejection), batches, rules.c)
    if utilization > 1.0 + UTILIZATION_ROUNDING:
        # c > 1: the chain's time between dispatches is not tied to the instances' service
        # time (validation/batch_size_accuracy.py measures what that does to the means)
        notes.append(Approximation(
            "utilization_capped", f"the model's dispatch rate implies a utilization of "
            f"{utilization:.3f} (its instances free faster than they serve, so its batch sizes "
            f"run small), capped at 1"))
    utilization = min(utilization, 1.0)     # a saturated node's lattice rounding, else said
    family = family_of(rules.c, rules.service.jitter == "deterministic", rules.D > 0,
                       renewal=arrivals.scv != 1.0, preferred=rules.pmin < rules.B)
    accuracy = Accuracy(
        "approximation" if notes else "numerical",
        "embedded chain of dispatch records on a time lattice", lattice_step=h,
        quantile_error=h, truncated_mass=lost, mass_defect=defect, approximations=notes,
        measured=(measured(family),) if notes else ())
    return BatchNodeLatency(
        pmf, h,
        model="batch_chain", method=(f"batch node, embedded chain at instance-free epochs "
                f"({rules.c} instance{'s' if rules.c > 1 else ''})"),
        accuracy=accuracy, throughput=rate * (1.0 - rejection), utilization=utilization,
        rejection_fraction=rejection,
        batch_size_distribution={int(i): float(v) for i, v in enumerate(batches) if v > 0})
