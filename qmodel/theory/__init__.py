"""Queueing-theory solvers: exact classical queues used as ground truth for the simulator."""

from .classical import MD1Latency, MDcLatency, MMcLatency, md1, mdc, mmc

__all__ = ["mmc", "md1", "mdc", "MMcLatency", "MD1Latency", "MDcLatency"]
