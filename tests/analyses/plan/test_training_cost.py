"""Training cost: days, GPU-hours and dollars of a run of N tokens (commcost.analyses.plan.training_cost)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from commcost.core.errors import InputError
from commcost.analyses.plan.training_cost import gpu_hours, parse_token_count, training_cost, usd_per_million_tokens
from conftest import run_commcost

PLAN = ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256", "--zero", "1")


def test_hand_arithmetic():
    # 2e12 tokens at 4,000 tokens/s/GPU on 1,024 GPUs, $2.50 per GPU-hour:
    # H = 2e12 / 4000 / 3600 = 5e8 / 3600 = 138,888.888... GPU-hours
    # D = 138,888.89 / 1024 / 24 = 5.6514 days; C = 138,888.89 x 2.5 = $347,222.22
    c = training_cost(tokens=2e12, tokens_per_s_per_gpu=4000.0, gpus=1024, price_per_gpu_hour=2.5)
    assert c.gpu_hours == pytest.approx(138_888.888_888_9, rel=1e-12)
    assert c.days == pytest.approx(5.651_403_356, rel=1e-9)
    assert c.cost == pytest.approx(347_222.222_222, rel=1e-9)
    assert training_cost(tokens=2e12, tokens_per_s_per_gpu=4000.0, gpus=1024).cost is None
    # $/Mtok = 1e6 x 2.5 / (3600 x 4000) = 2.5e6 / 1.44e7 = 0.173611...
    assert usd_per_million_tokens(2.5, 4000.0) == pytest.approx(0.173_611_111, rel=1e-9)


def test_token_counts():
    assert parse_token_count("15T") == 15e12 and parse_token_count("300B") == 3e11
    assert parse_token_count("2e12") == 2e12 and parse_token_count("1.5m") == 1.5e6
    for bad in ("", "T", "-1T", "0", "inf", "lots"):
        with pytest.raises(InputError):
            parse_token_count(bad)


@given(tokens=st.floats(1e6, 1e14), rate=st.floats(1.0, 1e6), gpus=st.integers(1, 100_000),
       price=st.floats(0.01, 100.0))
def test_cost_is_gpu_hours_times_price_and_days_times_gpus_is_hours(tokens, rate, gpus, price):
    c = training_cost(tokens=tokens, tokens_per_s_per_gpu=rate, gpus=gpus, price_per_gpu_hour=price)
    assert c.cost == pytest.approx(c.gpu_hours * price, rel=1e-12)
    assert c.days * gpus * 24 == pytest.approx(c.gpu_hours, rel=1e-12)
    # the same dollars from the per-million-token price: C = N / 1e6 x $/Mtok
    assert c.cost == pytest.approx(tokens / 1e6 * usd_per_million_tokens(price, rate), rel=1e-9)
    assert gpu_hours(2 * tokens, rate) == pytest.approx(2 * c.gpu_hours, rel=1e-12)


def test_plan_json_and_text_carry_the_training_cost():
    r = run_commcost(*PLAN, "--train-tokens", "2T", "--price-per-gpu-hour", "3", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    tr, rate = d["training"], d["tokens_per_s_per_gpu"]
    assert tr["tokens"] == 2e12
    assert tr["gpu_hours"] == pytest.approx(2e12 / rate / 3600, rel=1e-12)
    assert tr["days"] == pytest.approx(tr["gpu_hours"] / 64 / 24, rel=1e-12)
    assert tr["cost"] == pytest.approx(tr["gpu_hours"] * 3, rel=1e-12)
    text = run_commcost(*PLAN, "--train-tokens", "2T", "--price-per-gpu-hour", "3").stdout
    assert f"{tr['days']:,.1f} days on 64 GPUs" in text and f"${tr['cost']:,.0f}" in text


def test_price_without_tokens_is_bad_input():
    r = run_commcost(*PLAN, "--price-per-gpu-hour", "3")
    assert r.returncode == 2 and "--train-tokens" in r.stderr and "Traceback" not in r.stderr
    r = run_commcost(*PLAN, "--train-tokens", "lots")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_search_results_carry_the_training_cost():
    pytest.importorskip("numpy")
    r = run_commcost("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
                     "--top", "3", "--train-tokens", "1T", "--price-per-gpu-hour", "2", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    for res in json.loads(r.stdout)["results"]:
        tr = res["training"]
        assert tr["gpu_hours"] == pytest.approx(1e12 / res["tokens_per_s_per_gpu"] / 3600, rel=1e-12)
        assert tr["cost"] == pytest.approx(tr["gpu_hours"] * 2, rel=1e-12)
        # the ranking's $/Mtok and the run's dollars agree: C = N / 1e6 x $/Mtok
        assert tr["cost"] == pytest.approx(1e12 / 1e6 * res["usd_per_million_tokens"], rel=1e-9)
