"""Fit the ring alpha-beta model to measured collective times.

The model (``P`` ranks, ``S`` bytes as nccl-tests counts them, ``k(op, P)``
ring latency steps, ``f(op, P)`` the bus-bandwidth factor of
:func:`commcost.comm.collectives.bus_bandwidth_factor`)::

    T(S) = k * alpha_i + f * S / B_i        for the regime i whose size range holds S

with ``k`` = 2(P-1) for all-reduce, P-1 for reduce-scatter, all-gather,
all-to-all, broadcast and reduce (pipelined ring), 1 for send/recv. ``alpha_i``
is the latency of one ring step and ``B_i`` the per-rank bus bandwidth
(nccl-tests' busbw) in regime ``i``.

Why regimes: NCCL switches protocol (LL, LL128, Simple) and channel count with
the message size, so one straight line ``T = a + S/B`` misses real curves by
15-28% at the median (``benchmarks/fit_accuracy.py``). The sizes are split into
at most ``max_regimes`` contiguous ranges (each with at least three sizes), each
range gets its own ``(alpha_i, B_i)``; the split and the number of regimes are
chosen by least squares with a BIC penalty ``n ln(SSR/n) + (3K - 1) ln n``, so
a curve that *is* one line gets one regime. Regime edges sit at the geometric
mean of the neighbouring measured sizes.

Readable summary: ``alpha_s`` is the first (small-message) regime's per-step
latency, ``bandwidth_bytes_per_s`` the last (large-message) regime's bus
bandwidth; together they are the :class:`~commcost.comm.topology.Link` the other
commands use, and ``crossover_bytes = k alpha B / f`` (``P alpha B`` for
all-reduce) is where their latency and bandwidth terms are equal.

Weights: each point's residual is divided by its measured time (least squares
on relative error), so 10 us and 60 ms measurements count alike. Each regime's
fit is a 2x2 weighted least-squares solve with ``alpha >= 0`` and ``B > 0``.
Goodness of fit ``r2`` is computed on ``ln T`` (the curve spans four decades,
where R^2 on raw times would be dominated by the largest size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Sequence

from commcost.comm.collectives import Algorithm, Collective, bus_bandwidth_factor, ring_latency_steps
from commcost.core.errors import InputError
from commcost.comm.topology import Link
from commcost.core.units import format_bytes
from commcost.core.limits import MAX_REGIMES
from commcost.core.validation import require_at_most, require_count, require_finite_positive
from commcost.comm.algorithms import collective_cost
from commcost.comm.band import collective_band
from commcost.comm.topology import place
from commcost.comm.systems import system_group

__all__ = [
    "Sample", "Regime", "FitPoint", "AlphaBetaFit", "Comparison",
    "ring_latency_steps", "fit_alpha_beta", "compare", "MIN_REGIME_SIZES",
    "PresetScoreRow", "PresetScore", "score_against_preset", "MID_SIZE_RANGE_BYTES",
]

MIN_REGIME_SIZES = 3
"""Fewest distinct sizes a regime may hold when there is more than one regime."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One measured point."""

    size_bytes: float
    """Message size S as nccl-tests counts it, bytes."""
    time_s: float
    """Measured time of one collective, seconds."""

    def __post_init__(self) -> None:
        require_finite_positive("size_bytes", self.size_bytes)
        require_finite_positive("time_s", self.time_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Regime:
    """One size range of the model and its alpha-beta parameters."""

    min_size_bytes: float
    """Smallest size of the range, bytes (0 for the first regime)."""
    max_size_bytes: float
    """Size where the next regime starts, bytes (``inf`` for the last regime)."""
    alpha_s: float
    """Per-ring-step latency in this range, seconds."""
    bandwidth_bytes_per_s: float
    """Per-rank bus bandwidth in this range, bytes/s."""

    def __post_init__(self) -> None:
        require_finite_positive("alpha_s", self.alpha_s, allow_zero=True)
        require_finite_positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        require_finite_positive("min_size_bytes", self.min_size_bytes, allow_zero=True)
        if self.max_size_bytes != math.inf:  # inf: the last regime's open end
            require_finite_positive("max_size_bytes", self.max_size_bytes)
        if not 0 <= self.min_size_bytes < self.max_size_bytes:
            raise InputError(f"regime size range must satisfy 0 <= min < max, got "
                             f"[{self.min_size_bytes:g}, {self.max_size_bytes:g})")

    def describe(self) -> str:
        """``"1 kB - 2.10 MB"`` (``"and up"`` for the last)."""
        hi = "and up" if math.isinf(self.max_size_bytes) else f"- {format_bytes(self.max_size_bytes)}"
        return f"{format_bytes(self.min_size_bytes)} {hi}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FitPoint:
    """A measured point against the model."""

    size_bytes: float
    """Message size, bytes."""
    measured_s: float
    """Measured time, seconds."""
    predicted_s: float
    """Model time, seconds."""

    @property
    def rel_error(self) -> float:
        """``(predicted - measured) / measured``."""
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Model against measurements (``validate``)."""

    points: tuple[FitPoint, ...]
    """Each measured size with its prediction."""

    @property
    def median_abs_rel_error(self) -> float:
        """Median of ``|rel_error|``."""
        return median(abs(p.rel_error) for p in self.points)

    @property
    def max_abs_rel_error(self) -> float:
        """Largest ``|rel_error|``."""
        return max(abs(p.rel_error) for p in self.points)

    @property
    def r2(self) -> float:
        """``1 - sum (ln T_pred - ln T)^2 / sum (ln T - mean ln T)^2``; 1 when every T is equal and matched."""
        logs = [math.log(p.measured_s) for p in self.points]
        mean = sum(logs) / len(logs)
        ss_tot = sum((v - mean) ** 2 for v in logs)
        ss_res = sum((math.log(p.predicted_s) - v) ** 2 for p, v in zip(self.points, logs))
        if ss_tot == 0:
            return 1.0 if ss_res == 0 else 0.0
        return 1.0 - ss_res / ss_tot


@dataclass(frozen=True, slots=True, kw_only=True)
class AlphaBetaFit:
    """A fitted model: regimes, with its headline alpha and B."""

    op: Collective
    """The collective fitted."""
    algorithm: Algorithm
    """The algorithm whose form was fitted (ring)."""
    gpus: int
    """Ranks P of the measurement."""
    regimes: tuple[Regime, ...]
    """Size ranges in increasing order; together they cover all sizes."""

    def __post_init__(self) -> None:
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 2:
            raise InputError(f"gpus must be an integer >= 2 to fit a collective, got {self.gpus!r}")
        if not self.regimes:
            raise InputError("a fit needs at least one regime")
        if self.regimes[0].min_size_bytes != 0 or not math.isinf(self.regimes[-1].max_size_bytes):
            raise InputError("regimes must start at 0 bytes and end at infinity")
        for a, b in zip(self.regimes, self.regimes[1:]):
            if a.max_size_bytes != b.min_size_bytes:
                raise InputError(f"regimes must be contiguous: {a.max_size_bytes:g} != {b.min_size_bytes:g}")

    @property
    def alpha_s(self) -> float:
        """Per-step latency of the first (small-message) regime, seconds."""
        return self.regimes[0].alpha_s

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Bus bandwidth of the last (large-message) regime, bytes/s."""
        return self.regimes[-1].bandwidth_bytes_per_s

    @property
    def link(self) -> Link:
        """The calibrated link: ``Link(bandwidth_bytes_per_s=B_last, latency_s=alpha_first)``."""
        return Link(bandwidth_bytes_per_s=self.bandwidth_bytes_per_s, latency_s=self.alpha_s)

    @property
    def crossover_bytes(self) -> float:
        """``S* = k alpha B / f`` with the headline alpha and B (``P alpha B`` for all-reduce)."""
        k = ring_latency_steps(self.op, self.gpus)
        f = bus_bandwidth_factor(self.op, self.gpus)
        return k * self.alpha_s * self.bandwidth_bytes_per_s / f

    def regime_for(self, size_bytes: float) -> Regime:
        """The regime whose range holds ``size_bytes``."""
        for regime in self.regimes:
            if size_bytes < regime.max_size_bytes:
                return regime
        return self.regimes[-1]

    def predict_s(self, size_bytes: float) -> float:
        """``T(S) = k alpha_i + f S / B_i`` for the regime i holding S, seconds."""
        regime = self.regime_for(size_bytes)
        k = ring_latency_steps(self.op, self.gpus)
        f = bus_bandwidth_factor(self.op, self.gpus)
        return k * regime.alpha_s + f * size_bytes / regime.bandwidth_bytes_per_s


def compare(model: AlphaBetaFit, samples: Sequence[Sample]) -> Comparison:
    """Each sample against ``model.predict_s``, sorted by size."""
    if not samples:
        raise InputError("no measured points to compare")
    ordered = sorted(samples, key=lambda s: s.size_bytes)
    return Comparison(points=tuple(
        FitPoint(size_bytes=s.size_bytes, measured_s=s.time_s, predicted_s=model.predict_s(s.size_bytes))
        for s in ordered))


def _wls(points: Sequence[Sample], k: int, f: float) -> tuple[float, float, float] | None:
    """Minimise ``sum ((k a + f S c - T) / T)^2`` over ``a >= 0``, ``c = 1/B > 0``: ``(a, c, cost)``.

    Normal equations of the 2-column design ``[k/T, f S/T]`` against a target of ones.
    Returns None when no positive bandwidth fits (times that do not grow with size).
    """
    sxx = sxy = syy = sx = sy = 0.0
    for p in points:
        x, y = k / p.time_s, f * p.size_bytes / p.time_s
        sxx += x * x
        sxy += x * y
        syy += y * y
        sx += x
        sy += y
    det = sxx * syy - sxy * sxy
    if det > 1e-12 * sxx * syy:
        a = (sx * syy - sy * sxy) / det
        c = (sy * sxx - sx * sxy) / det
    else:  # one distinct size: the latency term cannot be told apart from the bandwidth term
        return None
    if a < 0:
        a, c = 0.0, sy / syy
    if c <= 0:
        return None
    cost = sum(((k * a + f * p.size_bytes * c - p.time_s) / p.time_s) ** 2 for p in points)
    return a, c, cost


def _segment(points: list[Sample], k: int, f: float, n_regimes: int,
             min_sizes: int) -> tuple[float, list[tuple[int, int, float, float]]] | None:
    """Best split of the size-sorted ``points`` into ``n_regimes`` ranges (dynamic programming)."""
    # Points with equal sizes stay in one regime: cut only between distinct sizes.
    cuts = [0] + [i for i in range(1, len(points)) if points[i].size_bytes != points[i - 1].size_bytes] + [len(points)]
    m = len(cuts) - 1  # distinct sizes
    cache: dict[tuple[int, int], tuple[float, float, float] | None] = {}

    def seg(i: int, j: int) -> tuple[float, float, float] | None:
        if (i, j) not in cache:
            cache[(i, j)] = _wls(points[cuts[i]:cuts[j]], k, f)
        return cache[(i, j)]

    need = min_sizes if n_regimes > 1 else 2
    inf = math.inf
    best = [[inf] * (m + 1) for _ in range(n_regimes + 1)]
    back = [[-1] * (m + 1) for _ in range(n_regimes + 1)]
    best[0][0] = 0.0
    for r in range(1, n_regimes + 1):
        for j in range(need * r, m + 1):
            for i in range(need * (r - 1), j - need + 1):
                if best[r - 1][i] == inf:
                    continue
                fit = seg(i, j)
                if fit is not None and best[r - 1][i] + fit[2] < best[r][j]:
                    best[r][j] = best[r - 1][i] + fit[2]
                    back[r][j] = i
    if best[n_regimes][m] == inf:
        return None
    out: list[tuple[int, int, float, float]] = []
    j = m
    for r in range(n_regimes, 0, -1):
        i = back[r][j]
        a, c, _ = seg(i, j)  # type: ignore[misc]
        out.append((cuts[i], cuts[j], a, c))
        j = i
    out.reverse()
    return best[n_regimes][m], out


def fit_alpha_beta(samples: Sequence[Sample], *, op: Collective, gpus: int,
                   max_regimes: int = 3, algorithm: Algorithm = Algorithm.RING) -> AlphaBetaFit:
    """Fit the regime model of the module docstring to ``samples``.

    Exact on data that follows one line ``T = k a + f S / B`` (one regime is
    chosen and ``a``, ``B`` are recovered). Raises :class:`InputError` when
    fewer than two distinct sizes are given (two parameters cannot be fitted
    from one size) or when the times do not grow with size.
    """
    if algorithm is not Algorithm.RING:
        raise InputError(f"only the ring form is fitted so far, got {algorithm}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 2:
        raise InputError(f"gpus must be an integer >= 2 to fit a collective, got {gpus!r}")
    require_count("max_regimes", max_regimes)
    require_at_most("max_regimes", max_regimes, MAX_REGIMES)
    points = sorted(samples, key=lambda s: s.size_bytes)
    sizes = sorted({p.size_bytes for p in points})
    if len(sizes) < 2:
        shown = format_bytes(sizes[0]) if sizes else "none"
        raise InputError(f"need at least two distinct message sizes to fit alpha and beta, got {len(sizes)} "
                         f"({shown})")
    k, f = ring_latency_steps(op, gpus), bus_bandwidth_factor(op, gpus)
    n = len(points)
    chosen: tuple[float, list[tuple[int, int, float, float]]] | None = None
    best_score = math.inf
    for n_regimes in range(1, max_regimes + 1):
        result = _segment(points, k, f, n_regimes, MIN_REGIME_SIZES)
        if result is None:
            continue
        cost, segs = result
        score = n * math.log(max(cost / n, 1e-24)) + (3 * n_regimes - 1) * math.log(n)
        if score < best_score - 1e-9:
            best_score, chosen = score, result
    if chosen is None:
        raise InputError(f"{op} times do not grow with message size between {format_bytes(sizes[0])} and "
                         f"{format_bytes(sizes[-1])}: no positive bandwidth fits")
    segs = chosen[1]
    regimes = []
    for idx, (i, j, a, c) in enumerate(segs):
        lo = 0.0 if idx == 0 else math.sqrt(points[segs[idx - 1][1] - 1].size_bytes * points[i].size_bytes)
        hi = math.inf if idx == len(segs) - 1 else math.sqrt(points[j - 1].size_bytes * points[j].size_bytes)
        regimes.append(Regime(min_size_bytes=lo, max_size_bytes=hi, alpha_s=a, bandwidth_bytes_per_s=1.0 / c))
    return AlphaBetaFit(op=op, algorithm=algorithm, gpus=gpus, regimes=tuple(regimes))


MID_SIZE_RANGE_BYTES = (2 ** 20, 64 * 2 ** 20)
"""The 1-64 MiB range the health verdict reports on (where latency and bandwidth both matter)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetScoreRow:
    """One size of a measured log against a system preset's prediction."""

    message_bytes: float
    """Size S as nccl-tests counts it, bytes."""
    measured_s: float
    """The log's time, seconds."""
    predicted_s: float
    """The preset's prediction (:func:`commcost.comm.algorithms.collective_cost`, algorithm auto), seconds."""
    algorithm: str
    """The algorithm the preset's prediction ran."""
    in_band: bool
    """True when the measured time lies in the preset's measured band of its collective and scope
    (:func:`commcost.comm.band.collective_band`)."""

    @property
    def error(self) -> float:
        """``(t_pred - t_meas) / t_meas``: negative when the preset is faster than this cluster."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    @property
    def speed_of_class(self) -> float:
        """``t_pred / t_meas``: this cluster's speed as a share of its class (1 = as the preset)."""
        return self.predicted_s / self.measured_s


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetScore:
    """A measured nccl-tests log scored against a system preset (``commcost collective --log``)."""

    system: str
    """The preset."""
    op: Collective
    """The collective of the log."""
    gpus: int
    """Ranks P."""
    nodes: int
    """Nodes the group spans."""
    rows: tuple[PresetScoreRow, ...]
    """One per size above 0 bytes, in the log's order."""

    def speed_in(self, lo_bytes: float, hi_bytes: float) -> float | None:
        """Median of ``t_pred / t_meas`` over the sizes in ``[lo, hi]`` (None when none): the verdict's
        "this cluster runs at x of its class"."""
        xs = [r.speed_of_class for r in self.rows if lo_bytes <= r.message_bytes <= hi_bytes]
        return median(xs) if xs else None


def score_against_preset(series_samples: Sequence[Sample], *, op: Collective, gpus: int, system: str,
                         nodes: int | None = None, gpus_per_node: int | None = None) -> PresetScore:
    """Each measured ``(S, t)`` of one collective next to what preset ``system`` predicts for it.

    The group is ``gpus`` ranks on ``nodes`` nodes of the preset (None: packed on full nodes), as
    :func:`commcost.comm.systems.system_group` places it; the prediction is the fabric's ``auto`` cost,
    the one every command prints; the band is its collective's and scope's.
    """

    topo, P = system_group(system, nodes=nodes, gpus=gpus, gpus_per_node=gpus_per_node)
    rows = []
    for s in series_samples:
        c = collective_cost(op, s.size_bytes, P, topo)
        lo, hi = collective_band(c, topo)
        rows.append(PresetScoreRow(message_bytes=s.size_bytes, measured_s=s.time_s, predicted_s=c.total_s,
                                   algorithm=c.algorithm.value, in_band=lo <= s.time_s <= hi))

    return PresetScore(system=system, op=op, gpus=P, nodes=place(P, topo).nodes, rows=tuple(rows))
