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
