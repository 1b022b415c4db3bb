"""``qmodel derive``: render the sympy derivations of qmodel's closed forms as Markdown and/or
self-contained HTML. The flags and the run are :mod:`qmodel.derive`'s own (it also runs alone,
``python -m qmodel.derive``); this module names the subcommand."""

from __future__ import annotations

from ..derive import add_arguments, run

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "render the sympy derivations of qmodel's closed forms"
DESCRIPTION = ("Write the derivations of qmodel/derivations as Markdown (LaTeX math) and/or "
               "self-contained HTML (MathML).")
