"""The time lattice of the batch model and what lives on it independently of the chain.

Every law of the model is a vector over times 0, h, 2h, ...: the service laws S(k), the
evenly staggered spacing S(k)/c of several instances, the arrival counts over each lattice
time and the tables of the formations the chain starts. :func:`lattice` builds them for one
step h; the step is ``resolution`` steps per S(1), coarser where the service law's support or
the delay would need more points than the work budget below allows (:func:`first_step`), and
coarser again when the queue the tagged request sees is long (``MAX_WAIT_POINTS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import budget
from ..service_law import service_lattice, service_upper
from .arrivals import Arrivals
from .formation import Formations, formations
from .rules import Rules

__all__ = ["Lattice", "lattice", "first_step", "counts_work", "MAX_SERVICE_POINTS",
           "MAX_DELAY_POINTS", "MAX_WAIT_POINTS", "MODEL"]

MODEL = "the batch model"  # how the budget's messages name it

MAX_SERVICE_POINTS = 200   # lattice points across the longest service time
MAX_DELAY_POINTS = 50      # lattice points across max_queue_delay
MAX_WAIT_POINTS = 4096     # lattice points the time before a request's batch leaves may span


@dataclass(frozen=True, eq=False)
class Lattice:
    """The laws on a lattice of step ``h`` that do not depend on the chain.

    Attributes
    ----------
    h : float
        The step, seconds.
    Ls : int
        Points up to the longest service time (and two more).
    times : ndarray
        0, h, ..., (Ls - 1) h.
    ps_own : ndarray, shape (B, Ls)
        S(k), k = 1..B: the time a request's own batch takes.
    service_overflow : float
        The largest service mass beyond the lattice, put on its last point.
    ps_spaced : ndarray or None
        c > 1: S(k)/c, the spacing of instances that take batches in turn (group 1's blocking
        law). A spacing takes time: what the lattice puts at 0, spacings below h/2, goes to h.
    Da : int
        The delay in lattice steps: at least one when there is a delay (a service law with a
        long tail can make the step longer than a short delay).
    pois_lattice : ndarray
        Arrival counts over each lattice time.
    formations : Formations
    """

    h: float
    Ls: int
    times: np.ndarray
    ps_own: np.ndarray
    service_overflow: float
    ps_spaced: np.ndarray | None
    Da: int
    pois_lattice: np.ndarray
    formations: Formations


def first_step(rules: Rules, resolution: int, tail: float) -> float:
    """``resolution`` steps per S(1), unless the longest service time (its 1 - ``tail``
    quantile) or the delay would take more points than the budget."""
    upper = service_upper(rules.service, range(1, rules.B + 1), tail)
    return max(float(rules.own_means[0]) / resolution, upper / MAX_SERVICE_POINTS,
               rules.D / MAX_DELAY_POINTS)


def counts_work(arrivals: Arrivals, times: int, count: int) -> tuple:
    """Estimated peak bytes and element operations of ``arrivals.counts`` over ``times``
    interval lengths and ``count`` counts: a Poisson table (a few passes per entry, two or
    three tables alive at once), the negative binomial of scipy.stats (scv > 1, about ten
    times dearer), or a Poisson table of k times the counts per Erlang-k law mixed (scv < 1,
    in chunks of 2 million entries).

    >>> nbytes, work = counts_work(Arrivals(1.0, 1 / 64), 200, 5000)
    >>> round(work / 1e9, 1)
    1.3
    """
    entries = float(times) * count
    if arrivals.scv == 1.0:
        return 24.0 * entries, 10.0 * entries
    if arrivals.scv > 1.0:
        return 80.0 * entries, 120.0 * entries
    phases = 2 * math.ceil(1.0 / arrivals.scv)
    return 16.0 * entries + 8.0 * 5 * 2_000_000, 10.0 * entries * phases


def lattice(rules: Rules, arrivals: Arrivals, h: float, tail: float) -> Lattice:
    """The service laws, arrival counts and formation tables on a lattice of step ``h``
    (seconds); ``tail`` is the service mass the lattice may leave beyond its end."""
    service, B, c = rules.service, rules.B, rules.c
    upper = service_upper(service, range(1, B + 1), tail)
    Ls = int(math.ceil(upper / h)) + 2
    sizes = range(1, B + 1)
    ps_own, service_overflow = service_lattice(service, sizes, h, Ls)
    times = np.arange(Ls) * h
    ps_spaced = None
    if c > 1:
        ps_spaced = service_lattice(service, sizes, h * c, Ls)[0]
        ps_spaced[:, 1] += ps_spaced[:, 0]
        ps_spaced[:, 0] = 0.0
    Da = max(int(round(rules.D / h)), 1 if rules.D > 0 else 0)
    mu = arrivals.rate * float(times[-1])
    count = max(int(mu + 12 * math.sqrt(max(arrivals.scv, 1.0) * mu) + 30), B + 4)
    nbytes, work = counts_work(arrivals, Ls, count)
    what = f"its arrival counts ({Ls:,} lattice times x {count:,} counts)"
    budget.check_memory(nbytes, MODEL, what)
    budget.charge(budget.elements(work), MODEL, what)
    return Lattice(h=h, Ls=Ls, times=times, ps_own=ps_own, service_overflow=service_overflow,
                   ps_spaced=ps_spaced, Da=Da, pois_lattice=arrivals.counts(times, count),
                   formations=formations(rules, arrivals, h, Da))
