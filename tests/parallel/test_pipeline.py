"""``parallel/pipeline.py``: the bytes and counts of pipeline parallelism's sends, by hand."""

from __future__ import annotations

from commcost.parallel.layout import Layout
from commcost.parallel.pipeline import exposed_p2p_count, pipeline_ops


def test_pp_send_bytes_and_count():
    # S = b s h q / t = 2 * 2048 * 4096 * 2 / 4 = 8,388,608; m = 64/(2*2) = 16, v = 2: 2 m v = 64 sends
    L = Layout(dp=2, tp=4, pp=4, vp=2, micro_batch=2, global_batch=64)
    (op,) = pipeline_ops(layout=L, hidden=4096, seq=2048, activation_bytes=2, gpus_per_node=8)
    assert op.size_bytes == 8_388_608 and op.count_per_step == 64 and op.group_size == 2
    # stride of pp = tp * cp * dp = 8 >= G: the stage pair crosses nodes
    assert op.ranks_per_node == 1
    assert exposed_p2p_count(4, 16, 1) == 2 * (16 + 3) and exposed_p2p_count(4, 16, 2) == 2 * 3


def test_pp_message_kernel_scalar_and_columns():
    import numpy as np

    from commcost.parallel.pipeline import pp_message_bytes

    # S = b (s/c) h q / t: 2 * 2048 * 4096 * 2 / 4 = 8,388,608; with c = 2, t = 8: 2 * 1024 * 4096 * 2 / 8 = 2,097,152
    assert pp_message_bytes(micro_batch=2, seq=2048, cp=1, hidden=4096, activation_bytes=2, tp=4) == 8_388_608
    cols = pp_message_bytes(micro_batch=np.array([2.0, 2.0]), seq=2048, cp=np.array([1.0, 2.0]), hidden=4096,
                            activation_bytes=2.0, tp=np.array([4.0, 8.0]))
    assert cols.tolist() == [8_388_608, 2_097_152]
