"""Triton Inference Server in and out: read a model's config.pbtxt into qmodel's knobs and
write one back (:mod:`.config`; an ensemble's steps: :mod:`.ensemble`), and read what a server measured (:mod:`.stats`: the
statistics API, two snapshots or a series polled during a run; :mod:`.metrics`: Prometheus metrics; :mod:`.trace`: the request trace;
:mod:`.perf_analyzer`: its CSV), and calibrate a Node from those reports (:mod:`.calibrate`).
:mod:`.server` runs a real server on loopback (docs/triton-server.md).

The readers parse with protobuf's text format and the ``ModelConfig`` message that
tritonclient ships (``pip install 'qmodel[triton]'``); the core of qmodel does not need them.
What Triton's dynamic batcher does, and how qmodel models it, is in docs/triton-semantics.md.
"""

from .calibrate import Calibration, calibrate
from .config import TritonConfig, TritonConfigWarning, read_config, write_config
from .ensemble import TritonEnsembleConfig
from .metrics import TritonMetrics, read_metrics
from .perf_analyzer import PerfAnalyzerRow, read_perf_analyzer
from .stats import StatsSeries, TritonStats, read_stats, read_stats_series
from .trace import TritonTrace, read_trace

__all__ = ["TritonConfig", "TritonConfigWarning", "read_config", "write_config",
           "TritonEnsembleConfig", "TritonStats",
           "read_stats", "StatsSeries", "read_stats_series", "TritonMetrics", "read_metrics", "PerfAnalyzerRow",
           "read_perf_analyzer", "TritonTrace", "read_trace", "Calibration", "calibrate"]
