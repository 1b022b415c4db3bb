"""What this machine has free for a computation: its memory. A floor below the numeric models'
budgets (:mod:`qmodel.theory.budget`) and the simulator's cost estimate (:mod:`qmodel.sim.cost`),
which both refuse work the machine cannot hold instead of dying inside NumPy's allocator."""

from __future__ import annotations

__all__ = ["available_memory"]


def available_memory() -> int | None:
    """Bytes of memory free for new work (Linux's MemAvailable), None where the system does not
    say (then nothing is refused for it).

    Examples
    --------
    >>> free = available_memory()
    >>> free is None or free > 0
    True
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
