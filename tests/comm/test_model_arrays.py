"""``CommModel.cost_many`` (issue 21, "Collectives priced as arrays"): for each kind (flat link, fabric,
profile), the array of seconds equals ``cost(...).total_s`` of each size exactly, and bad input is
refused once, at the edge."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.calibrate.fit import AlphaBetaFit, Regime
from commcost.comm.collectives import Algorithm, Collective
from commcost.comm.fabric_model import FabricModel
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.comm.profile_model import ProfileModel, ProfileScope
from commcost.comm.topology import Topology
from commcost.core.errors import InputError
from commcost.comm.systems import system_group

PRESETS = ("dgx-h100", "dgx-a100", "gb200-nvl72", "hgx-b200", "mi300x-roce", "pcie-l40s", "dgx-2")
sizes = st.lists(st.one_of(st.just(0.0), st.floats(1.0, 4e10), st.integers(1, 1 << 34).map(float)),
                 min_size=1, max_size=12)
ops = st.sampled_from(tuple(Collective))


def _same(model, op, S, P, rpn=None):
    try:
        want = [model.cost(op, s, P, ranks_per_node=rpn).total_s for s in S]
    except InputError:
        with pytest.raises(InputError):
            model.cost_many(op, np.array(S), P, ranks_per_node=rpn)
        return
    got = model.cost_many(op, np.array(S), P, ranks_per_node=rpn)
    assert got.shape == (len(S),)
    assert got.tolist() == want          # exactly: the same formulas, the same float arithmetic


@settings(max_examples=150, deadline=None)
@given(op=ops, S=sizes, P=st.integers(1, 64), bw=st.floats(1e9, 1e12), lat=st.floats(1e-7, 1e-4))
def test_flat_link_arrays_equal_calls(op, S, P, bw, lat):
    _same(FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw, latency_s=lat)), op, S, P)


@settings(max_examples=200, deadline=None)
@given(op=ops, S=sizes, preset=st.sampled_from(PRESETS), nodes=st.integers(1, 40), data=st.data())
def test_fabric_arrays_equal_calls(op, S, preset, nodes, data):
    topo, _ = system_group(preset, nodes=nodes)
    G = topo.gpus_per_node
    P = data.draw(st.integers(1, nodes * G))
    rpn = data.draw(st.one_of(st.none(), st.integers(1, G)))
    if rpn is not None:
        P = min(P, rpn * nodes)
    _same(FabricModel(topology=topo, backend=data.draw(st.sampled_from(("nccl", "gloo")))), op, S, P, rpn)


@settings(max_examples=100, deadline=None)
@given(op=ops, S=sizes, G=st.integers(1, 72), nodes=st.integers(1, 8), data=st.data())
def test_custom_fabric_arrays_equal_calls(op, S, G, nodes, data):
    topo = Topology(gpus_per_node=G, nodes=nodes,
                    intra=Link(bandwidth_bytes_per_s=data.draw(st.floats(1e10, 1e12)), latency_s=2e-6),
                    inter=Link(bandwidth_bytes_per_s=data.draw(st.floats(1e9, 1e11)), latency_s=8e-6),
                    oversubscription=data.draw(st.sampled_from((1.0, 2.0))))
    _same(FabricModel(topology=topo), op, S, data.draw(st.integers(1, G * nodes)))


@settings(max_examples=100, deadline=None)
@given(S=sizes, P=st.integers(1, 16), op=st.sampled_from((Collective.ALL_REDUCE, Collective.REDUCE_SCATTER,
                                                          Collective.ALL_GATHER)))
def test_profile_arrays_equal_calls(S, P, op):
    _same(_profile(), op, S, P)


def _profile() -> ProfileModel:
    regimes = (Regime(min_size_bytes=0.0, max_size_bytes=1e6, alpha_s=5e-6, bandwidth_bytes_per_s=20e9),
               Regime(min_size_bytes=1e6, max_size_bytes=float("inf"), alpha_s=9e-6, bandwidth_bytes_per_s=180e9))
    fit = AlphaBetaFit(op=Collective.ALL_REDUCE, algorithm=Algorithm.RING, gpus=16, regimes=regimes)
    return ProfileModel(fit=fit, scope=ProfileScope(op=Collective.ALL_REDUCE, gpus=16), source="t.csv")


def test_bad_sizes_are_refused_once_at_the_edge():
    model = FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=1e-6))
    for bad in ([1.0, -1.0], [float("nan")], [float("inf")]):
        with pytest.raises(InputError, match="finite and >= 0"):
            model.cost_many("all_reduce", bad, 8)


def test_hand_computed_ring():
    # ring all-reduce on 4 ranks, a = 1 us, B = 1e9 B/s: T = 2(P-1) a + 2(P-1)/P S/B
    # S = 1e6: 6e-6 + 1.5 * 1e6 / 1e9 = 6e-6 + 1.5e-3 = 1.506e-3
    model = FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=1e-6))
    got = model.cost_many("all_reduce", [0.0, 1e6], 4)
    assert got[0] == pytest.approx(6e-6, rel=1e-12)
    assert got[1] == pytest.approx(1.506e-3, rel=1e-12)
