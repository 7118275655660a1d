"""``parallel/context.py``: the bytes and counts of context parallelism's ring, by hand."""

from __future__ import annotations

from commcost.parallel.context import context_ops
from commcost.parallel.layout import Layout


def test_cp_ring_bytes_and_count():
    # s/c = 8192/4 = 2048 tokens; K and V heads on this TP rank: max(1, 8/2) = 4 of d = 128:
    # S = 2 * 1 * 2048 * 512 * 2 = 4,194,304; m = 8/(1*2) = 4, 10 layers, c-1 = 3 steps, 3 passes: 360
    L = Layout(dp=2, tp=2, cp=4, global_batch=8)
    (op,) = context_ops(layout=L, kv_heads=8, head_dim=128, seq=8192, layers_per_stage=10, activation_bytes=2,
                        gpus_per_node=8)
    assert op.size_bytes == 4_194_304 and op.count_per_step == 360
    # the cp group (stride 2, 4 ranks) sits in one node of 8
    assert op.ranks_per_node == 2


def test_cp_message_kernel_scalar_and_columns():
    import numpy as np

    from commcost.core.xp import SCALAR
    from commcost.parallel.context import cp_message_bytes

    # n_kv = 8, d = 128: t = 2 holds max(1, 8/2) = 4 heads -> w_kv = 512; S = 2 * 1 * (8192/4) * 512 * 2 = 4,194,304.
    # t = 16 > n_kv: each rank still holds one head (replicated), w_kv = 128 -> S = 2 * 1 * 2048 * 128 * 2 = 1,048,576
    kw = dict(micro_batch=1, seq=8192, cp=4, kv_heads=8, head_dim=128, activation_bytes=2)
    assert cp_message_bytes(SCALAR, tp=2, **kw) == 4_194_304
    assert cp_message_bytes(SCALAR, tp=16, **kw) == 1_048_576
    assert cp_message_bytes(np, tp=np.array([2.0, 16.0]), **kw).tolist() == [4_194_304, 1_048_576]


def test_cp_rings_kernel_scalar_and_columns():
    import numpy as np

    from commcost.core.xp import SCALAR
    from commcost.parallel.context import cp_rings_per_step

    # m (L/p) passes: m = 4, 10 layers, 3 passes (forward 1, backward 2) -> 120; full recomputation 4 -> 160
    assert cp_rings_per_step(SCALAR, micro_batches=4, layers_per_stage=10, full=False) == 120
    assert cp_rings_per_step(SCALAR, micro_batches=4, layers_per_stage=10, full=True) == 160
    cols = cp_rings_per_step(np, micro_batches=np.array([4.0, 4.0]), layers_per_stage=np.array([10.0, 10.0]),
                             full=np.array([False, True]))
    assert cols.tolist() == [120, 160]
