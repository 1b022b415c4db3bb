"""Budgets: the memory and time a numeric model may spend before it declines.

The numeric models size their work from the configuration: the batch node's chain of dispatch
records (:mod:`qmodel.theory.batch`) grows with the queue it follows near capacity, the number
of preferred sizes and the arrivals during a long service tail; the cavity model of dynamic
routers (:mod:`qmodel.theory.routing`) with the outstanding counts it follows, the lattice and
the iterations its fixed point takes. Each estimates its large arrays and its work before it
allocates or starts them, and raises :class:`OverBudget` (a NotImplementedError) with the
numbers when they pass the budget, so that :func:`qmodel.predict` falls back to simulation and
says why, rather than ending in a MemoryError or a call of minutes.

Times are estimates, not measurements: counts of element operations and floating-point
operations at the nominal speeds below (one core, one BLAS thread, as the models run), so that
the same configuration is answered or declined on every machine, unless the machine has less
memory free than the budget allows: then the free memory is the limit. The limits apply to one
:func:`qmodel.predict` call as a whole (its work is summed over the steps and nodes it solves)
and, for a model called directly, to each step alone. They are set here (:data:`MEMORY`,
:data:`TIME`), or per call with ``qmodel.predict(..., budget=Budget(...))``.

Examples
--------
>>> b = Budget(memory=2**20)
>>> try:
...     with limits(b):
...         check_memory(6.1 * 2**30, "the batch model", "its chain")
... except OverBudget as err:
...     print(err)                                        # doctest: +NORMALIZE_WHITESPACE
the batch model would need about 6.1 GiB for its chain (budget 1 MiB); use qmodel.simulate
for this configuration, or raise the budget (qmodel.predict(..., budget=qmodel.Budget(...)))
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
from dataclasses import dataclass

from .. import machine

__all__ = ["Budget", "OverBudget", "MEMORY", "TIME", "ELEMENT_RATE", "FLOP_RATE", "limits",
           "check_memory", "memory_limit", "charge", "expect", "remaining", "hold", "fits",
           "elements", "flops", "format_bytes", "format_seconds", "ADVICE"]

# The defaults: at most this many bytes of arrays at once, and this many seconds of estimated
# work per prediction. The time is set by the costliest configurations of the validation
# grids, which must be answered: the cavity model of power of two at max_batch_size 32 and
# load 0.9 (validation/answers_unchanged.py's router grid) estimates at 12 s, every node of
# its other grids below 0.2 s. It is also less than what the simulation fallback of a hard
# case takes (3 s for a single node, up to a minute for 64 nodes near capacity).
MEMORY = 2 ** 30
TIME = 20.0
# The nominal speeds behind the time estimates, measured on the shared 2-core development
# machine under load (one thread): numpy element-wise passes (the cavity model's steps ran at
# 7.5e8 per second) and LAPACK's banded LU (dgbsv on the batch chain's bands, 7-12 GFlop/s);
# near the lower ends, so that a slower machine stays near the budget.
ELEMENT_RATE = 6e8
FLOP_RATE = 6e9


class OverBudget(NotImplementedError):
    """A model declined: its estimated memory or time is beyond the budget (the message has
    the numbers). A NotImplementedError, so :func:`qmodel.predict` falls back to simulation."""


@dataclass(frozen=True)
class Budget:
    """How much a prediction may spend before its model declines.

    Parameters
    ----------
    memory : float, optional
        Bytes of arrays a model may hold at once; None takes :data:`MEMORY` (1 GiB).
    time : float, optional
        Seconds of estimated work (at the nominal speeds :data:`ELEMENT_RATE` and
        :data:`FLOP_RATE`) one prediction may take; None takes :data:`TIME` (20 s).
        ``math.inf`` lifts a limit.

    Examples
    --------
    >>> Budget(memory=4 * 2**30).limit_bytes / 2**30, Budget().limit_seconds
    (4.0, 20.0)
    """

    memory: float | None = None
    time: float | None = None

    def __post_init__(self):
        for name in ("memory", "time"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
                unit = "bytes" if name == "memory" else "seconds"
                raise ValueError(f"Budget.{name} must be a positive number of {unit} (or "
                                 f"math.inf, or None for the default); got {value!r}")

    @property
    def limit_bytes(self) -> float:
        """The memory limit in bytes (the default where none was given)."""
        return float(MEMORY if self.memory is None else self.memory)

    @property
    def limit_seconds(self) -> float:
        """The time limit in seconds of estimated work (the default where none was given)."""
        return float(TIME if self.time is None else self.time)


class _Account:
    """The budget of one prediction, the estimated seconds spent so far, and the machine's
    free memory when the prediction began (read once, not at every check)."""

    def __init__(self, budget: Budget):
        self.budget, self.spent, self.reserved = budget, 0.0, 0.0
        self.free = machine.available_memory()


_ACCOUNT: contextvars.ContextVar = contextvars.ContextVar("qmodel_budget", default=None)


@contextlib.contextmanager
def limits(budget: Budget | None = None):
    """Within the block, the models spend from one account under ``budget`` (None: the
    defaults); :func:`qmodel.predict` opens one per call."""
    if budget is not None and not isinstance(budget, Budget):
        raise ValueError(f"budget must be a qmodel.Budget (or None for the defaults); got "
                         f"{budget!r}")
    token = _ACCOUNT.set(_Account(budget or Budget()))
    try:
        yield
    finally:
        _ACCOUNT.reset(token)


def _account() -> _Account:
    """The open account, or a fresh one for a model called outside :func:`limits`."""
    account = _ACCOUNT.get()
    return account if account is not None else _Account(Budget())


def format_bytes(nbytes: float) -> str:
    """A byte count in the largest binary unit that keeps it above 1.

    >>> format_bytes(6.1 * 2**30), format_bytes(1.02 * 2**30), format_bytes(512)
    ('6.1 GiB', '1.02 GiB', '512 B')
    """
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}" if nbytes < 100 * size else \
                f"{nbytes / size:.0f} {unit}"
    return f"{nbytes:.0f} B"


def format_seconds(seconds: float) -> str:
    """A duration for a message.

    >>> format_seconds(0.0123), format_seconds(14.2), format_seconds(1234.5)
    ('0.012 s', '14 s', '1,234 s')
    """
    return f"{seconds:.2g} s" if seconds < 100 else f"{seconds:,.0f} s"


ADVICE = ("use qmodel.simulate for this configuration, or raise the budget "
          "(qmodel.predict(..., budget=qmodel.Budget(...)))")


def memory_limit(account=None) -> tuple[float, str]:
    """(bytes allowed, what sets them) in the open account (or ``account``): the budget's
    memory, or the machine's free memory when the account opened where that is less
    (:func:`qmodel.machine.available_memory`)."""
    account = account or _account()
    limit, free = account.budget.limit_bytes, account.free
    if free is not None and free < limit:
        return float(free), f"free memory {format_bytes(free)}"
    return limit, f"budget {format_bytes(limit)}"


def check_memory(nbytes: float, model: str, what: str) -> None:
    """Raise :class:`OverBudget` if ``model`` would hold ``nbytes`` of arrays for ``what``
    beyond the memory budget, or beyond the machine's free memory where that is less."""
    limit, source = memory_limit(_account())
    if not nbytes <= limit:
        raise OverBudget(f"{model} would need about {format_bytes(nbytes)} for {what} "
                         f"({source}); {ADVICE}")


def _within(account: _Account, seconds: float, model: str, what: str) -> None:
    limit = account.budget.limit_seconds - account.reserved
    if not account.spent + seconds <= limit:
        before = (f" after {format_seconds(account.spent)} already spent"
                  if account.spent >= 0.01 * limit else "")
        raise OverBudget(f"{model} would take about {format_seconds(seconds)} of work for {what}"
                         f"{before} (budget {format_seconds(limit)}); {ADVICE}")


def expect(seconds: float, model: str, what: str) -> None:
    """Raise :class:`OverBudget` if ``seconds`` more of estimated work for ``what`` would take
    the prediction beyond its time budget; nothing is spent (see :func:`charge`)."""
    _within(_account(), seconds, model, what)


def charge(seconds: float, model: str, what: str) -> None:
    """Spend ``seconds`` of estimated work on ``what``, or raise :class:`OverBudget` (nothing
    spent) if that would pass the time budget."""
    account = _account()
    _within(account, seconds, model, what)
    account.spent += seconds


def remaining() -> tuple[float, float]:
    """(seconds of estimated work left, bytes of arrays allowed) in the open account, less
    what is held back (:func:`hold`); the bytes are the machine's free memory where that is
    less than the budget's."""
    account = _account()
    return (account.budget.limit_seconds - account.reserved - account.spent,
            memory_limit(account)[0])


def hold(seconds: float) -> None:
    """Hold back ``seconds`` of the open account from the models (for the simulation
    fallback, so that a model which runs out of budget still leaves it its shortest run);
    ``hold(0)`` releases it.

    >>> with limits(Budget(time=10.0)):
    ...     hold(4.0)
    ...     left = remaining()[0]
    ...     hold(0.0)
    ...     left, remaining()[0]
    (6.0, 10.0)
    """
    _account().reserved = float(seconds)


def fits(seconds: float, nbytes: float) -> bool:
    """Whether ``seconds`` more of estimated work and ``nbytes`` of arrays fit the open
    account (the test :func:`charge` and :func:`check_memory` apply, without raising)."""
    left, limit = remaining()
    return seconds <= left and nbytes <= limit


def elements(count: float) -> float:
    """Seconds for ``count`` element operations at :data:`ELEMENT_RATE`."""
    return float(count) / ELEMENT_RATE


def flops(count: float) -> float:
    """Seconds for ``count`` floating-point operations at :data:`FLOP_RATE`."""
    return float(count) / FLOP_RATE

