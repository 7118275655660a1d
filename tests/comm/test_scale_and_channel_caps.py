"""Issue 14's model changes: the congestion rule with node count, NCCL's per-channel LL128 caps,
the NVLS tree across nodes, Blackwell NVLS efficiency. Hand arithmetic in the comments."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from commcost import InputError, collective_cost, system_topology
from commcost.comm.algorithms import protocol_costs
from commcost.comm.protocols import Protocol, one_node_ring_graph
from commcost.comm.topology import Link, Topology, network_oversubscription

INTRA = Link(bandwidth_bytes_per_s=100e9, latency_s=1e-6)
INTER = Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6)
MiB = 2 ** 20


def _topo(**kw):
    return Topology(gpus_per_node=8, nodes=64, intra=INTRA, inter=INTER, **kw)


def test_congestion_rule_by_hand():
    t = _topo(oversubscription=2.0, full_bandwidth_nodes=8, slowdown_per_node_doubling=0.27)
    assert network_oversubscription(t, 4) == 2.0          # up to n_0 = 8 nodes: the preset's o
    assert network_oversubscription(t, 8) == 2.0
    # 32 nodes = 2 doublings past 8: 2 x (1 + 0.27 x 2) = 3.08
    assert network_oversubscription(t, 32) == pytest.approx(3.08)
    # no rule: o at every size
    assert network_oversubscription(_topo(oversubscription=1.5), 64) == 1.5


@settings(max_examples=100, deadline=None)
@given(o=st.floats(1, 4), n0=st.integers(1, 32), k=st.floats(0, 2), a=st.integers(1, 64), b=st.integers(1, 64))
def test_congestion_never_falls_with_more_nodes(o, n0, k, a, b):
    t = _topo(oversubscription=o, full_bandwidth_nodes=n0, slowdown_per_node_doubling=k)
    lo, hi = sorted((a, b))
    assert o <= network_oversubscription(t, lo) <= network_oversubscription(t, hi)


def test_bad_rule_is_refused():
    with pytest.raises(InputError, match="full_bandwidth_nodes"):
        _topo(full_bandwidth_nodes=0)
    with pytest.raises(InputError, match="slowdown_per_node_doubling"):
        _topo(slowdown_per_node_doubling=-0.1)


def test_azure_preset_slows_past_8_nodes():
    # ring Simple bandwidth term of 8 GiB on 64 nodes x 8 (P = 512): o(64) = 1 + 0.21 log2(64/8) = 1.63,
    # W = 8 x 47e9 / 1.63 = 230.7 GB/s, V = 2 (511/512) S; NVLink's share (7/8 S per 370e9) is smaller
    S = 8 * 2 ** 30
    t64 = system_topology("azure-nd-h100-v5", nodes=64)
    ring = protocol_costs("all_reduce", S, 512, t64, "ring")[Protocol.SIMPLE]
    assert ring.bandwidth_s == pytest.approx(2 * 511 / 512 * S / (8 * 47e9 / 1.63))
    # 8 nodes: no slowdown, W = 376 GB/s
    t8 = system_topology("azure-nd-h100-v5", nodes=8)
    ring8 = protocol_costs("all_reduce", S, 64, t8, "ring")[Protocol.SIMPLE]
    assert ring8.bandwidth_s == pytest.approx(2 * 63 / 64 * S / 376e9)
    # the same hardware without the rule (dgx-h100) keeps 376 GB/s at 64 nodes
    plain = protocol_costs("all_reduce", S, 512, system_topology("dgx-h100", nodes=64), "ring")[Protocol.SIMPLE]
    assert plain.bandwidth_s == pytest.approx(2 * 511 / 512 * S / 376e9)


def test_tree_ll128_is_capped_per_channel_across_nodes():
    # 2x DGX A100, 8 MiB: NCCL caps tree LL128 bus bandwidth at nChannels x perChMaxTreeLL128Bw(Ampere, N2)
    # = 8 NICs x 20 GB/s = 160 GB/s; the tree's bus bytes are 2S, so bw >= 2 x 8 MiB / 160e9 = 104.86 us.
    # Uncapped: chain 2S / (240e9 x 0.92 x 120/128) = 81.0 us, network S / (8 x 23.5e9 x 0.8625) = 51.7 us.
    # Then NCCL's tree correction at 8 MiB = 64 x 2**17: LL128 factor 0.9.
    S = 8 * MiB
    tree = protocol_costs("all_reduce", S, 16, system_topology("dgx-a100", nodes=2), "tree")[Protocol.LL128]
    assert tree.bandwidth_s == pytest.approx(2 * S / 160e9 / 0.9)
    # ring LL128 on 2x DGX H100: cap 8 x 36.7 GB/s = 293.6 GB/s of bus bandwidth, bus bytes 2 (15/16) S;
    # uncapped: max((7/8) / (370e9 x 0.92), 1 / (8 x 47e9 x 0.92)) x 2 (15/16) S -> 1 / 345.9e9 is larger
    ring = protocol_costs("all_reduce", S, 16, system_topology("dgx-h100", nodes=2), "ring")[Protocol.LL128]
    assert ring.bandwidth_s == pytest.approx(2 * 15 / 16 * S / 293.6e9)


def test_no_per_channel_cap_on_the_tree_inside_one_node():
    # one DGX A100, tree LL128 (7/9 in one node): 2S / (240e9 x 0.92 x 7/9), then / 0.9 (8 MiB); only the ring
    # is capped inside one node (test_ring_ll128_in_one_blackwell_node_is_capped_per_channel)
    S = 8 * MiB
    tree = protocol_costs("all_reduce", S, 8, system_topology("dgx-a100", nodes=1), "tree")[Protocol.LL128]
    assert tree.bandwidth_s == pytest.approx(2 * S / (240e9 * 0.92 * 7 / 9) / 0.9)


@pytest.mark.parametrize("nvlink_bytes_per_s,generation,channels,channel_bytes_per_s", [
    # Hopper, 370 GB/s: 60 -> floor(370/60) = 6 ch = 360; 50 -> 7 = 350; 40 -> 9 = 360; 30 -> 12 = 360 (none
    # strictly better); 24/60 = 0.4 <= 0.49 stops. 60 >= 50: doubled to 12 ch x 30 GB/s = 360 GB/s.
    (370e9, "hopper", 12, 30e9),
    # Blackwell, 720 GB/s: 90 -> 8 ch = 720 >= 720, done; doubled to 16 x 45.
    (720e9, "blackwell", 16, 45e9),
    # Ampere (compute capability 8.0, not above), 240 GB/s: 40 -> 6 = 240, done; doubled to 12 x 20.
    (240e9, "ampere", 12, 20e9),
    # Volta, 120 GB/s: 40 -> 3 = 120; doubled to 6 x 20.
    (120e9, "volta", 6, 20e9),
    # H800 (8 NVLinks), 164.8 GB/s: 60 -> 2 = 120; 50 -> 3 = 150; 40 -> 4 = 160; 30 -> 5 = 150; 24 -> 6 = 144;
    # 20 -> 8 = 160 (a tie keeps 40); 15/40 <= 0.49 stops. 4 channels (not more than 4): doubled to 8 x 20.
    (164.8e9, "hopper", 8, 20e9),
    # 210 GB/s on Hopper: 60 -> 3 = 180; 50 -> 4 = 200; 40 -> 5 = 200; 30 -> 7 = 210 >= 210, done.
    # 30 < 50 with 7 > 4 channels above compute capability 8.0: not doubled.
    (210e9, "hopper", 7, 30e9),
])
def test_one_node_ring_graph_is_nccls_search(nvlink_bytes_per_s, generation, channels, channel_bytes_per_s):
    c, b = one_node_ring_graph(nvlink_bytes_per_s, generation)
    assert c == channels
    assert b == pytest.approx(channel_bytes_per_s)


@settings(max_examples=200, deadline=None)
@given(nvlink_gb_per_s=st.floats(3.0, 2000.0), generation=st.sampled_from(["volta", "ampere", "hopper", "blackwell"]))
def test_one_node_ring_graph_never_exceeds_the_link(nvlink_gb_per_s, generation):
    # the searched channels each take b_c of every GPU's link to the switch: c b_c <= B, at most 32 channels
    # (below the slowest speed, 3 or 18 GB/s, one channel at the link's own rate)
    c, b = one_node_ring_graph(nvlink_gb_per_s * 1e9, generation)
    assert 1 <= c <= 32
    assert c * b <= nvlink_gb_per_s * 1e9 * (1 + 1e-9)


def test_ring_ll128_in_one_blackwell_node_is_capped_per_channel():
    # one HGX B200 node, 32 MiB on 8 GPUs: the searched ring has 16 channels, so NCCL caps ring LL128 at
    # 16 x perChMaxRingLL128Bw(Blackwell, N1) = 16 x 40 = 640 GB/s of bus bandwidth, below LL128's own
    # 0.92 x 720 = 662.4 GB/s. All-gather bus bytes (7/8) S, all-reduce 2 (7/8) S.
    S = 32 * MiB
    b200 = system_topology("hgx-b200", nodes=1)
    ag = protocol_costs("all_gather", S, 8, b200, "ring")[Protocol.LL128]
    assert ag.bandwidth_s == pytest.approx(7 / 8 * S / 640e9)
    ar = protocol_costs("all_reduce", S, 8, b200, "ring")[Protocol.LL128]
    assert ar.bandwidth_s == pytest.approx(2 * 7 / 8 * S / 640e9)
    # Simple is not capped per channel; it runs at the ring's measured one-node reach e_s = 350/370:
    # (7/8) S / (720e9 x 350/370) = (7/8) x 33554432 / 681.08e9 = 43.108 us
    assert protocol_costs("all_gather", S, 8, b200, "ring")[Protocol.SIMPLE].bandwidth_s == pytest.approx(
        7 / 8 * S / (720e9 * 350 / 370))
    assert protocol_costs("all_gather", S, 8, b200, "ring")[Protocol.SIMPLE].bandwidth_s == pytest.approx(
        43.108e-6, rel=1e-4)
    # Hopper: 12 channels x 36.7 = 440.4 GB/s stays above 0.92 x 370 = 340.4 GB/s: LL128's own bandwidth
    h100 = protocol_costs("all_gather", S, 8, system_topology("dgx-h100", nodes=1), "ring")[Protocol.LL128]
    assert h100.bandwidth_s == pytest.approx(7 / 8 * S / (0.92 * 370e9))


def test_nvls_tree_moves_2s_per_node_past_two_nodes():
    # dgx-h100, in_network Simple, 1 GiB on 4 nodes: network 2S / (8 x 47e9) = 5.71 ms > S / 272e9 = 3.95 ms,
    # plus 0.20 x the faster tier (TIER_OVERLAP_LOSS); latency 2 x 11.5 us (NVLS) + 2 ceil(log2 4) x 4 x 14/4 us
    # = 23 + 56 = 79 us; plus one loop of fill, L = 16 x 128 KiB x 8 = 16 MiB: L / 272e9 + 2 L / 376e9
    S, L = 2 ** 30, 16 * 131072 * 8
    c = collective_cost("all_reduce", S, 32, system_topology("dgx-h100", nodes=4), "in_network")
    assert c.latency_s == pytest.approx(79e-6)
    assert c.bandwidth_s == pytest.approx(2 * S / 376e9 + 0.20 * S / 272e9 + L / 272e9 + 2 * L / 376e9)
    # 2 nodes: S per node (NCCL doubles NVLS_TREE's network bandwidth for nNodes <= 2)
    c2 = collective_cost("all_reduce", S, 16, system_topology("dgx-h100", nodes=2), "in_network")
    assert c2.bandwidth_s == pytest.approx(S / 272e9 + 0.20 * S / 376e9 + L / 272e9 + L / 376e9)


def test_blackwell_nvls_uses_nccl_efficiency():
    # 272 GB/s (H100, measured) x 720/370 x 0.74/0.85 = 460.8 GB/s, rounded to 461 GB/s in fabrics.json
    t = system_topology("hgx-b200")
    assert t.in_network.bandwidth_bytes_per_s == 461e9
    assert math.isclose(272 * 720 / 370 * 0.74 / 0.85, 461, rel_tol=2e-3)


def test_blackwell_nvls_loop_uses_nccl_channel_counts():
    # NCCL src/transport/nvls.cc: 24 NVLS channels on Blackwell in one node, 32 across nodes, 128 KiB chunks.
    # hgx-b200, 1 node, 8 GiB in_network: bandwidth S / 461e9 + one loop L = 24 x 128 KiB x 8 = 24 MiB at 461e9
    S = 8 * 2 ** 30
    one = collective_cost("all_reduce", S, 8, system_topology("hgx-b200"), "in_network")
    assert one.bandwidth_s == pytest.approx(S / 461e9 + 24 * 131072 * 8 / 461e9)
    # 2 nodes: L = 32 x 128 KiB x 8 = 32 MiB, through NVLS and the network (S per node, W = 8 x 47e9);
    # the network is the slower tier, NVLS adds 0.20 of its time (TIER_OVERLAP_LOSS)
    two = collective_cost("all_reduce", S, 16, system_topology("hgx-b200", nodes=2), "in_network")
    L = 32 * 131072 * 8
    assert two.bandwidth_s == pytest.approx(S / 376e9 + 0.20 * S / 461e9 + L / 461e9 + L / 376e9)


@settings(max_examples=120, deadline=None)
@given(system=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200", "gb200-nvl72", "aws-p4d", "aws-p5en",
                               "aws-p6-b200", "gcp-a3-mega", "gcp-a3-high", "azure-nd-h100-v5", "mi300x-roce",
                               "pcie-l40s"]),
       nodes=st.integers(1, 64), S=st.floats(1, 2 ** 34), factor=st.floats(1.01, 100))
@example(system="pcie-l40s", nodes=1, S=34_077_126.0, factor=2.0)
@example(system="pcie-l40s", nodes=1, S=34_082_174.0, factor=2.0)
def test_every_preset_is_monotone_in_bytes_and_nodes(system, nodes, S, factor):
    # caps, congestion and NVLS channel counts only ever slow a larger message or a larger group
    from commcost.comm.systems import system_group

    topo, P = system_group(system, nodes=nodes)
    t = collective_cost("all_reduce", S, P, topo).total_s
    assert 0 < t <= collective_cost("all_reduce", S * factor, P, topo).total_s * (1 + 1e-12)
    if 2 <= nodes < 64:
        # past one node, more nodes are never faster. (One node -> two may be: the ring's intra-node share
        # (g-1)/g lets 2 nodes of 8 (2 x 15/16 x 7/8 = 1.641 S/B_i) beat one (2 x 7/8 = 1.75 S/B_i) where the
        # NICs keep up with the GPU links, as the MI325X tables measure: test below. On PCIe-only nodes the
        # NIC's bytes cross the same PCIe link, so there the share is 1: nic_on_intra_link.)
        topo2, P2 = system_group(system, nodes=2 * nodes)
        assert collective_cost("all_reduce", S, P2, topo2).total_s >= t * (1 - 1e-12)
    if system.startswith("pcie-") and nodes == 1:
        topo2, P2 = system_group(system, nodes=2)
        assert collective_cost("all_reduce", S, P2, topo2).total_s >= t * (1 - 1e-12)


def test_two_mi325x_nodes_beat_one_by_the_rings_intra_share_as_measured():
    # AMD AAC11 MI325X (held out), 4 GiB all-reduce: 23,719 us on 1 node, 23,192 us on 2 (2.2% faster).
    # The model: one node V/B_i with V = 2 x 7/8 S; two nodes the intra share (g-1)/g of V = 2 x 15/16 S,
    # 2 x 15/16 x 7/8 = 1.641 vs 1.75: at most 6.25% faster, and only while the NICs keep up
    from commcost.comm.systems import system_group

    one, P1 = system_group("mi325x-roce", nodes=1)
    two, P2 = system_group("mi325x-roce", nodes=2)
    t1 = collective_cost("all_reduce", 4 * 2 ** 30, P1, one).total_s
    t2 = collective_cost("all_reduce", 4 * 2 ** 30, P2, two).total_s
    assert t2 < t1 and t2 >= t1 * (1 - 0.0625)


def test_nvl72_racks_reach_at_most_32_nics_and_cross_the_spine_past_one_pod():
    # 20 GB200 NVL72 racks, 1440 GPUs, 16 GiB in_network (NVLS tree): NCCL spreads a rack's cross-rack
    # traffic over at most 32 channels = 32 NICs (ring graph MAXCHANNELS/2, NVLS arity 32), so
    # W = 32 x 47e9 / o(20). Three tiers: 20 racks span ceil(20/8) = 3 pods, so the spine's share
    # applies, o(20) = o_s (1 + k log2(20 / 8)) = 2.5 x (1 + 0.21 x 1.321928) = 3.194; the tree moves
    # 2S per rack, and NVLS adds 0.20 of its own time (TIER_OVERLAP_LOSS).
    # Fill: one loop of L = 32 channels x 128 KiB x 72 GPUs through NVLS (461e9) and the network (2L / W).
    S, L = 16 * 2 ** 30, 32 * 131072 * 72
    W = 32 * 47e9 / (2.5 * (1 + 0.21 * math.log2(20 / 8)))
    c = collective_cost("all_reduce", S, 1440, system_topology("gb200-nvl72", nodes=20), "in_network")
    assert c.bandwidth_s == pytest.approx(2 * S / W + 0.20 * S / 461e9 + L / 461e9 + 2 * L / W)


def test_ring_across_nodes_pays_the_hosts_net_overhead_per_intra_step():
    # aws-p5 (AMD EPYC host: NCCL getNetOverhead = 2 us, x3 for Simple = 6 us > NVLink Simple step 3.4 us),
    # 2 nodes x 8, ring Simple latency: 1.4 x (8.4 + 2 (16 - 2) x 6.0 + 2 (2 - 1) x 35 x 14/4) us
    #   = 1.4 x (8.4 + 168 + 245) = 589.96 us
    ring = protocol_costs("all_reduce", 2 ** 30, 16, system_topology("aws-p5", nodes=2), "ring")[Protocol.SIMPLE]
    assert ring.latency_s == pytest.approx(589.96e-6)
    # dgx-h100 (Intel host: 1 us, x3 = 3 us < 3.4 us): the NVLink step stands, 1.4 x (8.4 + 28 x 3.4 + 2 x 14)
    h = protocol_costs("all_reduce", 2 ** 30, 16, system_topology("dgx-h100", nodes=2), "ring")[Protocol.SIMPLE]
    assert h.latency_s == pytest.approx(1.4 * (8.4 + 28 * 3.4 + 2 * 14) * 1e-6)


def test_tree_across_nodes_does_not_hide_all_of_its_faster_tier():
    # 2x DGX A100, 4 GiB tree Simple: chain 2S / (240e9 x 0.92) (the slower tier) + 0.20 x network
    # S / (8 x 23.5e9 x 0.92), then / NCCL's tree correction (1.0 past 256 MiB)
    S = 4 * 2 ** 30
    tree = protocol_costs("all_reduce", S, 16, system_topology("dgx-a100", nodes=2), "tree")[Protocol.SIMPLE]
    assert tree.bandwidth_s == pytest.approx(2 * S / (240e9 * 0.92) + 0.20 * S / (8 * 23.5e9 * 0.92))
    # one node: no network tier, nothing to overlap: 2S / (240e9 x 0.92)
    one = protocol_costs("all_reduce", S, 8, system_topology("dgx-a100"), "tree")[Protocol.SIMPLE]
    assert one.bandwidth_s == pytest.approx(2 * S / (240e9 * 0.92))
