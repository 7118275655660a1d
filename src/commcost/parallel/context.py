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
from commcost.parallel.layout import CommOp, Layout, pair_ranks_per_node

__all__ = ["context_ops"]


def context_ops(*, layout: Layout, kv_heads: int, head_dim: int, seq: int, layers_per_stage: float,
                activation_bytes: float, gpus_per_node: int) -> tuple[CommOp, ...]:
    """The CP ring steps one GPU issues per step; empty when c = 1."""
    L = layout
    if L.cp == 1:
        return ()
    w_kv = max(1.0, kv_heads / L.tp) * head_dim
    S = 2.0 * L.micro_batch * (seq / L.cp) * w_kv * activation_bytes
    passes = 4 if L.recompute == "full" else 3          # forward 1, backward 2 (+ recomputed forward 1)
    count = L.micro_batches * layers_per_stage * (L.cp - 1) * passes
    return (CommOp(dimension="cp", op=Collective.SEND_RECV, size_bytes=S, group_size=2,
                   ranks_per_node=pair_ranks_per_node(L, "cp", gpus_per_node), count_per_step=count,
                   critical=True, what="ring attention: K and V (forward), K, V, dK, dV (backward), c-1 steps a pass"),)
