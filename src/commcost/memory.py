"""Bytes per GPU: weights, gradients, optimizer states, activations, communication buffers.

**Model states** (Rajbhandari et al. 2020, section 3.1, mixed-precision Adam): per parameter
``q_w = 2`` bytes of bf16/fp16 weights, ``q_g = 2`` of gradients and ``K = 12`` of optimizer
states (fp32 master weights, Adam's first and second moments). A GPU holds ``N_d`` dense and
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
``8 s'bf`` (gated: gate and up outputs, SiLU output, product); the score softmax ``2 n_q s'^2 b``
plus, with dropout, its mask ``n_q s'^2 b`` and output ``2 n_q s'^2 b`` -- unless flash attention
keeps only its fp32 log-sum-exp ``4 n_q s' b``. For GPT-3 (``f = 4h``, dropout, no flash) this
is exactly Korthikanti's ``s b h (34 + 5 a s / h)`` at t = 1 and ``s b h (10 + 24/t + 5 a s/(h t))``
without sequence parallelism. An MoE layer replaces the MLP by its ``k`` routed copies of each
token (the permuted input ``2 k s'bh / r`` and the expert MLP at ``k f_e``), its shared experts
and fp32 router logits ``4 s'b E / r``.
Selective recomputation drops the ``s'^2`` terms; full recomputation keeps only each layer's input
``2 s'bh / r``, plus one layer's full activations while it is recomputed.

**Micro-batches in flight** on the first pipeline stage (:func:`in_flight_layers`): 1F1B holds
``min(m, p)`` micro-batches of ``L/p`` layers (``L`` layers' worth when ``m >= p``); the
interleaved schedule holds ``min(m v, 2(p-1) + (v-1)p + 1)`` chunks of ``L/(p v)`` layers, i.e.
``L (1 + (p-1)/(p v))`` (Korthikanti et al. 2022, section 4.2.3; Megatron's warm-up count).
The last stage holds one micro-batch and the fp32 logits ``4 s'b V / t``.

**Buffers**: pipeline send/receive buffers ``4 S_pp``; ZeRO-3's prefetched weights of two layers and
the gradients of one; sequence parallelism's gathered layer input ``2 s'bh``. Not counted:
the CUDA context and NCCL workspaces (about 0.5-1 GB), allocator fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.parallel.layout import Layout
    from commcost.transformer import TransformerSpec

__all__ = ["WEIGHT_BYTES", "GRAD_BYTES", "OPTIMIZER_BYTES", "MemoryBreakdown", "params_per_gpu",
           "model_state_bytes", "layer_activation_bytes", "in_flight_layers", "memory_per_gpu", "gpu_capacity_bytes",
           "ddp_memory_per_gpu"]

WEIGHT_BYTES = 2.0
"""q_w: bf16/fp16 weights (Rajbhandari et al. 2020, mixed-precision Adam)."""
GRAD_BYTES = 2.0
"""q_g: bf16/fp16 gradients."""
OPTIMIZER_BYTES = 12.0
"""K: fp32 master weights + Adam's two fp32 moments."""


def params_per_gpu(spec: TransformerSpec, layout: Layout) -> tuple[float, float]:
    """``(N_d, N_e)`` on the GPU of the heaviest stage: the stage's ``L/p`` layers' dense weights
    (attention, dense MLPs, shared experts, router, norms) over t, plus the embedding or output head
    (both when p = 1), and its routed experts over ``e t_e`` (:attr:`~commcost.parallel.layout.Layout.expert_tp`)."""
    from commcost.parallel.layout import stage_layers

    L, p = spec.layers, layout.pp
    held = stage_layers(L, layout)
    per_layer_dense = (spec.dense_layer_count * spec.dense_layer_params
                       + spec.moe_layer_count * spec.moe_layer_nonexpert_params) / L
    ends = spec.embedding_params + spec.head_params + spec.final_norm_params if p == 1 else \
        max(spec.embedding_params, (spec.head_params or spec.embedding_params) + spec.final_norm_params)
    dense = (held * per_layer_dense + ends) / layout.tp
    expert = spec.expert_params_total * held / L / (layout.ep * layout.expert_tp)
    return dense, expert


def model_state_bytes(params: float, zero: float, ranks: float, *, weight_bytes: float = WEIGHT_BYTES,
                      grad_bytes: float = GRAD_BYTES, optimizer_bytes: float = OPTIMIZER_BYTES
                      ) -> tuple[float, float, float]:
    """``(weights, gradients, optimizer)`` bytes of ``params`` parameters at ZeRO stage ``zero`` over
    ``ranks`` (module docstring). Array-safe: the stage enters as ``D^[z >= k]``."""
    return (params * weight_bytes / ranks ** (zero >= 3),
            params * grad_bytes / ranks ** (zero >= 2),
            params * optimizer_bytes / ranks ** (zero >= 1))


def _min(a, b):
    """``min(a, b)`` that also works elementwise on numpy arrays (STYLE.md item 12)."""
    return a + (b - a) * (b < a)


def layer_activation_bytes(*, seq_local: float, micro_batch: float, hidden: float, heads: float, kv_heads: float,
                           qk_head_dim: float, head_dim: float, mlp_width: float, gated: bool, tp: float,
                           sequence_parallel: bool, dropout: bool, flash: bool, recompute: str,
                           top_k: float = 0.0, experts: float = 0.0, shared_width: float = 0.0) -> float:
    """Bytes one layer keeps for backward for one micro-batch (module docstring).

    ``mlp_width`` is f for a dense layer and ``f_e`` for an MoE layer (``top_k > 0``), whose shared
    experts have total width ``shared_width``.
    """
    s, b, h = seq_local, micro_batch, hidden
    r = tp if sequence_parallel else 1.0
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / r
    mask = 1.0 if dropout else 0.0
    kv_local = kv_heads + (tp - kv_heads) * (kv_heads < tp)   # K/V heads replicated when t > n_kv: max(n_kv, t)
    replicated = (8.0 + 2.0 * mask) * sbh
    attention = (2.0 * s * b * (heads + kv_local) * qk_head_dim + 2.0 * s * b * kv_local * head_dim
                 + 2.0 * s * b * heads * head_dim)
    mlp_per_width = 8.0 if gated else 4.0
    if top_k:
        mlp = (mlp_per_width * s * b * top_k * mlp_width + mlp_per_width * s * b * shared_width)
        replicated += 2.0 * top_k * sbh + 4.0 * s * b * experts
    else:
        mlp = mlp_per_width * s * b * mlp_width
    if flash:
        scores = 4.0 * heads * s * b
    elif recompute == "selective":
        scores = 0.0
    else:
        scores = (2.0 + 3.0 * mask) * heads * s * s * b
    return replicated / r + (attention + mlp + scores) / tp


def in_flight_layers(*, layers: float, pp: float, vp: float, micro_batches: float) -> float:
    """Layers' worth of micro-batch activations on the first stage (module docstring); array-safe:
    the warm-up count is ``2(p-1) + (v-1)p + 1``, less ``p - 1`` when v = 1 (1F1B's p micro-batches)."""
    warmup = 2 * (pp - 1) + (vp - 1) * pp + 1 - (pp - 1) * (vp == 1)
    return _min(micro_batches * vp, warmup) * layers / (pp * vp)


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
    """The GPU's memory (gpus.json, decimal GB)."""
    stage: str
    """Which stage is fullest: ``first`` or ``last`` (``only`` without pipelining)."""
    in_flight_layers: float
    """Layers' worth of one micro-batch's activations that stage holds."""

    @property
    def fits(self) -> bool:
        """``total <= capacity``."""
        return self.total_bytes <= self.capacity_bytes

    @property
    def margin_bytes(self) -> float:
        """``capacity - total`` (negative when it does not fit)."""
        return self.capacity_bytes - self.total_bytes

    def to_dict(self) -> dict:
        """The ``memory.*`` JSON keys."""
        return {"weights_bytes": self.weights_bytes, "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "buffers_bytes": self.buffers_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "margin_bytes": self.margin_bytes,
                "stage": self.stage, "in_flight_layers": self.in_flight_layers}


def gpu_capacity_bytes(gpu: str) -> float:
    """Memory of GPU preset ``gpu`` (``memory_bytes`` in gpus.json)."""
    from commcost.presets import gpus
    from commcost.hardware import lookup
    return float(lookup(gpus(), gpu, "GPU")["memory_bytes"])


def _layer_kwargs(spec: TransformerSpec, layout: Layout, seq: int, flash: bool) -> dict:
    return dict(seq_local=seq / layout.cp, micro_batch=layout.micro_batch, hidden=spec.hidden, heads=spec.heads,
                kv_heads=spec.n_kv, qk_head_dim=spec.d_qk, head_dim=spec.d, gated=spec.gated_mlp, tp=layout.tp,
                sequence_parallel=layout.sequence_parallel, dropout=spec.dropout, flash=flash)


def stage_layer_bytes(spec: TransformerSpec, layout: Layout, seq: int, *, flash: bool, recompute: str) -> float:
    """Average activation bytes of one of the model's layers (dense and MoE layers in their proportion)."""
    return layer_mix_bytes(spec, _layer_kwargs(spec, layout, seq, flash), recompute)


def layer_mix_bytes(spec: TransformerSpec, kw: dict, recompute: str):
    """``(L_dense A_dense + L_moe A_moe) / L``: the activation bytes of the model's layers, mixed in their
    proportion, for the layer arguments ``kw`` (floats, or numpy arrays for ``commcost search``)."""
    dense = layer_activation_bytes(**kw, mlp_width=spec.ffn, recompute=recompute)
    if not spec.is_moe:
        return dense
    moe = layer_activation_bytes(**kw, mlp_width=spec.expert_ffn, recompute=recompute, top_k=spec.top_k,
                                 experts=spec.experts, shared_width=spec.shared_experts * spec.expert_ffn)
    return (spec.dense_layer_count * dense + spec.moe_layer_count * moe) / spec.layers


def memory_per_gpu(spec: TransformerSpec, layout: Layout, *, seq: int, capacity_bytes: float, flash: bool = True,
                   weight_bytes: float = WEIGHT_BYTES, grad_bytes: float = GRAD_BYTES,
                   optimizer_bytes: float = OPTIMIZER_BYTES) -> MemoryBreakdown:
    """The memory stack of the fullest stage (module docstring)."""
    if not capacity_bytes > 0:
        raise InputError(f"capacity_bytes must be > 0, got {capacity_bytes!r}")
    dense, expert = params_per_gpu(spec, layout)
    w_d, g_d, o_d = model_state_bytes(dense, layout.zero, layout.shard_dp, weight_bytes=weight_bytes,
                                      grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    w_e, g_e, o_e = model_state_bytes(expert, layout.zero, layout.expert_dp, weight_bytes=weight_bytes,
                                      grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    s_local = seq / layout.cp
    b, h, t = layout.micro_batch, spec.hidden, layout.tp
    r = t if layout.sequence_parallel else 1
    per_layer = stage_layer_bytes(spec, layout, seq, flash=flash, recompute=layout.recompute)
    working = stage_layer_bytes(spec, layout, seq, flash=flash, recompute="none") if layout.recompute == "full" else 0.0
    from commcost.parallel.layout import stage_layers

    held = stage_layers(spec.layers, layout)
    first_layers = in_flight_layers(layers=held * layout.pp, pp=layout.pp, vp=layout.vp, micro_batches=layout.micro_batches)
    embed_mask = (s_local * b * h / r) * (1.0 if spec.dropout else 0.0)
    logits = 4.0 * s_local * b * spec.vocab / t
    if layout.pp == 1:
        stage, layers_held = "only", first_layers
        act = layers_held * per_layer + working + embed_mask + logits
    else:
        first = first_layers * per_layer + working + embed_mask * min(layout.micro_batches, layout.pp)
        last = held * per_layer + working + logits   # one micro-batch (all v chunks)
        stage, layers_held, act = ("first", first_layers, first) if first >= last else \
            ("last", held, last)
    buffers = 0.0
    if layout.pp > 1:
        buffers += 4.0 * b * s_local * h * 2.0 / t
    if layout.zero == 3:
        layer_params = (dense + expert) / (held + 1)
        buffers += layer_params * (2 * weight_bytes + grad_bytes)
    if layout.sequence_parallel:
        buffers += 2.0 * s_local * b * h
    states = w_d + g_d + o_d + w_e + g_e + o_e
    total = states + act + buffers
    return MemoryBreakdown(weights_bytes=w_d + w_e, gradients_bytes=g_d + g_e, optimizer_bytes=o_d + o_e,
                           activations_bytes=act, buffers_bytes=buffers, total_bytes=total,
                           capacity_bytes=capacity_bytes, stage=stage, in_flight_layers=layers_held)


def ddp_memory_per_gpu(params: float) -> float:
    """Model states of plain DDP with mixed-precision Adam, ``16 N`` bytes (what ``budget`` can check
    before pointing at ``plan``)."""
    return params * (WEIGHT_BYTES + GRAD_BYTES + OPTIMIZER_BYTES)
