"""The step-time composition of a parallel configuration, written once: ``plan`` runs it on floats
(``xp = SCALAR``, :mod:`commcost.core.xp`), ``search`` on numpy columns (``xp = numpy``).

Inputs are what the layers below already priced: FLOPs (:mod:`commcost.workload.transformer`), the
element-wise HBM time (:func:`commcost.workload.compute.elementwise_time_s`), one collective's time ``T`` of
each kind (the CommModel), the DDP bucket timeline's exposed time. The kernels compose them into
the terms of :mod:`commcost.analyses.plan.plan`'s module docstring (items 1-6), with its symbols: ``m``
micro-batches, ``p`` stages, ``v`` virtual stages, ``c`` CP, ``t_c`` compute of one micro-batch on
the slowest stage, ``t_f = t_layer`` one layer's forward, ``t_b = 2 t_f`` its backward.

The other shared kernels live beside the formulas they state: memory per GPU in :mod:`commcost.workload.memory`
(:func:`~commcost.workload.memory.stage_activation_bytes`, :func:`~commcost.workload.memory.buffer_bytes` ...), the DDP
timeline's closed form in :mod:`commcost.step.timeline` (:func:`~commcost.step.timeline.uniform_end_s`).

No kernel branches on a value (STYLE.md item 12): choices that vary over a search enter through
``xp.where``; only inputs fixed for the whole search (``--tp-comm-overlap``) are Python ``if``.
"""

from __future__ import annotations

from commcost.parallel.pipeline import exposed_p2p_count
from commcost.step.schedule import bubble_s
from commcost.workload.transformer import CAUSAL_EXECUTED_FRACTION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.transformer import TransformerSpec

__all__ = ["OPTIMIZER_HBM_BYTES_PER_PARAM", "BACKWARD_PER_FORWARD", "TP_OVERLAP_SHARE", "layer_flops",
           "micro_batch_flops", "micro_batch_times", "full_exposed_s", "tp_exposed_s", "tp_partners_s", "MOE_OVERLAPS",
           "ep_paired_share", "ep_exposed_s", "cp_exposed_s", "pp_exposed_s",
           "elementwise_passes", "zero3_once", "zero3_regather_rounds",
           "zero3_layer_exposed_s", "zero3_exposed_s", "pipeline_terms", "dp_backward_fraction",
           "dp_accumulated_micro_batches", "nic_share", "zero2_micro_batch_exposed_s", "gather_exposed_s", "optimizer_s", "step_s",
           "tokens_per_s_per_gpu"]

OPTIMIZER_HBM_BYTES_PER_PARAM = 28.0
"""Adam's HBM traffic per parameter of its shard (``plan`` item 5): fp32 master and two moments read
and written (24), bf16 gradient read (2) and weight written (2)."""
BACKWARD_PER_FORWARD = 2.0
"""``t_b = 2 t_f``: a layer's backward runs twice its forward's FLOPs."""
TP_OVERLAP_SHARE = 0.25
"""With ``--tp-comm-overlap`` each TP collective of a layer's pass hides behind a quarter of that
pass's compute (``PlanInputs.tp_comm_overlap``), unless the stack overlaps per GEMM (:func:`tp_exposed_s`)."""


# 1. compute per micro-batch on the slowest stage

def layer_flops(spec: TransformerSpec, *, seq: float, flash_attention: bool) -> tuple[float, float, dict]:
    """``(f_layer, f_attention, {recompute: r})`` per token: one layer's executed forward FLOPs (matrices
    averaged over dense and MoE layers, plus the score products, at
    :data:`~commcost.workload.transformer.CAUSAL_EXECUTED_FRACTION` of the square with flash attention), the
    score products alone, and the recomputation ``r`` of each mode (none: 0, selective: the score
    products, full: ``f_layer``)."""

    dense_f, moe_f = spec.layer_matmul_flops
    layer_mm = (spec.dense_layer_count * dense_f + spec.moe_layer_count * moe_f) / spec.layers
    attn = spec.attention_score_flops(seq) * (CAUSAL_EXECUTED_FRACTION if flash_attention else 1.0)
    f_layer = layer_mm + attn
    return f_layer, attn, {"none": 0.0, "selective": attn, "full": f_layer}


def micro_batch_flops(*, tokens, layers, f_layer, f_recompute, f_logits, tp):
    """``(F_mb, F_fwd / F_mb)``: executed FLOPs of one micro-batch on the slowest stage,
    ``F_mb = (b s / c) [ (L/p) (3 f_layer + r) + 3 f_logits ] / t``, and the forward's share,
    ``F_fwd = (b s / c) [ (L/p) f_layer + f_logits ] / t``; ``tokens = b s / c``, ``layers = L/p``,
    ``f_recompute = r`` (0, the score products, or ``f_layer``)."""
    F_mb = tokens * (layers * (3.0 * f_layer + f_recompute) + 3.0 * f_logits) / tp
    F_fwd = tokens * (layers * f_layer + f_logits) / tp
    return F_mb, F_fwd / F_mb


def micro_batch_times(*, F_mb, fwd_share, layer_flops, attention_flops, rate_flops_per_s, elementwise_s):
    """``(t_c, t_fwd, t_f, t_attention)``: ``t_c = F_mb / (P_peak eta) + Q_mb / (B_hbm eta_hbm)``
    (``elementwise_s`` the second term), ``t_fwd = (F_fwd / F_mb) t_c``, one layer's forward
    ``t_f = F_layer / (P_peak eta)`` and its attention score products ``F_attention / (P_peak eta)``
    (``layer_flops``, ``attention_flops``: per micro-batch on one GPU)."""
    t_c = F_mb / rate_flops_per_s + elementwise_s
    return t_c, fwd_share * t_c, layer_flops / rate_flops_per_s, attention_flops / rate_flops_per_s


# 2-3. critical communication (each returns seconds per step) and the pipeline

def full_exposed_s(*, count, one_s):
    """``count T``: a collective on the critical path, nothing hidden (TP without overlap, EP)."""
    return count * one_s


def tp_exposed_s(xp, *, count, one_s, layer_fwd_s, passes, overlap, partners_s=None, per_gemm=True):
    """TP per step: ``count T`` in full, or with ``overlap`` each collective of a forward pass hidden
    behind a quarter of it and each of a backward pass behind a quarter of ``t_b``:
    ``n_f max(0, T - t_f/4) + (count - n_f) max(0, T - t_b/4)``, ``n_f = count (passes - 1)/passes``
    (``passes``: 2, or 3 with full recomputation). With ``partners_s`` (a stack that overlaps per GEMM,
    :func:`tp_partners_s`) each collective runs beside the one GEMM it is fused with instead, in turn: the
    pair takes the longer of the collective and the decomposed GEMM ``t'_i``, of which the GEMM's own time
    ``t_i`` is already counted: ``(count / k) sum_i max(0, max(T, t'_i) - t_i)`` over its ``k`` partners.
    ``overlap`` and ``per_gemm`` (with ``partners_s``: which rows overlap per GEMM) may be boolean columns (a search
    under ``--stack auto``, each row as its implied stack): each row takes its own case."""
    if overlap is False or overlap is True or not hasattr(overlap, "shape"):
        if not overlap:
            return full_exposed_s(count=count, one_s=one_s)
    elif not xp.any(overlap):
        return full_exposed_s(count=count, one_s=one_s)
    layer_bwd_s = BACKWARD_PER_FORWARD * layer_fwd_s
    fwd_n = count * (passes - 1) / passes
    hidden = (fwd_n * xp.maximum(0.0, one_s - layer_fwd_s * TP_OVERLAP_SHARE)
              + (count - fwd_n) * xp.maximum(0.0, one_s - layer_bwd_s * TP_OVERLAP_SHARE))
    if partners_s is not None:
        per = sum(xp.maximum(0.0, xp.maximum(one_s, d) - w) for w, d in partners_s)
        paired = xp.where(one_s > 0.0, count / len(partners_s) * per, 0.0)     # no collective, no decomposition
        hidden = paired if per_gemm is True else xp.where(per_gemm, paired, hidden)
    if hasattr(overlap, "shape"):
        return xp.where(overlap, hidden, full_exposed_s(count=count, one_s=one_s))
    return hidden


def tp_partners_s(*, gathers: bool, partners_s):
    """``((t_i, t'_i), ...)``: the GEMMs an all-gather (``gathers``: QKV and up) or a reduce-scatter /
    all-reduce (output and down) runs beside, of ``partners_s = (t_qkv, t_o, t_up, t_down, t'_qkv, t'_o,
    t'_up, t'_down)`` (:func:`commcost.workload.operators.tp_partner_gemms_s`); None without them (a stack
    that overlaps per pass, or a given efficiency)."""
    if partners_s is None:
        return None
    pick = (0, 2) if gathers else (1, 3)
    return tuple((partners_s[i], partners_s[i + 4]) for i in pick)


MOE_OVERLAPS = ("none", "1f1b", "dualpipe")
"""``--moe-overlap`` values: nothing hidden; Megatron-Core's 1F1B all-to-all overlap
(``--overlap-moe-expert-parallel-comm``); DeepSeek-V3's DualPipe."""


def ep_paired_share(xp, *, overlap: str, pp, vp, micro_batches):
    """``f``: the share of a rank's ``m v`` forward chunks that run beside another micro-batch's backward
    chunk, where one's all-to-all hides behind the other's compute. ``none``: 0. ``1f1b``
    (Megatron-Core's merged forward-backward of two micro-batches in the steady state):
    ``(m v - w) / (m v)``, ``w = min(m v, 2(p-1) + (v-1)p + 1 - (p-1)[v = 1])`` the warm-up chunks, which
    (and the as many cool-down chunks) run alone (Megatron's warm-up count, as
    :func:`commcost.workload.memory.in_flight_layers`). ``dualpipe`` (DeepSeek-V3 report, arXiv 2412.19437
    section 3.2.1: every forward chunk paired with a backward chunk, both directions fed): 1; its
    warm-up is the bubble's. ``overlap`` is fixed for a whole search (a Python choice)."""
    if overlap == "none":
        return 0.0 * pp
    if overlap == "dualpipe":
        return 1.0 + 0.0 * pp
    chunks = micro_batches * vp
    warmup = 2 * (pp - 1) + (vp - 1) * pp + 1 - (pp - 1) * (vp == 1)
    w = xp.minimum(chunks, warmup)
    return (chunks - w) / chunks


def ep_exposed_s(xp, *, wire_s, pairs, layer_fwd_s, passes, paired_share, sm_share=0.0):
    """EP per step: ``(1 - f) W + f N [max(0, W/N - K) + sigma min(W/N, K)]``, ``W`` the all-to-alls' time on the wire per step,
    ``N = m (L_moe/p)`` the (micro-batch, MoE layer) pairs, ``W/N`` one layer's dispatch and combine of
    both passes, ``K = (passes - 1 + 2) t_f`` the other micro-batch's compute of that layer (forward and
    backward, recomputation included) behind which they run, ``f`` :func:`ep_paired_share`. The
    paired part is the bound an overlap can reach: compute and all-to-all on separate engines, the
    longer sets the pace (scaling-book's ``max(T_math, T_comms)``), less what the all-to-all kernels
    take from the compute they run beside: ``sigma`` (:func:`commcost.parallel.dispatch.comm_sm_share`) of
    the SMs for the overlapped time ``min(W/N, K)``."""
    K = (passes - 1.0 + BACKWARD_PER_FORWARD) * layer_fwd_s
    per_pair = wire_s / xp.maximum(pairs, 1e-300)
    hidden = xp.minimum(per_pair, K)
    return (1.0 - paired_share) * wire_s + paired_share * pairs * (per_pair - hidden + sm_share * hidden)


def cp_exposed_s(xp, *, rings, cp, one_s, attention_s):
    """CP's ring per step: ``rings (c-1) max(0, T - t_attention / c)``, one ring of ``c - 1`` send/recv
    steps per layer and pass (``rings = m (L/p) passes``), each hidden only behind the one step of
    attention it runs beside: the ring computes ``c`` steps of ``t_attention / c`` (equal under the
    load-balanced causal split) and sends the next step's block while computing the current one, so the
    last step's compute hides nothing (Transformer Engine's ``AttnFuncWithCPAndKVP2P``: "overlap
    current-step compute with next-step communication"; Liu et al. 2023, Ring Attention, section 3:
    the block's compute must outlast the block's transfer). Backward rings (K, V and dK, dV: two
    transfers a step) hide behind the backward's steps, ``t_b = 2 t_f``: per transfer the same bound."""
    return rings * (cp - 1) * xp.maximum(0.0, one_s - attention_s / cp)


def pp_exposed_s(*, pp, micro_batches, vp, one_s):
    """Point-to-point transfers on the critical path times ``T``:
    :func:`commcost.parallel.pipeline.exposed_p2p_count` ``x T``."""
    return exposed_p2p_count(pp, micro_batches, vp) * one_s


def zero3_layer_exposed_s(xp, *, gather_s, scatter_s, layer_fwd_s, regather=1.0):
    """ZeRO-3 per layer and round: ``(max(0, T_ag - t_f), max(0, g T_ag + T_rs - t_b))``, the
    forward's gather behind the previous layer's forward, the backward's gather (``g = regather``: 1,
    or 0 where the stage stays gathered through the step) and scatter behind its backward."""
    fwd = xp.maximum(0.0, gather_s - layer_fwd_s)
    bwd = xp.maximum(0.0, regather * gather_s + scatter_s - BACKWARD_PER_FORWARD * layer_fwd_s)
    return fwd, bwd


def elementwise_passes(xp, full):
    """Passes of the element-wise operators per micro-batch: forward, backward (two) and, under full
    recomputation, the forward again: ``4`` with full recomputation, else ``3``. Array-safe."""
    return xp.where(full, 4.0, 3.0)


def zero3_once(*, zero3, pp, unshard_under_pp):
    """Whether ZeRO-3 gathers and scatters once per step: the stack keeps the stage gathered under
    pipeline parallelism (``unshard_under_pp``, :attr:`commcost.workload.stacks.Stack.zero3_unshard_under_pp`)
    and ``p > 1``. Array-safe (booleans combined with ``&``)."""
    return zero3 & (pp > 1) & unshard_under_pp


def zero3_regather_rounds(xp, *, once, micro_batches):
    """``(regather, rounds)`` of ZeRO-3's gathers: the stage re-gathered in the backward (1, else 0) and
    rounds of gathers per step (``m``, else 1) unless it stays gathered through the step (``once``,
    :func:`zero3_once`). Array-safe."""
    return xp.where(once, 0.0, 1.0), xp.where(once, 1.0, micro_batches)


def zero3_exposed_s(*, fwd_s, bwd_s, units, micro_batches, gather_s, rounds=None):
    """``(per micro-batch, per step)`` of ZeRO-3: ``r u (fwd + bwd) + T_ag`` per step and that over ``m``
    on each micro-batch's critical path (``u = L/p + 1`` gathered units, the first gather of the step not
    hidden; ``r = rounds`` of gathers and scatters per step: ``m``, or 1 where the stage stays gathered
    through the step)."""
    r = micro_batches if rounds is None else rounds
    per_step = r * units * (fwd_s + bwd_s) + gather_s
    return per_step / micro_batches, per_step


def pipeline_terms(*, micro_batches, pp, vp, compute_mb_s, critical_mb_s):
    """``(compute, t_mb, bubble)``: ``m t_c``, ``t_mb = t_c + critical communication per
    micro-batch``, and the bubble ``(p-1) t_mb / v`` (:func:`commcost.step.schedule.bubble_s`)."""
    t_mb = compute_mb_s + critical_mb_s
    return micro_batches * compute_mb_s, t_mb, bubble_s(pp, vp, t_mb)


# 4. data parallel

def dp_backward_fraction(*, fwd_share, compute_mb_s, micro_batch_s):
    """``f_b = (1 - F_fwd/F_mb) t_c / t_mb``: the backward window ``W = f_b t_mb`` the DDP timeline
    hides the gradient reduction in (the last micro-batch's backward)."""
    return (1.0 - fwd_share) * compute_mb_s / micro_batch_s


def dp_accumulated_micro_batches(xp, *, pp, micro_batches):
    """``k``: micro-batches the DDP timeline accumulates before the reduction it overlaps, ``m``
    without a pipeline (gradient accumulation under ``no_sync``), 1 with one (the reduction waits
    only for the last micro-batch's backward on the stage); its backward ends at ``t_e = k t_mb``."""
    return xp.where(pp == 1, micro_batches, 1)


def nic_share(xp, *, crossing, ranks_per_node, group):
    """``k``: a DP group that crosses nodes while ``crossing`` critical groups (TP, CP, EP) do gets
    ``1/(1 + crossing)`` of the NIC, so its collectives take ``k = 1 + crossing`` times as long."""
    return xp.where(ranks_per_node < group, 1.0 + crossing, 1.0)


def zero2_micro_batch_exposed_s(xp, *, extra, scatter_s, window_s):
    """ZeRO-2 with gradient accumulation on a stack that shards gradients every micro-batch (DeepSpeed
    stage 2, FSDP ``SHARD_GRAD_OP``): the ``m - 1`` earlier micro-batches each reduce-scatter the whole
    gradient ``T_rs`` behind their own backward window ``W``: ``(m - 1) max(0, T_rs - W)``."""
    return extra * xp.maximum(0.0, scatter_s - window_s)


def gather_exposed_s(xp, *, gather_s, fwd_s):
    """ZeRO-1/2's weight all-gather behind the next step's first forward: ``max(0, k T_ag - t_fwd)``."""
    return xp.maximum(0.0, gather_s - fwd_s)


# 5-6. optimizer, step, throughput

def optimizer_s(xp, *, dense_params, expert_params, dense_ranks, expert_ranks, zero, hbm_bytes_per_s):
    """``t_opt = 28 N_shard / B_hbm``, ``N_shard = N_d / D^[z>=1] + N_e / D_e^[z>=1]``."""
    sharded = zero >= 1
    shard = dense_params / xp.where(sharded, dense_ranks, 1) + expert_params / xp.where(sharded, expert_ranks, 1)
    return OPTIMIZER_HBM_BYTES_PER_PARAM * shard / hbm_bytes_per_s


def step_s(*, compute_s, bubble_s, exposed_s, optimizer_s):
    """Step ``= compute + bubble + exposed communication + optimizer``."""
    return compute_s + bubble_s + exposed_s + optimizer_s


def tokens_per_s_per_gpu(*, tokens_per_step, step_s, gpus):
    """``B s / (step W)``."""
    return tokens_per_step / (step_s * gpus)
