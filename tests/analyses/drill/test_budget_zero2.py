"""ZeRO-2 with gradient accumulation: sharded gradients are reduce-scattered after every micro-batch."""

from __future__ import annotations

import pytest

from commcost.analyses.drill.budget import BudgetInputs, communication_budget
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel


def _budget(k: int):
    comm = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))
    return communication_budget(BudgetInputs(gpus=32, comm=comm, params=1.3e9, step_s=0.4, grad_accum=k,
                                             intra_node_comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=300e9, latency_s=20e-6))))


def test_zero2_pays_one_reduce_scatter_per_micro_batch():
    # the drill's link: T_rs = T_ag = (P-1)a + (P-1)/P * S/B = 31 x 20 us + 31/32 x 2.6e9 / 25e9
    #   = 0.62 ms + 100.75 ms = 101.37 ms
    z = _budget(4).fixes.zero2
    assert z.reduce_scatter.total_s == pytest.approx(0.10137, rel=1e-12)
    # k = 4 sharded: 4 x 101.37 + 101.37 = 506.85 ms over 4 x 400 ms = 1.6 s -> 31.678%
    assert z.reduce_scatters_per_step == 4
    assert z.comm_s == pytest.approx(0.50685, rel=1e-12)
    assert z.comm_to_compute == pytest.approx(0.50685 / 1.6, rel=1e-12)
    # full gradients kept to the last micro-batch: 202.74 ms
    assert z.full_gradient_comm_s == pytest.approx(0.20274, rel=1e-12)
    # bytes: (k+1)(P-1)/P S = 5 x 31/32 x 2.6e9 = 12.59375 GB against the all-reduce's 2 x 31/32 x 2.6e9 = 5.0375 GB
    assert z.bytes_sent_per_rank == pytest.approx(12.59375e9, rel=1e-12)
    assert z.allreduce_bytes_sent_per_rank == pytest.approx(5.0375e9, rel=1e-12)


def test_without_accumulation_zero2_sends_what_the_all_reduce_sends():
    z = _budget(1).fixes.zero2
    assert z.reduce_scatters_per_step == 1 and z.comm_s == z.full_gradient_comm_s
    assert z.bytes_sent_per_rank == z.allreduce_bytes_sent_per_rank
