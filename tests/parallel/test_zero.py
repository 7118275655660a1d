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


def test_zero3_unit_kernels_scalar_and_columns():
    import numpy as np

    from commcost.parallel.zero import zero3_gather_bytes, zero3_scatter_bytes, zero3_units

    # 10 layers + embedding/head = 11 units; 1.1e9 params: 1e8 a unit; gathered as bf16 in g = 4 gathers:
    # 1e8 * 2 / 4 = 5e7 B each; scattered in fp32 gradients: 1e8 * 4 = 4e8 B
    assert zero3_units(10) == 11
    assert zero3_gather_bytes(params=1.1e9, units=11, weight_bytes=2.0, gathers_per_layer=4) == pytest.approx(5e7)
    assert zero3_scatter_bytes(params=1.1e9, units=11, grad_bytes=4.0) == pytest.approx(4e8)
    units = zero3_units(np.array([10.0, 4.0]))                     # 11, 5
    assert units.tolist() == [11, 5]
    # 2.2e9 / 11 * 2 / 1 = 4e8; 1e9 / 5 * 2 / 1 = 4e8; scatters 2.2e9 / 11 * 2 = 4e8, 1e9 / 5 * 2 = 4e8
    params = np.array([2.2e9, 1e9])
    assert zero3_gather_bytes(params=params, units=units, weight_bytes=2.0, gathers_per_layer=1) == \
        pytest.approx([4e8, 4e8])
    assert zero3_scatter_bytes(params=params, units=units, grad_bytes=2.0) == pytest.approx([4e8, 4e8])
