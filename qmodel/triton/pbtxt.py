"""The protobuf text format of Triton's model configuration: protobuf and tritonclient's
compiled ``ModelConfig`` loaded on first use, and the line of a field for error messages.

Shared by :mod:`qmodel.triton.config` and :mod:`qmodel.triton.ensemble`, a floor below both.
"""

from __future__ import annotations

__all__ = ["proto", "line_of", "at", "EXTRA"]

EXTRA = "pip install 'qmodel[triton]'"


def proto():
    """protobuf's text_format and tritonclient's model_config_pb2, or an ImportError that
    says which extra to install."""
    try:
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2
    except (ImportError, RuntimeError) as err:     # tritonclient without grpc: RuntimeError
        raise ImportError(f"qmodel.triton reads and writes config.pbtxt with protobuf and "
                          f"tritonclient's model_config_pb2, which are not installed ({err}); "
                          f"install them with: {EXTRA}") from None
    return text_format, model_config_pb2


def line_of(text: str, name: str) -> int:
    """The first line (from 1) that mentions the field ``name``, for an error's location;
    0 where none does (the field took its default)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if name in line.split("#", 1)[0]:
            return number
    return 0


def at(where: str, text: str, name: str) -> str:
    """``where:line`` of the field ``name`` for an error message (``where`` alone if no line
    mentions it)."""
    line = line_of(text, name)
    return f"{where}:{line}" if line else where
