"""``parallel/expert.py``: the bytes and counts of expert parallelism's all-to-alls, by hand."""

from __future__ import annotations

import pytest

from commcost.comm.collectives import Collective
from commcost.parallel.expert import expert_ops
from commcost.parallel.layout import Layout


def test_ep_all_to_all_bytes_and_count():
    # tokens per rank b s / c = 2 * 4096 = 8192, k = 2, h = 4096: S = 8192 * 2 * 4096 * 2 = 134,217,728;
    # m = 64/(2*8) = 4, 32 MoE layers, dispatch + combine both ways: 4 * 32 * 4 = 512
    L = Layout(dp=8, ep=8, micro_batch=2, global_batch=64)
    (op,) = expert_ops(layout=L, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                       gpus_per_node=8)
    assert op.op is Collective.ALL_TO_ALL and op.size_bytes == 134_217_728 and op.count_per_step == 512
    assert op.group_size == 8 and op.ranks_per_node == 8


def test_dispatch_kernels_scalar_and_columns():
    import numpy as np

    from commcost.core.xp import SCALAR
    from commcost.parallel.expert import dispatch_elements, dispatch_tokens, moe_layers_per_stage

    # T = b (s/c) / t': b = 2, s/c = 4096/2 = 2048 -> 4096 tokens; with SP over t = 4: 1024
    kw = dict(micro_batch=2, seq=4096, cp=2, tp=4)
    assert dispatch_tokens(SCALAR, sequence_parallel=False, **kw) == 4096
    assert dispatch_tokens(SCALAR, sequence_parallel=True, **kw) == 1024
    # T k h I: 4096 * 2 * 1024 * 1.5 = 12,582,912; with SP 1024 * 2 * 1024 * 1.5 = 3,145,728
    el = dict(top_k=2, hidden=1024, expert_load=1.5, **kw)
    assert dispatch_elements(SCALAR, sequence_parallel=False, **el) == 12_582_912
    assert dispatch_elements(SCALAR, sequence_parallel=True, **el) == 3_145_728
    cols = dispatch_elements(np, sequence_parallel=np.array([False, True]), top_k=2, hidden=1024, expert_load=1.5,
                             micro_batch=np.array([2.0, 2.0]), seq=4096, cp=np.array([2.0, 2.0]), tp=np.array([4.0, 4.0]))
    assert cols.tolist() == [12_582_912, 3_145_728]
    # 58 of 61 layers MoE, 8 layers on the stage: 58/61 * 8 = 7.6066 MoE layers; columns 16 -> 15.213
    assert moe_layers_per_stage(moe_layers=58, layers=61, layers_per_stage=8) == pytest.approx(464 / 61)
    assert moe_layers_per_stage(moe_layers=58, layers=61, layers_per_stage=np.array([8.0, 16.0])) == \
        pytest.approx([464 / 61, 928 / 61])


def test_expert_tp_rule_scalar_and_columns():
    import numpy as np

    from commcost.core.xp import SCALAR
    from commcost.parallel.expert import expert_tp_gather_bytes, expert_tp_gathers

    # t_e <= t without SP: the ranks hold the same tokens, one all-reduce; SP or t_e > t: gather + scatter
    assert not expert_tp_gathers(expert_tp=2, tp=4, sequence_parallel=False)
    assert expert_tp_gathers(expert_tp=2, tp=4, sequence_parallel=True)
    assert expert_tp_gathers(expert_tp=8, tp=2, sequence_parallel=False)
    gathers = expert_tp_gathers(expert_tp=np.array([2, 2, 8]), tp=np.array([4, 4, 2]),
                                sequence_parallel=np.array([False, True, False]))
    assert gathers.tolist() == [False, True, True]
    # g S: SP g = t_e = 4 -> 4e6; without SP g = t_e / t = 8 / 2 = 4 -> 4e6; t_e = 6, t = 4: 1.5 -> 1.5e6
    assert expert_tp_gather_bytes(SCALAR, size_bytes=1e6, expert_tp=4, tp=2, sequence_parallel=True) == 4e6
    assert expert_tp_gather_bytes(SCALAR, size_bytes=1e6, expert_tp=8, tp=2, sequence_parallel=False) == 4e6
    cols = expert_tp_gather_bytes(np, size_bytes=np.array([1e6, 1e6, 1e6]), expert_tp=np.array([4, 8, 6]),
                                  tp=np.array([2.0, 2.0, 4.0]), sequence_parallel=np.array([True, False, False]))
    assert cols.tolist() == [4e6, 4e6, 1.5e6]


def test_expert_counts_kernel_scalar_and_columns():
    import numpy as np

    from commcost.parallel.expert import expert_counts_per_step

    # P = m L_m/p = 4 * 8 = 32 visits; 2 passes: forward dispatches 32 * 1, the rest 32 * 3 = 96, expert-TP 64;
    # full recomputation (3 passes): 64, 128, 96
    assert expert_counts_per_step(pairs=32, passes=2) == (32, 96, 64)
    assert expert_counts_per_step(pairs=32, passes=3) == (64, 128, 96)
    cols = expert_counts_per_step(pairs=np.array([32.0, 32.0]), passes=np.array([2, 3]))
    assert [c.tolist() for c in cols] == [[32, 64], [96, 128], [64, 96]]
