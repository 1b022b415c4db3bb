"""The ``qmodel`` command line.

:mod:`qmodel.cli.command` holds the entry point (``qmodel = "qmodel.cli:main"``); one module per
subcommand gives its flags and runs it; :mod:`qmodel.cli.args` holds the readers they share
(durations with units, counts, lists, jitter, the node, cluster and load flags) and
:mod:`qmodel.cli.output` what they print in common.
"""

from .args import Parser
from .command import build_parser, main

__all__ = ["main", "build_parser", "Parser"]
