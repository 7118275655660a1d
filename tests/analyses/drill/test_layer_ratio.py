"""The --layer-ratio section, by hand."""

import pytest
from hypothesis import given, strategies as st

from commcost.comm.model import FlatLinkModel
from commcost import LayerInputs, Link, layer_ratio

LINK = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)


def test_drill_layer_k1():
    r = layer_ratio(LayerInputs(gpus=32, comm=FlatLinkModel(link=LINK), hidden=4096, seq=4096, grad_accum=1))
    # 12 * 4096^2 = 201,326,592 params; bf16 -> 402,653,184 B
    assert r.params == 201_326_592
    assert r.grad_bytes == 402_653_184
    assert r.tokens_per_rank == 4096
    # T = 1.24 ms + 1.9375 * 402653184/25e9 (31.2056 ms) = 32.4456 ms
    T = 1.24e-3 + 1.9375 * 402653184 / 25e9
    assert r.allreduce.total_s == pytest.approx(T)
    # dense 6 * 201326592 * 4096 = 4.9478e12; attention 12 * 4096^3 = 8.2463e11
    assert r.dense_flops == pytest.approx(6 * 201326592 * 4096)
    assert r.attention_flops == pytest.approx(12 * 4096**3)
    compute = (6 * 201326592 * 4096 + 12 * 4096**3) / 400e12     # 14.431 ms
    assert r.compute_s == pytest.approx(compute)
    assert r.comm_to_compute == pytest.approx(T / compute)        # ~2.248
    assert r.verdict == "COMMUNICATION-BOUND"
    # 1.9375 * 2 * 400e12 / (6 * 4096 * 25e9) = 2.5228
    assert r.width_free_ratio == pytest.approx(1.9375 * 2 * 400e12 / (6 * 4096 * 25e9))
    # D* = T F / (2/3 * (72h^2 + 12hs)) = T*400e12 / (2/3 * 84 * 4096^2)
    assert r.tokens_to_hide == pytest.approx(T * 400e12 / (2 / 3 * 84 * 4096**2))


def test_drill_layer_k4_ratio_falls_but_window_does_not_grow():
    # With no_sync accumulation only the LAST micro-batch's backward overlaps the all-reduce
    # (budget part (c), commcost timeline): k = 4 cuts the ratio by 4 but not the window.
    r = layer_ratio(LayerInputs(gpus=32, comm=FlatLinkModel(link=LINK), hidden=4096, seq=4096, grad_accum=4))
    compute = 4 * (6 * 201326592 * 4096 + 12 * 4096**3) / 400e12   # 57.72 ms
    T = 1.24e-3 + 1.9375 * 402653184 / 25e9                        # 32.4456 ms
    assert r.comm_to_compute == pytest.approx(T / compute)           # ~0.562
    window = 2 / 3 * compute / 4                                     # 9.62 ms, as at k = 1
    assert r.backward_window_s == pytest.approx(window)
    assert r.verdict == "COMMUNICATION-BOUND"                        # 32.4 ms > 9.62 ms
    assert r.exposed_lower_bound_s == pytest.approx(T - window)      # 22.82 ms
    # tokens per rank per micro-batch to hide it: the same 13,814 as at k = 1
    assert r.tokens_to_hide == pytest.approx(T * 400e12 / (2 / 3 * 84 * 4096**2))


def test_layer_hides_when_the_micro_batch_is_long_enough():
    # micro_batch 4 sequences of 4096: compute per micro-batch 4 x 14.431 = 57.72 ms,
    # window 2/3 x 57.72 = 38.48 ms >= T 32.45 ms -> hides, nothing exposed
    r = layer_ratio(LayerInputs(gpus=32, comm=FlatLinkModel(link=LINK), hidden=4096, seq=4096, micro_batch=4, grad_accum=1))
    assert r.backward_window_s == pytest.approx(2 / 3 * 4 * (6 * 201326592 * 4096 + 12 * 4096**3) / 400e12)
    assert r.verdict == "HIDES"
    assert r.exposed_lower_bound_s == 0.0


@given(st.integers(min_value=64, max_value=65536), st.integers(min_value=64, max_value=65536))
def test_width_free_ratio_does_not_depend_on_hidden(h1, h2):
    kw = dict(gpus=32, comm=FlatLinkModel(link=LINK), seq=2048, grad_accum=2)
    a = layer_ratio(LayerInputs(hidden=h1, **kw)).width_free_ratio
    b = layer_ratio(LayerInputs(hidden=h2, **kw)).width_free_ratio
    assert a == pytest.approx(b)
