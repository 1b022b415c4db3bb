"""config.pbtxt in and out: a Triton model's batching knobs in qmodel's names and units.

A model's config.pbtxt is the protobuf text format of Triton's ``inference.ModelConfig``.
:func:`read_config` parses it with protobuf's ``text_format`` and the compiled message that
tritonclient ships, and reads what qmodel models: max_batch_size, the dynamic batcher's
max_queue_delay (microseconds there, seconds here), preferred sizes and queue limit, and the
number of instances summed over the instance groups and their GPUs. What qmodel does not model
(priority levels, queue timeouts, preserve_ordering, the rate limiter, the response cache) is
named in the result's ``unmodelled`` and in a :class:`TritonConfigWarning`; what it cannot
read at all (sequence batching, ensembles) is a ValueError. :func:`write_config` writes a
Node's knobs back as a config.pbtxt that Triton loads.

Triton's rules for the fields (docs/triton-semantics.md): max_batch_size 0 means the model
does not batch; without a ``dynamic_batching`` block the default scheduler runs each request
alone; an instance group's count is per GPU listed in ``gpus``, and a GPU group that lists
none places count instances on every GPU the server sees; without any instance group, one
instance per GPU, or one on the CPU where there is none.

Examples
--------
>>> import qmodel as qm
>>> cfg = qm.triton.read_config('''
... name: "ranker"
... backend: "python"
... max_batch_size: 16
... dynamic_batching { max_queue_delay_microseconds: 500  preferred_batch_size: [4, 8] }
... instance_group [{ count: 2, kind: KIND_CPU }]
... ''')
>>> cfg.max_batch_size, cfg.max_queue_delay, cfg.preferred_batch_sizes, cfg.instances
(16, 0.0005, (4, 8), 2)
>>> print(cfg.node(qm.ServiceTime.affine(1e-3, 1e-4)).describe())
Node(B=16, delay=0.5ms, preferred=[4, 8], instances=2, S(k)=1 ms + 0.1 ms x k)
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..system import Node, ServiceTime
from ..ensemble import Ensemble
from .ensemble import read_ensemble, write_ensemble
from .pbtxt import at, proto

__all__ = ["TritonConfig", "TritonConfigWarning", "read_config", "write_config"]

class TritonConfigWarning(UserWarning):
    """A config.pbtxt sets something that qmodel does not model (the message names it)."""


@dataclass(frozen=True)
class TritonConfig:
    """A Triton model's configuration as qmodel models it.

    Attributes
    ----------
    name : str
        The model's name ("" where the file does not give one: Triton takes the directory's).
    source : str
        The file it was read from, or "<text>".
    max_batch_size : int
        The largest batch the node forms: Triton's max_batch_size where a dynamic batcher
        combines requests, 1 where it does not (max_batch_size 0, or no dynamic_batching).
    max_queue_delay : float
        Seconds (Triton's max_queue_delay_microseconds / 1e6).
    preferred_batch_sizes : tuple of int
    instances : int
        Model instances sharing the queue, summed over instance groups and their GPUs.
    max_queue_size : int
        The default queue policy's limit (0: unlimited).
    triton_max_batch_size : int
        max_batch_size as the file writes it.
    dynamic_batching : bool
        Whether the file has a dynamic_batching block.
    backend : str
        The backend, or the platform where the file names one instead.
    unmodelled : tuple of str
        What the file sets that qmodel does not model (also warned when read).
    message : ModelConfig
        The parsed protobuf message, for fields qmodel does not read.
    """

    name: str
    source: str
    max_batch_size: int
    max_queue_delay: float
    preferred_batch_sizes: tuple
    instances: int
    max_queue_size: int
    triton_max_batch_size: int
    dynamic_batching: bool
    backend: str
    unmodelled: tuple = ()
    message: object = field(default=None, repr=False, compare=False)

    def node(self, service: ServiceTime) -> Node:
        """The :class:`qmodel.Node` with these knobs and the batch execution time ``service``.

        Examples
        --------
        >>> import qmodel as qm
        >>> cfg = qm.triton.read_config("max_batch_size: 8\\ndynamic_batching { }\\n"
        ...                             "instance_group [{ kind: KIND_CPU }]")
        >>> cfg.node(qm.ServiceTime.affine(2e-3, 5e-4)).capacity
        1333.3333333333333
        """
        return Node(service, max_batch_size=self.max_batch_size,
                    max_queue_delay=self.max_queue_delay,
                    preferred_batch_sizes=self.preferred_batch_sizes,
                    instances=self.instances, max_queue_size=self.max_queue_size)


def _text(source) -> tuple[str, str]:
    """(the config's text, where it came from): a path (a file, or a model directory holding
    config.pbtxt) or the text itself (anything with a newline, brace or colon)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, str) and any(c in source for c in "\n{:"):
        return source, "<text>"
    if not isinstance(source, (str, Path)):
        raise ValueError(f"read_config takes a config.pbtxt path, a model directory or the "
                         f"file's text, got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        path = path / "config.pbtxt"
    if not path.is_file():
        raise ValueError(f"read_config: no config file at {path} (give the path of a "
                         f"config.pbtxt, the model's directory, or the text itself)")
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"read_config: cannot read {path}: {err}") from None


def _instances(message, gpus, where: str, text: str, notes: list) -> int:
    """Instances summed over instance groups: count per listed GPU, per GPU the server sees
    for a GPU group that lists none (``gpus``; 1 assumed, and noted, where it is None)."""
    pb = type(message).DESCRIPTOR.fields_by_name["instance_group"].message_type
    kind_name = pb.enum_types_by_name["Kind"].values_by_number

    def seen_gpus(what: str) -> int:
        if gpus is None:
            notes.append(f"{what} places instances on every GPU the server sees; taken as 1 "
                         f"GPU (pass read_config(..., gpus=N))")
            return 1
        return gpus

    groups = list(message.instance_group)
    if not groups:
        return max(seen_gpus("no instance_group: Triton"), 1)
    total = 0
    for i, group in enumerate(groups):
        count = group.count if group.count > 0 else 1    # Triton's default count
        kind = kind_name[group.kind].name
        if kind in ("KIND_CPU", "KIND_MODEL"):
            total += count
        elif len(group.gpus):
            total += count * len(group.gpus)
        else:
            devices = seen_gpus(f"instance_group[{i}] ({kind}, count {count}, no gpus listed)")
            # KIND_AUTO on a machine without GPUs is one CPU group
            total += count * devices if devices or kind == "KIND_GPU" else count
        if group.HasField("rate_limiter") and (len(group.rate_limiter.resources)
                                               or group.rate_limiter.priority):
            notes.append(f"instance_group[{i}].rate_limiter: instances wait for resources "
                         f"shared with other models, which qmodel does not model")
    if total < 1:
        raise ValueError(f"{at(where, text, 'instance_group')}: the instance groups give no "
                         f"instance (gpus=0 with KIND_GPU groups); say how many GPUs the "
                         f"server sees, or use KIND_CPU")
    return total


def read_config(source, *, gpus: int | None = None, repository=None):
    """Read a Triton model's config.pbtxt into qmodel's knobs.

    Parameters
    ----------
    source : str or pathlib.Path
        A config.pbtxt path, the model's directory, or the file's text.
    gpus : int, optional
        GPUs the server sees, for instance groups that list none (KIND_GPU and KIND_AUTO
        groups without ``gpus``, or no instance group at all). None takes 1 and notes it.
    repository : str or pathlib.Path, optional
        For an ensemble given as text: the model repository holding its composing models
        (by default the directory above the ensemble's own).

    Returns
    -------
    TritonConfig, or TritonEnsembleConfig for an ensemble (``ensemble_scheduling``: its
    steps' models read from the repository, :mod:`qmodel.triton.ensemble`)

    Raises
    ------
    ValueError
        Naming the file and line: a malformed file, a field out of range, sequence batching
        (not modelled), an ensemble step that reads a tensor nobody writes.
    ImportError
        Without protobuf and tritonclient (``pip install 'qmodel[triton]'``).

    Examples
    --------
    >>> cfg = read_config('max_batch_size: 32\\ndynamic_batching { '
    ...                   'default_queue_policy { max_queue_size: 64 } }\\n'
    ...                   'instance_group [{ count: 2, kind: KIND_GPU, gpus: [0, 1] }]')
    >>> cfg.max_batch_size, cfg.max_queue_delay, cfg.instances, cfg.max_queue_size
    (32, 0.0, 4, 64)
    >>> read_config("max_batch_size: 8\\nmax_queue_delay_microseconds: 100")
    Traceback (most recent call last):
    ...
    ValueError: <text>:2:1: Message type "inference.ModelConfig" has no field named "max_queue_delay_microseconds". (config.pbtxt is the protobuf text format of Triton's inference.ModelConfig: fix that line)
    """
    text_format, model_config_pb2 = proto()
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral)
                             or gpus < 0):
        raise ValueError(f"gpus must be the number of GPUs the server sees (0 or more), "
                         f"got {gpus!r}")
    text, where = _text(source)
    message = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as err:
        line, column = err.GetLine(), err.GetColumn()
        detail = str(err).split(" : ", 1)[-1] if line else str(err)
        place = f"{where}:{line}:{column}" if line else where
        raise ValueError(f"{place}: {detail} (config.pbtxt is the protobuf text format of "
                         f"Triton's inference.ModelConfig: fix that line)") from None
    if message.HasField("sequence_batching"):
        raise ValueError(f"{at(where, text, 'sequence_batching')}: this model uses sequence "
                         "batching (stateful models, one sequence per instance slot), which "
                         "qmodel does not model; qmodel reads models served by the dynamic "
                         "batcher, and ensembles of them")
    if message.HasField("ensemble_scheduling") or message.platform == "ensemble":
        if repository is None and where != "<text>":
            repository = Path(where).parent.parent
        config, notes = read_ensemble(message, text, where, repository, gpus, read_config)
        for note in notes:
            warnings.warn(f"{where}: {note}", TritonConfigWarning, stacklevel=2)
        return config
    notes: list[str] = []
    triton_b = int(message.max_batch_size)
    if triton_b < 0:
        raise ValueError(f"{at(where, text, 'max_batch_size')}: max_batch_size must be 0 "
                         f"(no batching) or more, got {triton_b}")
    batching = message.HasField("dynamic_batching")
    db = message.dynamic_batching
    if triton_b == 0:
        B = 1
        if batching:
            notes.append("dynamic_batching with max_batch_size 0: the model takes no batch "
                         "dimension, so every execution holds one request")
    elif not batching:
        B = 1
        notes.append(f"no dynamic_batching: Triton's default scheduler runs each request "
                     f"alone (max_batch_size {triton_b} bounds the client's own batches); "
                     f"add dynamic_batching {{ }} to combine requests")
    else:
        B = triton_b
    policy = db.default_queue_policy
    if db.priority_levels > 1 or len(db.priority_queue_policy):
        notes.append(f"dynamic_batching.priority_levels {db.priority_levels}: qmodel serves "
                     f"one FIFO queue, as if every request had the same priority")
    if policy.default_timeout_microseconds > 0:
        notes.append(f"default_queue_policy.default_timeout_microseconds "
                     f"{policy.default_timeout_microseconds}: qmodel does not time requests "
                     f"out of the queue")
    if db.preserve_ordering:
        notes.append("dynamic_batching.preserve_ordering: responses held back to keep the "
                     "order across instances are not modelled")
    if message.HasField("response_cache") and message.response_cache.enable:
        notes.append("response_cache: cached responses skip the queue; qmodel serves every "
                     "request")
    instances = _instances(message, gpus, where, text, notes)
    config = TritonConfig(
        name=message.name, source=where, max_batch_size=B,
        max_queue_delay=db.max_queue_delay_microseconds / 1e6,
        preferred_batch_sizes=tuple(int(p) for p in db.preferred_batch_size),
        instances=instances, max_queue_size=int(policy.max_queue_size),
        triton_max_batch_size=triton_b, dynamic_batching=batching,
        backend=message.backend or message.platform, unmodelled=tuple(notes), message=message)
    # the knobs pass the Node's own checks now, with the line to fix, not at .node()
    try:
        config.node(ServiceTime.affine(1.0))
    except ValueError as err:
        field_name = str(err).split()[0].removeprefix("Node.").rstrip(":=")
        pbtxt_name = {"preferred_batch_sizes": "preferred_batch_size",
                      "max_queue_delay": "max_queue_delay_microseconds"}.get(field_name,
                                                                            field_name)
        raise ValueError(f"{at(where, text, pbtxt_name)}: {err}") from None
    for note in notes:
        warnings.warn(f"{where}: {note}", TritonConfigWarning, stacklevel=2)
    return config


def write_config(node, name: str, *, backend: str = "python", platform: str = "",
                 inputs=(), outputs=(), kind: str = "KIND_GPU", gpus=None):
    """A config.pbtxt for ``node``'s knobs, as text (write it to ``<repo>/<name>/config.pbtxt``).

    For an :class:`~qmodel.Ensemble`: a dict from model directory to text, the ensemble
    ``name`` and one model per stage (:func:`qmodel.triton.ensemble.write_ensemble`; its
    tensors are FP32 of shape [1]).

    Parameters
    ----------
    node : Node or Ensemble
    name : str
        The model's name (its directory in the model repository).
    backend, platform : str
        Triton's backend (``"python"``, ``"onnxruntime"``, ...) or platform
        (``"tensorrt_plan"``); a platform replaces the backend.
    inputs, outputs : sequence of (name, data_type, dims)
        Tensors without the batch dimension, e.g. ``("x", "TYPE_FP32", [16])``.
    kind : {"KIND_GPU", "KIND_CPU"}
        Where the instances run.
    gpus : sequence of int, optional
        GPUs of a KIND_GPU group: ``node.instances`` must divide evenly among them. None
        writes no list (Triton then places the count on every GPU it sees).

    Examples
    --------
    >>> import qmodel as qm
    >>> node = qm.Node(qm.ServiceTime.affine(1e-3, 1e-4), max_batch_size=8,
    ...                max_queue_delay=2e-3, preferred_batch_sizes=(4,), instances=2)
    >>> text = write_config(node, "affine", kind="KIND_CPU",
    ...                     inputs=[("x", "TYPE_FP32", [4])], outputs=[("y", "TYPE_FP32", [1])])
    >>> print(text)                                          # doctest: +NORMALIZE_WHITESPACE
    name: "affine"
    max_batch_size: 8
    input { name: "x" data_type: TYPE_FP32 dims: 4 }
    output { name: "y" data_type: TYPE_FP32 dims: 1 }
    instance_group { count: 2 kind: KIND_CPU }
    dynamic_batching { preferred_batch_size: 4 max_queue_delay_microseconds: 2000 }
    backend: "python"
    >>> read_config(text).node(node.service) == node
    True
    """
    text_format, model_config_pb2 = proto()
    if isinstance(node, Ensemble):
        if inputs or outputs or platform:
            raise ValueError("write_config(ensemble, ...) writes its own tensors and "
                             "platform; drop inputs, outputs and platform")
        return write_ensemble(node, name, write_config, backend=backend, kind=kind, gpus=gpus)
    if not isinstance(node, Node):
        raise ValueError(f"write_config(node, ...): node must be a qmodel.Node or Ensemble, "
                         f"got {type(node).__name__}")
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"write_config: name must be the model's directory name (no '/'), "
                         f"got {name!r}")
    message = model_config_pb2.ModelConfig(name=name, max_batch_size=node.max_batch_size)
    if platform:
        message.platform = platform
    else:
        message.backend = backend
    for tensors, target, what in ((inputs, message.input, "inputs"),
                                  (outputs, message.output, "outputs")):
        for tensor in tensors:
            try:
                tensor_name, data_type, dims = tensor
                target.add(name=tensor_name, data_type=data_type, dims=list(dims))
            except (ValueError, TypeError) as err:
                raise ValueError(f"write_config: each of {what} must be (name, data_type, "
                                 f"dims) such as ('x', 'TYPE_FP32', [16]), got {tensor!r} "
                                 f"({err})") from None
    micros = round(node.max_queue_delay * 1e6)
    if node.max_queue_delay > 0 and abs(micros - node.max_queue_delay * 1e6) > 0.01 * micros:
        raise ValueError(f"Node.max_queue_delay {node.max_queue_delay:g} s is not a whole "
                         f"number of microseconds, which is all Triton's "
                         f"max_queue_delay_microseconds holds; round it")
    db = message.dynamic_batching
    db.SetInParent()
    db.preferred_batch_size.extend(node.preferred_batch_sizes)
    db.max_queue_delay_microseconds = micros
    if node.max_queue_size:
        db.default_queue_policy.max_queue_size = node.max_queue_size
    if kind not in ("KIND_GPU", "KIND_CPU"):
        raise ValueError(f"write_config: kind must be 'KIND_GPU' or 'KIND_CPU', got {kind!r}")
    group = message.instance_group.add(kind=kind, count=node.instances)
    if gpus is not None:
        gpus = [int(g) for g in gpus]
        if kind != "KIND_GPU" or not gpus or node.instances % len(gpus):
            raise ValueError(f"write_config: gpus={gpus} needs kind='KIND_GPU' and "
                             f"node.instances ({node.instances}) divisible by its length")
        group.count = node.instances // len(gpus)
        group.gpus.extend(gpus)
    return text_format.MessageToString(message)
