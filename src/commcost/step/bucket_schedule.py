"""The DDP bucket schedule's primitives, on floats or numpy columns: the uniform bucket layout of a gradient stream,
when each bucket is ready, starts and ends on one communication stream, the exposed time after the backward, and the
grid of caps a bucket search tries. :mod:`commcost.step.timeline` builds the timeline from them (moved from there
unchanged; its docstring states the formulas).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable

from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.core.errors import InputError
from commcost.core.units import KiB
from commcost.core.validation import require_finite_positive
from commcost.core.xp import SCALAR

AllReduceCost = Callable[[float], float]
"""Seconds to all-reduce a message of the given size in bytes."""

__all__ = ["AllReduceCost", "uniform_layout", "uniform_buckets", "uniform_end_s", "BucketTiming", "exposed_after_s",
           "bucket_grid", "caps_for"]


def uniform_layout(S: float, c1: float, c: float) -> tuple[float, int, float]:
    """The buckets of a continuous stream: ``(first, m, last)``.

    ``first = min(c_1, S)``, then ``m`` full buckets of ``c``, then ``last`` (the
    remainder, ``0 < last <= c``; 0 when one bucket holds everything). So
    ``S = first + m c + last`` and there are ``m + 2`` buckets (1 when ``S <= c_1``).
    """
    if S <= c1:
        return S, 0, 0.0
    rest = S - c1
    m = max(1, math.ceil(rest / c))           # buckets after the first, the last included
    last = rest - (m - 1) * c
    while last > c:                            # guard against rounding in rest / c
        m += 1
        last = rest - (m - 1) * c
    while m > 1 and last <= 0:
        m -= 1
        last = rest - (m - 1) * c
    return c1, m - 1, last


def uniform_buckets(S: float, caps: DdpBucketCaps, cost: AllReduceCost
                    ) -> tuple[int, tuple[float, float, float], int, tuple[float, float, float], float]:
    """``(n, (T(c_1), T(c), T(last)), m, (f_0, f_1, f_m), T_w)``: what the closed form
    (:func:`uniform_end_s`) needs of a uniform stream of ``S`` bytes.

    The buckets are ``c_1, c x m, last`` (:func:`uniform_layout`), ``n = m + 2`` of them (1 when
    ``S <= c_1``: then ``T(c) = T(last) = 0``), ``T_w = T(c_1) + m T(c) + T(last)``; ``f_j = 1 - F_j/S``
    is the share of the window still to run when bucket ``j`` is ready (``F_j`` the bytes up to it):
    the first bucket, the first full one and the last full one (0 for the last two when ``m = 0``).
    """
    first, m, last = uniform_layout(S, float(caps.first_bucket_cap_bytes), float(caps.bucket_cap_bytes))
    T1 = cost(first)
    if last == 0:                     # one bucket, ready when backward ends
        return 1, (T1, 0.0, 0.0), 0, (0.0, 0.0, 0.0), T1
    c = float(caps.bucket_cap_bytes)
    Tc = cost(c) if m else 0.0
    Tl = cost(last)
    shares = (1.0 - (first + c) / S, 1.0 - (first + m * c) / S) if m else (0.0, 0.0)
    return m + 2, (T1, Tc, Tl), m, (1.0 - first / S, *shares), T1 + m * Tc + Tl


def uniform_end_s(xp, *, backward_end_s, window_s, times_s, full_buckets, not_ready):
    """Closed form of :func:`_schedule` for a uniform stream: ``end_n`` in O(1), array-safe
    (``xp``: :data:`commcost.core.xp.SCALAR` or numpy; ``times_s`` and ``not_ready`` of :func:`uniform_buckets`).

    One stream serving jobs in order gives ``end_n = max_j (ready_j + sum_{i>=j} T_i)``
    (the last bucket that started idle, :attr:`Timeline.busy_from`), bucket ``j`` ready at
    ``t_e - f_j W``; over the ``m`` equal buckets ``ready_j + sum_{i>=j} T_i`` moves by
    ``W c/S - T(c)`` per step, the same sign all along, so its maximum over them is at the first or
    the last of them. Four candidates remain: ``j = 0`` (saturated from the first bucket:
    ``t_e - f_0 W + T_w``), the first and the last full bucket, and the last bucket
    (communication keeps up: ``t_e + T(last)``).
    """
    t_e, W, (T1, Tc, Tl), m, (f0, f1, f2) = backward_end_s, window_s, times_s, full_buckets, not_ready
    end = xp.maximum(t_e - f0 * W + T1 + m * Tc + Tl, t_e + Tl)
    return xp.maximum(end, xp.maximum(t_e - f1 * W + m * Tc + Tl, t_e - f2 * W + Tc + Tl))


class BucketTiming(namedtuple("BucketTiming", ("size_bytes", "ready_s", "start_s", "end_s"))):
    """One bucket on the timeline (all floats, SI units).

    A named tuple rather than a frozen dataclass: a 70B model has thousands of
    buckets, and a tuple is built ~4x faster (benchmarks/timeline_speed.py).
    ``collections.namedtuple`` rather than ``typing.NamedTuple``, so that the
    command line does not import ``typing`` (benchmarks/cli_startup.py).
    """

    __slots__ = ()


def _schedule(sizes: list[float], readies: list[float], *, t_e: float, W: float,
              cost: AllReduceCost, memo: dict[float, float],
              timings: list[BucketTiming] | None) -> tuple[float, float]:
    """Run the one communication stream; return ``(end_n, T_w)``.

    ``ready = t_e - (1 - share) W`` (exactly ``t_e`` for the last gradient),
    ``start = max(ready, previous end)``, ``end = start + T(size)``.
    """
    end = -math.inf
    wire = 0.0
    for size, share in zip(sizes, readies):
        T = memo.get(size)
        if T is None:
            T = memo[size] = cost(size)
        ready = t_e - (1.0 - share) * W
        start = ready if ready > end else end
        end = start + T
        wire += T
        if timings is not None:
            timings.append(BucketTiming(size, ready, start, end))
    return end, wire


def _exposed(end_s: float, t_e: float, wire_s: float) -> float:
    """``E`` of floats (:func:`exposed_after_s`)."""
    return exposed_after_s(SCALAR, end_s=end_s, backward_end_s=t_e, wire_s=wire_s)


def exposed_after_s(xp, *, end_s, backward_end_s, wire_s):
    """``E = max(0, end_n - t_e)``, clipped to ``T_w`` (which it can only pass by rounding). Array-safe."""
    return xp.minimum(wire_s, xp.maximum(0.0, end_s - backward_end_s))


def bucket_grid(message_bytes: float, *, points_per_octave: int = 4,
                min_bytes: float = 64 * KiB, max_buckets: int = 1 << 12) -> tuple[int, ...]:
    """Log-spaced caps from ``max(min_bytes, S/max_buckets)`` up to the first cap >= S."""
    require_finite_positive("message_bytes", message_bytes)
    if points_per_octave < 1:
        raise InputError(f"points_per_octave must be >= 1, got {points_per_octave}")
    lo = max(min_bytes, message_bytes / max_buckets)
    step = 2.0 ** (1.0 / points_per_octave)
    k0 = math.floor(math.log(lo, step))
    caps: list[int] = []
    k = k0
    while True:
        cap = int(round(step ** k))
        if cap >= 1 and (not caps or cap > caps[-1]):
            caps.append(cap)
        if cap >= message_bytes:
            return tuple(caps)
        k += 1


def caps_for(cap_bytes: int, first_bucket_bytes: int | None = None) -> DdpBucketCaps:
    """What ``bucket_cap_mb`` set explicitly gives in torch 2.13: the first bucket as large as
    the rest (``cap_bytes``), unless ``first_bucket_bytes`` says otherwise."""
    return DdpBucketCaps(bucket_cap_bytes=int(cap_bytes), first_bucket_cap_bytes=int(first_bucket_bytes or cap_bytes))
