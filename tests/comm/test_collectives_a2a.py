"""Issue 20: all-to-all as NCCL runs it, all-gather/reduce-scatter rings across nodes, the new presets.

Hand-computed values with the arithmetic beside them; the accuracy on real tables is in
tests/comm/test_accuracy_split.py (benchmarks/accuracy_nccl_tests.py prints it per row).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost import collective_cost, system_topology
from commcost.comm.protocol_terms import P2P_EFFICIENCY
from commcost.comm.algorithms import (FAN_IN_SLOWDOWN_PER_DOUBLING, fan_in_efficiency,
                                      fan_in_slowdown_from, protocol_costs)
from commcost.comm.collectives import Algorithm
from commcost.comm.topology import Link, Topology
from commcost.core.errors import InputError
from commcost.hardware.registry import fabrics, systems

S16G = 2 ** 34


def test_fan_in_efficiency_by_hand():
    assert fan_in_efficiency(1) == fan_in_efficiency(2) == 1.0  # two nodes: one partner port per port, no incast
    # n = 3: two partner ports converge, log2(2) = 1: 1 / (1 + 0.1257) = 1 / 1.1257 = 0.88834
    assert fan_in_efficiency(3) == pytest.approx(1 / 1.1257, rel=1e-12)
    # n = 5: log2(4) = 2: 1 / (1 + 2 * 0.1257) = 1 / 1.2514
    assert fan_in_efficiency(5) == pytest.approx(1 / 1.2514, rel=1e-12)
    # the inverse: a rate share of 0.8 on n = 5 nodes -> c = (1/0.8 - 1) / log2(4) = 0.25 / 2 = 0.125
    assert fan_in_slowdown_from(5, 0.8) == pytest.approx(0.125)
    assert fan_in_efficiency(5, 0.125) == pytest.approx(0.8)
    with pytest.raises(InputError, match="more than 2 nodes"):
        fan_in_slowdown_from(2, 0.9)


@given(st.integers(1, 4096), st.integers(1, 4096))
@settings(max_examples=200, deadline=None)
def test_fan_in_efficiency_is_a_share_that_falls_with_nodes(n1, n2):
    lo, hi = sorted((n1, n2))
    assert 0 < fan_in_efficiency(hi) <= fan_in_efficiency(lo) <= 1


def test_all_to_all_across_four_mi355x_nodes_by_hand():
    # mi355x-roce, 4 nodes x 8, 16 GiB: each rank sends (P - g)/P S = 24/32 S through its own NIC (47 GB/s) at the
    # fan-in share of n = 4 nodes (3 partner ports each): 1 + 0.1257 * log2(3) = 1 + 0.1257 * 1.5849625 = 1.1992298,
    # 0.75 * 2**34 / (47e9 / 1.1992298) = 12884901888 / 39.19184e9 = 0.328765 s;
    # its NVLink-class part, (g-1)/P S / (408e9 * 0.906) = 7/32 * 2**34 / 369.648e9 = 0.01017 s, is hidden (max).
    # Latency: Simple base 8.4 + xGMI step 3.4 + network step 14 + 24 peers posted at the AMD host's 2 us = 73.8 us
    assert P2P_EFFICIENCY == 0.906 and FAN_IN_SLOWDOWN_PER_DOUBLING == 0.1257
    c = collective_cost("all_to_all", S16G, 32, system_topology("mi355x-roce", nodes=4))
    assert c.bandwidth_s == pytest.approx(0.75 * S16G / (47e9 / (1 + 0.1257 * 1.584962500721156)), rel=1e-9)
    assert c.latency_s == pytest.approx(73.8e-6, rel=1e-9)


def test_all_to_all_across_two_and_three_nvl72_racks_by_hand():
    # oci-gb200-nvl72 (RoCE) with 64 ranks per rack (OCI's 16 trays of 4 a rack), 8 GiB. 2 racks: each rank sends
    # 64/128 S through its own 47 GB/s NIC, one partner port per port (no fan-in): 0.5 * 2**33 / 47e9 = 0.0913791 s.
    # 3 racks: 128/192 S at 1 / (1 + 0.1257 * log2(2)) of the NIC: (2/3) * 2**33 * 1.1257 / 47e9 = 0.137158 s
    # (the NVLink part, 63/128 S / (720e9 * 0.906), is 6.5 ms: hidden).
    racks64 = system_topology("oci-gb200-nvl72", nodes=3, gpus_per_node=64)
    assert racks64.incast_rate_cut
    two = collective_cost("all_to_all", 2 ** 33, 128, racks64)
    three = collective_cost("all_to_all", 2 ** 33, 192, racks64)
    assert two.bandwidth_s == pytest.approx(0.5 * 2 ** 33 / 47e9, rel=1e-9)
    assert three.bandwidth_s == pytest.approx(2 / 3 * 2 ** 33 * 1.1257 / 47e9, rel=1e-9)


def test_all_to_all_fan_in_only_on_a_fabric_that_cuts_rates_on_incast():
    # gb200-nvl72 (InfiniBand, credit-based flow control): the same 3 racks at the whole NIC, no fan-in:
    # (2/3) * 2**33 / 47e9 = 0.121843 s, 1.1257 times faster than on OCI's RoCE racks above
    ib = system_topology("gb200-nvl72", nodes=3, gpus_per_node=64)
    assert not ib.incast_rate_cut
    assert collective_cost("all_to_all", 2 ** 33, 192, ib).bandwidth_s == pytest.approx(2 / 3 * 2 ** 33 / 47e9,
                                                                                        rel=1e-9)
    # dgx-h100 (InfiniBand), 10 nodes x 8, 16 GiB: 72/80 S through the 47 GB/s NIC, no fan-in:
    # 0.9 * 2**34 / 47e9 = 15461882265.6 / 47e9 = 0.328976 s (fan-in on 10 nodes would take 1 / (1 + 0.1257 log2 9)
    # = 0.715 of it: 0.460 s)
    h100 = collective_cost("all_to_all", S16G, 80, system_topology("dgx-h100", nodes=10))
    assert h100.bandwidth_s == pytest.approx(0.9 * S16G / 47e9, rel=1e-9)
    # aws-p6-b300 (EFA, SRD) is not RoCE either; roce_400g and roce_200g are the fabrics that cut rates
    assert not system_topology("aws-p6-b300", nodes=4).incast_rate_cut
    assert {f: fabrics()[f]["congestion_control"] for f in ("roce_400g", "roce_200g", "ib_ndr", "efa_v4")} == {
        "roce_400g": "ecn_pfc", "roce_200g": "ecn_pfc", "ib_ndr": "credit", "efa_v4": "srd"}


def test_all_to_all_inside_one_mi355x_node_by_hand():
    # 7/8 * 2**34 / (408e9 * 0.906) = 15032385536 / 369.648e9 = 0.0406668 s; latency 8.4 + 3.4 = 11.8 us
    c = collective_cost("all_to_all", S16G, 8, system_topology("mi355x-roce"))
    assert c.bandwidth_s == pytest.approx(7 / 8 * S16G / (408e9 * 0.906), rel=1e-9)
    assert c.latency_s == pytest.approx(11.8e-6, rel=1e-9)


def test_all_to_all_is_not_capped_by_the_ring_graphs_32_channels():
    # 2 racks of gb300-nvl72, 64 ranks each: each GPU's own 800 Gb/s NIC (94 GB/s), not 32 channels' worth;
    # 2 racks: one partner port per port, no fan-in: bw = 0.5 S / 94e9
    topo = system_topology("gb300-nvl72", nodes=2, gpus_per_node=64)
    c = collective_cost("all_to_all", S16G, 128, topo)
    assert c.bandwidth_s == pytest.approx(0.5 * S16G / 94e9, rel=1e-9)


def test_all_to_all_drives_both_ports_where_a_gpu_has_two():
    # oci-gb300-nvl72: two 400 Gb/s ports per GPU (2 x 47 = 94 GB/s, as gb300-nvl72's one 800 Gb/s port); NCCL's
    # channels to each remote peer take the GPU's two NICs in turn (ncclTopoGetLocalNetType), so an all-to-all
    # across 2 racks drives both: 0.5 S / 94e9 = 0.5 * 17179869184 / 94e9 = 0.0913823 s
    topo = system_topology("oci-gb300-nvl72", nodes=2, gpus_per_node=64)
    assert topo.nics_per_gpu == 2 and topo.inter.bandwidth_bytes_per_s == pytest.approx(94e9)
    a2a = collective_cost("all_to_all", S16G, 128, topo)
    assert a2a.bandwidth_s == pytest.approx(0.5 * S16G / 94e9, rel=1e-9)
    # aws-p6-b300, 2 x 8, two EFA ports of 47 GB/s per GPU: 8/16 S / 94e9 = 0.5 * 2**33 / 94e9 = 0.0456911 s
    p6 = collective_cost("all_to_all", 2 ** 33, 16, system_topology("aws-p6-b300", nodes=2))
    assert p6.bandwidth_s == pytest.approx(0.5 * 2 ** 33 / 94e9, rel=1e-9)
    # send/recv keeps one port (its pipeline plans were fitted so): 2 GPUs on 2 nodes, 1 GiB, simple:
    # 2**30 / 47e9 = 0.0228456 s (one efa_v4 port)
    sr = protocol_costs("send_recv", 2 ** 30, 2, system_topology("aws-p6-b300", nodes=2, gpus_per_node=1),
                        "direct")["simple"]
    assert sr.bandwidth_s == pytest.approx(2 ** 30 / 47e9, rel=1e-9)
    # the ring's channels use both ports: 2 domains of 4 GPUs = 8 ports x 47 GB/s = 376 GB/s a node, as one
    # 94 GB/s port per GPU would give: 7/8 S / 376e9 (the NVLink part, 7/8 S (3/4) / 720e9, is smaller)
    four = system_topology("oci-gb300-nvl72", nodes=2, gpus_per_node=4)
    ag = protocol_costs("all_gather", S16G, 8, four, "ring")["simple"]
    assert ag.bandwidth_s == pytest.approx(7 / 8 * S16G / 376e9, rel=1e-9)


def test_all_gather_ring_across_nodes_steps_at_the_network_pace():
    # dgx-h100, 2 nodes, 16 ranks, LL: every one of the P-1 = 15 steps waits for the network hop (2.7 us, NCCL's
    # hwLat[NET][RING][LL], the preset's 4 us LL128 step x 2.7/4) after LL's 6.6 us launch: 6.6 + 15 * 2.7 = 47.1 us
    # (NCCL's own sum would be 14 intra steps at max(0.6, 1 us net overhead) + 1 network step: 6.6 + 14 + 2.7)
    ll = protocol_costs("all_gather", 8, 16, system_topology("dgx-h100", nodes=2), "ring")["ll"]
    assert ll.latency_s == pytest.approx(47.1e-6, rel=1e-9)
    # all-reduce keeps NCCL's sum: unchanged by issue 20
    ar = protocol_costs("all_reduce", 8, 16, system_topology("dgx-h100", nodes=2), "ring")["ll"]
    assert ar.latency_s == pytest.approx((6.6 + 2 * 14 * 1.0 + 2 * 2.7) * 1e-6, rel=1e-9)


def test_a_custom_topology_keeps_the_textbook_terms():
    # no protocol model: all-to-all sums its steps, (g-1) a_i + (P-g) a_e, at the links' full bandwidth
    topo = Topology(gpus_per_node=4, nodes=2, intra=Link(bandwidth_bytes_per_s=40e9, latency_s=1e-6),
                    inter=Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6))
    c = collective_cost("all_to_all", 1e9, 8, topo)
    assert c.latency_s == pytest.approx(3e-6 + 4 * 5e-6)
    assert c.bandwidth_s == pytest.approx(max(3 / 8 * 1e9 / 40e9, 4 / 8 * 1e9 / 10e9))


@pytest.mark.parametrize("name", ["mi355x-roce", "dgx-1-v100", "dgx-a100-40gb"])
def test_new_presets_carry_their_sources(name):
    preset = systems()[name]
    assert preset["source"] and preset["protocols_source"] and preset["base_latency_source"]
    assert collective_cost("all_reduce", 2 ** 30, 16, system_topology(name, nodes=2)).total_s > 0


def test_a100_40gb_preset_prices_collectives_as_dgx_a100():
    for op in ("all_reduce", "all_gather", "all_to_all"):
        a = collective_cost(op, 2 ** 28, 16, system_topology("dgx-a100-40gb", nodes=2))
        b = collective_cost(op, 2 ** 28, 16, system_topology("dgx-a100", nodes=2))
        assert a.total_s == b.total_s


def test_dgx1_v100_network_is_four_edr_nics_for_eight_gpus():
    # 4 x 100 Gb/s for 8 GPUs: 6.25 GB/s line per GPU, 5.9 achievable; a 2-node ring all-gather of 1 GiB is
    # NIC-bound: (P-1)/P S / (8 x 5.9e9) = 15/16 * 2**30 / 47.2e9 = 21.33 ms
    c = collective_cost("all_gather", 2 ** 30, 16, system_topology("dgx-1-v100", nodes=2))
    assert c.bandwidth_s == pytest.approx(15 / 16 * 2 ** 30 / 47.2e9, rel=1e-9)


def test_pat_with_one_gpu_per_node_by_hand():
    # dgx-h100 at 1 GPU per node, 16 nodes, all-gather of 1 MiB under NCCL's PAT (tuning.cc): launch 8 us (x 8.4/8.4),
    # log2(16) = 4 network hops at 14 us / 3.5 = 4 us, the linear 16 x 2.8 us: 8 + 16 + 44.8 = 68.8 us;
    # bandwidth S / (0.75 W), W = one NIC of 47 GB/s: 2**20 / 35.25e9 = 29.747 us
    from commcost.comm.collectives import Collective
    from commcost.comm.algorithms import algorithm_costs

    topo = system_topology("dgx-h100", nodes=16, gpus_per_node=1)
    pat = algorithm_costs(Collective.ALL_GATHER, 2 ** 20, 16, topo)[Algorithm.PAT]
    assert pat.latency_s == pytest.approx(68.8e-6, rel=1e-9)
    assert pat.bandwidth_s == pytest.approx(2 ** 20 / 35.25e9, rel=1e-9)
    assert collective_cost("all_gather", 2 ** 20, 16, topo).algorithm is Algorithm.PAT  # NCCL's pick at 1 MiB
    assert collective_cost("all_gather", 2 ** 30, 16, topo).algorithm is Algorithm.RING  # PAT's 0.75 loses at 1 GiB
    # with 8 GPUs per node NCCL does not run PAT
    with pytest.raises(InputError, match="one GPU per node"):
        collective_cost("all_gather", 2 ** 20, 16, system_topology("dgx-h100", nodes=2), "pat")


def test_all_gather_at_256_ranks_falls_behind_all_reduce_as_measured():
    # NVIDIA/nccl#1218: 32 nodes x 8 H100 (8 x 400 Gb/s RoCE each), 2 GiB: all_gather_perf reaches busbw ~200 GB/s
    # while all_reduce_perf reaches 340. Lockstep ring: 255 Simple steps x 14 us = 3.57 ms on top of the NICs'
    # 255/256 * 2 GiB / 376 GB/s = 5.69 ms, busbw 257 GB/s (22% fast); NCCL's own latency sum (224 NVLink steps
    # at 3.4 us + 31 network steps at 14 us = 1.2 ms) would give ~310 (36% fast).
    topo = system_topology("dgx-h100", nodes=32)
    ag = collective_cost("all_gather", 2 ** 31, 256, topo)
    ar = collective_cost("all_reduce", 2 ** 31, 256, topo)
    assert ag.busbw_bytes_per_s < ar.busbw_bytes_per_s
    assert abs(ag.busbw_bytes_per_s - 200e9) / 200e9 <= 0.30
    assert abs(ar.busbw_bytes_per_s - 340e9) / 340e9 <= 0.10


def test_rccl_presets_run_the_ring_not_pat():
    with pytest.raises(InputError, match="RCCL presets run the ring"):
        collective_cost("all_gather", 2 ** 20, 4, system_topology("mi355x-roce", nodes=4, gpus_per_node=1), "pat")


def test_point_to_point_protocol_is_nccls_size_rule_never_ll128():
    # NCCL src/enqueue.cc addP2pToPlan: LL while a peer's bytes are <= NCCL_P2P_LL_THRESHOLD = 16 KiB, else Simple;
    # LL128 is never used for point-to-point. All-to-all on 8 ranks: a peer gets S / 8, so the switch is at
    # S = 8 * 16384 = 131072 bytes (LL at 131072, Simple at 131080); a send/recv switches at S = 16384.
    topo = system_topology("mi355x-roce", nodes=2)
    one = system_topology("mi355x-roce", nodes=1)
    for fabric, P in ((one, 8), (topo, 16)):
        at = protocol_costs("all_to_all", 16384 * P, P, fabric, "direct")
        above = protocol_costs("all_to_all", 16384 * P + 8 * P, P, fabric, "direct")
        assert list(at)[0].value == "ll" and list(above)[0].value == "simple"
        assert all(p.value != "ll128" for p in (*at, *above))
        # collective_cost runs the protocol the rule picks, even where another one is priced faster
        assert collective_cost("all_to_all", 16384 * P + 8 * P, P, fabric).total_s == pytest.approx(
            above[list(above)[0]].total_s)
    assert list(protocol_costs("send_recv", 16384, 2, topo, "direct"))[0].value == "ll"
    assert list(protocol_costs("send_recv", 16392, 2, topo, "direct"))[0].value == "simple"


def test_dgx1_all_to_all_reaches_its_unlinked_peers_through_host_memory():
    # DGX-1 V100: 3 of a GPU's 7 peers have no NVLink; NCCL sends to them through host memory, each GPU at
    # PCI_BW 12 GB/s / 2 GPUs per PCIe switch = 6 GB/s. 8 ranks, S = 2**30, Simple (S/8 per peer > 16 KiB):
    #   NVLink part  4/8 * 2**30 / (120e9 * 0.906) = 4.939 ms;  host part  3/8 * 2**30 / 6e9 = 67.109 ms
    #   latency      t_0 + a_i = 8.4 + 1.9 * 3.4/1.9 = 11.8 us        -> 67.1207 ms, busbw 7/8 2**30 / t = 14.0 GB/s
    topo = system_topology("dgx-1-v100", nodes=1)
    assert (topo.unlinked_peers, topo.unlinked_bandwidth_bytes_per_s) == (3, 6e9)
    c = collective_cost("all_to_all", 2 ** 30, 8, topo)
    assert c.bandwidth_s == pytest.approx(3 / 8 * 2 ** 30 / 6e9)
    assert c.latency_s == pytest.approx(11.8e-6)
    # a part-node group is taken as placed on a linked quad: 4 ranks, the NVLink term only,
    # 3/4 * 2**30 / (120e9 * 0.906) = 7.4064 ms
    from commcost.comm.systems import system_group
    quad, P = system_group("dgx-1-v100", nodes=1, gpus=4, gpus_per_node=4)
    assert quad.unlinked_peers == 0
    assert collective_cost("all_to_all", 2 ** 30, P, quad).bandwidth_s == pytest.approx(
        3 / 4 * 2 ** 30 / (120e9 * P2P_EFFICIENCY))
    # rings never use the unlinked pairs: the all-gather is unchanged (7/8 2**30 / 120e9 = 7.8297 ms)
    assert collective_cost("all_gather", 2 ** 30, 8, topo).bandwidth_s == pytest.approx(7 / 8 * 2 ** 30 / 120e9)


def test_unlinked_peers_are_validated():
    import dataclasses

    topo = system_topology("dgx-1-v100", nodes=1)
    for bad in (-1, 8, 2.5, True):
        with pytest.raises(InputError, match="unlinked_peers"):
            dataclasses.replace(topo, unlinked_peers=bad)
    with pytest.raises(InputError, match="unlinked_bandwidth_bytes_per_s"):
        dataclasses.replace(topo, unlinked_bandwidth_bytes_per_s=0.0)
