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

Every cost here is the CommModel's (:mod:`commcost.comm.model`): on the drill's flat link the
formulas above hold exactly; on a fabric or a profile, whose latency and bandwidth terms change
with the size (algorithm, protocol, regime), each quantity is the same equation solved on the
model's own terms ``L(c)`` and ``W(c)`` (latency and bandwidth term of one all-reduce of ``c``
bytes) by the fixed point ``c <- c g(c)`` (:func:`_fixed_point`), which an alpha-beta model
satisfies after one step:

* crossover: ``L(S*) = W(S*)``, iterate ``c <- c L(c)/W(c)``;
* smallest bucket: ``L(c)/(L(c)+W(c)) = s``, iterate ``c <- c (1-s)/s L(c)/W(c)``;
* largest bucket: ``L(c) + W(c) = t``, iterate ``c <- c (t - L(c))/W(c)``;
* whole gradient: ``(n-1) T(c) + T(r)``, ``r = S - (n-1) c`` the last bucket.

PyTorch DDP's ``bucket_cap_mb`` is in MiB (default 25); its first bucket is
capped at ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commcost.comm.collectives import CollectiveCost
from commcost.core.errors import InputError
from commcost.core.units import MiB
from commcost.core.validation import require_finite_positive

__all__ = [
    "PYTORCH_DEFAULT_BUCKET_BYTES", "PYTORCH_FIRST_BUCKET_BYTES",
    "BucketRow", "BucketAdvice", "crossover_bytes", "bucket_row", "bucket_advice", "last_bucket_bytes",
]

PYTORCH_DEFAULT_BUCKET_BYTES = 25 * MiB
"""DDP's default ``bucket_cap_mb=25`` (MiB)."""
PYTORCH_FIRST_BUCKET_BYTES = 1 * MiB
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``."""


TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.comm.model import CommModel

_FIXED_POINT_STEPS = 40
"""Iterations of :func:`_fixed_point` (an alpha-beta regime converges in one)."""


def _fixed_point(step, c0: float) -> float:
    """Iterate ``c <- step(c)`` from ``c0`` until it stops moving (relative 1e-12) or settles in a
    two-cycle across a regime edge (then the smaller); ``step`` returns None when there is no
    solution (the result is then 0)."""
    c, prev = c0, None
    for _ in range(_FIXED_POINT_STEPS):
        nxt = step(c)
        if nxt is None or not nxt > 0:
            return 0.0
        if abs(nxt - c) <= 1e-12 * c or (prev is not None and abs(nxt - prev) <= 1e-12 * prev):
            return min(nxt, c)
        prev, c = c, nxt
    return c


def crossover_bytes(comm: CommModel, gpus: int, *, near_bytes: float, algorithm: str = "auto") -> float:
    """Latency/bandwidth crossover of one all-reduce, bytes: ``S* = P a B`` on a flat link,
    ``L(S*) = W(S*)`` on the model's own terms near ``near_bytes`` (module docstring); 0 for P = 1."""
    if gpus == 1:
        return 0.0

    def step(c: float) -> float | None:
        T = comm.cost("all_reduce", c, gpus, algorithm)
        return c * T.latency_s / T.bandwidth_s if T.bandwidth_s > 0 else None
    return _fixed_point(step, near_bytes)


def last_bucket_bytes(message_bytes: float, cap_bytes: float, first_cap_bytes: float | None = None) -> float:
    """Size of the last bucket when ``S`` is cut into a first bucket of ``c_1`` (default ``c``) and
    then buckets of ``c``: the remainder, ``0 < r <= c`` (``S`` itself when one bucket holds it)."""
    c1 = cap_bytes if first_cap_bytes is None else first_cap_bytes
    if message_bytes <= c1:
        return message_bytes
    rest = message_bytes - c1
    n = max(1, math.ceil(rest / cap_bytes))
    r = rest - (n - 1) * cap_bytes
    return r if r > 0 else cap_bytes


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
    """Latency term over total for one full bucket, ``1/(1 + c/S*)`` on a flat link."""
    total_s: float
    """``(n-1) T(c) + T(r)`` (flat link: ``n 2(P-1)a + 2(P-1)/P * S/B``), seconds."""
    latency_total_s: float
    """``(n-1) L(c) + L(r)`` (flat link: ``n 2(P-1)a``), seconds: what bucketing adds over one all-reduce."""


MAX_BUCKETS_PRICED = 1e15
"""Most buckets one row prices (the count multiplies one bucket's time; beyond it no gradient is real)."""


def bucket_row(message_bytes: float, cap_bytes: float, gpus: int, comm: CommModel,
               algorithm: str = "auto") -> BucketRow:
    """The :class:`BucketRow` for gradient ``S = message_bytes`` and cap ``c``."""
    require_finite_positive("bucket cap (bytes)", cap_bytes)
    require_finite_positive("message_bytes", message_bytes, allow_zero=True)
    if cap_bytes < 1:
        raise InputError(f"bucket cap must be at least 1 byte, got {cap_bytes:g}")
    if message_bytes / cap_bytes > MAX_BUCKETS_PRICED:
        raise InputError(f"a {message_bytes:.4g}-byte gradient in {cap_bytes:.4g}-byte buckets is "
                         f"{message_bytes / cap_bytes:.3g} buckets; at most {MAX_BUCKETS_PRICED:.0e} are priced")
    count = max(1, math.ceil(message_bytes / cap_bytes))
    one = comm.cost("all_reduce", min(cap_bytes, message_bytes), gpus, algorithm)
    rest = comm.cost("all_reduce", message_bytes - (count - 1) * cap_bytes, gpus, algorithm) if count > 1 else one
    share = one.latency_s / one.total_s if one.total_s > 0 else 0.0
    full = count - 1
    return BucketRow(
        cap_bytes=cap_bytes, count=count, one_bucket=one, latency_share=share,
        total_s=full * one.total_s + rest.total_s, latency_total_s=full * one.latency_s + rest.latency_s,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketAdvice:
    """The range of sensible bucket caps, with the reason for each end."""

    crossover_bytes: float
    """``S* = P a B`` (flat link), or ``L(S*) = W(S*)`` on the model's terms."""
    max_latency_share: float
    """``s``: the largest latency share of one bucket we accept."""
    min_bucket_bytes: float
    """``S* (1-s)/s`` (flat link): smaller buckets spend more than ``s`` of their time on latency."""
    tail_budget_s: float
    """``t``: the time the last bucket's all-reduce may add after backward ends."""
    max_bucket_bytes: float
    """``(t - 2(P-1)a) B P / (2(P-1))`` (flat link); ``inf`` when P = 1; 0 when the latency alone exceeds t."""
    pytorch_default: BucketRow
    """The gradient bucketed at DDP's default 25 MiB."""

    @property
    def consistent(self) -> bool:
        """True when some cap satisfies both ends (``min <= max``)."""
        return self.min_bucket_bytes <= self.max_bucket_bytes


def bucket_advice(message_bytes: float, gpus: int, comm: CommModel, *, max_latency_share: float,
                  tail_budget_s: float, algorithm: str = "auto") -> BucketAdvice:
    """Smallest and largest sensible bucket caps (see the module docstring)."""
    require_finite_positive("message_bytes", message_bytes, allow_zero=True)
    if message_bytes > 2.0**60:
        raise InputError(f"message_bytes must be at most 2**60, got {message_bytes:.4g}")
    require_finite_positive("max latency share", max_latency_share)
    if not 0 < max_latency_share < 1:
        raise InputError(f"max latency share must be in (0, 1), got {max_latency_share:g}")
    require_finite_positive("tail budget (s)", tail_budget_s)
    s, t, P = max_latency_share, tail_budget_s, gpus
    s_star = crossover_bytes(comm, P, near_bytes=message_bytes, algorithm=algorithm)

    def cost(c: float) -> CollectiveCost:
        return comm.cost("all_reduce", c, P, algorithm)

    def smallest(c: float) -> float | None:
        T = cost(c)
        return c * (1 - s) / s * T.latency_s / T.bandwidth_s if T.bandwidth_s > 0 else None

    def largest(c: float) -> float | None:
        T = cost(c)
        return c * (t - T.latency_s) / T.bandwidth_s if T.bandwidth_s > 0 and t > T.latency_s else None

    if P == 1:
        min_bytes, max_bytes = 0.0, math.inf
    else:
        min_bytes = _fixed_point(smallest, s_star or message_bytes)
        max_bytes = _fixed_point(largest, message_bytes)
    return BucketAdvice(
        crossover_bytes=s_star, max_latency_share=s, min_bucket_bytes=min_bytes, tail_budget_s=t,
        max_bucket_bytes=max_bytes,
        pytorch_default=bucket_row(message_bytes, PYTORCH_DEFAULT_BUCKET_BYTES, P, comm, algorithm),
    )
