"""One shape class for every command: the timeline lays out the registry's :class:`TransformerSpec`
itself (with the sequence length beside it), never a second class or a second reading of ``models.json``."""

from __future__ import annotations

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError
from commcost.hardware.registry import models
from commcost.step.timeline import TimelineInputs, gradient_stream
from commcost.workload.shape import (fits_timeline, model_params, model_preset, model_preset_names,
                                     transformer_gradient_layers)
from commcost.workload.transformer import TransformerSpec, model_spec, model_spec_names

FLAT = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))


@pytest.mark.parametrize("name", model_spec_names())
def test_timeline_flag_of_the_data_matches_what_the_spec_says(name):
    # models.json marks the rows the timeline can lay out; the spec decides the same thing from the shape
    assert models()[name].get("timeline", True) is fits_timeline(model_spec(name))


@pytest.mark.parametrize("name", model_preset_names())
def test_timeline_and_spec_count_the_same_parameters(name):
    # two independent counts of N (the timeline's per-tensor sum vs the spec's closed form) agree on every
    # dense preset
    spec, _ = model_preset(name)
    assert model_params(spec) == spec.params == models()[name]["params"]


@pytest.mark.parametrize("name", model_preset_names())
def test_the_preset_is_the_registry_spec_itself(name):
    spec, seq = model_preset(name)
    assert spec == model_spec(name) and seq == models()[name]["seq_tokens"]


def test_gpt2_small_by_hand():
    # h = 768, V = 50257, 1024 learned positions, biases, tied head, L = 12:
    # embedding 50257*768 + 1024*768 = 38,597,376 + 786,432 = 39,383,808
    # layer 12 h^2 + 13 h = 7,077,888 + 9,984 = 7,087,872; x12 = 85,054,464; final norm 2h = 1,536
    # N = 39,383,808 + 85,054,464 + 1,536 = 124,439,808
    spec, seq = model_preset("125m")
    assert spec == model_spec("gpt2-small") and seq == 1024
    assert (spec.layers, spec.hidden, spec.max_positions, spec.tied_embeddings) == (12, 768, 1024, True)
    assert model_params(spec) == 124_439_808


def test_seq_is_the_callers():
    # the preset's training length is llama2-7b's 4096; a caller's s changes each layer's backward FLOPs
    # per token by 8 h (s' - s) = 8 * 4096 * (4096 - 2048) = 67,108,864 and leaves N (and S = 2N) alone
    spec, seq = model_preset("llama2-7b")
    assert seq == 4096
    at_4096 = transformer_gradient_layers(spec, 4096)[1].backward_flops_per_token
    at_2048 = transformer_gradient_layers(spec, 2048)[1].backward_flops_per_token
    assert at_4096 - at_2048 == 67_108_864
    short = TimelineInputs(gpus=8, comm=FLAT, step_s=1.0, shape=spec, seq=2048)
    long = TimelineInputs(gpus=8, comm=FLAT, step_s=1.0, shape=spec, seq=4096)
    assert short.message_bytes == long.message_bytes == 2 * 6_738_415_616
    assert gradient_stream(short).ready_fraction != gradient_stream(long).ready_fraction


@pytest.mark.parametrize("change", [dict(experts=8, top_k=2), dict(qk_norm=True), dict(head_dim=128),
                                    dict(qk_head_dim=192), dict(attention_params=1000)])
def test_specs_the_timeline_cannot_lay_out_are_refused(change):
    # heads = 8 at h = 512 gives d = 64; head_dim 128 makes n_q d = 1024 != h
    spec = TransformerSpec(name="x", layers=2, hidden=512, heads=8, **change)
    assert not fits_timeline(spec)
    with pytest.raises(InputError, match="not a plain dense transformer.*commcost plan --model x"):
        TimelineInputs(gpus=8, comm=FLAT, step_s=1.0, shape=spec, seq=128)


def test_a_shape_needs_its_sequence_length():
    spec = TransformerSpec(layers=2, hidden=64, heads=1)
    with pytest.raises(InputError, match="seq"):
        TimelineInputs(gpus=8, comm=FLAT, step_s=1.0, shape=spec)


def test_moe_preset_names_itself_in_the_refusal():
    with pytest.raises(InputError, match="model 'mixtral-8x7b' is not a plain dense transformer"):
        model_preset("mixtral-8x7b")
    assert "mixtral-8x7b" not in model_preset_names() and "llama2-7b" in model_preset_names()
