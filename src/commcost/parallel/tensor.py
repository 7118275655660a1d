"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019; sequence parallelism, Korthikanti et al. 2022).

Per transformer layer and micro-batch, with activations ``X`` of ``b (s/c) h`` elements of
``q`` bytes on each TP rank before the split (``S = b (s/c) h q``):

* without sequence parallelism: 2 all-reduces of ``S`` forward (after attention's O and after the
  MLP's down projection, the ``g`` operators of Shoeybi et al. section 3) and 2 backward (the
  ``f`` operators);
* with sequence parallelism: each all-reduce becomes an all-gather (``S`` out) before the block
  and a reduce-scatter (``S`` in) after it, forward and backward alike: 2 + 2 each way
  (Korthikanti et al. 2022 section 4.2.2); same bytes on the wire, activations split by t;
* full recomputation repeats the forward's collectives once more inside the backward.

**Mixture-of-experts layers** keep the attention block's pair but not the dense MLP's: the routed
experts are split by expert parallelism and expert TP (``t_e``), and Megatron-Core's token dispatcher
runs their collectives over the expert-TP group (:func:`commcost.parallel.expert.expert_tp_ops`; none
when ``t_e = 1``), not over the TP group. Shared experts (DeepSeek) are an ordinary TP-split MLP
(Megatron-Core's ``SharedExpertMLP``, column- then row-parallel over the TP group) and keep the MLP's
pair. Blocks per layer and pass that run TP collectives on a stage of ``L/p`` layers, ``L_m/p`` of
them MoE (:func:`tp_blocks_per_stage`): ``n_b = 2 L/p - (L_m/p) [E_s = 0]``.

All of them are on the critical path (compute waits for the result); overlapping them with
GEMMs (userbuffers, TP comm overlap) is not modelled. The vocabulary-parallel cross-entropy's
all-reduces (``b s`` floats) are omitted: under 0.1% of one layer's.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Dimension, CommOp, Layout, layer_passes, layout_group

__all__ = ["tensor_ops", "tp_blocks_per_stage", "tp_message_bytes", "tp_count_per_step", "tp_gather_count",
           "regather_passes"]


def tp_blocks_per_stage(*, layers_per_stage, moe_layers_per_stage, shared_experts: int):
    """``n_b = 2 L/p - (L_m/p) [E_s = 0]``: blocks of a stage that run a TP collective pair each pass,
    attention and dense MLP of every layer, less the MLP of each MoE layer without shared experts
    (module docstring). Array-safe in the layer counts (STYLE.md item 12)."""
    return 2.0 * layers_per_stage - moe_layers_per_stage * (1.0 if shared_experts == 0 else 0.0)


def tp_message_bytes(*, micro_batch, seq: int, cp, hidden: int, activation_bytes: float):
    """``S = b (s/c) h q``: one TP collective's message, the activations of one micro-batch on a TP rank
    before the split (module docstring). Array-safe in the layout's sizes."""
    return micro_batch * (seq / cp) * hidden * activation_bytes


def tp_count_per_step(*, micro_batches, layers_per_stage, moe_layers_per_stage, shared_experts: int, passes):
    """``m n_b passes``: each TP collective one GPU issues per step (one per block and pass,
    :func:`tp_blocks_per_stage`). Array-safe."""
    return micro_batches * tp_blocks_per_stage(layers_per_stage=layers_per_stage,
                                               moe_layers_per_stage=moe_layers_per_stage,
                                               shared_experts=shared_experts) * passes


def tp_gather_count(*, count, passes, regather_passes):
    """``n (passes + r) / passes``: the sequence-parallel all-gathers per step, the ``n`` of every TP
    collective (:func:`tp_count_per_step`) with the ``r`` passes re-gathered on top (:func:`regather_passes`).
    Array-safe."""
    return count * (passes + regather_passes) / passes


def regather_passes(xp, *, selective, recompute_selective):
    """``1`` where op-level selective checkpointing re-runs the sequence-parallel all-gathers in the backward, else
    ``0``: torchtitan's ``_save_list`` (``torchtitan/distributed/activation_checkpoint.py``; ``parallelize_llama.py``
    before) saves ``reduce_scatter_tensor``'s output but not ``all_gather_into_tensor``'s, so the gathered input
    of the QKV and up projections, which their weight gradients need, is gathered again (the stacks whose
    ``selective`` is ``alternate_matmul``). Array-safe in ``recompute_selective`` and ``selective``."""
    return xp.where(recompute_selective, 1.0, 0.0) * xp.where(selective == "alternate_matmul", 1.0, 0.0)


def tensor_ops(*, layout: Layout, hidden: int, seq: int, layers_per_stage: float, activation_bytes: float,
               gpus_per_node: int, moe_layers_per_stage: float = 0.0, shared_experts: int = 0,
               regather_passes: float = 0.0) -> tuple[CommOp, ...]:
    """The TP collectives one GPU issues per step (module docstring); empty when t = 1.
    ``moe_layers_per_stage`` (``L_m/p``) of the stage's layers are MoE, with ``shared_experts`` (``E_s``).
    ``regather_passes``: passes of the sequence-parallel all-gathers alone on top (:func:`regather_passes`)."""
    L = layout
    if L.tp == 1:
        return ()
    size, rpn = layout_group(L, Dimension.TP, gpus_per_node)
    S = tp_message_bytes(micro_batch=L.micro_batch, seq=seq, cp=L.cp, hidden=hidden, activation_bytes=activation_bytes)
    passes = layer_passes(SCALAR, L.recompute == "full")
    # one per block and pass: attention, dense (or shared) MLP
    per_layer = tp_count_per_step(micro_batches=L.micro_batches, layers_per_stage=layers_per_stage,
                                  moe_layers_per_stage=moe_layers_per_stage, shared_experts=shared_experts,
                                  passes=passes)
    if not L.sequence_parallel:
        return (CommOp(dimension=Dimension.TP, op=Collective.ALL_REDUCE, size_bytes=S, group_size=size,
                       ranks_per_node=rpn, count_per_step=per_layer, critical=True,
                       what="layer activations (forward) and their gradients (backward), after attention and the dense MLP"),)
    return (CommOp(dimension=Dimension.TP, op=Collective.ALL_GATHER, size_bytes=S, group_size=size, ranks_per_node=rpn,
                   count_per_step=tp_gather_count(count=per_layer, passes=passes, regather_passes=regather_passes),
                   critical=True,
                   what="sequence-parallel all-gather before attention and MLP, each pass"),
            CommOp(dimension=Dimension.TP, op=Collective.REDUCE_SCATTER, size_bytes=S, group_size=size, ranks_per_node=rpn,
                   count_per_step=per_layer, critical=True,
                   what="sequence-parallel reduce-scatter after attention and MLP, each pass"))
