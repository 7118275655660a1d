"""``workload/memory.py``: model states by ZeRO stage, activations as Korthikanti et al. 2022 count them,
and the layers in flight under each schedule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commcost.parallel.layout import Layout
from commcost.workload.memory import (RECOMPUTE_WORKING_FACTOR, MemoryBreakdown, in_flight_layers,
                                     layer_activation_bytes, memory_per_gpu, model_state_bytes, stack_saved_kwargs)
from commcost.workload.stacks import stack
from commcost.workload.transformer import TransformerSpec, model_spec


def _gpt_layer(**kw):
    base = dict(seq_local=2048, micro_batch=1, hidden=12288, heads=96, kv_heads=96, qk_head_dim=128, head_dim=128,
                mlp_width=4 * 12288, gated=False, dropout=True, flash=False)
    base.update(kw)
    return layer_activation_bytes(**base)


def test_model_states_by_zero_stage():
    # N = 1e9, D = 8: 2+2+12 = 16 GB; ZeRO-1: 2+2+1.5; ZeRO-2: 2+0.25+1.5; ZeRO-3: 0.25+0.25+1.5
    assert model_state_bytes(1e9, 0, 8) == (2e9, 2e9, 12e9)
    assert model_state_bytes(1e9, 1, 8) == (2e9, 2e9, 1.5e9)
    assert model_state_bytes(1e9, 2, 8) == (2e9, 0.25e9, 1.5e9)
    assert model_state_bytes(1e9, 3, 8) == (0.25e9, 0.25e9, 1.5e9)


def test_activations_reproduce_korthikanti():
    s, b, h, a = 2048, 1, 12288, 96
    # Korthikanti et al. 2022 eq. (1): s b h (34 + 5 a s / h); eq. (2) with t = 8: s b h (10 + 24/t + 5 a s / (h t))
    assert _gpt_layer(tp=1, sequence_parallel=False, recompute="none") == s * b * h * (34 + 5 * a * s / h)
    assert _gpt_layer(tp=8, sequence_parallel=False, recompute="none") == pytest.approx(
        s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8)))
    # sequence parallelism: s b h / t (34 + 5 a s / h); selective: s b h 34 / t; full: 2 s b h / t
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="none") == pytest.approx(
        s * b * h / 8 * (34 + 5 * a * s / h))
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="selective") == pytest.approx(s * b * h * 34 / 8)
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="full") == 2 * s * b * h / 8


def test_in_flight_layers():
    # 1F1B with m >= p: L layers' worth; interleaved: L (1 + (p-1)/(p v)) = 96 (1 + 7/32) = 117
    assert in_flight_layers(layers=96, pp=8, vp=1, micro_batches=64) == 96
    assert in_flight_layers(layers=96, pp=8, vp=4, micro_batches=64) == pytest.approx(117)
    assert in_flight_layers(layers=96, pp=8, vp=1, micro_batches=2) == 24


def test_eager_norm_and_rotary_saved_bytes_llama2_7b():
    # HF transformers' LlamaRMSNorm keeps an fp32 copy of its input and the bf16 normalized tensor (q_n = 6), its
    # unfused rotary the pre-rotary Q, K and their rotate_half copies (n_rot = 2). Llama 2 7B, s = 4096, b = 1,
    # h = 4096 = 32 x 128, n_kv = 32, f = 11008, t = 1, flash, no dropout; sbh = 4096 x 4096 = 16,777,216:
    #   norms and GEMM inputs (2 x 6 + 2 x 2) sbh = 16 sbh; Q, K (1 + 2) x 2 x 2 sbh = 12 sbh, V 2 sbh, O's input 2 sbh;
    #   MLP (6 + 2) s f = 8 x 4096 x 11008 = 360,710,144; log-sum-exp 4 x 32 x 4096 = 524,288
    #   32 x 16,777,216 + 360,710,144 + 524,288 = 898,105,344
    kw = dict(seq_local=4096, micro_batch=1, hidden=4096, heads=32, kv_heads=32, qk_head_dim=128, head_dim=128,
              mlp_width=11008, gated=True, tp=1, sequence_parallel=False, dropout=False, flash=True, recompute="none")
    assert layer_activation_bytes(**kw, norm_saved_bytes=6.0, rotary_saved_copies=2.0) == 898_105_344
    # fused norm and rotary (2, 0): (4 + 4) sbh + (4 + 2 + 2) sbh = 16 sbh -> 268,435,456 + 360,710,144 + 524,288
    assert layer_activation_bytes(**kw) == 629_669_888
    # the deepspeed stack carries the eager values; Megatron-Core the fused ones
    assert stack_saved_kwargs(stack("deepspeed")) == dict(gated_bytes=6.0, norm_saved_bytes=6.0,
                                                           rotary_saved_copies=2.0)
    assert stack_saved_kwargs(stack("megatron")) == dict(gated_bytes=4.0, norm_saved_bytes=2.0,
                                                          rotary_saved_copies=0.0)
    # with TP 2 and sequence parallelism the norms split by r = 2, Q and K (and their copies) by t = 2
    tp2 = dict(kw, tp=2, sequence_parallel=True)
    extra = (layer_activation_bytes(**tp2, norm_saved_bytes=6.0, rotary_saved_copies=2.0)
             - layer_activation_bytes(**tp2))
    # (2 x 4 sbh) / 2 + (2 x 2 x 2 sbh) / 2 = 4 sbh + 4 sbh = 8 x 16,777,216
    assert extra == 134_217_728


def test_eager_norm_and_rotary_apply_to_rmsnorm_rotary_models_only():
    # GPT-3 (LayerNorm with biases, learned positions) and BLOOM (LayerNorm with biases, ALiBi) keep the defaults
    # under the deepspeed stack; Llama 2 (RMSNorm, rotary) takes the stack's eager values
    ds = stack("deepspeed")
    for name in ("gpt3-175b", "bloom-176b"):
        assert stack_saved_kwargs(ds, model_spec(name)) == dict(gated_bytes=6.0, norm_saved_bytes=2.0,
                                                                rotary_saved_copies=0.0)
    assert stack_saved_kwargs(ds, model_spec("llama2-7b")) == dict(gated_bytes=6.0, norm_saved_bytes=6.0,
                                                                   rotary_saved_copies=2.0)


def test_transformer_engine_layer_in_fp8_llama31_8b():
    # AMD's train_fsdp.py fp8 path (stack amd-fsdp-te-2025): a TE TransformerLayer keeps, per token of Llama 3.1 8B
    # (h = 4096 = 32 x 128, n_kv = 8, f = 14,336, no dropout, flash, fused rotary):
    #   each norm's bf16 input 2 h, twice:                          4 h = 16,384
    #   the QKV and fc1 inputs cast to fp8 (ln_out), 1 byte each:   2 h =  8,192
    #   Q and K 2 (32 + 8) 128 = 10,240; V 2 x 8 x 128 = 2,048; the projection's fp8 input 32 x 128 = 4,096 and
    #   flash attention's bf16 output, which the kernel saves for its own backward, 2 x 32 x 128 = 8,192
    #   fc1's bf16 output (SwiGLU's input, 2 f x 2 bytes) 4 f and the fp8 activation output 1 f: 5 f = 71,680
    #   flash attention's fp32 log-sum-exp 4 x 32 = 128
    #   16,384 + 8,192 + 10,240 + 2,048 + 4,096 + 8,192 + 71,680 + 128 = 120,960 bytes a token
    from commcost.workload.memory import gemm_input_bytes
    te = stack("amd-fsdp-te-2025")
    assert gemm_input_bytes(te, True) == 1.0 and gemm_input_bytes(te, False) == 2.0
    saved = stack_saved_kwargs(te, model_spec("llama3.1-8b"))
    assert saved == dict(gated_bytes=4.0, norm_saved_bytes=2.0, rotary_saved_copies=0.0)
    kw = dict(seq_local=8192, micro_batch=5, hidden=4096, heads=32, kv_heads=8, qk_head_dim=128, head_dim=128,
              mlp_width=14336, gated=True, tp=1, sequence_parallel=False, dropout=False, flash=True, recompute="none")
    # 120,960 x 8,192 x 5 = 4,954,521,600
    assert layer_activation_bytes(**kw, **saved, gemm_input_bytes=1.0) == 4_954_521_600
    # the fsdp stack's eager layer in fp8 keeps bf16 GEMM inputs and SiLU's operands (q_in 2, q_g 6): 2 h more for
    # the two GEMM inputs, O's input once in bf16 (1 h less than bf16 + fp8), (6 + 2) f instead of 5 f:
    # 120,960 + 8,192 - 4,096 + 3 x 14,336 = 168,064
    eager = stack_saved_kwargs(stack("fsdp"), model_spec("llama3.1-8b"))
    assert layer_activation_bytes(**kw, **eager, gemm_input_bytes=2.0) == 168_064 * 8192 * 5


def test_megatron_core_060_layer_with_dropout_llama3_8b():
    # FlagPerf's Llama 3 8B runs (stack megatron-2024: Megatron-Core core_v0.6.0, Transformer Engine 1.3, bf16, flash,
    # Megatron's default hidden dropout 0.1, micro-batch 1). What the layer's autograd keeps, per token at t = 1
    # (h = 4096 = 32 x 128, n_kv = 8, f = 14,336):
    #   TE LayerNormLinear (QKV, fc1) saves its bf16 input and its ln_out, 2 h + 2 h each:     8 h = 32,768
    #   Q 2 x 32 x 128 = 8,192, K and V 2 x 8 x 128 each = 4,096 (flash-attn's saved copies)      12,288
    #   the projection's input = flash-attn's saved output (one storage at b = 1) 2 x 32 x 128     8,192
    #   flash-attn's fp32 log-sum-exp 4 x 32                                                          128
    #   BiasSwiGLUFunction's input (fc1 output, 2 f bf16) 4 f and fc2's input 2 f: 6 f =          86,016
    #   the two bias-dropout-adds' 1-byte masks 2 h                                                 8,192
    #   32,768 + 12,288 + 8,192 + 128 + 86,016 + 8,192 = 147,584 bytes a token (2 h fewer without dropout)
    # Under sequence parallelism over t = 8 every one of them is split (TE 1.3 saves the sharded ln_out and
    # re-gathers it in backward): 147,584 / 8 = 18,448 bytes a token.
    spec = replace(model_spec("llama3-8b"), dropout=True)
    saved = stack_saved_kwargs(stack("megatron-2024"), spec)
    assert saved == dict(gated_bytes=4.0, norm_saved_bytes=2.0, rotary_saved_copies=0.0)
    kw = dict(seq_local=8192, micro_batch=1, hidden=4096, heads=32, kv_heads=8, qk_head_dim=128, head_dim=128,
              mlp_width=14336, gated=True, flash=True, recompute="none", **saved)
    # 147,584 x 8,192 = 1,209,008,128; without dropout 139,392 x 8,192 = 1,141,899,264
    assert layer_activation_bytes(**kw, tp=1, sequence_parallel=False, dropout=True) == 1_209_008_128
    assert layer_activation_bytes(**kw, tp=1, sequence_parallel=False, dropout=False) == 1_141_899_264
    # 18,448 x 8,192 = 151,126,016
    assert layer_activation_bytes(**kw, tp=8, sequence_parallel=True, dropout=True) == 151_126_016


def test_full_recompute_working_set_is_one_to_two_layers_by_hand():
    # 2 layers, s' = 32, b = 1, h = 64, 4 heads of d = 16, f = 256, flash, no dropout, one GPU. One layer without
    # recomputation: norms' inputs 4 sbh + QKV and MLP inputs 4 sbh = 8 x 2,048 = 16,384; Q, K 2 s (4 + 4) 16 =
    # 8,192, V 4,096, O's input 4,096; MLP 4 s f = 32,768; log-sum-exp 4 x 4 x 32 = 512 -> A_none = 66,048.
    # Full recomputation: layer inputs 2 sbh x 2 = 8,192; fp32 logits 4 s V = 4 x 32 x 100 = 12,800; the working
    # set of the layer being recomputed: low 1 x 66,048 (its re-run forward's activations, all alive), high
    # 2 x 66,048 = 132,096 (their gradients too while its backward runs).
    assert RECOMPUTE_WORKING_FACTOR == (1.0, 2.0)
    spec = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100)
    mem = memory_per_gpu(spec, Layout(dp=1, recompute="full"), seq=32, capacity_bytes=80e9)
    assert mem.activations_bytes == pytest.approx(8192 + 132096 + 12800, rel=1e-12)   # the high end, in the stack
    assert mem.working_spread_bytes == pytest.approx(66048, rel=1e-12)
    lo, hi = mem.allocated_bytes
    assert hi == mem.total_bytes and hi - lo == pytest.approx(66048, rel=1e-12)
    # reserved: low end x 1.00, high end x 1.15
    assert mem.reserved_bytes == pytest.approx((mem.total_bytes - 66048, 1.15 * mem.total_bytes), rel=1e-12)
    # no recomputation: no working set, no spread (a point for the peak allocated)
    none = memory_per_gpu(spec, Layout(dp=1), seq=32, capacity_bytes=80e9)
    assert none.working_spread_bytes == 0.0 and none.allocated_bytes == (none.total_bytes, none.total_bytes)
    # without recomputation both layers' 66,048 stay saved: 2 x 66,048 + 12,800 = 144,896
    assert none.activations_bytes == pytest.approx(144896, rel=1e-12)


def test_working_spread_moves_the_low_ends_and_the_verdict_by_hand():
    GiB = 2**30
    # peak allocated 60-70 GiB (a 10 GiB spread), NCCL 0.25-2 GiB, context 0.5-1 GiB, slack 0-15%:
    #   reserved 60 x 1.00 = 60 to 70 x 1.15 = 80.5 GiB
    #   card 60 + 0.5 + 0.25 = 60.75 to 80.5 + 1 + 2 = 83.5 GiB
    m = MemoryBreakdown(weights_bytes=10 * GiB, gradients_bytes=10 * GiB, optimizer_bytes=20 * GiB,
                        activations_bytes=30 * GiB, buffers_bytes=0.0, total_bytes=70 * GiB, capacity_bytes=61 * GiB,
                        stage="only", in_flight_layers=1.0, working_spread_bytes=10 * GiB)
    assert m.allocated_bytes == pytest.approx((60 * GiB, 70 * GiB))
    assert m.reserved_bytes == pytest.approx((60 * GiB, 80.5 * GiB))
    assert m.device_bytes == pytest.approx((60.75 * GiB, 83.5 * GiB))
    # 61 GiB card: 60.75 <= 61 -> fits at the low estimate only: may not fit; without the spread the low end would be
    # 70.75 GiB and it would not fit
    assert m.verdict == "may not fit" and m.fits and m.margin_bytes == pytest.approx(0.25 * GiB)
    # 60.5 GiB card: even 60.75 is over -> does not fit
    small = replace(m, capacity_bytes=60.5 * GiB)
    assert small.verdict == "does not fit" and not small.fits
    assert m.to_dict()["peak_allocated_range_bytes"] == pytest.approx([60 * GiB, 70 * GiB])


def test_learned_positions_are_whole_on_every_tensor_parallel_rank():
    # Megatron-Core's LanguageModelEmbedding keeps its position embedding as a torch.nn.Embedding beside the
    # VocabParallelEmbedding: split over t are V h and the head, not P h. V = 1,000, h = 64, P = 128, tied head,
    # final norm h = 64 (no biases), t = 8; with layers_held = 0 the stage holds only its ends:
    #   p = 1: (V h + final norm) / t + P h = (64,000 + 64) / 8 + 8,192 = 8,008 + 8,192 = 16,200
    #          (all over t it would be (64,000 + 8,192 + 64) / 8 = 9,032)
    #   p = 2: the embedding's stage 64,000 / 8 + 8,192 = 16,192 against the head's (a copy of V h, tied) and the
    #          final norm (64,000 + 64) / 8 = 8,008: 16,192
    from commcost.core.xp import SCALAR
    from commcost.workload.memory import stage_params
    spec = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=1000, max_positions=128,
                           tied_embeddings=True)
    kw = dict(layers_held=0.0, tp=8, ep=1, expert_tp=1)
    assert stage_params(SCALAR, spec, pp=1, **kw) == (16_200.0, 0.0)
    assert stage_params(SCALAR, spec, pp=2, **kw) == (16_192.0, 0.0)
    # rotary (P = 0): nothing whole; p = 1: (64,000 + 64) / 8 = 8,008
    assert stage_params(SCALAR, replace(spec, max_positions=0), pp=1, **kw) == (8_008.0, 0.0)
