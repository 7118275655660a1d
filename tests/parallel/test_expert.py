"""``parallel/expert.py``: the bytes and counts of expert parallelism's all-to-alls, by hand."""

from __future__ import annotations

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
