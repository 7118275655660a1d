"""Drill 3, parts (a)-(g), computed by hand in each test."""

import math

import pytest

from commcost.comm.model import FlatLinkModel
from commcost import BudgetInputs, InputError, Link, communication_budget
from commcost.analyses.drill.budget import scaling_gpu_counts
from commcost.core.units import MiB

LINK = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)


def drill(**kw):
    base = dict(gpus=32, comm=FlatLinkModel(link=LINK), params=1.3e9, step_s=0.4,
                intra_node_comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=300e9, latency_s=LINK.latency_s)),
                bucket_caps_bytes=tuple(c * MiB for c in (1, 8, 16, 25, 100)))
    base.update(kw)
    return communication_budget(BudgetInputs(**base))


def test_a_message_size():
    b = drill()
    # S = 1.3e9 params * 2 B = 2.6e9 B; 2.6e9 / 2**20 = 2479.553 MiB
    assert b.message_bytes == pytest.approx(2.6e9)
    assert b.message_bytes / MiB == pytest.approx(2479.553, abs=1e-3)


def test_b_allreduce_terms():
    T = drill().allreduce
    # 2*31*20us = 1.24 ms; 62/32 * 2.6e9/25e9 = 201.5 ms; total 202.74 ms; 201.5/1.24 = 162.5x
    assert (T.latency_s, T.bandwidth_s, T.total_s) == pytest.approx((1.24e-3, 0.2015, 0.20274))
    assert T.dominant == "bandwidth" and T.dominance_factor == pytest.approx(162.5)


def test_c_fractions_and_window():
    st = drill().step
    assert st.compute_s == pytest.approx(0.4)
    assert st.comm_fraction == pytest.approx(0.20274 / 0.4)          # 50.685%
    assert st.efficiency_exposed == pytest.approx(0.4 / 0.60274)     # 66.36%
    assert st.efficiency_overlapped_ceiling == pytest.approx(1.0)    # T < step
    assert st.backward_window_s == pytest.approx(0.4 * 2 / 3)        # 266.67 ms
    assert st.backward_margin_s == pytest.approx(0.4 * 2 / 3 - 0.20274)  # 63.93 ms
    # tail = all-reduce of one 25 MiB bucket: 1.24 ms + 1.9375 * 26214400/25e9 (2.0316 ms)
    tail = 1.24e-3 + 1.9375 * 26214400 / 25e9
    assert st.tail_s == pytest.approx(tail)
    # T - window < 0, so the drill's first-order estimate is the tail alone
    assert st.first_order_exposed_s == pytest.approx(tail)
    assert st.efficiency_best_case == pytest.approx(0.4 / (0.4 + tail))
    # DDP's default layout: 1 MiB, then 25 MiB buckets; 2.6e9 - 1048576 = 2,598,951,424 B = 99 x 26,214,400
    # + 3,725,824 B, so the last bucket is 3,725,824 B and the true lower bound is its all-reduce:
    # 1.24 ms + 1.9375 * 3725824 / 25e9 = 1.24 ms + 0.28875 ms = 1.52875 ms
    assert st.default_last_bucket_bytes == 3_725_824
    assert st.exposed_lower_bound_s == pytest.approx(1.24e-3 + 1.9375 * 3725824 / 25e9)
    assert st.ceiling_reachable  # T = 202.74 ms fits the 266.67 ms window


def test_d_label_and_verdict_disagree_for_the_drill():
    st = drill().step
    assert st.label == "COMMUNICATION-BOUND"   # 50.7% > 50%
    assert st.overlap_verdict == "HIDES"       # 202.74 ms <= 266.67 ms


def test_d_threshold_is_a_flag():
    assert drill(threshold=0.6).step.label == "COMPUTE-BOUND"   # 50.7% <= 60%


def test_d_does_not_hide_when_backward_is_short():
    # window 0.3 * 400 ms = 120 ms < 202.74 ms; exposed >= 202.74 - 120 = 82.74 ms
    st = drill(backward_fraction=0.3).step
    assert st.overlap_verdict == "DOES NOT HIDE"
    assert st.exposed_lower_bound_s == pytest.approx(0.08274)


def test_e_fixes():
    fx = drill().fixes
    assert fx.baseline_comm_to_compute == pytest.approx(0.20274 / 0.4)
    # 1. four micro-batches: 202.74 ms / 1600 ms = 12.67%
    assert fx.grad_accum.comm_to_compute == pytest.approx(0.20274 / 1.6)
    assert fx.grad_accum.global_batch_growth == 4
    # 2. ZeRO-2: RS = 31*20us + 31/32*0.104 s = 0.62 ms + 100.75 ms; AG the same; sum = 202.74 ms
    assert fx.zero2.reduce_scatter.total_s == pytest.approx(0.10137)
    assert fx.zero2.all_gather.total_s == pytest.approx(0.10137)
    assert fx.zero2.comm_to_compute == pytest.approx(0.20274 / 0.4)
    # bytes sent per rank 2*31/32 * 2.6e9 = 5.0375e9, same as the all-reduce
    assert fx.zero2.bytes_sent_per_rank == pytest.approx(5.0375e9)
    assert fx.zero2.allreduce_bytes_sent_per_rank == pytest.approx(5.0375e9)
    # 3. inside a node at 300 GB/s: 1.24 ms + 1.9375*2.6e9/300e9 (16.7917 ms) = 18.0317 ms
    assert fx.intra_node.allreduce.total_s == pytest.approx(0.0180316667)
    assert fx.intra_node.comm_to_compute == pytest.approx(0.0180316667 / 0.4)
    assert fx.intra_node.available is False and fx.intra_node.nodes_spanned == 4  # ceil(32/8)


def test_e_intra_node_is_available_when_the_group_fits():
    fx = drill(gpus=8).fixes
    assert fx.intra_node.available is True and fx.intra_node.nodes_spanned == 1


def test_f_buckets():
    bt = drill().buckets
    # S* = 32 * 20e-6 * 25e9 = 16e6 B
    assert bt.crossover_bytes == pytest.approx(16e6)
    rows = {round(r.cap_bytes / MiB): r for r in bt.rows}
    # count = ceil(2479.553 / cap_MiB); total = count*1.24 ms + 201.5 ms
    expected = {1: (2480, 3.2767), 8: (310, 0.5859), 16: (155, 0.3937), 25: (100, 0.3255), 100: (25, 0.2325)}
    for cap, (count, total) in expected.items():
        assert rows[cap].count == count
        assert rows[cap].total_s == pytest.approx(total)
    # latency share of a full 1 MiB bucket: 1/(1 + 1048576/16e6) = 0.938485
    assert rows[1].latency_share == pytest.approx(1 / (1 + 1048576 / 16e6))
    adv = bt.advice
    # share <= 20%: c >= S* * 0.8/0.2 = 64e6 B
    assert adv.min_bucket_bytes == pytest.approx(64e6)
    # tail budget 5% of 400 ms = 20 ms: c <= (20 ms - 1.24 ms) * 25e9 * 32/62 = 242,064,516 B
    assert adv.tail_budget_s == pytest.approx(0.02)
    assert adv.max_bucket_bytes == pytest.approx(0.01876 * 25e9 * 32 / 62)
    assert adv.consistent
    assert adv.pytorch_default.count == 100


def test_g_scaling_rows():
    b = drill()
    assert [r.gpus for r in b.scaling] == [8, 16, 32, 64, 128, 256]
    r256 = b.scaling[-1]
    # latency 2*255*20us = 10.2 ms; bandwidth 510/256 * 0.104 s = 207.1875 ms; S* = 256*20e-6*25e9 = 128 MB
    assert r256.allreduce.latency_s == pytest.approx(10.2e-3)
    assert r256.allreduce.bandwidth_s == pytest.approx(0.2071875)
    assert r256.crossover_bytes == pytest.approx(128e6)
    assert r256.global_batch_growth == 8
    # 2S/B = 2*2.6e9/25e9 = 208 ms
    assert b.bandwidth_limit_s == pytest.approx(0.208)


@pytest.mark.parametrize("gpus,expected", [
    (32, (8, 16, 32, 64, 128, 256)),
    (256, (8, 16, 32, 64, 128, 256, 512, 1024, 2048)),
    (1, (1, 8)),
    (12, (8, 12, 16, 32, 64, 128)),     # 8*12 = 96 -> up to 128
])
def test_scaling_gpu_counts(gpus, expected):
    assert scaling_gpu_counts(gpus) == expected


def test_grad_accum_divides_the_ratio():
    st = drill(grad_accum=4).step
    # compute 4 * 400 ms = 1.6 s; fraction 202.74/1600
    assert st.compute_s == pytest.approx(1.6)
    assert st.comm_fraction == pytest.approx(0.20274 / 1.6)
    # only the last micro-batch's backward can hide comm: window stays 266.67 ms
    assert st.backward_window_s == pytest.approx(0.4 * 2 / 3)


def test_fp32_doubles_the_message():
    assert drill(bytes_per_grad=4).message_bytes == pytest.approx(5.2e9)


def test_one_gpu_has_no_communication():
    b = drill(gpus=1)
    assert b.allreduce.total_s == 0
    assert b.step.overlap_verdict == "NO COMMUNICATION"
    assert b.step.efficiency_exposed == 1.0
    assert b.step.exposed_lower_bound_s == 0
    assert math.isinf(b.buckets.advice.max_bucket_bytes)


@pytest.mark.parametrize("kw", [
    dict(gpus=0), dict(gpus=-1), dict(params=0.0), dict(params=math.nan), dict(step_s=-1.0),
    dict(step_s=math.inf), dict(grad_accum=0), dict(backward_fraction=1.5), dict(threshold=0.0),
    dict(bucket_caps_bytes=()), dict(bucket_caps_bytes=(-5.0,)),
])
def test_inputs_validated(kw):
    with pytest.raises(InputError):
        drill(**kw)
