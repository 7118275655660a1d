"""What a stack's choices add to or take from the memory of :mod:`commcost.workload.memory` (which re-exports these):
the tensors its kernels keep for backward (:func:`stack_saved_kwargs`, at their leanest over the known stacks where
none is named: :func:`leanest_saved_kwargs`), and a pipeline stage FSDP2 keeps gathered through the step
(:func:`gathered_stage_bytes`). Symbols: :mod:`commcost.workload.memory`'s docstring."""

from __future__ import annotations

from commcost.workload.stacks import KNOWN_STACKS, stack as stack_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.stacks import Stack
    from commcost.workload.transformer import TransformerSpec

__all__ = ["gathered_stage_bytes", "stack_saved_kwargs", "leanest_saved_kwargs"]


def gathered_stage_bytes(params, ranks, accumulate_bytes, weight_bytes):
    """``(weights, gradients)`` a stage kept gathered through the step adds to its sharded states (a stack's
    :attr:`~commcost.workload.stacks.Stack.zero3_unshard_under_pp`, ZeRO-3 with ``p > 1``): its ``params``
    (``N``) in bf16 whole, ``N q_w`` (``weight_bytes``), and its gradients accumulated whole in the reduce dtype, ``N q_red``, less
    the sharded gradients they stand in for, ``N q_red / D``: ``(N q_w, N q_red (1 - 1/D))``.

    FSDP2 over a pipeline stage: PyTorch's ``torch/distributed/pipelining/stage.py``
    (``backward_maybe_with_nosync``) sets ``set_reshard_after_backward(False)`` and
    ``set_requires_gradient_sync(False)`` on every backward but the last, and torchtitan's ``apply_fsdp`` sets
    ``reshard_after_forward = not pp_enabled``; FSDP2's ``FSDPParam.to_accumulated_grad_if_needed`` upcasts the
    unsharded bf16 gradient to ``reduce_dtype`` (fp32: torchtitan ``mixed_precision_reduce``) as
    ``unsharded_accumulated_grad``, and the sharded gradient is made only by the last backward's reduce-scatter
    (``foreach_reduce``), after ``zero_grad`` set it to None at the step's start. The FSDP states
    ``4 + 4 + 8`` (fp32 parameter, fp32 gradient, Adam) are the model's ``(q_w + q_g + K)/D``; the gradient's
    ``q_red / D`` of them is not held while its whole copy is. Array-safe in ``params`` and ``ranks``."""
    return params * weight_bytes, params * accumulate_bytes * (1.0 - 1.0 / ranks)


def stack_saved_kwargs(stack: Stack | None, spec: TransformerSpec | None = None) -> dict:
    """What the stack's kernels keep for backward, as :func:`commcost.workload.activations.layer_activation_bytes`
    arguments: ``gated_bytes``,
    ``norm_saved_bytes``, ``rotary_saved_copies`` (None: the defaults). The eager norm applies to a model of the
    Llama family's RMSNorm (no biases: ``spec.biases`` marks GPT's and BLOOM's LayerNorm), the rotary copies to a
    model with rotary positions (no learned position embedding, no biases); without ``spec`` both apply. One place
    for plan and search."""
    if stack is None:
        return dict(gated_bytes=6.0, norm_saved_bytes=2.0, rotary_saved_copies=0.0)
    rms = spec is None or not spec.biases
    rotary = rms and (spec is None or spec.max_positions == 0)
    return dict(gated_bytes=stack.gated_mlp_saved_bytes, norm_saved_bytes=stack.norm_saved_bytes if rms else 2.0,
                rotary_saved_copies=stack.rotary_saved_copies if rotary else 0.0)


def leanest_saved_kwargs(spec: TransformerSpec | None = None) -> dict:
    """:func:`stack_saved_kwargs` at its smallest over every stack ``stacks.json`` describes, key by key (a fused
    SwiGLU that keeps its input, fused norms, a fused rotary kernel: Megatron-Core's): what a layer's kernels keep
    at the least where the stack is not named (``--stack auto`` prices the stack that runs the layout, but the run
    may use leaner kernels), the low end of the activations' range (:func:`commcost.workload.memory.memory_per_gpu`
    ``stack_named``)."""
    rows = [stack_saved_kwargs(stack_of(name, compiled=c), spec) for name in KNOWN_STACKS if name != "auto"
            for c in (False, True)]
    return {k: min(row[k] for row in rows) for k in rows[0]}
