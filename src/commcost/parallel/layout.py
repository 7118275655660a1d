"""A parallel layout: dp x tp x pp x cp ranks (ep carved out of dp*cp), ZeRO stage, and where groups sit.

Symbols: ``W`` world size, ``t`` tensor, ``p`` pipeline, ``v`` virtual stages per pipeline rank,
``c`` context, ``d`` data, ``e`` expert parallel sizes; ``b`` micro-batch, ``B`` global batch
(sequences), ``m = B / (b d)`` micro-batches per step per pipeline; ``G`` GPUs per node.

Rules (Megatron-LM ``megatron/training/arguments.py`` and ``core/parallel_state.py``):
``W = d t p c``; ``B`` divisible by ``b d``; ``L`` divisible by ``p v``; ``n_q`` and ``n_kv``
divisible by ``t``; ``e t_e`` divides ``t d c`` (expert layers reuse those ranks, Megatron-Core's MoE parallel
folding: expert tensor parallelism ``t_e`` is ``--etp``, by default t where ``e`` divides ``d c``, else 1) and ``e`` divides ``E``;
``v > 1`` needs ``p > 1`` and ``m`` divisible by ``p`` (the interleaved schedule's requirement);
sequence parallelism needs ``s / c`` divisible by ``t``; context parallelism needs ``s``
divisible by ``2c`` (the load-balanced causal split).

Placement (:func:`group_ranks_per_node`): ranks are numbered with the dimensions of ``order``
from innermost (fastest varying) out, Megatron's default ``tp-cp-ep-dp-pp``: a group of size
``n`` whose dimension varies with stride ``k`` (the product of the sizes inside it) has
``min(n, G / k)`` ranks on a node when ``k < G``, else 1, and spans ``ceil(n / that)`` nodes.
Expert layers number the same ranks again with their own sizes (Megatron-Core
``parallel_state.initialize_model_parallel``: a second ``RankGenerator(tp=t_e, ep=e, dp=d_e, pp=p, cp=1,
order=order)``): the dimensions of ``order`` with tp as ``t_e``, cp as 1, ep as ``e`` and dp as the
expert data parallel ``d_e = t d c / (e t_e)``. The EP group's stride is the product of the expert
sizes inside ep in ``order`` (``t_e`` under the default, 1 under ``ep-tp-...``), the ETP group's that
of those inside tp, the expert-DP group's that of those inside dp (:meth:`Layout.expert_stride`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.limits import MAX_GLOBAL_BATCH, MAX_GPUS
from commcost.core.validation import require_at_most, require_count
from commcost.core.xp import SCALAR

__all__ = ["Layout", "CommOp", "DEFAULT_ORDER", "Dimension", "Recompute", "group_ranks_per_node", "layout_group", "group_placement",
           "pair_ranks_per_node", "stage_layers", "stage_slots", "split_slots", "stage_end_shares", "heaviest_stage_layers",
           "check_layout", "check_order", "group_of", "pair_ranks", "leaves_node", "order_stride", "dense_sizes", "expert_sizes",
           "expert_data_parallel", "layer_passes"]

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's ``--rank-order`` default (``parallel_state.initialize_model_parallel(order=...)``)."""

class Dimension(StrEnum):
    """A parallel dimension of the dense layers, in Megatron-LM's default rank order (tp innermost). A ``str``:
    ``Dimension.TP == "tp"``, it hashes, prints and goes to JSON as ``"tp"``."""

    TP = "tp"
    """Tensor parallelism."""
    CP = "cp"
    """Context parallelism."""
    EP = "ep"
    """Expert parallelism."""
    DP = "dp"
    """Data parallelism (ZeRO shards over it)."""
    PP = "pp"
    """Pipeline parallelism."""


DIMENSIONS = tuple(Dimension)
"""The dimensions a rank order names, in the default order (``tp, cp, ep, dp, pp``)."""


class Recompute(StrEnum):
    """Activation recomputation (``--recompute``; :attr:`Layout.recompute`). A ``str``: ``"full"`` compares equal to
    :attr:`FULL` and JSON writes the value. The search grid codes it by position in ``tuple(Recompute)`` (0, 1, 2:
    :data:`commcost.analyses.plan.space.RECOMPUTE`)."""

    NONE = "none"
    """Every activation kept for the backward."""
    SELECTIVE = "selective"
    """The attention core recomputed (Korthikanti et al. 2022, section 5), or the stack's selective set."""
    FULL = "full"
    """Every layer's forward recomputed from its input in the backward."""


_RECOMPUTE_VALUES = frozenset(r.value for r in Recompute)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """How ``W = d t p c`` GPUs split one model (validation of the shape-dependent rules: :func:`check_layout`)."""

    dp: int
    """Data-parallel size d (replicas of each dense weight shard, times c)."""
    tp: int = 1
    """Tensor-parallel size t."""
    pp: int = 1
    """Pipeline-parallel size p."""
    vp: int = 1
    """Virtual pipeline stages per pipeline rank v (interleaved 1F1B when > 1)."""
    cp: int = 1
    """Context-parallel size c (the sequence split across c ranks)."""
    ep: int = 1
    """Expert-parallel size e (experts split across e of the d*c ranks)."""
    zero: int = 0
    """ZeRO stage 0-3 over the d*c ranks: 1 shards optimizer states, 2 also gradients, 3 also weights (FSDP)."""
    sequence_parallel: bool = False
    """Megatron's sequence parallelism: norms and dropout split over t; TP all-reduce becomes all-gather + reduce-scatter."""
    recompute: Recompute = Recompute.NONE
    """Activation recomputation (:class:`Recompute`; a string of its values is taken): ``none``, ``selective``
    (attention core, Korthikanti et al. 2022) or ``full`` (every layer)."""
    micro_batch: int = 1
    """Sequences per micro-batch b."""
    global_batch: int = 1
    """Sequences per optimizer step B."""
    order: str = DEFAULT_ORDER
    """Placement order, innermost first (``tp-cp-ep-dp-pp``)."""
    etp: int = 0
    """Expert tensor-parallel size t_e (Megatron's ``--expert-tensor-parallel-size``); 0 takes Megatron's
    default t, folded to 1 where ``e t`` does not divide ``t d c``. Expert data parallel
    ``d_e = t d c / (e t_e)`` follows."""
    shard_group: int = 0
    """Hybrid sharding (PyTorch FSDP ``HYBRID_SHARD``, ZeRO-3 only): weights, gradients and optimizer
    states are sharded over groups of this many of the d c ranks and replicated across the
    ``d c / shard_group`` groups; 0 shards over all d c ranks."""
    uneven_pipeline: bool = False
    """Layers need not divide by ``p v`` (Megatron's ``pipeline_model_parallel_layout``): the heaviest
    stage then holds ``ceil(L/(p v))`` layers per chunk (:func:`stage_layers`)."""
    split_counts_ends: bool = False
    """The pipeline split counts the embedding and the output head (with the loss) as one layer each, so
    the first and the last stage hold one layer fewer (Megatron-Core's ``account_for_embedding_in_pipeline_split``
    and ``account_for_loss_in_pipeline_split``; Megatron-DeepSpeed's ``--pp-partition-method
    'type:transformer|embedding'``; the Llama 3 paper's balanced pipeline): ``L + 2`` slots over the ``p v``
    chunks (:func:`stage_layers`, :func:`stage_end_shares`). Needs ``p > 1``."""

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "vp", "cp", "ep", "micro_batch", "global_batch"):
            require_count(name, getattr(self, name))
        require_at_most("global_batch", self.global_batch, MAX_GLOBAL_BATCH, "sequences")
        require_at_most("dp x tp x pp x cp", self.dp * self.tp * self.pp * self.cp, MAX_GPUS, "GPUs")
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise InputError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in _RECOMPUTE_VALUES:
            raise InputError(f"recompute must be none, selective or full, got {self.recompute!r}")
        object.__setattr__(self, "recompute", Recompute(self.recompute))
        if self.shard_group:
            require_count("shard_group", self.shard_group)
            if self.zero != 3:
                raise InputError(f"a hybrid shard group needs ZeRO-3 / FSDP, got zero = {self.zero}")
            if (self.dp * self.cp) % self.shard_group:
                raise InputError(f"shard group {self.shard_group} must divide dp x cp = {self.dp} x {self.cp} = "
                                 f"{self.dp * self.cp}")
        check_order(self.order)
        if self.global_batch % (self.micro_batch * self.dp):
            raise InputError(
                f"global batch {self.global_batch} is not a multiple of micro-batch x dp = "
                f"{self.micro_batch} x {self.dp} = {self.micro_batch * self.dp}")
        if (self.tp * self.dp * self.cp) % self.ep:
            raise InputError(f"ep ({self.ep}) must divide tp x dp x cp = {self.tp} x {self.dp} x {self.cp} = "
                             f"{self.tp * self.dp * self.cp} (expert layers fold onto those ranks)")
        if self.etp:
            require_count("etp", self.etp)
            if (self.tp * self.dp * self.cp) % (self.ep * self.etp):
                raise InputError(f"ep x etp = {self.ep} x {self.etp} = {self.ep * self.etp} must divide tp x dp x cp = "
                                 f"{self.tp} x {self.dp} x {self.cp} = {self.tp * self.dp * self.cp} "
                                 "(expert layers fold onto those ranks)")
        if self.split_counts_ends and self.pp == 1:
            raise InputError("a pipeline split that counts the embedding and the head needs pp > 1")
        if self.vp > 1:
            if self.pp == 1:
                raise InputError(f"vp = {self.vp} needs pp > 1 (virtual stages interleave a pipeline)")
            if self.micro_batches % self.pp:
                raise InputError(
                    f"the interleaved schedule needs micro-batches m = B / (b d) = {self.global_batch} / "
                    f"({self.micro_batch} x {self.dp}) = {self.micro_batches} to be a multiple of pp = {self.pp}")

    @property
    def world(self) -> int:
        """``W = d t p c``."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def micro_batches(self) -> int:
        """``m = B / (b d)``: micro-batches per pipeline per step."""
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def grad_dp(self) -> int:
        """``d c``: ranks holding the same dense weight shard (the gradient reduction and ZeRO group)."""
        return self.dp * self.cp

    @property
    def shard_dp(self) -> int:
        """Ranks a dense ZeRO shard is split over: the shard group, or all ``d c``."""
        return self.shard_group or self.grad_dp

    @property
    def replicas(self) -> int:
        """``d c / shard_dp``: copies of each shard (hybrid sharding), 1 otherwise."""
        return self.grad_dp // self.shard_dp

    @property
    def expert_tp(self) -> int:
        """``t_e``: tensor parallelism inside each expert: :attr:`etp` when given, else t when e divides
        d c (Megatron's default, expert tensor parallel = t), else 1 (MoE parallel folding: the e
        experts spread over t d c ranks)."""
        if self.etp:
            return self.etp
        return self.tp if (self.dp * self.cp) % self.ep == 0 else 1

    @property
    def expert_dp(self) -> int:
        """``t d c / (e t_e)``: ranks holding the same expert shard (:func:`expert_data_parallel`)."""
        return expert_data_parallel(tp=self.tp, dp=self.dp, cp=self.cp, ep=self.ep, expert_tp=self.expert_tp)

    def stride(self, dim: Dimension) -> int:
        """Rank stride of ``dim``: the product of the sizes of the dimensions inside it in :attr:`order`
        (:func:`order_stride` of :func:`dense_sizes`)."""
        return order_stride(self.order, dense_sizes(tp=self.tp, cp=self.cp, dp=self.dp, pp=self.pp), dim)

    def expert_stride(self, dim: str) -> int:
        """Rank stride of the expert layers' ``dim`` (``etp``, ``ep`` or ``edp``): the product of the
        expert sizes (tp as ``t_e``, cp as 1, ep as e, dp as ``d_e``) inside it in :attr:`order`
        (Megatron-Core's expert ``RankGenerator``, module docstring; :func:`expert_sizes`)."""
        sizes = expert_sizes(expert_tp=self.expert_tp, ep=self.ep, expert_dp=self.expert_dp, pp=self.pp)
        return order_stride(self.order, sizes, EXPERT_DIMENSIONS[dim])

    def to_dict(self) -> dict:
        """The ``layout.*`` JSON keys."""
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "vp": self.vp, "cp": self.cp, "ep": self.ep,
                "zero": self.zero, "sequence_parallel": self.sequence_parallel, "recompute": self.recompute,
                "expert_tp": self.expert_tp, "micro_batch": self.micro_batch, "global_batch": self.global_batch,
                "micro_batches": self.micro_batches, "order": self.order, "world": self.world,
                "shard_group": self.shard_dp if self.zero else None}


def expert_data_parallel(*, tp, dp, cp, ep, expert_tp):
    """``d_e = t d c / (e t_e)``: ranks holding the same expert shard. Array-safe (integer columns)."""
    return tp * dp * cp // (ep * expert_tp)


def dense_sizes(*, tp, cp, dp, pp) -> dict:
    """The dense layers' size of each dimension of ``order`` (ep folds onto the d c ranks: 1)."""
    return {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}


def expert_sizes(*, expert_tp, ep, expert_dp, pp) -> dict:
    """The expert layers' size of each dimension of ``order`` (module docstring): tp as ``t_e``, cp as 1,
    ep as e, dp as ``d_e``."""
    return {"tp": expert_tp, "cp": 1, "ep": ep, "dp": expert_dp, "pp": pp}


EXPERT_DIMENSIONS = {"etp": "tp", "ep": "ep", "edp": "dp"}
"""The expert layers' groups and the dimension of ``order`` each one varies along."""


def check_order(order: str) -> None:
    """A rank order arranges each of tp, cp, ep, dp, pp once (``tp-cp-ep-dp-pp``), or InputError."""
    if sorted(order.split("-")) != sorted(DIMENSIONS):
        raise InputError(f"order must arrange tp, cp, ep, dp, pp (e.g. {DEFAULT_ORDER}), got {order!r}")


def order_stride(order: str, sizes: dict, dim: str):
    """Rank stride of ``dim``: the product of ``sizes`` of the dimensions inside it in ``order``
    (innermost first). Array-safe in ``sizes``."""
    k = 1
    for d in order.split("-"):
        if d == dim:
            return k
        k = k * sizes[d]
    raise InputError(f"unknown dimension {dim!r}")  # pragma: no cover - order validated


def group_ranks_per_node(xp, size, stride, gpus_per_node: int):
    """Ranks of a group of ``size`` ranks at rank stride ``stride`` that share a node of ``G`` GPUs:
    ``min(n, G / k)`` for ``k < G``, else 1 (module docstring). Array-safe in ``size, stride``."""
    return xp.where(stride >= gpus_per_node, 1,
                    xp.maximum(1, xp.minimum(size, gpus_per_node // xp.maximum(stride, 1))))


def pair_ranks(xp, size, ranks_per_node):
    """Ranks per node of the point-to-point pairs of a group of ``size`` with ``ranks_per_node`` on a
    node: 2 when the whole group sits in one node, else 1 (a ring or chain that leaves the node has a
    pair crossing it, and the slowest pair sets the pace). Array-safe."""
    return xp.where((size > 1) & (ranks_per_node >= size), 2, 1)


def leaves_node(size, ranks_per_node):
    """Whether a group of ``size`` with ``ranks_per_node`` on a node spans more than one node
    (``n > 1`` and ``rpn < n``). Array-safe."""
    return (size > 1) & (ranks_per_node < size)


def group_of(xp, dim: str, *, order: str, tp, cp, dp, pp, ep, expert_tp, gpus_per_node: int, shard=None):
    """``(size, ranks_per_node)`` of ``dim``'s group from the sizes (ints or integer columns):
    ``tp``, ``pp``, ``cp``; ``ep``, ``etp`` and ``edp``, the expert layers' groups at their strides in
    :func:`expert_sizes`; ``dp``, the gradient group of the dense weights (``d c`` ranks, at the stride
    of cp or dp, whichever is inside); ``shard`` and ``replica``, hybrid sharding's groups (``shard``
    ranks, default ``d c``; ``d c / shard`` replicas). Array-safe in the sizes (module docstring)."""
    if dim in EXPERT_DIMENSIONS:
        edp = expert_data_parallel(tp=tp, dp=dp, cp=cp, ep=ep, expert_tp=expert_tp)
        size = {"ep": ep, "etp": expert_tp, "edp": edp}[dim]
        stride = order_stride(order, expert_sizes(expert_tp=expert_tp, ep=ep, expert_dp=edp, pp=pp),
                              EXPERT_DIMENSIONS[dim])
    elif dim in ("dp", "shard", "replica"):
        sizes = dense_sizes(tp=tp, cp=cp, dp=dp, pp=pp)
        k_dp = order_stride(order, sizes, "dp")
        inner = xp.where(cp > 1, xp.minimum(k_dp, order_stride(order, sizes, "cp")), k_dp)
        grad = dp * cp
        shard = grad if shard is None else shard
        size, stride = {"dp": (grad, inner), "shard": (shard, inner), "replica": (grad // shard, inner * shard)}[dim]
    else:
        size, stride = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}[dim], \
            order_stride(order, dense_sizes(tp=tp, cp=cp, dp=dp, pp=pp), dim)
    return size, group_ranks_per_node(xp, size, stride, gpus_per_node)


def layout_group(layout: Layout, dim: str, gpus_per_node: int) -> tuple[int, int]:
    """``(size, ranks_per_node)`` of ``dim``'s group (:func:`group_of` of the layout's sizes)."""
    L = layout
    return group_of(SCALAR, dim, order=L.order, tp=L.tp, cp=L.cp, dp=L.dp, pp=L.pp, ep=L.ep,
                    expert_tp=L.expert_tp, gpus_per_node=gpus_per_node, shard=L.shard_dp)


def group_placement(layout: Layout, dim: str, gpus_per_node: int) -> tuple[int, int, int]:
    """``(size, ranks_per_node, nodes)`` of ``dim``'s group (:func:`layout_group`): ``nodes = ceil(n / rpn)``
    nodes (NVLink domains) spanned; 1 means the group stays inside one."""
    size, rpn = layout_group(layout, dim, gpus_per_node)
    return size, rpn, -(-size // rpn)


def pair_ranks_per_node(layout: Layout, dim: str, gpus_per_node: int) -> int:
    """:func:`pair_ranks` of ``dim``'s group (pp, cp)."""
    return pair_ranks(SCALAR, *layout_group(layout, dim, gpus_per_node))


def layer_passes(xp, full):
    """Passes of a micro-batch through a layer that run its TP and expert collectives: forward and
    backward, and the recomputed forward under full recomputation (``full``): 3, else 2. Array-safe."""
    return xp.where(full, 3, 2)


def stage_layers(layers: int, layout: Layout) -> float:
    """Layers on the heaviest pipeline stage (:func:`heaviest_stage_layers` of the layout). With
    :attr:`Layout.split_counts_ends` the ``L + 2`` slots are split: a middle stage holds ``n`` of them as layers; with
    ``p = 2`` there is no middle stage and each stage holds ``n - 1`` layers and one end."""

    n = stage_slots(layers, layout)
    return n - 1.0 if layout.split_counts_ends and layout.pp <= 2 else n


def stage_slots(layers: int, layout: Layout) -> float:
    """Slots of the split on the heaviest stage, ``v`` chunks of ``n / v`` (:func:`heaviest_stage_layers` of
    :func:`split_slots`): a middle stage's layers; with :attr:`Layout.split_counts_ends` an end stage holds
    ``n - 1`` layers and its end."""
    return heaviest_stage_layers(SCALAR, split_slots(layers, layout), layout.pp, layout.vp)


def split_slots(layers: int, layout: Layout) -> int:
    """What the pipeline split divides over the ``p v`` chunks: the ``L`` layers, or ``L + 2`` where the
    split counts the embedding and the head as one layer each (:attr:`Layout.split_counts_ends`)."""
    return layers + 2 * int(layout.split_counts_ends)


def stage_end_shares(xp, *, counted, pp, layer_s, head_s):
    """``(k_layer, k_head)``: what the slowest stage holds besides ``n - 1`` of the ``n`` layers of
    :func:`stage_layers`, and whether it runs the head. Without the split counting the ends (``counted`` false) or
    with two stages: the last stage, all ``n`` and the head, ``(1, 1)``. With it and ``p > 2`` the last stage holds
    ``n - 1`` layers and the head, a middle stage ``n`` layers: the slower of ``(n - 1) t_layer + t_head`` and
    ``n t_layer``, ``(0, 1)`` where the head outweighs a layer (``t_head > t_layer``), else ``(1, 0)``. The first
    stage's ``n - 1`` layers and the embedding lookup (no GEMM) are never the slower. Array-safe."""
    last = counted & (head_s > layer_s) & (pp > 2)
    middle = counted & (head_s <= layer_s) & (pp > 2)
    return xp.where(last, 0.0, 1.0), xp.where(middle, 0.0, 1.0)


def heaviest_stage_layers(xp, layers: int, pp, vp):
    """``L/p``, or ``ceil(L/(p v)) v`` with an uneven pipeline (``p v`` not dividing ``L``): the layers
    on the heaviest pipeline stage. Array-safe in ``pp, vp``."""
    pv = pp * vp
    return xp.where(layers % pv == 0, layers / pp, -(-layers // pv) * vp * 1.0)


def check_layout(layout: Layout, *, gpus: int, layers: int, heads: int, kv_heads: int, seq: int,
                 experts: int = 0) -> None:
    """The shape-dependent rules of the module docstring; each message shows its arithmetic."""
    require_count("gpus", gpus)
    L = layout
    if L.world != gpus:
        raise InputError(f"dp x tp x pp x cp = {L.dp} x {L.tp} x {L.pp} x {L.cp} = {L.world} != gpus ({gpus})")
    slots = split_slots(layers, L)
    if slots % (L.pp * L.vp) and not L.uneven_pipeline:
        what = f"layers + embedding + head ({slots})" if L.split_counts_ends else f"layers ({layers})"
        raise InputError(f"{what} not divisible by pp x vp = {L.pp} x {L.vp} = {L.pp * L.vp} "
                         f"(--uneven-pipeline lets the heaviest stage take {-(-slots // (L.pp * L.vp))} per chunk)")
    if heads % L.tp:
        raise InputError(f"attention heads ({heads}) not divisible by tp ({L.tp})")
    if kv_heads % L.tp and L.tp % kv_heads:
        raise InputError(f"key/value heads ({kv_heads}) and tp ({L.tp}): neither divides the other")
    if L.cp > 1 and seq % (2 * L.cp):
        raise InputError(f"sequence {seq} not divisible by 2 x cp = {2 * L.cp} (load-balanced causal split)")
    if L.sequence_parallel and (seq // L.cp) % L.tp:
        raise InputError(f"sequence parallelism needs s / cp = {seq} / {L.cp} = {seq // L.cp} divisible by tp ({L.tp})")
    if L.sequence_parallel and L.tp == 1:
        raise InputError("--sequence-parallel needs tp > 1")
    if experts:
        if experts % L.ep:
            raise InputError(f"experts ({experts}) not divisible by ep ({L.ep})")
    elif L.ep > 1:
        raise InputError(f"ep = {L.ep} needs a mixture-of-experts model (this one has no experts)")


@dataclass(frozen=True, slots=True, kw_only=True)
class CommOp:
    """One kind of collective a GPU issues, and how often per optimizer step."""

    dimension: Dimension
    """Which parallel dimension issues it: tp, pp, dp, cp, ep."""
    op: Collective
    """The collective."""
    size_bytes: float
    """Message size S in the CommModel's convention (all-gather: output; reduce-scatter: input; all-to-all: each rank's buffer)."""
    group_size: int
    """Ranks P in the group."""
    ranks_per_node: int
    """How many of the group's ranks share a node (placement)."""
    count_per_step: float
    """How many such collectives one GPU issues per optimizer step."""
    critical: bool
    """True when compute waits for it (TP, EP, PP, CP); False when it overlaps a stated window (DP/ZeRO)."""
    what: str
    """What it carries, in words (``"activations, forward, per layer"``)."""

    def __post_init__(self) -> None:
        if not (self.size_bytes >= 0 and math.isfinite(self.size_bytes)):
            raise InputError(f"size_bytes must be finite and >= 0, got {self.size_bytes!r}")
        require_count("group_size", self.group_size)
        require_count("ranks_per_node", self.ranks_per_node)
