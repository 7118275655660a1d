"""``workload/memory.py``: model states by ZeRO stage, activations as Korthikanti et al. 2022 count them,
and the layers in flight under each schedule."""

from __future__ import annotations

import pytest

from commcost.workload.memory import layer_activation_bytes, model_state_bytes, in_flight_layers


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
