"""NCCL's protocol model (LL / LL128 / Simple, NVLS fill): hand-computed cases and invariants.

The test fabric N8: one node of G = 8 GPUs, intra B_i = 100 GB/s with the reference
step latency a_i = 1.9 us (NCCL's ring LL128 NVLink hwLat, so every protocol's step
latency is NCCL's own number), launch t_0 = 8.4 us (ring Simple baseLat), LL capped at
40 GB/s bus bandwidth in one node. Ring all-reduce on P = 8: 2(P-1) = 14 steps, bus
factor 2(P-1)/P = 1.75.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st

from commcost import InputError, Link, Topology, collective_cost, ring_all_reduce, system_topology
from commcost.comm.algorithms import NCCL_ALGORITHMS, algorithm_costs, protocol_costs
from commcost.comm.collectives import Algorithm, Collective
from commcost.hardware.registry import system_names
from commcost.comm.protocols import RING_SIMPLE_ONE_NODE_EFFICIENCY, Protocol, ProtocolModel, tree_correction
from commcost.comm.topology import as_topology

US = 1e-6
AR = Collective.ALL_REDUCE
PM = ProtocolModel(ll_max_bus_bandwidth_bytes_per_s=(40e9, 20e9, 10e9))
NV = Link(bandwidth_bytes_per_s=100e9, latency_s=1.9 * US)
IB = Link(bandwidth_bytes_per_s=10e9, latency_s=4.0 * US)
N8 = Topology(gpus_per_node=8, nodes=1, intra=NV, inter=IB, base_latency_s=8.4 * US, protocols=PM)


@pytest.mark.parametrize("S, protocol, latency_s, bandwidth_s", [
    # LL:     t_0 6.6 + 14 * 0.6 = 15.0 us; max(1.75 S / (0.5 * 100e9), 1.75 S / 40e9 cap) = 1.75e6 / 40e9 = 43.75 us
    (1e6, Protocol.LL, 15.0 * US, 43.75 * US),
    # LL128:  t_0 14 + 14 * 1.9 = 40.6 us; 1.75 S / (0.92 * 100e9) = 19.0217 us
    (1e6, Protocol.LL128, 40.6 * US, 1.75e6 / 92e9),
    # Simple: t_0 8.4 + 14 * 3.4 = 56.0 us; 1.75 S / 100e9 = 17.5 us
    (1e6, Protocol.SIMPLE, 56.0 * US, 17.5 * US),
])
def test_ring_protocols_by_hand(S, protocol, latency_s, bandwidth_s):
    c = protocol_costs(AR, S, 8, N8, "ring")[protocol]
    assert c.latency_s == pytest.approx(latency_s, rel=1e-9)
    assert c.bandwidth_s == pytest.approx(bandwidth_s, rel=1e-9)


@pytest.mark.parametrize("S, winner, total_s", [
    (1e6, Protocol.LL, 58.75 * US),                  # LL 58.75 < LL128 59.62 < Simple 73.5
    (1e7, Protocol.LL128, 40.6 * US + 1.75e7 / 92e9),  # LL128 230.82 < Simple 56 + 175 = 231.0 < LL 452.5
    (1e8, Protocol.SIMPLE, 56 * US + 1750 * US),     # Simple 1806 < LL128 40.6 + 1902.2 = 1942.8
])
def test_ring_takes_the_fastest_protocol_per_size(S, winner, total_s):
    costs = protocol_costs(AR, S, 8, N8, "ring")
    assert next(iter(costs)) is winner
    assert collective_cost(AR, S, 8, N8, "ring").total_s == pytest.approx(total_s, rel=1e-9)
    assert list(costs.values()) == sorted(costs.values(), key=lambda c: c.total_s)


def test_tree_correction_is_nccls_table_interpolated_in_log_size():
    MiB = 2**20
    # 1 MiB = 64 * 2**14: Simple .5, LL128 .6, LL .5; 128 MiB = 64 * 2**21: Simple .9
    assert tree_correction(Protocol.SIMPLE, MiB) == pytest.approx(0.5)
    assert tree_correction(Protocol.LL128, MiB) == pytest.approx(0.6)
    assert tree_correction(Protocol.LL, MiB) == pytest.approx(0.5)
    assert tree_correction(Protocol.SIMPLE, 128 * MiB) == pytest.approx(0.9)
    # halfway (in log2) between 1 MiB (.5) and 2 MiB (.6): .55
    assert tree_correction(Protocol.SIMPLE, MiB * 2**0.5) == pytest.approx(0.55)
    assert tree_correction(Protocol.SIMPLE, 1) == pytest.approx(0.9)
    assert tree_correction(Protocol.SIMPLE, 2**40) == 1.0


def test_dgx_h100_one_node_8_mib_ring_ll128_beats_nvls_with_its_fill():
    # NVLS: latency 0 + 2 * 11.5 = 23 us; S/272e9 = 30.840 us; fill min(S, L = 16 * 128 KiB * 8 = 16 MiB)/272e9
    #       = 30.840 us: total 84.68 us
    # ring LL128: 14 + 14 * 1.9 = 40.6 us; 1.75 S / (0.92 * 370e9) = 43.128 us: total 83.73 us (measured 83.0)
    S, topo = 8 * 2**20, system_topology("dgx-h100")
    nvls = collective_cost(AR, S, 8, topo, "in_network")
    assert nvls.latency_s == pytest.approx(23 * US)
    assert nvls.bandwidth_s == pytest.approx(2 * S / 272e9)
    best = collective_cost(AR, S, 8, topo)
    assert best.algorithm is Algorithm.RING
    assert best.total_s == pytest.approx(40.6 * US + 1.75 * S / (0.92 * 370e9))
    assert next(iter(protocol_costs(AR, S, 8, topo, "auto"))) is Protocol.LL128
    # at 1 GiB the fill is one 16 MiB loop and NVLS wins: 23 us + (1 GiB + 16 MiB) / 272e9
    big = collective_cost(AR, 2**30, 8, topo)
    assert big.algorithm is Algorithm.IN_NETWORK
    assert big.total_s == pytest.approx(23 * US + (2**30 + 16 * 2**20) / 272e9)


def test_nvls_across_nodes_fills_the_network_stage_too():
    # dgx-h100, 2 nodes, P = 16: latency 0 + 2 * 11.5 + 2 * (2-1) * 4 * 14/4 = 51 us;
    # bandwidth max(S/272e9, 2(1/2) S / (8 * 47e9)) + 0.20 x the faster tier (issue 14's TIER_OVERLAP_LOSS)
    #           + L/272e9 + L/376e9, L = 16 MiB (S >= L)
    S, L, topo = 2**30, 16 * 2**20, system_topology("dgx-h100", nodes=2)
    c = collective_cost(AR, S, 16, topo, "in_network")
    assert c.latency_s == pytest.approx(51 * US)
    assert c.bandwidth_s == pytest.approx(S / 272e9 + 0.20 * S / 376e9 + L / 272e9 + L / 376e9)


def test_ring_simple_across_nodes_pays_ncclls_plateau_factor():
    # dgx-a100, 2 nodes, P = 16, ring Simple: t_0 8.4 + 28 intra steps * max(1.9 * 3.4/1.9, 3 x 2 us of
    # NCCL's net overhead on its AMD EPYC host, issue 14) + 2 net steps * 4 * 14/4
    #   = 8.4 + 168 + 28 = 204.4 us, times 1.4 = 286.16 us
    c = protocol_costs(AR, 2**30, 16, system_topology("dgx-a100", nodes=2), "ring")[Protocol.SIMPLE]
    assert c.latency_s == pytest.approx(286.16 * US)


def test_auto_under_the_protocol_model_runs_only_what_nccl_has():
    topo = system_topology("dgx-h100", nodes=2)
    for S in (2**10, 2**20, 2**26, 2**32):
        assert collective_cost(AR, S, 16, topo).algorithm in NCCL_ALGORITHMS
    # halving-doubling is still there by name
    assert collective_cost(AR, 2**20, 16, topo, "halving_doubling").algorithm is Algorithm.HALVING_DOUBLING


def test_flat_links_and_custom_topologies_keep_one_alpha_beta_pair():
    # the drill's numbers: no protocol model on a flat Link, ring equals ring_all_reduce exactly
    assert as_topology(IB, 16).protocols is None
    flat = collective_cost(AR, 1e9, 16, IB, "ring")
    drill = ring_all_reduce(1e9, 16, IB)
    assert (flat.latency_s, flat.bandwidth_s) == (drill.latency_s, drill.bandwidth_s)
    assert list(protocol_costs(AR, 1e9, 16, IB, "ring")) == [Protocol.SIMPLE]
    # the same topology without its protocol model is the module table: t_0 + 14 a_i, 1.75 S / B_i
    plain = dataclasses.replace(N8, protocols=None)
    c = collective_cost(AR, 1e6, 8, plain, "ring")
    assert (c.latency_s, c.bandwidth_s) == pytest.approx((8.4 * US + 14 * 1.9 * US, 17.5 * US))


def test_seed_system_has_no_protocol_model_and_real_systems_do():
    assert system_topology("seed-scaling", nodes=2).protocols is None
    pm = system_topology("dgx-h100", nodes=2).protocols
    assert pm is not None
    # NCCL llMaxBws: Hopper one node 141 GB/s; Intel host, 2 nodes 39.0, more 20.4
    assert pm.ll_max_bus_bandwidth_bytes_per_s == (141e9, 39e9, 20.4e9)
    assert (pm.ll_max_bus_bandwidth(1), pm.ll_max_bus_bandwidth(2), pm.ll_max_bus_bandwidth(5)) == (141e9, 39e9, 20.4e9)


@pytest.mark.parametrize("kw, msg", [
    (dict(ll_max_bus_bandwidth_bytes_per_s=(1e9, 1e9)), "needs 3 values"),
    (dict(ll_max_bus_bandwidth_bytes_per_s=(1e9, -1.0, 1e9)), "ll_max_bus_bandwidth_bytes_per_s"),
    (dict(ll_max_bus_bandwidth_bytes_per_s=(1e9, 1e9, 1e9), nvls_channels=0), "nvls_channels must be an integer >= 1"),
])
def test_bad_protocol_models(kw, msg):
    with pytest.raises(InputError, match=msg):
        ProtocolModel(**kw)


def test_topology_rejects_a_protocol_model_of_the_wrong_type():
    with pytest.raises(InputError, match="protocols must be a ProtocolModel"):
        Topology(gpus_per_node=8, nodes=1, intra=NV, inter=IB, protocols="nccl")


PRESETS = [n for n in system_names() if system_topology(n).protocols is not None]


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(PRESETS), nodes=st.integers(1, 8), S=st.floats(1, 1e11),
       factor=st.floats(1.01, 100), op=st.sampled_from([c for c in Collective if c is not Collective.SEND_RECV]))
def test_presets_positive_monotone_and_auto_is_the_fastest_nccl_algorithm(name, nodes, S, factor, op):
    topo = system_topology(name, nodes=nodes)
    P = topo.total_gpus
    costs, bigger = algorithm_costs(op, S, P, topo), algorithm_costs(op, S * factor, P, topo)
    best = collective_cost(op, S, P, topo)
    for alg, c in costs.items():
        assert c.total_s > 0 and math.isfinite(c.total_s)
        assert bigger[alg].total_s >= c.total_s * (1 - 1e-12), (alg, S, factor)
        if alg in NCCL_ALGORITHMS:
            assert best.total_s <= c.total_s
        assert next(iter(protocol_costs(op, S, P, topo, alg).values())).total_s == pytest.approx(c.total_s)


@pytest.mark.torch
@pytest.mark.parametrize("S", [2**20, 16 * 2**20, 64 * 2**20, 2**30])
def test_one_a100_node_agrees_with_pytorchs_port_of_ncclls_tuner(S):
    """Two independent codings of NCCL's tuning model, same hardware numbers: inside one DGX A100
    node (no NVLS, so ring under LL at 1 MiB, LL128 at 16 MiB, Simple from 64 MiB) commcost and
    torch._inductor.comm_analysis agree within 5% (benchmarks/vs_inductor.py prints the grid), once
    commcost's measured ring Simple reach ``e_s`` (RING_SIMPLE_ONE_NODE_EFFICIENCY), which NCCL's tuner does
    not have, is taken out of the Simple rows' bandwidth term."""
    pytest.importorskip("torch")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from vs_inductor import inductor_estimator

    topo = system_topology("dgx-a100")
    ours = collective_cost(AR, S, 8, topo)
    protocol = next(iter(protocol_costs(AR, S, 8, topo, Algorithm.RING)))
    reach = RING_SIMPLE_ONE_NODE_EFFICIENCY if protocol is Protocol.SIMPLE else 1.0
    theirs = inductor_estimator("dgx-a100")(S, 8)
    assert ours.algorithm is Algorithm.RING
    assert theirs == pytest.approx(ours.latency_s + ours.bandwidth_s * reach, rel=0.05)


def test_ring_simple_plateau_factor_is_1_9_on_volta():
    # NCCL ncclTopoGetAlgoTime: lat *= minCompCap < 80 ? 1.9 : 1.4. dgx-1-v100, 2 nodes, P = 16, ring Simple:
    # t_0 8.4 + 28 intra steps * max(1.9 * 3.4/1.9, 3 x 1 us of NCCL's net overhead on its Intel host)
    #   + 2 net steps * 4 * 14/4 = 8.4 + 95.2 + 28 = 131.6 us, times 1.9 = 250.04 us
    c = protocol_costs(AR, 2**30, 16, system_topology("dgx-1-v100", nodes=2), "ring")[Protocol.SIMPLE]
    assert c.latency_s == pytest.approx(250.04 * US)


def test_ring_simple_in_one_nvswitch_node_runs_at_its_measured_reach():
    # dgx-h100, one node, P = 8, ring Simple (RING_SIMPLE_ONE_NODE_EFFICIENCY e_s = 350/370: B_i e_s = 350 GB/s):
    #   latency  RS, AG t_0 8.4 + (P-1) x 3.4 = 8.4 + 23.8 = 32.2 us; AR 8.4 + 2(P-1) x 3.4 = 56.0 us (NCCL's own)
    #   RS, AG   (7/8) x 2**30 / 350e9 = 939524096 / 350e9 = 2684.35 us
    #   AR       2 x 2684.35 = 5368.71 us
    h100 = system_topology("dgx-h100", nodes=1)
    S = 2**30
    for op, bus_bytes, latency_us in (("reduce_scatter", 939524096, 32.2), ("all_gather", 939524096, 32.2),
                                      ("all_reduce", 2 * 939524096, 56.0)):
        simple = protocol_costs(op, S, 8, h100, "ring")[Protocol.SIMPLE]
        assert simple.latency_s == pytest.approx(latency_us * US)
        assert simple.bandwidth_s == pytest.approx(bus_bytes / 350e9)
    assert protocol_costs("all_gather", S, 8, h100, "ring")[Protocol.SIMPLE].bandwidth_s == pytest.approx(
        2684.35 * US, rel=1e-5)
    # LL128 keeps NCCL's 0.92 (12 x 36.7 = 440 GB/s cap does not bind): (7/8) S / (0.92 x 370e9)
    assert protocol_costs("all_gather", S, 8, h100, "ring")[Protocol.LL128].bandwidth_s == pytest.approx(
        939524096 / (0.92 * 370e9))


def test_ring_simple_reach_is_one_node_nvidia_only():
    # across nodes the ring's network tier bounds it and NCCL's terms stand: dgx-h100 2 x 8, all-gather 1 GiB,
    # (15/16) S / (8 x 47 GB/s) = 1006632960 / 376e9 = 2677.22 us (NVLink (7/8)(15/16) S / 370e9 = 2494 us is below)
    two = system_topology("dgx-h100", nodes=2)
    simple = protocol_costs("all_gather", 2**30, 16, two, "ring")[Protocol.SIMPLE]
    assert simple.bandwidth_s == pytest.approx(1006632960 / 376e9)
    # RCCL presets (no NCCL GPU generation) keep their measured B_i: mi300x-roce one node, (7/8) S / B_i
    mi = system_topology("mi300x-roce", nodes=1)
    B_i = mi.intra.bandwidth_bytes_per_s
    assert protocol_costs("all_gather", 2**30, 8, mi, "ring")[Protocol.SIMPLE].bandwidth_s == pytest.approx(
        939524096 / B_i)


def test_one_node_ring_protocol_is_the_one_ncclls_tuner_ranks_first():
    # hgx-b200 one node, all-gather 32 MiB on 8 GPUs, bus bytes (7/8) x 33554432 = 29360128:
    #   NCCL's tuner: Simple 8.4 + 7 x 3.4 = 32.2 us + 29360128 / 720e9 = 40.778 us -> 72.978 us
    #                 LL128  14 + 7 x 1.9 = 27.3 us + 29360128 / 640e9 (16 ch x 40 GB/s cap) = 45.875 -> 73.175 us
    #   so NCCL runs Simple, which commcost prices at e_s: 32.2 + 29360128 / (720e9 x 350/370) = 32.2 + 43.108
    #   = 75.308 us, although its own LL128 price (73.175 us) is lower
    b200 = system_topology("hgx-b200", nodes=1)
    ranked = protocol_costs("all_gather", 32 * 2**20, 8, b200, "ring")
    assert list(ranked)[0] is Protocol.SIMPLE
    assert ranked[Protocol.SIMPLE].total_s == pytest.approx(75.308 * US, rel=1e-4)
    assert ranked[Protocol.LL128].total_s == pytest.approx(73.175 * US, rel=1e-4)
    assert collective_cost("all_gather", 32 * 2**20, 8, b200).total_s == pytest.approx(75.308 * US, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200"]), S=st.floats(2**16, 2**32),
       op=st.sampled_from([Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE]))
def test_one_node_ring_runs_ncclls_pick_and_prices_simple_at_its_reach(name, S, op):
    """Inside one NVSwitch node the ring runs the protocol NCCL's tuner ranks first, its view being commcost's
    terms without the Simple reach e_s; the chosen protocol's price never undercuts that view."""
    topo = system_topology(name, nodes=1)
    ranked = protocol_costs(op, S, 8, topo, "ring")

    def nccl_view(p):
        c = ranked[p]
        return c.latency_s + c.bandwidth_s * (RING_SIMPLE_ONE_NODE_EFFICIENCY if p is Protocol.SIMPLE else 1.0)

    first = next(iter(ranked))
    assert nccl_view(first) == min(nccl_view(p) for p in ranked)
    assert ranked[first].total_s >= nccl_view(first) * (1 - 1e-12)
