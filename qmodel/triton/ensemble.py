"""Triton ensembles in and out: ``ensemble_scheduling`` steps as a :class:`qmodel.Ensemble`.

An ensemble's config.pbtxt (platform "ensemble") lists steps, each a composing model with an
``input_map`` (the model's input -> an ensemble tensor) and an ``output_map`` (the model's
output -> an ensemble tensor). A step runs when every tensor it reads exists: the ensemble's
own inputs exist at once, the others when the step that writes them has run. So step B
follows step A when B reads a tensor A writes: those are the Ensemble's edges, and each step's
model, read from its own config.pbtxt in the same model repository, is a stage.

:func:`qmodel.triton.read_config` calls :func:`read_ensemble` for a config with
``ensemble_scheduling``; :func:`qmodel.triton.write_config` calls :func:`write_ensemble` for
an Ensemble.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..ensemble import Ensemble
from ..system import ServiceTime
from .pbtxt import at, proto

__all__ = ["TritonEnsembleConfig", "read_ensemble", "write_ensemble"]


@dataclass(frozen=True)
class TritonEnsembleConfig:
    """A Triton ensemble as qmodel models it.

    Attributes
    ----------
    name, source : str
        The ensemble's name and the file it was read from.
    stages : dict of str to TritonConfig
        Each step's composing model, by model name, in step order.
    edges : tuple of (str, str)
        (writer, reader) pairs: the reader step consumes a tensor the writer produces.
    unmodelled : tuple of str
        What the files set that qmodel does not model (also warned when read).
    message : ModelConfig
        The ensemble's parsed protobuf message.
    """

    name: str
    source: str
    stages: dict
    edges: tuple
    unmodelled: tuple = ()
    message: object = field(default=None, repr=False, compare=False)

    def ensemble(self, services) -> Ensemble:
        """The :class:`qmodel.Ensemble` of these steps, each stage's batch execution time
        taken from ``services`` (a mapping from model name to ServiceTime).

        Examples
        --------
        See :func:`read_ensemble`.
        """
        if not hasattr(services, "get"):
            raise ValueError("TritonEnsembleConfig.ensemble(services): services must map each "
                             f"model name ({', '.join(self.stages)}) to a qmodel.ServiceTime")
        missing = [name for name in self.stages if not isinstance(services.get(name),
                                                                  ServiceTime)]
        if missing:
            raise ValueError(f"TritonEnsembleConfig.ensemble(services): no ServiceTime for "
                             f"{', '.join(map(repr, missing))}; give one per composing model "
                             f"(from qmodel.profile or qmodel.triton.calibrate)")
        return Ensemble({name: cfg.node(services[name]) for name, cfg in self.stages.items()},
                        list(self.edges))


def read_ensemble(message, text: str, where: str, repository, gpus, read_model):
    """The :class:`TritonEnsembleConfig` of a parsed ensemble config (``message``, from
    ``text`` at ``where``); its composing models are read from ``repository``/<model> by
    ``read_model`` (read_config). Called by :func:`qmodel.triton.read_config`.

    Examples
    --------
    >>> import tempfile, pathlib, qmodel as qm
    >>> repo = pathlib.Path(tempfile.mkdtemp())
    >>> s = qm.ServiceTime.affine(1e-3, 1e-4)
    >>> ens = qm.Ensemble({"user": qm.Node(s, max_batch_size=8), "item": qm.Node(s),
    ...                    "score": qm.Node(s, max_batch_size=16)},
    ...                   [("user", "score"), ("item", "score")])
    >>> for model, text in qm.triton.write_config(ens, "recommend", kind="KIND_CPU").items():
    ...     (repo / model).mkdir()
    ...     _ = (repo / model / "config.pbtxt").write_text(text)
    >>> cfg = qm.triton.read_config(repo / "recommend")
    >>> list(cfg.stages), cfg.edges
    (['item', 'user', 'score'], (('item', 'score'), ('user', 'score')))
    >>> cfg.ensemble({"user": s, "item": s, "score": s}) == ens
    True
    """

    notes = []
    scheduling = message.ensemble_scheduling
    if scheduling.max_inflight_requests:
        notes.append(f"ensemble_scheduling.max_inflight_requests "
                     f"{scheduling.max_inflight_requests}: qmodel does not hold requests "
                     f"back between steps")
    if repository is None:
        raise ValueError(f"{where}: an ensemble's steps name composing models whose "
                         f"config.pbtxt lies beside it in the model repository: give the "
                         f"ensemble's directory or file, or repository=<the model "
                         f"repository>")
    repository = Path(repository)
    available = {t.name for t in message.input}
    writer: dict = {}
    models = []
    for step in scheduling.step:
        model = step.model_name
        if not model:
            raise ValueError(f"{at(where, text, 'step')}: a step names no model_name")
        if model in models:
            raise ValueError(f"{at(where, text, model)}: model {model!r} runs in two steps; "
                             "both would share its one queue and instances, which qmodel's "
                             "stages (one batcher each) do not model")
        models.append(model)
        for tensor in step.output_map.values():
            if tensor in writer or tensor in available:
                raise ValueError(f"{at(where, text, tensor)}: ensemble tensor {tensor!r} is "
                                 "written twice (by "
                                 f"{writer.get(tensor, 'the ensemble input')!r} and {model!r})")
            writer[tensor] = model
    if not models:
        raise ValueError(f"{at(where, text, 'ensemble_scheduling')}: the ensemble has no "
                         "steps")
    edges = []
    for step in scheduling.step:
        for tensor in step.input_map.values():
            if tensor in available:
                continue
            if tensor not in writer:
                raise ValueError(f"{at(where, text, tensor)}: step {step.model_name!r} "
                                 f"reads tensor {tensor!r}, which neither the ensemble's "
                                 "inputs nor any step's output_map provides (a missing "
                                 "input: the step could never run)")
            edge = (writer[tensor], step.model_name)
            if edge not in edges:
                edges.append(edge)
    for output in message.output:
        if output.name not in writer and output.name not in available:
            raise ValueError(f"{at(where, text, output.name)}: ensemble output "
                             f"{output.name!r} is written by no step")
    stages = {}
    for model in models:
        path = repository / model
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                config = read_model(path, gpus=gpus)
            except ValueError as err:
                raise ValueError(f"{where}: step {model!r}: {err}") from None
        for w in caught:
            notes.append(f"step {model!r}: {w.message}")
        if not hasattr(config, "node"):
            raise ValueError(f"{where}: step {model!r} is itself an ensemble; qmodel reads "
                             "one level of steps")
        stages[model] = config
    # Ensemble orders its stages; keep the steps' order for the stage dict
    try:
        ensemble = Ensemble({m: cfg.node(ServiceTime.affine(1.0)) for m, cfg in stages.items()},
                            edges)
    except ValueError as err:          # a cycle, or a step with a queue limit
        raise ValueError(f"{where}: {err}") from None
    ordered = {m: stages[m] for m in ensemble.order}
    return TritonEnsembleConfig(name=message.name, source=where, stages=ordered,
                                edges=tuple(sorted(ensemble.edges)), unmodelled=tuple(notes),
                                message=message), notes


def write_ensemble(ensemble: Ensemble, name: str, write_model, *, backend: str = "python",
                   kind: str = "KIND_GPU", gpus=None, tensor=("TYPE_FP32", [1])) -> dict:
    """config.pbtxt texts for ``ensemble`` as a Triton ensemble ``name`` and its composing
    models: ``{model directory: text}`` (each goes to ``<repo>/<directory>/config.pbtxt``).

    Each stage is a model named as the stage with input ``INPUT`` (an entry stage; it reads
    the ensemble's input ``INPUT``) or one input ``IN_<upstream>`` per upstream, and output
    ``OUTPUT``, written to the ensemble tensor ``<stage>_out``; the ensemble's outputs are its
    exit stages' tensors. ``tensor`` is the (data_type, dims) of every tensor. Called by
    :func:`qmodel.triton.write_config`.
    """

    text_format, model_config_pb2 = proto()
    data_type, dims = tensor
    graph = ensemble.graph
    texts = {}
    for stage in ensemble.order:
        ups = sorted(graph.predecessors(stage))
        inputs = ([("INPUT", data_type, dims)] if not ups
                  else [(f"IN_{u}", data_type, dims) for u in ups])
        texts[stage] = write_model(ensemble.stages[stage], stage, backend=backend,
                                   inputs=inputs, outputs=[("OUTPUT", data_type, dims)],
                                   kind=kind, gpus=gpus)
    if name in texts:
        raise ValueError(f"write_config: the ensemble's name {name!r} is also a stage's; "
                         "each model needs its own directory")
    message = model_config_pb2.ModelConfig(
        name=name, platform="ensemble",
        max_batch_size=min(node.max_batch_size for node in ensemble.stages.values()))
    message.input.add(name="INPUT", data_type=data_type, dims=list(dims))
    for stage in ensemble.exits:
        message.output.add(name=f"{stage}_out", data_type=data_type, dims=list(dims))
    for stage in ensemble.order:
        step = message.ensemble_scheduling.step.add(model_name=stage, model_version=-1)
        ups = sorted(graph.predecessors(stage))
        if not ups:
            step.input_map["INPUT"] = "INPUT"
        for u in ups:
            step.input_map[f"IN_{u}"] = f"{u}_out"
        step.output_map["OUTPUT"] = f"{stage}_out"
    texts[name] = text_format.MessageToString(message)
    return texts
