"""The DDP bucket timeline: does the all-reduce hide behind the backward pass?

Symbols: ``t_c`` compute-only time of one micro-batch, ``k`` micro-batches per
optimizer step, ``f_b`` backward share of a micro-batch, ``W = f_b t_c`` the
backward window, ``t_opt`` optimizer time, ``T(c)`` the all-reduce of a ``c``-byte
bucket (ring: ``2(P-1)a + 2(P-1)/P * c/B``, :func:`commcost.comm.collectives.ring_all_reduce`).

The model (README, "Timeline"):

* **Step layout.** With gradient accumulation under ``no_sync`` the first ``k-1``
  micro-batches communicate nothing; only the last one's backward overlaps
  communication. Its backward runs from ``t_0 = k t_c - W`` to ``t_e = k t_c``.
  So the simulation is ``O(buckets)`` whatever ``k`` is.
* **Gradient arrival.** Gradients become ready in reverse layer order. Without a
  model shape they arrive at a uniform rate: byte ``x`` of ``S`` is ready at
  ``t_0 + W x/S``. With a shape (a :class:`commcost.workload.transformer.TransformerSpec`
  and its sequence length, laid out by :func:`commcost.workload.shape.transformer_gradient_layers`)
  each layer's backward lasts ``W * F_l / sum F`` (``F_l`` its backward FLOPs: output
  head first, embedding last with ~0 FLOPs), and within a layer its tensors
  arrive in reverse forward order, in proportion to their size.
* **Buckets.** As DDP after its first-iteration rebuild (:mod:`commcost.step.ddp_buckets`):
  packed in ready order, first bucket capped at ``c_1``, the rest at ``c``; with a
  shape a bucket closes on the tensor that reaches the cap (never splitting a
  tensor); without one the stream is continuous, so buckets are exactly
  ``c_1, c, c, ..., remainder``. A bucket is ready when its last gradient is.
* **One communication stream.** ``start_i = max(ready_i, end_{i-1})``,
  ``end_i = start_i + T(size_i)``.
* **The step.** ``step = max(t_e, end_n) + t_opt``; wire time ``T_w = sum T(size_i)``;
  exposed ``E = max(0, end_n - t_e)``; overlap fraction ``(T_w - E)/T_w`` (1 when
  there is no communication); efficiency ``(k t_c + t_opt)/step``.
* **Bounds.** No overlap: ``k t_c + T_w + t_opt``. Perfect overlap:
  ``k t_c + max(0, T_w - W) + t_opt`` -- communication can only hide in the last
  backward window, and no schedule does better. The simulated step lies between.
  Hand cases: when communication keeps up, ``E`` is the last bucket's
  all-reduce; when it saturates, ``E = T_w - W + fill(first bucket)``.
* **Closed form (uniform rate).** The buckets are ``c_1, m x c, last`` and
  ``end_n = max_j (ready_j + sum_{i>=j} T_i)``; across the ``m`` equal buckets that
  sum moves by ``W c/S - T(c)`` per bucket, one sign all along, so only
  ``j = 0``, the first and last full bucket and the last bucket can be the
  maximum: ``E`` in O(1) per cap (:func:`uniform_end_s`), used by the bucket sweep
  and the budget, checked against the simulation (tests/step/test_timeline_closed_form.py).

The all-reduce cost is one function of the message size, ``allreduce_s``; by
default :func:`comm_allreduce_cost`, the all-reduce of the inputs' CommModel
(:mod:`commcost.comm.model`: flat link, fabric or calibrated profile), the only
place this module costs a collective.

**Best bucket** (:func:`pick_best`): the caps whose exposed time ``E`` is within
``max(5% E_best, 50 us)`` of the smallest form the *good range*; the recommended cap is the
largest cap in that range that exposes no more than PyTorch's default (fewer buckets pay
fewer latency terms). The tolerance is on ``E``, not on the step, so a long step cannot
hide a poor choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections import namedtuple
from collections.abc import Callable

from commcost.step.ddp_buckets import DdpBucketCaps, assign_buckets_by_size, ddp_bucket_caps
from commcost.core.errors import InputError
from commcost.core.units import KiB
from commcost.core.validation import require_count, require_finite_positive, require_fraction
from commcost.core.dtypes import gradient_bytes
from commcost.core.xp import SCALAR

__all__ = [
    "AllReduceCost", "comm_allreduce_cost", "TimelineInputs", "GradientStream", "BucketTiming",
    "Timeline", "BucketChoice", "gradient_stream", "simulate_timeline", "bucket_grid", "caps_for", "exposed_at", "uniform_layout",
    "evaluate_caps", "uniform_buckets", "uniform_end_s", "exposed_after_s",
    "best_caps", "pick_best",
]  # the bucket sweep (CurvePoint, BucketSweep, sweep_buckets) is commcost.step.sweep

AllReduceCost = Callable[[float], float]
"""Seconds to all-reduce a message of the given size in bytes."""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.comm.model import CommModel
    from commcost.workload.transformer import TransformerSpec

MAX_SIMULATED_BUCKETS = 1 << 20
"""The most buckets a bucket-by-bucket timeline is asked to simulate (more would take minutes and
gigabytes); callers refuse or skip past it (the budget's exposed column shows None)."""


def comm_allreduce_cost(inp: TimelineInputs) -> AllReduceCost:
    """``c -> T(c)``: the all-reduce of a ``c``-byte bucket over ``inp.gpus`` ranks from ``inp.comm``
    (on the drill's flat link ``2(P-1)a + 2(P-1)/P * c/B``), memoised per size."""
    comm, P, alg = inp.comm, inp.gpus, inp.algorithm
    memo: dict[float, float] = {}

    def cost(message_bytes: float) -> float:
        T = memo.get(message_bytes)
        if T is None:
            T = memo[message_bytes] = comm.cost("all_reduce", message_bytes, P, alg).total_s
        return T
    return cost


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineInputs:
    """One data-parallel optimizer step (SI units)."""

    gpus: int
    """Ranks P."""
    comm: CommModel
    """What prices each bucket's all-reduce (:mod:`commcost.comm.model`)."""
    step_s: float
    """Compute-only time of one micro-batch, t_c, seconds."""
    params: float = 0.0
    """Parameters N (a count); ignored when ``shape`` is given (then N comes from the shape)."""
    shape: TransformerSpec | None = None
    """The model for per-layer gradients and compute (a dense spec the timeline lays out exactly:
    :func:`commcost.workload.shape.fits_timeline`); None means a uniform gradient rate."""
    seq: int = 0
    """Training sequence length s, tokens, with a ``shape`` (sets attention's share of backward compute);
    unused without one."""
    bytes_per_grad: int = 2
    """Bytes per gradient element (bf16: 2)."""
    backward_fraction: float = 2.0 / 3.0
    """f_b: share of a micro-batch spent in backward."""
    grad_accum: int = 1
    """k: micro-batches per optimizer step (``no_sync`` on all but the last)."""
    optimizer_s: float = 0.0
    """t_opt: optimizer time after the last all-reduce, seconds."""
    algorithm: str = "auto"
    """All-reduce algorithm asked of ``comm`` (``auto``: the backend's fastest per bucket size)."""

    def __post_init__(self) -> None:
        for name in ("gpus", "bytes_per_grad", "grad_accum"):
            require_count(name, getattr(self, name))
        require_finite_positive("step_s", self.step_s)
        require_finite_positive("optimizer_s", self.optimizer_s, allow_zero=True)
        require_fraction("backward_fraction", self.backward_fraction)
        if self.shape is None:
            require_finite_positive("params", self.params)
        else:
            from commcost.workload.shape import check_timeline_shape  # only with a shape (drill start-up)

            check_timeline_shape(self.shape, self.seq)

    @property
    def message_bytes(self) -> float:
        """S = N * bytes_per_grad, with N from the shape when there is one."""
        if self.shape is None:
            return gradient_bytes(self.params, self.bytes_per_grad)
        from commcost.workload.shape import model_params  # only with a model shape (drill start-up)

        n = model_params(self.shape)
        return gradient_bytes(n, self.bytes_per_grad)


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientStream:
    """Gradient tensors in the order they become ready, with when (as a share of W)."""

    tensor_bytes: tuple[int, ...]
    """Bytes of each tensor, in ready order; empty for a uniform (continuous) stream."""
    ready_fraction: tuple[float, ...]
    """When each tensor is ready, as a share of the backward window (last is 1)."""
    total_bytes: float
    """S, bytes."""

    @property
    def uniform(self) -> bool:
        """True for the continuous, uniform-rate stream (no model shape)."""
        return not self.tensor_bytes


def gradient_stream(inp: TimelineInputs) -> GradientStream:
    """The ready order and ready times of the gradients (see the module docstring)."""
    if inp.shape is None:
        return GradientStream(tensor_bytes=(), ready_fraction=(), total_bytes=inp.message_bytes)
    from commcost.workload.shape import transformer_gradient_layers

    layers = transformer_gradient_layers(inp.shape, inp.seq)
    total_flops = sum(layer.backward_flops_per_token for layer in layers)
    sizes: list[int] = []
    ready_flops: list[float] = []
    done = 0.0
    for layer in reversed(layers):
        span = layer.backward_flops_per_token
        tensors = layer.tensor_params[::-1]
        layer_params = sum(tensors)
        seen = 0
        for n in tensors:
            seen += n
            sizes.append(n * inp.bytes_per_grad)
            ready_flops.append(done + span * seen / layer_params)
        done += span
    ready = tuple(min(1.0, r / total_flops) for r in ready_flops)
    return GradientStream(tensor_bytes=tuple(sizes), ready_fraction=ready, total_bytes=float(sum(sizes)))


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


def _buckets(stream: GradientStream, caps: DdpBucketCaps) -> tuple[list[float], list[float]]:
    """Bucket sizes (bytes) and ready shares, in reduction order."""
    if stream.uniform:
        S = stream.total_bytes
        c1, c = float(caps.first_bucket_cap_bytes), float(caps.bucket_cap_bytes)
        first, m, last = uniform_layout(S, c1, c)
        if last == 0:
            return [first], [1.0]
        sizes = [first] + [c] * m + [last]
        readies = [first / S] + [(first + j * c) / S for j in range(1, m + 1)] + [1.0]
        return sizes, readies
    n = len(stream.tensor_bytes)
    groups, _ = assign_buckets_by_size(stream.tensor_bytes,
                                       (caps.first_bucket_cap_bytes, caps.bucket_cap_bytes),
                                       order=range(n))
    sizes = [float(sum(stream.tensor_bytes[i] for i in g)) for g in groups]
    readies = [max(stream.ready_fraction[i] for i in g) for g in groups]
    return sizes, readies


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


BucketTiming.size_bytes.__doc__ = "Bytes in the bucket."
BucketTiming.ready_s.__doc__ = "When its last gradient is ready, seconds from the start of the step."
BucketTiming.start_s.__doc__ = "When its all-reduce starts: ``max(ready, previous end)``."
BucketTiming.end_s.__doc__ = "``start + T(size)``."


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """The simulated step (see the module docstring for every formula)."""

    bucket_cap_bytes: int
    """c: cap of every bucket after the first."""
    first_bucket_cap_bytes: int
    """c_1: cap of the first bucket."""
    message_bytes: float
    """S: the whole gradient, bytes."""
    buckets: tuple[BucketTiming, ...]
    """In reduction order."""
    compute_s: float
    """``k t_c``: end of the last backward, seconds."""
    backward_start_s: float
    """``t_0 = k t_c - W``."""
    backward_window_s: float
    """``W = f_b t_c``."""
    optimizer_s: float
    """t_opt."""
    wire_s: float
    """T_w: sum of the buckets' all-reduces."""
    unbucketed_s: float
    """T(S): one all-reduce of the whole gradient; ``T_w - T(S)`` is what bucketing adds (latency terms)."""
    exposed_s: float
    """E: communication after backward ends."""
    overlap_fraction: float
    """``(T_w - E)/T_w``; 1 when T_w = 0."""
    step_s: float
    """``max(t_e, end_n) + t_opt``."""
    efficiency: float
    """``(k t_c + t_opt)/step``."""
    no_overlap_s: float
    """Bound: ``k t_c + T_w + t_opt``."""
    perfect_overlap_s: float
    """Bound: ``k t_c + max(0, T_w - W) + t_opt``."""

    @property
    def busy_from(self) -> int:
        """Index ``j`` of the bucket that opens the final busy period of the stream.

        The last bucket that started the moment it was ready; from it on the stream
        never idles, so ``end_n = ready_j + sum_{i>=j} T_i``. ``j = n-1`` means the
        communication kept up and only the last bucket's all-reduce can be exposed.
        """
        for j in range(len(self.buckets) - 1, -1, -1):
            b = self.buckets[j]
            if b.start_s <= b.ready_s:
                return j
        return 0


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


def simulate_timeline(inp: TimelineInputs, caps: DdpBucketCaps | None = None, *,
                      allreduce_s: AllReduceCost | None = None,
                      stream: GradientStream | None = None) -> Timeline:
    """Simulate one optimizer step; ``caps`` default to DDP's (25 MiB, first 1 MiB)."""
    caps = caps or ddp_bucket_caps(None)
    cost = allreduce_s or comm_allreduce_cost(inp)
    stream = stream or gradient_stream(inp)
    if stream.uniform and stream.total_bytes / caps.bucket_cap_bytes > MAX_SIMULATED_BUCKETS:
        raise InputError(f"a {stream.total_bytes:.4g}-byte gradient in {caps.bucket_cap_bytes:,}-byte buckets is "
                         f"{stream.total_bytes / caps.bucket_cap_bytes:.3g} buckets; the timeline simulates at "
                         f"most {MAX_SIMULATED_BUCKETS:,}")
    sizes, readies = _buckets(stream, caps)
    W = inp.backward_fraction * inp.step_s
    t_e = inp.grad_accum * inp.step_s
    timings: list[BucketTiming] = []
    end, wire = _schedule(sizes, readies, t_e=t_e, W=W, cost=cost, memo={}, timings=timings)
    exposed = _exposed(end, t_e, wire)
    step = t_e + exposed + inp.optimizer_s
    return Timeline(
        bucket_cap_bytes=caps.bucket_cap_bytes, first_bucket_cap_bytes=caps.first_bucket_cap_bytes,
        message_bytes=stream.total_bytes, buckets=tuple(timings),
        compute_s=t_e, backward_start_s=t_e - W, backward_window_s=W, optimizer_s=inp.optimizer_s,
        wire_s=wire, unbucketed_s=cost(stream.total_bytes), exposed_s=exposed,
        overlap_fraction=(wire - exposed) / wire if wire > 0 else 1.0,
        step_s=step, efficiency=(t_e + inp.optimizer_s) / step,
        no_overlap_s=t_e + wire + inp.optimizer_s,
        perfect_overlap_s=t_e + max(0.0, wire - W) + inp.optimizer_s,
    )


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


def exposed_at(inp: TimelineInputs, caps: DdpBucketCaps, *, allreduce_s: AllReduceCost | None = None,
               stream: GradientStream | None = None) -> float:
    """``E`` at ``caps``: the number ``simulate_timeline(inp, caps).exposed_s`` gives, without the
    per-bucket list (O(1) for a uniform stream, :func:`uniform_end_s`)."""
    cost = allreduce_s or comm_allreduce_cost(inp)
    return _evaluate_caps(inp, stream or gradient_stream(inp), caps, cost, {})[2]


BEST_EXPOSED_REL_TOLERANCE = 0.05
"""Caps whose exposed time is within this fraction of the best (or :data:`BEST_EXPOSED_ABS_TOLERANCE_S`,
whichever is larger) are equally good."""
BEST_EXPOSED_ABS_TOLERANCE_S = 50e-6
"""50 us: below this a difference in exposed time is noise next to a step's jitter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketChoice:
    """The good range of bucket caps and the one recommended (:func:`pick_best`)."""

    best: DdpBucketCaps
    """The recommended caps: the largest in the good range exposing no more than the default."""
    best_exposed_s: float
    """E at ``best``, seconds."""
    min_exposed_s: float
    """The smallest E over the caps tried, seconds."""
    tolerance_s: float
    """``max(5% min E, 50 us)``, seconds."""
    good_min_cap_bytes: int
    """Smallest cap whose E is within the tolerance of the smallest."""
    good_max_cap_bytes: int
    """Largest cap whose E is within the tolerance of the smallest."""
    good_caps_bytes: tuple[int, ...] = ()
    """Every cap tried whose E is within the tolerance, smallest first: with a model shape the curve
    zig-zags, so caps between the smallest and the largest of these need not be within it."""
    caps_tried: int = 0
    """How many caps were tried."""
    default_exposed_s: float | None
    """E at PyTorch's default caps (None when not given), seconds."""
    rule: str = ("largest cap whose exposed time is within max(5%, 50 us) of the smallest and no more "
                 "than PyTorch's default")
    """The rule in words, for reports."""


def pick_best(points: list[tuple[float, DdpBucketCaps]], *, default_exposed_s: float | None = None,
              default_caps: DdpBucketCaps | None = None) -> BucketChoice:
    """The recommended cap among ``(E_s, caps)`` pairs (module docstring, "Best bucket").

    With ``default_exposed_s`` no cap exposing more than PyTorch's default is recommended: when
    every cap of the grid does, the default itself (``default_caps``) is.
    """
    if not points:
        raise InputError("no bucket caps to sweep")
    e_min = min(e for e, _ in points)
    if default_exposed_s is not None:
        e_min = min(e_min, default_exposed_s)
    tol = max(BEST_EXPOSED_REL_TOLERANCE * e_min, BEST_EXPOSED_ABS_TOLERANCE_S)
    good = [(e, c) for e, c in points if e <= e_min + tol]
    no_worse = 1e-9 * (default_exposed_s or 0.0)  # the closed form and the simulation differ in the last bits
    allowed = [(e, c) for e, c in good if default_exposed_s is None or e <= default_exposed_s - no_worse]
    if allowed:
        e_best, best = max(allowed, key=lambda ec: ec[1].bucket_cap_bytes)
    else:  # no cap of the grid beats the default: keep it
        e_best, best = default_exposed_s, default_caps or ddp_bucket_caps(None)
    caps = [c.bucket_cap_bytes for _, c in good] or [best.bucket_cap_bytes]
    return BucketChoice(best=best, best_exposed_s=e_best, min_exposed_s=e_min, tolerance_s=tol,
                        good_min_cap_bytes=min(caps), good_max_cap_bytes=max(caps),
                        good_caps_bytes=tuple(sorted(c.bucket_cap_bytes for _, c in good)), caps_tried=len(points),
                        default_exposed_s=default_exposed_s)


def best_caps(inp: TimelineInputs, caps_bytes: tuple[int, ...], *, first_bucket_bytes: int | None = None,
              allreduce_s: AllReduceCost | None = None, stream: GradientStream | None = None) -> BucketChoice:
    """The caps (:func:`caps_for`) over ``caps_bytes`` chosen by :func:`pick_best`, judged against
    PyTorch's default caps. The same choice as ``commcost.step.sweep.sweep_buckets``, without the curve."""
    stream = stream or gradient_stream(inp)
    cost = allreduce_s or comm_allreduce_cost(inp)
    memo: dict[float, float] = {}
    points = []
    for cap in sorted(caps_bytes):
        caps = caps_for(cap, first_bucket_bytes)
        points.append((_evaluate_caps(inp, stream, caps, cost, memo)[2], caps))
    default = _evaluate_caps(inp, stream, ddp_bucket_caps(None), cost, memo)[2]
    return pick_best(points, default_exposed_s=default)


def evaluate_caps(inp: TimelineInputs, caps: DdpBucketCaps, *, allreduce_s: AllReduceCost | None = None,
                  stream: GradientStream | None = None) -> tuple[int, float, float, float]:
    """``(buckets, T_w, E, step)`` at ``caps``: what :func:`simulate_timeline` computes, without the
    per-bucket list (O(1) for a uniform stream). ``allreduce_s`` overrides the inputs' CommModel
    (``commcost plan`` passes the cost of its data-parallel groups)."""
    return _evaluate_caps(inp, stream or gradient_stream(inp), caps, allreduce_s or comm_allreduce_cost(inp), {})


def _evaluate_caps(inp: TimelineInputs, stream: GradientStream, caps: DdpBucketCaps, cost: AllReduceCost,
                  memo: dict[float, float]) -> tuple[int, float, float, float]:
    """``(buckets, T_w, E, step)`` at ``caps``, as :func:`simulate_timeline` computes them, without
    the per-bucket list: in O(1) for a uniform stream (:func:`uniform_end_s`), by :func:`_schedule`
    otherwise. ``memo`` caches ``T(size)`` across calls."""
    W = inp.backward_fraction * inp.step_s
    t_e = inp.grad_accum * inp.step_s
    if stream.uniform:
        n, times, m, not_ready, wire = uniform_buckets(stream.total_bytes, caps, cost)
        end = uniform_end_s(SCALAR, backward_end_s=t_e, window_s=W, times_s=times, full_buckets=m,
                            not_ready=not_ready)
    else:
        sizes, readies = _buckets(stream, caps)
        end, wire = _schedule(sizes, readies, t_e=t_e, W=W, cost=cost, memo=memo, timings=None)
        n = len(sizes)
    exposed = _exposed(end, t_e, wire)
    return n, wire, exposed, t_e + exposed + inp.optimizer_s
