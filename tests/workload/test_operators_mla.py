"""Multi-latent attention's GEMMs: the four projections carry the attention matrices' FLOPs, and TP splits the
up projections only (Megatron-Core runs the down projections whole on every rank)."""

from __future__ import annotations

from commcost.workload.operators import _input_projections
from commcost.workload.transformer import TransformerSpec

V3 = TransformerSpec(layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128, qk_head_dim=192, ffn_hidden=18432,
                     gated_mlp=True, vocab=129280, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64)


def test_mla_projections_sum_to_the_attention_matrices():
    shapes = _input_projections(V3, n=1.0, tp=1.0)
    # one token: sum of N K over the GEMMs = A - w_q h (everything but O): 187,105,280 - 128 x 128 x 7168
    assert sum(n_ * k_ * c for _, n_, k_, c in shapes) == 187_105_280 - 128 * 128 * 7168
    assert [(n_, k_) for _, n_, k_, _ in shapes] == [(1536, 7168), (128 * 192, 1536), (512 + 64, 7168),
                                                     (128 * 256, 512)]


def test_tp_splits_the_up_projections_only():
    # tp 8: q_b 24576 / 8 = 3072 and kv_b 32768 / 8 = 4096 columns; q_a 1536 and kv_a 576 whole
    assert [n_ for _, n_, _, _ in _input_projections(V3, n=1.0, tp=8.0)] == [1536, 3072, 576, 4096]


def test_plain_attention_keeps_one_fused_qkv():
    s = TransformerSpec(layers=2, hidden=4096, heads=32, kv_heads=8, vocab=1000)
    # Q 4096 + K, V 2 x 8 x 128: N = 6144 over tp 2 = 3072
    assert _input_projections(s, n=5.0, tp=2.0) == [(5.0, 3072.0, 4096, 1.0)]
