"""qmodel: tail latency (p95/p99) of batched ML inference serving, from queueing theory.

>>> import qmodel as qm
>>> node = qm.Node(qm.ServiceTime.affine(base=2.4e-3, per_item=0.54e-3), max_batch_size=8,
...                max_queue_delay=2e-3)
>>> r = qm.simulate(node, rate=800.0, requests=200_000, seed=1)
>>> r.p50 < r.p95 < r.p99
True
"""

from .autoscaler import Autoscaler, PodSchedule
from .bottleneck import Bottleneck, bottleneck
from .compare import compare_routers, router_table
from .drift import Drift
from .ensemble import Ensemble
from .latency import Accuracy, Latency, SampledLatency
from .predict import predict
from .profiling import Profile, profile
from .sim import Replay, ShortRunWarning, replay, simulate
from .sizing import Plan, size
from .system import (Cluster, Node, Poisson, Renewal, Router, ServiceTime, Trace, UnstableError,
                     check_stable, parse_duration)
from .theory.budget import Budget
from .traffic import Traffic
from .version import __version__  # noqa: F401  (qm.__version__)
from . import triton  # noqa: F401  (qm.triton.read_config, ...; protobuf loads on use)

__all__ = [
    "ServiceTime", "Node", "Cluster", "Router", "Poisson", "Renewal", "Trace",
    "UnstableError", "check_stable", "parse_duration",
    "Latency", "SampledLatency", "Accuracy",
    "simulate", "replay", "Replay", "ShortRunWarning", "predict", "compare_routers",
    "router_table", "Budget", "profile", "Profile", "Ensemble", "bottleneck", "Bottleneck",
    "size", "Plan", "Traffic", "Autoscaler", "PodSchedule", "Drift",
]
