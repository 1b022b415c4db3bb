"""Validation campaigns: the models against the simulator, over many configurations.

A campaign is a list of configurations (a node, optionally a cluster, and a load). For each
one it predicts (:func:`qmodel.predict`) and simulates (:func:`qmodel.simulate`) p50/p95/p99,
judges the prediction against stated tolerances and writes a Markdown report with figures;
``qmodel validate`` runs one. The modules, one job each:

- :mod:`~qmodel.campaign.configs`: configurations, checked once, from files or dicts;
- :mod:`~qmodel.campaign.grids`: the named grids and their service families (the issue-3
  grid, the holdouts, the router and renewal grids, the built-in campaigns);
- :mod:`~qmodel.campaign.budget`: how many requests to simulate for a configuration;
- :mod:`~qmodel.campaign.measure`: measuring one configuration (and the textbook baseline);
- :mod:`~qmodel.campaign.verdicts`: tolerances and verdicts;
- :mod:`~qmodel.campaign.runner`: running tasks over executors with a cache;
- :mod:`~qmodel.campaign.results`: the validation scripts' result files;
- :mod:`~qmodel.campaign.summaries`: which rows form which group of a campaign, and each
  group's figures (median, worst, in-CI share), for the scripts' summaries and the docs;
- :mod:`~qmodel.campaign.lab`: the dynamic-batching lab, predicted and simulated;
- :mod:`~qmodel.campaign.report` and :mod:`~qmodel.campaign.figures`: the report;
- :mod:`~qmodel.campaign.doc_tables`: the docs' tables of measured errors, generated from the
  stored results;
- :mod:`~qmodel.campaign.validate`: ``qmodel validate`` and its Python form,
  :func:`run_validation`, which write into a new folder unless told otherwise.

The scripts in validation/ are campaigns of their own (each with its stored results under
validation/results/) built from the same grids, budget, baseline and result files. The names
below are re-exported here; the rest live in their modules.
"""

from .configs import Config, load_configs, node_of, parse_config, system_of
from .grids import Plan, grid_config, plan
from .measure import measure_config, measure_curve, measure_router
from .report import summary_text, write_report
from .runner import Campaign, run_campaign, run_tasks
from .validate import run_validation
from .verdicts import Tolerance, judge

__all__ = ["Config", "parse_config", "load_configs", "node_of", "system_of", "Plan", "plan",
           "grid_config", "measure_config", "measure_router", "measure_curve", "Tolerance",
           "judge", "run_tasks", "run_campaign", "Campaign", "write_report", "summary_text",
           "run_validation"]
