"""Compute by operator: each layer as named operators, each priced by its own roofline.

A micro-batch on one GPU runs, per layer, the projections (QKV, O), the MLP (or the routed experts'
grouped GEMMs, the shared experts and the router), the attention core, and the element-wise
operators (norms, residual adds, activation, rotary, dropout); the last stage adds the output head
and the loss; fp8 recipes add the casts. Each is priced on its own (symbols: ``n = b s / c`` tokens
of the micro-batch on this GPU, ``t`` TP, ``P_x`` the dense peak at precision x, ``B_hbm`` HBM
bandwidth, ``eta_hbm`` :data:`commcost.workload.compute.HBM_EFFICIENCY`):

* **GEMM** ``(M, N, K)`` (NVIDIA's *Matrix Multiplication Background* guide: tile and wave
  quantization): ``tiles = c ceil(M/T_m) ceil(N/T_n)`` for ``c`` equal GEMMs in a group,
  ``waves = ceil(tiles / SMs)``, ``t_math = waves 2 T_m T_n (K + K_0) / (P_x eta_gemm / SMs)``,
  ``t_mem = c (MK + KN + MN) q / (B_hbm eta_hbm)``, ``t = max(t_math, t_mem)``. The backward runs the
  data gradient ``(M, K, N)`` and the weight gradient ``(K, N, M)``. ``eta_gemm``, SMs, the tile and
  ``K_0`` are in ``hardware/kernels.json``, each with its source (large-GEMM benchmarks, not step times).
* **Attention core** (FlashAttention's own FLOP convention): forward ``F_a = 4 n s_k n_q/t (d_qk + d)/2``
  with ``s_k = s/2`` keys per query under the causal mask (``s`` without flash attention, which
  computes the whole square), backward ``2.5 F_a``; at ``eta_a(s, d) = eta_max s/(s + s_0)
  min(1, (d/(d + 32))/(128/160))`` of the bf16 peak (the fp8 peak with ``--fp8-attention``), with
  ``eta_max`` of the kernel the stack calls (FlashAttention-2, or FA3/cuDNN class). Under context
  parallelism ``c`` the kernels run on the chunks of the ring (Transformer Engine's
  ``AttnFuncWithCPAndKVP2P``: ``c`` steps, each on ``s/c`` local queries against one received block of
  ``s/c`` keys, or half of either under the load-balanced causal split), so ``eta_a`` is taken at the
  kernel's sequence ``s/c`` (the FLOPs, summed over the steps, are unchanged).
* **Sustained fraction** ``u`` (``kernels.json`` ``sustained``): the kernel rates above are measured
  one kernel at a time; a training loop on every GPU of a node at once runs them at ``u`` of that
  (clocks held down by the power limit, launch gaps, synchronisation). Every rate is multiplied by
  ``u``. It is the one constant fitted on published step times (``benchmarks/plan_accuracy.py --fit``,
  checked leave-one-source-out), per GPU.
* **Element-wise** operators: HBM bytes ``Q / (B_hbm eta_hbm)``, with the accesses per element the
  stack makes (:mod:`commcost.workload.stacks`): fused kernels read and write once, eager composites once
  per primitive. Backward is twice the forward's traffic.
* **fp8 casts** (fp8, mxfp8, nvfp4 recipes): each GEMM's input and output gradient are quantized
  (read 2 bytes, write 1: ``3 (MK + 2MN)``), the weights ``3 KN`` once per micro-batch or per step; nvfp4
  (Transformer Engine's recipe: amax, row-wise cast, Hadamard-transformed column-wise cast)
  ``7.125 (MK + MN) + 5.125 KN`` (:data:`NVFP4_CAST_BYTES`).

Recomputation adds a forward: full, of every operator; selective, the attention core (Megatron),
every other GEMM's forward and the element-wise forward (PyTorch's op-level selective checkpointing):
the matmuls :func:`commcost.workload.memory.alternate_matmul_bytes` does not keep, the 2nd, 4th and 6th
of a dense layer (K, O, and up or down), their share of the layer's GEMM forward by FLOPs
(:func:`alternate_matmul_recompute_share`); half of it in MoE layers; or the attention module
(module-level checkpointing of the attention block, llm-foundry's ``activation_checkpointing_target``):
the QKV and output projections' forward and the attention core's (:func:`attention_projections_forward_s`).

Every function is array-safe (STYLE.md item 12): ``commcost plan`` calls them on floats
(:data:`commcost.core.xp.SCALAR`), ``commcost search`` on numpy columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commcost.core.errors import InputError
from commcost.hardware import lookup
from commcost.hardware.registry import gpu_row
from commcost.hardware.registry import kernels
from commcost.parallel.layout import stage_end_shares
from commcost.workload.compute import HBM_EFFICIENCY
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.compute import precision_class

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.stacks import Stack
    from commcost.workload.transformer import TransformerSpec

__all__ = ["KernelRates", "kernel_rates", "ATTENTION_KERNELS", "gemm_s", "gemm_train_s", "attention_efficiency", "attention_s",
           "OperatorTimes", "micro_batch_operators", "expert_rows", "ATTENTION_BACKWARD_PER_FORWARD",
           "LOCAL_SORT_PASSES", "local_sort_passes", "FUSED_NORM_ACCESSES", "alternate_matmul_recompute_share",
           "attention_projections_forward_s", "FP8_CAST_BYTES", "NVFP4_CAST_BYTES", "tp_partner_gemms_s"]

ATTENTION_BACKWARD_PER_FORWARD = 2.5
"""FlashAttention's backward FLOPs per forward FLOP (recomputes the scores: 5 matmuls against 2)."""
FUSED_NORM_ACCESSES = 2.0
"""HBM accesses per element of a norm that runs as one kernel: read the input, write the output (the per-row
mean and inverse deviation it keeps are ``1/h`` of that). ``torch.nn.functional.layer_norm`` is one native
CUDA kernel (aten ``native_layer_norm``), as are Megatron's and Transformer Engine's fused norms."""
FP8_CAST_BYTES = 3.0
"""Read a 2-byte element, write a 1-byte one."""
_FP8_CASTS = (FP8_CAST_BYTES, 2.0 * FP8_CAST_BYTES, FP8_CAST_BYTES)
NVFP4_CAST_BYTES = (2.0 + 2.0 * (2.0 + 0.5 + 1.0 / 16.0), 2.0 + 2.0 * (2.0 + 0.5 + 1.0 / 16.0),
                    2.0 + 2.0 + 2.0 * (0.5 + 1.0 / 16.0))
"""HBM bytes per element to quantize a GEMM input, an output gradient and a weight to NVFP4 for both the row-wise
(forward, data gradient) and the column-wise (weight gradient) use, as Transformer Engine's default NVFP4 recipe runs
it (``transformer_engine/pytorch/csrc/quantizer.cpp``, ``NVFP4Quantizer::quantize_impl``; the recipe's random
Hadamard transform on inputs and gradients, not on weights: ``common/recipe/__init__.py`` ``NVFP4BlockScaling``).
Inputs and gradients: the amax of the input and of its transformed transpose in one read
(``nvte_hadamard_transform_amax``: 2), the row-wise quantization (read 2, write 0.5 and one 1-byte E4M3 scale per
16 elements) and the fused Hadamard transform and column-wise cast (the same again): ``2 + 2 (2 + 0.5 + 1/16) =
7.125``. Weights (2-D 16 x 16 blocks, no transform): the amax (read 2), then one kernel reads once and writes both
copies with their scales: ``2 + 2 + 2 (0.5 + 1/16) = 5.125``. Summed as :data:`FP8_CAST_BYTES` is for fp8:
``B_x MK + B_dy MN + B_w KN``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelRates:
    """The GPU-side constants of the operator model for one GPU, precision and stack (SI units)."""

    gemm_flops_per_s: float
    """``P_x eta_gemm``: a large GEMM's sustained rate at the recipe's GEMM precision."""
    gemm_operand_bytes: float
    """Bytes per GEMM operand element (2 bf16, 1 fp8, 0.5 fp4)."""
    attention_peak_flops_per_s: float
    """The peak attention runs against (bf16, or fp8 with ``--fp8-attention``)."""
    attention_forward_efficiency: float
    """``eta_max`` of the stack's attention kernel, forward."""
    attention_backward_efficiency: float
    """``eta_max`` backward."""
    sms: float
    """Streaming multiprocessors (compute units) a GEMM's tiles spread over."""
    tile_m: float
    """GEMM tile rows T_m."""
    tile_n: float
    """GEMM tile columns T_n."""
    k_overhead: float
    """``K_0``: a tile's prologue and epilogue as extra K."""
    hbm_bytes_per_s: float
    """``B_hbm eta_hbm``: sustained HBM bandwidth of element-wise kernels."""
    fp8: bool
    """The recipe quantizes GEMM inputs (fp8, mxfp8, nvfp4): casts are priced."""
    cast_bytes: tuple = _FP8_CASTS
    """``(B_x, B_dy, B_w)``: HBM bytes per element of a GEMM input, output gradient and weight its casts move
    (fp8 and mxfp8: :data:`FP8_CAST_BYTES`, the gradient cast twice; nvfp4: :data:`NVFP4_CAST_BYTES`)."""
    seq_half_tokens: float
    """``s_0`` of the attention efficiency curve."""
    head_dim_half: float
    """The head-dimension constant (32) of the attention efficiency."""
    source: str
    """Where the GPU's constants come from."""


def _table() -> dict:
    return kernels()


_OPERAND_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}


ATTENTION_KERNELS = ("fa2", "fa3", "triton", "math")
"""Attention kernels priced: FlashAttention-2, the FA3 / cuDNN class, FlashAttention in Triton (FA2's ``eta_max``
divided by the FA2 paper's speed-up over it, ``kernels.json`` ``attention.triton_slowdown_vs_fa2``: stack
``llm-foundry-2023``) and the math kernel."""


@lru_cache(maxsize=256)
def kernel_rates(gpu: str, precision: str, st: Stack, *, fp8_attention: bool = False,
                 flash: bool = True) -> KernelRates:
    """The :class:`KernelRates` of GPU preset ``gpu`` at ``precision`` under stack ``st`` (its attention
    kernel; ``u = u_gpu u_stack``)."""

    t = _table()
    row = lookup(t["gpus"], gpu, "GPU (kernels.json)")
    cls = precision_class(precision)
    if cls not in row["gemm_efficiency"]:
        raise InputError(f"{gpu} has no {precision} GEMM efficiency in kernels.json")
    kernel = st.attention_kernel if flash else "math"
    if kernel not in ATTENTION_KERNELS:
        raise InputError(f"unknown attention kernel {kernel!r} (valid: {', '.join(ATTENTION_KERNELS)})")
    fwd, bwd = row["attention"]["fa2" if kernel == "triton" else kernel]
    if kernel == "triton":
        slow_fwd, slow_bwd = t["attention"]["triton_slowdown_vs_fa2"]
        fwd, bwd = fwd / slow_fwd, bwd / slow_bwd
    if fwd <= 0:   # no flash kernel on this GPU: the math kernel
        fwd, bwd = row["attention"]["math"]
    u = float(row.get("sustained", 1.0)) * st.sustained
    attn_peak = u * peak_flops_per_s(gpu, precision if fp8_attention else "bf16")
    return KernelRates(gemm_flops_per_s=u * peak_flops_per_s(gpu, precision) * row["gemm_efficiency"][cls],
                       gemm_operand_bytes=_OPERAND_BYTES[cls], attention_peak_flops_per_s=attn_peak,
                       attention_forward_efficiency=fwd, attention_backward_efficiency=bwd, sms=float(row["sms"]),
                       tile_m=float(t["gemm"]["tile_m"]), tile_n=float(t["gemm"]["tile_n"]),
                       k_overhead=float(t["gemm"]["k_overhead"]),
                       hbm_bytes_per_s=u * gpu_row(gpu)[1] * HBM_EFFICIENCY, fp8=cls != "bf16",
                       cast_bytes=NVFP4_CAST_BYTES if cls == "fp4" else _FP8_CASTS,
                       seq_half_tokens=float(t["attention"]["seq_half_tokens"]),
                       head_dim_half=float(t["attention"]["head_dim_half"]), source=row["source"])


def gemm_s(xp, r: KernelRates, *, m, n, k, count=1.0):
    """``max(t_math, t_mem)`` of ``count`` equal GEMMs ``(M, N, K)`` (module docstring)."""
    tiles = count * xp.ceil(m / r.tile_m) * xp.ceil(n / r.tile_n)
    waves = xp.ceil(tiles / r.sms)
    t_math = waves * 2.0 * r.tile_m * r.tile_n * (k + r.k_overhead) * r.sms / r.gemm_flops_per_s
    t_mem = count * (m * k + k * n + m * n) * r.gemm_operand_bytes / r.hbm_bytes_per_s
    return xp.maximum(t_math, t_mem)


def gemm_train_s(xp, r: KernelRates, *, m, n, k, count=1.0):
    """``(forward, backward)`` of a trained GEMM: ``(M, N, K)``, then ``(M, K, N) + (K, N, M)``."""
    return (gemm_s(xp, r, m=m, n=n, k=k, count=count),
            gemm_s(xp, r, m=m, n=k, k=n, count=count) + gemm_s(xp, r, m=k, n=n, k=m, count=count))


def attention_efficiency(xp, r: KernelRates, *, seq, head_dim: float):
    """``(eta_fwd, eta_bwd)`` at sequence ``s`` and head width ``d`` (module docstring)."""
    d_factor = min(1.0, (head_dim / (head_dim + r.head_dim_half)) / (128.0 / (128.0 + r.head_dim_half)))
    s_factor = seq / (seq + r.seq_half_tokens)
    return r.attention_forward_efficiency * s_factor * d_factor, r.attention_backward_efficiency * s_factor * d_factor


def attention_s(xp, r: KernelRates, *, tokens, seq, heads_local, d_qk: float, d_v: float, flash: bool, cp=1.0,
                keys=None):
    """``(forward, backward)`` of the attention core: ``F_a = 4 n s_k n_q/t (d_qk + d)/2`` at
    ``eta_a(s/c, d)`` (module docstring; ``c = cp``, the context-parallel ring's kernels run on ``s/c``
    tokens); ``s_k = s/2`` with flash attention's causal skip, else ``s``; ``keys`` gives ``s_k`` instead
    (sliding-window layers: :meth:`commcost.workload.transformer.TransformerSpec.executed_attention_keys`)."""
    if keys is None:
        keys = seq * (0.5 if flash else 1.0)
    flops = 2.0 * tokens * keys * heads_local * (d_qk + d_v)
    eta_f, eta_b = attention_efficiency(xp, r, seq=seq / cp, head_dim=d_v)
    return (flops / (r.attention_peak_flops_per_s * eta_f),
            ATTENTION_BACKWARD_PER_FORWARD * flops / (r.attention_peak_flops_per_s * eta_b))


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorTimes:
    """One micro-batch on the slowest stage, by operator, seconds (floats, or numpy columns in search)."""

    gemm_s: object
    """Projections, MLP / experts and router, forward and backward, every layer of the stage."""
    attention_s: object
    """The attention core, forward and backward."""
    elementwise_s: object
    """Norms, residual adds, activation, rotary, dropout, MoE permutation (and scores without flash)."""
    head_s: object
    """The output head's GEMMs and the loss (last stage)."""
    casts_s: object
    """fp8 quantization of GEMM inputs, gradients and weights."""
    recompute_s: object
    """The forward work recomputed in the backward."""
    compute_s: object
    """``t_c``: the sum of the above."""
    forward_s: object
    """The forward's share of ``t_c`` (the recomputation counted with the backward)."""
    layer_forward_s: object
    """``t_f``: one layer's forward (hides TP and ZeRO-3 collectives)."""
    attention_forward_s: object
    """One layer's attention-core forward (hides CP's ring)."""
    tp_partners_s: tuple = (0.0,) * 8
    """One layer's forward of the four GEMMs its TP collectives overlap with, whole and decomposed
    (:func:`tp_partner_gemms_s`)."""

    def by_operator(self) -> dict:
        """The named parts (``plan``'s ``compute_by_operator``)."""
        return {"gemm_s": self.gemm_s, "attention_s": self.attention_s, "elementwise_s": self.elementwise_s,
                "head_s": self.head_s, "casts_s": self.casts_s, "recompute_s": self.recompute_s}


def expert_rows(xp, *, n, tp, sp, ep, expert_tp, experts: int, top_k: int, expert_load=1.0):
    """``M_e = (n/t') g k e / E I``: rows of each local expert's GEMM on the busiest rank (the
    grouped GEMM's per-expert M). A rank dispatches ``n/t'`` tokens (``t' = t`` with sequence
    parallelism, else 1), each to ``k`` of the ``E`` experts; its ``E/e`` experts receive ``k e / E`` of
    every EP rank's tokens; the expert-TP group of ``t_e`` ranks all-gathers the distinct tokens its
    ranks hold (Megatron-Core's dispatcher): ``g = t_e`` with sequence parallelism, ``g = max(1, t_e/t)``
    without it (ranks of one TP group hold the same tokens); the busiest rank gets ``I`` times the mean
    (:attr:`commcost.analyses.plan.plan.PlanInputs.expert_load`)."""
    t_prime = xp.where(sp, tp, 1.0)
    gathered = xp.where(sp, expert_tp, xp.maximum(1.0, expert_tp / tp))
    return n / t_prime * gathered * top_k * ep / experts * expert_load


def _input_projections(spec: TransformerSpec, *, n, tp) -> list:
    """``(M, N, K, count)`` of the GEMMs from the layer's input to the attention core. Q, K and V as one
    ``(n, (A - w_q h)/h / t, h)`` (the fused QKV of Megatron-LM and Transformer Engine). Multi-latent
    attention runs four: the query down projection ``(n, r_q, h)`` and the joint KV down projection
    ``(n, r_kv + d_r, h)``, not split by TP (Megatron-Core's ``MLASelfAttention`` builds
    ``linear_q_down_proj`` and ``linear_kv_down_proj`` with ``parallel_mode="duplicated"``: every TP rank
    computes them whole), the query up projection ``(n, n_q d_qk / t, r_q)`` (or ``(n, n_q d_qk / t, h)``
    without query compression) and the KV up projection ``(n, n_q (d_qk - d_r + d) / t, r_kv)``, column
    parallel (DeepSeek-V2 section 2.1)."""
    h = spec.hidden
    if not spec.is_mla or spec.attention_params:
        return [(n, (spec.attention_matrix_params - spec.q_width * h) / h / tp, h, 1.0)]
    r_q, r_kv, d_r, n_q = spec.q_lora_rank, spec.kv_lora_rank, spec.qk_rope_head_dim, spec.heads
    q = [(n, r_q, h, 1.0), (n, n_q * spec.d_qk / tp, r_q, 1.0)] if r_q else [(n, n_q * spec.d_qk / tp, h, 1.0)]
    return q + [(n, r_kv + d_r, h, 1.0), (n, n_q * (spec.d_qk - d_r + spec.d) / tp, r_kv, 1.0)]


def _input_projections_s(xp, r: KernelRates, spec: TransformerSpec, *, n, tp, split: bool = False):
    """Forward time of :func:`_input_projections` (``split``: each as ``t`` GEMMs of ``M/t`` rows)."""
    if split:
        return sum(tp * gemm_s(xp, r, m=m_ / tp, n=n_, k=k_) for m_, n_, k_, _ in _input_projections(spec, n=n, tp=tp))
    return sum(gemm_s(xp, r, m=m_, n=n_, k=k_) for m_, n_, k_, _ in _input_projections(spec, n=n, tp=tp))


def _layer_gemms(xp, r: KernelRates, spec: TransformerSpec, *, n, tp, ep, expert_tp, moe: bool, sp=False,
                 expert_load=1.0):
    """``(forward, backward, (M K, M N, K N) element sums for fp8 casts)`` of one layer's GEMMs; the
    routed experts as one grouped GEMM of ``E/e`` experts of :func:`expert_rows` rows each (tiles of all
    of them share the waves), the router ``(n/t', E, h)`` on the tokens the rank dispatches."""
    h = spec.hidden
    shapes = [*_input_projections(spec, n=n, tp=tp), (n, h, spec.q_width / tp, 1.0)]
    mult = 2.0 if spec.gated_mlp else 1.0
    if moe:
        E, k, f = spec.experts, spec.top_k, spec.expert_ffn
        local = E / ep
        rows = expert_rows(xp, n=n, tp=tp, sp=sp, ep=ep, expert_tp=expert_tp, experts=E, top_k=k,
                           expert_load=expert_load)
        shapes += [(n / xp.where(sp, tp, 1.0), E, h, 1.0), (rows, mult * f / expert_tp, h, local),
                   (rows, h, f / expert_tp, local)]
        if spec.shared_ffn:
            fs = spec.shared_ffn
            shapes += [(n, mult * fs / tp, h, 1.0), (n, h, fs / tp, 1.0)]
    else:
        f = spec.ffn
        shapes += [(n, mult * f / tp, h, 1.0), (n, h, f / tp, 1.0)]
    fwd = bwd = 0.0
    mk = mn = kn = 0.0
    for m_, n_, k_, c in shapes:
        a, b = gemm_train_s(xp, r, m=m_, n=n_, k=k_, count=c)
        fwd, bwd = fwd + a, bwd + b
        mk, mn, kn = mk + c * m_ * k_, mn + c * m_ * n_, kn + c * k_ * n_
    return fwd, bwd, (mk, mn, kn)


def tp_partner_gemms_s(xp, r: KernelRates, spec: TransformerSpec, *, n, tp, moe: bool, ep=1.0, expert_tp=1.0,
                       sp=False, expert_load=1.0):
    """``(t_qkv, t_o, t_up, t_down, t'_qkv, t'_o, t'_up, t'_down)``: forward of the GEMMs a layer's TP
    collectives overlap with, when they overlap, whole (``t``) and decomposed (``t'``). PyTorch's async
    TP and Transformer Engine's userbuffers pair each collective with one GEMM, not with the layer: each
    all-gather feeds one GEMM, which runs on each rank's shard of the rows as it arrives
    (``torch.ops.symm_mem.fused_all_gather_matmul``; TE ``ub_overlap_ag`` on ``qkv_fprop`` and ``fc1_fprop``),
    each reduce-scatter drains the GEMM that produces it, one destination rank's rows at a time
    (``fused_matmul_reduce_scatter``; TE ``ub_overlap_rs`` on ``proj_fprop`` and ``fc2_fprop``). The QKV and
    up (gate and up) projections take the all-gathers, the output and down projections the
    reduce-scatters; the GEMMs of :func:`_layer_gemms` (in MoE layers the routed experts' grouped GEMMs,
    not decomposed). Decomposed, a GEMM runs as ``t`` GEMMs of ``M/t`` rows, each with its own waves:
    ``t' = t gemm(M/t, N, K)`` (wave quantization of the smaller GEMMs). The backward's collectives pair
    with the data-gradient GEMM of the same projection (TE ``qkv_dgrad``, ``fc1_dgrad``; the same FLOPs as
    the forward), so the forward times serve both passes."""
    h = spec.hidden
    mult = 2.0 if spec.gated_mlp else 1.0
    shapes = [(h, spec.q_width / tp)]
    if not moe:
        shapes += [(mult * spec.ffn / tp, h), (h, spec.ffn / tp)]
    whole = [_input_projections_s(xp, r, spec, n=n, tp=tp)] + [gemm_s(xp, r, m=n, n=n_, k=k_) for n_, k_ in shapes]
    split = [_input_projections_s(xp, r, spec, n=n, tp=tp, split=True)] + [
        tp * gemm_s(xp, r, m=n / tp, n=n_, k=k_) for n_, k_ in shapes]
    if moe:
        f, local = spec.expert_ffn, spec.experts / ep
        rows = expert_rows(xp, n=n, tp=tp, sp=sp, ep=ep, expert_tp=expert_tp, experts=spec.experts,
                           top_k=spec.top_k, expert_load=expert_load)
        experts = [gemm_s(xp, r, m=rows, n=mult * f / expert_tp, k=h, count=local),
                   gemm_s(xp, r, m=rows, n=h, k=f / expert_tp, count=local)]
        whole, split = whole + experts, split + experts
    return (*whole, *split)


def attention_projections_forward_s(xp, r: KernelRates, spec: TransformerSpec, *, n, tp):
    """Forward of one layer's attention projections: QKV ``(n, (A_attn - w_q h)/h / t, h)`` and the output
    projection ``(n, h, w_q / t)``, the first two GEMMs of :func:`_layer_gemms` (dense and MoE layers alike)."""
    return _input_projections_s(xp, r, spec, n=n, tp=tp) + gemm_s(xp, r, m=n, n=spec.hidden, k=spec.q_width / tp)


def alternate_matmul_recompute_share(spec: TransformerSpec) -> float:
    """``rho``: the share of a dense layer's forward GEMM FLOPs that op-level selective checkpointing
    (torchtitan's ``_custom_policy``: every other ``aten.mm`` saved) recomputes. A layer's matmuls in
    order are Q, K, V, O, then gate, up, down (gated) or up, down; the 1st, 3rd, 5th and 7th are saved
    (:func:`commcost.workload.memory.alternate_matmul_bytes`, the same list), the 2nd, 4th and 6th
    recomputed: K ``h n_kv d``, O ``n_q d h`` and the up (gated) or down projection ``h f``:

    ``rho = (h n_kv d + n_q d h + h f) / (A_attn + (1 + [gated]) h f + h f)``

    (``A_attn`` the attention matrices' parameters). Llama 3.1 8B: ``(4096 x 1024 + 4096^2 + 4096 x
    14336) / (4096 x 10240 + 3 x 4096 x 14336) = 79.69M / 218.10M = 0.365``; non-gated MHA (MPT): K, O and
    down, ``6 h^2 / 12 h^2 = 0.5``."""
    h, f = spec.hidden, spec.ffn
    mlp = (2.0 if spec.gated_mlp else 1.0) * h * f + h * f
    return (h * spec.kv_width + spec.q_width * h + h * f) / (spec.attention_matrix_params + mlp)


LOCAL_SORT_PASSES = 1.0
"""Extra permutation passes of Megatron-Core's ``alltoall`` dispatcher when a rank holds more than one
expert: after the all-to-all the received tokens arrive grouped by source rank and are sorted by local
expert (``sort_chunks_by_idxs``, "Permutation 2"), and unsorted before the combine ("Unpermutation 2")
(``megatron/core/transformer/moe/token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher.dispatch_postprocess``
and ``combine_preprocess``); DeepEP's flex dispatcher delivers tokens per rank and permutes once."""


def local_sort_passes(xp, *, a2a: str, experts: int, ep):
    """``P_sort``: :data:`LOCAL_SORT_PASSES` with the ``nccl`` (alltoall) dispatcher and ``E/e > 1`` local
    experts, else 0. Array-safe in ``ep``."""
    return xp.where(experts / ep > 1.0, LOCAL_SORT_PASSES, 0.0) * (1.0 if a2a == "nccl" else 0.0)


def _elementwise_bytes(xp, spec: TransformerSpec, st: Stack, *, n, tp, sp, seq, flash: bool, moe: bool,
                       sort_passes=0.0):
    """Forward HBM bytes of one layer's element-wise operators (2-byte elements): norms
    ``2 a_norm h`` (``a_norm`` the stack's, or :data:`FUSED_NORM_ACCESSES` for a model whose code fuses its
    norms, ``TransformerSpec.fused_norm``), residual adds ``6 h``, dropout ``5 h`` (with dropout) over ``r`` (t with sequence
    parallelism, else 1); the activation ``a_act f'`` and rotary ``a_rot (w_q + w_kv)`` over t; MoE
    permutation and unpermutation ``4 k h (1 + P_sort)`` over r (each a read and a write of the ``k``
    copies; ``P_sort`` the dispatcher's sort by local expert, :func:`local_sort_passes`), and the router's
    softmax and top-k over fp32 logits ``6 E`` over r (written, read, probabilities written: 12 bytes per
    expert and token); without flash attention the softmax ``(2 + 2.5 dropout) n_q s`` over t."""
    r = xp.where(sp, tp, 1.0)
    h = spec.hidden
    width = spec.top_k * spec.expert_ffn + spec.shared_ffn if moe else spec.ffn
    act = st.activation_accesses_gated if spec.gated_mlp else st.activation_accesses
    rotary = st.rotary_accesses * (spec.q_width + spec.kv_width) * (spec.max_positions == 0)
    norm = FUSED_NORM_ACCESSES if spec.fused_norm else st.norm_accesses
    rep = (2.0 * norm + 6.0 + 5.0 * spec.dropout) * h + (
        4.0 * spec.top_k * h * (1.0 + sort_passes) + 6.0 * spec.experts if moe else 0.0)
    scores = (2.0 + 2.5 * spec.dropout) * spec.heads * seq * (not flash)
    return 2.0 * n * (rep / r + (act * width + rotary + scores) / tp)


def micro_batch_operators(xp, spec: TransformerSpec, st: Stack, r: KernelRates, *, tokens, seq, layers, tp, sp: bool,
                          ep=1.0, expert_tp=1.0, full, selective, micro_batches, flash: bool = True,
                          expert_load=1.0, a2a: str = "nccl", cp=1.0, split_counts_ends=False,
                          pp=1) -> OperatorTimes:
    """One micro-batch of ``tokens = b s / c`` on the slowest stage (``layers = L/p`` of them, and the
    head): every operator of the module docstring (``cp``: the context-parallel ``c`` the attention
    kernels' sequence is split by). ``full`` and ``selective`` say the recomputation
    (bools, or boolean columns); ``micro_batches`` (m) spreads per-step weight casts over the step.
    ``split_counts_ends``: the pipeline split over ``pp`` stages counts the embedding and the head as a layer each
    (:attr:`commcost.parallel.layout.Layout.split_counts_ends`; ``layers`` then a middle stage's): the slowest
    stage is the last with one layer fewer and the head, or a middle one without the head, whichever takes
    longer (:func:`commcost.parallel.layout.stage_end_shares`)."""
    fractions = []
    if spec.dense_layer_count:
        fractions.append((spec.dense_layer_count / spec.layers, False))
    if spec.moe_layer_count:
        fractions.append((spec.moe_layer_count / spec.layers, True))
    g_f = g_b = e_f = cast = g_sel = 0.0
    partners = (0.0,) * 8
    rho = alternate_matmul_recompute_share(spec)
    for frac, moe in fractions:
        a, b, (mk, mn, kn) = _layer_gemms(xp, r, spec, n=tokens, tp=tp, ep=ep, expert_tp=expert_tp, moe=moe, sp=sp,
                                          expert_load=expert_load)
        g_f, g_b = g_f + frac * a, g_b + frac * b
        g_sel = g_sel + frac * (0.5 if moe else rho) * a
        partners = tuple(p + frac * q for p, q in zip(partners, tp_partner_gemms_s(
            xp, r, spec, n=tokens, tp=tp, moe=moe, ep=ep, expert_tp=expert_tp, sp=sp, expert_load=expert_load)))
        sort = local_sort_passes(xp, a2a=a2a, experts=spec.experts, ep=ep) if moe else 0.0
        e_f = e_f + frac * _elementwise_bytes(xp, spec, st, n=tokens, tp=tp, sp=sp, seq=seq, flash=flash, moe=moe,
                                              sort_passes=sort) \
            / r.hbm_bytes_per_s
        weights = kn / (1.0 if st.fp8_weight_cast_per_micro_batch else micro_batches)
        b_x, b_dy, b_w = r.cast_bytes
        cast = cast + frac * (b_x * mk + b_dy * mn + b_w * weights) / r.hbm_bytes_per_s
    cast = cast * r.fp8
    a_f, a_b = attention_s(xp, r, tokens=tokens, seq=seq, heads_local=spec.heads / tp, d_qk=spec.d_qk, d_v=spec.d,
                           flash=flash, cp=cp, keys=spec.executed_attention_keys(seq, flash=flash))
    # the head: logits GEMM (M = n, N = V/t, K = h) and the loss over V/t
    h_f, h_b = gemm_train_s(xp, r, m=tokens, n=spec.vocab / tp, k=spec.hidden)
    loss = 2.0 * tokens * st.loss_accesses_per_vocab * spec.vocab / tp / r.hbm_bytes_per_s
    head = h_f + h_b + 3.0 * loss
    layer_f = g_f + a_f + e_f
    if st.selective == "attention":
        sel = a_f
    elif st.selective == "attention_module":
        sel = attention_projections_forward_s(xp, r, spec, n=tokens, tp=tp) + a_f
    else:
        sel = g_sel + e_f
    rec_layer = xp.where(full, layer_f, xp.where(selective, sel, 0.0))
    k_layer, k_head = stage_end_shares(xp, counted=split_counts_ends, pp=pp, head_s=head,
                                       layer_s=g_f + g_b + a_f + a_b + 3.0 * e_f + cast + rec_layer)
    layers = layers - 1.0 + k_layer
    gemm = layers * (g_f + g_b)
    attention = layers * (a_f + a_b)
    elementwise = layers * 3.0 * e_f
    casts = layers * cast
    rec = layers * rec_layer
    head = k_head * head
    compute = gemm + attention + elementwise + head + casts + rec
    forward = layers * layer_f + k_head * (h_f + loss) + casts / 3.0
    return OperatorTimes(gemm_s=gemm, attention_s=attention, elementwise_s=elementwise, head_s=head, casts_s=casts,
                         recompute_s=rec, compute_s=compute, forward_s=forward, layer_forward_s=layer_f,
                         attention_forward_s=a_f, tp_partners_s=partners)
