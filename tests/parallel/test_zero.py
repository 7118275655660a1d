"""``parallel/zero.py``: the collectives of each ZeRO stage, by hand."""

from __future__ import annotations

import pytest

from commcost.comm.collectives import Collective
from commcost.parallel.layout import Layout
from commcost.parallel.zero import zero_ops


def test_zero_collectives():
    # ZeRO-1: reduce-scatter of gradients (N q_g) and all-gather of weights (N q_w), once per step
    L = Layout(dp=8, zero=1, global_batch=32)
    rs, ag = zero_ops(layout=L, dense_params_per_gpu=1e9, expert_params_per_gpu=0, layers_per_stage=10,
                      grad_bytes=2, weight_bytes=2, gpus_per_node=8)
    assert (rs.op, rs.size_bytes, rs.count_per_step) == (Collective.REDUCE_SCATTER, 2e9, 1)
    assert (ag.op, ag.size_bytes, ag.count_per_step) == (Collective.ALL_GATHER, 2e9, 1)
    # ZeRO-3: 10 layers + the ends = 11 units of 1e9/11 params; m = 32/8 = 4: gathers 2*4*11 = 88, scatters 44
    L3 = Layout(dp=8, zero=3, global_batch=32)
    ag3, rs3 = zero_ops(layout=L3, dense_params_per_gpu=1e9, expert_params_per_gpu=0, layers_per_stage=10,
                        grad_bytes=2, weight_bytes=2, gpus_per_node=8)
    assert ag3.count_per_step == 88 and rs3.count_per_step == 44
    assert ag3.size_bytes == pytest.approx(2e9 / 11)
