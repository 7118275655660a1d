"""The TransformerSpec fields Hugging Face configs need: multi-latent attention's matrices, a shared-expert width
of its own, sliding windows (by hand and as properties), and the validation of each."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.core.errors import InputError
from commcost.workload.transformer import TransformerSpec

BASE = dict(layers=4, hidden=1024, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=4096)


def test_mla_without_query_compression_by_hand():
    s = TransformerSpec(**{**BASE, "head_dim": 128, "qk_head_dim": 192, "kv_lora_rank": 512, "qk_rope_head_dim": 64})
    # q 1024 x 8 x 192 = 1,572,864; kv_a 1024 x (512 + 64) = 589,824; kv_b 512 x 8 x (128 + 128) = 1,048,576;
    # o 8 x 128 x 1024 = 1,048,576: 4,259,840
    assert s.attention_matrix_params == 4_259_840
    # norms 2 x 1024 + the KV latent norm 512
    assert s.layer_small_params == 2 * 1024 + 512


def test_shared_expert_width_by_hand():
    s = TransformerSpec(**{**BASE, "experts": 8, "top_k": 2, "expert_ffn_hidden": 512, "shared_experts": 1,
                           "shared_expert_ffn_hidden": 2048})
    # MoE layer FLOPs per token: 2 (A + k M(f_e) + M(f_s) + h E) with A = 4 x 1024^2 = 4,194,304,
    # M(512) = 3 x 1024 x 512 = 1,572,864, M(2048) = 6,291,456, h E = 8,192:
    # 2 x (4,194,304 + 3,145,728 + 6,291,456 + 8,192) = 27,279,360
    assert s.layer_matmul_flops[1] == 27_279_360.0
    assert s.shared_ffn == 2048


def test_window_validation():
    with pytest.raises(InputError, match="go together"):
        TransformerSpec(**BASE, sliding_window=128)
    with pytest.raises(InputError, match="exceeds layers"):
        TransformerSpec(**BASE, sliding_window=128, window_layers=5)
    with pytest.raises(InputError, match="need kv_lora_rank"):
        TransformerSpec(**BASE, q_lora_rank=64)


@given(seq=st.integers(1, 1 << 20), w=st.integers(1, 1 << 20), share=st.integers(1, 4))
def test_windowed_keys_are_bounded_and_monotone(seq, w, share):
    s = TransformerSpec(**BASE, sliding_window=w, window_layers=share)
    wider = TransformerSpec(**BASE, sliding_window=w + 1, window_layers=share)
    keys = s.model_attention_keys(seq)
    assert 0 < keys <= seq * (1 + 1e-12)
    assert wider.model_attention_keys(seq) >= keys * (1 - 1e-12)
    assert s.executed_attention_keys(seq, flash=True) == pytest.approx(keys / 2)
    if w >= seq:
        assert keys == pytest.approx(seq)
