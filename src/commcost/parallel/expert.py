"""Expert parallelism: all-to-all token dispatch and combine (GShard, Lepikhin et al. 2020;
Megatron-Core's ``alltoall`` and ``flex`` token dispatchers).

Per MoE layer and micro-batch each rank of the EP group dispatches its ``T = b (s/c) / t'`` tokens
(``t' = t`` with sequence parallelism, else 1), each to its ``k`` routed experts: an all-to-all of
``S = T k h q I`` bytes to dispatch and one of the same size to combine, forward; the backward runs
both in reverse; full recomputation repeats the forward pair. ``I`` is the load imbalance (the
busiest rank receives ``I`` times the mean: 1 when routing is balanced, as the published benchmarks
force it; the capacity factor when tokens are padded to capacity). With an fp8 dispatch
(:data:`commcost.parallel.dispatch.FP8_DISPATCH_BYTES`) the forward dispatch carries ``q_d`` bytes per
element and is a line of its own. How each all-to-all runs (NCCL or node-aware) and how much of it
compute hides: :mod:`commcost.parallel.dispatch`, :func:`commcost.analyses.plan.compose.ep_exposed_s`.

With expert tensor parallelism ``t_e > 1`` (Megatron-Core's dispatcher): the ``t_e`` ranks of an expert
shard gather the distinct tokens they hold after the dispatch and scatter the partial outputs before
the combine: with sequence parallelism (or ``t_e > t``) an all-gather of ``g T k h q I`` (output) and a
reduce-scatter of the same (input), ``g = t_e`` with sequence parallelism, else ``t_e / t``; without
it (the ``t_e <= t`` ranks hold the same tokens) one all-reduce of ``T k h q I`` for the row-parallel
output; per MoE layer, micro-batch and pass, over the expert-TP group. They are EP lines (the same
overlap applies). They replace the dense MLP's TP pair on MoE layers: :mod:`commcost.parallel.tensor`
counts only attention's pair there (and the shared experts', which are TP-split like a dense MLP).
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Dimension, CommOp, Layout, layer_passes, layout_group

__all__ = ["expert_ops", "expert_tp_ops", "dispatch_tokens", "dispatch_elements", "moe_layers_per_stage",
           "expert_tp_gathers", "expert_tp_gather_bytes", "expert_counts_per_step"]


def moe_layers_per_stage(*, moe_layers: int, layers: int, layers_per_stage):
    """``L_m/p = (L_m / L) (L/p)``: MoE layers on the heaviest stage, the model's share of MoE layers
    times the stage's layers. Array-safe."""
    return moe_layers / layers * layers_per_stage


def dispatch_tokens(xp, *, micro_batch, seq: int, cp, tp, sequence_parallel):
    """``T = b (s/c) / t'``: tokens one rank dispatches per micro-batch and MoE layer (``t' = t`` with
    sequence parallelism, else 1). Array-safe in the sizes and ``sequence_parallel``."""
    return micro_batch * (seq / cp) / xp.where(sequence_parallel, tp, 1.0)


def dispatch_elements(xp, *, micro_batch, seq: int, cp, tp, sequence_parallel, top_k: int, hidden: int,
                      expert_load: float):
    """``T k h I``: elements of one rank's all-to-all buffer (``S = T k h I q``, module docstring).
    Array-safe."""
    return dispatch_tokens(xp, micro_batch=micro_batch, seq=seq, cp=cp, tp=tp,
                           sequence_parallel=sequence_parallel) * top_k * hidden * expert_load


def expert_counts_per_step(*, pairs, passes):
    """``(P (passes - 1), P (passes + 1), P passes)`` with ``P = m L_m/p`` MoE layer visits per step:
    the forward dispatches (the ones an fp8 dispatch shrinks), the other all-to-alls (forward combine,
    backward dispatch and combine) and each expert-TP collective (module docstring). Array-safe."""
    return pairs * (passes - 1), pairs * (passes + 1), pairs * passes


def expert_tp_gathers(*, expert_tp, tp, sequence_parallel):
    """Whether the expert-TP group gathers and scatters (sequence parallelism, or ``t_e > t``) rather
    than all-reducing (module docstring). Array-safe (``sequence_parallel`` a bool or a boolean column)."""
    return sequence_parallel | (expert_tp > tp)


def expert_tp_gather_bytes(xp, *, size_bytes, expert_tp, tp, sequence_parallel):
    """``g S``: the expert-TP all-gather's (and reduce-scatter's) message, ``g = t_e`` with sequence
    parallelism, else ``t_e / t`` (module docstring). Array-safe."""
    return xp.where(sequence_parallel, expert_tp, expert_tp / tp) * size_bytes


def expert_ops(*, layout: Layout, hidden: int, seq: int, top_k: int, moe_layers_per_stage: float,
               activation_bytes: float, gpus_per_node: int, dispatch_bytes: float | None = None,
               expert_load: float = 1.0) -> tuple[CommOp, ...]:
    """The expert layers' collectives one GPU issues per step: the EP all-to-alls (none when e = 1) and
    the expert-TP collectives (none when ``t_e = 1``); empty for a dense model.
    ``dispatch_bytes`` (``q_d``): the forward dispatch's bytes per element when it differs from
    ``activation_bytes`` (fp8 dispatch); ``expert_load``: ``I``."""
    L = layout
    if moe_layers_per_stage == 0:
        return ()
    size, rpn = layout_group(L, Dimension.EP, gpus_per_node)
    per_element = dispatch_elements(SCALAR, micro_batch=L.micro_batch, seq=seq, cp=L.cp, tp=L.tp,
                                    sequence_parallel=L.sequence_parallel, top_k=top_k, hidden=hidden,
                                    expert_load=expert_load)
    passes = layer_passes(SCALAR, L.recompute == "full")
    pairs = L.micro_batches * moe_layers_per_stage
    a2a = () if L.ep == 1 else _a2a_ops(per_element=per_element, activation_bytes=activation_bytes,
                                        dispatch_bytes=dispatch_bytes, size=size, rpn=rpn, pairs=pairs, passes=passes)
    return a2a + expert_tp_ops(L, per_element=per_element, activation_bytes=activation_bytes, pairs=pairs,
                               passes=passes, gpus_per_node=gpus_per_node)


def _a2a_ops(*, per_element, activation_bytes, dispatch_bytes, size, rpn, pairs, passes):
    """The dispatch and combine all-to-alls (module docstring)."""
    if dispatch_bytes is None or dispatch_bytes == activation_bytes:
        return (CommOp(dimension=Dimension.EP, op=Collective.ALL_TO_ALL, size_bytes=per_element * activation_bytes,
                       group_size=size, ranks_per_node=rpn, count_per_step=pairs * 2 * passes, critical=True,
                       what="token dispatch and combine, forward and backward, per MoE layer"),)
    forward, rest, _ = expert_counts_per_step(pairs=pairs, passes=passes)
    return (CommOp(dimension=Dimension.EP, op=Collective.ALL_TO_ALL, size_bytes=per_element * dispatch_bytes,
                   group_size=size, ranks_per_node=rpn, count_per_step=forward, critical=True,
                   what="token dispatch, forward (fp8), per MoE layer"),
            CommOp(dimension=Dimension.EP, op=Collective.ALL_TO_ALL, size_bytes=per_element * activation_bytes,
                   group_size=size, ranks_per_node=rpn, count_per_step=rest, critical=True,
                   what="token combine forward, dispatch and combine backward, per MoE layer"))


def expert_tp_ops(L: Layout, *, per_element: float, activation_bytes: float, pairs: float, passes: int,
                  gpus_per_node: int) -> tuple[CommOp, ...]:
    """The expert-TP collectives of the module docstring; empty when ``t_e = 1``."""
    te = L.expert_tp
    if te == 1:
        return ()
    group, rpn = layout_group(L, "etp", gpus_per_node)
    S = per_element * activation_bytes
    n = expert_counts_per_step(pairs=pairs, passes=passes)[2]
    if expert_tp_gathers(expert_tp=te, tp=L.tp, sequence_parallel=L.sequence_parallel):
        gS = expert_tp_gather_bytes(SCALAR, size_bytes=S, expert_tp=te, tp=L.tp, sequence_parallel=L.sequence_parallel)
        return (CommOp(dimension=Dimension.EP, op=Collective.ALL_GATHER, size_bytes=gS, group_size=group, ranks_per_node=rpn,
                       count_per_step=n, critical=True, what="expert-TP gather of the dispatched tokens, per MoE layer"),
                CommOp(dimension=Dimension.EP, op=Collective.REDUCE_SCATTER, size_bytes=gS, group_size=group,
                       ranks_per_node=rpn, count_per_step=n, critical=True,
                       what="expert-TP scatter of the experts' outputs, per MoE layer"))
    return (CommOp(dimension=Dimension.EP, op=Collective.ALL_REDUCE, size_bytes=S, group_size=group, ranks_per_node=rpn,
                   count_per_step=n, critical=True, what="expert-TP reduction of the experts' outputs, per MoE layer"),)
