"""Bytes per GPU: weights, gradients, optimizer states, activations, communication buffers.

**Model states** (Rajbhandari et al. 2020, section 3.1, mixed-precision Adam): per parameter
``q_w = 2`` bytes of bf16/fp16 weights, ``q_g = 2`` of gradients and ``K = 12`` of optimizer
states (fp32 master weights, Adam's first and second moments). A stack sets ``q_g``
(:attr:`~commcost.workload.stacks.Stack.main_grad_bytes`): Megatron-Core keeps its gradient buffer in fp32
(``main_grad``; Megatron-LM forces ``accumulate_allreduce_grads_in_fp32`` with bf16), ``q_g = 4``; FSDP stacks
keep fp32 sharded parameters and gradients in place of the master copy (4 + 4 + 8 = 2 + 2 + 12 per parameter). A GPU holds ``N_d`` dense and
``N_e`` expert parameters (:func:`params_per_gpu`); ZeRO stage ``z`` divides by the ranks ``D``
sharing the shard (``d c`` dense, ``d c / e`` experts; a hybrid shard group instead of ``d c``): optimizer states from ``z >= 1``,
gradients from ``z >= 2``, weights at ``z = 3``: ``Psi (2 + 2 + 12)`` -> ``Psi (2 + 2 + 12/D)``
-> ``Psi (2 + (2 + 12)/D)`` -> ``Psi 16/D``.

**Activations** (Korthikanti et al. 2022, section 4, generalised): per layer and micro-batch,
with ``s' = s/c`` local tokens, ``b`` micro-batch, ``t`` TP, ``r = t`` under sequence
parallelism else 1, 2 bytes an element and 1 a dropout mask. Replicated across TP (split by r):
both norms' inputs ``4 s'bh``, the QKV and MLP inputs ``4 s'bh``, dropout masks after attention
and MLP ``2 s'bh`` (with dropout). Split by t: Q and K ``2 s'b (n_q + n_kv) d_qk``, V ``2 s'b n_kv d``,
O's input ``2 s'b n_q d``; the MLP ``4 s'bf`` (two matrices: activation input and output) or
``(6 + 2) s'bf`` (gated: gate and up outputs, SiLU output, product; ``(4 + 2) s'bf`` with a fused SwiGLU); the score softmax ``2 n_q s'^2 b``
plus, with dropout, its mask ``n_q s'^2 b`` and output ``2 n_q s'^2 b`` -- unless flash attention
keeps only its fp32 log-sum-exp ``4 n_q s' b``. For GPT-3 (``f = 4h``, dropout, no flash) this
is exactly Korthikanti's ``s b h (34 + 5 a s / h)`` at t = 1 and ``s b h (10 + 24/t + 5 a s/(h t))``
without sequence parallelism. An MoE layer replaces the MLP by its ``k`` routed copies of each
token (the permuted input ``2 k s'bh / r`` and the expert MLP at ``k f_e``), its shared experts
and fp32 router logits ``4 s'b E / r``.
Selective recomputation drops the ``s'^2`` terms (Megatron's core-attention recomputation); PyTorch's op-level
selective checkpointing (torchtitan) keeps what its policy saves, counted op by op (:func:`alternate_matmul_bytes`);
checkpointing the attention module (llm-foundry's ``activation_checkpointing_target``, ``attention_module``) keeps
the module's input (the QKV GEMM's input, already counted) and drops what it holds inside: Q, K, V, the output
projection's input and the scores or flash attention's log-sum-exp;
full recomputation keeps only each layer's input ``2 s'bh / r``, plus the working set of the layer being
recomputed: its full activations (all alive once its forward is re-run) up to twice that with their gradients while
its backward runs (:data:`RECOMPUTE_WORKING_FACTOR`; the low and the high end of the peak allocated). A fused SwiGLU (Megatron-Core) keeps only its input (``q_g = 4`` instead of 6 per
element of f).

**Micro-batches in flight** on the first pipeline stage (:func:`in_flight_layers`): 1F1B holds
``min(m, p)`` micro-batches of ``L/p`` layers (``L`` layers' worth when ``m >= p``); the
interleaved schedule holds ``min(m v, 2(p-1) + (v-1)p + 1)`` chunks of ``L/(p v)`` layers, i.e.
``L (1 + (p-1)/(p v))`` (Korthikanti et al. 2022, section 4.2.3; Megatron's warm-up count, rank ``r``'s
:func:`in_flight_chunks`). Where the split counts the embedding as a layer the first rank's chunk 0 holds one layer
fewer and ``c_0`` of its chunks in flight are chunk 0 (:func:`embedding_chunks_in_flight`), so the second rank, a
middle stage, may hold more: the fuller of the two (:func:`first_ranks_in_flight`), with the states of the stage with
the most parameters (:func:`memory_stage_params`).
The last stage holds one micro-batch of its layers (``n - 1`` where the split counts the head) and the fp32 logits
``4 s'b V / t``.

**Under pipeline parallelism** a stack that keeps the stage gathered through the step (torchtitan's
FSDP2 with PP) also holds the stage's bf16 weights whole and its gradients whole in the reduce dtype (FSDP2
accumulates an unsharded gradient whose reduce-scatter is skipped in ``reduce_dtype``, fp32), which take the
place of the sharded fp32 gradients: ``+ N_stage (q_w + q_red (1 - 1/D))`` (:func:`gathered_stage_bytes`),
``q_red`` the stack's :attr:`~commcost.workload.stacks.Stack.grad_bytes`; and, gathered once a step, it holds no
prefetched weights beside them (the buffers below keep only the gradients of one layer).

**Buffers**: pipeline send/receive buffers ``4 S_pp``; ZeRO-3's prefetched weights of two layers and
the gradients of one (a stack that bounds them, DeepSpeed's ``stage3_max_live_parameters`` ``M`` and
``reduce_bucket_size`` ``R``: ``min(2 N_layer, max(M, N_max)) q_w + min(N_layer, max(R, N_max)) q_g``, ``N_max`` the
largest weight matrix, :func:`largest_matrix_params`, gathered and reduced whole); sequence parallelism's gathered layer input ``2 s'bh``; an MoE layer's token
buffers in flight, the permuted tokens it sends and those it receives, ``2 x 2 k s'bh I / r`` (bf16,
``I`` the load imbalance: the busiest rank receives ``I`` times the mean).

**Under an fp8 recipe** a stack that caches the casts (Megatron's Transformer Engine, ZeRO < 3) also holds
``q_8 N_L`` (:func:`fp8_weight_cache_bytes`).

**Reserved and on the card** (:class:`MemoryBreakdown`): the caching allocator's slack over the peak allocated
(:data:`ALLOCATOR_SLACK`), then the CUDA context and NCCL's own buffers outside torch's allocator
(:data:`CONTEXT_BYTES`; :func:`commcost.workload.nccl_memory.nccl_buffer_bytes`, one communicator per parallel group, with NVLS buffers on
NVLink-SHARP systems), as a low-high range against the card's capacity as the driver reports it (gpus.json).

**Activation offloading** (Megatron-Core ``cpu_offloading_num_layers = N``, :mod:`commcost.workload.offload`): the
GPU holds ``L - N`` layers' worth of the micro-batch's activations instead of ``L``; the ``N A`` bytes offloaded
per micro-batch are :attr:`MemoryBreakdown.offloaded_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.hardware.registry import gpu_row
from commcost.workload.nccl_memory import nccl_buffer_bytes
from commcost.workload.stack_memory import gathered_stage_bytes, leanest_saved_kwargs, stack_saved_kwargs
from commcost.workload.offload import resident_layers
from commcost.core.limits import MAX_SEQ
from commcost.core.validation import require_at_most, require_count, require_finite_positive
from commcost.parallel.layout import Layout, stage_layers, stage_slots
from commcost.workload.transformer import TransformerSpec
from commcost.workload.stage_params import layer_dense_params, memory_stage_params, params_per_gpu, stage_params
from commcost.parallel.zero import zero3_units

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.stacks import Stack

from commcost.workload.activations import (alternate_matmul_bytes, embedding_chunks_in_flight, first_ranks_in_flight,
                                           in_flight_chunks, in_flight_layers, layer_activation_bytes, saved_dispatch_copies,
                                           selective_kept)

__all__ = ["ACTIVATION_BYTES", "fits_on_card", "memory_high_bytes", "memory_fragile", "gathered_stage_bytes", "WEIGHT_BYTES", "GRAD_BYTES", "OPTIMIZER_BYTES", "MemoryBreakdown", "params_per_gpu", "stage_params",
           "model_state_bytes", "stage_activation_bytes", "buffer_bytes", "layer_activation_bytes", "in_flight_layers", "in_flight_chunks",
           "embedding_chunks_in_flight", "first_ranks_in_flight", "memory_stage_params", "memory_per_gpu", "gpu_capacity_bytes", "device_bytes_range",
           "ddp_memory_per_gpu", "gemm_input_bytes", "alternate_matmul_bytes", "largest_matrix_params",
           "selective_kept", "saved_dispatch_copies", "stack_saved_kwargs", "leanest_saved_kwargs", "fp8_weight_cache_bytes", "layer_dense_params",
           "RECOMPUTE_MODULES", "check_recompute_modules", "recompute_working_bytes"]

WEIGHT_BYTES = 2.0
"""q_w: bf16/fp16 weights (Rajbhandari et al. 2020, mixed-precision Adam)."""
GRAD_BYTES = 2.0
"""q_g: bf16/fp16 gradients."""
ACTIVATION_BYTES = 2.0
"""q: bf16/fp16 activations (what tensor, context, pipeline and expert parallelism send)."""
OPTIMIZER_BYTES = 12.0
"""K: fp32 master weights + Adam's two fp32 moments."""
RECOMPUTE_WORKING_FACTOR = (1.0, 2.0)
"""The full-recomputation working set ``A_w`` in units of one layer's activations ``A_none``, low and high.
A checkpointed layer's backward re-runs its forward once with grad enabled, so the recomputed activations are
all alive at once (``1 A_none``, the low end), then runs the layer's backward on them, during which the
activations' gradients come and go while the activations not yet consumed are still held (at most
``2 A_none``, the high end): Megatron-LM ``megatron/core/tensor_parallel/random.py``
``CheckpointFunction.backward`` (``torch.enable_grad(); outputs = ctx.run_function(*detached_inputs)``, then
``torch.autograd.backward(outputs, args)``), PyTorch ``torch/utils/checkpoint.py`` (``CheckpointFunction.backward``,
and the non-reentrant variant's recompute on unpack), DeepSpeed
``deepspeed/runtime/activation_checkpointing/checkpointing.py`` ``CheckpointFunction.backward`` (the same
recompute-then-backward). How much of the two are alive together depends on the order autograd frees them, so
the model keeps the range."""
ALLOCATOR_SLACK = (0.0, 0.15)
"""The caching allocator's reserved memory over the peak allocated: fragmentation and cached blocks,
0-15% (PyTorch's memory stats on training runs; expandable segments sit at the low end)."""
CONTEXT_BYTES = (0.5 * 2**30, 1.0 * 2**30)
"""CUDA context and kernels' modules per GPU, outside torch's allocator (0.5-1 GiB): about 400 MB for the context
alone with CUDA's lazy module loading, which PyTorch turns on (pytorch/pytorch issue #109888; PR #86509 measured
287 MB lazy against 667 MB eager), more as a training step loads cuBLAS, cuDNN and fused kernels; over 1000 MB where
every kernel loads at once (issue #107667: before CUDA 11.7)."""
NCCL_BYTES = (0.25 * 2**30, 2.0 * 2**30)
"""NCCL's own buffers per GPU where the layout is not known (:func:`device_bytes_range`'s default); a plan counts
them per communicator (:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`)."""
RECOMPUTE_MODULES = ("mla_up_proj", "mlp")
"""Megatron-Core ``recompute_modules`` the memory model knows beside the core attention (``selective``):
``mla_up_proj`` recomputes multi-latent attention's up-projections, so Q, K and V are not kept (Megatron-Core
``multi_latent_attention.py``: ``CheckpointWithoutOutput`` around the up-projection and rotary, its output discarded
after the core attention and recomputed in the backward); ``mlp`` recomputes a dense layer's MLP from its input."""


def recompute_working_bytes(none_bytes, full):
    """``(A_w, spread)``: the full-recomputation working set at its high end, ``2 A_none``, and how far its low
    end, ``1 A_none``, lies below (:data:`RECOMPUTE_WORKING_FACTOR`); ``(0, 0)`` without full recomputation.
    Array-safe in ``none_bytes``; ``full`` a bool."""
    lo_w, hi_w = RECOMPUTE_WORKING_FACTOR
    return (hi_w * none_bytes, (hi_w - lo_w) * none_bytes) if full else (0.0, 0.0)


def check_recompute_modules(modules) -> None:
    """Refuse a ``recompute_modules`` entry outside :data:`RECOMPUTE_MODULES` (one line, the valid names)."""
    bad = [m for m in modules if m not in RECOMPUTE_MODULES]
    if bad:
        raise InputError(f"unknown recompute module(s) {', '.join(map(repr, bad))} (valid: {', '.join(RECOMPUTE_MODULES)})")


def model_state_bytes(params: float, zero: float, ranks: float, *, weight_bytes: float = WEIGHT_BYTES,
                      grad_bytes: float = GRAD_BYTES, optimizer_bytes: float = OPTIMIZER_BYTES
                      ) -> tuple[float, float, float]:
    """``(weights, gradients, optimizer)`` bytes of ``params`` parameters at ZeRO stage ``zero`` over
    ``ranks`` (module docstring). Array-safe: the stage enters as ``D^[z >= k]``."""
    return (params * weight_bytes / ranks ** (zero >= 3),
            params * grad_bytes / ranks ** (zero >= 2),
            params * optimizer_bytes / ranks ** (zero >= 1))


def fits_on_card(device_low_bytes, capacity_bytes):
    """The fit rule: a layout fits when even the low estimate of what the card holds does,
    ``device_bytes[0] <= capacity`` ("does not fit" only when the lower end exceeds the card, DESIGN.md).
    Array-safe (``commcost search`` applies it to every configuration)."""
    return device_low_bytes <= capacity_bytes


def memory_high_bytes(total_bytes, nccl_high_bytes=NCCL_BYTES[1]):
    """``M_hi = M (1 + a_hi) + C_hi + N_hi``: the upper end of what the card holds for ``M`` bytes the
    model needs (:func:`device_bytes_range`, high), ``N_hi`` the layout's NCCL buffers
    (:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`, high; :data:`NCCL_BYTES` where
    the layout is not known). Array-safe."""
    return device_bytes_range(total_bytes, (NCCL_BYTES[0], nccl_high_bytes))[1]


def memory_fragile(total_bytes, capacity_bytes, headroom, nccl_high_bytes=NCCL_BYTES[1]):
    """The headroom rule: ``M_hi > (1 - h) capacity``, the layout leaves less than the share ``h`` of the card
    free at the upper end of its memory (:func:`memory_high_bytes`; ``h`` is
    :data:`commcost.analyses.plan.advice.MEMORY_HEADROOM` unless asked). Array-safe (``commcost search``
    applies it to every configuration, :meth:`MemoryBreakdown.fragile` to one)."""
    return memory_high_bytes(total_bytes, nccl_high_bytes) > (1.0 - headroom) * capacity_bytes

@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Bytes per GPU on the fullest pipeline stage."""

    weights_bytes: float
    """Model weights held (ZeRO-3: the shard)."""
    gradients_bytes: float
    """Gradients held (ZeRO-2/3: the shard)."""
    optimizer_bytes: float
    """Optimizer states held (ZeRO-1+: the shard)."""
    activations_bytes: float
    """Activations saved for backward, micro-batches in flight included."""
    buffers_bytes: float
    """Communication buffers (pipeline, ZeRO-3 prefetch, sequence-parallel gather)."""
    total_bytes: float
    """Sum of the above."""
    capacity_bytes: float
    """The GPU's memory as the driver reports it (gpus.json ``memory_bytes``)."""
    stage: str
    """Which stage is fullest: ``first``, ``second`` (the second pipeline rank, a middle stage, where the split counts
    the embedding as a layer and the first rank's in-flight embedding chunks leave it fuller:
    :func:`first_ranks_in_flight`) or ``last`` (``only`` without pipelining)."""
    in_flight_layers: float
    """Layers' worth of one micro-batch's activations that stage holds."""
    offloaded_bytes: float = 0.0
    """Activation bytes one micro-batch copies to host memory and back (``N A``; 0 without offloading)."""
    nccl_bytes: tuple[float, float] = NCCL_BYTES
    """NCCL's buffers outside torch's allocator, low and high (:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`
    of the layout)."""
    working_spread_bytes: float = 0.0
    """How far the low end of the peak allocated lies below :attr:`total_bytes` (the high end): under full
    recomputation the working set counted at one layer's activations instead of two, ``A_none``
    (:data:`RECOMPUTE_WORKING_FACTOR`); 0 otherwise."""
    kernel_spread_bytes: float = 0.0
    """How much further the low end lies below it where no stack is named: the activations the leanest known
    kernels keep less (:func:`leanest_saved_kwargs`); 0 with a named stack."""

    @property
    def allocated_bytes(self) -> tuple[float, float]:
        """Peak allocated (``torch.cuda.max_memory_allocated``), low and high: ``(total - spreads, total)``."""
        return (self.total_bytes - self.working_spread_bytes - self.kernel_spread_bytes, self.total_bytes)

    @property
    def reserved_bytes(self) -> tuple[float, float]:
        """Peak reserved by torch's caching allocator (``torch.cuda.max_memory_reserved``):
        the peak allocated's low end ``x (1 + slack_lo)`` and its high end ``x (1 + slack_hi)``
        (:attr:`allocated_bytes`, :data:`ALLOCATOR_SLACK`)."""
        return tuple(m * (1.0 + x) for m, x in zip(self.allocated_bytes, ALLOCATOR_SLACK))

    @property
    def device_bytes(self) -> tuple[float, float]:
        """What the card holds, low and high (:func:`device_bytes_range` with this layout's NCCL buffers)."""
        return device_bytes_range(self.total_bytes, self.nccl_bytes, self.working_spread_bytes + self.kernel_spread_bytes)

    @property
    def verdict(self) -> str:
        """The fit read off the range of what the card holds (:attr:`device_bytes`), never a point of it: ``fits``
        (even the high end fits), ``may not fit`` (the card's capacity lies between the low and the high end) or
        ``does not fit`` (even the low end exceeds the card)."""
        lo, hi = self.device_bytes
        return "does not fit" if lo > self.capacity_bytes else ("may not fit" if hi > self.capacity_bytes else "fits")

    @property
    def fits(self) -> bool:
        """The low estimate of the card's use fits (:func:`fits_on_card`)."""
        return bool(fits_on_card(self.device_bytes[0], self.capacity_bytes))

    def fragile(self, headroom: float) -> bool:
        """Short of the headroom ``h`` at the upper end of what the card holds (:func:`memory_fragile`)."""
        return bool(memory_fragile(self.total_bytes, self.capacity_bytes, headroom, self.nccl_bytes[1]))

    @property
    def margin_bytes(self) -> float:
        """``capacity - device_bytes[0]`` (negative when it does not fit)."""
        return self.capacity_bytes - self.device_bytes[0]

    def to_dict(self) -> dict:
        """The ``memory.*`` JSON keys."""
        return {"weights_bytes": self.weights_bytes, "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "buffers_bytes": self.buffers_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "margin_bytes": self.margin_bytes,
                "peak_allocated_bytes": self.total_bytes, "peak_allocated_range_bytes": list(self.allocated_bytes),
                "peak_reserved_bytes": list(self.reserved_bytes),
                "device_bytes": list(self.device_bytes), "nccl_bytes": list(self.nccl_bytes), "verdict": self.verdict,
                "stage": self.stage, "in_flight_layers": self.in_flight_layers,
                "offloaded_bytes": self.offloaded_bytes}


def device_bytes_range(total_bytes, nccl_bytes=NCCL_BYTES, spread_bytes=0.0):
    """``M (1 + a) + C + N`` at the low and at the high end: what the card holds for ``M`` bytes allocated
    (``total_bytes - spread_bytes`` at the low end: :attr:`MemoryBreakdown.working_spread_bytes`),
    the caching allocator's slack :data:`ALLOCATOR_SLACK`, the CUDA context :data:`CONTEXT_BYTES` and NCCL's
    buffers ``N`` (``nccl_bytes``, low and high: :func:`commcost.workload.nccl_memory.nccl_buffer_bytes`; :data:`NCCL_BYTES` where the layout is
    not known). Array-safe (search calls it on columns)."""
    return tuple(m * (1.0 + a) + c + n for m, a, c, n in zip((total_bytes - spread_bytes, total_bytes),
                                                               ALLOCATOR_SLACK, CONTEXT_BYTES, nccl_bytes))


def fp8_weight_cache_bytes(layer_params, fp8: bool, stack: Stack | None):
    """``q_8 N_L``: the fp8 copies of the stage's layer weights (``N_L`` per GPU, embeddings and head aside) a stack
    keeps across micro-batches under an fp8 recipe (:attr:`~commcost.workload.stacks.Stack.fp8_weight_cache_bytes`
    ``q_8``: Transformer Engine's fp8 weight and its transpose, 1 + 1 bytes); 0 in bf16 or without a cache."""
    return layer_params * (stack.fp8_weight_cache_bytes if fp8 and stack is not None else 0.0)


def gpu_capacity_bytes(gpu: str) -> float:
    """Memory of GPU preset ``gpu`` (``memory_bytes`` in gpus.json)."""
    return gpu_row(gpu)[0]


def _layer_kwargs(spec: TransformerSpec, layout: Layout, seq: int, flash: bool, gemm_input_bytes: float,
                  saved: dict | None = None, recompute_modules: tuple[str, ...] = (), a2a: str = "nccl") -> dict:
    return dict(dispatch_copies=saved_dispatch_copies(SCALAR, top_k=spec.top_k, ep=layout.ep, a2a=a2a),
                seq_local=seq / layout.cp, micro_batch=layout.micro_batch, hidden=spec.hidden, heads=spec.heads,
                kv_heads=spec.n_kv, qk_head_dim=spec.d_qk, head_dim=spec.d, gated=spec.gated_mlp, tp=layout.tp,
                sequence_parallel=layout.sequence_parallel, dropout=spec.dropout, flash=flash,
                gemm_input_bytes=gemm_input_bytes, recompute_modules=recompute_modules,
                **(saved or stack_saved_kwargs(None)))


def stage_layer_bytes(spec: TransformerSpec, layout: Layout, seq: int, *, flash: bool, recompute: str,
                      gemm_input_bytes: float = 2.0, saved: dict | None = None,
                      recompute_modules: tuple[str, ...] = (), a2a: str = "nccl") -> float:
    """Average activation bytes of one of the model's layers (dense and MoE layers in their proportion);
    ``saved`` the stack's :func:`stack_saved_kwargs`, ``recompute_modules`` Megatron-Core's (:data:`RECOMPUTE_MODULES`),
    ``a2a`` the expert dispatch (what it saves under op-level checkpointing: :func:`saved_dispatch_copies`)."""
    return layer_mix_bytes(spec, _layer_kwargs(spec, layout, seq, flash, gemm_input_bytes, saved, recompute_modules,
                                               a2a), recompute)


def layer_mix_bytes(spec: TransformerSpec, kw: dict, recompute: str):
    """``(L_dense A_dense + L_moe A_moe) / L``: the activation bytes of the model's layers, mixed in their
    proportion, for the layer arguments ``kw`` (floats, or numpy arrays for ``commcost search``)."""
    dense = layer_activation_bytes(**kw, mlp_width=spec.ffn, recompute=recompute)
    if not spec.is_moe:
        return dense
    moe = layer_activation_bytes(**kw, mlp_width=spec.expert_ffn, recompute=recompute, top_k=spec.top_k,
                                 experts=spec.experts, shared_width=spec.shared_ffn)
    return (spec.dense_layer_count * dense + spec.moe_layer_count * moe) / spec.layers


def stage_activation_bytes(xp, *, pp, micro_batches, first_layers, held_layers, layer_bytes, working_bytes,
                           seq_local, micro_batch, hidden, tp, sequence_parallel: bool, vocab: float, dropout: bool,
                           loss_bytes_per_vocab: float = 4.0):
    """``(activations, first stage is fullest)`` of the fullest stage (module docstring): without a
    pipeline ``n_1 A + A_w + M_e + 4 s'b V/t``; else the larger of the first stage,
    ``n_1 A + A_w + M_e min(m, p)``, and the last, ``(L/p) A + A_w + q_V s'b V/t`` (``n_1``
    :func:`in_flight_layers`, ``A`` per layer, ``A_w`` one layer's working set under full
    recomputation, ``M_e = s'bh/r`` the embedding's dropout mask, ``q_V`` the loss's bytes per token and
    vocabulary entry: 4 for fp32 logits, the stack's :attr:`~commcost.workload.stacks.Stack.loss_bytes_per_vocab`). Array-safe."""
    r = tp if sequence_parallel else 1.0
    embed_mask = (seq_local * micro_batch * hidden / r) * (1.0 if dropout else 0.0)
    logits = loss_bytes_per_vocab * seq_local * micro_batch * vocab / tp
    only = first_layers * layer_bytes + working_bytes + embed_mask + logits
    first = first_layers * layer_bytes + working_bytes + embed_mask * xp.minimum(micro_batches, pp)
    last = held_layers * layer_bytes + working_bytes + logits   # one micro-batch (all v chunks)
    return xp.where(pp == 1, only, xp.maximum(first, last)), first >= last


def buffer_bytes(xp, *, pp, micro_batch, seq_local, hidden, tp, zero3, layer_params, sequence_parallel,
                 weight_bytes: float = WEIGHT_BYTES, grad_bytes: float = GRAD_BYTES, top_k: float = 0.0,
                 expert_load: float = 1.0, live_params=None, reduce_bucket_params=None, largest_params=0.0,
                 gathered=False):
    """Communication buffers (module docstring): pipeline send/receive ``4 S_pp = 4 x 2 b s' h / t``
    with ``p > 1``; ZeRO-3's prefetch ``N_layer (2 q_w + q_g)``, or with a stack's bounds (``live_params`` ``M``,
    ``reduce_bucket_params`` ``R``, ``largest_params`` ``N_max``) ``min(2 N_layer, max(M, N_max)) q_w +
    min(N_layer, max(R, N_max)) q_g``, without the prefetched weights where the stage stays ``gathered`` through
    the step (:func:`gathered_stage_bytes`: gathered once, before the micro-batches' activations pile up);
    sequence parallelism's gathered input ``2 s'bh``; with experts (``top_k = k > 0``) the dispatcher's send and
    receive token buffers ``4 k s'bh I / r``. Array-safe (``gathered`` a bool or a boolean column)."""
    r = xp.where(sequence_parallel, tp, 1.0)
    prefetched, grads = 2.0 * layer_params, layer_params
    if live_params is not None:
        prefetched = xp.minimum(prefetched, xp.maximum(live_params, largest_params))
    prefetched = xp.where(gathered, 0.0, prefetched)
    if reduce_bucket_params is not None:
        grads = xp.minimum(grads, xp.maximum(reduce_bucket_params, largest_params))
    return (xp.where(pp > 1, 4.0 * micro_batch * seq_local * hidden * 2.0 / tp, 0.0)
            + xp.where(zero3, prefetched * weight_bytes + grads * grad_bytes, 0.0)
            + xp.where(sequence_parallel, 2.0 * seq_local * micro_batch * hidden, 0.0)
            + 4.0 * top_k * seq_local * micro_batch * hidden * expert_load / r)


def largest_matrix_params(spec: TransformerSpec, tp):
    """``N_max = max(V h, h n_q d, h f, h f_e) / t``: the largest weight matrix a GPU gathers whole under ZeRO-3
    (the vocabulary embedding, an attention projection, a dense or expert MLP matrix; split by TP). Array-safe in ``tp``."""
    h = spec.hidden
    widths = [spec.vocab, spec.heads * spec.d, spec.ffn] + ([spec.expert_ffn] if spec.is_moe else [])
    return h * max(widths) / tp


def _check_memory_args(spec, layout, seq, capacity_bytes, weight_bytes, grad_bytes, optimizer_bytes, expert_load,
                       offloaded_layers, gpus_per_node) -> None:
    """:func:`memory_per_gpu`'s arguments, checked at the library's edge (the CLI's bounds)."""
    if not isinstance(spec, TransformerSpec):
        raise TypeError(f"spec must be a TransformerSpec, got {type(spec).__name__}")
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout, got {type(layout).__name__}")
    require_count("seq", seq)
    require_at_most("seq", seq, MAX_SEQ, "tokens")
    require_finite_positive("capacity_bytes", capacity_bytes)
    for name, value in (("weight_bytes", weight_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        require_finite_positive(name, value, allow_zero=True)
        require_at_most(name, value, 64.0, "bytes per parameter")
    require_finite_positive("expert_load", expert_load)
    require_at_most("expert_load", expert_load, 1e6)
    require_count("offloaded_layers", offloaded_layers, minimum=0)
    require_count("gpus_per_node", gpus_per_node)


def _activations(spec, layout, seq, act_kw, saved, *, flash, recompute, q_in, recompute_modules, a2a):
    """``(activations, first stage fullest, working-set spread, A a layer)`` of :func:`memory_per_gpu` under the
    kernels ``saved`` (:func:`stack_saved_kwargs`); ``act_kw`` the stage's :func:`stage_activation_bytes` arguments."""
    per_layer = stage_layer_bytes(spec, layout, seq, flash=flash, recompute=recompute, gemm_input_bytes=q_in,
                                  saved=saved, recompute_modules=recompute_modules, a2a=a2a)
    none = stage_layer_bytes(spec, layout, seq, flash=flash, recompute="none", gemm_input_bytes=q_in, saved=saved)
    working, spread = recompute_working_bytes(none, layout.recompute == "full")
    act, first_fullest = stage_activation_bytes(SCALAR, layer_bytes=per_layer, working_bytes=working, **act_kw)
    return act, first_fullest, spread, per_layer


def memory_per_gpu(spec: TransformerSpec, layout: Layout, *, seq: int, capacity_bytes: float, flash: bool = True,
                   weight_bytes: float = WEIGHT_BYTES, grad_bytes: float = GRAD_BYTES,
                   optimizer_bytes: float = OPTIMIZER_BYTES, stack: Stack | None = None,
                   fp8: bool = False, expert_load: float = 1.0, offloaded_layers: int = 0,
                   gpus_per_node: int = 8, nvls: bool = False,
                   recompute_modules: tuple[str, ...] = (), a2a: str = "nccl",
                   stack_named: bool = True) -> MemoryBreakdown:
    """The memory stack of the fullest stage (module docstring); ``stack`` sets what selective
    recomputation keeps, the loss's working set and (with an ``fp8`` recipe) whether GEMM inputs are
    saved quantized (None: the bf16 formula with fp32 logits); ``offloaded_layers`` ``N`` layers' activations
    go to host memory (:mod:`commcost.workload.offload`; its rules are the caller's to check); ``gpus_per_node`` and
    ``nvls`` (:func:`commcost.workload.nccl_memory.nvls_capable`) place the layout's NCCL communicators
    (:func:`commcost.workload.nccl_memory.nccl_buffer_bytes`); ``recompute_modules`` Megatron-Core's (:data:`RECOMPUTE_MODULES`);
    ``a2a`` the expert dispatch (``nccl`` or ``deepep``: what op-level checkpointing saves of it); ``stack_named``
    false where the user named no stack (``--stack auto``): the low end of the activations takes the leanest known
    kernels (:func:`leanest_saved_kwargs`), the high end ``stack``'s."""
    _check_memory_args(spec, layout, seq, capacity_bytes, weight_bytes, grad_bytes, optimizer_bytes, expert_load,
                       offloaded_layers, gpus_per_node)
    dense, expert = memory_stage_params(spec, layout)
    q_g = stack.main_grad_bytes if stack is not None and grad_bytes == GRAD_BYTES else grad_bytes
    w_d, g_d, o_d = model_state_bytes(dense, layout.zero, layout.shard_dp, weight_bytes=weight_bytes,
                                      grad_bytes=q_g, optimizer_bytes=optimizer_bytes)
    w_e, g_e, o_e = model_state_bytes(expert, layout.zero, layout.expert_dp, weight_bytes=weight_bytes,
                                      grad_bytes=q_g, optimizer_bytes=optimizer_bytes)
    s_local = seq / layout.cp
    q_in = gemm_input_bytes(stack, fp8)
    recompute = layout.recompute
    if stack is not None and recompute == "selective":
        recompute = selective_kept(stack.selective)
    held = stage_layers(spec.layers, layout)
    last_held = stage_slots(spec.layers, layout) - float(layout.split_counts_ends)   # the head's stage
    rank0, rank1 = first_ranks_in_flight(layers=stage_slots(spec.layers, layout) * layout.pp, pp=layout.pp,
                                         vp=layout.vp, micro_batches=layout.micro_batches,
                                         split_counts_ends=layout.split_counts_ends)
    first_layers = resident_layers(max(rank0, rank1), offloaded_layers)
    act_kw = dict(pp=layout.pp, micro_batches=layout.micro_batches, first_layers=first_layers, held_layers=last_held,
                  seq_local=s_local, micro_batch=layout.micro_batch, hidden=spec.hidden, tp=layout.tp,
                  sequence_parallel=layout.sequence_parallel, vocab=spec.vocab, dropout=spec.dropout,
                  loss_bytes_per_vocab=4.0 if stack is None else stack.loss_bytes_per_vocab)
    kw = dict(flash=flash, recompute=recompute, q_in=q_in, recompute_modules=recompute_modules, a2a=a2a)
    act, first_fullest, spread, per_layer = _activations(spec, layout, seq, act_kw, stack_saved_kwargs(stack, spec), **kw)
    lean = 0.0 if stack_named or stack is None else act - _activations(spec, layout, seq, act_kw,
                                                                      leanest_saved_kwargs(spec), **kw)[0]
    if layout.pp == 1:
        stage, layers_held = "only", first_layers
    else:
        first = "second" if rank1 > rank0 else "first"
        stage, layers_held = (first, first_layers) if first_fullest else ("last", last_held)
    gathered = stack is not None and stack.zero3_unshard_under_pp and layout.zero == 3 and layout.pp > 1
    buffers = buffer_bytes(SCALAR, pp=layout.pp, micro_batch=layout.micro_batch, seq_local=s_local, hidden=spec.hidden,
                           tp=layout.tp, zero3=layout.zero == 3, layer_params=(dense + expert) / zero3_units(held),
                           sequence_parallel=layout.sequence_parallel, weight_bytes=weight_bytes,
                           grad_bytes=grad_bytes, top_k=spec.top_k if spec.is_moe else 0.0, expert_load=expert_load,
                           live_params=None if stack is None else stack.zero3_live_params,
                           reduce_bucket_params=None if stack is None else stack.zero3_reduce_bucket_params,
                           largest_params=largest_matrix_params(spec, layout.tp), gathered=gathered)
    if gathered:   # bf16 weights whole, fp32 gradients whole in place of the sharded ones (gathered_stage_bytes)
        (dw_d, dg_d), (dw_e, dg_e) = (gathered_stage_bytes(n, ranks, stack.grad_bytes, WEIGHT_BYTES) for n, ranks in
                                      ((dense, layout.shard_dp), (expert, layout.expert_dp)))
        w_d, g_d, w_e, g_e = w_d + dw_d, g_d + dg_d, w_e + dw_e, g_e + dg_e
    if layout.zero < 3:   # ZeRO-3 gathers each unit's weights anew: no cast kept across micro-batches
        w_d = w_d + fp8_weight_cache_bytes(held * layer_dense_params(spec) / layout.tp, fp8, stack)
        w_e = w_e + fp8_weight_cache_bytes(expert, fp8, stack)
    total = w_d + g_d + o_d + w_e + g_e + o_e + act + buffers
    L = layout
    nccl = nccl_buffer_bytes(SCALAR, world=L.world, tp=L.tp, cp=L.cp, dp=L.dp, pp=L.pp, ep=L.ep,
                             gpus_per_node=gpus_per_node, nvls=nvls,
                             extra_groups=() if stack is None else stack.nccl_extra_groups)
    return MemoryBreakdown(weights_bytes=w_d + w_e, gradients_bytes=g_d + g_e, optimizer_bytes=o_d + o_e,
                           activations_bytes=act, buffers_bytes=buffers, total_bytes=total,
                           capacity_bytes=capacity_bytes, stage=stage, in_flight_layers=layers_held,
                           offloaded_bytes=offloaded_layers * per_layer, nccl_bytes=nccl,
                           working_spread_bytes=spread, kernel_spread_bytes=lean)


def gemm_input_bytes(stack: Stack | None, fp8: bool) -> float:
    """``q_in``: 1 where an fp8 recipe's stack saves GEMM inputs quantized
    (:attr:`~commcost.workload.stacks.Stack.fp8_saves_inputs`), else 2."""
    return 1.0 if fp8 and stack is not None and stack.fp8_saves_inputs else 2.0


def ddp_memory_per_gpu(params: float) -> float:
    """Model states of plain DDP with mixed-precision Adam, ``16 N`` bytes (what ``budget`` can check
    before pointing at ``plan``)."""
    return params * (WEIGHT_BYTES + GRAD_BYTES + OPTIMIZER_BYTES)
