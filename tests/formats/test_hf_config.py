"""Hugging Face configs -> TransformerSpec: parameter counts by hand, against what ``transformers`` builds on the
meta device from the same file (the five model-card configs of ``tests/data/hf_configs``, and every family's
default config), the windowed-attention FLOPs and the refusals."""

from __future__ import annotations

import json

import pytest

from commcost.core.errors import InputError
from commcost.formats.hf_config import FAMILIES, spec_from_hf_config, spec_from_hf_dict
from conftest import ROOT

CONFIGS = ROOT / "tests" / "data" / "hf_configs"
SHIPPED = ("llama-3.1-8b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-20b")


def test_llama_31_8b_by_hand():
    s = spec_from_hf_config(CONFIGS / "llama-3.1-8b.json")
    # embedding and head 128256 x 4096 = 525,336,576 each (untied); a layer: Q, O 4096^2 = 16,777,216 each, K, V
    # 4096 x 1024 = 4,194,304 each, MLP 3 x 4096 x 14336 = 176,160,768, norms 2 x 4096: 218,112,000;
    # 32 layers 6,979,584,000 + 1,050,673,152 + final norm 4096 = 8,030,261,248 (Meta's "8B")
    assert s.params == 8_030_261_248
    assert (s.kv_heads, s.ffn, s.tied_embeddings, s.is_moe) == (8, 14336, False, False)


def test_deepseek_v3_mla_by_hand():
    s = spec_from_hf_config(CONFIGS / "deepseek-v3.json")
    # MLA: q_a 7168 x 1536 = 11,010,048; q_b 1536 x 128 x 192 = 37,748,736; kv_a 7168 x (512 + 64) = 4,128,768;
    # kv_b 512 x 128 x (128 + 128) = 16,777,216; o 128 x 128 x 7168 = 117,440,512: 187,105,280
    assert s.attention_matrix_params == 187_105_280
    assert (s.d_qk, s.d, s.moe_layer_count, s.dense_layer_count, s.shared_experts) == (192, 128, 58, 3, 1)
    # the registry's row counts the same matrices and the two latent norms (1536 + 512) as one number
    from commcost.workload.transformer import model_spec
    assert s.params == model_spec("deepseek-v3").params


def test_gpt_oss_windows_and_vectors_by_hand():
    s = spec_from_hf_config(CONFIGS / "gpt-oss-20b.json")
    assert (s.sliding_window, s.window_layers, s.experts, s.top_k) == (128, 12, 32, 4)
    # Q K V O biases 64 x 64 + 2 x 8 x 64 + 2880 = 8,000 and 64 sinks; router bias 32 and expert biases
    # 32 x (2 x 2880 + 2880) = 276,480
    assert (s.extra_layer_params, s.extra_moe_layer_params) == (8_064, 276_512)
    # keys per query over the full-square convention at s = 4096, half the layers in a 128 window:
    # k = 128, s_w = 2 x 128 - 128^2 / 4096 = 252; mean (4096 + 252) / 2 = 2174
    assert s.model_attention_keys(4096) == pytest.approx(2174.0)
    assert s.executed_attention_keys(4096, flash=True) == pytest.approx(1087.0)
    assert s.executed_attention_keys(4096, flash=False) == 4096
    # a window as long as the sequence is the causal square: 2s - s = s
    full = spec_from_hf_dict({**json.loads((CONFIGS / "gpt-oss-20b.json").read_text()), "sliding_window": 8192})
    assert full.model_attention_keys(4096) == pytest.approx(4096.0)


def test_refusals_name_the_model_type(tmp_path):
    with pytest.raises(InputError, match="'bert'"):
        spec_from_hf_dict({"model_type": "bert", "hidden_size": 768})
    with pytest.raises(InputError, match="no such file"):
        spec_from_hf_config(tmp_path / "missing.json")
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(InputError, match="JSON object"):
        spec_from_hf_config(tmp_path)        # a directory holding a config.json
    with pytest.raises(InputError, match="num_hidden_layers"):
        spec_from_hf_dict({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10})


def test_gemma3_multimodal_reads_its_text_config():
    text = {"hidden_size": 1152, "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 256, "intermediate_size": 6912, "vocab_size": 262144, "sliding_window": 512}
    a = spec_from_hf_dict({"model_type": "gemma3", "text_config": text})
    b = spec_from_hf_dict({"model_type": "gemma3_text", **text})
    assert a.params == b.params
    # 26 layers, every 6th global: 26 - 4 = 22 windowed; four norms a layer: 2 x 1152 beyond the two
    assert (a.window_layers, a.extra_layer_params, a.tied_embeddings, a.qk_norm) == (22, 2304, True, True)


def _transformers_count(config: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(**{k: v for k, v in config.items()
                                               if k not in ("auto_map", "quantization_config")})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_count_as_transformers_builds_them(name):
    path = CONFIGS / f"{name}.json"
    n = _transformers_count(json.loads(path.read_text()))
    assert spec_from_hf_config(path).params == pytest.approx(n, rel=1e-3)


_OVERRIDES = {"deepseek_v2": dict(first_k_dense_replace=1, num_experts_per_tok=6),
              "deepseek_v3": dict(first_k_dense_replace=1),
              "qwen2_moe": dict(decoder_sparse_step=2, mlp_only_layers=[3]),
              "qwen2": dict(use_sliding_window=True, max_window_layers=2, sliding_window=512),
              "llama": dict(attention_bias=True, mlp_bias=True), "mistral": dict(sliding_window=4096)}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", [f for f in FAMILIES if f != "gemma3"])
def test_every_family_counts_as_transformers_builds_it(model_type):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CONFIG_MAPPING[model_type](num_hidden_layers=4, **_OVERRIDES.get(model_type, {}))
    d = cfg.to_dict()
    assert spec_from_hf_dict(d).params == pytest.approx(_transformers_count(d), rel=1e-3)
