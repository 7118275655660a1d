"""Hand-computed costs of every algorithm and collective, and their invariants.

The two-tier test fabric T2: G = 4 GPUs per node, 2 nodes, intra B_i = 100 GB/s and
a_i = 1 us, inter (per-GPU NIC) B_e = 10 GB/s and a_e = 5 us, NVLS B_v = 80 GB/s and
a_v = 2 us, no launch latency. A full group is P = 8, n = 2, g = g_min = 4, so a
node's NICs together give W = 4 * 10 = 40 GB/s. S = 1 GB (1e9 B).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from commcost import InputError, Link, Topology, collective_cost, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from commcost.comm.algorithms import APPLICABLE, algorithm_costs, unavailable_algorithms
from commcost.comm.collectives import Algorithm, Collective, bus_bandwidth_factor

US = 1e-6
S = 1e9
INTRA = Link(bandwidth_bytes_per_s=100e9, latency_s=1 * US)
INTER = Link(bandwidth_bytes_per_s=10e9, latency_s=5 * US)
NVLS = Link(bandwidth_bytes_per_s=80e9, latency_s=2 * US)
T2 = Topology(gpus_per_node=4, nodes=2, intra=INTRA, inter=INTER, in_network=NVLS)
AR, RS, AG = Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER


def cost(op, alg, P=8, fabric=T2, size=S):
    return collective_cost(op, size, P, fabric, alg)


@pytest.mark.parametrize("alg, latency_s, bandwidth_s", [
    # ring: 2[(P-n) a_i + (n-1) a_e] = 2[6*1 + 1*5] = 22 us;
    #       V = 2(7/8)S = 1.75 GB; max(V (3/4)/B_i, V/W) = max(0.013125, 0.04375)
    (Algorithm.RING, 22 * US, 0.04375),
    # tree: 2[(g-1) a_i + log2(2) a_e] = 2[3 + 5] = 16 us; max(2S/B_i, E(2)/W) = max(0.02, 1e9/40e9)
    (Algorithm.TREE, 16 * US, 0.025),
    # halving-doubling: 2[log2(4)*1 + log2(2)*5] = 14 us; 2[(3/4) S/B_i + (1/(2*4)) S/B_e] = 2[0.0075 + 0.0125]
    (Algorithm.HALVING_DOUBLING, 14 * US, 0.04),
    # hierarchical: 2*3*1 + 2*1*5 = 16 us; 2(3/4) S/B_i + 2(1/2)(S/4)/B_e = 0.015 + 0.025
    (Algorithm.HIERARCHICAL, 16 * US, 0.04),
    # in-network: 2 a_v + 2(n-1) a_e = 4 + 10 = 14 us; max(S/B_v, 2(1/2) S/W) = max(0.0125, 0.025)
    (Algorithm.IN_NETWORK, 14 * US, 0.025),
])
def test_all_reduce_two_tiers_by_hand(alg, latency_s, bandwidth_s):
    c = cost(AR, alg)
    assert c.algorithm == alg
    assert c.latency_s == pytest.approx(latency_s, rel=1e-12)
    assert c.bandwidth_s == pytest.approx(bandwidth_s, rel=1e-12)


def test_auto_picks_fastest_and_says_which():
    # totals: ring 0.043772, tree 0.025016, hd 0.040014, hier 0.040016, in_network 0.025014
    c = cost(AR, "auto")
    assert c.algorithm == Algorithm.IN_NETWORK
    assert c.total_s == pytest.approx(0.025014, rel=1e-12)


@pytest.mark.parametrize("op, alg, latency_s, bandwidth_s", [
    # ring RS/AG: (P-n) a_i + (n-1) a_e = 6 + 5 = 11 us; V = (7/8) S; max(V(3/4)/B_i, V/W) = 0.875e9/40e9
    (RS, Algorithm.RING, 11 * US, 0.021875),
    (AG, Algorithm.RING, 11 * US, 0.021875),
    # halving / doubling: log2(4)*1 + log2(2)*5 = 7 us; (3/4) S/B_i + (1/8) S/B_e = 0.0075 + 0.0125
    (RS, Algorithm.HALVING_DOUBLING, 7 * US, 0.02),
    (AG, Algorithm.HALVING_DOUBLING, 7 * US, 0.02),
    # broadcast / reduce, pipelined ring: 6*1 + 1*5 = 11 us; V = S: max(S(3/4)/B_i, S/W) = 0.025
    (Collective.BROADCAST, Algorithm.RING, 11 * US, 0.025),
    (Collective.REDUCE, Algorithm.RING, 11 * US, 0.025),
    # all-to-all, pairwise: (g-1) a_i + (P-g) a_e = 3 + 20 = 23 us;
    #   max((3/8) S/B_i, (8-4)/8 S/B_e) = max(0.00375, 0.05)
    (Collective.ALL_TO_ALL, Algorithm.DIRECT, 23 * US, 0.05),
])
def test_other_collectives_two_tiers_by_hand(op, alg, latency_s, bandwidth_s):
    c = cost(op, alg)
    assert c.latency_s == pytest.approx(latency_s, rel=1e-12)
    assert c.bandwidth_s == pytest.approx(bandwidth_s, rel=1e-12)


def test_send_recv_inside_a_node_and_across_nodes():
    # 2 ranks packed in one node: a_i + S/B_i = 1 us + 0.01 s
    c = cost(Collective.SEND_RECV, "auto", P=2)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((1 * US, 0.01))
    # one GPU per node: the NIC, a_e + S/B_e = 5 us + 0.1 s
    one_per_node = Topology(gpus_per_node=1, nodes=2, intra=INTRA, inter=INTER)
    c = cost(Collective.SEND_RECV, "auto", P=2, fabric=one_per_node)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((5 * US, 0.1))
    with pytest.raises(InputError, match="2 GPUs"):
        cost(Collective.SEND_RECV, "auto", P=4)


@pytest.mark.parametrize("alg, latency_s, bandwidth_s", [
    # P = 4 inside one node: ring 2(4-1)*1 = 6 us, 2(3/4) S/B_i = 0.015
    (Algorithm.RING, 6 * US, 0.015),
    # tree is a chain inside the node: 2(4-1)*1 = 6 us, 2S/B_i = 0.02
    (Algorithm.TREE, 6 * US, 0.02),
    # hierarchical with one node is the ring
    (Algorithm.HIERARCHICAL, 6 * US, 0.015),
    # NVLS: 2 a_v = 4 us, S/B_v = 0.0125
    (Algorithm.IN_NETWORK, 4 * US, 0.0125),
])
def test_one_node_uses_the_intra_link_only(alg, latency_s, bandwidth_s):
    c = cost(AR, alg, P=4)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((latency_s, bandwidth_s), rel=1e-12)


@pytest.mark.parametrize("alg, latency_s, bandwidth_s", [
    # flat link, P = 4, B = 10 GB/s, a = 5 us
    # tree: 2 ceil(log2 4) a = 20 us; a double binary tree over > 2 ranks sends 2S: 2e9/10e9
    (Algorithm.TREE, 20 * US, 0.2),
    # halving-doubling: 2 log2(4) a = 20 us; 2(3/4) S/B = 0.15
    (Algorithm.HALVING_DOUBLING, 20 * US, 0.15),
])
def test_flat_link_tree_and_halving_doubling(alg, latency_s, bandwidth_s):
    c = cost(AR, alg, P=4, fabric=INTER)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((latency_s, bandwidth_s), rel=1e-12)


def test_flat_link_all_to_all_and_two_rank_tree():
    # pairwise exchange on a flat link: (P-1) a = 15 us, (P-1)/P S/B = 0.075
    c = cost(Collective.ALL_TO_ALL, "direct", P=4, fabric=INTER)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((15 * US, 0.075))
    # two ranks: the tree sends S each way, like the ring: 2*1*a = 10 us, S/B = 0.1
    c = cost(AR, "tree", P=2, fabric=INTER)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((10 * US, 0.1))


def test_oversubscription_divides_the_nic_bandwidth():
    T = Topology(gpus_per_node=4, nodes=2, intra=INTRA, inter=INTER, oversubscription=2.0)
    # W = 4 * 10 / 2 = 20 GB/s: ring bandwidth 1.75e9 / 20e9
    assert cost(AR, "ring", fabric=T).bandwidth_s == pytest.approx(0.0875)


def test_partly_filled_last_node():
    # P = 6 on G = 4: n = 2, g = 4, g_min = 2, so W = 2 * 10 = 20 GB/s
    # ring: 2[(6-2)*1 + 1*5] = 18 us; V = 2(5/6) S; V/W = 1.6667e9/20e9
    c = cost(AR, "ring", P=6)
    assert c.latency_s == pytest.approx(18 * US)
    assert c.bandwidth_s == pytest.approx(2 * 5 / 6 * S / 20e9)
    missing = unavailable_algorithms(AR, 6, T2)
    assert set(missing) == {Algorithm.HALVING_DOUBLING, Algorithm.HIERARCHICAL}
    with pytest.raises(InputError, match="same number of GPUs"):
        cost(AR, "hierarchical", P=6)


def test_unavailable_algorithm_is_an_error_naming_why():
    no_nvls = Topology(gpus_per_node=4, nodes=2, intra=INTRA, inter=INTER)
    with pytest.raises(InputError, match="NVLS"):
        cost(AR, "in_network", fabric=no_nvls)
    with pytest.raises(InputError, match="not modelled for all_gather"):
        cost(AG, "tree")
    with pytest.raises(InputError, match="valid: auto, ring"):
        cost(AR, "butterfly")
    with pytest.raises(InputError, match="unknown collective"):
        collective_cost("allreduce_v", S, 8, T2)
    with pytest.raises(InputError, match="needs ceil"):
        cost(AR, "ring", P=9)


def test_one_gpu_costs_nothing():
    c = collective_cost(AR, S, 1, T2)
    assert c.total_s == 0 and c.algorithm == Algorithm.RING


# --- the flat model of the drill is the one-tier special case -------------------------------

@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 512), S=st.floats(0, 1e12), bw=st.floats(1e6, 1e13), a=st.floats(0, 1e-3))
def test_flat_link_ring_is_identical_to_the_ring_functions(P, S, bw, a):
    link = Link(bandwidth_bytes_per_s=bw, latency_s=a)
    for op, ring in ((AR, ring_all_reduce), (RS, ring_reduce_scatter), (AG, ring_all_gather)):
        old, new = ring(S, P, link), collective_cost(op, S, P, link, "ring")
        assert (new.latency_s, new.bandwidth_s) == (old.latency_s, old.bandwidth_s)


@settings(max_examples=100, deadline=None)
@given(G=st.integers(2, 16), S=st.floats(1, 1e11))
def test_hierarchical_equals_ring_on_one_node(G, S):
    T = Topology(gpus_per_node=G, nodes=1, intra=INTRA, inter=INTER)
    h, r = cost(AR, "hierarchical", P=G, fabric=T, size=S), cost(AR, "ring", P=G, fabric=T, size=S)
    assert h.latency_s == pytest.approx(r.latency_s) and h.bandwidth_s == pytest.approx(r.bandwidth_s)


topologies = st.builds(
    lambda G, nodes, bi, be, ai, ae, o, nv: Topology(
        gpus_per_node=G, nodes=nodes, intra=Link(bandwidth_bytes_per_s=bi, latency_s=ai),
        inter=Link(bandwidth_bytes_per_s=be, latency_s=ae), oversubscription=o,
        in_network=Link(bandwidth_bytes_per_s=nv, latency_s=ai) if nv else None),
    st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 3, 4, 8]), st.floats(1e9, 1e12), st.floats(1e8, 1e11),
    st.floats(0, 1e-4), st.floats(0, 1e-4), st.floats(1, 4), st.one_of(st.none(), st.floats(1e9, 1e12)))


@settings(max_examples=150, deadline=None)
@given(T=topologies, S=st.floats(1, 1e11), factor=st.floats(1.01, 100), op=st.sampled_from(list(Collective)))
def test_every_time_positive_monotone_and_auto_never_slower(T, S, factor, op):
    if op is Collective.SEND_RECV and T.total_gpus < 2:
        return  # send/recv needs two ranks; this topology holds one
    P = 2 if op is Collective.SEND_RECV else T.total_gpus
    if P < 2:
        return
    costs = algorithm_costs(op, S, P, T)
    bigger = algorithm_costs(op, S * factor, P, T)
    best = collective_cost(op, S, P, T, "auto")
    for alg, c in costs.items():
        assert c.total_s > 0
        assert bigger[alg].total_s >= c.total_s
        assert best.total_s <= c.total_s
    assert best.algorithm in costs


@settings(max_examples=100, deadline=None)
@given(T=topologies, S=st.floats(1, 1e11))
def test_ring_reduce_scatter_plus_all_gather_is_all_reduce(T, S):
    P = T.total_gpus
    if P < 2:
        return
    rs, ag, ar = (cost(op, "ring", P=P, fabric=T, size=S) for op in (RS, AG, AR))
    assert rs.latency_s + ag.latency_s == pytest.approx(ar.latency_s + T.base_latency_s)
    assert rs.bandwidth_s + ag.bandwidth_s == pytest.approx(ar.bandwidth_s)


@pytest.mark.parametrize("P", [2, 8, 64])
def test_ring_busbw_tends_to_link_bandwidth(P):
    # busbw = S/T * 2(P-1)/P and T -> 2(P-1)/P S/B, so busbw -> B for S >> P a B
    c = collective_cost(AR, 1e13, P, INTER, "ring")
    assert c.busbw_bytes_per_s == pytest.approx(10e9, rel=1e-6)
    assert c.busbw_bytes_per_s < 10e9


def test_bus_bandwidth_factors_of_nccl_tests():
    # nccl-tests PERFORMANCE.md, n = 8
    assert bus_bandwidth_factor(AR, 8) == 2 * 7 / 8
    for op in (RS, AG, Collective.ALL_TO_ALL):
        assert bus_bandwidth_factor(op, 8) == 7 / 8
    for op in (Collective.BROADCAST, Collective.REDUCE, Collective.SEND_RECV):
        assert bus_bandwidth_factor(op, 8) == 1.0


def test_every_collective_has_an_algorithm():
    assert set(APPLICABLE) == set(Collective)
    assert math.isinf(collective_cost(AR, S, 1, T2).algbw_bytes_per_s)


@pytest.mark.parametrize("op, alg, latency_s, bandwidth_s", [
    # P = 2, one GPU on each of 2 nodes (G = 1): only the NIC, B_e = 10 GB/s, a_e = 5 us
    # ring AR: 2(2-1) a_e = 10 us; 2(1/2) S/B_e = 0.1 s
    (AR, "ring", 10 * US, 0.1),
    # ring RS: (2-1) a_e = 5 us; (1/2) S/B_e = 0.05 s
    (RS, "ring", 5 * US, 0.05),
    # in-network needs 2 GPUs on a reducing switch: not here (see test below)
])
def test_two_ranks_on_two_nodes_by_hand(op, alg, latency_s, bandwidth_s):
    T = Topology(gpus_per_node=1, nodes=2, intra=INTRA, inter=INTER, in_network=NVLS)
    c = cost(op, alg, P=2, fabric=T)
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((latency_s, bandwidth_s), rel=1e-12)
    assert Algorithm.IN_NETWORK in unavailable_algorithms(AR, 2, T)


def test_two_ranks_in_one_node_by_hand():
    # P = 2 in one node of T2: ring 2*1*a_i = 2 us, 2(1/2) S/B_i = 0.01 s; NVLS 2 a_v = 4 us, S/B_v = 0.0125 s
    assert (cost(AR, "ring", P=2).latency_s, cost(AR, "ring", P=2).bandwidth_s) == pytest.approx((2 * US, 0.01))
    nv = cost(AR, "in_network", P=2)
    assert (nv.latency_s, nv.bandwidth_s) == pytest.approx((4 * US, 0.0125))
    assert cost(AR, "auto", P=2).algorithm == Algorithm.RING
