"""Activation bytes per layer (Korthikanti et al. 2022 with the stack's savings) and the layers in flight under a
pipeline schedule: the parts of :mod:`commcost.workload.memory` that count what one micro-batch keeps for backward and
how many micro-batches are alive at once. Symbols and sources: :mod:`commcost.workload.memory`'s docstring (moved
from there unchanged).
"""

from __future__ import annotations

__all__ = ["layer_activation_bytes", "selective_kept", "alternate_matmul_bytes", "alternate_matmul_moe_bytes",
           "saved_dispatch_copies", "in_flight_chunks", "embedding_chunks_in_flight", "first_ranks_in_flight",
           "in_flight_layers"]


def _min(a, b):
    """``min(a, b)`` that also works elementwise on numpy arrays (STYLE.md item 12)."""
    return a + (b - a) * (b < a)


def layer_activation_bytes(*, seq_local: float, micro_batch: float, hidden: float, heads: float, kv_heads: float,
                           qk_head_dim: float, head_dim: float, mlp_width: float, gated: bool, tp: float,
                           sequence_parallel: bool, dropout: bool, flash: bool, recompute: str,
                           top_k: float = 0.0, experts: float = 0.0, shared_width: float = 0.0,
                           gemm_input_bytes: float = 2.0, gated_bytes: float = 6.0, norm_saved_bytes: float = 2.0,
                           rotary_saved_copies: float = 0.0, recompute_modules: tuple[str, ...] = (),
                           dispatch_copies=None) -> float:
    """Bytes one layer keeps for backward for one micro-batch (module docstring).

    ``mlp_width`` is f for a dense layer and ``f_e`` for an MoE layer (``top_k > 0``), whose shared
    experts have total width ``shared_width``. ``gemm_input_bytes`` (``q_in``) is what each GEMM's
    saved input takes per element: 2 in bf16, 1 where an fp8 recipe saves the quantized copy
    (Transformer Engine keeps the fp8 input for the weight gradient): the QKV and MLP inputs
    ``2 q_in s'bh``, O's input ``q_in s'b n_q d``, the down projection's input ``q_in s'b f``; with flash attention
    and ``q_in`` = 1 O's input also stays in bf16, ``(2 + q_in) s'b n_q d``: the attention kernel saves its bf16
    output for its own backward (flash-attn's and Transformer Engine's ``FusedAttnFunc``: ``save_for_backward(q, k,
    v, out, ...)``) and the projection saves its fp8 cast apart (Transformer Engine 1.3 ``module/linear.py``:
    ``saved_inputmat`` the ``cast_to_fp8`` of its input); in bf16 the two are one tensor.
    ``gated_bytes`` (``q_g``) is what a gated MLP keeps per element of f besides the down projection's input:
    6 where the activation runs eager (gate and up outputs, SiLU's output: ``F.silu(w1 x) * w3 x``), 4 where a
    fused SwiGLU saves only its input (Megatron-Core's ``BiasSwiGLUFunction`` saves the fc1 output and
    recomputes the rest): :attr:`~commcost.workload.stacks.Stack.gated_mlp_saved_bytes`.
    ``norm_saved_bytes`` (``q_n``) is what each of the two norms keeps per element of h besides its output: 2 (its
    bf16 input; fused norms) or 6 where an eager RMSNorm upcasts (the fp32 copy of its input and the bf16 normalized
    tensor the weight multiplies): ``2 q_n s'bh / r``. ``rotary_saved_copies`` (``n_rot``) are the extra copies of Q and
    K an unfused rotary embedding keeps (``q cos + rotate_half(q) sin`` saves the pre-rotary Q and its rotate_half):
    ``2 n_rot s'b (n_q + n_kv') d_qk / t``; 0 with a fused rotary kernel
    (:attr:`~commcost.workload.stacks.Stack.norm_saved_bytes`, :attr:`~commcost.workload.stacks.Stack.rotary_saved_copies`).
    ``recompute_modules`` (:data:`RECOMPUTE_MODULES`): ``mla_up_proj`` drops Q, K and V (the attention keeps O's
    input; the latents the up-projections recompute from are not counted), ``mlp`` drops a dense layer's MLP
    (recomputed from its input, the norm's output, counted). ``dispatch_copies`` (``c_d``): the token copies an MoE
    layer's dispatcher saves under op-level checkpointing (:func:`saved_dispatch_copies`; None: ``2k``, the
    all-to-all's).
    """
    s, b, h = seq_local, micro_batch, hidden
    r = tp if sequence_parallel else 1.0
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / r
    kv_local = kv_heads + (tp - kv_heads) * (kv_heads < tp)   # K/V heads replicated when t > n_kv: max(n_kv, t)
    if recompute == "alternate_matmul":
        if top_k:
            return alternate_matmul_moe_bytes(
                seq_local=s, micro_batch=b, hidden=h, heads=heads, kv_local=kv_local, head_dim=head_dim,
                experts=experts, shared_width=shared_width, gated=gated, tp=tp, r=r,
                dispatch_copies=2.0 * top_k if dispatch_copies is None else dispatch_copies)
        return alternate_matmul_bytes(seq_local=s, micro_batch=b, hidden=h, heads=heads, kv_local=kv_local,
                                      head_dim=head_dim, mlp_width=mlp_width, gated=gated, tp=tp, r=r)
    mask = 1.0 if dropout else 0.0
    q_in = gemm_input_bytes
    replicated = (2.0 * norm_saved_bytes + 2.0 * q_in + 2.0 * mask) * sbh
    o_input = q_in + 2.0 * (flash and q_in != 2.0)   # flash keeps its bf16 output beside O's quantized input
    attention = (2.0 * (1.0 + rotary_saved_copies) * s * b * (heads + kv_local) * qk_head_dim
                 + 2.0 * s * b * kv_local * head_dim + o_input * s * b * heads * head_dim)
    mlp_per_width = (gated_bytes if gated else 2.0) + q_in
    if top_k:
        mlp = (mlp_per_width * s * b * top_k * mlp_width + mlp_per_width * s * b * shared_width)
        replicated += 2.0 * top_k * sbh + 4.0 * s * b * experts
    else:
        mlp = mlp_per_width * s * b * mlp_width
    if "mla_up_proj" in recompute_modules:
        attention = o_input * s * b * heads * head_dim
    if "mlp" in recompute_modules and not top_k:
        mlp = 0.0
    if recompute == "attention_module":
        attention = 0.0
        scores = 0.0
    elif flash:
        scores = 4.0 * heads * s * b
    elif recompute == "selective":
        scores = 0.0
    else:
        scores = (2.0 + 3.0 * mask) * heads * s * s * b
    return replicated / r + (attention + mlp + scores) / tp


def selective_kept(selective: str) -> str:
    """The ``recompute`` of :func:`layer_activation_bytes` for a stack's selective recomputation
    (:attr:`commcost.workload.stacks.Stack.selective`): Megatron's core-attention recomputation is
    ``selective``; PyTorch's op-level checkpointing ``alternate_matmul``; module-level checkpointing of the
    attention block ``attention_module``."""
    return "selective" if selective == "attention" else selective


def alternate_matmul_bytes(*, seq_local, micro_batch, hidden, heads, kv_local, head_dim, mlp_width, gated: bool,
                           tp, r):
    """Bytes one dense layer keeps under PyTorch's op-level selective checkpointing as torchtitan sets it
    (``selective_ac_option = "op"``; torchtitan ``parallelize_llama.py`` ``_save_list`` and
    ``_custom_policy``): the output of every other ``aten.mm`` of the layer is saved (the 1st, 3rd, 5th and
    7th), SDPA's output and fp32 log-sum-exp are saved, the reduce-scatters' outputs are saved, everything
    else is recomputed; the checkpoint keeps the layer's input. A layer's matmuls, in order: Q, K, V, O,
    then gate, up, down (gated) or up, down. Saved: Q ``n_q d / t``, V ``n_kv' d / t``, the gate (or up)
    ``f / t`` and, gated, the down projection's output ``h`` (a partial sum, whole, before its
    reduce-scatter under TP); SDPA ``n_q d / t`` and ``4 n_q / t`` bytes; with ``t > 1`` the two
    reduce-scatters' outputs ``2 h / t``; the input ``h / r``. Two bytes an element:

    ``A_op = 2 s'b (h/r + (n_q d + n_kv' d + f + n_q d)/t + [gated] h + [t > 1] 2h/t) + 4 s'b n_q / t``

    (``n_kv' = max(n_kv, t)``). Llama 3.1 8B at s' = 8192, b = 1: 2 x 8192 x 31,744 + 4 x 8192 x 32 =
    521 MB a layer (half of the layer's activations without recomputation would be 690 MB). Array-safe."""
    s, b, h = seq_local, micro_batch, hidden
    widths = (heads * head_dim + kv_local * head_dim + mlp_width + heads * head_dim) / tp
    return 2.0 * s * b * (h / r + widths + (h if gated else 0.0) + 2.0 * h / tp * (tp > 1)) + 4.0 * s * b * heads / tp


def alternate_matmul_moe_bytes(*, seq_local, micro_batch, hidden, heads, kv_local, head_dim, experts, shared_width,
                               gated: bool, tp, r, dispatch_copies):
    """Bytes one MoE layer keeps under PyTorch's op-level selective checkpointing as torchtitan sets it for its MoE
    models (torchtitan ``models/deepseek_v3/infra/parallelize.py`` ``_op_sac_save_list``, the policy of
    ``distributed/activation_checkpoint.py`` ``_apply_op_sac``): as :func:`alternate_matmul_bytes`, every other
    ``aten.mm`` of the layer saved, the attention's output and fp32 log-sum-exp, the reduce-scatters' outputs, the
    layer's input; and the expert-parallel collectives' outputs, which the list names
    (``_c10d_functional.all_to_all_single``; with DeepEP ``deepep.dispatch`` and ``deepep.combine``). The routed
    experts' ``aten._grouped_mm`` is not an ``mm`` nor in the list: recomputed, with the permutations around it
    (torchtitan ``models/moe/moe.py``: router, routed experts, then shared experts). The layer's matmuls, in
    order: Q, K, V, O, the router's gate, then the shared experts' gate, up, down. Saved: Q ``n_q d / t``, V
    ``n_kv' d / t``, the router's logits ``E / r`` (its weight replicated), the shared up projection ``f_sh / t``
    (gated; ungated, its up ``f_sh / t`` is the 6th and the down the 7th: ``h``); the attention's output
    ``n_q d / t``; the dispatcher's ``c_d`` token copies ``c_d h / r`` (:func:`saved_dispatch_copies`). Two bytes
    an element:

    ``A_op,moe = 2 s'b (h/r + (2 n_q d + n_kv' d)/t + E/r + [gated] f_sh/t + [not gated, f_sh > 0] h
    + [t > 1] 2h/t + c_d h/r) + 4 s'b n_q / t``

    DeepSeek-V3 at s' = 4096, b = 1, t = 1 with DeepEP (``c_d = k + 1 = 9``): 2 x 4096 x (7,168 + 2 x 16,384 +
    16,384 + 256 + 2,048 + 9 x 7,168) + 4 x 4096 x 128 = 2 x 4096 x 123,136 + 2,097,152 = 1,010,827,264 bytes a
    layer (multi-latent attention's matmuls are counted as Q, K, V and O). Array-safe."""
    s, b, h = seq_local, micro_batch, hidden
    shared = shared_width / tp if gated else h * (shared_width > 0)
    widths = (2.0 * heads * head_dim + kv_local * head_dim) / tp + experts / r + shared
    return (2.0 * s * b * (h / r + widths + 2.0 * h / tp * (tp > 1) + dispatch_copies * h / r)
            + 4.0 * s * b * heads / tp)


def saved_dispatch_copies(xp, *, top_k, ep, a2a: str):
    """``c_d``: token copies (of ``h``, per local token) an MoE layer's dispatcher keeps for backward under op-level
    checkpointing (:func:`alternate_matmul_moe_bytes`): with ``e > 1`` the all-to-all's dispatched ``k`` copies
    and its combine's ``k`` (``all_to_all_single`` returns each rank's ``k`` routed copies: torchtitan
    ``distributed/expert_parallel.py`` ``_token_dispatch`` / ``_token_combine``), ``2k``; DeepEP's received tokens,
    at most ``k`` (one a destination rank), and its combined output, one: ``k + 1`` (torchtitan
    ``distributed/deepep/deepep.py``: ``dispatch`` returns ``recv_x``, ``combine`` the reduced tokens); without
    expert parallelism no collective: 0 (the routed copies are an index gather, recomputed).
    Array-safe in ``ep``; ``a2a`` one of ``nccl``, ``deepep``."""
    per = top_k + (1.0 if a2a == "deepep" else top_k)
    return xp.where(ep > 1, per, 0.0)


def in_flight_chunks(*, pp, vp, micro_batches, rank=0):
    """``F_r``: the chunks (``v`` a stage) pipeline rank ``r`` holds activations of at its peak, its warm-up
    forwards and the first steady-state one: ``min(m v, 2(p - 1 - r) + (v - 1) p + 1)``, at v = 1 (1F1B)
    ``min(m, p - r)`` (Megatron-Core ``schedules.py`` ``get_pp_rank_microbatches``, whose interleaved warm-up is
    ``2(p - 1 - r) + (v - 1) N`` with ``N`` = ``microbatch_group_size_per_vp_stage``, by default p; the schedule
    holds at most ``max_outstanding_backprops`` = warm-up + 1). Array-safe."""
    ahead = pp - 1 - rank
    return _min(micro_batches * vp, 2 * ahead + (vp - 1) * pp + 1 - ahead * (vp == 1))


def embedding_chunks_in_flight(chunks, pp, vp):
    """``c_0 = p floor(F / (p v)) + min(F mod (p v), p)``: how many of the first rank's first ``F`` forwards run its
    chunk 0 (Megatron-Core ``get_schedule_table``: chunk 0 for ``p`` micro-batches, then chunk 1, ... chunk ``v - 1``,
    then chunk 0 again; at v = 1 all ``F``). Array-safe."""
    group = pp * vp
    return pp * (chunks // group) + _min(chunks % group, pp)


def first_ranks_in_flight(*, layers, pp, vp, micro_batches, split_counts_ends: bool = False):
    """``(n_0, n_1)``: layers' worth of micro-batch activations the first and the second pipeline rank hold at
    their peak, ``F_r L/(p v)`` (:func:`in_flight_chunks`; ``layers`` the slots of the split, ``p`` stages of
    ``L/p``). Where the split counts the embedding as a layer (``split_counts_ends``) the first rank's chunk 0 holds
    one layer fewer (with one slot a chunk, the embedding alone: the Llama 3 paper, Section 3.3.2), so ``n_0 = F_0
    L/(p v) - c_0`` (:func:`embedding_chunks_in_flight`), and the second rank, a middle stage when ``p > 2``,
    holds ``n_1 = F_1 L/(p v)``; else ``n_1 = 0`` (a plain split's second rank holds fewer than the first).
    Array-safe in the layout; ``split_counts_ends`` a bool."""
    k = layers / (pp * vp)
    chunks = in_flight_chunks(pp=pp, vp=vp, micro_batches=micro_batches)
    if not split_counts_ends:
        return chunks * k, 0.0 * chunks
    second = in_flight_chunks(pp=pp, vp=vp, micro_batches=micro_batches, rank=1) * k * (pp > 2)
    return chunks * k - embedding_chunks_in_flight(chunks, pp, vp), second


def in_flight_layers(*, layers: float, pp: float, vp: float, micro_batches: float,
                     split_counts_ends: bool = False) -> float:
    """Layers' worth of micro-batch activations on the fullest of the first pipeline stages (module docstring):
    the larger of :func:`first_ranks_in_flight`; without ``split_counts_ends`` the first rank's
    ``min(m v, 2(p-1) + (v-1)p + 1) L/(p v)``, at v = 1 ``min(m, p) L/p``. Array-safe."""
    first, second = first_ranks_in_flight(layers=layers, pp=pp, vp=vp, micro_batches=micro_batches,
                                          split_counts_ends=split_counts_ends)
    return first + (second - first) * (second > first)
