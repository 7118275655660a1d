"""``commcost collective``'s computation (commcost.analyses.collective): every size priced by one
CommModel, the candidates beside it, what cannot run, the band; by hand on the drill's link."""

from __future__ import annotations

import pytest

from commcost import InputError
from commcost.analyses.collective import nodes_used, price_sizes
from commcost.comm.band import collective_band
from commcost.comm.collectives import Algorithm, Collective
from commcost.comm.link import Link
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.systems import system_group

LINK = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)


def test_drill_link_sizes_by_hand():
    rows = price_sizes(FlatLinkModel(link=LINK), Collective.ALL_REDUCE, [2**20, 64 * 2**20], 32, fabric=LINK)
    # ring: latency 2(P-1)a = 62 * 20 us = 1.24 ms at every size
    # 1 MiB: bandwidth 2(31)/32 * 1,048,576 / 25e9 = 1.9375 * 41.94304 us = 81.264 us
    # 64 MiB: 1.9375 * 2.68435456 ms = 5.2009 ms; total 6.4409 ms
    assert [r.chosen.latency_s for r in rows] == pytest.approx([1.24e-3, 1.24e-3])
    assert [r.chosen.bandwidth_s for r in rows] == pytest.approx([81.264e-6, 5.2009e-3], rel=1e-4)
    assert rows[1].chosen.total_s == pytest.approx(6.4409e-3, rel=1e-4)
    assert all(r.requested == "auto" and r.band_s is None and r.chosen.algorithm is Algorithm.RING for r in rows)
    assert all(r.chosen.algorithm in r.alternatives for r in rows)


def test_a_what_if_by_name_joins_the_candidates_and_the_band_is_its_class():
    topo, P = system_group("dgx-h100", nodes=2)
    comm = FabricModel(topology=topo)
    (auto,) = price_sizes(comm, Collective.ALL_REDUCE, [64 * 2**20], P, fabric=topo, band_topology=topo)
    (hier,) = price_sizes(comm, Collective.ALL_REDUCE, [64 * 2**20], P, Algorithm.HIERARCHICAL, fabric=topo)
    assert Algorithm.HIERARCHICAL not in auto.alternatives  # NCCL does not run it for all-reduce
    assert hier.chosen.algorithm is Algorithm.HIERARCHICAL and Algorithm.HIERARCHICAL in hier.alternatives
    assert hier.requested == "hierarchical" and hier.band_s is None
    assert auto.band_s == collective_band(auto.chosen, topo)
    assert auto.chosen.total_s == min(c.total_s for c in auto.alternatives.values())  # auto: the fastest


def test_nodes_used():
    topo, _ = system_group("dgx-h100", nodes=4)
    # 8 GPUs per node: 12 ranks -> ceil(12/8) = 2 nodes; a flat link counts every rank as its own host
    assert (nodes_used(12, topo), nodes_used(32, topo), nodes_used(12, None)) == (2, 4, 12)
    with pytest.raises(InputError):
        nodes_used(33, topo)  # 5 nodes of a 4-node topology
