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

from dataclasses import dataclass

from commcost.step.ddp_buckets import DdpBucketCaps, assign_buckets_by_size, ddp_bucket_caps
from commcost.core.errors import InputError
from commcost.core.validation import require_count, require_finite_positive, require_fraction
from commcost.core.dtypes import gradient_bytes
from commcost.core.xp import SCALAR
from commcost.step.overlap import OverlapBounds

from commcost.step.bucket_schedule import (AllReduceCost, BucketTiming, _exposed, _schedule, bucket_grid, caps_for,
                                           exposed_after_s, uniform_buckets, uniform_end_s, uniform_layout)

__all__ = [
    "AllReduceCost", "comm_allreduce_cost", "TimelineInputs", "GradientStream", "BucketTiming",
    "Timeline", "BucketChoice", "gradient_stream", "simulate_timeline", "bucket_grid", "caps_for", "exposed_at", "uniform_layout",
    "evaluate_caps", "uniform_buckets", "uniform_end_s", "exposed_after_s",
    "best_caps", "pick_best",
]  # the bucket sweep (CurvePoint, BucketSweep, sweep_buckets) is commcost.step.sweep

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
    bounds: OverlapBounds
    """The step's bounds (:class:`commcost.step.overlap.OverlapBounds`, the one definition): ``C = k t_c``,
    ``T = T_w``, the window ``W``, ``t_o = t_opt``, and this simulation's step."""

    @property
    def no_overlap_s(self) -> float:
        """Bound: ``k t_c + T_w + t_opt`` (:attr:`bounds`)."""
        return self.bounds.no_overlap_s

    @property
    def perfect_overlap_s(self) -> float:
        """Bound: ``k t_c + max(0, T_w - W) + t_opt`` (:attr:`bounds`)."""
        return self.bounds.perfect_overlap_s

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
        bounds=OverlapBounds(compute_s=t_e, comm_s=wire, window_s=W, after_s=inp.optimizer_s, simulated_s=step),
    )


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
              allreduce_s: AllReduceCost | None = None, stream: GradientStream | None = None,
              arrays: bool = False) -> BucketChoice:
    """The caps (:func:`caps_for`) over ``caps_bytes`` chosen by :func:`pick_best`, judged against
    PyTorch's default caps. The same choice as ``commcost.step.sweep.sweep_buckets``, without the curve.
    ``arrays`` (numpy needed): a uniform stream's bucket sizes at every cap are priced first in one pass where
    ``allreduce_s`` offers it (its ``price_many``; ``commcost search`` advises many layouts), the same floats."""
    stream = stream or gradient_stream(inp)
    cost = allreduce_s or comm_allreduce_cost(inp)
    memo: dict[float, float] = {}
    points = []
    if arrays and stream.uniform and hasattr(cost, "price_many"):
        sizes = []
        for caps in [caps_for(cap, first_bucket_bytes) for cap in caps_bytes] + [ddp_bucket_caps(None)]:
            c = float(caps.bucket_cap_bytes)        # uniform_buckets prices T(c_1), T(c), T(last)
            first, _, last = uniform_layout(stream.total_bytes, float(caps.first_bucket_cap_bytes), c)
            sizes += [first, c, last]
        cost.price_many(sizes)
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
