"""Topology validation and the placement of a group on nodes."""

from __future__ import annotations

import pytest

from commcost import InputError, Link, Topology, place
from commcost.comm.topology import as_topology

NV = Link(bandwidth_bytes_per_s=370e9, latency_s=1.9e-6)
IB = Link(bandwidth_bytes_per_s=47e9, latency_s=4e-6)


def topo(**kw):
    base = dict(gpus_per_node=8, nodes=4, intra=NV, inter=IB)
    return Topology(**(base | kw))


@pytest.mark.parametrize("P, nodes, g, g_min", [
    (1, 1, 1, 1),     # one GPU
    (8, 1, 8, 8),     # exactly one node: intra-node link only
    (9, 2, 8, 1),     # ceil(9/8) = 2 nodes, the last holds 9 - 8 = 1
    (32, 4, 8, 8),    # 4 full nodes
    (20, 3, 8, 4),    # 8 + 8 + 4
])
def test_packed_placement(P, nodes, g, g_min):
    pl = place(P, topo())
    assert (pl.nodes, pl.gpus_per_node, pl.min_gpus_per_node) == (nodes, g, g_min)
    assert pl.even == (g == g_min)


def test_group_larger_than_topology_is_an_error_with_the_arithmetic():
    with pytest.raises(InputError, match=r"ceil\(33/8\) = 5 nodes, but the topology has 4"):
        place(33, topo())


@pytest.mark.parametrize("kw, msg", [
    (dict(gpus_per_node=0), "gpus_per_node must be an integer >= 1, got 0"),
    (dict(nodes=2.5), "nodes must be an integer"),
    (dict(oversubscription=0.5), "oversubscription must be >= 1"),
    (dict(base_latency_s=-1.0), "base_latency_s must be >= 0"),
    (dict(intra="nvlink"), "must be Link objects"),
])
def test_bad_topologies(kw, msg):
    with pytest.raises(InputError, match=msg):
        topo(**kw)


def test_flat_link_is_one_gpu_per_node():
    t = as_topology(IB, 16)
    assert (t.gpus_per_node, t.nodes, t.inter, t.oversubscription) == (1, 16, IB, 1.0)
    pl = place(16, t)
    assert (pl.nodes, pl.gpus_per_node) == (16, 1)
    assert as_topology(topo(), 16) == topo()
    with pytest.raises(InputError, match="Link or a Topology"):
        as_topology("dgx", 8)


def test_total_gpus():
    assert topo().total_gpus == 32


def test_nodes_spanned_is_the_ceiling_of_ranks_per_node():
    from commcost.comm.topology import nodes_spanned

    # ceil(8/8) = 1; ceil(9/8) = 2; ceil(16/8) = 2; ceil(12/6) = 2; ceil(13/6) = 3; ceil(1/72) = 1
    assert [nodes_spanned(p, g) for p, g in ((8, 8), (9, 8), (16, 8), (12, 6), (13, 6), (1, 72))] == [1, 2, 2, 2, 3, 1]
    with pytest.raises(InputError):
        nodes_spanned(8, 0)
