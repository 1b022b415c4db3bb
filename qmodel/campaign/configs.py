"""Campaign configurations: a node, optionally a cluster, and a load, checked once.

A configurations file (``qmodel validate --configs FILE``) is TOML (``[[config]]`` tables) or
JSON (a list, or ``{"config": [...]}``); durations are seconds or strings with a unit::

    [[config]]
    name = "b8 canary"                       # optional
    service = { base = "1.8874ms", per_item = "0.1438ms", jitter = "lognormal:0.3" }
    # or: service = { table = { 1 = "3.1ms", 8 = "6.7ms" } }
    max_batch_size = 8
    max_queue_delay = "1ms"
    preferred = [4, 8]                       # optional, like instances and max_queue_size
    instances = 2
    cluster = { nodes = 4, router = "round_robin" }   # optional; weights, choices
    load = 0.7                               # fraction of capacity, or rate = 1200.0 (req/s)

Every field is checked when the file is read, and an error names the file, the entry and the
field, before any work starts.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from ..system import Cluster, Node, ServiceTime, check_stable, parse_duration

__all__ = ["Config", "parse_config", "load_configs", "system_of", "node_of"]


@dataclass(frozen=True, eq=False)
class Config:
    """One configuration of a campaign: a node, optionally a cluster, and a load.

    Build it with :func:`parse_config` (from a dict such as a configs file holds) or
    :func:`qmodel.campaign.grids.grid_config`. ``spec`` is the normalised, JSON-ready
    description (seconds, requests/s); it is what a worker receives and what the cache key
    hashes.

    Examples
    --------
    >>> c = parse_config({"service": {"base": "2ms", "per_item": "0.25ms"},
    ...                   "max_batch_size": 8, "load": 0.5})
    >>> c.system.max_batch_size, round(c.rate)
    (8, 1000)
    """

    name: str
    spec: dict

    @property
    def system(self):
        """The Node or Cluster described."""
        return system_of(self.spec)

    @property
    def rate(self) -> float:
        """Poisson arrival rate, requests/s (from ``rate`` or ``load`` x capacity)."""
        if self.spec.get("rate") is not None:
            return float(self.spec["rate"])
        return float(self.spec["load"]) * self.system.capacity


_NODE_FIELDS = ("service", "max_batch_size", "max_queue_delay", "preferred", "instances",
                "max_queue_size")
_FIELDS = ("name", *_NODE_FIELDS, "cluster", "load", "rate")
_SERVICE_FIELDS = ("base", "per_item", "jitter", "table")
_CLUSTER_FIELDS = ("nodes", "router", "weights", "choices")


def _unknown(keys, known, where):
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"{where}: unknown field {key!r}{hint} (known fields: "
                             f"{', '.join(known)})")


def _jitter(value, where):
    """'lognormal:0.3', 'lognormal', ['lognormal', 0.3] -> [name, cv or None]."""
    if isinstance(value, str):
        name, _, cv = value.partition(":")
        try:
            return [name.strip(), float(cv) if cv else None]
        except ValueError:
            raise ValueError(f"{where}: field 'service.jitter'={value!r}: write NAME or NAME:CV, "
                             "e.g. 'lognormal:0.3'") from None
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str):
        return [value[0], value[1]]
    raise ValueError(f"{where}: field 'service.jitter'={value!r}: write 'deterministic', "
                     "'exponential', 'lognormal:0.3' or ['gamma', 0.5]")


def _service(spec: dict) -> ServiceTime:
    name, cv = spec["jitter"]
    jitter = name if cv is None else (name, cv)
    if "table" in spec:
        return ServiceTime.table({int(k): v for k, v in spec["table"].items()}, jitter=jitter)
    return ServiceTime.affine(spec["base"], spec.get("per_item", 0.0), jitter=jitter)


def node_of(spec: dict) -> Node:
    """The Node of a normalised spec (a cluster's node, for a cluster)."""
    return Node(_service(spec["service"]), max_batch_size=spec["max_batch_size"],
                max_queue_delay=spec["max_queue_delay"],
                preferred_batch_sizes=tuple(spec["preferred"]), instances=spec["instances"],
                max_queue_size=spec["max_queue_size"])


def system_of(spec: dict):
    """The Node or Cluster of a normalised spec."""
    node = node_of(spec)
    cl = spec.get("cluster")
    if not cl:
        return node
    return Cluster(node, count=cl["nodes"], router=cl["router"], weights=cl.get("weights"),
                   choices=cl.get("choices"))


def parse_config(entry, where: str = "config") -> Config:
    """A checked :class:`Config` from a dict (one entry of a configs file).

    Parameters
    ----------
    entry : dict
        Fields ``service`` (``base``, ``per_item``, ``jitter``; or ``table``), ``max_batch_size``,
        ``max_queue_delay``, ``preferred``, ``instances``, ``max_queue_size``, optional
        ``cluster`` (``nodes``, ``router``, ``weights``, ``choices``), and exactly one of
        ``load`` (fraction of capacity, in (0, 1)) or ``rate`` (requests/s). Durations are
        seconds or strings with a unit ("2ms").
    where : str
        How to name this entry in error messages.

    Raises
    ------
    ValueError
        Naming the entry and the field, for anything malformed or an unstable load.
    """
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a table of fields, got {type(entry).__name__}")
    _unknown(entry, _FIELDS, where)
    svc = entry.get("service")
    if not isinstance(svc, dict):
        raise ValueError(f"{where}: field 'service' is missing or not a table; write e.g. "
                         "service = { base = '2ms', per_item = '0.25ms' }")
    _unknown(svc, _SERVICE_FIELDS, f"{where}, service")
    service = {"jitter": _jitter(svc.get("jitter", "deterministic"), where)}
    if "table" in svc:
        if "base" in svc or "per_item" in svc:
            raise ValueError(f"{where}: field 'service' takes base/per_item or table, not both")
        if not isinstance(svc["table"], dict):
            raise ValueError(f"{where}: field 'service.table' must map batch sizes to times, "
                             "e.g. { 1 = '3.1ms', 8 = '6.7ms' }")
        table = {}
        for k, v in svc["table"].items():
            try:
                size = int(k)
            except ValueError:
                raise ValueError(f"{where}: field 'service.table' key {k!r} is not a batch "
                                 "size") from None
            table[str(size)] = _seconds(v, f"{where}: field 'service.table.{k}'")
        service["table"] = table
    else:
        if "base" not in svc:
            raise ValueError(f"{where}: field 'service.base' is missing (or give service.table)")
        service["base"] = _seconds(svc["base"], f"{where}: field 'service.base'")
        service["per_item"] = _seconds(svc.get("per_item", 0.0),
                                       f"{where}: field 'service.per_item'")
    spec = {"service": service,
            "max_batch_size": entry.get("max_batch_size", 1),
            "max_queue_delay": _seconds(entry.get("max_queue_delay", 0.0),
                                        f"{where}: field 'max_queue_delay'"),
            "preferred": entry.get("preferred", []),
            "instances": entry.get("instances", 1),
            "max_queue_size": entry.get("max_queue_size", 0),
            "cluster": None}
    if not isinstance(spec["preferred"], (list, tuple)):
        raise ValueError(f"{where}: field 'preferred' must be a list of batch sizes, e.g. [4, 8]")
    spec["preferred"] = list(spec["preferred"])
    if entry.get("cluster") is not None:
        cl = entry["cluster"]
        if not isinstance(cl, dict):
            raise ValueError(f"{where}: field 'cluster' must be a table, e.g. "
                             "{ nodes = 4, router = 'round_robin' }")
        _unknown(cl, _CLUSTER_FIELDS, f"{where}, cluster")
        spec["cluster"] = {"nodes": cl.get("nodes", 1), "router": cl.get("router", "random"),
                           "weights": cl.get("weights"), "choices": cl.get("choices")}
    try:
        system = system_of(spec)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {err}") from None
    if ("load" in entry) == ("rate" in entry):
        raise ValueError(f"{where}: give exactly one of the fields 'load' (fraction of capacity, "
                         "e.g. 0.7) or 'rate' (requests/s)")
    if "load" in entry:
        load = entry["load"]
        if isinstance(load, bool) or not isinstance(load, (int, float)) or not 0 < load < 1:
            raise ValueError(f"{where}: field 'load'={load!r} must be a fraction of capacity "
                             "strictly between 0 and 1, e.g. 0.7")
        spec["load"], spec["rate"] = float(load), None
    else:
        rate = entry["rate"]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise ValueError(f"{where}: field 'rate'={rate!r} must be requests/s > 0")
        try:
            check_stable(system, float(rate))
        except ValueError as err:
            raise ValueError(f"{where}: field 'rate': {err}") from None
        spec["load"], spec["rate"] = None, float(rate)
    name = entry.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"{where}: field 'name' must be a string")
    return Config(name or _default_name(spec), spec)


def _seconds(value, where):
    try:
        return parse_duration(value, where)
    except ValueError as err:
        raise ValueError(str(err)) from None


def _default_name(spec) -> str:
    name, cv = spec["service"]["jitter"]
    jit = name[:3] if cv is None else f"{name[:4]}{cv:g}"
    out = (f"{jit} B={spec['max_batch_size']} D={spec['max_queue_delay'] * 1e3:g}ms "
           f"c={spec['instances']}")
    if spec.get("cluster"):
        out += f" {spec['cluster']['nodes']}x{spec['cluster']['router']}"
    return out + (f" load={spec['load']:.2f}" if spec.get("load") is not None
                  else f" rate={spec['rate']:g}")


def load_configs(path) -> list[Config]:
    """Read a TOML (``[[config]]`` tables) or JSON (list, or ``{"config": [...]}``) file.

    Raises
    ------
    ValueError
        For a syntax error or a malformed entry, naming the file, entry and field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"configs file {path}: {err.strerror or err}") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = _toml().loads(text)
    except ValueError as err:          # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"configs file {path}: not valid {path.suffix.lstrip('.') or 'TOML'}: "
                         f"{err}") from None
    entries = data.get("config") if isinstance(data, dict) else data
    if isinstance(data, dict):
        _unknown(data, ("config",), f"configs file {path}")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"configs file {path}: expected a non-empty list of configurations "
                         "([[config]] tables in TOML, a list in JSON)")
    out = []
    for i, entry in enumerate(entries, 1):
        label = f"configs file {path}, entry {i}"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            label += f" ({entry['name']!r})"
        out.append(parse_config(entry, label))
    return out


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:        # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ValueError("reading TOML on Python < 3.11 needs tomli (pip install tomli); "
                             "or give the configurations as JSON") from None
    return tomllib

