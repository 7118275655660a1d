"""The network floor (issue 20): on GPUDirect-TCPX/TCPXO-class networks no collective across nodes is faster
than the fabric's per-collective floor ``t_f``; the latency term becomes ``max(latency, t_f)``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.comm.algorithms import collective_cost, protocol_costs
from commcost.comm.topology import Link, Topology
from commcost.core.errors import InputError
from commcost.hardware.registry import fabrics
from commcost.comm.systems import system_group, system_topology


def _topo(floor_s: float) -> Topology:
    return Topology(gpus_per_node=2, nodes=2, intra=Link(bandwidth_bytes_per_s=100e9, latency_s=1e-6),
                    inter=Link(bandwidth_bytes_per_s=10e9, latency_s=2e-6), network_floor_s=floor_s)


def test_floor_by_hand_across_nodes():
    # ring all-gather, P = 4 on 2 nodes x 2 GPUs, no protocol model, t_0 = 0:
    # latency = (P - n) a_i + (n - 1) a_e = 2 x 1 us + 1 x 2 us = 4 us -> max(4 us, 100 us) = 100 us
    # bandwidth: V = (P-1)/P S = 0.75 x 1e6 = 7.5e5 B; W = g_min B_e = 2 x 10 GB/s = 20 GB/s;
    # max(V (g-1)/g / B_i, V / W) = max(7.5e5 x 0.5 / 100e9, 7.5e5 / 20e9) = 37.5 us
    c = collective_cost("all_gather", 1e6, 4, _topo(100e-6), "ring")
    assert c.latency_s == pytest.approx(100e-6)
    assert c.bandwidth_s == pytest.approx(37.5e-6)
    assert c.total_s == pytest.approx(137.5e-6)
    # without the floor the same terms: 4 us + 37.5 us
    assert collective_cost("all_gather", 1e6, 4, _topo(0.0), "ring").total_s == pytest.approx(41.5e-6)


def test_no_floor_inside_one_node():
    # P = 2 on one node: ring latency (P - 1) a_i = 1 us, bandwidth (1/2) 1e6 / 100e9 = 5 us; the floor is a
    # network property and does not apply
    c = collective_cost("all_gather", 1e6, 2, _topo(100e-6), "ring")
    assert c.total_s == pytest.approx(6e-6)


def test_floor_reaches_every_protocol_of_a_preset():
    # gcp-a3-mega (tcpxo, t_f = 123.4 us): an 8 B all-reduce on 2 x 8 H100 costs the floor plus a bandwidth
    # term of 8 B (under a nanosecond), whichever algorithm and protocol NCCL would pick
    topo, P = system_group("gcp-a3-mega", nodes=2, gpus=16)
    assert topo.network_floor_s == pytest.approx(123.4e-6)
    assert collective_cost("all_reduce", 8, P, topo).total_s == pytest.approx(123.4e-6, rel=1e-4)
    costs = protocol_costs("all_reduce", 8, P, topo, "auto")
    assert costs  # the preset has NCCL's protocols: at least one to check
    for cost in costs.values():
        assert cost.latency_s >= 123.4e-6
    # one node of the same preset: no floor (NVLink only); its 8 B all-reduce is tens of microseconds
    one, P1 = system_group("gcp-a3-mega", nodes=1, gpus=8)
    assert collective_cost("all_reduce", 8, P1, one).total_s < 50e-6


def test_floor_read_from_fabrics_json():
    assert system_topology("gcp-a3-high", nodes=2).network_floor_s == fabrics()["tcpx"]["collective_floor_s"]
    assert system_topology("dgx-h100", nodes=2).network_floor_s == 0.0  # RDMA fabrics have none
    for name, fab in fabrics().items():
        if isinstance(fab, dict) and "collective_floor_s" in fab:
            assert fab["tier"] == "inter" and fab.get("collective_floor_source"), name


def test_negative_floor_is_refused():
    with pytest.raises(InputError, match="network_floor_s"):
        _topo(-1e-6)


@settings(max_examples=60, deadline=None)
@given(floor_s=st.floats(0.0, 2e-3), size=st.floats(0.0, 2e9),
       op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]),
       nodes=st.integers(1, 4))
def test_floor_only_slows_and_bounds(floor_s, size, op, nodes):
    """Raising the floor never makes a collective faster; across nodes the latency term is at least the floor;
    inside one node the floor changes nothing."""
    P = 2 * nodes
    topo = Topology(gpus_per_node=2, nodes=4, intra=Link(bandwidth_bytes_per_s=100e9, latency_s=1e-6),
                    inter=Link(bandwidth_bytes_per_s=10e9, latency_s=2e-6), network_floor_s=floor_s)
    base = Topology(gpus_per_node=2, nodes=4, intra=topo.intra, inter=topo.inter)
    with_floor = collective_cost(op, size, P, topo)
    without = collective_cost(op, size, P, base)
    assert with_floor.total_s >= without.total_s - 1e-15
    if nodes > 1:
        assert with_floor.latency_s >= floor_s
    else:
        assert with_floor.total_s == without.total_s


def test_lockstep_ring_runs_the_protocol_nccls_tuner_ranks_first():
    """A ring all-gather across nodes is priced lockstep, but NCCL chooses its protocol by its own latency
    sum (issue 20): on gb300-nvl72, 2 nodes x 4 GPUs, 128 MiB, NCCL runs Simple though LL128 prices lower
    lockstep. P = 8, n = 2, a_i = 1.9 us (NVLink 5), a_e = 4 us (XDR), B_e = 94 GB/s per GPU, t_0 = 8.4 us:
      NCCL's sum:  LL128 14 + 6 x 1.9 + 1 x 4 = 29.4 us   + V / (4 x 94e9 x 0.92) = 339.5 us -> 368.9 us
                   Simple 8.4 + 6 x 3.4 + 1 x 14 = 42.8 us + V / (4 x 94e9)       = 312.3 us -> 355.1 us (first)
      lockstep:    LL128 14 + 7 x 4 = 42 us -> 381.5 us;  Simple 8.4 + 7 x 14 = 106.4 us -> 418.7 us
    with V = 7/8 x 2**27 = 117,440,512 B. commcost returns Simple, priced lockstep: 418.7 us."""
    topo, P = system_group("gb300-nvl72", nodes=2, gpus=8, gpus_per_node=4)
    S = 2 ** 27
    order = list(protocol_costs("all_gather", S, P, topo, "ring"))
    assert order[0].value == "simple"
    c = collective_cost("all_gather", S, P, topo, "ring")
    assert c.latency_s == pytest.approx(106.4e-6)
    assert c.bandwidth_s == pytest.approx(117440512 / 376e9)
    assert c.total_s > protocol_costs("all_gather", S, P, topo, "ring")[order[1]].total_s  # not the cheapest
    # an all-reduce keeps commcost's cheapest protocol: its latency is NCCL's own sum already
    costs = list(protocol_costs("all_reduce", S, P, topo, "ring").values())
    assert costs == sorted(costs, key=lambda x: x.total_s)


def test_collective_report_names_the_floor(capsys):
    from commcost.cli import main

    assert main(["collective", "--op", "all_reduce", "--size", "1MiB", "--system", "gcp-a3-mega", "--nodes", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "across nodes no collective under 123.4 us (network floor)" in out
    assert main(["collective", "--op", "all_reduce", "--size", "1MiB", "--system", "dgx-h100", "--nodes", "2"]) == 0
    assert "network floor" not in capsys.readouterr().out
