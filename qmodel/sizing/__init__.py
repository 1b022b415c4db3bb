"""Sizing: the cheapest deployment whose tail latency meets an SLO (:func:`size`).

- :mod:`~qmodel.sizing.search`: the search over configurations and counts, and its
  verification (nodes and Ensemble pods alike);
- :mod:`~qmodel.sizing.trust`: how far a prediction is trusted, and the range rule (an SLO at
  every rate of a range);
- :mod:`~qmodel.sizing.space`: the space searched, its inputs checked once;
- :mod:`~qmodel.sizing.autoscale`: pods that follow a traffic, by an autoscaler;
- :mod:`~qmodel.sizing.plan` and :mod:`~qmodel.sizing.report`: the plan and its files.
"""

from ..slo import LEVELS, highest_quantile
from .plan import Candidate, Plan, Transient
from .search import exhaustive, size
from .trust import Rates, is_extrapolated, model_answer, trusted_quantile, worst_over_rates

__all__ = ["size", "Plan", "Candidate", "Transient", "trusted_quantile", "highest_quantile",
           "exhaustive", "model_answer", "is_extrapolated", "LEVELS", "Rates",
           "worst_over_rates"]
