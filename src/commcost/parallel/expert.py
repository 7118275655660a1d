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
compute hides: :mod:`commcost.parallel.dispatch`, :func:`commcost.compose.ep_exposed_s`.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import CommOp, Layout, layout_group

__all__ = ["expert_ops", "dispatch_tokens"]


def dispatch_tokens(layout: Layout, seq: int) -> float:
    """``T = b (s/c) / t'``: tokens one rank dispatches per micro-batch and MoE layer."""
    L = layout
    return L.micro_batch * (seq / L.cp) / (L.tp if L.sequence_parallel else 1)


def expert_ops(*, layout: Layout, hidden: int, seq: int, top_k: int, moe_layers_per_stage: float,
               activation_bytes: float, gpus_per_node: int, dispatch_bytes: float | None = None,
               expert_load: float = 1.0) -> tuple[CommOp, ...]:
    """The EP all-to-alls one GPU issues per step; empty when e = 1 or the model is dense.
    ``dispatch_bytes`` (``q_d``): the forward dispatch's bytes per element when it differs from
    ``activation_bytes`` (fp8 dispatch); ``expert_load``: ``I``."""
    L = layout
    if L.ep == 1 or moe_layers_per_stage == 0:
        return ()
    size, rpn = layout_group(L, "ep", gpus_per_node)
    per_element = dispatch_tokens(L, seq) * top_k * hidden * expert_load
    passes = 3 if L.recompute == "full" else 2
    pairs = L.micro_batches * moe_layers_per_stage
    if dispatch_bytes is None or dispatch_bytes == activation_bytes:
        return (CommOp(dimension="ep", op=Collective.ALL_TO_ALL, size_bytes=per_element * activation_bytes,
                       group_size=size, ranks_per_node=rpn, count_per_step=pairs * 2 * passes, critical=True,
                       what="token dispatch and combine, forward and backward, per MoE layer"),)
    forward = passes - 1
    return (CommOp(dimension="ep", op=Collective.ALL_TO_ALL, size_bytes=per_element * dispatch_bytes,
                   group_size=size, ranks_per_node=rpn, count_per_step=pairs * forward, critical=True,
                   what="token dispatch, forward (fp8), per MoE layer"),
            CommOp(dimension="ep", op=Collective.ALL_TO_ALL, size_bytes=per_element * activation_bytes,
                   group_size=size, ranks_per_node=rpn, count_per_step=pairs * (2 * passes - forward), critical=True,
                   what="token combine forward, dispatch and combine backward, per MoE layer"))
