"""Traffic that changes with time: a request rate per time window.

:class:`Traffic` is the description of a day (or an event) of arrivals: window edges in
seconds and a rate in requests per second on each, held constant over a window (``"step"``,
what a rate read from counters over scrape intervals is) or interpolated linearly between
the edges (``"linear"``, a ramp). It is read from a CSV file of (time, rate), from Prometheus
samples of Triton's ``nv_inference_request_success`` counter, or built
(:meth:`Traffic.constant`, :meth:`Traffic.diurnal`, :meth:`Traffic.flash_sale`).

The simulator draws arrivals from it (:meth:`Traffic.sample`): a non-homogeneous Poisson
process by thinning (Lewis and Shedler, "Simulation of nonhomogeneous Poisson processes by
thinning", Naval Research Logistics Quarterly 26(3), 1979), or, with ``scv`` other than 1,
a renewal process of that squared coefficient of variation run in the traffic's own clock
Lambda(t) = integral of the rate (the inversion method; Gerhardt and Nelson, "Transforming
renewal processes for simulation of nonstationary arrival processes", INFORMS Journal on
Computing 21(4), 2009).

Examples
--------
>>> import numpy as np
>>> day = Traffic.flash_sale(base=3000, peak=10_000, ramp=120, hold=3600, before=600,
...                          after=600)
>>> day.duration, day.low, day.peak
(5040.0, 3000.0, 10000.0)
>>> float(day.rate_at(660.0))             # half-way up the ramp
6500.0
>>> t = Traffic.constant(500.0, 10.0).sample(np.random.default_rng(1))
>>> 4800 < t.size < 5200 and bool(np.all(np.diff(t) >= 0))
True
"""

from __future__ import annotations

import csv
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .checks import LEAST_RATE, MOST_RATE, MOST_RENEWAL_SCV, positive_rate, real_array, shown

__all__ = ["Traffic", "counter_rates"]

# A day of traffic is 86,400 s; a time axis this long is almost surely in milliseconds.
LONGEST_TRAFFIC = 400 * 86_400.0
# Arrivals drawn per block (bounds the memory of one draw).
BLOCK = 4_000_000


@dataclass(frozen=True, eq=False)
class Traffic:
    """A request rate over time.

    Parameters
    ----------
    times : sequence of float
        Window edges in seconds, increasing: n + 1 edges make n windows.
    rates : sequence of float
        Requests per second, >= 0: one per window (``shape="step"``) or one per edge
        (``shape="linear"``, interpolated between the edges).
    shape : {"step", "linear"}
    scv : float
        Squared coefficient of variation of the interarrival times in the traffic's own clock:
        1 is a (non-homogeneous) Poisson process; other values a renewal process of gamma
        gaps run through the rate (0 evenly spaced, > 1 bursty).
    source : str
        Where the traffic came from (a file, a builder), for messages.

    Examples
    --------
    >>> tr = Traffic([0, 60, 120], [100.0, 300.0])
    >>> tr.windows, float(tr.expected()), float(tr.mean_rate())
    (2, 24000.0, 200.0)
    >>> Traffic([0, 60, 30], [1.0, 2.0])
    Traceback (most recent call last):
    ...
    ValueError: Traffic.times must increase: 30 s (edge 2) follows 60 s (edge 1)
    """

    times: np.ndarray = field(repr=False)
    rates: np.ndarray = field(repr=False)
    shape: str = "step"
    scv: float = 1.0
    source: str = ""

    def __post_init__(self):
        if self.shape not in ("step", "linear"):
            raise ValueError(f"Traffic.shape={shown(self.shape)}: use 'step' (a rate per "
                             "window) or 'linear' (rates at the edges, interpolated)")
        t = real_array(self.times, "Traffic.times", "a sequence of window edges in seconds")
        r = real_array(self.rates, "Traffic.rates", "a sequence of rates in requests per second")
        t, r = t.ravel().copy(), r.ravel().copy()
        if t.size < 2:
            raise ValueError("Traffic.times needs at least 2 edges (one window); the traffic "
                             "is empty")
        if not np.all(np.isfinite(t)):
            raise ValueError(f"Traffic.times has a non-finite value at edge "
                             f"{int(np.argmax(~np.isfinite(t)))}")
        bad = np.flatnonzero(np.diff(t) <= 0)
        if bad.size:
            i = int(bad[0]) + 1
            raise ValueError(f"Traffic.times must increase: {t[i]:g} s (edge {i}) follows "
                             f"{t[i - 1]:g} s (edge {i - 1})")
        if t[-1] - t[0] > LONGEST_TRAFFIC:
            raise ValueError(f"Traffic.times spans {t[-1] - t[0]:g} s, more than 400 days: "
                             "qmodel takes seconds; divide milliseconds by 1000")
        want = t.size - 1 if self.shape == "step" else t.size
        if r.size != want:
            raise ValueError(f"Traffic.rates has {r.size} values for {t.size} edges: a "
                             f"{self.shape!r} traffic takes {want} (one per "
                             f"{'window' if self.shape == 'step' else 'edge'})")
        if not np.all(np.isfinite(r)):
            i = int(np.argmax(~np.isfinite(r)))
            raise ValueError(f"Traffic.rates[{i}]={r[i]!r} is not finite; give requests per "
                             "second")
        if np.any(r < 0):
            i = int(np.argmax(r < 0))
            raise ValueError(f"Traffic.rates[{i}]={r[i]:g} is negative; a rate is >= 0 "
                             "requests per second")
        if r.max() > MOST_RATE:
            i = int(np.argmax(r))
            raise ValueError(f"Traffic.rates[{i}]={r[i]:g} requests per second is above "
                             f"{MOST_RATE:g}, more than any cluster serves: give the rate in "
                             "requests per second")
        if r.max() < LEAST_RATE:
            raise ValueError(f"Traffic.rates are all below {LEAST_RATE:g} requests per second "
                             "(one request every 17 minutes): give the rate in requests per "
                             "second")
        scv = self.scv
        if isinstance(scv, (bool, np.bool_)) or not isinstance(scv, numbers.Real) \
                or not 0 <= scv <= MOST_RENEWAL_SCV:
            raise ValueError(f"Traffic.scv={shown(scv)} must be a number in [0, "
                             f"{MOST_RENEWAL_SCV:g}] (1 for Poisson arrivals)")
        t.flags.writeable = False
        r.flags.writeable = False
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "rates", r)
        object.__setattr__(self, "scv", float(scv) + 0.0)
        # cumulative expected arrivals at the edges
        starts, ends = self._edge_rates()
        cum = np.concatenate([[0.0], np.cumsum((starts + ends) / 2 * np.diff(t))])
        cum.flags.writeable = False
        object.__setattr__(self, "_cum", cum)

    # --- builders ------------------------------------------------------------------------------
    @classmethod
    def constant(cls, rate: float, duration: float, start: float = 0.0) -> "Traffic":
        """``rate`` requests per second for ``duration`` seconds.

        >>> Traffic.constant(200.0, 60.0).peak
        200.0
        """
        rate = positive_rate(rate, "Traffic.constant rate")
        duration = _seconds(duration, "Traffic.constant duration")
        return cls([start, start + duration], [rate], source=f"constant {rate:g} req/s")

    @classmethod
    def flash_sale(cls, base: float, peak: float, ramp: float, hold: float,
                   before: float = 600.0, after: float = 600.0) -> "Traffic":
        """A flash sale: ``base`` for ``before`` seconds, a linear ramp to ``peak`` over
        ``ramp`` seconds, ``peak`` for ``hold`` seconds, a ramp back down over ``ramp`` and
        ``base`` for ``after`` seconds.

        >>> sale = Traffic.flash_sale(3000, 10_000, ramp=120, hold=7200)
        >>> sale.times.tolist()
        [0.0, 600.0, 720.0, 7920.0, 8040.0, 8640.0]
        """
        base = positive_rate(base, "flash_sale base")
        peak = positive_rate(peak, "flash_sale peak")
        if base > peak:
            raise ValueError(f"flash_sale base={base:g} exceeds peak={peak:g}: a sale rises "
                             "from its base to its peak")
        ramp = _seconds(ramp, "flash_sale ramp", zero=True)
        hold = _seconds(hold, "flash_sale hold")
        before = _seconds(before, "flash_sale before", zero=True)
        after = _seconds(after, "flash_sale after", zero=True)
        steps = [before, ramp, hold, ramp, after]
        levels = [base, base, peak, peak, base, base]
        times, rates = [0.0], [base]
        for length, level in zip(steps, levels[1:]):
            if length > 0:
                times.append(times[-1] + length)
                rates.append(level)
            elif level != rates[-1]:        # no ramp: a step, as two edges a moment apart
                times.append(times[-1] + 1e-6)
                rates.append(level)
        return cls(times, rates, shape="linear",
                   source=f"flash sale {base:g} -> {peak:g} req/s")

    @classmethod
    def diurnal(cls, low: float, peak: float, period: float = 86_400.0,
                peak_at: float = 14 * 3600.0, days: float = 1.0,
                step: float = 900.0) -> "Traffic":
        """A daily cycle: a sinusoid between ``low`` and ``peak`` with its top at
        ``peak_at`` seconds into each ``period``, over ``days`` periods, sampled every
        ``step`` seconds and interpolated linearly.

        >>> day = Traffic.diurnal(1000, 10_000)
        >>> day.low, day.peak, float(day.rate_at(2 * 3600.0))
        (1000.0, 10000.0, 1000.0)
        """
        low = positive_rate(low, "diurnal low")
        peak = positive_rate(peak, "diurnal peak")
        if low > peak:
            raise ValueError(f"diurnal low={low:g} exceeds peak={peak:g}")
        period = _seconds(period, "diurnal period")
        step = _seconds(step, "diurnal step")
        if isinstance(days, bool) or not isinstance(days, numbers.Real) or not days > 0:
            raise ValueError(f"diurnal days={shown(days)} must be a positive number")
        n = max(2, int(math.ceil(days * period / step)))
        times = np.linspace(0.0, days * period, n + 1)
        phase = 2 * np.pi * (times - peak_at) / period
        rates = low + (peak - low) * (1 + np.cos(phase)) / 2
        return cls(times, rates, shape="linear", source=f"diurnal {low:g}-{peak:g} req/s")

    @classmethod
    def from_csv(cls, path, shape: str = "step") -> "Traffic":
        """Rows of (time in seconds, rate in requests per second), a header row optional.

        With ``shape="step"`` each row's rate holds until the next row's time; the last
        row's window lasts as long as the one before it. With ``"linear"`` the rates are at
        the rows' times. A header whose time column ends in ``_ms`` (``time_ms``) gives times
        in milliseconds. Errors name the file and the line.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ValueError(f"cannot read the traffic file {path}: {err}") from None
        times, rates = [], []
        scale = 1.0
        for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 2:
                raise ValueError(f"{path}:{line_no}: expected two columns, time (s) and rate "
                                 f"(req/s); got {','.join(row)!r}")
            try:
                t, r = float(row[0]) * scale, float(row[1])
            except ValueError:
                if not times:           # a header
                    scale = 1e-3 if row[0].strip().lower().endswith("_ms") else 1.0
                    continue
                raise ValueError(f"{path}:{line_no}: {','.join(row)!r} is not two numbers "
                                 "(time in seconds, rate in requests per second)") from None
            if times and not t > times[-1]:
                raise ValueError(f"{path}:{line_no}: time {t:g} s does not follow "
                                 f"{times[-1]:g} s; rows must be in increasing time")
            if not math.isfinite(t):
                raise ValueError(f"{path}:{line_no}: time {row[0].strip()} is not a finite "
                                 "number of seconds")
            if not (math.isfinite(r) and r >= 0):
                raise ValueError(f"{path}:{line_no}: rate {row[1].strip()} must be a number "
                                 ">= 0 of requests per second")
            times.append(t)
            rates.append(r)
        if len(times) < 2:
            raise ValueError(f"{path}: needs at least two rows of (time, rate); it has "
                             f"{len(times)}")
        if shape == "step":
            times.append(times[-1] + (times[-1] - times[-2]))
            return cls(times, rates, "step", source=str(path))
        return cls(times, rates, shape, source=str(path))

    @classmethod
    def from_counter(cls, times, counts, source: str = "counter") -> "Traffic":
        """Step traffic from samples of a cumulative request counter (such as Triton's
        ``nv_inference_request_success``): the rate of each window is the counter's increase
        over its length, a drop counted as a restart from zero (Prometheus' rule).

        >>> Traffic.from_counter([0, 15, 30, 45], [0, 1500, 4500, 300]).rates.tolist()
        [100.0, 200.0, 20.0]
        """
        return cls(*counter_rates(times, counts, source), source=source)

    @classmethod
    def from_prometheus(cls, data, model: str | None = None,
                        metric: str = "nv_inference_request_success") -> "Traffic":
        """Step traffic from a Prometheus range query of a request counter.

        ``data``: the JSON answer of ``/api/v1/query_range?query=nv_inference_request_success
        &start=...&end=...&step=15s`` (a dict, or a path to a file holding it). Every series of
        ``metric`` (one per server, model and version; only ``model``'s where given) becomes
        a rate per step, and the rates are summed: the traffic of all servers together.
        """
        import json

        where = "the Prometheus answer"
        if isinstance(data, (str, Path)):
            where = str(data)
            try:
                data = json.loads(Path(data).read_text(encoding="utf-8"))
            except OSError as err:
                raise ValueError(f"cannot read {where}: {err}") from None
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}:{err.lineno}: not JSON ({err.msg}); expected the "
                                 "answer of Prometheus' /api/v1/query_range") from None
        try:
            result = data["data"]["result"]
            kind = data["data"].get("resultType", "matrix")
        except (TypeError, KeyError, AttributeError):
            raise ValueError(f"{where}: not a Prometheus query answer (no data.result); "
                             "expected the JSON of /api/v1/query_range") from None
        if kind != "matrix":
            raise ValueError(f"{where}: resultType {kind!r}; a range query (matrix) is needed, "
                             "/api/v1/query_range, not /api/v1/query")
        if not isinstance(result, list):
            raise ValueError(f"{where}: data.result must be a list of series, got "
                             f"{type(result).__name__}")
        grids = []
        for i, series in enumerate(result):
            labels = series.get("metric") if isinstance(series, dict) else None
            labels = labels if isinstance(labels, dict) else {}
            if labels.get("__name__", metric) != metric or (
                    model is not None and labels.get("model") != model):
                continue
            values = series.get("values") if isinstance(series, dict) else None
            try:
                ts = np.array([float(v[0]) for v in values])
                cs = np.array([float(v[1]) for v in values])
            except (TypeError, ValueError, IndexError):
                raise ValueError(f"{where}: series {i} ({labels or 'no labels'}): values must "
                                 "be [timestamp, \"counter\"] pairs") from None
            if ts.size and ts.max() > 1e11:
                raise ValueError(f"{where}: series {i}: timestamps such as {ts.max():.0f} look "
                                 "like milliseconds; Prometheus' API gives seconds")
            if ts.size >= 2:
                grids.append((i, ts, cs))
        if not grids:
            raise ValueError(f"{where}: no series of {metric}"
                             + (f" for model {model!r}" if model else "")
                             + " with at least 2 samples")
        # servers come and go: the windows are those between any two consecutive sample
        # times; each series adds its rate where it has samples on both sides
        edges = np.unique(np.concatenate([ts for _, ts, _ in grids]))
        total = np.zeros(edges.size - 1)
        mids = (edges[:-1] + edges[1:]) / 2
        for i, ts, cs in grids:
            _, rates = counter_rates(ts, cs, f"{where} series {i}")
            inside = (mids > ts[0]) & (mids < ts[-1])
            j = np.searchsorted(ts, mids[inside]) - 1
            total[inside] += rates[j]
        return cls(edges - edges[0], total, "step", source=where)

    # --- what it holds -------------------------------------------------------------------------
    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def windows(self) -> int:
        """How many windows (edges less one)."""
        return self.times.size - 1

    @property
    def peak(self) -> float:
        """The highest rate anywhere (requests per second)."""
        return float(self.rates.max())

    @property
    def low(self) -> float:
        """The lowest rate anywhere (requests per second)."""
        return float(self.rates.min())

    @property
    def rate(self) -> float:
        """The mean rate over the whole traffic (what a stationary model would take)."""
        return self.mean_rate()

    def _edge_rates(self):
        """The rate at the start and at the end of each window."""
        r = self.rates
        return (r, r) if self.shape == "step" else (r[:-1], r[1:])

    def rate_at(self, t):
        """The rate (requests per second) at times ``t``; 0 outside the traffic."""
        t = np.asarray(t, dtype=float)
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.windows - 1)
        a, b = self._edge_rates()
        t0, t1 = self.times[i], self.times[i + 1]
        frac = np.clip((t - t0) / (t1 - t0), 0.0, 1.0)
        out = a[i] + (b[i] - a[i]) * frac
        return np.where((t >= self.start) & (t <= self.end), out, 0.0)

    def cumulative(self, t):
        """Expected arrivals from the start up to times ``t`` (Lambda(t))."""
        t = np.clip(np.asarray(t, dtype=float), self.start, self.end)
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.windows - 1)
        a, b = self._edge_rates()
        t0, t1 = self.times[i], self.times[i + 1]
        dt = t - t0
        slope = (b[i] - a[i]) / (t1 - t0)
        return self._cum[i] + a[i] * dt + slope * dt * dt / 2

    def inverse_cumulative(self, u):
        """The times at which ``u`` arrivals are expected (the inverse of
        :meth:`cumulative`), within the traffic."""
        u = np.clip(np.asarray(u, dtype=float), 0.0, self._cum[-1])
        i = np.clip(np.searchsorted(self._cum, u, side="right") - 1, 0, self.windows - 1)
        a, b = self._edge_rates()
        t0, t1 = self.times[i], self.times[i + 1]
        slope = (b[i] - a[i]) / (t1 - t0)
        rem = u - self._cum[i]
        # a dt + slope dt^2 / 2 = rem, taken in the form stable for slope -> 0
        with np.errstate(divide="ignore", invalid="ignore"):
            disc = np.sqrt(np.maximum(a[i] * a[i] + 2 * slope * rem, 0.0))
            dt = np.where(a[i] + disc > 0, 2 * rem / (a[i] + disc), 0.0)
        return np.minimum(t0 + dt, t1)

    def expected(self, start: float | None = None, end: float | None = None) -> float:
        """Expected arrivals in [start, end] (default: the whole traffic)."""
        start = self.start if start is None else start
        end = self.end if end is None else end
        return float(self.cumulative(end) - self.cumulative(start))

    def mean_rate(self, start: float | None = None, end: float | None = None) -> float:
        """The mean rate over [start, end] (default: the whole traffic)."""
        start = self.start if start is None else start
        end = self.end if end is None else end
        return self.expected(start, end) / (end - start)

    def scaled(self, factor: float) -> "Traffic":
        """Every rate times ``factor`` (headroom: 1.2 plans for 20% more)."""
        factor = positive_rate(factor, "Traffic.scaled factor")
        return Traffic(self.times, self.rates * factor, self.shape, self.scv,
                       f"{self.source} x {factor:g}")

    def between(self, start: float, end: float) -> "Traffic":
        """The part of the traffic in [start, end], on the same clock.

        >>> Traffic([0, 60, 120], [100.0, 300.0]).between(30, 90).rates.tolist()
        [100.0, 300.0]
        """
        if not (self.start <= start < end <= self.end):
            raise ValueError(f"Traffic.between({start:g}, {end:g}): the window must lie in "
                             f"[{self.start:g}, {self.end:g}] s and end after it starts")
        inner = self.times[(self.times > start) & (self.times < end)]
        edges = np.concatenate([[start], inner, [end]])
        if self.shape == "step":
            rates = self.rate_at((edges[:-1] + edges[1:]) / 2)
        else:
            rates = self.rate_at(edges)
        return Traffic(edges, rates, self.shape, self.scv, self.source)

    def with_scv(self, scv: float) -> "Traffic":
        """The same rates with renewal arrivals of this scv (1: Poisson)."""
        return Traffic(self.times, self.rates, self.shape, scv, self.source)

    def describe(self) -> str:
        return (f"Traffic({self.source or self.shape}: {self.windows} window(s) over "
                f"{self.duration:g} s, {self.low:g}-{self.peak:g} req/s, mean "
                f"{self.mean_rate():.6g} req/s"
                + ("" if self.scv == 1.0 else f", renewal scv {self.scv:g}") + ")")

    def __repr__(self) -> str:
        return self.describe()

    # --- arrivals ------------------------------------------------------------------------------
    def sample(self, rng, start: float | None = None, end: float | None = None) -> np.ndarray:
        """Arrival times (seconds, sorted) in [start, end] (default: the whole traffic)."""
        parts = list(self.blocks(rng, start, end))
        return np.concatenate(parts) if parts else np.zeros(0)

    def blocks(self, rng, start: float | None = None, end: float | None = None,
               size: int = BLOCK):
        """The arrivals of :meth:`sample` as consecutive sorted blocks of about ``size``
        arrivals each (for runs too long to hold at once)."""
        start = self.start if start is None else max(start, self.start)
        end = self.end if end is None else min(end, self.end)
        if self.scv == 1.0:
            yield from self._poisson_blocks(rng, start, end, size)
        else:
            yield from self._renewal_blocks(rng, start, end, size)

    def _poisson_blocks(self, rng, start, end, size):
        """Thinning: a Poisson process at each window's highest rate (drawn in order by
        inverting its cumulative), each point kept with probability rate(t) / that
        highest rate (a ramp's windows only: elsewhere the rate is the highest)."""
        a, b = self._edge_rates()
        top = np.maximum(a, b)
        edges = self.times
        length = np.diff(edges)
        cum_top = np.concatenate([[0.0], np.cumsum(top * length)])
        ramps = bool(np.any(a != b))
        u0 = float(np.interp(start, edges, cum_top))
        u1 = float(np.interp(end, edges, cum_top))
        u = u0
        while u < u1:
            pts = u + np.cumsum(rng.standard_exponential(_draws(u1 - u, size)))
            last = float(pts[-1])
            pts = pts[pts <= u1]
            i = np.clip(np.searchsorted(cum_top, pts, side="right") - 1, 0, self.windows - 1)
            offset = (pts - cum_top[i]) / top[i]          # top > 0 wherever a point falls
            t = edges[i] + offset
            if ramps:
                rate = a[i] + (b[i] - a[i]) * (offset / length[i])
                keep = rng.random(t.size) * top[i] <= rate
                t = t[keep]
            t = t[(t >= start) & (t <= end)]
            if t.size:
                yield t
            u = last

    def _renewal_blocks(self, rng, start, end, size):
        """Inversion: a renewal process of unit rate and this scv in the traffic's clock
        Lambda(t), mapped back to time."""
        u0, u1 = float(self.cumulative(start)), float(self.cumulative(end))
        # an equilibrium first gap would need the forward recurrence law; a uniform phase
        # of one mean gap keeps streams distinct, as the stationary simulator does
        u = u0 - rng.random()
        while u < u1:
            count = _draws(u1 - u, size)
            if self.scv == 0.0:
                gaps = np.ones(count)
            else:
                k = 1.0 / self.scv
                gaps = rng.standard_gamma(k, count) / k
            pts = u + np.cumsum(gaps)
            last = float(pts[-1])
            pts = pts[(pts >= u0) & (pts <= u1)]
            if pts.size:
                yield self.inverse_cumulative(pts)
            u = last


def _draws(expected: float, most: int) -> int:
    """Gaps to draw for ``expected`` more unit-rate points: a few standard deviations more,
    so that one draw usually covers them, at most ``most``."""
    return int(min(most, expected + 6 * math.sqrt(expected) + 16))


def counter_rates(times, counts, source: str = "counter"):
    """(edges, rates) from samples of a cumulative counter: per window the increase over its
    length; a drop is a counter restart, whose increase is the new value (as Prometheus'
    ``rate()`` counts it).

    >>> counter_rates([0, 10, 20], [5, 25, 10])[1].tolist()
    [2.0, 1.0]
    """
    t = real_array(times, f"{source} times", "a sequence of sample times in seconds").ravel()
    c = real_array(counts, f"{source} counts", "a sequence of counter values").ravel()
    if t.size != c.size:
        raise ValueError(f"{source}: {t.size} sample times for {c.size} counter values")
    if t.size < 2:
        raise ValueError(f"{source}: needs at least 2 samples of the counter")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(c))):
        raise ValueError(f"{source}: a sample time or counter value is not finite")
    bad = np.flatnonzero(np.diff(t) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise ValueError(f"{source}: sample {i} at {t[i]:g} s does not follow {t[i - 1]:g} s; "
                         "samples must be in increasing time")
    if np.any(c < 0):
        raise ValueError(f"{source}: a counter value is negative")
    inc = np.diff(c)
    inc = np.where(inc < 0, c[1:], inc)          # a restart counts from zero
    return t, inc / np.diff(t)


def _seconds(value, name: str, zero: bool = False) -> float:
    """A duration in seconds (of traffic: minutes to days), or a ValueError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be a number of seconds "
                         f"{'>= 0' if zero else '> 0'}, got {shown(value)}")
    if value > LONGEST_TRAFFIC:
        raise ValueError(f"{name}={value:g} s is more than 400 days: qmodel takes seconds; "
                         "divide milliseconds by 1000")
    return float(value)
