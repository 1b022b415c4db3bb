"""qmodel's version, a floor below every module that records it (profiles, results)."""

__version__ = "0.1.0"
