"""Parameters per GPU: the dense and expert parameters a pipeline stage's GPU holds (the model-state terms of
:mod:`commcost.workload.memory`, which re-exports them)."""

from __future__ import annotations

from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout, stage_layers, stage_slots
from commcost.workload.transformer import TransformerSpec

__all__ = ["params_per_gpu", "stage_params", "memory_stage_params", "layer_dense_params"]


def params_per_gpu(spec: TransformerSpec, layout: Layout) -> tuple[float, float]:
    """``(N_d, N_e)`` on the GPU of the heaviest stage (:func:`stage_params` of the layout)."""

    return stage_params(SCALAR, spec, layers_held=stage_layers(spec.layers, layout), pp=layout.pp, tp=layout.tp,
                        ep=layout.ep, expert_tp=layout.expert_tp)


def stage_params(xp, spec: TransformerSpec, *, layers_held, pp, tp, ep, expert_tp, with_end: bool = True):
    """``(N_d, N_e)``: the stage's ``L/p`` layers' dense weights (attention, dense MLPs, shared experts,
    router, norms) over t, plus the embedding or output head (both when p = 1; neither for a middle stage,
    ``with_end`` false), and its routed experts over ``e t_e`` (:attr:`~commcost.parallel.layout.Layout.expert_tp`).
    The vocabulary embedding and the head are split over t; a learned position embedding ``P h`` is not: every
    tensor-parallel rank holds it whole (Megatron-Core ``LanguageModelEmbedding``: ``torch.nn.Embedding(
    max_sequence_length, hidden_size)`` beside the ``VocabParallelEmbedding``; Megatron-LM's legacy
    ``Embedding`` alike). Array-safe in the layout."""
    L = spec.layers
    per_layer_dense = layer_dense_params(spec)
    vocab = spec.vocab * spec.hidden
    positions = spec.embedding_params - vocab   # P h, on the embedding's stage, whole
    ends = xp.where(pp == 1, (vocab + spec.head_params + spec.final_norm_params) / tp + positions,
                    xp.maximum(vocab / tp + positions, ((spec.head_params or vocab) + spec.final_norm_params) / tp))
    ends = ends if with_end else 0.0 * ends
    dense = layers_held * per_layer_dense / tp + ends
    expert = spec.expert_params_total * layers_held / L / (ep * expert_tp)
    return dense, expert


def memory_stage_params(spec: TransformerSpec, layout: Layout) -> tuple[float, float]:
    """``(N_d, N_e)`` of the stage with the most parameters, for memory: :func:`params_per_gpu` (``n`` layers and
    the larger end), except where the split counts the ends (:attr:`~commcost.parallel.layout.Layout.split_counts_ends`)
    and ``p > 2``, where no stage holds both: the heavier of a middle stage, ``n`` layers, and an end stage, ``n - 1``
    layers and its end (compared on ``N_d + N_e``)."""
    if not (layout.split_counts_ends and layout.pp > 2):
        return params_per_gpu(spec, layout)
    n = stage_slots(spec.layers, layout)
    kw = dict(pp=layout.pp, tp=layout.tp, ep=layout.ep, expert_tp=layout.expert_tp)
    middle = stage_params(SCALAR, spec, layers_held=n, with_end=False, **kw)
    end = stage_params(SCALAR, spec, layers_held=n - 1.0, **kw)
    return middle if sum(middle) >= sum(end) else end


def layer_dense_params(spec: TransformerSpec) -> float:
    """A layer's dense parameters on average (dense layers, and MoE layers' attention, router, shared experts)."""
    return (spec.dense_layer_count * spec.dense_layer_params
            + spec.moe_layer_count * spec.moe_layer_nonexpert_params) / spec.layers
