"""The operator model (commcost.workload.operators): hand-computed GEMM waves, attention FLOPs with the causal
mask, the recomputation working set, and the invariants of the kernels."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.workload.operators import KernelRates, attention_s, gemm_s, gemm_train_s
from commcost.core.xp import SCALAR


def rates(**kw) -> KernelRates:
    """Round numbers, so every expected value below can be worked by hand."""
    base = dict(gemm_flops_per_s=1e15, gemm_operand_bytes=2.0, attention_peak_flops_per_s=1e15,
                attention_forward_efficiency=0.5, attention_backward_efficiency=0.4, sms=100.0, tile_m=128.0,
                tile_n=256.0, k_overhead=256.0, hbm_bytes_per_s=2e12, fp8=False, seq_half_tokens=0.0,
                head_dim_half=32.0, source="test")
    base.update(kw)
    return KernelRates(**base)


def test_gemm_one_wave_is_compute_bound_by_hand():
    # M = N = K = 1000: tiles ceil(1000/128) x ceil(1000/256) = 8 x 4 = 32 <= 100 SMs: one wave;
    # t_math = 1 x 2 x 128 x 256 x (1000 + 256) x 100 / 1e15 = 65,536 x 1,256 x 100 / 1e15 = 8.2313216e-6 s;
    # t_mem = (1e6 + 1e6 + 1e6) x 2 B / 2e12 = 3e-6 s; the larger wins
    assert gemm_s(SCALAR, rates(), m=1000, n=1000, k=1000) == pytest.approx(8.2313216e-6, rel=1e-12)


def test_gemm_wave_quantization_on_132_sms_by_hand():
    # M 8192, N 4096 on 132 SMs: 64 x 16 = 1,024 tiles, ceil(1024/132) = 8 waves (7 x 132 = 924 < 1,024);
    # t_math = 8 x 2 x 128 x 256 x (4096 + 256) x 132 / 1e15 = 8 x 65,536 x 4,352 x 132 / 1e15
    #        = 3.01196...e-4 s
    r = rates(sms=132.0)
    expected = 8 * 65536 * 4352 * 132 / 1e15
    assert gemm_s(SCALAR, r, m=8192, n=4096, k=4096) == pytest.approx(expected, rel=1e-12)
    # one tile more than 8 full waves needs a ninth: N = 4096 + 1 -> 64 x 17 = 1,088 tiles -> 9 waves
    assert gemm_s(SCALAR, r, m=8192, n=4097, k=4096) == pytest.approx(9 * 65536 * 4352 * 132 / 1e15, rel=1e-12)


def test_gemm_memory_bound_when_thin():
    # M = 1 (a single token): t_mem = (1 x 8192 + 8192 x 8192 + 1 x 8192) x 2 / 2e12 = 6.7125248e-5 s,
    # t_math = 1 wave x 65,536 x (8192 + 256) x 100 / 1e15 = 5.5364...e-5 s: memory wins
    t = gemm_s(SCALAR, rates(), m=1, n=8192, k=8192)
    assert t == pytest.approx((8192 + 8192 * 8192 + 8192) * 2 / 2e12, rel=1e-12)


def test_gemm_backward_is_dgrad_plus_wgrad():
    r = rates()
    fwd, bwd = gemm_train_s(SCALAR, r, m=4096, n=1024, k=2048)
    assert fwd == gemm_s(SCALAR, r, m=4096, n=1024, k=2048)
    assert bwd == gemm_s(SCALAR, r, m=4096, n=2048, k=1024) + gemm_s(SCALAR, r, m=2048, n=1024, k=4096)


def test_attention_causal_flops_by_hand():
    # n = s = 4096 tokens, 32 heads of d = 128 (d_qk = d): forward F = 2 n (s/2) n_q (d_qk + d)
    # = 2 x 4096 x 2048 x 32 x 256 = 1.37438953472e11 FLOPs; at 0.5 of 1e15 (s_0 = 0: no sequence loss;
    # d = 128: no head-dim loss) 2.74877906944e-4 s; backward 2.5 F at 0.4 of 1e15 = 8.5899345920e-4 s
    fwd, bwd = attention_s(SCALAR, rates(), tokens=4096, seq=4096, heads_local=32, d_qk=128, d_v=128, flash=True)
    assert fwd == pytest.approx(1.37438953472e11 / 0.5e15, rel=1e-12)
    assert bwd == pytest.approx(2.5 * 1.37438953472e11 / 0.4e15, rel=1e-12)
    # without flash attention the whole square is computed: twice the FLOPs
    fwd_full, _ = attention_s(SCALAR, rates(), tokens=4096, seq=4096, heads_local=32, d_qk=128, d_v=128, flash=False)
    assert fwd_full == pytest.approx(2 * fwd, rel=1e-12)


def test_attention_efficiency_curve_by_hand():
    # s_0 = 400: at s = 400 half of eta_max; head dim 64 -> (64/96) / (128/160) = 0.8333...
    r = rates(seq_half_tokens=400.0)
    f400, _ = attention_s(SCALAR, r, tokens=400, seq=400, heads_local=1, d_qk=64, d_v=64, flash=True)
    flops = 2 * 400 * 200 * 1 * 128
    assert f400 == pytest.approx(flops / (1e15 * 0.5 * 0.5 * (64 / 96) / (128 / 160)), rel=1e-12)



def test_attention_under_context_parallelism_runs_at_the_chunk_length_by_hand():
    # CP c = 4 at s = 1600 (s_0 = 400): each rank holds n = s/c = 400 queries; the FLOPs over the ring's
    # steps are those of 400 queries against s/2 = 800 keys: 2 x 400 x 800 x 1 x 256 = 1.6384e8; the
    # kernels run on s/c = 400 tokens, so eta = 0.5 x 400/(400 + 400) = 0.25 (not 0.5 x 1600/2000 = 0.4)
    r = rates(seq_half_tokens=400.0)
    fwd, bwd = attention_s(SCALAR, r, tokens=400, seq=1600, heads_local=1, d_qk=128, d_v=128, flash=True, cp=4)
    assert fwd == pytest.approx(1.6384e8 / (1e15 * 0.25), rel=1e-12)
    assert bwd == pytest.approx(2.5 * 1.6384e8 / (1e15 * 0.4 * 0.5), rel=1e-12)
    one, _ = attention_s(SCALAR, r, tokens=400, seq=1600, heads_local=1, d_qk=128, d_v=128, flash=True)
    assert one == pytest.approx(1.6384e8 / (1e15 * 0.4), rel=1e-12)

@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 20000), dm=st.integers(1, 5000))
def test_gemm_time_monotone_in_each_dimension(m, n, k, dm):
    r = rates(sms=132.0)
    t = gemm_s(SCALAR, r, m=m, n=n, k=k)
    assert gemm_s(SCALAR, r, m=m + dm, n=n, k=k) >= t
    assert gemm_s(SCALAR, r, m=m, n=n + dm, k=k) >= t
    assert gemm_s(SCALAR, r, m=m, n=n, k=k + dm) >= t
    # and never faster than the sustained rate on its FLOPs
    assert t >= 2.0 * m * n * k / r.gemm_flops_per_s * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(s=st.integers(64, 1 << 18), ds=st.integers(1, 1 << 16))
def test_attention_time_grows_with_sequence(s, ds):
    r = rates(seq_half_tokens=400.0)
    a = sum(attention_s(SCALAR, r, tokens=s, seq=s, heads_local=8, d_qk=128, d_v=128, flash=True))
    b = sum(attention_s(SCALAR, r, tokens=s + ds, seq=s + ds, heads_local=8, d_qk=128, d_v=128, flash=True))
    assert b > a


def test_kernels_agree_on_floats_and_columns():
    np = pytest.importorskip("numpy")
    r = rates(sms=132.0, seq_half_tokens=400.0)
    ms = np.array([1.0, 777.0, 8192.0])
    col = gemm_s(np, r, m=ms, n=4096.0, k=4096.0)
    for i, m in enumerate(ms):
        assert col[i] == gemm_s(SCALAR, r, m=float(m), n=4096.0, k=4096.0)
    assert math.isfinite(float(col.sum()))


def test_alternate_matmul_recomputes_the_matmuls_memory_does_not_keep_by_hand():
    # torchtitan's op-level policy keeps the 1st, 3rd, 5th and 7th aten.mm of a layer (Q, V, gate, down;
    # memory.alternate_matmul_bytes) and recomputes K, O and up. Llama 3 8B (h 4096, 8 KV heads of 128,
    # f 14336, gated): (4096 x 1024 + 4096 x 4096 + 4096 x 14336) / (4096 x (4096 + 2 x 1024 + 4096)
    # + 3 x 4096 x 14336) = (1024 + 4096 + 14336) / (10240 + 43008) = 19456 / 53248 = 0.365384...
    from commcost.workload.operators import alternate_matmul_recompute_share
    from commcost.workload.transformer import TransformerSpec
    llama = TransformerSpec(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, gated_mlp=True)
    assert alternate_matmul_recompute_share(llama) == pytest.approx(19456 / 53248, rel=1e-12)
    # non-gated MHA (Q, K, V, O, up, down; f = 4h): K, O, down = (1 + 1 + 4) / (4 + 8) = 0.5
    gpt = TransformerSpec(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=False)
    assert alternate_matmul_recompute_share(gpt) == pytest.approx(0.5, rel=1e-12)


def test_attention_module_checkpointing_recomputes_the_projections_and_the_core_by_hand():
    # llm-foundry's activation_checkpointing_target (the fsdp stack's selective): the attention module's forward
    # again. h 1024, 8 heads (MHA), n = 2048 tokens, t = 1, rates(): 1 PFLOP/s, 100 SMs, tiles 128 x 256, K_0 256
    #   QKV (2048, 3072, 1024): 16 x 12 = 192 tiles -> 2 waves: 2 x 2 x 128 x 256 x 1280 x 100 / 1e15 = 16.777216 us
    #       (memory: (2048 x 1024 + 1024 x 3072 + 2048 x 3072) x 2 / 2e12 = 11.53 us, below)
    #   O   (2048, 1024, 1024): 16 x 4 = 64 tiles -> 1 wave: 8.388608 us (memory 5.24 us)
    from commcost.workload.operators import attention_projections_forward_s, micro_batch_operators
    from commcost.workload.stacks import stack
    from commcost.workload.transformer import TransformerSpec
    spec = TransformerSpec(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=False)
    r = rates()
    assert attention_projections_forward_s(SCALAR, r, spec, n=2048.0, tp=1.0) == pytest.approx(25.165824e-6)
    kw = dict(tokens=2048.0, seq=2048.0, layers=2.0, tp=1.0, sp=False, full=False, micro_batches=1)
    st = stack("fsdp")
    assert st.selective == "attention_module"
    t = micro_batch_operators(SCALAR, spec, st, r, selective=True, **kw)
    # 2 layers x (projections + the attention core's forward)
    assert t.recompute_s == pytest.approx(2 * (25.165824e-6 + t.attention_forward_s), rel=1e-12)
    assert micro_batch_operators(SCALAR, spec, st, r, selective=False, **kw).recompute_s == 0.0


def test_a_model_with_fused_norms_reads_and_writes_each_norm_once_by_hand():
    # MPT as llm-foundry's benchmarks run it (norm_type low_precision_layernorm: one F.layer_norm kernel) under the
    # fsdp stack, whose eager norms make 6 accesses per element. h 1024, f 4096 (GeLU, 2 accesses), n = 2048 tokens,
    # t = 1, no dropout, learned positions (no rotary), flash attention. Forward bytes of one layer
    # = 2 n (2 a_norm h + 6 h + 2 f):
    #   eager norms  2 x 2048 x (12 x 1024 + 6 x 1024 + 8192) = 4096 x 26624 = 109,051,904 bytes
    #   fused norms  2 x 2048 x ( 4 x 1024 + 6 x 1024 + 8192) = 4096 x 18432 =  75,497,472 bytes
    # at rates()' 2e12 B/s: 54.525952 us and 37.748736 us; the element-wise total is 3 forwards per layer, 2 layers.
    from dataclasses import replace
    from commcost.workload.operators import FUSED_NORM_ACCESSES, micro_batch_operators
    from commcost.workload.stacks import stack
    from commcost.workload.transformer import TransformerSpec
    st = stack("fsdp")
    assert st.norm_accesses == 6 and FUSED_NORM_ACCESSES == 2
    spec = TransformerSpec(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=False,
                           max_positions=2048, biases=True)
    kw = dict(tokens=2048.0, seq=2048.0, layers=2.0, tp=1.0, sp=False, full=False, selective=False, micro_batches=1)
    eager = micro_batch_operators(SCALAR, spec, st, rates(), **kw)
    fused = micro_batch_operators(SCALAR, replace(spec, fused_norm=True), st, rates(), **kw)
    assert eager.elementwise_s == pytest.approx(2 * 3 * 54.525952e-6, rel=1e-12)
    assert fused.elementwise_s == pytest.approx(2 * 3 * 37.748736e-6, rel=1e-12)
    assert fused.gemm_s == eager.gemm_s


def test_the_mpt_presets_fuse_their_norms():
    # scripts/train/benchmarking/submit_benchmarks.py sets norm_type low_precision_layernorm for every MPT run
    from commcost.workload.transformer import model_spec
    assert all(model_spec(f"mpt-{s}").fused_norm for s in ("1b", "3b", "7b", "13b", "30b", "70b"))
    assert not model_spec("llama3-8b").fused_norm


def test_nvfp4_casts_by_hand():
    # Transformer Engine's NVFP4 recipe quantizes each GEMM input and output gradient for both uses: amax of the
    # input and of its Hadamard-transformed transpose in one read (2 B), row-wise cast (read 2, write 0.5 + 1/16
    # of a 1-byte E4M3 scale), fused transform + column-wise cast (the same): 2 + 2 x 2.5625 = 7.125 B per element;
    # a weight (no transform): amax read 2, one cast reads 2 and writes both copies 2 x 0.5625: 5.125 B.
    # MPT-like layer, h 1024, f 4096 (not gated, MHA), t = 1, n = 2048 tokens, 1 layer, m = 4 micro-batches.
    # GEMMs (M, N, K): QKV (n, 3h, h), O (n, h, h), up (n, f, h), down (n, h, f):
    #   MK = n (h + h + h + f) = 2048 x 7168 = 14,680,064
    #   MN = n (3h + h + f + h) = 2048 x 9216 = 18,874,368
    #   KN = 3h^2 + h^2 + 2 h f = 4 x 1,048,576 + 8,388,608 = 12,582,912; per micro-batch / 4 = 3,145,728
    # nvfp4: 7.125 x 14,680,064 + 7.125 x 18,874,368 + 5.125 x 3,145,728 = 104,595,456 + 134,479,872 + 16,121,856
    #        = 255,197,184 B at 2e12 B/s = 127.598592 us
    # fp8:   3 x 14,680,064 + 6 x 18,874,368 + 3 x 3,145,728 = 44,040,192 + 113,246,208 + 9,437,184
    #        = 166,723,584 B = 83.361792 us
    from commcost.workload.operators import FP8_CAST_BYTES, NVFP4_CAST_BYTES, micro_batch_operators
    from commcost.workload.stacks import stack
    from commcost.workload.transformer import TransformerSpec
    assert NVFP4_CAST_BYTES == (7.125, 7.125, 5.125)
    spec = TransformerSpec(layers=1, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=False,
                           max_positions=2048, biases=True)
    kw = dict(tokens=2048.0, seq=2048.0, layers=1.0, tp=1.0, sp=False, full=False, selective=False, micro_batches=4)
    st = stack("megatron")
    fp4 = micro_batch_operators(SCALAR, spec, st, rates(fp8=True, cast_bytes=NVFP4_CAST_BYTES), **kw)
    fp8 = micro_batch_operators(SCALAR, spec, st, rates(fp8=True, cast_bytes=(FP8_CAST_BYTES, 6.0, 3.0)), **kw)
    assert fp4.casts_s == pytest.approx(127.598592e-6, rel=1e-12)
    assert fp8.casts_s == pytest.approx(83.361792e-6, rel=1e-12)


def test_the_recipe_picks_its_cast_bytes():
    from commcost.workload.operators import FP8_CAST_BYTES, NVFP4_CAST_BYTES, kernel_rates
    from commcost.workload.stacks import stack
    st = stack("nemo")
    assert kernel_rates("gb300", "nvfp4", st).cast_bytes == NVFP4_CAST_BYTES
    for p in ("fp8", "mxfp8"):
        assert kernel_rates("gb300", p, st).cast_bytes == (FP8_CAST_BYTES, 2 * FP8_CAST_BYTES, FP8_CAST_BYTES)


def test_tp_partner_gemms_whole_and_decomposed_by_hand():
    # h 1024, 8 heads (MHA), f 4096 (not gated), n = 2048 tokens, t = 2; rates(): 1 PFLOP/s, 100 SMs, tiles
    # 128 x 256, K_0 256 (every GEMM below is math-bound: its memory time is under its math time)
    #   QKV  (2048, 1536, 1024): 16 x 6 = 96 tiles, 1 wave: 65,536 x 1,280 x 100 / 1e15 = 8.388608 us;
    #        decomposed 2 x (1024, 1536, 1024): 48 tiles, 1 wave each: 16.777216 us
    #   O    (2048, 1024, 512): 64 tiles, 1 wave: 65,536 x 768 x 100 / 1e15 = 5.0331648 us; 2 x 32 tiles: 10.0663296
    #   up   (2048, 2048, 1024): 128 tiles, 2 waves: 16.777216 us; 2 x (1024, 2048, 1024), 64 tiles: 16.777216
    #   down (2048, 1024, 2048): 64 tiles, 1 wave: 65,536 x 2,304 x 100 / 1e15 = 15.0994944 us; 2 x 1 wave: 30.1989888
    from commcost.workload.operators import micro_batch_operators, tp_partner_gemms_s
    from commcost.workload.stacks import stack
    from commcost.workload.transformer import TransformerSpec
    spec = TransformerSpec(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=False)
    got = tp_partner_gemms_s(SCALAR, rates(), spec, n=2048.0, tp=2.0, moe=False)
    us = (8.388608, 5.0331648, 16.777216, 15.0994944, 16.777216, 10.0663296, 16.777216, 30.1989888)
    assert got == pytest.approx(tuple(x * 1e-6 for x in us), rel=1e-12)
    t = micro_batch_operators(SCALAR, spec, stack("torchtitan"), rates(), tokens=2048.0, seq=2048.0, layers=2.0,
                              tp=2.0, sp=True, full=False, selective=False, micro_batches=1)
    assert t.tp_partners_s == pytest.approx(got, rel=1e-12)



def test_megatron_2023s_local_transformer_runs_eager_norm_swiglu_and_rotary_by_hand():
    # The legacy local transformer (stack megatron-2023): eager fp32-upcast RMSNorm 18 accesses, eager SwiGLU 5,
    # eager rotary 12, against megatron's fused 2, 3 and 2. h 1024, 8 heads of d 128 (w_q 1024), 2 KV heads
    # (w_kv 256), gated f 2048, rotary positions, no dropout, n 2048, t 1. Forward bytes of one layer
    # = 2 n ((2 a_norm + 6) h + a_act f + a_rot (w_q + w_kv)):
    #   megatron-2023  2 x 2048 x (42 x 1024 + 5 x 2048 + 12 x 1280) = 4096 x 68608 = 281,018,368 bytes
    #   megatron       2 x 2048 x (10 x 1024 + 3 x 2048 +  2 x 1280) = 4096 x 18944 =  77,594,624 bytes
    # at rates()' 2e12 B/s: 140.509184 us and 38.797312 us; the element-wise total is 3 forwards per layer, 2 layers.
    from commcost.workload.operators import micro_batch_operators
    from commcost.workload.stacks import stack
    from commcost.workload.transformer import TransformerSpec
    old, new = stack("megatron-2023"), stack("megatron")
    assert (old.norm_accesses, old.activation_accesses_gated, old.rotary_accesses) == (18, 5, 12)
    assert (new.norm_accesses, new.activation_accesses_gated, new.rotary_accesses) == (2, 3, 2)
    spec = TransformerSpec(layers=2, hidden=1024, heads=8, kv_heads=2, ffn_hidden=2048, vocab=1000, gated_mlp=True)
    assert (spec.q_width, spec.kv_width) == (1024, 256)
    kw = dict(tokens=2048.0, seq=2048.0, layers=2.0, tp=1.0, sp=False, full=False, selective=False, micro_batches=1)
    local = micro_batch_operators(SCALAR, spec, old, rates(), **kw)
    fused = micro_batch_operators(SCALAR, spec, new, rates(), **kw)
    assert local.elementwise_s == pytest.approx(2 * 3 * 140.509184e-6, rel=1e-12)
    assert fused.elementwise_s == pytest.approx(2 * 3 * 38.797312e-6, rel=1e-12)
    assert local.gemm_s == fused.gemm_s


def test_megatron_2023_calls_flashattention_2_on_hopper():
    # --use-flash-attn in the local transformer is flash_attn_varlen_func (FlashAttention-2): kernels.json's fa2 row,
    # H800 (the H100 die) 0.36 / 0.30 of the bf16 peak, where megatron's Transformer Engine runs cuDNN (fa3 row: the
    # FA3 paper's causal head-dim-128 cuDNN bars at 16K, forward 539 / 989.4 = 0.545, backward 516 / 989.4 = 0.522
    # x 488.56 / 546.53 = 0.466 causal; each / (16384 / 16784 = 0.976): 0.558 / 0.478); on A100 both rows are
    # FlashAttention-2's 0.70 / 0.55
    from commcost.workload.operators import kernel_rates
    from commcost.workload.stacks import stack
    old = kernel_rates("h800-sxm", "bf16", stack("megatron-2023"))
    new = kernel_rates("h800-sxm", "bf16", stack("megatron"))
    assert (old.attention_forward_efficiency, old.attention_backward_efficiency) == (0.36, 0.30)
    assert (new.attention_forward_efficiency, new.attention_backward_efficiency) == (0.558, 0.478)
    a100 = kernel_rates("a100-sxm4-80gb", "bf16", stack("megatron-2023"))
    assert (a100.attention_forward_efficiency, a100.attention_backward_efficiency) == (0.70, 0.55)


def test_llm_foundry_2023_runs_flashattention_in_triton_by_hand():
    # kernels.json attention.triton_slowdown_vs_fa2 (1.4, 2): FA2 is 1.3-1.5x faster forward and ~2x backward
    # (Dao 2023, section 4.1). A100 FA2 eta_max 0.70 / 0.55: 0.70 / 1.4 = 0.5, 0.55 / 2 = 0.275; H100's FA2 row
    # 0.36 / 0.30: 0.36 / 1.4 = 0.2571428..., 0.30 / 2 = 0.15; without flash the math kernel (A100 0.6 / 0.6)
    from commcost.workload.operators import kernel_rates
    from commcost.workload.stacks import stack
    lf, fsdp = stack("llm-foundry-2023"), stack("fsdp")
    a100 = kernel_rates("a100-sxm4-80gb", "bf16", lf)
    assert (a100.attention_forward_efficiency, a100.attention_backward_efficiency) == pytest.approx((0.5, 0.275),
                                                                                                 rel=1e-12)
    h100 = kernel_rates("h100-sxm", "bf16", lf)
    assert (h100.attention_forward_efficiency, h100.attention_backward_efficiency) == pytest.approx(
        (0.36 / 1.4, 0.15), rel=1e-12)
    assert h100.attention_forward_efficiency == pytest.approx(0.2571428571, rel=1e-9)
    math_kernel = kernel_rates("a100-sxm4-80gb", "bf16", lf, flash=False)
    assert (math_kernel.attention_forward_efficiency, math_kernel.attention_backward_efficiency) == (0.6, 0.6)
    fa2 = kernel_rates("a100-sxm4-80gb", "bf16", fsdp)
    assert (fa2.attention_forward_efficiency, fa2.attention_backward_efficiency) == (0.70, 0.55)
    # the rest is fsdp's (one training loop, one u_stack): the same peaks and GEMM rate
    assert (a100.attention_peak_flops_per_s, a100.gemm_flops_per_s) == (fa2.attention_peak_flops_per_s,
                                                                         fa2.gemm_flops_per_s)
    # so the attention core takes 1.4x FA2's time forward and 2x backward at any shape
    kw = dict(tokens=2048.0, seq=2048.0, heads_local=32.0, d_qk=128.0, d_v=128.0, flash=True)
    tf, tb = attention_s(SCALAR, a100, **kw)
    ff, fb = attention_s(SCALAR, fa2, **kw)
    assert (tf / ff, tb / fb) == pytest.approx((1.4, 2.0), rel=1e-12)


def test_an_unknown_attention_kernel_is_refused():
    from dataclasses import replace

    from commcost.core.errors import InputError
    from commcost.workload.operators import ATTENTION_KERNELS, kernel_rates
    from commcost.workload.stacks import stack
    assert ATTENTION_KERNELS == ("fa2", "fa3", "triton", "math")
    with pytest.raises(InputError, match="unknown attention kernel 'xformers'"):
        kernel_rates("a100-sxm4-80gb", "bf16", replace(stack("fsdp"), attention_kernel="xformers"))


def test_llm_foundry_2023_shares_fsdps_refitted_sustained_fraction_by_hand():
    # plan_accuracy --fit (with the losses that grow with the job in the step, commcost.step.losses, and --stack
    # auto pricing a layout only by a stack that runs it): u_stack fsdp 0.984 (38 rows: llm-foundry's 26 MPT rows,
    # priced with Triton FlashAttention, AMD's 8 FSDP rows and IBM fms-fsdp's 4), u_gpu a100 0.968 (with
    # Narayanan's rows at the micro-batches of the authors' script), h100 0.956 (Meta's 405B runs priced as
    # torchtitan, no longer Megatron-Core evidence). GEMM rate = u_gpu u_stack P eta_gemm:
    # A100 0.968 x 0.984 x 312e12 x eta_bf16; H100 0.956 x 0.984 = 0.940704, x 989.4e12 = 930.7325e12,
    # x 0.74 = 688.7421...e12
    from commcost.hardware import load_preset_file
    from commcost.workload.operators import kernel_rates
    from commcost.workload.stacks import stack
    assert stack("fsdp").sustained == stack("llm-foundry-2023").sustained == 0.984
    h100 = kernel_rates("h100-sxm", "bf16", stack("llm-foundry-2023"))
    assert h100.gemm_flops_per_s == pytest.approx(0.956 * 0.984 * 989.4e12 * 0.74, rel=1e-12)
    assert h100.gemm_flops_per_s == pytest.approx(688.742e12, rel=1e-5)
    eta = load_preset_file("kernels.json")["gpus"]["a100-sxm4-80gb"]["gemm_efficiency"]["bf16"]
    a100 = kernel_rates("a100-sxm4-80gb", "bf16", stack("llm-foundry-2023"))
    assert a100.gemm_flops_per_s == pytest.approx(0.968 * 0.984 * 312e12 * eta, rel=1e-12)


def test_nemo_2024h1_runs_flashattention2_on_h100_by_hand():
    # NeMo 24.01-24.05 containers under the NeMo launcher: NVTE_FUSED_ATTN=0, so Transformer Engine keeps its
    # FlashAttention-2 path (with context parallelism too): kernels.json's H100 fa2 row 0.36 / 0.30 where the
    # 24.09 release (nemo-2024) runs cuDNN, the fa3 row 0.558 / 0.478. At sequence 16,384, head dim 128:
    # s/(s + 400) = 16384 / 16784 = 0.97616778..., so 0.36 x 0.97616778 = 0.35142040, 0.30 x 0.97616778 = 0.29285033
    from commcost.workload.operators import attention_efficiency, kernel_rates
    from commcost.workload.stacks import stack
    early = kernel_rates("h100-sxm", "fp8", stack("nemo-2024h1"))
    late = kernel_rates("h100-sxm", "fp8", stack("nemo-2024"))
    assert (early.attention_forward_efficiency, early.attention_backward_efficiency) == (0.36, 0.30)
    assert (late.attention_forward_efficiency, late.attention_backward_efficiency) == (0.558, 0.478)
    assert attention_efficiency(SCALAR, early, seq=16384, head_dim=128) == pytest.approx((0.35142040, 0.29285033),
                                                                                       rel=1e-7)
    # everything but the attention kernel is the 24.09 release's: the GEMM rate is the same
    assert early.gemm_flops_per_s == late.gemm_flops_per_s
