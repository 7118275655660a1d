"""Direct tests of ``parallel/ddp.py``: the gradient all-reduces of plain data parallelism, by hand."""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.parallel.ddp import ddp_ops
from commcost.parallel.layout import Layout


def test_one_dense_all_reduce_over_the_data_parallel_group():
    # dp 8 x tp 1 on 8-GPU nodes: one all-reduce of N = 1e9 bf16 gradients = 2e9 B over 8 ranks of one node
    (op,) = ddp_ops(layout=Layout(dp=8, tp=1, global_batch=64), dense_params_per_gpu=1e9, expert_params_per_gpu=0,
                    grad_bytes=2, gpus_per_node=8)
    assert (op.dimension, op.op, op.size_bytes, op.group_size, op.ranks_per_node) == (
        "dp", Collective.ALL_REDUCE, 2e9, 8, 8)
    assert op.count_per_step == 1 and not op.critical


def test_under_tensor_parallelism_the_group_is_strided():
    # dp 4 x tp 8: tp fills a node, so the 4 data-parallel ranks sit one per node; each holds 1/8 of N
    (op,) = ddp_ops(layout=Layout(dp=4, tp=8, global_batch=64), dense_params_per_gpu=1e9 / 8,
                    expert_params_per_gpu=0, grad_bytes=2, gpus_per_node=8)
    assert (op.size_bytes, op.group_size, op.ranks_per_node) == (2.5e8, 4, 1)


def test_no_data_parallelism_no_all_reduce():
    assert ddp_ops(layout=Layout(dp=1, tp=8, global_batch=8), dense_params_per_gpu=1e9, expert_params_per_gpu=0,
                   grad_bytes=2, gpus_per_node=8) == ()
