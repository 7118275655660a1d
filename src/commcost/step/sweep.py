"""``commcost timeline --bucket auto``: the step time over a grid of bucket caps.

Every point is :func:`commcost.step.timeline._evaluate_caps` -- O(1) per cap for a
uniform gradient rate (the closed form in :mod:`commcost.step.timeline`), a
simulation otherwise -- and only the best cap is simulated bucket by bucket, for
its :class:`~commcost.step.timeline.Timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.core.limits import MAX_BUCKET_CAPS

from commcost.step.bucket_advice import BucketRecommendation, advice_grid, recommendation_from_choice
from commcost.step.ddp_buckets import DdpBucketCaps, ddp_bucket_caps
from commcost.step.timeline import AllReduceCost, GradientStream, Timeline, TimelineInputs, caps_for, \
    BucketChoice, _evaluate_caps, comm_allreduce_cost, gradient_stream, pick_best, simulate_timeline

__all__ = ["CurvePoint", "BucketSweep", "sweep_buckets", "curve_point"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurvePoint:
    """One bucket cap on the step-time curve."""

    bucket_bytes: int
    """Cap c (and c_1 unless overridden), bytes."""
    buckets: int
    """Buckets at this cap."""
    wire_s: float
    """T_w: grows as c shrinks (one latency term per bucket)."""
    exposed_s: float
    """E: grows as c grows (the tail) and as c shrinks (latency)."""
    step_s: float
    """Simulated step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketSweep:
    """``--bucket auto``: the best cap (:func:`~commcost.step.timeline.pick_best`) and the curve it was read from."""

    curve: tuple[CurvePoint, ...]
    """Every cap tried, smallest first."""
    best: Timeline
    """The timeline at the recommended cap (:func:`~commcost.step.timeline.pick_best`)."""
    choice: BucketChoice
    """The good range, the tolerance and the rule behind ``best``."""
    advice: BucketRecommendation
    """``choice`` as the one bucket advice (:mod:`commcost.step.bucket_advice`)."""


def sweep_buckets(inp: TimelineInputs, caps_bytes: tuple[int, ...] | None = None, *,
                  first_bucket_bytes: int | None = None,
                  allreduce_s: AllReduceCost | None = None) -> BucketSweep:
    """Evaluate every cap (default :func:`~commcost.step.bucket_advice.advice_grid`, the grid of the one
    bucket advice that ``budget`` and ``plan`` also give) and keep the fastest step.

    Each cap is :func:`~commcost.step.timeline.caps_for`: what ``bucket_cap_mb`` set explicitly
    gives in torch 2.13, the first bucket as large as the rest unless ``first_bucket_bytes``
    says otherwise. The choice is :func:`~commcost.step.timeline.pick_best`': the largest cap whose exposed
    time is within max(5%, 50 us) of the smallest, never exposing more than PyTorch's default.
    """
    if caps_bytes is not None and len(caps_bytes) > MAX_BUCKET_CAPS:
        raise InputError(f"caps_bytes: at most {MAX_BUCKET_CAPS:,} caps are simulated in one sweep, got "
                         f"{len(caps_bytes):,}")
    stream = gradient_stream(inp)
    grid = caps_bytes or advice_grid(stream.total_bytes)
    cost = allreduce_s or comm_allreduce_cost(inp)
    memo: dict[float, float] = {}
    curve: list[CurvePoint] = []
    points: list[tuple[float, DdpBucketCaps]] = []
    for cap in sorted(grid):
        caps = caps_for(cap, first_bucket_bytes)
        curve.append(_point(inp, stream, caps, cost, memo))
        points.append((curve[-1].exposed_s, caps))
    default = _evaluate_caps(inp, stream, ddp_bucket_caps(None), cost, memo)[2]
    choice = pick_best(points, default_exposed_s=default)
    return BucketSweep(curve=tuple(curve), choice=choice, advice=recommendation_from_choice(choice, stream),
                       best=simulate_timeline(inp, choice.best, allreduce_s=cost, stream=stream))


def curve_point(inp: TimelineInputs, caps: DdpBucketCaps, *, allreduce_s: AllReduceCost | None = None,
                stream: GradientStream | None = None) -> CurvePoint:
    """Wire, exposed and step time at ``caps`` without the per-bucket list.

    The same numbers as :func:`~commcost.step.timeline.simulate_timeline`; for a uniform stream in
    O(1), so a 1 MiB cap on a 70B model costs no more than 1 GiB.
    """
    cost = allreduce_s or comm_allreduce_cost(inp)
    return _point(inp, stream or gradient_stream(inp), caps, cost, {})


def _point(inp: TimelineInputs, stream: GradientStream, caps: DdpBucketCaps,
           cost: AllReduceCost, memo: dict[float, float]) -> CurvePoint:
    n, wire, exposed, step = _evaluate_caps(inp, stream, caps, cost, memo)
    return CurvePoint(bucket_bytes=caps.bucket_cap_bytes, buckets=n, wire_s=wire, exposed_s=exposed, step_s=step)
