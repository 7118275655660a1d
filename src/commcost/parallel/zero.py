"""ZeRO / FSDP over the data-parallel group (Rajbhandari et al. 2020; Megatron's distributed optimizer; PyTorch FSDP).

With ``D`` ranks sharing a shard of ``G`` parameters (``d c`` for dense weights, ``d c / e`` for
experts), gradient bytes ``q_g`` and weight bytes ``q_w``:

* ZeRO-1 and ZeRO-2: a reduce-scatter of the gradients (``G q_g`` in), bucketed and overlapped
  with the last backward like DDP's all-reduce, and after the optimizer an all-gather of the
  updated weights (``G q_w`` out), overlapped with the next step's first forward (Megatron's
  ``overlap_param_gather``). The bytes on the wire equal one all-reduce (a ring all-reduce *is* a
  reduce-scatter then an all-gather); what ZeRO-2 saves is memory, not traffic.
* Gradient accumulation over ``m`` micro-batches splits the stacks. Sharded gradients cannot be
  accumulated locally, so a ZeRO-2 that keeps only its gradient shard reduce-scatters after *every*
  micro-batch's backward: ``m`` reduce-scatters per step (DeepSpeed ZeRO stage 2, whose
  ``partition_gradients`` reduces each micro-step's buckets; PyTorch FSDP ``SHARD_GRAD_OP`` outside
  ``no_sync``). Stacks that keep full gradients until the last micro-batch pay one, at the memory of
  unsharded gradients: Megatron-LM's distributed optimizer (a full-size ``main_grad`` buffer, reduced
  at the last micro-batch; it is ZeRO-1 in memory), DeepSpeed ZeRO stage 1, and FSDP ``SHARD_GRAD_OP``
  under ``no_sync``. ``commcost budget`` prices both (fix (e)2); :func:`zero_ops` lists the
  one-per-step schedule of the full-gradient stacks (``commcost plan``'s ZeRO-1/2).
* ZeRO-3 / FSDP: per layer and micro-batch an all-gather of the layer's weights before its
  forward and again before its backward, and a reduce-scatter of its gradients after the
  backward (``3 x`` the weights' bytes per micro-batch: Rajbhandari et al. section 7.2.2, 1.5x
  the all-reduce). Prefetched one layer ahead, each hides behind the neighbouring layer's compute:
  exposed per layer ``max(0, T_comm - T_compute)`` (:mod:`commcost.analyses.plan.plan`). A stack that gathers
  parameter by parameter (DeepSpeed ZeRO-3: :attr:`commcost.workload.stacks.Stack.zero3_gathers_per_layer`
  ``= g``) issues ``g`` all-gathers of ``1/g`` of the layer each: the same bytes, ``g`` times the
  latency terms (at thousands of ranks a ring all-gather's ``(P-1) alpha`` is milliseconds). A stack that
  keeps the stage gathered through the step under pipeline parallelism (torchtitan's FSDP2 with PP:
  ``once_per_step``) gathers each layer once before the first forward and scatters once after the last
  backward.
* Hybrid sharding (FSDP ``HYBRID_SHARD``): the gathers and scatters run over the shard group, and each
  layer's gradient shard is then all-reduced across the ``d c / shard`` replicas (``G q_g / shard``),
  once per micro-batch, in the same backward window.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import Dimension, CommOp, Layout, layout_group

__all__ = ["zero_ops", "zero3_units", "zero3_gather_bytes", "zero3_scatter_bytes"]


def zero3_units(layers_per_stage):
    """Units ZeRO-3 gathers one at a time on a stage: its layers and its embedding/head, ``L/p + 1``.
    Array-safe."""
    return layers_per_stage + 1


def zero3_gather_bytes(*, params, units, weight_bytes: float, gathers_per_layer):
    """``G q_w / (u g)``: one ZeRO-3 all-gather, a unit's weights in ``g`` gathers (module docstring).
    Array-safe."""
    return params / units * weight_bytes / gathers_per_layer


def zero3_scatter_bytes(*, params, units, grad_bytes: float):
    """``G q_g / u``: one ZeRO-3 reduce-scatter, a unit's gradients (module docstring). Array-safe."""
    return params / units * grad_bytes


def zero_ops(*, layout: Layout, dense_params_per_gpu: float, expert_params_per_gpu: float, layers_per_stage: float,
             grad_bytes: float, weight_bytes: float, gpus_per_node: int,
             gathers_per_layer: int = 1, once_per_step: bool = False) -> tuple[CommOp, ...]:
    """The ZeRO-1/2/3 collectives one GPU issues per step (module docstring)."""
    L = layout
    out = []
    dense_dim = "shard" if L.zero == 3 else "dp"
    groups = ((dense_dim, dense_params_per_gpu, "dense"), ("edp", expert_params_per_gpu, "expert"))
    for dim, params, kind in groups:
        D, rpn = layout_group(L, dim, gpus_per_node)
        if params <= 0 or D * (layout_group(L, "replica", gpus_per_node)[0] if dim == "shard" else 1) == 1:
            continue
        if L.zero in (1, 2):
            out.append(CommOp(dimension=Dimension.DP, op=Collective.REDUCE_SCATTER, size_bytes=params * grad_bytes,
                              group_size=D, ranks_per_node=rpn, count_per_step=1.0, critical=False,
                              what=f"{kind} gradients to their optimizer shard (bucketed, overlaps the last backward)"))
            out.append(CommOp(dimension=Dimension.DP, op=Collective.ALL_GATHER, size_bytes=params * weight_bytes,
                              group_size=D, ranks_per_node=rpn, count_per_step=1.0, critical=False,
                              what=f"updated {kind} weights (overlaps the next step's first forward)"))
        elif L.zero == 3:
            units = zero3_units(layers_per_stage)
            per = params / units
            m = 1 if once_per_step else L.micro_batches   # rounds of gathers and scatters per step
            g = gathers_per_layer
            out.append(CommOp(dimension=Dimension.DP, op=Collective.ALL_GATHER,
                              size_bytes=zero3_gather_bytes(params=params, units=units, weight_bytes=weight_bytes,
                                                            gathers_per_layer=g),
                              group_size=D, ranks_per_node=rpn,
                              count_per_step=(1.0 if once_per_step else 2.0) * m * units * g, critical=False,
                              what=f"{kind} weights of one layer before its forward and its backward (prefetched"
                                   + (f"; {g} gathers per layer, one per parameter tensor)" if g > 1 else ")")))
            out.append(CommOp(dimension=Dimension.DP, op=Collective.REDUCE_SCATTER,
                              size_bytes=zero3_scatter_bytes(params=params, units=units, grad_bytes=grad_bytes),
                              group_size=D, ranks_per_node=rpn, count_per_step=1.0 * m * units, critical=False,
                              what=f"{kind} gradients of one layer after its backward"))
            R, rrpn = layout_group(L, "replica", gpus_per_node)
            if dim == "shard" and R > 1:
                out.append(CommOp(dimension=Dimension.DP, op=Collective.ALL_REDUCE, size_bytes=per * grad_bytes / D,
                                  group_size=R, ranks_per_node=rrpn, count_per_step=1.0 * m * units,
                                  critical=False, what="the layer's gradient shard across the hybrid-shard replicas"))
    return tuple(out)
