"""Direct tests of ``report/training.py``: the training-cost line and JSON, by hand."""

from __future__ import annotations

import pytest

from commcost.analyses.plan.training_cost import training_cost
from commcost.report.training import render_training, training_to_dict
from conftest import strict_round_trip

# 2e12 tokens at 4,000 tokens/s/GPU: H = 2e12 / 4000 / 3600 = 138,888.9 GPU-hours;
# on 1,024 GPUs D = 138,888.9 / 1024 / 24 = 5.65 days; at $2.50 per GPU-hour C = $347,222
COST = training_cost(tokens=2e12, tokens_per_s_per_gpu=4000.0, gpus=1024, price_per_gpu_hour=2.5)


def test_line_by_hand():
    line = render_training(COST)
    assert line.startswith("training 2T tokens: 5.7 days on 1,024 GPUs, 138,889 GPU-hours, $347,222 at "
                           "$2.50/GPU-hour")
    assert "tokens / 4,000 tokens/s/GPU / 3600" in line and "\n" not in line


def test_without_a_price_it_says_how_to_get_dollars():
    line = render_training(training_cost(tokens=3e11, tokens_per_s_per_gpu=4000.0, gpus=8))
    # 3e11 tokens = 300B; H = 3e11 / 4000 / 3600 = 20,833 GPU-hours; D = 20,833 / 8 / 24 = 108.5 days
    assert line.startswith("training 300B tokens: 108.5 days on 8 GPUs, 20,833 GPU-hours (give --price-per-gpu-hour")


def test_dict_by_hand_and_strict():
    d = strict_round_trip(training_to_dict(COST))
    assert d["gpu_hours"] == pytest.approx(2e12 / 4000 / 3600)
    assert d["days"] == pytest.approx(2e12 / 4000 / 3600 / 1024 / 24)
    assert d["cost"] == pytest.approx(2e12 / 4000 / 3600 * 2.5)
    assert (d["tokens"], d["gpus"], d["tokens_per_s_per_gpu"], d["price_per_gpu_hour"]) == (2e12, 1024, 4000.0, 2.5)
    # the dollar amounts under names with their unit too; the first names stay for readers of them
    # C = 138,888.9 GPU-hours x $2.50 = $347,222.2
    assert d["cost_usd"] == d["cost"] == pytest.approx(347_222.2, abs=0.1)
    assert d["price_usd_per_gpu_hour"] == d["price_per_gpu_hour"] == 2.5
    free = strict_round_trip(training_to_dict(training_cost(tokens=1e9, tokens_per_s_per_gpu=1.0, gpus=1)))
    assert free["cost"] is None and free["cost_usd"] is None and free["price_usd_per_gpu_hour"] is None
