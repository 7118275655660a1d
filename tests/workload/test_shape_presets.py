"""Per-layer gradients for the timeline: parameter counts against published totals."""

import json

import pytest

from commcost.core.errors import InputError
from commcost.hardware import load_preset_file
from commcost.workload.shape import model_params, model_preset, model_preset_names, transformer_gradient_layers
from commcost.workload.transformer import TransformerSpec


@pytest.mark.parametrize("name", model_preset_names())
def test_preset_shape_reproduces_its_published_parameter_count(name):
    # params in models.json are the published counts (config.json / paper), cited in "source"
    row = load_preset_file("models.json")[name]
    assert row["source"]
    assert model_params(model_preset(name)[0]) == row["params"]


def test_known_counts_by_hand():
    # GPT-2 small: wte 50257*768 = 38,597,376; wpe 1024*768 = 786,432; ln_f 2*768 = 1,536;
    # per layer: qkv 768*2304+2304, proj 768*768+768, fc 768*3072+3072, proj 3072*768+768, 2 LN 4*768
    #   = 1,771,776 + 590,592 + 2,362,368 + 2,360,064 + 3,072 = 7,087,872; x12 = 85,054,464
    # total 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808
    assert model_params(model_preset("gpt2-small")[0]) == 124_439_808
    # textbook layer without biases, f = 4h: 12 h^2 + 2h (two RMS-style norms)
    m = TransformerSpec(layers=1, hidden=10, heads=1, vocab=1)
    layer = transformer_gradient_layers(m, 1)[1]
    assert layer.params == 12 * 100 + 2 * 10


def test_embedding_first_head_last_in_forward_order():
    names = [layer.name for layer in transformer_gradient_layers(*model_preset("llama2-7b"))]
    assert names[0] == "embedding" and names[-1] == "output head" and names[1] == "layer 0"
    assert len(names) == 32 + 3


def test_unknown_preset_lists_valid_names():
    with pytest.raises(InputError, match="gpt2-small"):
        model_preset("gpt-5")


def test_bad_shape_raises():
    with pytest.raises(InputError, match="hidden"):
        TransformerSpec(layers=1, hidden=0, heads=1)
    with pytest.raises(InputError, match="kv_heads"):
        TransformerSpec(layers=1, hidden=8, heads=2, kv_heads=4)


def test_models_json_is_valid_json_with_about():
    from importlib import resources
    text = resources.files("commcost.hardware").joinpath("models.json").read_text()
    assert "_about" in json.loads(text)
