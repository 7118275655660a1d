"""One shape class per model: the timeline's :class:`ModelShape` is a view built from the registry's
:class:`TransformerSpec` (``shape_from_spec``), never from a second reading of ``models.json``."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.hardware.registry import models
from commcost.workload.shape import (ModelShape, fits_timeline, model_params, model_preset, model_preset_names,
                                     shape_from_spec)
from commcost.workload.transformer import TransformerSpec, model_spec, model_spec_names


@pytest.mark.parametrize("name", model_spec_names())
def test_timeline_flag_of_the_data_matches_what_the_spec_says(name):
    # models.json marks the rows the timeline can lay out; the spec decides the same thing from the shape
    assert models()[name].get("timeline", True) is fits_timeline(model_spec(name))


@pytest.mark.parametrize("name", model_preset_names())
def test_shape_and_spec_count_the_same_parameters(name):
    # two independent counts of N (per-tensor sum vs the spec's closed form) agree on every dense preset
    assert model_params(model_preset(name)) == model_spec(name).params == models()[name]["params"]


def test_gpt2_small_by_hand():
    # h = 768, V = 50257, 1024 learned positions, biases, tied head, L = 12:
    # embedding 50257*768 + 1024*768 = 38,597,376 + 786,432 = 39,383,808
    # layer 12 h^2 + 13 h = 7,077,888 + 9,984 = 7,087,872; x12 = 85,054,464; final norm 2h = 1,536
    # N = 39,383,808 + 85,054,464 + 1,536 = 124,439,808
    shape = model_preset("125m")
    assert shape == shape_from_spec(model_spec("gpt2-small"), seq=1024)
    assert (shape.layers, shape.hidden, shape.seq, shape.max_positions, shape.tied_embeddings) == (
        12, 768, 1024, 1024, True)
    assert model_params(shape) == 124_439_808


def test_seq_is_the_callers():
    spec = model_spec("llama2-7b")
    assert shape_from_spec(spec, seq=2048).seq == 2048
    assert shape_from_spec(spec, seq=2048) == ModelShape(
        layers=32, hidden=4096, seq=2048, vocab=32000, ffn_hidden=11008, gated_mlp=True, heads=32, kv_heads=32,
        max_positions=0, tied_embeddings=False, biases=False)


@pytest.mark.parametrize("change", [dict(experts=8, top_k=2), dict(qk_norm=True), dict(head_dim=128),
                                    dict(qk_head_dim=192), dict(attention_params=1000)])
def test_specs_the_timeline_cannot_lay_out_are_refused(change):
    # heads = 8 at h = 512 gives d = 64; head_dim 128 makes n_q d = 1024 != h
    spec = TransformerSpec(name="x", layers=2, hidden=512, heads=8, **change)
    assert not fits_timeline(spec)
    with pytest.raises(InputError, match="not a plain dense transformer.*commcost plan --model x"):
        shape_from_spec(spec, seq=128)


def test_moe_preset_names_itself_in_the_refusal():
    with pytest.raises(InputError, match="model 'mixtral-8x7b' is not a plain dense transformer"):
        model_preset("mixtral-8x7b")
    assert "mixtral-8x7b" not in model_preset_names() and "llama2-7b" in model_preset_names()
