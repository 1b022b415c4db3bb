"""Jitter laws: how a batch's service time varies around its mean, one object per law.

A :class:`~qmodel.system.ServiceTime` built with ``jitter=`` draws S(k) = mean(k) x J per
batch, J independent with mean 1. Each law carries what qmodel needs of it, in the manner of
scipy.stats' distribution classes: its name and parameter check (the description), its
coefficient of variation, the simulator's draw (array code over NumPy or CuPy), and its cdf,
survival function and inverse survival function (the numeric models' lattices).

=================  =========================  ==============================================
law                cv                         J
=================  =========================  ==============================================
``deterministic``  0                          1
``exponential``    1                          Exp(1)
``gamma``          given, ``("gamma", cv)``   Gamma(shape 1/cv², scale cv²)
``lognormal``      given, ``("lognormal",     exp(N(-σ²/2, σ²)), σ² = ln(1 + cv²)
                   cv)``
=================  =========================  ==============================================

The cdf, sf and isf are written on scipy.special rather than as frozen scipy.stats
distributions: building and calling those costs milliseconds per law, a large share of a
whole prediction.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy import special

__all__ = ["JitterLaw", "JITTERS", "parse_jitter", "jitter_law"]


class JitterLaw:
    """A unit-mean jitter law, with its coefficient of variation ``cv`` bound in."""

    name: str = ""
    fixed_cv: float | None = None     # the cv of a law that takes none
    random: bool = True               # False: J = 1, nothing to draw

    def __init__(self, cv: float):
        self.cv = float(cv)

    @classmethod
    def checked_cv(cls, cv, example: str) -> float:
        """The cv to use, or a ValueError; ``example`` shows how to write a law with a cv."""
        if cls.fixed_cv is not None:
            if cv is not None and cv != cls.fixed_cv:
                raise ValueError(f"jitter {cls.name!r} has cv {cls.fixed_cv:g} and takes no "
                                 f"other; for another cv use {example.format(name='gamma')}")
            return cls.fixed_cv
        if cv is None:
            raise ValueError(f"jitter {cls.name!r} needs a coefficient of variation: "
                             f"{example.format(name=cls.name)}")
        if isinstance(cv, bool) or not isinstance(cv, numbers.Real) or not math.isfinite(cv) \
                or cv <= 0:
            raise ValueError(f"jitter cv must be a finite number > 0, got {cv!r}")
        if cv > 10:
            raise ValueError(f"jitter cv={cv} is implausibly large (> 10); cv is a ratio, not "
                             "seconds")
        return float(cv)

    @property
    def scv(self) -> float:
        return self.cv ** 2

    # ---- the simulator ---------------------------------------------------------------------
    def sample(self, xp, rng, shape):
        """Draws of J, an array of ``shape``, from the backend's generator ``rng``."""
        raise NotImplementedError

    # ---- the numeric models ----------------------------------------------------------------
    def cdf(self, x):
        raise NotImplementedError

    def sf(self, x):
        raise NotImplementedError

    def isf(self, q):
        raise NotImplementedError

    def mean(self) -> float:
        return 1.0

    def std(self) -> float:
        return self.cv

    def __repr__(self) -> str:
        return f"<jitter {self.name}, cv {self.cv:g}>"


class Deterministic(JitterLaw):
    """J = 1."""

    name, fixed_cv, random = "deterministic", 0.0, False

    def sample(self, xp, rng, shape):
        return xp.ones(shape)


class Exponential(JitterLaw):
    """J ~ Exp(1): cv 1."""

    name, fixed_cv = "exponential", 1.0

    def sample(self, xp, rng, shape):
        return rng.standard_exponential(shape)

    def cdf(self, x):
        return -np.expm1(-np.maximum(np.asarray(x, float), 0.0))

    def sf(self, x):
        return np.exp(-np.maximum(np.asarray(x, float), 0.0))

    def isf(self, q):
        return -np.log(np.asarray(q, float))


class Gamma(JitterLaw):
    """J ~ Gamma(shape 1/cv², scale cv²)."""

    name = "gamma"

    def __init__(self, cv: float):
        super().__init__(cv)
        self.shape = 1.0 / self.cv ** 2

    def sample(self, xp, rng, shape):
        return rng.standard_gamma(self.shape, shape) / self.shape

    def cdf(self, x):
        return special.gammainc(self.shape, self.shape * np.maximum(np.asarray(x, float), 0.0))

    def sf(self, x):
        return special.gammaincc(self.shape, self.shape * np.maximum(np.asarray(x, float), 0.0))

    def isf(self, q):
        return special.gammainccinv(self.shape, np.asarray(q, float)) / self.shape


class Lognormal(JitterLaw):
    """J = exp(N(-σ²/2, σ²)), σ² = ln(1 + cv²)."""

    name = "lognormal"

    def __init__(self, cv: float):
        super().__init__(cv)
        sigma2 = float(np.log1p(self.cv ** 2))
        self.sigma, self.mu = float(np.sqrt(sigma2)), -sigma2 / 2

    def sample(self, xp, rng, shape):
        sigma2 = float(np.log1p(self.cv ** 2))
        return xp.exp(rng.standard_normal(shape) * np.sqrt(sigma2) - sigma2 / 2)

    def cdf(self, x):
        with np.errstate(divide="ignore"):
            return special.ndtr((np.log(np.maximum(np.asarray(x, float), 0.0)) - self.mu)
                                / self.sigma)

    def sf(self, x):
        with np.errstate(divide="ignore"):
            return special.ndtr(-(np.log(np.maximum(np.asarray(x, float), 0.0)) - self.mu)
                                / self.sigma)

    def isf(self, q):
        return np.exp(self.mu - self.sigma * special.ndtri(np.asarray(q, float)))


JITTERS = {law.name: law for law in (Deterministic, Exponential, Gamma, Lognormal)}

# How a law with a cv is written in Python and on the command line.
PYTHON_FORM, CLI_FORM = "('{name}', 0.3)", "{name}:0.3"


def parse_jitter(jitter, form: str = PYTHON_FORM) -> tuple[str, float]:
    """(name, cv) from ``"name"`` or ``(name, cv)``, checked; messages show laws written in
    ``form`` (:data:`PYTHON_FORM` or :data:`CLI_FORM`).

    Examples
    --------
    >>> parse_jitter(("lognormal", 0.3)), parse_jitter("exponential")
    (('lognormal', 0.3), ('exponential', 1.0))
    >>> parse_jitter("gamma", form=CLI_FORM)
    Traceback (most recent call last):
    ...
    ValueError: jitter 'gamma' needs a coefficient of variation: gamma:0.3
    """
    if isinstance(jitter, str):
        name, cv = jitter, None
    elif isinstance(jitter, (tuple, list)) and len(jitter) == 2 and isinstance(jitter[0], str):
        name, cv = jitter
    else:
        raise ValueError(f"jitter must be {', '.join(_examples(form))}, got {jitter!r}")
    name = name.lower()
    if name not in JITTERS:
        raise ValueError(f"jitter {name!r} is unknown; use {', '.join(_examples(form))}")
    return name, JITTERS[name].checked_cv(cv, form)


def _examples(form: str) -> list:
    bare = repr if form == PYTHON_FORM else str
    return [bare(law.name) if law.fixed_cv is not None else form.format(name=law.name)
            for law in JITTERS.values()]


def jitter_law(name: str, cv: float) -> JitterLaw:
    """The law ``name`` with its cv bound in.

    Examples
    --------
    >>> round(float(jitter_law("gamma", 0.5).isf(0.5)), 4)          # the median
    0.918
    """
    return JITTERS[name](cv)
