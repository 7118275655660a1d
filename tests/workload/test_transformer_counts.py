"""``workload/transformer.py``: the registry's parameter counts agree with the published totals."""

from __future__ import annotations

from commcost.workload.transformer import model_spec, model_spec_names


def test_registry_counts_agree_with_published():
    # Mixtral 8x7B: 46.7B total, 12.9B active (Jiang et al. 2024); DeepSeek-V3 671B / 37B (without MTP)
    mx, ds = model_spec("mixtral-8x7b"), model_spec("deepseek-v3")
    assert round(mx.params / 1e9, 1) == 46.7 and round(mx.active_params / 1e9, 1) == 12.9
    assert round(ds.params / 1e9) == 671 and round(ds.active_params / 1e9) == 38 - 1 + 1  # 37.55B
    assert model_spec("llama3-8b").params == 8_030_261_248
    for name in model_spec_names():
        assert model_spec(name).source
