"""``parallel/tensor.py``: the bytes and counts of tensor parallelism's collectives, by hand."""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.layout import Layout
from commcost.parallel.tensor import tensor_ops


def test_tp_all_reduce_bytes_and_count():
    # b=1, s=1024, h=512, bf16: S = 1*1024*512*2 = 1,048,576 B; m = 16/(1*4) = 4 micro-batches,
    # 4 layers, 2 all-reduces per layer each way: 4 * 4 * 2 * 2 = 64
    L = Layout(dp=4, tp=2, global_batch=16)
    (op,) = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8)
    assert op.op is Collective.ALL_REDUCE and op.size_bytes == 1_048_576 and op.count_per_step == 64
    assert op.group_size == 2 and op.ranks_per_node == 2 and op.critical


def test_tp_sequence_parallel_and_full_recompute():
    # SP: all-gather + reduce-scatter of the same S; full recomputation: 3 passes -> 4 * 4 * 2 * 3 = 96 each
    L = Layout(dp=4, tp=2, global_batch=16, sequence_parallel=True, recompute="full")
    ag, rs = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8)
    assert (ag.op, rs.op) == (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    assert ag.size_bytes == rs.size_bytes == 1_048_576 and ag.count_per_step == rs.count_per_step == 96
