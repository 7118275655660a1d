"""Pipeline parallelism: point-to-point activations between stages (Narayanan et al. 2021).

Each micro-batch crosses every stage boundary once forward (activations) and once backward
(their gradients); with ``v`` virtual stages per rank it crosses each rank ``v`` times. One
message carries ``S = b (s/c) h q / t`` bytes: Megatron's scatter/gather optimisation
(Narayanan et al. 2021 section 4.1) sends a 1/t slice over the inter-node link and
all-gathers it over NVLink (with sequence parallelism the activation is already split).
Per GPU and step: ``2 m v`` sends (and as many receives, on the other direction of the link).

On the critical path (:func:`exposed_p2p_count`): the non-interleaved 1F1B schedule waits for
each transfer, ``2 (m + p - 1)`` of them on the longest path (every micro-batch's forward and
backward at the slowest stage plus the fill and drain hops); the interleaved schedule overlaps
its steady-state transfers with compute (Megatron's ``overlap_p2p_comm``), leaving the
``2 (p - 1)`` hops of fill and drain.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import Dimension, CommOp, Layout, pair_ranks_per_node

__all__ = ["pipeline_ops", "exposed_p2p_count", "pp_message_bytes"]


def pp_message_bytes(*, micro_batch, seq: int, cp, hidden: int, activation_bytes: float, tp):
    """``S = b (s/c) h q / t``: one stage-boundary send, the 1/t slice of a micro-batch's activations
    (module docstring). Array-safe in the layout's sizes."""
    return micro_batch * (seq / cp) * hidden * activation_bytes / tp


def pipeline_ops(*, layout: Layout, hidden: int, seq: int, activation_bytes: float,
                 gpus_per_node: int) -> tuple[CommOp, ...]:
    """The PP sends one GPU issues per step; empty when p = 1."""
    L = layout
    if L.pp == 1:
        return ()
    S = pp_message_bytes(micro_batch=L.micro_batch, seq=seq, cp=L.cp, hidden=hidden,
                         activation_bytes=activation_bytes, tp=L.tp)
    return (CommOp(dimension=Dimension.PP, op=Collective.SEND_RECV, size_bytes=S, group_size=2,
                   ranks_per_node=pair_ranks_per_node(L, Dimension.PP, gpus_per_node),
                   count_per_step=2.0 * L.micro_batches * L.vp, critical=True,
                   what="stage-boundary activations forward and gradients backward, per micro-batch and chunk"),)


def exposed_p2p_count(p: float, m: float, v: float) -> float:
    """Transfers on the critical path: ``2 (m + p - 1)`` for 1F1B (v = 1), ``2 (p - 1)`` interleaved.

    Array-safe: ``2 (p - 1) + 2 m [v == 1]``.
    """
    return 2.0 * (p - 1) + 2.0 * m * (v == 1)
