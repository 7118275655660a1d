"""The layer-ratio report (``report/layer.py``) names the window its verdict rests on: with k micro-batches
it is the last micro-batch's backward, in the text and in ``--json``."""

from __future__ import annotations

import json

import pytest

from conftest import run_tool

DRILL = ["--gpus", "32", "--bw", "25", "--latency", "20"]


def test_layer_ratio_k4_text_names_the_last_micro_batch_window():
    r = run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--grad-accum", "4")
    assert r.returncode == 0, r.stderr
    # W_l = 2/3 * 57.72 ms / 4 = 9.62 ms < T_l = 32.45 ms; exposed >= 32.45 - 9.62 = 22.82 ms
    assert "COMMUNICATION-BOUND" in r.stdout and "9.62 ms" in r.stdout and "22.82 ms" in r.stdout
    layer = json.loads(run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096",
                                "--grad-accum", "4", "--json").stdout)["layer"]
    assert layer["verdict"] == "COMMUNICATION-BOUND"
    T = 1.24e-3 + 1.9375 * 402653184 / 25e9
    window = 2 / 3 * 4 * (6 * 201326592 * 4096 + 12 * 4096**3) / 400e12 / 4
    assert layer["backward_window_s"] == pytest.approx(window)
    assert layer["exposed_lower_bound_s"] == pytest.approx(T - window)
