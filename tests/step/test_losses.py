"""``step/losses.py``: the losses that grow with the job, by hand; the same on floats and numpy columns; and in
``plan`` (each term from the plan's own numbers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.comm.collectives import Collective
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Link
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout
from commcost.step.losses import (LOSS_NAMES, RANK_SPEED_SIGMA, Losses, contention_s, expected_max_normal,
                                  host_sync_s, step_losses, straggler_s, sync_s)
from commcost.workload.transformer import TransformerSpec


def test_rank_speed_sigma_from_the_eight_percent_spread():
    # 0.08 / (2 sqrt(2 ln 1000)): ln 1000 = 6.907755, x2 = 13.815511, sqrt = 3.716922, x2 = 7.433845
    assert RANK_SPEED_SIGMA == pytest.approx(0.08 / 7.433845, rel=1e-6)
    assert RANK_SPEED_SIGMA == pytest.approx(0.0107616, rel=1e-5)


def test_expected_maximum_by_hand():
    assert expected_max_normal(SCALAR, 1) == 0.0                        # one rank waits for nobody
    assert expected_max_normal(SCALAR, math.exp(8.0)) == pytest.approx(4.0)   # sqrt(2 x 8)
    # W = 1024: 2 ln 1024 = 13.862944, sqrt = 3.723297
    assert expected_max_normal(SCALAR, 1024) == pytest.approx(3.723297, rel=1e-6)


def test_straggler_by_hand_and_growing_with_the_job():
    # 10 s of compute on 1024 ranks: 0.0107616 x 3.723297 x 10 = 0.400687 s
    assert straggler_s(SCALAR, compute_s=10.0, ranks=1024) == pytest.approx(0.400687, rel=1e-5)
    # 2048 ranks: sqrt(2 ln 2048) = sqrt(15.249238) = 3.905027 -> 0.420245 s
    assert straggler_s(SCALAR, compute_s=10.0, ranks=2048) == pytest.approx(0.420245, rel=1e-5)
    assert straggler_s(SCALAR, compute_s=10.0, ranks=1) == 0.0


def test_contention_and_sync_by_hand():
    # 0.3 s hidden beside compute, 20 of an H100's 132 SMs: 0.3 x 20 / 132 = 0.04545454 s
    assert contention_s(SCALAR, hidden_s=0.3, sm_share=20 / 132) == pytest.approx(0.04545454, rel=1e-6)
    assert contention_s(SCALAR, hidden_s=-1e-9, sm_share=0.15) == 0.0      # nothing hidden, nothing lost
    assert sync_s(SCALAR, allreduce_s=50e-6) == pytest.approx(50e-6)      # one all-reduce per step


def test_host_sync_by_hand():
    # 2.0 s of DP communication hidden, 6.0 s of the 8.0 s DP wire are ZeRO-3 gathers: 2.0 x 6 / 8 = 1.5 s
    assert host_sync_s(SCALAR, hidden_s=2.0, gather_wire_s=6.0, dp_wire_s=8.0, host_sync=True) == pytest.approx(1.5)
    assert host_sync_s(SCALAR, hidden_s=2.0, gather_wire_s=6.0, dp_wire_s=8.0, host_sync=False) == 0.0
    assert host_sync_s(SCALAR, hidden_s=0.0, gather_wire_s=0.0, dp_wire_s=0.0, host_sync=True) == 0.0  # no DP
    # what is no longer hidden no longer contends: 0.15 x (2.0 - 1.5) = 0.075 s beside compute, 1.5 s host sync
    t = step_losses(SCALAR, compute_s=1.0, ranks=1, hidden_s=2.0, sm_share=0.15, sync_one_s=0.0, gather_wire_s=6.0,
                    dp_wire_s=8.0, host_sync=True)
    assert dict(zip(LOSS_NAMES, t)) == pytest.approx({"straggler_s": 0.0, "contention_s": 0.075, "sync_s": 0.0,
                                                      "host_sync_s": 1.5})
    assert Losses(**dict(zip(LOSS_NAMES, t))).to_dict()["total_s"] == pytest.approx(1.575)


@given(st.floats(0.0, 100.0), st.floats(0.0, 1.0), st.floats(1e-3, 100.0), st.floats(0.0, 1.0))
def test_host_sync_moves_hidden_time_onto_the_step(hidden_share, ag_share, wire, sm):
    # never more than the hidden time, all of it when every DP collective is a gather, and the losses only grow
    # (sigma H becomes sigma (H - t) + t, sigma <= 1)
    hidden, ag = hidden_share * wire / 100.0, ag_share * wire
    t = host_sync_s(SCALAR, hidden_s=hidden, gather_wire_s=ag, dp_wire_s=wire, host_sync=True)
    assert 0.0 <= t <= hidden * (1 + 1e-12)
    assert host_sync_s(SCALAR, hidden_s=hidden, gather_wire_s=wire, dp_wire_s=wire, host_sync=True) == pytest.approx(
        hidden)
    kw = dict(compute_s=1.0, ranks=64, hidden_s=hidden, sm_share=sm, sync_one_s=1e-4, gather_wire_s=ag,
              dp_wire_s=wire)
    assert sum(step_losses(SCALAR, host_sync=True, **kw)) >= sum(step_losses(SCALAR, host_sync=False, **kw)) - 1e-12


def test_columns_equal_floats():
    compute = np.array([1.0, 2.5, 10.0])
    ranks = np.array([1, 64, 16384])
    hidden = np.array([0.0, 0.2, 1.5])
    sync = np.array([0.0, 30e-6, 200e-6])
    ag, wire, on = np.array([0.0, 0.3, 2.0]), np.array([0.0, 0.5, 2.5]), np.array([True, False, True])
    cols = step_losses(np, compute_s=compute, ranks=ranks, hidden_s=hidden, sm_share=0.15, sync_one_s=sync,
                       gather_wire_s=ag, dp_wire_s=wire, host_sync=on)
    for i in range(3):
        one = step_losses(SCALAR, compute_s=float(compute[i]), ranks=int(ranks[i]), hidden_s=float(hidden[i]),
                          sm_share=0.15, sync_one_s=float(sync[i]), gather_wire_s=float(ag[i]),
                          dp_wire_s=float(wire[i]), host_sync=bool(on[i]))
        assert [c[i] for c in cols] == pytest.approx(list(one), rel=1e-12)
    assert cols[3][2] == pytest.approx(1.5 * 2.0 / 2.5)       # 1.2 s: the gathers' share of the hidden 1.5 s


@given(st.floats(0.01, 100.0), st.integers(1, 100_000), st.integers(1, 100_000))
def test_straggler_never_shrinks_with_more_ranks(compute, a, b):
    lo, hi = sorted((a, b))
    assert straggler_s(SCALAR, compute_s=compute, ranks=lo) <= straggler_s(SCALAR, compute_s=compute, ranks=hi)


def test_plan_adds_each_loss_from_its_own_numbers():
    from commcost.analyses.plan.plan import PlanInputs, plan

    spec = TransformerSpec(layers=8, hidden=1024, heads=16, kv_heads=4, ffn_hidden=4096, gated_mlp=True, vocab=32000)
    model = FlatLinkModel(link=Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6))
    inp = PlanInputs(spec=spec, layout=Layout(dp=8, global_batch=32), seq=2048, gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, model)
    # straggler: sigma_g sqrt(2 ln 8) t_c; 2 ln 8 = 4.158883, sqrt = 2.039334
    assert p.losses.straggler_s == pytest.approx(0.0107616 * 2.039334 * p.compute_s, rel=1e-5)
    # contention: 20 / 132 of the SMs over the DP communication hidden behind compute
    hidden = sum(line.time_s - line.exposed_s for line in p.comm if line.comm.dimension == "dp")
    assert hidden > 0
    assert p.losses.contention_s == pytest.approx(20 / 132 * hidden, rel=1e-12)
    # sync: one 4-byte ring all-reduce over 8 ranks, 2 (P-1) a + 2 (P-1)/P S/B = 70 us + 0.7 ns
    assert p.losses.sync_s == pytest.approx(70.0007e-6, rel=1e-4)
    assert p.losses.sync_s == model.cost(Collective.ALL_REDUCE, 4.0, 8, ranks_per_node=8).total_s
    assert p.step_s == pytest.approx(p.compute_s + p.pipeline_bubble_s + p.exposed_comm_s + p.optimizer_s
                                     + p.losses.total_s, rel=1e-12)
    assert p.overlap.perfect_overlap_s <= p.step_s <= p.overlap.no_overlap_s


def test_one_gpu_loses_nothing():
    from commcost.analyses.plan.plan import PlanInputs, plan

    spec = TransformerSpec(layers=4, hidden=512, heads=8, kv_heads=8, ffn_hidden=2048, vocab=32000)
    model = FlatLinkModel(link=Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6))
    p = plan(PlanInputs(spec=spec, layout=Layout(dp=1, global_batch=4), seq=1024, gpu="h100-sxm", gpus_per_node=8),
             model)
    assert p.losses.total_s == 0.0


def _zero3_plan(stack: str, gpus: int):
    """GPT-3 175B under ZeRO-3 on DGX A100 at a fixed global batch of 1536 (Narayanan et al. 2021 Table 2's
    layout: data parallelism only, full recomputation, one micro-batch of 1536 / gpus per rank)."""
    from commcost.analyses.plan.plan import PlanInputs, plan
    from commcost.comm.model import FabricModel
    from commcost.comm.systems import system_group
    from commcost.workload.transformer import model_spec

    topo, _ = system_group("dgx-a100", nodes=gpus // 8)
    inp = PlanInputs(spec=model_spec("gpt3-175b"), layout=Layout(dp=gpus, zero=3, recompute="full",
                                                                  micro_batch=1536 // gpus, global_batch=1536),
                     seq=2048, gpu="a100-sxm4-80gb", gpus_per_node=8, precision="fp16", stack=stack)
    return plan(inp, FabricModel(topology=topo))


def test_plan_host_sync_from_its_own_lines():
    # DeepSpeed of 2021 (deepspeed-2022): the ZeRO-3 gathers' share of the hidden DP time is on the step; today's
    # DeepSpeed (deepspeed) prefetches them: nothing
    p = _zero3_plan("deepspeed-2022", 384)
    dp = [line for line in p.comm if line.comm.dimension == "dp"]
    hidden = sum(line.time_s - line.exposed_s for line in dp)
    ag = sum(line.time_s for line in dp if line.comm.op is Collective.ALL_GATHER)
    assert 0 < ag < sum(line.time_s for line in dp)
    assert p.losses.host_sync_s == pytest.approx(hidden * ag / sum(line.time_s for line in dp), rel=1e-12)
    assert p.losses.contention_s == pytest.approx(20 / 108 * (hidden - p.losses.host_sync_s), rel=1e-12)
    assert _zero3_plan("deepspeed", 384).losses.host_sync_s == 0.0


def test_host_sync_grows_with_the_job_at_a_fixed_batch():
    # the gathers move the same bytes per GPU at every W while the compute they hid behind shrinks: a growing
    # share of the step
    shares = [(p.losses.host_sync_s, p.losses.host_sync_s / p.step_s)
              for p in (_zero3_plan("deepspeed-2022", w) for w in (384, 768, 1536))]
    assert all(a[1] < b[1] for a, b in zip(shares, shares[1:]))


def test_search_prices_the_host_sync_as_plan():
    # one truth: the grid's host_sync_s and contention_s columns equal plan's on a deepspeed-2022 space, and some
    # rows (its ZeRO-3 layouts) have a host sync to price
    from commcost.analyses.plan.plan import plan
    from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
    from commcost.comm.model import FabricModel
    from commcost.comm.systems import system_group

    spec = TransformerSpec(name="tiny", layers=6, hidden=512, heads=8, kv_heads=4, ffn_hidden=1536, gated_mlp=True,
                           vocab=4096)
    model = FabricModel(topology=system_group("dgx-h100", nodes=2)[0])
    inp = SearchInputs(space=SearchSpace(spec=spec, seq=1024, global_batch=32, gpus=(16,), gpus_per_node=8),
                       gpu="h100-sxm", stack="deepspeed-2022")
    rows, values = evaluate_all(inp, model, 16)
    priced = 0
    for i in range(0, len(rows["t"]), 3):
        p = plan(plan_inputs_of(inp, {k: v[i] for k, v in rows.items()}), model)
        priced += p.losses.host_sync_s > 0
        for key in ("host_sync_s", "contention_s"):
            assert math.isclose(float(values[key][i]), getattr(p.losses, key), rel_tol=1e-9, abs_tol=1e-15)
    assert priced > 5
