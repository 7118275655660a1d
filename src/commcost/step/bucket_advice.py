"""One bucket advice: the DDP bucket cap that ``budget``, ``timeline`` and ``plan`` all recommend.

The advice is :func:`commcost.step.timeline.pick_best` over one grid of caps, :func:`advice_grid`
(two caps per octave, from ``max(64 KiB, S/1024)`` up to the first cap >= S), each cap as an
explicit ``bucket_cap_mb`` (torch 2.13: first bucket = cap), judged against PyTorch's default
(25 MiB, first bucket 1 MiB). Every command asks :func:`recommend_buckets` (or builds the advice
from the same :class:`~commcost.step.timeline.BucketChoice` over the same grid, as
``timeline --bucket auto`` does from its curve), so the same step gives the same cap everywhere.

**Which gradient stream.** With a model shape the gradients arrive tensor by tensor
(:func:`commcost.step.timeline.gradient_stream`), and DDP never splits a tensor across buckets, so
the last bucket holds at least the embedding (for Llama-2-13B 312.5 MiB): that bucket's all-reduce
is a tail no cap can shrink. The uniform stream (``--params`` alone) lets the last bucket be as
small as the cap, so it recommends smaller caps and promises less exposed time than DDP can reach.
The per-tensor stream is the more faithful one; every command uses it whenever the model's shape
is known, and says which stream it used (:attr:`BucketRecommendation.stream`).
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.step.timeline import AllReduceCost, BucketChoice, GradientStream, TimelineInputs, best_caps, \
    bucket_grid, gradient_stream

__all__ = ["ADVICE_POINTS_PER_OCTAVE", "ADVICE_MAX_BUCKETS", "BucketRecommendation", "advice_grid",
           "recommend_buckets", "recommendation_from_choice", "STREAM_PER_TENSOR", "STREAM_UNIFORM"]

ADVICE_POINTS_PER_OCTAVE = 2
"""Caps per doubling of the cap on the advice grid."""
ADVICE_MAX_BUCKETS = 1 << 10
"""The grid starts at ``S / 1024``: more buckets than that only add latency terms."""
STREAM_PER_TENSOR = "per-tensor"
"""Gradients of the model's tensors, packed whole into buckets as DDP does."""
STREAM_UNIFORM = "uniform"
"""A continuous gradient stream at a uniform rate (no model shape)."""


def advice_grid(message_bytes: float) -> tuple[int, ...]:
    """The caps every command judges: :func:`~commcost.step.timeline.bucket_grid` with
    :data:`ADVICE_POINTS_PER_OCTAVE` and :data:`ADVICE_MAX_BUCKETS`."""
    return bucket_grid(message_bytes, points_per_octave=ADVICE_POINTS_PER_OCTAVE, max_buckets=ADVICE_MAX_BUCKETS)


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketRecommendation:
    """The bucket advice of one data-parallel step (the ``bucket_advice`` JSON object)."""

    recommended_bytes: int
    """The recommended ``bucket_cap_mb``, bytes (MiB x 2**20)."""
    first_bucket_bytes: int
    """The first bucket's cap that goes with it (the cap itself unless a first bucket was fixed)."""
    exposed_s: float
    """Simulated exposed all-reduce time at the recommended cap, seconds."""
    default_exposed_s: float
    """The same at PyTorch's default (25 MiB, first bucket 1 MiB), seconds."""
    good_bytes: tuple[int, ...]
    """Every cap tried whose exposed time is within ``max(5%, 50 us)`` of the least, smallest first."""
    min_exposed_s: float
    """The least exposed time over the caps tried, seconds."""
    tolerance_s: float
    """``max(5% min_exposed_s, 50 us)``, seconds."""
    caps_tried: int
    """Caps on :func:`advice_grid`."""
    stream: str
    """:data:`STREAM_PER_TENSOR` (the model's tensors) or :data:`STREAM_UNIFORM` (no shape)."""
    rule: str
    """The rule in words (:class:`~commcost.step.timeline.BucketChoice`)."""
    choice: BucketChoice
    """The choice it was read from."""


def recommendation_from_choice(choice: BucketChoice, stream: GradientStream) -> BucketRecommendation:
    """The advice of ``choice`` (a :func:`~commcost.step.timeline.pick_best` over :func:`advice_grid`)."""
    assert choice.default_exposed_s is not None, "the advice is judged against PyTorch's default"
    return BucketRecommendation(
        recommended_bytes=choice.best.bucket_cap_bytes, first_bucket_bytes=choice.best.first_bucket_cap_bytes,
        exposed_s=choice.best_exposed_s, default_exposed_s=choice.default_exposed_s,
        good_bytes=choice.good_caps_bytes, min_exposed_s=choice.min_exposed_s, tolerance_s=choice.tolerance_s,
        caps_tried=choice.caps_tried, stream=STREAM_UNIFORM if stream.uniform else STREAM_PER_TENSOR,
        rule=choice.rule, choice=choice)


def recommend_buckets(inp: TimelineInputs, *, stream: GradientStream | None = None,
                      allreduce_s: AllReduceCost | None = None,
                      first_bucket_bytes: int | None = None, arrays: bool = False) -> BucketRecommendation:
    """The bucket advice for the step ``inp`` (per-tensor when ``inp`` has a shape, module docstring);
    ``allreduce_s`` overrides the inputs' CommModel (``plan`` passes its data-parallel groups' cost);
    ``arrays``: :func:`~commcost.step.timeline.best_caps`' (the same advice, its prices found as arrays)."""
    stream = stream or gradient_stream(inp)
    choice = best_caps(inp, advice_grid(stream.total_bytes), first_bucket_bytes=first_bucket_bytes,
                       allreduce_s=allreduce_s, stream=stream, arrays=arrays)
    return recommendation_from_choice(choice, stream)
