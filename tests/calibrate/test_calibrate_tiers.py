"""Cross-scale calibration (commcost.calibrate.tiers): recovering known tiers, scope, errors."""

from __future__ import annotations

import pytest

from commcost import InputError, collective_cost
from commcost.calibrate.tiers import TierSample, fit_tiers, scaled_topology
from commcost.comm.systems import system_group, system_topology

SIZES = [2 ** k for k in range(16, 31, 2)]  # 64 KiB .. 1 GiB


def _synthetic(system, s_i, s_e, m_e, nodes_list):
    out = []
    for nodes in nodes_list:
        topo, P = system_group(system, nodes=nodes)
        truth = scaled_topology(topo, s_i, s_e, m_e)
        out += [TierSample(nodes=nodes, gpus=P, message_bytes=S,
                           time_s=collective_cost("all_reduce", S, P, truth).total_s) for S in SIZES]
    return out


def test_scaled_topology_multiplies_the_tiers():
    t = scaled_topology(system_topology("dgx-h100", nodes=2), 0.5, 2.0, 3.0)
    # 370 x 0.5, NVLS 272 x 0.5, NDR 47 x 2, 4 us x 3
    assert t.intra.bandwidth_bytes_per_s == pytest.approx(185e9)
    assert t.in_network.bandwidth_bytes_per_s == pytest.approx(136e9)
    assert t.inter.bandwidth_bytes_per_s == pytest.approx(94e9)
    assert t.inter.latency_s == pytest.approx(12e-6)


def test_fit_on_one_and_two_nodes_recovers_the_tiers_and_predicts_eight():
    # aws-p4d: the NICs (8 x 5.65 GB/s) bound 2-node groups and the 102 us EFA step their small sizes,
    # so 2-node samples see both network multipliers; 1-node samples pin NVLink
    samples = _synthetic("aws-p4d", 0.9, 0.8, 1.5, (1, 2))
    fit = fit_tiers("aws-p4d", samples)
    assert fit.intra_bandwidth_scale == pytest.approx(0.9, rel=0.05)
    assert fit.inter_bandwidth_scale == pytest.approx(0.8, rel=0.05)
    assert fit.inter_latency_scale == pytest.approx(1.5, rel=0.05)
    assert fit.fitted_nodes == (1, 2) and fit.not_fitted == ()
    assert fit.median_abs_error < 0.02
    # 8 nodes through the topology: within 5% of the same truth at 8 nodes
    truth8 = _synthetic("aws-p4d", 0.9, 0.8, 1.5, (8,))
    for x in truth8:
        t = collective_cost("all_reduce", x.message_bytes, x.gpus, fit.topology(8)).total_s
        assert t == pytest.approx(x.time_s, rel=0.05)
    assert fit.extrapolated(8) == ("inter_bandwidth_scale", "inter_latency_scale")
    assert fit.extrapolated(2) == ()


def test_one_node_samples_leave_the_network_unfitted_and_say_so():
    fit = fit_tiers("dgx-h100", _synthetic("dgx-h100", 0.9, 1.0, 1.0, (1,)))
    assert fit.not_fitted == ("inter_bandwidth_scale", "inter_latency_scale")
    assert (fit.inter_bandwidth_scale, fit.inter_latency_scale) == (1.0, 1.0)
    assert fit.extrapolated(4) == ("intra_bandwidth_scale (one-node fit used across nodes)",)


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="at least one sample"):
        fit_tiers("dgx-h100", [])
    with pytest.raises(InputError, match="TierSample"):
        fit_tiers("dgx-h100", [1.0])
    with pytest.raises(InputError, match="time_s"):
        TierSample(nodes=1, gpus=8, message_bytes=1e6, time_s=0)


def test_a_tier_that_bounds_no_sample_is_not_fitted():
    # 2x DGX H100 at 1-16 GiB: the NVLS tree is bound by NVLS (S / 272e9); the NICs add only the overlap
    # loss, 0.20 x S / 376e9: d ln t / d ln s_e = 0.2/376 / (1/272 + 0.2/376) = 0.126 < 0.25, and latency
    # is negligible -> only s_i is identified; measured 5% slower than the preset, it is fitted
    samples = []
    for nodes in (1, 2):
        topo, P = system_group("dgx-h100", nodes=nodes)
        samples += [TierSample(nodes=nodes, gpus=P, message_bytes=S,
                               time_s=1.05 * collective_cost("all_reduce", S, P, topo).total_s)
                    for S in (2 ** 30, 2 ** 32, 2 ** 34)]
    fit = fit_tiers("dgx-h100", samples)
    assert fit.not_fitted == ("inter_bandwidth_scale", "inter_latency_scale")
    assert (fit.inter_bandwidth_scale, fit.inter_latency_scale) == (1.0, 1.0)
    assert fit.intra_bandwidth_scale == pytest.approx(1 / 1.05, rel=0.02)
    assert fit.extrapolated(8) == ()


def test_log_tier_samples_keep_rows_from_1_mib_and_carry_the_nodes():
    from commcost.calibrate.fit import Sample
    from commcost.calibrate.tiers import MIN_TIER_SIZE_BYTES, log_tier_samples

    rows = [Sample(size_bytes=2**19, time_s=1e-4), Sample(size_bytes=2**20, time_s=2e-4),
            Sample(size_bytes=2**24, time_s=3e-3)]
    nodes, out = log_tier_samples(rows, gpus=12, gpus_per_node=8)
    # 12 ranks, 8 per node: ceil(12/8) = 2 nodes; 512 KiB < 1 MiB is dropped, 1 MiB and 16 MiB kept
    assert MIN_TIER_SIZE_BYTES == 1_048_576
    assert nodes == 2
    assert [(s.nodes, s.gpus, s.message_bytes, s.time_s) for s in out] == [(2, 12, 2**20, 2e-4), (2, 12, 2**24, 3e-3)]
