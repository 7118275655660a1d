"""The step's prediction interval (commcost.analyses.interval): the edge arithmetic by hand, its properties,
and what a plan carries to tokens/s, MFU, days, GPU-hours and dollars."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, strategies as st

from commcost.analyses.interval import StepInterval, interval_ratios, plan_interval, step_edges, training_interval
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.plan.training_cost import training_cost
from commcost.comm.model import FabricModel
from commcost.core.xp import SCALAR
from commcost.comm.systems import system_group
from commcost.parallel.layout import Layout
from commcost.workload.compute import mfu_frontier
from commcost.workload.transformer import model_spec
from conftest import ROOT


def _edges(t, lo, hi, band=None, frontier=0.0):
    b = band or (t, t)
    return step_edges(SCALAR, step_s=t, ratio_low=lo, ratio_high=hi, band_low_s=b[0], band_high_s=b[1],
                      frontier_step_s=frontier)


def test_edges_from_the_ratios_alone_by_hand():
    # t = 10 s, r = (0.9, 1.2), no band, under the frontier: low = max(min(9, 10), 0) = 9, high = max(12, 10, 0) = 12
    assert _edges(10.0, 0.9, 1.2) == pytest.approx((9.0, 12.0))


def test_a_wider_band_widens_each_side_it_passes_by_hand():
    # band (8.5, 13): low = min(9, 8.5) = 8.5, high = max(12, 13) = 13; band (9.5, 11) is inside: (9, 12) again
    assert _edges(10.0, 0.9, 1.2, band=(8.5, 13.0)) == pytest.approx((8.5, 13.0))
    assert _edges(10.0, 0.9, 1.2, band=(9.5, 11.0)) == pytest.approx((9.0, 12.0))


def test_above_the_frontier_the_interval_starts_at_the_frontier_step_by_hand():
    # MFU 0.6 against a best published 0.5: t* = 10 x 0.6 / 0.5 = 12 s; low = max(9, 12) = 12,
    # high = max(12, 10, 1.2 x 12 = 14.4) = 14.4
    assert _edges(10.0, 0.9, 1.2, frontier=12.0) == pytest.approx((12.0, 14.4))


def test_carried_to_rates_and_to_what_a_run_costs_by_hand():
    iv = StepInterval(step_s=10.0, low_s=9.0, high_s=12.0, coverage=0.8, ratios=(0.9, 1.2), band_s=None,
                      frontier_step_s=None)
    # a rate goes as 1 / step: 1,000 tokens/s -> (1000 x 10/12, 1000 x 10/9) = (833.3, 1111.1)
    assert iv.per_second(1000.0) == pytest.approx((10000 / 12, 10000 / 9))
    # 3.6e12 tokens at 1,000 tokens/s/GPU on 100 GPUs: H = 3.6e12 / 1000 / 3600 = 1e6 GPU-hours,
    # D = 1e6 / 100 / 24 = 416.7 days, C = 2 $/h x 1e6 = $2e6; each x (9/10, 12/10)
    c = training_cost(tokens=3.6e12, tokens_per_s_per_gpu=1000.0, gpus=100, price_per_gpu_hour=2.0)
    out = training_interval(c, iv)
    assert out["gpu_hours_interval"] == pytest.approx([0.9e6, 1.2e6])
    assert out["days_interval"] == pytest.approx([1e6 / 2400 * 0.9, 1e6 / 2400 * 1.2])
    assert out["cost_usd_interval"] == pytest.approx([1.8e6, 2.4e6])
    no_price = training_cost(tokens=3.6e12, tokens_per_s_per_gpu=1000.0, gpus=100)
    assert training_interval(no_price, iv)["cost_usd_interval"] is None


positive = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False)


@given(t=positive, lo=st.floats(0.3, 1.0), hi=st.floats(1.0, 3.0), b_lo=st.floats(0.5, 1.0),
       b_hi=st.floats(1.0, 2.0), above=st.booleans(), excess=st.floats(1.0, 2.0))
def test_the_interval_is_ordered_and_holds_the_point_unless_above_the_frontier(t, lo, hi, b_lo, b_hi, above, excess):
    t_star = t * excess if above else 0.0
    low, high = _edges(t, lo, hi, band=(b_lo * t, b_hi * t), frontier=t_star)
    assert low <= high
    assert low <= lo * t * (1 + 1e-12) or above and low == pytest.approx(t_star)
    assert high >= hi * t * (1 - 1e-12) and high >= b_hi * t * (1 - 1e-12)
    if not above:
        assert low <= t <= high


def test_edges_on_numpy_columns_equal_the_scalar_kernel():
    np = pytest.importorskip("numpy")
    t = np.array([10.0, 10.0, 10.0])
    low, high = step_edges(np, step_s=t, ratio_low=0.9, ratio_high=1.2, band_low_s=np.array([10.0, 8.5, 10.0]),
                           band_high_s=np.array([10.0, 13.0, 10.0]), frontier_step_s=np.array([0.0, 0.0, 12.0]))
    assert list(low) == pytest.approx([9.0, 8.5, 12.0]) and list(high) == pytest.approx([12.0, 13.0, 14.4])


def test_shipped_ratios_are_the_data_file_and_straddle_one():
    table = json.loads((ROOT / "src" / "commcost" / "hardware" / "step_interval.json").read_text(encoding="utf-8"))
    for moe in (False, True):
        r_lo, r_hi, c = interval_ratios(moe)
        row = table["moe" if moe else "dense"]
        assert (r_lo, r_hi, c) == (row["ratio_low"], row["ratio_high"], table["coverage"])
        assert r_lo < 1 < r_hi and c == 0.8
    assert "plan_accuracy.py --interval" in table["source"]


def _plan(gpus: int, tp: int, pp: int, batch: int, micro: int = 1):
    spec = model_spec("llama3-8b")
    L = Layout(dp=gpus // (tp * pp), tp=tp, pp=pp, global_batch=batch, micro_batch=micro,
               sequence_parallel=tp > 1)
    topo, _ = system_group("dgx-h100", nodes=max(1, gpus // 8))
    return plan(PlanInputs(spec=spec, layout=L, seq=8192, gpu="h100-sxm", gpus_per_node=8),
                FabricModel(topology=topo))


def test_a_plan_under_the_frontier_takes_the_ratios_and_one_above_starts_at_the_frontier():
    r_lo, r_hi, _ = interval_ratios(False)
    u_star = mfu_frontier("h100-sxm", "bf16")[0]
    above, under = _plan(8, 1, 1, 8), _plan(64, 8, 1, 64)   # MFU 53.7% and 35.6% against 47% on H100 bf16
    assert above.mfu > u_star > under.mfu
    for p in (above, under):
        iv = plan_interval(p)
        if p.mfu <= u_star:
            assert iv.frontier_step_s is None
            assert (iv.low_s, iv.high_s) == pytest.approx((r_lo * p.step_s, r_hi * p.step_s))
        else:   # t* = t u / u*
            t_star = p.step_s * p.mfu / u_star
            assert iv.frontier_step_s == pytest.approx(t_star)
            assert (iv.low_s, iv.high_s) == pytest.approx((t_star, r_hi * t_star))
        assert math.isclose(iv.per_second(p.mfu)[1], p.mfu * p.step_s / iv.low_s)
