"""The prediction interval as plan and search print it (commcost.report._interval): the JSON keys, the
training run's intervals, and the same interval from both commands for the same layout."""

from __future__ import annotations

import json

import pytest

from commcost.analyses.interval import StepInterval
from commcost.report._interval import interval_cell
from conftest import run_commcost

PLAN = ("plan", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "256", "--tp", "8", "--pp", "4",
        "--global-batch", "512", "--train-tokens", "2T", "--price-per-gpu-hour", "2.5")


@pytest.fixture(scope="module")
def plan_json():
    r = run_commcost(*PLAN, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plan_json_carries_the_interval_to_every_paid_quantity(plan_json):
    d = plan_json
    low, high = d["step_interval_s"]
    t = d["step_s"]
    assert d["step_interval_coverage"] == 0.8
    assert low < t < high   # under the frontier (MFU 40% against 47%): the point lies inside
    assert d["step_interval_frontier_s"] is None
    # off the band, the ratios: low = min(r_lo t, b_lo), high = max(r_hi t, b_hi)
    r_lo, r_hi = d["step_interval_ratios"]
    assert low == pytest.approx(min(r_lo * t, d["step_band_s"][0]))
    assert high == pytest.approx(max(r_hi * t, d["step_band_s"][1]))
    # rates as 1 / step, the run's cost as the step
    assert d["tokens_per_s_per_gpu_interval"] == pytest.approx([d["tokens_per_s_per_gpu"] * t / high,
                                                               d["tokens_per_s_per_gpu"] * t / low])
    assert d["mfu_interval"] == pytest.approx([d["mfu"] * t / high, d["mfu"] * t / low])
    tr = d["training"]
    for key, point in (("days_interval", tr["days"]), ("gpu_hours_interval", tr["gpu_hours"]),
                       ("cost_usd_interval", tr["cost_usd"])):
        assert tr[key] == pytest.approx([point * low / t, point * high / t]), key


def test_plan_text_prints_the_interval_and_the_runs_range(plan_json):
    r = run_commcost(*PLAN)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "80% interval" in text
    days = plan_json["training"]["days_interval"]
    assert f"80% interval {days[0]:,.1f}-{days[1]:,.1f} days" in text
    assert all(len(line) <= 80 for line in r.stdout.splitlines())


def test_search_results_carry_the_same_interval_as_plan_for_their_layout():
    r = run_commcost("search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "64",
                     "--top", "2", "--train-tokens", "1T", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["results"][0]
    assert {"step_interval_s", "step_interval_coverage"} <= set(best)
    assert {"days_interval", "gpu_hours_interval", "cost_usd_interval"} <= set(best["training"])
    assert best["training"]["cost_usd_interval"] is None   # no price
    p = run_commcost(*best["plan_command"].split()[1:], "--json")   # "commcost plan ...", run as printed
    assert p.returncode == 0, p.stderr
    mine = json.loads(p.stdout)
    assert mine["step_s"] == pytest.approx(best["step_s"], rel=1e-12)
    assert mine["step_interval_s"] == pytest.approx(best["step_interval_s"], rel=1e-12)


def test_a_search_above_the_frontier_starts_the_interval_at_the_frontier_step():
    r = run_commcost("search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "64", "--global-batch",
                     "256", "--top", "1", "--json", "--no-progress")
    best = json.loads(r.stdout)["results"][0]
    # llama3-8b on H100 at 57% MFU, above the best published 47% (compute.json): t* = t x MFU / 0.47
    assert best["mfu"] > 0.47
    t_star = best["step_s"] * best["mfu"] / 0.47
    assert best["step_interval_frontier_s"] == pytest.approx(t_star)
    assert best["step_interval_s"][0] == pytest.approx(t_star)
    assert best["step_interval_s"][1] == pytest.approx(max(best["step_interval_ratios"][1] * t_star,
                                                           best["step_band_s"][1]))


def test_the_search_cell_says_when_the_interval_starts_at_the_frontier():
    iv = StepInterval(step_s=1.0, low_s=0.9, high_s=1.2, coverage=0.8, ratios=(0.9, 1.2), band_s=None,
                      frontier_step_s=None)
    assert interval_cell(iv) == "80% interval 900.00 ms-1.200 s"
    above = StepInterval(step_s=1.0, low_s=1.2, high_s=1.44, coverage=0.8, ratios=(0.9, 1.2), band_s=None,
                         frontier_step_s=1.2)
    assert interval_cell(above).endswith("(MFU frontier)")
