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


def test_op_level_selective_checkpointing_gathers_again():
    # torchtitan's op-level SAC saves reduce-scatter outputs, not all-gather outputs: the all-gathers run a third
    # pass. Selective, SP: 2 passes -> 4 * 4 * 2 * 2 = 64 reduce-scatters; all-gathers 64 x (2 + 1) / 2 = 96
    from commcost.core.xp import SCALAR
    from commcost.parallel.tensor import regather_passes

    assert regather_passes(SCALAR, selective="alternate_matmul", recompute_selective=True) == 1.0
    assert regather_passes(SCALAR, selective="alternate_matmul", recompute_selective=False) == 0.0
    assert regather_passes(SCALAR, selective="attention", recompute_selective=True) == 0.0
    L = Layout(dp=4, tp=2, global_batch=16, sequence_parallel=True, recompute="selective")
    ag, rs = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8,
                        regather_passes=1.0)
    assert (ag.count_per_step, rs.count_per_step) == (96, 64)


def test_tp_message_and_count_kernels_scalar_and_columns():
    import numpy as np

    from commcost.parallel.tensor import tp_count_per_step, tp_message_bytes

    # S = b (s/c) h q: b = 2, s/c = 4096/2 = 2048, h = 1024, q = 2 -> 2 * 2048 * 1024 * 2 = 8,388,608;
    # b = 1, c = 4: 1 * 1024 * 1024 * 2 = 2,097,152
    assert tp_message_bytes(micro_batch=2, seq=4096, cp=2, hidden=1024, activation_bytes=2) == 8_388_608
    cols = tp_message_bytes(micro_batch=np.array([2.0, 1.0]), seq=4096, cp=np.array([2.0, 4.0]), hidden=1024,
                            activation_bytes=2.0)
    assert cols.tolist() == [8_388_608, 2_097_152]
    # m n_b passes: m = 4, 10 layers of which 4 MoE without shared experts: n_b = 2*10 - 4 = 16; 3 passes -> 192;
    # with shared experts n_b = 20: 4 * 20 * 2 = 160
    assert tp_count_per_step(micro_batches=4, layers_per_stage=10, moe_layers_per_stage=4, shared_experts=0,
                             passes=3) == 192
    assert tp_count_per_step(micro_batches=4, layers_per_stage=10, moe_layers_per_stage=4, shared_experts=1,
                             passes=2) == 160
    cols = tp_count_per_step(micro_batches=np.array([4.0, 4.0]), layers_per_stage=np.array([10.0, 10.0]),
                             moe_layers_per_stage=np.array([4.0, 4.0]), shared_experts=0,
                             passes=np.array([3.0, 2.0]))
    assert cols.tolist() == [192, 128]              # 4 * 16 * 3, 4 * 16 * 2
