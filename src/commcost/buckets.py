"""Gradient buckets: the latency/bandwidth crossover and the cost of bucketing.

Symbols as in :mod:`commcost.comm.collectives`; ``c`` is a bucket cap in bytes.

* crossover ``S* = P a B``: the bucket size at which one bucket's bandwidth term
  ``2(P-1)/P * c/B`` equals its latency term ``2(P-1) a``, up to the factor
  ``(P-1)/P ~ 1``. Below ``S*`` a bucket is latency-bound.
* latency share of one bucket ``2(P-1)a / T(c) = 1 / (1 + c/S*)`` (exact).
* whole gradient in buckets of cap ``c``: ``n = ceil(S/c)`` all-reduces, so
  ``T_total = n * 2(P-1) a + 2(P-1)/P * S/B`` -- every bucket pays the latency,
  the bytes are paid once.
* smallest sensible bucket: latency share at most ``s`` gives ``c >= S* (1-s)/s``.
* largest sensible bucket: the last bucket's all-reduce cannot overlap the
  backward pass (it is ready when backward ends), so keep it within a tail
  budget ``t``: ``2(P-1)a + 2(P-1)/P * c/B <= t`` gives
  ``c <= (t - 2(P-1)a) * B * P / (2(P-1))``.

PyTorch DDP's ``bucket_cap_mb`` is in MiB (default 25); its first bucket is
capped at ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commcost.comm.collectives import CollectiveCost, ring_all_reduce
from commcost.errors import InputError
from commcost.comm.topology import Link
from commcost.units import MiB
from commcost.validation import require_finite_positive

__all__ = [
    "PYTORCH_DEFAULT_BUCKET_BYTES", "PYTORCH_FIRST_BUCKET_BYTES",
    "BucketRow", "BucketAdvice", "crossover_bytes", "bucket_row", "bucket_advice",
]

PYTORCH_DEFAULT_BUCKET_BYTES = 25 * MiB
"""DDP's default ``bucket_cap_mb=25`` (MiB)."""
PYTORCH_FIRST_BUCKET_BYTES = 1 * MiB
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``."""


def crossover_bytes(gpus: int, link: Link) -> float:
    """Latency/bandwidth crossover ``S* = P a B``, bytes."""
    return gpus * link.latency_s * link.bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketRow:
    """Cost of all-reducing a whole gradient in buckets of one cap."""

    cap_bytes: float
    """Bucket cap c, bytes."""
    count: int
    """Buckets needed, ``ceil(S/c)``."""
    one_bucket: CollectiveCost
    """All-reduce of one full bucket (``min(c, S)`` bytes)."""
    latency_share: float
    """Latency term over total for one full bucket, ``1/(1 + c/S*)``."""
    total_s: float
    """``count * 2(P-1)a + 2(P-1)/P * S/B``, seconds."""
    latency_total_s: float
    """``count * 2(P-1)a``, seconds: what bucketing adds over one all-reduce."""


def bucket_row(message_bytes: float, cap_bytes: float, gpus: int, link: Link) -> BucketRow:
    """The :class:`BucketRow` for gradient ``S = message_bytes`` and cap ``c``."""
    require_finite_positive("bucket cap (bytes)", cap_bytes)
    whole = ring_all_reduce(message_bytes, gpus, link)
    count = max(1, math.ceil(message_bytes / cap_bytes))
    one = ring_all_reduce(min(cap_bytes, message_bytes), gpus, link)
    share = one.latency_s / one.total_s if one.total_s > 0 else 0.0
    latency_total_s = count * one.latency_s
    return BucketRow(
        cap_bytes=cap_bytes, count=count, one_bucket=one, latency_share=share,
        total_s=latency_total_s + whole.bandwidth_s, latency_total_s=latency_total_s,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketAdvice:
    """The range of sensible bucket caps, with the reason for each end."""

    crossover_bytes: float
    """``S* = P a B``."""
    max_latency_share: float
    """``s``: the largest latency share of one bucket we accept."""
    min_bucket_bytes: float
    """``S* (1-s)/s``: smaller buckets spend more than ``s`` of their time on latency."""
    tail_budget_s: float
    """``t``: the time the last bucket's all-reduce may add after backward ends."""
    max_bucket_bytes: float
    """``(t - 2(P-1)a) B P / (2(P-1))``; ``inf`` when P = 1; 0 when the latency alone exceeds t."""
    pytorch_default: BucketRow
    """The gradient bucketed at DDP's default 25 MiB."""

    @property
    def consistent(self) -> bool:
        """True when some cap satisfies both ends (``min <= max``)."""
        return self.min_bucket_bytes <= self.max_bucket_bytes


def bucket_advice(message_bytes: float, gpus: int, link: Link, *,
                  max_latency_share: float, tail_budget_s: float) -> BucketAdvice:
    """Smallest and largest sensible bucket caps (see the module docstring)."""
    if not 0 < max_latency_share < 1:
        raise InputError(f"max latency share must be in (0, 1), got {max_latency_share:g}")
    require_finite_positive("tail budget (s)", tail_budget_s)
    s_star = crossover_bytes(gpus, link)
    P, a, B = gpus, link.latency_s, link.bandwidth_bytes_per_s
    if P == 1:
        max_bytes = math.inf
    else:
        max_bytes = max(0.0, (tail_budget_s - 2 * (P - 1) * a) * B * P / (2 * (P - 1)))
    return BucketAdvice(
        crossover_bytes=s_star,
        max_latency_share=max_latency_share,
        min_bucket_bytes=s_star * (1 - max_latency_share) / max_latency_share,
        tail_budget_s=tail_budget_s,
        max_bucket_bytes=max_bytes,
        pytorch_default=bucket_row(message_bytes, PYTORCH_DEFAULT_BUCKET_BYTES, gpus, link),
    )
