"""Derivations, in sympy, of the closed forms qmodel uses or will use.

Each module builds one :class:`~qmodel.derivations.core.Derivation` with ``derive()``: the
assumptions, the source (authors, year), the steps (prose and sympy expressions; sympy does
the algebra, the sums, the integrals and the transforms, and checks the identities it relies
on) and the final expressions. :mod:`qmodel.derive` renders them as Markdown and HTML
(``qmodel derive``); ``tests/test_derivations.py`` evaluates every final expression against
qmodel's solvers or an independent numerical computation.
"""

from __future__ import annotations

import importlib

from .core import Derivation, Result, Step

__all__ = ["MODULES", "load", "all_derivations", "Derivation", "Result", "Step"]

# In reading order: classical queues, tails and baselines, batching, routing, pipelines.
MODULES = ("mmc", "pollaczek_khinchine", "md1", "cramer_lundberg", "kingman", "fast_server",
           "bulk_service", "inoue", "size_or_timeout", "staggered_instances", "instance_phases",
           "splitting", "round_robin", "power_of_d", "least_outstanding", "tandem",
           "pipeline")


def load(key: str) -> Derivation:
    """The derivation in module ``key`` (one of :data:`MODULES`), built once and cached."""
    if key not in MODULES:
        raise ValueError(f"unknown derivation {key!r}; choose one of {', '.join(MODULES)}")
    return importlib.import_module(f"{__name__}.{key}").derive()


def all_derivations() -> list[Derivation]:
    """Every derivation, in the order of :data:`MODULES`."""
    return [load(key) for key in MODULES]
