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
from commcost.step.losses import (RANK_SPEED_SIGMA, contention_s, expected_max_normal, step_losses, straggler_s,
                                  sync_s)
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


def test_columns_equal_floats():
    compute = np.array([1.0, 2.5, 10.0])
    ranks = np.array([1, 64, 16384])
    hidden = np.array([0.0, 0.2, 1.5])
    sync = np.array([0.0, 30e-6, 200e-6])
    cols = step_losses(np, compute_s=compute, ranks=ranks, hidden_s=hidden, sm_share=0.15, sync_one_s=sync)
    for i in range(3):
        one = step_losses(SCALAR, compute_s=float(compute[i]), ranks=int(ranks[i]), hidden_s=float(hidden[i]),
                          sm_share=0.15, sync_one_s=float(sync[i]))
        assert [c[i] for c in cols] == pytest.approx(list(one), rel=1e-12)


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
