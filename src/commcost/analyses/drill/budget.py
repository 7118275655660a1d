"""The communication budget of one data-parallel step: Drill 3, parts (a) to (g).

Symbols: ``N`` parameters, ``S = N * bytes_per_grad`` the gradient message,
``P`` data-parallel ranks, ``a`` per-ring-step latency, ``B`` per-rank
bandwidth, ``t_c`` compute-only time of one micro-batch step, ``k``
micro-batches per optimizer step (gradient accumulation with ``no_sync``: one
all-reduce per optimizer step), ``f_b`` the backward share of a step.

Every collective is priced by the one CommModel of the inputs (:mod:`commcost.comm.model`):
on the drill's flat link the ring formulas below hold exactly; on a fabric or a calibrated
profile each is the model's own ``cost`` (algorithm, protocol, regime named in the result).

(a) ``S = N * bytes_per_grad``
(b) all-reduce ``T`` (flat link: the ring ``T = 2(P-1)a + 2(P-1)/P * S/B``)
(c) comm fraction ``T / (k t_c)``; fully exposed efficiency ``k t_c / (k t_c + T)``;
    overlapped ceiling ``k t_c / max(k t_c, T)``, reachable only if ``T`` fits in
    the last micro-batch's backward window ``f_b t_c`` -- and even then the last
    bucket's all-reduce (the tail) starts when backward ends and cannot hide.
    First order (the drill): a full last bucket, exposed ``~ max(T(c_tail), T - f_b t_c)``.
    Lower bound for DDP's default layout (:class:`commcost.step.overlap.OverlapBounds`):
    exposed ``>= max(T(r), T - f_b t_c)`` with ``r`` its actual last bucket.
(d) threshold label: ``COMMUNICATION-BOUND`` when ``T / (k t_c) > threshold``
    (the drill's script). Overlap verdict: from the simulated timeline at the recommended
    cap, ``HIDES`` when what stays exposed is within the tail budget; the first-order reading
    compares ``T`` with ``f_b t_c``.
(e) fixes: accumulation over ``k'`` micro-batches (ratio ``T / (k' t_c)``);
    ZeRO-2 (ring reduce-scatter of gradients + ring all-gather of parameters,
    each ``(P-1)a + (P-1)/P * S/B``: the same bytes as the all-reduce); with ``k > 1`` sharded
    gradients are reduce-scattered after every micro-batch, ``k T_rs + T_ag`` (DeepSpeed ZeRO-2), while
    stacks that keep full gradients until the last micro-batch pay ``T_rs + T_ag``
    (:mod:`commcost.parallel.zero`);
    the group inside one node (the all-reduce on the intra-node link).
(f) buckets: :mod:`commcost.step.buckets`.
(g) scaling: the terms at other ``P`` on the same fabric; the global batch grows
    as ``P/P_0`` at a fixed per-GPU batch; the bandwidth term tends to ``2S/B``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commcost.step.buckets import BucketAdvice, BucketRow, PYTORCH_DEFAULT_BUCKET_BYTES, PYTORCH_FIRST_BUCKET_BYTES, \
    bucket_advice, bucket_row, crossover_bytes, last_bucket_bytes
from commcost.comm.collectives import CollectiveCost
from commcost.comm.model import CommModel
from commcost.core.errors import InputError
from commcost.step.bucket_advice import BucketRecommendation, recommend_buckets
from commcost.step.ddp_buckets import DdpBucketCaps, ddp_bucket_caps
from commcost.step.overlap import OverlapBounds
from commcost.step.timeline import (MAX_SIMULATED_BUCKETS, BucketChoice, Timeline, TimelineInputs,
                                    exposed_at, gradient_stream, simulate_timeline)
from commcost.core.units import GB, MiB
from commcost.core.validation import require_count, require_finite_positive
from commcost.core.dtypes import gradient_bytes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Literal

    from commcost.comm.link import Link
    from commcost.workload.transformer import TransformerSpec

__all__ = [
    "DEFAULT_INTRA_NODE_BANDWIDTH_BYTES_PER_S", "BudgetInputs", "StepAnalysis",
    "GradAccumFix", "Zero2Fix", "IntraNodeFix", "Fixes", "BucketTable",
    "GpuScalingRow", "Budget", "communication_budget", "scaling_gpu_counts",
    "SimulatedOverlap", "simulated_overlap", "budget_timeline_inputs",
]

DEFAULT_INTRA_NODE_BANDWIDTH_BYTES_PER_S = 300 * GB
"""The drill's intra-node figure, 300 GB/s per GPU."""



@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetInputs:
    """Everything the budget of one data-parallel step depends on (SI units)."""

    gpus: int
    """Ranks P in the data-parallel group."""
    comm: CommModel
    """What prices every collective (flat link, fabric or calibrated profile)."""
    params: float
    """Parameters N (a count, not billions)."""
    step_s: float
    """Measured compute-only time of one micro-batch step, seconds."""
    bytes_per_grad: int = 2
    """Bytes per gradient element (bf16: 2)."""
    grad_accum: int = 1
    """Micro-batches k per optimizer step; one all-reduce per optimizer step."""
    backward_fraction: float = 2.0 / 3.0
    """Share f_b of a step spent in the backward pass (forward ~1/3, backward ~2/3)."""
    threshold: float = 0.5
    """The drill script's label threshold on ``T / step``."""
    fix_grad_accum: int = 4
    """Micro-batches per optimizer step for the gradient-accumulation fix."""
    intra_node_comm: CommModel
    """One node's link for fix (e)3, "DP inside a node", built by the caller's resolver (the CLI's:
    :func:`commcost.cli._fabric.intra_node_model`; the drill's ``--intra-bw``, default
    :data:`DEFAULT_INTRA_NODE_BANDWIDTH_BYTES_PER_S`, at the flat link's latency). The budget
    builds no CommModel of its own."""
    gpus_per_node: int = 8
    """GPUs in one node (one NVLink domain)."""
    bucket_caps_bytes: tuple[float, ...] = (1 * MiB, 25 * MiB)
    """Bucket caps for part (f), bytes."""
    tail_bucket_bytes: float = PYTORCH_DEFAULT_BUCKET_BYTES
    """Size of the last bucket, whose all-reduce cannot hide (DDP default 25 MiB)."""
    max_latency_share: float = 0.2
    """Largest latency share of one bucket accepted when advising a bucket size."""
    tail_budget_fraction: float = 0.05
    """Largest exposed tail accepted, as a fraction of the compute step."""
    scaling_gpus: tuple[int, ...] = ()
    """GPU counts for part (g); empty means :func:`scaling_gpu_counts`."""
    algorithm: str = "auto"
    """Algorithm asked of ``comm`` (``auto``: the backend's fastest per size, as NCCL's tuner picks)."""
    shape: TransformerSpec | None = None
    """The model's shape when known (``--model``): the simulated overlap and the bucket advice then use
    its per-tensor gradient stream (:mod:`commcost.step.bucket_advice`); ``params`` must be its count
    (:func:`commcost.workload.shape.model_params`). None: gradients at a uniform rate."""
    seq: int = 0
    """Training sequence length s, tokens, with a ``shape`` (the timeline's :attr:`TimelineInputs.seq`);
    unused without one."""

    def __post_init__(self) -> None:
        require_count("gpus", self.gpus)
        require_finite_positive("params", self.params)
        require_finite_positive("step_s", self.step_s)
        require_count("bytes_per_grad", self.bytes_per_grad)
        require_count("grad_accum", self.grad_accum)
        require_count("fix_grad_accum", self.fix_grad_accum)
        require_count("gpus_per_node", self.gpus_per_node)
        for name, value in (("backward_fraction", self.backward_fraction),
                            ("threshold", self.threshold),
                            ("tail_budget_fraction", self.tail_budget_fraction)):
            require_finite_positive(name, value)
            if value > 1:
                raise InputError(f"{name} must be in (0, 1], got {value:g}")
        if not self.bucket_caps_bytes:
            raise InputError("bucket_caps_bytes must not be empty")
        for cap in self.bucket_caps_bytes:
            require_finite_positive("bucket cap (bytes)", cap)
        require_finite_positive("tail_bucket_bytes", self.tail_bucket_bytes)
        for g in self.scaling_gpus:
            require_count("scaling gpus", g)
        if not isinstance(self.comm, CommModel):
            raise InputError(f"comm must be a CommModel, got {type(self.comm).__name__}")
        if not isinstance(self.intra_node_comm, CommModel):
            raise InputError(f"intra_node_comm must be a CommModel, got {type(self.intra_node_comm).__name__}")
        if self.shape is not None:
            from commcost.workload.shape import check_timeline_shape  # only with a model (drill start-up)

            check_timeline_shape(self.shape, self.seq)


def scaling_gpu_counts(gpus: int) -> tuple[int, ...]:
    """Powers of two from 8 up to at least ``8 * gpus``, plus ``gpus`` itself, sorted."""
    counts = {gpus}
    p = 8
    while True:
        counts.add(p)
        if p >= 8 * gpus:
            break
        p *= 2
    return tuple(sorted(counts))


@dataclass(frozen=True, slots=True, kw_only=True)
class StepAnalysis:
    """Part (c) and (d): the all-reduce against the compute of one optimizer step."""

    compute_s: float
    """``k t_c``: compute-only time of one optimizer step, seconds."""
    comm_s: float
    """``T``, seconds."""
    comm_fraction: float
    """``T / (k t_c)``."""
    efficiency_exposed: float
    """``k t_c / (k t_c + T)``: nothing overlaps."""
    efficiency_overlapped_ceiling: float
    """``k t_c / max(k t_c, T)``: everything overlaps (reachable only if ``ceiling_reachable``)."""
    ceiling_reachable: bool
    """``T <= f_b t_c``: the ceiling is physically reachable (T fits in the backward window)."""
    backward_window_s: float
    """``f_b t_c``: the last micro-batch's backward, the only time comm can hide in."""
    backward_margin_s: float
    """``f_b t_c - T``; negative when T does not fit."""
    tail_s: float
    """All-reduce of a full last bucket (``min(tail_bucket, S)``), the drill's first-order tail."""
    first_order_exposed_s: float
    """``max(tail, T - f_b t_c)``: the drill's first-order estimate of what stays exposed."""
    efficiency_best_case: float
    """``k t_c / (k t_c + first_order_exposed)``."""
    default_last_bucket_bytes: float
    """``r``: the last bucket of DDP's default layout (1 MiB first, then 25 MiB), bytes."""
    exposed_lower_bound_s: float
    """``max(T(r), T - f_b t_c)``: exposed time DDP's default buckets cannot avoid (a true bound on
    their simulated exposed time)."""
    bounds: OverlapBounds
    """No overlap / perfect overlap within the window / simulated, for this step."""
    threshold: float
    """Threshold of the label."""
    label: Literal["COMMUNICATION-BOUND", "COMPUTE-BOUND"]
    """The drill script's label: ``T / (k t_c) > threshold``."""
    overlap_verdict: Literal["HIDES", "DOES NOT HIDE", "NO COMMUNICATION"]
    """From the simulated timeline at the recommended cap: HIDES when what stays exposed is within the
    tail budget; the first-order verdict when the step is not simulated."""
    first_order_verdict: Literal["HIDES", "DOES NOT HIDE", "NO COMMUNICATION"]
    """The drill's first-order reading: whether T fits inside the backward window."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GradAccumFix:
    """Fix 1: accumulate over more micro-batches; one all-reduce per optimizer step."""

    micro_batches: int
    compute_s: float
    comm_s: float
    comm_to_compute: float
    global_batch_growth: float
    """The global batch grows by this factor: the price of the fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Zero2Fix:
    """Fix 2: ZeRO-2, reduce-scatter of gradients plus all-gather of parameters."""

    reduce_scatter: CollectiveCost
    all_gather: CollectiveCost
    comm_s: float
    """``k T_rs + T_ag``: sharded gradients are reduce-scattered after each of the ``k`` micro-batches."""
    compute_s: float
    comm_to_compute: float
    reduce_scatters_per_step: int = 1
    """``k``: one reduce-scatter per micro-batch (sharded gradients cannot accumulate locally)."""
    full_gradient_comm_s: float = 0.0
    """``T_rs + T_ag``: stacks that keep full gradients until the last micro-batch (Megatron's distributed
    optimizer, FSDP ``SHARD_GRAD_OP`` under ``no_sync``), at the memory of unsharded gradients."""
    bytes_sent_per_rank: float
    """``(k+1) (P-1)/P * S``: what each rank sends; equal to the all-reduce's when ``k = 1``."""
    allreduce_bytes_sent_per_rank: float
    """``2 (P-1)/P * S`` for the plain all-reduce, for comparison."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IntraNodeFix:
    """Fix 3: the data-parallel group on the intra-node link."""

    link: Link | None
    """The intra-node link when it is a flat link (None for another model)."""
    allreduce: CollectiveCost
    compute_s: float
    comm_to_compute: float
    available: bool
    """True when P <= GPUs per node."""
    nodes_spanned: int
    """``ceil(P / gpus_per_node)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fixes:
    """Part (e)."""

    baseline_comm_to_compute: float
    grad_accum: GradAccumFix
    zero2: Zero2Fix
    intra_node: IntraNodeFix


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketTable:
    """Part (f)."""

    crossover_bytes: float
    rows: tuple[BucketRow, ...]
    advice: BucketAdvice


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuScalingRow:
    """One row of part (g): the same gradient and fabric at another group size."""

    gpus: int
    allreduce: CollectiveCost
    crossover_bytes: float
    comm_fraction: float
    global_batch_growth: float
    """``P / P_0`` at a fixed per-GPU batch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The whole report: one field per part of the drill."""

    inputs: BudgetInputs
    message_bytes: float
    """(a) ``S``."""
    allreduce: CollectiveCost
    """(b) ring all-reduce of ``S``."""
    step: StepAnalysis
    """(c), (d)."""
    fixes: Fixes
    """(e)."""
    buckets: BucketTable
    """(f)."""
    scaling: tuple[GpuScalingRow, ...]
    """(g)."""
    bandwidth_limit_s: float | None
    """``2S/B``: the bandwidth term as P grows without bound on a flat link (None otherwise)."""
    overlap: SimulatedOverlap | None = None
    """The DDP bucket timeline of this step (:func:`simulated_overlap`)."""

    @property
    def bucket_advice(self) -> BucketRecommendation | None:
        """The one bucket advice (:mod:`commcost.step.bucket_advice`); None when not simulated."""
        return None if self.overlap is None else self.overlap.advice


def _collective(inp: BudgetInputs, op: str, S: float, P: int) -> CollectiveCost:
    """``op`` on ``S`` bytes over ``P`` ranks from the inputs' CommModel (part (g): the same fabric with
    the nodes ``P`` needs)."""
    comm = inp.comm if P <= inp.gpus else inp.comm.scaled()
    return comm.cost(op, S, P, inp.algorithm)


def _step_analysis(inp: BudgetInputs, T: CollectiveCost, overlap: SimulatedOverlap | None,
                   tail_budget_s: float) -> StepAnalysis:
    compute_s = inp.grad_accum * inp.step_s
    comm_s = T.total_s
    window_s = inp.backward_fraction * inp.step_s
    tail = _collective(inp, "all_reduce", min(inp.tail_bucket_bytes, T.message_bytes), inp.gpus)
    first_order = max(tail.total_s, comm_s - window_s) if comm_s > 0 else 0.0
    r = last_bucket_bytes(T.message_bytes, PYTORCH_DEFAULT_BUCKET_BYTES, PYTORCH_FIRST_BUCKET_BYTES)
    last = _collective(inp, "all_reduce", r, inp.gpus)
    lower = max(last.total_s, comm_s - window_s) if comm_s > 0 else 0.0
    fraction = comm_s / compute_s
    if comm_s == 0:
        first: Literal["HIDES", "DOES NOT HIDE", "NO COMMUNICATION"] = "NO COMMUNICATION"
    else:
        first = "HIDES" if comm_s <= window_s else "DOES NOT HIDE"
    verdict = first
    if overlap is not None and comm_s > 0:
        verdict = "HIDES" if overlap.best.exposed_s <= tail_budget_s else "DOES NOT HIDE"
    bounds = OverlapBounds(compute_s=compute_s, comm_s=comm_s, window_s=window_s,
                           simulated_s=None if overlap is None else overlap.best.step_s)
    return StepAnalysis(
        compute_s=compute_s, comm_s=comm_s, comm_fraction=fraction,
        efficiency_exposed=compute_s / (compute_s + comm_s),
        efficiency_overlapped_ceiling=compute_s / max(compute_s, comm_s),
        ceiling_reachable=comm_s <= window_s,
        backward_window_s=window_s, backward_margin_s=window_s - comm_s,
        tail_s=tail.total_s, first_order_exposed_s=first_order,
        efficiency_best_case=compute_s / (compute_s + first_order),
        default_last_bucket_bytes=r, exposed_lower_bound_s=lower, bounds=bounds,
        threshold=inp.threshold,
        label="COMMUNICATION-BOUND" if fraction > inp.threshold else "COMPUTE-BOUND",
        overlap_verdict=verdict, first_order_verdict=first,
    )


def _fixes(inp: BudgetInputs, S: float, T: CollectiveCost) -> Fixes:
    compute_s = inp.grad_accum * inp.step_s
    P = inp.gpus
    accum_compute_s = inp.fix_grad_accum * inp.step_s
    grad_accum = GradAccumFix(
        micro_batches=inp.fix_grad_accum, compute_s=accum_compute_s, comm_s=T.total_s,
        comm_to_compute=T.total_s / accum_compute_s,
        global_batch_growth=inp.fix_grad_accum / inp.grad_accum,
    )
    rs = _collective(inp, "reduce_scatter", S, P)
    ag = _collective(inp, "all_gather", S, P)
    k = inp.grad_accum
    zero2 = Zero2Fix(
        reduce_scatter=rs, all_gather=ag, comm_s=k * rs.total_s + ag.total_s, compute_s=compute_s,
        comm_to_compute=(k * rs.total_s + ag.total_s) / compute_s, reduce_scatters_per_step=k,
        full_gradient_comm_s=rs.total_s + ag.total_s,
        bytes_sent_per_rank=(k + 1) * (P - 1) / P * S,
        allreduce_bytes_sent_per_rank=2 * (P - 1) / P * S,
    )
    intra_comm = inp.intra_node_comm
    intra_T = intra_comm.scaled().cost("all_reduce", S, P)
    intra = IntraNodeFix(
        link=intra_comm.flat_link, allreduce=intra_T, compute_s=compute_s,
        comm_to_compute=intra_T.total_s / compute_s,
        available=P <= inp.gpus_per_node, nodes_spanned=math.ceil(P / inp.gpus_per_node),
    )
    return Fixes(baseline_comm_to_compute=T.total_s / compute_s,
                 grad_accum=grad_accum, zero2=zero2, intra_node=intra)


def _scaling_counts(inp: BudgetInputs) -> tuple[int, ...]:
    counts = inp.scaling_gpus or scaling_gpu_counts(inp.gpus)
    limit = inp.comm.scaled().max_gpus()
    return tuple(g for g in counts if limit is None or g <= limit)


def communication_budget(inp: BudgetInputs) -> Budget:
    """Compute parts (a) to (g) of the drill for ``inp``."""
    S = gradient_bytes(inp.params, inp.bytes_per_grad)
    T = _collective(inp, "all_reduce", S, inp.gpus)
    compute_s = inp.grad_accum * inp.step_s
    tail_budget_s = inp.tail_budget_fraction * compute_s
    rows = tuple(bucket_row(S, cap, inp.gpus, inp.comm, inp.algorithm) for cap in inp.bucket_caps_bytes)
    advice = bucket_advice(S, inp.gpus, inp.comm, max_latency_share=inp.max_latency_share,
                           tail_budget_s=tail_budget_s, algorithm=inp.algorithm)
    scaling = []
    for g in _scaling_counts(inp):
        Tg = _collective(inp, "all_reduce", S, g)
        comm_g = inp.comm if g <= inp.gpus else inp.comm.scaled()
        scaling.append(GpuScalingRow(
            gpus=g, allreduce=Tg, crossover_bytes=crossover_bytes(comm_g, g, near_bytes=S, algorithm=inp.algorithm),
            comm_fraction=Tg.total_s / compute_s, global_batch_growth=g / inp.gpus,
        ))
    link = inp.comm.flat_link
    overlap = simulated_overlap(inp)
    return Budget(
        inputs=inp, message_bytes=S, allreduce=T,
        step=_step_analysis(inp, T, overlap, tail_budget_s), fixes=_fixes(inp, S, T),
        buckets=BucketTable(crossover_bytes=advice.crossover_bytes, rows=rows, advice=advice),
        scaling=tuple(scaling),
        bandwidth_limit_s=None if link is None else 2 * S / link.bandwidth_bytes_per_s,
        overlap=overlap,
    )


# --- The simulated overlap (the DDP bucket timeline) ---------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatedOverlap:
    """What stays exposed when DDP's buckets overlap the backward pass (uniform gradient rate).

    From :func:`commcost.step.timeline.simulate_timeline`: each bucket's all-reduce
    starts when the bucket is full and the previous one is done; ``E`` is the
    communication left after backward ends.
    """

    default: Timeline
    """PyTorch's default (``bucket_cap_mb=None``): 25 MiB, first bucket 1 MiB."""
    best: Timeline
    """The recommended cap on :func:`commcost.step.timeline.bucket_grid` (:func:`commcost.step.timeline.pick_best`)."""
    choice: BucketChoice
    """The good range of caps, the tolerance and the rule behind ``best``."""
    advice: BucketRecommendation
    """``choice`` as the one bucket advice that ``timeline`` and ``plan`` give too."""
    exposed_by_cap_s: tuple[float | None, ...]
    """``E`` for each of ``bucket_caps_bytes`` as an explicit ``bucket_cap_mb`` (first bucket = cap)."""


def simulated_overlap(inp: BudgetInputs) -> SimulatedOverlap | None:
    """Simulate the default, the best and each requested cap (:mod:`commcost.step.timeline`); None
    when DDP's default 25 MiB buckets would number more than :data:`MAX_SIMULATED_BUCKETS`.

    The best cap is the one bucket advice (:func:`commcost.step.bucket_advice.recommend_buckets`), per
    tensor when the inputs carry the model's shape. The requested caps and the search for the best
    one use the closed form for a uniform gradient rate (:func:`commcost.step.timeline.exposed_at`, :func:`commcost.step.timeline.best_caps`);
    the default and the best are simulated bucket by bucket for their :class:`Timeline`.
    """
    tl_inp = budget_timeline_inputs(inp)
    stream = gradient_stream(tl_inp)
    if stream.total_bytes / PYTORCH_DEFAULT_BUCKET_BYTES > MAX_SIMULATED_BUCKETS:
        return None  # minutes and gigabytes for a bucket-by-bucket timeline: not simulated
    exposed: list[float | None] = []
    for cap in inp.bucket_caps_bytes:
        cap_bytes = max(1, int(cap))
        if stream.total_bytes / cap_bytes > MAX_SIMULATED_BUCKETS:
            exposed.append(None)
            continue
        caps = DdpBucketCaps(bucket_cap_bytes=cap_bytes, first_bucket_cap_bytes=cap_bytes)
        exposed.append(exposed_at(tl_inp, caps, stream=stream))
    advice = recommend_buckets(tl_inp, stream=stream)
    return SimulatedOverlap(
        default=simulate_timeline(tl_inp, ddp_bucket_caps(None), stream=stream),
        best=simulate_timeline(tl_inp, advice.choice.best, stream=stream),
        exposed_by_cap_s=tuple(exposed), choice=advice.choice, advice=advice,
    )


def budget_timeline_inputs(inp: BudgetInputs) -> TimelineInputs:
    """The :class:`TimelineInputs` of this budget: the same CommModel, gradient and step, so
    ``commcost timeline`` with the same flags simulates exactly this step."""
    return TimelineInputs(gpus=inp.gpus, comm=inp.comm, step_s=inp.step_s, params=inp.params, shape=inp.shape,
                          seq=inp.seq, bytes_per_grad=inp.bytes_per_grad, backward_fraction=inp.backward_fraction,
                          grad_accum=inp.grad_accum, algorithm=inp.algorithm)

