"""Direct tests of ``analyses/uncertainty.py``: the band of the budget, the timeline and a plan, called
in-process. Each edge is checked against the quantity recomputed here with every collective of the class
at ``r`` times its prediction; the ratios are read from bands.json, not pinned."""

from __future__ import annotations

import json

import pytest

from commcost.analyses.drill.budget import BudgetInputs, communication_budget
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.uncertainty import budget_band, plan_band, timeline_band
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.systems import system_group
from commcost.parallel.layout import Layout
from commcost.step.timeline import TimelineInputs, simulate_timeline
from commcost.workload.transformer import model_spec
from conftest import ROOT

BANDS = json.loads((ROOT / "src/commcost/hardware/bands.json").read_text())
R = {k: (v["low_ratio"], v["high_ratio"]) for k, v in BANDS.items() if not k.startswith("_")}
S = 1.3e9 * 2  # 1.3e9 bf16 gradients = 2.6e9 B


def _system(nodes):
    topo, P = system_group("dgx-h100", nodes=nodes)
    return FabricModel(topology=topo), topo, P


def _budget(comm, topo, P):
    # the budget as `budget --system` builds it: fix (e)3 on the system's own NVLink
    return communication_budget(BudgetInputs(gpus=P, comm=comm, params=1.3e9, step_s=0.4,
                                             intra_node_comm=FlatLinkModel(link=topo.intra),
                                             gpus_per_node=topo.gpus_per_node))


def test_budget_band_is_the_class_ratios_times_T():
    comm, topo, P = _system(2)  # 2 nodes x 8 GPUs: the group crosses nodes, class multi_node
    b = _budget(comm, topo, P)
    band = budget_band(b, topo)
    T = comm.cost("all_reduce", S, P).total_s   # the point, recomputed from the fabric
    r_lo, r_hi = R["multi_node"]
    assert band.band_class == "multi_node" and band.ratios == (r_lo, r_hi)
    # one all-reduce: (r_lo T, r_hi T) exactly
    assert band.allreduce_s == pytest.approx((r_lo * T, r_hi * T), rel=1e-9)
    lo, hi = band.first_order_exposed_s
    assert 0.0 <= lo <= hi
    if band.default_exposed_s is not None:
        assert band.default_exposed_s[0] <= band.default_exposed_s[1]
        assert band.best_exposed_s[0] <= band.best_exposed_s[1]


def test_budget_band_inside_one_node_uses_its_class():
    comm, topo, P = _system(1)  # 8 GPUs on NVLink: one_node
    band = budget_band(_budget(comm, topo, P), topo)
    T = comm.cost("all_reduce", S, P).total_s
    assert band.band_class == "one_node"
    assert band.allreduce_s == pytest.approx((R["one_node"][0] * T, R["one_node"][1] * T), rel=1e-9)


def test_no_band_without_an_all_reduce():
    comm, topo, _ = _system(1)
    assert budget_band(_budget(comm, topo, 1), topo) is None
    inp = TimelineInputs(gpus=1, comm=comm, step_s=0.4, params=1.3e9)
    assert timeline_band(inp, simulate_timeline(inp), topo) is None


def test_timeline_band_scales_the_wire_and_keeps_compute():
    comm, topo, P = _system(2)
    inp = TimelineInputs(gpus=P, comm=comm, step_s=0.4, params=1.3e9)
    tl = simulate_timeline(inp)
    band = timeline_band(inp, tl, topo)
    r_lo, r_hi = R["multi_node"]
    # one group, one class: the wire time is sum(r T_i) = r T_w
    assert band.band_class == "multi_node"
    assert band.wire_s == pytest.approx((r_lo * tl.wire_s, r_hi * tl.wire_s), rel=1e-9)
    # compute is held: step - exposed is the same k t_c + t_opt at both edges and at the point
    for step_s, exposed_s in zip(band.step_s, band.exposed_s):
        assert step_s - exposed_s == pytest.approx(tl.step_s - tl.exposed_s, rel=1e-9)
    # r_lo < 1 < r_hi: the point's exposed time lies between the edges'
    assert r_lo < 1 < r_hi
    assert band.exposed_s[0] <= tl.exposed_s * (1 + 1e-9) and tl.exposed_s <= band.exposed_s[1] * (1 + 1e-9)


def test_plan_band_edges_bracket_each_line_by_its_class():
    comm, topo, _ = _system(4)  # 32 GPUs: TP 8 inside a node, DP 4 across nodes
    inp = PlanInputs(spec=model_spec("llama3-8b"), layout=Layout(dp=4, tp=8, pp=1, global_batch=64), seq=4096,
                     gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, comm)
    band = plan_band(inp, p, comm, topo)
    assert len(band.classes) == len(p.comm)
    assert {c for c in band.classes if c is not None} <= {"one_node", "multi_node"}
    assert set(band.ratios) == {c for c in band.classes if c is not None}
    # each line's wire time at an edge is r of its class times the point's line
    for cls, (lo, hi), line in zip(band.classes, band.line_time_s, p.comm):
        if cls is None:
            continue
        assert (lo, hi) == pytest.approx((R[cls][0] * line.time_s, R[cls][1] * line.time_s), rel=1e-6)
    assert band.wire_s == pytest.approx((sum(lo for lo, _ in band.line_time_s), sum(hi for _, hi in band.line_time_s)))
    assert band.step_s[0] <= band.step_s[1] and band.exposed_comm_s[0] <= band.exposed_comm_s[1]


def test_plan_without_communication_has_no_band():
    comm, topo, _ = _system(1)
    inp = PlanInputs(spec=model_spec("gpt2-small"), layout=Layout(dp=1, tp=1, pp=1, global_batch=8), seq=1024,
                     gpu="h100-sxm", gpus_per_node=8)
    assert plan_band(inp, plan(inp, comm), comm, topo) is None
