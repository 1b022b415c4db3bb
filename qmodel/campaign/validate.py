"""Run a validation campaign and write its report into a folder of its own.

:func:`run_validation` is the Python entry (the built-in ``quick`` or ``full`` campaign of
:func:`qmodel.campaign.grids.plan`, or your own configurations); ``qmodel validate``
(:mod:`qmodel.cli.validate`) is the command line's. Both write into a new folder unless told otherwise: without ``out`` a new
``validate-<name>-<date>-<time>`` folder in the current directory (:func:`new_folder`); an
``out`` that exists and holds anything is refused (:func:`output_folder`), unless ``resume``
(reuse the results cached there, rewrite the report) or ``fresh`` (recompute everything and
overwrite) says what to do with it. So a campaign never overwrites a report by accident, the
committed ones under validation/reports/ included.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from .configs import load_configs
from .grids import plan
from .runner import DEFAULT_REQUESTS, Campaign, run_campaign
from .verdicts import Tolerance

__all__ = ["new_folder", "output_folder", "run_validation"]


def new_folder(name: str, parent=".") -> Path:
    """A folder name not taken yet: ``parent/validate-<name>-<YYYYmmdd-HHMMSS>`` (-2, -3, ...).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     first = new_folder("quick", tmp)
    ...     first.mkdir()
    ...     second = new_folder("quick", tmp)
    >>> first.name.startswith("validate-quick-"), second.name == first.name + "-2"
    (True, True)
    """
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(parent) / f"validate-{name}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def output_folder(out, name: str, *, resume: bool = False, fresh: bool = False) -> Path:
    """The folder a campaign writes into: ``out`` if it is new or empty, else a new one.

    Parameters
    ----------
    out : str or Path, optional
        The folder asked for; None: :func:`new_folder` in the current directory.
    name : str
        What the campaign is ("quick", "full", a configs file's stem), for a new folder's name.
    resume, fresh : bool
        Either allows an ``out`` that already holds files: ``resume`` to reuse its cached
        results, ``fresh`` to recompute and overwrite them.

    Raises
    ------
    FileExistsError
        If ``out`` holds files and neither ``resume`` nor ``fresh`` is set, or is a file.
    ValueError
        For ``resume`` without ``out``.
    """
    if out is None:
        if resume:
            raise ValueError("--resume continues in an existing folder: name it with --out DIR")
        return new_folder(name)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; name a folder")
    if out.is_dir() and any(out.iterdir()) and not (resume or fresh):
        raise FileExistsError(
            f"--out {out} already holds files (an earlier report?); pass --resume to reuse its "
            "cached results and rewrite its report, --fresh to recompute and overwrite them, "
            "or leave out --out for a new folder")
    return out


def run_validation(level: str = "quick", *, configs=None, out=None, resume: bool = False,
                   fresh: bool = False, requests: int | None = None, seed: int = 11,
                   executor=None, workers: int | None = None, tolerance: float | Tolerance = 0.08,
                   progress: bool = True) -> tuple[Campaign, Path]:
    """Run a validation campaign and write its report; the Python form of ``qmodel validate``.

    Parameters
    ----------
    level : {"quick", "full"}
        The built-in campaign (:func:`qmodel.campaign.grids.plan`); ignored with ``configs``.
    configs : path or sequence of Config or dict, optional
        Your own configurations instead: a TOML or JSON file
        (:func:`qmodel.campaign.configs.load_configs`) or the configurations themselves.
    out : str or Path, optional
        Output folder; default a new ``validate-<name>-<date>-<time>`` folder in the current
        directory. An existing folder that holds files needs ``resume`` or ``fresh``
        (:func:`output_folder`).
    resume : bool
        Write into an existing ``out``, reusing the results cached in ``out/cache``.
    fresh : bool
        Recompute every result, ignoring (and overwriting) any cached ones.
    requests : int, optional
        Simulated requests per configuration (default 4e5 quick, 2e6 full, 1e6 your own).
    seed : int
    executor : concurrent.futures.Executor, optional
        E.g. ``dask.distributed.Client().get_executor()``; default local processes.
    workers : int, optional
        Local processes (default all cores; 1 runs in this process).
    tolerance : float or Tolerance
        Relative tolerance of approximations on p95/p99, or a whole :class:`Tolerance`.
    progress : bool
        Progress bar on stderr.

    Returns
    -------
    (Campaign, Path)
        The campaign and the report it wrote (``report.md``).

    Raises
    ------
    ValueError
        For a malformed configuration or setting, before any work starts.
    FileExistsError
        For an ``out`` that holds files, without ``resume`` or ``fresh``.
    """
    from .report import write_report

    source = None
    if configs is not None:
        level, extras = "configs", None
        if isinstance(configs, (str, Path)):
            source, name = str(configs), Path(configs).stem
            configs = load_configs(configs)
        else:
            name, configs = "configs", list(configs)
    elif level in ("quick", "full"):
        extras = plan(level)
        configs, name = extras.configs, level
    else:
        raise ValueError(f"level={level!r}: use 'quick' or 'full', or give configs")
    requests = DEFAULT_REQUESTS[level] if requests is None else requests
    if not float(requests).is_integer() or requests < 1000:
        raise ValueError(f"--requests={requests:g} must be a whole number >= 1000")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers={workers} must be at least 1")
    if not isinstance(tolerance, Tolerance):
        if not 0 <= tolerance < 1:
            raise ValueError(f"--tolerance={tolerance} must be a fraction in [0, 1), e.g. 0.08")
        tolerance = Tolerance(approx=tolerance)
    out = output_folder(out, name, resume=resume, fresh=fresh)
    campaign = run_campaign(configs, out, requests=int(requests), seed=seed, executor=executor,
                            workers=workers, tolerance=tolerance, progress=progress,
                            fresh=fresh, extras=extras, level=level)
    if source is not None:
        campaign.settings["source"] = source
    return campaign, write_report(campaign, out)
