"""Direct tests of ``report/layer.py``: the ``--layer-ratio`` section rendered in-process, by hand."""

from __future__ import annotations

import pytest

from commcost.analyses.drill.layer import LayerInputs, layer_ratio
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.report.layer import layer_to_dict, render_layer_text
from conftest import numbers_without_a_unit, strict_round_trip

COMM = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))


@pytest.fixture(scope="module")
def layer():
    return layer_ratio(LayerInputs(gpus=32, comm=COMM, hidden=4096, seq=4096, achieved_flops_per_s=400e12))


def test_text_by_hand(layer):
    text = render_layer_text(layer, gpus=32, hidden=4096, seq=4096, achieved_flops_per_s=400e12,
                             backward_fraction=2 / 3)
    # N_l = 12 * 4096^2 = 201,326,592; S_l = 2 N_l = 402,653,184 B
    assert "N_l = 12h^2                = 201,326,592" in text
    assert "= 402,653,184 B = " in text
    # T_l = 62 * 20 us + 1.9375 * 402,653,184 / 25e9 = 1.24 ms + 31.21 ms = 32.45 ms
    assert "= 1.24 ms + 31.21 ms = 32.45 ms" in text
    # compute (6 N_l D + 12 h s D) / F, D = 4096: (4.948e12 + 8.246e11) FLOP / 400e12 = 14.43 ms
    assert "(4.948e+12 + 8.246e+11) FLOP / F = 14.43 ms" in text
    # W_l = 2/3 * 14.43 ms = 9.62 ms < T_l: exposed >= 32.45 - 9.62 = 22.82 ms
    assert "COMMUNICATION-BOUND" in text and "= 9.62 ms" in text and "22.82 ms at least" in text
    assert "F = 400 TFLOP/s achieved per GPU" in text


def test_dict_by_hand_and_strict(layer):
    d = strict_round_trip(layer_to_dict(layer))
    assert numbers_without_a_unit(d) == []
    assert d["params"] == 201_326_592 and d["grad_bytes"] == 402_653_184 and d["tokens_per_rank"] == 4096
    T = 62 * 20e-6 + 62 / 32 * 402_653_184 / 25e9
    C = (6 * 201_326_592 * 4096 + 12 * 4096**3) / 400e12
    assert d["comm_s"] == pytest.approx(T) and d["compute_s"] == pytest.approx(C)
    assert d["comm_to_compute"] == pytest.approx(T / C)
    assert d["backward_window_s"] == pytest.approx(2 / 3 * C)
    assert d["exposed_lower_bound_s"] == pytest.approx(T - 2 / 3 * C)
    assert d["verdict"] == "COMMUNICATION-BOUND"
