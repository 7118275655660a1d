"""Data parallelism without sharding (ZeRO-0): one gradient all-reduce per step, bucketed.

Each GPU all-reduces the gradients of its weight shard once per optimizer step over the ranks
that hold the same shard: the dense weights' ``d c`` ranks (``G_d`` gradient elements) and, for
a mixture of experts, the experts' ``d c / e`` ranks (``G_e``). Gradient accumulation defers it to
the last micro-batch (``no_sync``; Megatron accumulates in its grad buffer). Buckets and their
overlap with the backward are the DDP timeline's (:mod:`commcost.step.timeline`), with a bucket of
``c`` bytes carrying ``c G_d / (G_d + G_e)`` dense and ``c G_e / (G_d + G_e)`` expert bytes (the
buffers interleave in layer order). Off the critical path: it overlaps the last backward.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import Dimension, CommOp, Layout, layout_group

__all__ = ["ddp_ops"]


def ddp_ops(*, layout: Layout, dense_params_per_gpu: float, expert_params_per_gpu: float, grad_bytes: float,
            gpus_per_node: int) -> tuple[CommOp, ...]:
    """The gradient all-reduces (dense, experts) one GPU issues per step; empty when no rank shares a shard."""
    out = []
    d, rpn = layout_group(layout, Dimension.DP, gpus_per_node)
    if d > 1 and dense_params_per_gpu > 0:
        out.append(CommOp(dimension=Dimension.DP, op=Collective.ALL_REDUCE, size_bytes=dense_params_per_gpu * grad_bytes,
                          group_size=d, ranks_per_node=rpn, count_per_step=1.0, critical=False,
                          what="gradients of the dense weights (bucketed, overlaps the last backward)"))
    e, erpn = layout_group(layout, "edp", gpus_per_node)
    if e > 1 and expert_params_per_gpu > 0:
        out.append(CommOp(dimension=Dimension.DP, op=Collective.ALL_REDUCE, size_bytes=expert_params_per_gpu * grad_bytes,
                          group_size=e, ranks_per_node=erpn, count_per_step=1.0, critical=False,
                          what="gradients of the expert weights over the expert-data-parallel group"))
    return tuple(out)
