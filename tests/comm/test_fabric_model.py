"""comm/fabric_model.py: ``auto``'s choice is data on the priced collective (the report words it)."""

from __future__ import annotations

from commcost.comm.collectives import FLAT_CHOICE, NAMED_CHOICE, Algorithm, ChoiceKind
from commcost.comm.link import Link
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.systems import system_group


def test_auto_records_the_ranking_and_the_runner_up_terms():
    topo, P = system_group("dgx-h100", nodes=4)
    model = FabricModel(topology=topo)
    c = model.cost("all_reduce", 2.0**28, P)
    ranked = sorted(model.candidates("all_reduce", 2.0**28, P).values(), key=lambda x: x.total_s)
    assert len(ranked) >= 2  # ring and tree at least: a choice to record
    ch = c.choice
    assert ch.kind is ChoiceKind.FASTEST and ch.backend == "nccl"
    assert ch.ranked == tuple(x.algorithm for x in ranked) and ch.ranked[0] is c.algorithm
    assert (ch.runner_up_latency_s, ch.runner_up_bandwidth_s) == (ranked[1].latency_s, ranked[1].bandwidth_s)


def test_flat_and_named_choices_are_the_shared_constants():
    flat = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))
    assert flat.cost("all_reduce", 1e6, 8).choice is FLAT_CHOICE
    topo, P = system_group("dgx-h100", nodes=2)
    assert FabricModel(topology=topo).cost("all_reduce", 1e6, P, Algorithm.RING).choice is NAMED_CHOICE
