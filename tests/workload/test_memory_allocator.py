"""Memory as the allocator sees it (commcost.workload.memory): the full-recomputation working set, the
selective-checkpointing share, the loss's working set, and the reserved / on-the-card range."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.workload.memory import (CONTEXT_BYTES, NCCL_BYTES, MemoryBreakdown, alternate_matmul_bytes, gathered_stage_bytes,
                                     check_recompute_modules, fp8_weight_cache_bytes,
                                     layer_activation_bytes, leanest_saved_kwargs, memory_per_gpu)
from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.workload.activations import alternate_matmul_moe_bytes, saved_dispatch_copies
from commcost.parallel.layout import Layout
from commcost.workload.stacks import stack
from commcost.workload.transformer import TransformerSpec

SPEC = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100)
S = 32


def test_full_recompute_working_set_by_hand():
    # one layer without recomputation, s' = 32, b = 1, h = 64, 4 heads of d = 16, f = 256, flash, no dropout:
    #   norms' inputs 4 sbh + QKV and MLP inputs 2 x 2 sbh = 8 sbh = 8 x 2,048 = 16,384
    #   Q and K 2 s (4 + 4) 16 = 8,192; V 2 s 4 16 = 4,096; O's input 2 s 4 16 = 4,096   -> 16,384
    #   MLP (2 + 2) s f = 4 x 32 x 256 = 32,768; flash's log-sum-exp 4 x 4 x 32 = 512
    #   A_none = 16,384 + 16,384 + 32,768 + 512 = 66,048 bytes
    # full recomputation keeps each layer's input 2 sbh = 4,096 (x 2 layers = 8,192), and the layer being
    # recomputed holds its activations and their gradients: 2 A_none = 132,096 at the high end (the low end,
    # 1 A_none, is MemoryBreakdown.allocated_bytes[0]: tests/workload/test_memory_formulas.py);
    # fp32 logits 4 s V = 4 x 32 x 100 = 12,800 (no stack given)
    mem = memory_per_gpu(SPEC, Layout(dp=1, recompute="full"), seq=S, capacity_bytes=80e9)
    assert mem.activations_bytes == pytest.approx(8192 + 132096 + 12800, rel=1e-12)


def test_selective_means_what_the_stack_recomputes():
    none = memory_per_gpu(SPEC, Layout(dp=1), seq=S, capacity_bytes=80e9)
    # Megatron's selective recomputes the attention core: with flash attention nothing s^2 is saved anyway
    meg = memory_per_gpu(SPEC, Layout(dp=1, recompute="selective"), seq=S, capacity_bytes=80e9,
                         stack=stack("megatron"))
    tt = memory_per_gpu(SPEC, Layout(dp=1, recompute="selective"), seq=S, capacity_bytes=80e9,
                        stack=stack("torchtitan"))
    # the loss: 10 (Megatron: bf16 logits 2, their fp32 copy 4 and the max-subtracted fp32 tensor 4 at the end of
    # the forward) and 12 (eager cross-entropy on upcast logits) bytes x s V = 32 x 100 -> 32,000 and 38,400
    assert meg.activations_bytes == pytest.approx(2 * 66048 + 32000, rel=1e-12)
    # PyTorch's op-level selective checkpointing as torchtitan sets it (plain MLP: Q, K, V, O, up, down; the 1st,
    # 3rd and 5th matmuls saved): 2 s (h + n_q d + n_kv d + f + SDPA's n_q d) + 4 s n_q
    #   = 2 x 32 x (64 + 64 + 64 + 256 + 64) + 4 x 32 x 4 = 32,768 + 512 = 33,280 a layer, x 2 layers = 66,560
    assert tt.activations_bytes == pytest.approx(66560 + 38400, rel=1e-12)
    assert none.activations_bytes == pytest.approx(2 * 66048 + 12800, rel=1e-12)
    # PyTorch FSDP stacks checkpoint modules: selective is the attention module (llm-foundry's
    # activation_checkpointing_target), which keeps its input (the QKV input, counted in 8 sbh) and drops
    # Q, K, V, O's input (16,384) and the log-sum-exp (512): 66,048 - 16,896 = 49,152 a layer, x 2 = 98,304;
    # the loss: 4 bytes (fused cross-entropy) x s V = 12,800
    fs = memory_per_gpu(SPEC, Layout(dp=1, recompute="selective"), seq=S, capacity_bytes=80e9, stack=stack("fsdp"))
    assert fs.activations_bytes == pytest.approx(98304 + 12800, rel=1e-12)


def test_reserved_and_card_ranges_and_the_verdict_by_hand():
    GiB = 2**30
    m = MemoryBreakdown(weights_bytes=10 * GiB, gradients_bytes=10 * GiB, optimizer_bytes=20 * GiB,
                        activations_bytes=30 * GiB, buffers_bytes=0.0, total_bytes=70 * GiB,
                        capacity_bytes=80 * GiB, stage="only", in_flight_layers=1.0)
    # reserved: 70 GiB x (1 + 0) to 70 x 1.15 = 80.5 GiB
    assert m.reserved_bytes == pytest.approx((70 * GiB, 80.5 * GiB))
    # on the card: + context 0.5-1 GiB + NCCL 0.25-2 GiB -> 70.75 to 83.5 GiB
    assert m.device_bytes == pytest.approx((70.75 * GiB, 83.5 * GiB))
    assert (CONTEXT_BYTES, NCCL_BYTES) == ((0.5 * GiB, 1.0 * GiB), (0.25 * GiB, 2.0 * GiB))
    # 80 GiB card: the low estimate fits, the high one does not -> may not fit, and it "fits" (not called OOM)
    assert m.verdict == "may not fit" and m.fits
    big = MemoryBreakdown(weights_bytes=0.0, gradients_bytes=0.0, optimizer_bytes=0.0, activations_bytes=0.0,
                          buffers_bytes=0.0, total_bytes=79.5 * GiB, capacity_bytes=80 * GiB, stage="only",
                          in_flight_layers=1.0)
    # 79.5 + 0.75 = 80.25 GiB > 80: does not fit even at the low estimate
    assert big.verdict == "does not fit" and not big.fits
    small = MemoryBreakdown(weights_bytes=0.0, gradients_bytes=0.0, optimizer_bytes=0.0, activations_bytes=0.0,
                            buffers_bytes=0.0, total_bytes=60 * GiB, capacity_bytes=80 * GiB, stage="only",
                            in_flight_layers=1.0)
    # 60 x 1.15 + 3 = 72 GiB <= 80: fits at the high estimate too
    assert small.verdict == "fits"


def test_op_level_checkpointing_gated_under_tp_by_hand():
    # gated MLP (Q, K, V, O, gate, up, down: the 1st, 3rd, 5th, 7th matmuls saved), s' = 16, b = 2, h = 64,
    # 8 query heads and 2 K/V heads of d = 8, f = 128, t = 4 with sequence parallelism (r = 4):
    #   n_kv' = max(2, 4) = 4; widths (n_q d + n_kv' d + f + n_q d) / t = (64 + 32 + 128 + 64) / 4 = 72
    #   the down projection's whole output h = 64; two reduce-scatters 2 h / t = 32; the input h / r = 16
    #   2 s b (16 + 72 + 64 + 32) = 2 x 32 x 184 = 11,776; log-sum-exp 4 s b n_q / t = 4 x 32 x 2 = 256
    got = alternate_matmul_bytes(seq_local=16, micro_batch=2, hidden=64, heads=8, kv_local=4, head_dim=8,
                                 mlp_width=128, gated=True, tp=4, r=4)
    assert got == pytest.approx(11776 + 256, rel=1e-12)
    via = layer_activation_bytes(seq_local=16, micro_batch=2, hidden=64, heads=8, kv_heads=2, qk_head_dim=8,
                                 head_dim=8, mlp_width=128, gated=True, tp=4, sequence_parallel=True,
                                 dropout=False, flash=True, recompute="alternate_matmul")
    assert via == got


def test_compile_covers_the_loss_only_where_the_stack_compiles_it():
    # torchtitan >= 0.1 compiles the loss with the model: 4 bytes per token and vocabulary entry (bf16 logits and
    # their bf16 gradient); torchtitan 0.0 compiles the blocks only: the eager 12 stays
    assert stack("torchtitan", compiled=True).loss_bytes_per_vocab == 4
    assert stack("torchtitan-0.0", compiled=True).loss_bytes_per_vocab == 12
    assert stack("torchtitan-0.0", compiled=True).norm_accesses == stack("torchtitan", compiled=True).norm_accesses
    assert stack("torchtitan-0.0").loss_bytes_per_vocab == stack("torchtitan").loss_bytes_per_vocab == 12


def test_fused_swiglu_keeps_only_its_input():
    # a gated MLP keeps per element of f: 6 eager (gate, up, SiLU's output) or 4 fused (the fc1 output only),
    # plus the down projection's input 2: at s' = 32, b = 1, f = 256, t = 1 the difference is 2 x 32 x 256 = 16,384
    kw = dict(seq_local=32, micro_batch=1, hidden=64, heads=4, kv_heads=4, qk_head_dim=16, head_dim=16,
              mlp_width=256, gated=True, tp=1, sequence_parallel=False, dropout=False, flash=True, recompute="none")
    eager = layer_activation_bytes(**kw)
    fused = layer_activation_bytes(**kw, gated_bytes=stack("megatron").gated_mlp_saved_bytes)
    assert eager - fused == pytest.approx(16384, rel=1e-12)
    assert stack("torchtitan").gated_mlp_saved_bytes == 6 and stack("nemo").gated_mlp_saved_bytes == 4


def test_megatron_keeps_fp32_main_grads_and_the_nemo_recipes_bf16():
    # Megatron-LM with bf16 keeps an fp32 main_grad buffer (4 bytes a parameter, unsharded at ZeRO-1), the NeMo /
    # Megatron-Bridge performance recipes a bf16 one (2): same weights (2 bytes) and optimizer (12 / D), twice the
    # gradients
    L = Layout(dp=4, zero=1, global_batch=4)
    meg = memory_per_gpu(SPEC, L, seq=S, capacity_bytes=80e9, stack=stack("megatron"))
    nemo = memory_per_gpu(SPEC, L, seq=S, capacity_bytes=80e9, stack=stack("nemo"))
    assert meg.gradients_bytes == pytest.approx(2 * nemo.gradients_bytes, rel=1e-12)
    assert meg.weights_bytes == nemo.weights_bytes and meg.optimizer_bytes == nemo.optimizer_bytes
    # the weights are bf16 (2 bytes a parameter): the fp32 buffer is twice the weights, the bf16 one equal to them
    assert meg.gradients_bytes == pytest.approx(2 * meg.weights_bytes, rel=1e-12)
    assert nemo.gradients_bytes == pytest.approx(nemo.weights_bytes, rel=1e-12)


def test_fsdp2_accumulates_the_unsharded_gradients_in_fp32_under_pp_by_hand():
    # 4 layers of 49,280 parameters (attention 16,384 + MLP 32,768 + two norms 128) on 2 stages: a stage holds
    # 2 layers and the larger end, max(embedding 6,400, head 6,400 + final norm 64) = 6,464 -> N = 105,024.
    # FSDP2 over d = 2: the bf16 weight shard 2 N / 2 = 105,024 and the stage gathered whole 2 N = 210,048;
    # gradients: the shard 2 N / 2 = 105,024 and the unsharded gradients accumulated in reduce_dtype fp32,
    # 4 N = 420,096 (torchtitan; bf16 would be 210,048), which stand in for the fp32 sharded gradients, 4 N / 2 =
    # 210,048 (made by the last backward's reduce-scatter only): 105,024 + 420,096 - 210,048 = 315,072
    spec = TransformerSpec(layers=4, hidden=64, heads=4, ffn_hidden=256, vocab=100)
    L = Layout(dp=2, pp=2, zero=3, global_batch=8)
    m = memory_per_gpu(spec, L, seq=S, capacity_bytes=80e9, stack=stack("torchtitan"))
    assert m.weights_bytes == pytest.approx(105_024 + 210_048, rel=1e-12)
    assert m.gradients_bytes == pytest.approx(105_024 + 420_096 - 210_048, rel=1e-12)
    # gathered once a step, no prefetched weights beside it: ZeRO-3's buffers keep one unit's gradients, a
    # unit N / (2 layers + 1) = 35,008 parameters x 2 bytes = 70,016 (the two prefetched units' weights,
    # 2 x 35,008 x 2 = 140,032, are gone), beside the pipeline's send/receive buffers 4 x 2 b s' h =
    # 8 x 1 x 32 x 64 = 16,384
    assert m.buffers_bytes == pytest.approx(70_016 + 16_384, rel=1e-12)


def test_gathered_stage_replaces_the_sharded_gradients_by_hand():
    # N = 1e9 over D = 64 with fp32 accumulation (q_red = 4): bf16 whole 2e9; gradients 4e9 (1 - 1/64) =
    # 3.9375e9. Experts over efsdp = 1 (torchtitan's dp_shard x cp x tp / (ep x etp), e.g. 64 / 64): the whole
    # fp32 copy is the sharded one, nothing added to the gradients: 4e9 (1 - 1) = 0
    assert gathered_stage_bytes(1e9, 64, 4.0, 2.0) == pytest.approx((2e9, 3.9375e9), rel=1e-12)
    assert gathered_stage_bytes(1e9, 1, 4.0, 2.0) == (2e9, 0.0)


def test_transformer_engine_keeps_fp8_weights_and_transposes_by_hand():
    # Megatron with TE under an fp8 recipe: 2 bytes (fp8 weight + fp8 transpose) per layer parameter,
    # 2 layers x 49,280 = 98,560 -> 197,120 bytes more weights than in bf16 (embeddings and head are not TE layers)
    meg = stack("megatron")
    assert fp8_weight_cache_bytes(98_560, True, meg) == 197_120
    assert fp8_weight_cache_bytes(98_560, False, meg) == 0
    assert fp8_weight_cache_bytes(98_560, True, stack("torchtitan")) == 0   # torchao casts every forward
    bf16 = memory_per_gpu(SPEC, Layout(dp=1), seq=S, capacity_bytes=80e9, stack=meg)
    fp8 = memory_per_gpu(SPEC, Layout(dp=1), seq=S, capacity_bytes=80e9, stack=meg, fp8=True)
    assert fp8.weights_bytes - bf16.weights_bytes == pytest.approx(197_120, rel=1e-12)
    # ZeRO-3 gathers each unit anew: no cast kept
    z3 = dict(seq=S, capacity_bytes=80e9, stack=meg)
    assert (memory_per_gpu(SPEC, Layout(dp=2, zero=3, global_batch=2), fp8=True, **z3).weights_bytes
            == memory_per_gpu(SPEC, Layout(dp=2, zero=3, global_batch=2), **z3).weights_bytes)


def test_megatron_recompute_modules_by_hand():
    # one layer, s' = 32, b = 1, h = 64, 4 heads, d_qk = 24 (an MLA-like score width), d = 16, f = 256, flash:
    #   norms and GEMM inputs 8 sbh = 16,384; Q and K 2 s (4 + 4) 24 = 12,288, V 2 s 4 16 = 4,096, O's input
    #   2 s 4 16 = 4,096; MLP (2 + 2) s f = 32,768; log-sum-exp 4 x 4 x 32 = 512  -> 70,144
    kw = dict(seq_local=32, micro_batch=1, hidden=64, heads=4, kv_heads=4, qk_head_dim=24, head_dim=16,
              mlp_width=256, gated=False, tp=1, sequence_parallel=False, dropout=False, flash=True, recompute="none")
    assert layer_activation_bytes(**kw) == pytest.approx(70144, rel=1e-12)
    # mla_up_proj: Q, K and V recomputed from the latents, O's input kept: 70,144 - 16,384 = 53,760
    assert layer_activation_bytes(**kw, recompute_modules=("mla_up_proj",)) == pytest.approx(53760, rel=1e-12)
    # mlp: the dense MLP recomputed from its input: 70,144 - 32,768 = 37,376; both: 20,992
    assert layer_activation_bytes(**kw, recompute_modules=("mlp",)) == pytest.approx(37376, rel=1e-12)
    assert layer_activation_bytes(**kw, recompute_modules=("mla_up_proj", "mlp")) == pytest.approx(20992, rel=1e-12)
    with pytest.raises(InputError, match="unknown recompute module"):
        check_recompute_modules(("moe",))


def test_op_level_checkpointing_of_an_moe_layer_by_hand():
    # torchtitan's MoE save list: every other mm (Q, V, the router's gate, the shared up projection), the attention's
    # output and log-sum-exp, the dispatcher's outputs; grouped GEMMs recomputed. h = 64, n_q = 4 heads of d = 16,
    # n_kv' = 2 heads, E = 8 experts, f_sh = 32 (gated), t = r = 1, s' = 32, b = 1; DeepEP with k = 2: c_d = 3.
    # per token 2 x (64 + 2 x 64 + 32 + 8 + 32 + 3 x 64) = 2 x 456 = 912 bytes, + 4 x 4 = 16 -> 928 x 32 = 29,696
    kw = dict(seq_local=32, micro_batch=1, hidden=64, heads=4, kv_local=2, head_dim=16, experts=8, shared_width=32,
              gated=True, tp=1, r=1)
    assert alternate_matmul_moe_bytes(**kw, dispatch_copies=3) == 29_696
    # all-to-all instead: c_d = 2k = 4, one h more a token: 29,696 + 2 x 64 x 32 = 33,792
    assert alternate_matmul_moe_bytes(**kw, dispatch_copies=4) == 33_792
    # t = 2 with SP (r = 2): input 32, Q + O 64, V (n_kv' = max(2, 2) = 2 heads) 16, router 4, shared 16, two
    # reduce-scatters 2 x 32 = 64, c_d h / r = 3 x 32 = 96 -> 2 x 292 = 584, + 4 x 4 / 2 = 8 -> 592 x 32 = 18,944
    assert alternate_matmul_moe_bytes(**dict(kw, tp=2, r=2), dispatch_copies=3) == 18_944
    assert saved_dispatch_copies(SCALAR, top_k=2, ep=4, a2a="deepep") == 3
    assert saved_dispatch_copies(SCALAR, top_k=2, ep=4, a2a="nccl") == 4
    assert saved_dispatch_copies(SCALAR, top_k=2, ep=1, a2a="nccl") == 0   # no collective: an index gather


def test_no_stack_named_widens_the_low_end_to_the_leanest_kernels_by_hand():
    # --stack auto priced as torchtitan (eager SwiGLU: gate, up and SiLU outputs, 6 bytes an element of f) may run
    # leaner kernels (Megatron-Core's fused SwiGLU keeps its input, 4): 2 bytes x s' b f = 2 x 32 x 1 x 256 = 16,384
    # a layer, 2 layers in flight -> the low end 32,768 lower, the high end unchanged
    spec = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100, gated_mlp=True)
    L = Layout(dp=1)
    named = memory_per_gpu(spec, L, seq=S, capacity_bytes=80e9, stack=stack("torchtitan"))
    auto = memory_per_gpu(spec, L, seq=S, capacity_bytes=80e9, stack=stack("torchtitan"), stack_named=False)
    assert auto.total_bytes == named.total_bytes
    assert named.allocated_bytes[0] - auto.allocated_bytes[0] == pytest.approx(32_768, rel=1e-12)
    assert leanest_saved_kwargs(spec)["gated_bytes"] == 4


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["torchtitan", "megatron", "fsdp", "deepspeed", "nemo"]), pp=st.sampled_from([1, 2]),
       zero=st.integers(0, 3), recompute=st.sampled_from(["none", "selective", "full"]), gated=st.booleans(),
       named=st.booleans(), a2a=st.sampled_from(["nccl", "deepep"]))
def test_the_range_is_ordered_and_the_verdict_reads_it(name, pp, zero, recompute, gated, named, a2a):
    # whatever the stack, its kernels and whether it was named: the low end never exceeds the high end, the
    # leanest kernels never keep more than the stack's, and the verdict is where the card falls in the range
    spec = TransformerSpec(layers=4, hidden=64, heads=4, kv_heads=2, ffn_hidden=128, vocab=100, gated_mlp=gated,
                           experts=4, top_k=2, expert_ffn_hidden=64, moe_layers=2)
    L = Layout(dp=4, pp=pp, ep=2, zero=zero, recompute=recompute, global_batch=8)
    m = memory_per_gpu(spec, L, seq=S, capacity_bytes=1e9, stack=stack(name), stack_named=named, a2a=a2a)
    assert m.kernel_spread_bytes >= 0 and (m.kernel_spread_bytes == 0 or not named)
    lo, hi = m.device_bytes
    assert 0 < m.allocated_bytes[0] <= m.allocated_bytes[1] and lo <= hi
    for cap in (lo / 2, (lo + hi) / 2, 2 * hi):
        v = replace(m, capacity_bytes=cap).verdict
        assert v == ("does not fit" if cap < lo else "may not fit" if cap < hi else "fits")
