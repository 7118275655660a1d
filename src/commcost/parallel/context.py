"""Context parallelism: ring attention over the sequence split (Megatron-LM / Transformer Engine CP;
Liu et al. 2023, "Ring Attention").

Each of the ``c`` ranks holds ``s/c`` tokens (two chunks, load-balanced for the causal mask).
Per layer and micro-batch the forward passes K and V around the ring in ``c - 1`` steps, each
step a send/recv of ``S = 2 b (s/c) w_kv q`` bytes (``w_kv = max(1, n_kv/t) d``: the K and V
heads on this TP rank); the backward passes K, V and their gradients, ``2 (c - 1)`` steps; full
recomputation repeats the forward ring. Each step's transfer overlaps the attention compute of the
step in hand: exposed per ring ``(c - 1) max(0, T - T_attention / c)``
(:func:`commcost.analyses.plan.compose.cp_exposed_s`).
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Dimension, CommOp, Layout, pair_ranks_per_node

__all__ = ["context_ops", "cp_message_bytes", "cp_rings_per_step"]


def cp_message_bytes(xp, *, micro_batch, seq: int, cp, tp, kv_heads: int, head_dim: int, activation_bytes: float):
    """``S = 2 b (s/c) w_kv q`` with ``w_kv = max(1, n_kv/t) d``: one ring step's K and V (module
    docstring). Array-safe in the layout's sizes."""
    w_kv = xp.maximum(1.0, kv_heads / tp) * head_dim
    return 2.0 * micro_batch * (seq / cp) * w_kv * activation_bytes


def cp_rings_per_step(xp, *, micro_batches, layers_per_stage, full):
    """``m (L/p) passes``: rings of ``c - 1`` steps one GPU runs per step, ``passes`` = forward 1,
    backward 2 (+ the recomputed forward 1 under full recomputation, ``full``). Array-safe."""
    return micro_batches * layers_per_stage * xp.where(full, 4, 3)


def context_ops(*, layout: Layout, kv_heads: int, head_dim: int, seq: int, layers_per_stage: float,
                activation_bytes: float, gpus_per_node: int) -> tuple[CommOp, ...]:
    """The CP ring steps one GPU issues per step; empty when c = 1."""
    L = layout
    if L.cp == 1:
        return ()
    S = cp_message_bytes(SCALAR, micro_batch=L.micro_batch, seq=seq, cp=L.cp, tp=L.tp, kv_heads=kv_heads,
                         head_dim=head_dim, activation_bytes=activation_bytes)
    count = cp_rings_per_step(SCALAR, micro_batches=L.micro_batches, layers_per_stage=layers_per_stage,
                              full=L.recompute == "full") * (L.cp - 1)
    return (CommOp(dimension=Dimension.CP, op=Collective.SEND_RECV, size_bytes=S, group_size=2,
                   ranks_per_node=pair_ranks_per_node(L, Dimension.CP, gpus_per_node), count_per_step=count,
                   critical=True, what="ring attention: K and V (forward), K, V, dK, dV (backward), c-1 steps a pass"),)
