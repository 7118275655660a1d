"""Expert parallelism: all-to-all token dispatch and combine (GShard, Lepikhin et al. 2020;
Megatron-Core's ``alltoall`` token dispatcher).

Per MoE layer and micro-batch each rank of the EP group sends its ``T = b (s/c) / t'`` tokens
(``t' = t`` with sequence parallelism, else 1), each to its ``k`` experts: an all-to-all of
``S = T k h q`` bytes to dispatch and one of the same size to combine, forward; the backward
runs both in reverse; full recomputation repeats the forward pair. Token counts are assumed
balanced (the published benchmarks force-balance routing). All on the critical path (the
dispatcher's overlap with shared-expert or dense compute is not modelled).
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import CommOp, Layout, layout_group

__all__ = ["expert_ops"]


def expert_ops(*, layout: Layout, hidden: int, seq: int, top_k: int, moe_layers_per_stage: float,
               activation_bytes: float, gpus_per_node: int) -> tuple[CommOp, ...]:
    """The EP all-to-alls one GPU issues per step; empty when e = 1 or the model is dense."""
    L = layout
    if L.ep == 1 or moe_layers_per_stage == 0:
        return ()
    size, rpn = layout_group(L, "ep", gpus_per_node)
    tokens = L.micro_batch * (seq / L.cp) / (L.tp if L.sequence_parallel else 1)
    S = tokens * top_k * hidden * activation_bytes
    passes = 3 if L.recompute == "full" else 2
    count = L.micro_batches * moe_layers_per_stage * 2 * passes
    return (CommOp(dimension="ep", op=Collective.ALL_TO_ALL, size_bytes=S, group_size=size, ranks_per_node=rpn,
                   count_per_step=count, critical=True,
                   what="token dispatch and combine, forward and backward, per MoE layer"),)
