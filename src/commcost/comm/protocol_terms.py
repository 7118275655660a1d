"""The protocol terms of :mod:`commcost.comm.algorithms`: NCCL's LL, LL128 and Simple protocols applied to the
table terms (:mod:`commcost.comm.table_terms`) of each algorithm on a system preset with a protocol model, the
channel and tier-overlap caps, PAT's constants and the point-to-point protocol rule, and the ordering NCCL's tuner
ranks protocols by.

Symbols as in :mod:`commcost.comm.algorithms`, whose module docstring states the equations.
"""

from __future__ import annotations

import math


from commcost.comm.collectives import Algorithm, Collective, bus_bandwidth_factor
from commcost.comm.protocols import (NVLS_TERMS, REFERENCE_BASE_S, REFERENCE_INTER_STEP_S, REFERENCE_INTRA_STEP_S,
                                RING_SIMPLE_ONE_NODE_EFFICIENCY, RING_TERMS, TREE_LL128_ONE_NODE_EFFICIENCY,
                                TREE_TERMS, Protocol, ProtocolTerms, one_node_ring_graph, ring_simple_plateau_factor,
                                tree_correction)
from commcost.comm.topology import Link, Topology, network_oversubscription
from commcost.comm.table_terms import (_is_array, _max, _min, _place, _table_terms, derive, IdentityMemo, LOCKSTEP_RING_OPS, tree_network_bytes)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from commcost.core.xp import FloatOrArray


__all__ = ["TIER_OVERLAP_LOSS", "MAX_CROSS_NODE_CHANNELS", "PAT_BASE_S", "PAT_NET_STEP_S", "PAT_PER_RANK_S", "PAT_BANDWIDTH_SHARE", "P2P_EFFICIENCY", "P2P_LL_THRESHOLD_BYTES", "p2p_uses_ll"]

TIER_OVERLAP_LOSS = 0.20
"""``phi``: the share of the faster tier's time that a tree or NVLS tree across nodes fails to hide
behind the slower one, under the protocol model: ``bw = max(t_intra, t_net) + phi min(t_intra, t_net)``
(commcost's own term, not NCCL's: NCCL's tuner takes the min of the tiers' bandwidths). The 2-node
tables measure these algorithms 4-16% slower than the max of their tiers at >= 1 GiB. ``phi`` was
chosen on the TUNING tables only (benchmarks/derive_constants.py): the value of the grid 0, 0.05,
..., 0.5 with the lowest median |error| among those with at most 65% of predictions too fast
(0: 7.5% median, 77% too fast; 0.10: 5.5%, 71%; 0.15: 6.3%, 65.4%; 0.20: 6.6%, 63.7%), derived
jointly with the congestion rule's ``k`` (each re-derived with the other until neither moved)."""


MAX_CROSS_NODE_CHANNELS = 32
"""Most channels (each on one NIC) NCCL spreads a node's cross-node traffic over, under the protocol
model: the ring graph searches at most ``MAXCHANNELS / 2`` = 64 / 2 channels (src/init.cc,
src/include/device.h), the tree at most the ring's, NVLS at most ``NCCL_MAX_NVLS_ARITY`` = 32 heads
(src/graph/search.cc). Only a node of more than 32 GPUs (an NVL72 rack) is affected: its network
bandwidth is ``32 B_e``, not ``72 B_e``."""
"""The algorithms NCCL itself runs: ``auto`` picks among these under the protocol model."""


PAT_BASE_S = 8.0e-6
"""NCCL baseLat[PAT][SIMPLE] = 8 us (src/graph/tuning.cc ncclTunerConstantsDefaults), scaled like every launch
term by the preset's base latency over ring Simple's 8.4 us."""

PAT_NET_STEP_S = 14.0e-6
"""NCCL hwLat[NET][PAT][SIMPLE] = 14 us, scaled by the fabric's step over hwLat[NET][RING][LL128] (4 us)."""

PAT_PER_RANK_S = 2.8e-6
"""NCCL's PAT latency has 'still a linear part': ``nRanks * 2.8`` us (tuning.cc), on top of
``log2i(nNodes) * interLat / 3.5``."""

PAT_BANDWIDTH_SHARE = 0.75
"""tuning.cc: ``if (a == NCCL_ALGO_PAT) busBw *= .75``, and PAT's bus bandwidth is not turned into an
algorithm bandwidth by ``nRanks / nsteps`` as the ring's is: ``T = S / (0.75 W)``."""


P2P_EFFICIENCY = 0.906
"""``e_p``: the share of the intra-node tier's ring bandwidth NCCL's point-to-point transfers (all-to-all)
reach inside a node, under the protocol model. Derived on the tuning tables
(benchmarks/accuracy_nccl_tests.derive_issue20_constants): the median, over the one-node all-to-all
tables, of the measured bus bandwidth ``(P-1)/P S / t`` at 16 GiB over the preset's ``B_i``: OCI MI355X
8 GPUs 0.885, OCI GB300 4 GPUs 0.872, 8 GPUs 0.951, 64 GPUs 0.926; median 0.906. NCCL's maintainers
quote the same kind of gap on H100: 'NCCL can get an effective NVLink bandwidth of 370GB/s' for
non-all-reduce operations (NVIDIA/nccl-tests#212). Across nodes the NIC, not NVLink, bounds an
all-to-all, and its rate is the fan-in's (:func:`fan_in_efficiency`)."""


P2P_LL_THRESHOLD_BYTES = 16384
"""NCCL runs a point-to-point transfer (every peer of an all-to-all, a send/recv) with LL when its bytes per
channel are at most ``NCCL_P2P_LL_THRESHOLD`` = 16 KiB, otherwise with Simple, and never with LL128: src/enqueue.cc
``addP2pToPlan``, ``protoLL &= bytes <= nChannels * ncclParamP2pLLThreshold()``,
``protocol = protoLL ? NCCL_PROTO_LL : NCCL_PROTO_SIMPLE``. A peer's transfer gets one channel per
``minPartSize`` = ``p2pChunkSize / 8`` (one node) or ``/ 2`` (across nodes) of its bytes, at least 64 KiB with
NCCL's default chunk sizes, so the rule is: LL when the bytes to one peer (``S / P`` for an all-to-all, ``S`` for
a send/recv) are at most 16 KiB, Simple above. P2P bypasses the tuner: no ranking by modelled time."""


def p2p_uses_ll(peer_bytes: FloatOrArray) -> FloatOrArray:
    """True where NCCL sends ``peer_bytes`` to one peer with LL (:data:`P2P_LL_THRESHOLD_BYTES`); array-safe."""
    return peer_bytes <= P2P_LL_THRESHOLD_BYTES


def _tree_correction(protocol: Protocol, S: FloatOrArray) -> FloatOrArray:
    """:func:`commcost.comm.protocols.tree_correction`, element by element for an array ``S`` (the same
    float arithmetic per size)."""
    if not _is_array(S):
        return tree_correction(protocol, S)
    import numpy as np

    return np.array([tree_correction(protocol, float(x)) for x in S.ravel()]).reshape(S.shape)


def _protocol_view(topo: Topology, t: ProtocolTerms, efficiency: float, nic_share: float = 1.0) -> Topology:
    """:func:`_make_protocol_view`, memoised on the identities of the frozen ``topo`` and ``t``."""
    return _protocol_views(topo, id(t), t, efficiency, nic_share)


def _make_protocol_view(topo: Topology, t: ProtocolTerms, efficiency: float, nic_share: float = 1.0) -> Topology:
    """``topo`` as protocol ``t`` sees it: step latencies scaled by NCCL's ratios, bandwidths by ``efficiency``,
    the NICs' by ``nic_share`` too (the share of a node's NICs NCCL's channels reach)."""
    intra = derive(topo.intra, bandwidth_bytes_per_s=topo.intra.bandwidth_bytes_per_s * efficiency,
                   latency_s=topo.intra.latency_s * t.intra_step_latency_s / REFERENCE_INTRA_STEP_S)
    inter = derive(topo.inter, bandwidth_bytes_per_s=topo.inter.bandwidth_bytes_per_s * efficiency * nic_share,
                   latency_s=topo.inter.latency_s * t.inter_step_latency_s / REFERENCE_INTER_STEP_S)
    return derive(topo, intra=intra, inter=inter, protocols=None,
                  base_latency_s=topo.base_latency_s * t.base_latency_s / REFERENCE_BASE_S)


_protocol_terms_memo = IdentityMemo(lambda topo, op, alg, S, P: _make_protocol_terms(op, alg, S, P, topo))

_protocol_views = IdentityMemo(lambda topo, _, t, efficiency, nic_share: _make_protocol_view(topo, t, efficiency,
                                                                                             nic_share))


def _with_links(view: Topology, intra: Link | None = None, inter: Link | None = None,
                base_latency_s: float | None = None) -> Topology:
    """``view`` with its intra or inter link (or base latency) replaced, memoised: the views a protocol
    prices with depend on the group, never on the message size."""
    i = None if intra is None else (intra.bandwidth_bytes_per_s, intra.latency_s)
    e = None if inter is None else (inter.bandwidth_bytes_per_s, inter.latency_s)
    return _views_with_links(view, i, e, base_latency_s)


def _replace_links(view: Topology, intra: tuple[float, float] | None, inter: tuple[float, float] | None,
                   base_latency_s: float | None) -> Topology:
    return derive(view, intra=view.intra if intra is None else derive(view.intra, bandwidth_bytes_per_s=intra[0],
                                                                      latency_s=intra[1]),
                  inter=view.inter if inter is None else derive(view.inter, bandwidth_bytes_per_s=inter[0],
                                                                latency_s=inter[1]),
                  base_latency_s=view.base_latency_s if base_latency_s is None else base_latency_s)


_views_with_links = IdentityMemo(_replace_links)


def _protocol_terms(op: Collective, alg: Algorithm, S: float, P: int, topo: Topology,
                    ranking: dict[Protocol, float] | None = None) -> dict[Protocol, tuple[float, float]]:
    """:func:`_make_protocol_terms`; on one size memoised on the frozen topology and the call (``auto`` prices
    every protocol of the winner already; naming its protocol asks again). ``ranking``, when given, receives
    the tuner's view of each protocol (see :func:`_make_protocol_terms`)."""
    if _is_array(S):
        terms, ranked = _make_protocol_terms(op, alg, S, P, topo)
    else:
        terms, ranked = _protocol_terms_memo(topo, op, alg, S, P)
    if ranking is not None:
        ranking.update(ranked)
    return terms


def _make_protocol_terms(op: Collective, alg: Algorithm, S: float, P: int,
                         topo: Topology) -> tuple[dict[Protocol, tuple[float, float]], dict[Protocol, float]]:
    """``({protocol: (latency_s, bandwidth_s)}, ranking)`` of ``alg`` under NCCL's protocol model (module
    docstring). ``ranking`` is filled for a lockstep ring (all-gather, reduce-scatter across nodes) with each
    protocol's time as NCCL's tuner sees it: the same bandwidth term, its own latency sum (not lockstep);
    empty otherwise."""
    ranking: dict[Protocol, float] = {}
    pm = topo.protocols
    assert pm is not None
    pl = _place(P, topo)
    n, g, g_min = pl.nodes, pl.gpus_per_node, pl.min_gpus_per_node
    ports = topo.nics_per_gpu
    port_bw = topo.inter.bandwidth_bytes_per_s / ports
    nics = min(g_min * ports, MAX_CROSS_NODE_CHANNELS)  # one NIC port per channel, at most 32 channels across nodes
    if alg is Algorithm.DIRECT:  # point-to-point: every GPU sends through its own ports, outside the ring graph's
        # channels; an all-to-all's channels to each peer take all of them (Topology.nics_per_gpu). send/recv keeps
        # one port here: NCCL spreads its channels the same way, but the pipeline plans were fitted on one port
        nics = g_min * ports if op is Collective.ALL_TO_ALL else g_min
    nic_share = nics * port_bw / (g_min * topo.inter.bandwidth_bytes_per_s)
    if alg is Algorithm.IN_NETWORK:  # NVLS: Simple only, NCCL's latency, plus one loop of pipeline fill
        view = _with_links(_protocol_view(topo, NVLS_TERMS, 1.0, nic_share), base_latency_s=0.0)
        lat, bw = _table_terms(op, alg, S, P, view, TIER_OVERLAP_LOSS)
        assert topo.in_network is not None
        B_v = topo.in_network.bandwidth_bytes_per_s
        W = nics * port_bw / network_oversubscription(topo, n)
        L = pm.nvls_channel_count(n) * pm.nvls_chunk_bytes * g  # bytes of the message in one NVLS loop
        E_v = 0.0 if n == 1 else (1.0 if topo.inter_in_network else tree_network_bytes(n))
        fill = _min(S, L) * (1 / B_v + E_v / W)
        return {Protocol.SIMPLE: (lat, bw + fill)}, ranking
    if alg is Algorithm.PAT:  # NCCL ncclTopoTuneModel, Simple only, S over 0.75 of the ring's bus bandwidth
        W = nics * port_bw / network_oversubscription(topo, n)
        a_net = topo.inter.latency_s * PAT_NET_STEP_S / REFERENCE_INTER_STEP_S
        lat = (topo.base_latency_s * PAT_BASE_S / REFERENCE_BASE_S + math.floor(math.log2(n)) * a_net / 3.5
               + P * PAT_PER_RANK_S)
        return {Protocol.SIMPLE: (lat, S / (PAT_BANDWIDTH_SHARE * W))}, ranking
    tree = alg is Algorithm.TREE
    one_per_node = g == 1 and n > 1  # NCCL: "With ppn=1 latencies are fully exposed, use the Tree network latency"
    ring_graph = _one_node_ring(topo) if (alg is Algorithm.RING and n == 1) else None
    out: dict[Protocol, tuple[float, float]] = {}
    for t in (TREE_TERMS if tree else RING_TERMS):
        p = t.protocol
        if p is Protocol.LL128 and (not pm.ll128_enabled or alg is Algorithm.DIRECT):
            continue  # point-to-point never runs LL128 (P2P_LL_THRESHOLD_BYTES)
        eff = TREE_LL128_ONE_NODE_EFFICIENCY if (tree and n == 1 and p is Protocol.LL128) else t.bandwidth_efficiency
        if ring_graph is not None and p is Protocol.SIMPLE:  # one NVSwitch node: the ring's measured reach
            eff = eff * RING_SIMPLE_ONE_NODE_EFFICIENCY
        view = _protocol_view(topo, t, eff, nic_share)
        if one_per_node and not tree:
            tree_step = next(x for x in TREE_TERMS if x.protocol is p).inter_step_latency_s
            view = _with_links(view, inter=Link(bandwidth_bytes_per_s=view.inter.bandwidth_bytes_per_s,
                                                latency_s=topo.inter.latency_s * tree_step / REFERENCE_INTER_STEP_S))
        if (alg is Algorithm.RING and n > 1 and op not in (Collective.BROADCAST, Collective.REDUCE)):
            # tuning.cc: "Inter-node rings still have to launch nsteps * net overhead": every intra step
            # of a ring across nodes costs at least the host's net overhead (x3 for Simple)
            floor = pm.net_overhead_s * (3.0 if p is Protocol.SIMPLE else 1.0)
            if floor > view.intra.latency_s:
                view = _with_links(view, intra=Link(bandwidth_bytes_per_s=view.intra.bandwidth_bytes_per_s,
                                                    latency_s=floor))
        if alg is Algorithm.DIRECT and op is Collective.ALL_TO_ALL:
            lat, bw = _table_terms(op, alg, S, P, view, TIER_OVERLAP_LOSS, P2P_EFFICIENCY, pm.net_overhead_s)
        else:
            lat, bw = _table_terms(op, alg, S, P, view, TIER_OVERLAP_LOSS, lockstep=True)
        ranked = alg is Algorithm.RING and op in LOCKSTEP_RING_OPS and n > 1
        nccl_lat = _table_terms(op, alg, S, P, view, TIER_OVERLAP_LOSS)[0] if ranked else lat
        bus_bytes = 2.0 * S if tree else bus_bandwidth_factor(op, P) * S  # tree: algbw = busbw / 2
        if p is Protocol.LL:  # LL's bus bandwidth is capped at llMaxBw
            bw = _max(bw, bus_bytes / pm.ll_max_bus_bandwidth(n))
        if p is Protocol.LL128 and alg in (Algorithm.RING, Algorithm.TREE):  # NCCL's per-channel LL128 cap
            cap = pm.per_channel_cap_bytes_per_s("tree_ll128" if tree else "ring_ll128", n, nics)
            if ring_graph is not None:  # one node: the searched ring's channels (one_node_ring_graph)
                cap = pm.one_node_ring_ll128_cap_bytes_per_s(ring_graph[0])
            if cap is not None:
                bw = _max(bw, bus_bytes / cap)
        if tree and op is Collective.ALL_REDUCE:
            bw = bw / _tree_correction(p, S)
        if (alg is Algorithm.RING and p is Protocol.SIMPLE and n > 1 and op is Collective.ALL_REDUCE):
            lat *= ring_simple_plateau_factor(pm.gpu_generation)
        out[p] = (lat, bw)
        if ranked:
            ranking[p] = nccl_lat + bw
        elif ring_graph is not None:  # NCCL's tuner ranks ring Simple at the search's full bandwidth (no e_s)
            ranking[p] = lat + (bw * RING_SIMPLE_ONE_NODE_EFFICIENCY if p is Protocol.SIMPLE else bw)
    if alg is Algorithm.DIRECT:  # NCCL's size rule, not its tuner, picks a point-to-point protocol
        ll = p2p_uses_ll(S / P if op is Collective.ALL_TO_ALL else S)
        ranking[Protocol.LL] = 1.0 - 1.0 * ll
        ranking[Protocol.SIMPLE] = 1.0 * ll
    return out, ranking


def _make_one_node_ring(topo: Topology) -> tuple[int, float] | None:
    """``(c, b_c)`` of the ring NCCL's search finds inside one node of ``topo``
    (:func:`commcost.comm.protocols.one_node_ring_graph`), or None where commcost does not model that search:
    no NCCL GPU generation (RCCL, unknown), no NVLink (LL128 off: PCIe-only nodes), or peers outside the
    NVLink (DGX-1's cube mesh, :attr:`Topology.unlinked_peers`), where the preset's ``B_i`` stands as is."""
    pm = topo.protocols
    if pm is None or pm.gpu_generation is None or not pm.ll128_enabled or topo.unlinked_peers:
        return None
    return one_node_ring_graph(topo.intra.bandwidth_bytes_per_s, pm.gpu_generation)


_one_node_ring = IdentityMemo(_make_one_node_ring)
""":func:`_make_one_node_ring`, memoised on the frozen topology."""


def _floored(terms: dict[Protocol, tuple[float, float]], P: int,
             topo: Topology) -> dict[Protocol, tuple[float, float]]:
    """``terms`` with each latency raised to the network's floor ``t_f`` (:attr:`Topology.network_floor_s`)
    when the group spans nodes: ``latency = max(latency, t_f)``; unchanged inside one node or without a floor."""
    t_f = topo.network_floor_s
    if t_f <= 0.0 or _place(P, topo).nodes < 2:
        return terms
    return {p: (_max(lat, t_f), bw) for p, (lat, bw) in terms.items()}


def _nccl_order(terms: dict[Protocol, tuple[float, float]], ranking: dict[Protocol, float]) -> list[Protocol]:
    """The protocols of ``terms`` in the order NCCL's tuner ranks them: by commcost's own total, except where
    commcost prices a term NCCL's tuner does not see (``ranking``, filled by :func:`_protocol_terms`): a ring
    all-gather or reduce-scatter across nodes, whose lockstep latency (:data:`LOCKSTEP_RING_OPS`) NCCL
    ranks by its own latency sum, ``(P-n) a_i^p + (n-1) a_e^p`` (tuning.cc), and a ring inside one NVSwitch
    node, whose Simple NCCL ranks at the searched ring's full bandwidth, without the measured reach
    :data:`commcost.comm.protocols.RING_SIMPLE_ONE_NODE_EFFICIENCY`. NCCL runs the winner, which commcost
    then prices with its own terms."""
    if ranking:
        return sorted(terms, key=lambda p: ranking[p])
    return sorted(terms, key=lambda p: terms[p][0] + terms[p][1])
