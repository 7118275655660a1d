"""Collective algorithms on a two-tier fabric, and the one entry point :func:`collective_cost`.

Symbols (as in :mod:`commcost.comm.collectives`, plus the tiers of
:class:`commcost.comm.topology.Topology`): ``S`` message bytes, ``P`` ranks, ``n``
nodes the group spans, ``g`` ranks on the fullest node, ``g_min`` on the
emptiest, ``a_i, B_i`` intra-node per-step latency and per-GPU bandwidth,
``a_e, B_e`` the same for each GPU's NIC, ``o`` oversubscription (``o(n)`` with a congestion rule),
``W = g_min B_e / o`` the network bandwidth of one node (its NICs in parallel),
``a_v, B_v`` the in-switch reduction (NVLS), ``t_0`` the launch latency.

NCCL spreads its channels over every NIC of a node, so a node's cross-node
traffic leaves through all ``g`` NICs at once: that is why ``W`` and not
``B_e`` bounds the network part (NVIDIA/nccl issue #457, #196). Pipelined
algorithms (ring, tree, in-network) overlap the two tiers, so their bandwidth
term is the *max* of the tiers'; phased ones (halving-doubling, hierarchical)
pay the tiers one after the other, so theirs is the *sum*.

=================  ===============================================  =============================================
algorithm          latency term                                     bandwidth term
=================  ===============================================  =============================================
ring (k=2 AR,      ``t_0 + k[(P-n) a_i + (n-1) a_e]``               ``V max(f_i/B_i, 1/W)``, ``V = k(P-1)/P S``
k=1 RS, AG;                                                         (broadcast/reduce: ``V = S``), ``f_i = (g-1)/g``
broadcast, reduce                                                   (1 in one node and on PCIe-only nodes)
 ``(P-1)`` steps)
tree (AR)          ``t_0 + 2[(g-1) a_i + ceil(log2 n) a_e]``        ``max(2S/B_i, E(n)/W)``, ``E(2) = S``,
                                                                    ``E(3) = 1.5S``, ``E(n>3) = 2S`` (NCCL's
                                                                    double binary tree, tree_network_bytes)
halving_doubling   ``t_0 + k[log2 g a_i + log2 n a_e]``             ``k[(g-1)/g S/B_i + (n-1)/(n g) S o/B_e]``
hierarchical (AR)  ``t_0 + 2(g-1) a_i + 2(n-1) a_e``                ``2(g-1)/g S/B_i + 2(n-1)/n (S/g) o/B_e``
in_network (AR)    ``t_0 + 2 a_v + 2 ceil(log2 n) a_e``            ``max(S/B_v, E(n)/W)`` (SHARP: ``S/W``)
                   (SHARP: ``2 a_e``)
direct (A2A)       ``t_0 + (g-1) a_i + (P-g) a_e``                  ``max((g-1-u)/P S/B_i, u/P S/B_u,
                                                                    (P-g_min)/P S o/B_e)`` (``u`` unlinked peers)
direct (send/recv) ``t_0 + a``                                      ``S/B`` on the link joining the two ranks
=================  ===============================================  =============================================

Across nodes, in-network is NCCL's NVLS tree: NVLS inside each node and a tree between
nodes, so it moves the tree's ``E(n)`` per node (``S`` for two nodes, ``1.5S`` for three, ``2S`` for more:
tuning.cc doubles NVLS_TREE's network bandwidth only "for nNodes <= 2") and pays
``2 log2 n`` network steps (tuning.cc: ``intraLat + 2 log2i(nNodes) interLat``).
``W`` uses the effective oversubscription ``o(n)`` of
:func:`commcost.comm.topology.network_oversubscription` (the preset's congestion rule, and on a
three-tier topology the spine's share when the group spans several pods).

**Network floor** (GPUDirect-TCPX/TCPXO-class networks, :attr:`Topology.network_floor_s` ``t_f``): every
collective whose group spans nodes pays ``max(latency, t_f)`` in place of its latency term, under every
algorithm and protocol: a message across such a network is handed to the host's TCP stack (TCPX: its data,
TCPXO: its control path), a cost the per-step alpha of NCCL's model does not carry (the A3 Mega all-reduce
takes 123 us from 8 B to 512 B, where its tree's latency term is 33 us).

**Third tier** (pods of nodes under one leaf layer, a spine between them): a group spanning ``m``
pods pays ``a_s`` more for each network step that crosses the spine, on top of ``a_e``:
ring ``k(m-1)`` steps (its ring visits the pods in order, so ``m-1`` of its ``n-1`` node-to-node
hops per pass cross), tree and in-network ``2 ceil(log2 m)`` (the top levels of the tree),
halving-doubling ``k ceil(log2 m)``, hierarchical ``2(m-1)``, direct all-to-all ``P - g p`` (the
peers outside the rank's own pod of ``p`` nodes), send/recv one when the two ranks' nodes are in
different pods. Its bandwidth is in ``W`` (above). With ``m = 1`` every term is the two-tier one.

Sources: ring, halving-doubling (Rabenseifner) and direct exchange from Thakur,
Rabenseifner & Gropp, "Optimization of Collective Communication Operations in
MPICH" (2005); tree bytes (each rank sends ``2S``) and ring bytes
(``2(P-1)/P S``) from NCCL maintainer S. Jeaugey, NVIDIA/nccl#457; NCCL's own
tuning model (src/graph/tuning.cc) for the latency structure (intra and inter
steps, ``2 log2 n`` tree hops, NVLS as one intra step plus inter steps).
With one GPU per node (a flat :class:`Link`) every row reduces to the drill's flat
formula; with one node, hierarchical equals ring.

**Protocols** (only for a :class:`Topology` whose ``protocols`` is set, as every real
system preset's is; :mod:`commcost.comm.protocols` has the constants and their sources).
The table above is one alpha-beta pair per tier. NCCL instead runs each algorithm
under one of three protocols, LL, LL128 and Simple, each with its own launch
latency ``t_0^p``, step latencies ``a_i^p, a_e^p`` and bandwidth efficiency
``e^p`` (LL: 0.5, LL128: 0.92, Simple: 1), and its tuner picks the fastest. So,
with ``p`` ranging over the protocols::

    T(alg) = min_p  T_table(alg; t_0^p, a_i^p, a_e^p, e^p B_i, e^p B_e)

with one exception: a ring all-gather or reduce-scatter across nodes is priced lockstep (every step at the
network step's pace), a cost NCCL's tuner does not see; NCCL ranks its protocols by its own latency sum
``(P-n) a_i^p + (n-1) a_e^p`` and runs the winner, so commcost picks ``p`` that way and prices that ``p``
lockstep (:func:`_nccl_order`). On the A4X Max all-gather this is the difference between LL128 and Simple
at 64 MiB - 256 MiB (-15% -> +5% at 64 MiB); NCCL 2.28 there switches to Simple already at 16 MiB.

where ``a^p = a x hwLat[p] / hwLat[LL128]`` (the fabric's own step latency is
NCCL's ring LL128 one) and ``t_0^p = t_0 x baseLat[p] / 8.4 us``, refined as
NCCL's ``ncclTopoTuneModel``/``ncclTopoGetAlgoTime`` do: LL's bus bandwidth is
capped at ``llMaxBw``; the tree's bandwidth is multiplied by NCCL's
``treeCorrectionFactor`` (about 0.5 to 0.9 between 256 KiB and 128 MiB, where
trees do not reach their model bandwidth); ring LL128 is capped at ``c x perChMaxRingLL128Bw``, ``c`` one
channel per NIC across nodes and, inside one NVSwitch node, the channels of the ring NCCL's search finds
(:func:`commcost.comm.protocols.one_node_ring_graph`: 16 on Blackwell, so 640 GB/s < 0.92 x 720); ring Simple all-reduce across nodes
pays ``1.4 x`` its latency (``1.9 x`` on Volta); ring Simple inside one NVSwitch node runs at the measured
``e_s`` = 0.946 of ``B_i`` (:data:`commcost.comm.protocols.RING_SIMPLE_ONE_NODE_EFFICIENCY`, every ring
collective; NCCL's tuner, which ranks the protocols, does not see it: :func:`_nccl_order`). In-network (NVLS)
is Simple only, with NCCL's latency (no launch term, 14/4 of the network step) plus one *pipeline fill*: NVLS
moves a message in loops of ``L = c k g`` bytes (``c`` = 16 channels of ``k`` = 128 KiB per
GPU, NCCL's defaults), and the last loop (the whole message, if smaller) crosses
every stage without a next loop to overlap with, so NVLS adds
``min(S, L) (1/B_v + [n > 1] E_v/W)`` (``E_v`` the network bytes per byte). This
fill is commcost's, not NCCL's: NCCL's tuner prices NVLS at 25 us + S/B, which
the measured tables beat only above ~64 MiB.

Under the protocol model the direct all-to-all posts every peer at once (one step per tier, plus
the proxy's post of each remote peer, :data:`P2P_LL_THRESHOLD_BYTES` for its protocol), reaches
``e_p B_i`` inside the node (:data:`P2P_EFFICIENCY`) and ``B_e / o`` across nodes (every port of the GPU), times
the fan-in share ``e_f(n)`` on RoCE (:data:`FAN_IN_SLOWDOWN_PER_DOUBLING`: ``n - 1`` partner ports converge on
each port; :attr:`commcost.comm.topology.Topology.incast_rate_cut`).

Under the protocol model, ``auto`` chooses among the algorithms NCCL has (ring,
tree, in-network; direct for all-to-all and send/recv), since that is what a
real run executes: halving-doubling and hierarchical stay available by name.
"""

from __future__ import annotations

import math

from dataclasses import fields

from commcost.comm.collectives import Algorithm, Collective, CollectiveCost, bus_bandwidth_factor
from commcost.core.errors import InputError
from commcost.comm.protocols import (NVLS_TERMS, REFERENCE_BASE_S, REFERENCE_INTER_STEP_S, REFERENCE_INTRA_STEP_S,
                                RING_SIMPLE_ONE_NODE_EFFICIENCY, RING_TERMS, TREE_LL128_ONE_NODE_EFFICIENCY,
                                TREE_TERMS, Protocol, ProtocolTerms, one_node_ring_graph, ring_simple_plateau_factor,
                                tree_correction)
from commcost.comm.topology import Link, Topology, as_topology, network_oversubscription, place
from commcost.core.limits import MAX_GPUS, MAX_MESSAGE_BYTES
from commcost.core.validation import require_at_most, require_count, require_finite_positive
from commcost.core.xp import is_array, namespace_of

__all__ = [
    "AUTO", "APPLICABLE", "NCCL_ALGORITHMS", "tree_network_bytes", "MAX_CROSS_NODE_CHANNELS", "TIER_OVERLAP_LOSS", "collective_cost", "algorithm_costs", "protocol_costs",
    "unavailable_algorithms", "parse_collective", "parse_algorithm", "available_algorithms", "totals_many",
    "P2P_LL_THRESHOLD_BYTES", "p2p_uses_ll", "FAN_IN_SLOWDOWN_PER_DOUBLING", "fan_in_efficiency",
    "fan_in_slowdown_from",
]

AUTO = "auto"
"""Pick the fastest applicable algorithm for this size, as NCCL's tuner does."""

APPLICABLE: dict[Collective, tuple[Algorithm, ...]] = {
    Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.HALVING_DOUBLING,
                            Algorithm.HIERARCHICAL, Algorithm.IN_NETWORK),
    Collective.REDUCE_SCATTER: (Algorithm.RING, Algorithm.HALVING_DOUBLING, Algorithm.PAT),
    Collective.ALL_GATHER: (Algorithm.RING, Algorithm.HALVING_DOUBLING, Algorithm.PAT),
    Collective.BROADCAST: (Algorithm.RING,),
    Collective.REDUCE: (Algorithm.RING,),
    Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
    Collective.SEND_RECV: (Algorithm.DIRECT,),
}
"""Algorithms modelled for each collective, in tie-break order (first wins a tie)."""

NCCL_ALGORITHMS = frozenset({Algorithm.RING, Algorithm.TREE, Algorithm.IN_NETWORK, Algorithm.DIRECT, Algorithm.PAT})

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

LOCKSTEP_RING_OPS = frozenset({Collective.ALL_GATHER, Collective.REDUCE_SCATTER})
"""Ring collectives whose every step, across nodes, waits for the network hop (module docstring,
"Across nodes"): all-gather and reduce-scatter. All-reduce keeps NCCL's own latency sum, which the
all-reduce tables were tuned on."""

P2P_EFFICIENCY = 0.906
"""``e_p``: the share of the intra-node tier's ring bandwidth NCCL's point-to-point transfers (all-to-all)
reach inside a node, under the protocol model. Derived on the tuning tables
(benchmarks/accuracy_nccl_tests.derive_issue20_constants): the median, over the one-node all-to-all
tables, of the measured bus bandwidth ``(P-1)/P S / t`` at 16 GiB over the preset's ``B_i``: OCI MI355X
8 GPUs 0.885, OCI GB300 4 GPUs 0.872, 8 GPUs 0.951, 64 GPUs 0.926; median 0.906. NCCL's maintainers
quote the same kind of gap on H100: 'NCCL can get an effective NVLink bandwidth of 370GB/s' for
non-all-reduce operations (NVIDIA/nccl-tests#212). Across nodes the NIC, not NVLink, bounds an
all-to-all, and its rate is the fan-in's (:func:`fan_in_efficiency`)."""

FAN_IN_SLOWDOWN_PER_DOUBLING = 0.1257
"""``c``: the fan-in (incast) loss of an all-to-all across ``n`` nodes, per doubling of the NIC ports that
converge on one receiving port: ``e_f(n) = 1 / (1 + c log2(n - 1))`` (1 on two nodes), on a fabric that cuts a
sender's rate on incast (RoCE's ECN/PFC with DCQCN: :attr:`commcost.comm.topology.Topology.incast_rate_cut`).
InfiniBand (credit-based flow control) and EFA (SRD) pay none: an H100 cluster's 10-node all-to-all keeps its NIC
at line rate with 9 partner ports, an 8-node AWS p6-b300 one ~0.95 of its two ports (docs/fabrics.md 4.1).

Why nodes and not peers: NCCL sends each remote peer's share through the NIC on the peer's own rail, relayed
over NVLink by the local GPU that owns that NIC (PXN, on by default for point-to-point:
src/graph/search.cc ``ncclTopoGetNetDev``, ``NCCL_P2P_PXN_LEVEL`` = 2, "use PXN as much as possible to
maximize aggregation"). So a NIC port exchanges data with one port on each other node: ``n - 1`` flows
converge on every receiving port, whatever the number of remote peers ``P - g``. On two nodes each port has
one partner (no incast); each doubling of the partners adds the same loss, as the congestion rule of
:func:`commcost.comm.topology.network_oversubscription` does per doubling of nodes.

Derived on the tuning tables (benchmarks/accuracy_nccl_tests.derive_issue20_constants, largest row, NIC rate
``(P-g)/P S / t`` over one port's ``B_e`` = 47 GB/s): the one tuning table on more than two nodes, OCI
MI355X 4 nodes x 8, 0.75 * 2**34 / 328.749 ms = 39.19 GB/s = 0.8339 of the port,
``c = (1/0.8339 - 1) / log2(3) = 0.1257``. Held out, it predicts OCI GB200 across 3 racks (2 partners per
port): ``1 / (1 + 0.1257) = 0.888`` of the port, measured 0.891 (``(2/3) 2**33 / 136.749 ms / 47 GB/s``).
The constant it replaces counted remote peers (``r = P - g``, 0.0148 per peer past 8); it put OCI GB200
across 2 racks (``r = 64``) at 0.55 of its NIC where it runs at 0.96 (+75%), and 3 racks at 0.36 (+144%).
Not explained by either: OCI GB300 across 2 racks, one partner per port, runs at 0.51 of a port, 0.26 of the
two an all-to-all drives (its run:
NCCL 2.28.7, 2 ports per GPU, ``NCCL_IB_QPS_PER_CONNECTION=4``; the GB200 run: NCCL 2.27.3, one port,
``NCCL_P2P_NET_CHUNKSIZE=524288``); docs/fabrics.md."""


def fan_in_efficiency(nodes: int, slowdown_per_doubling: float | None = None) -> float:
    """``e_f(n) = 1 / (1 + c log2(max(1, n - 1)))``: the share of its NIC rate a rank's all-to-all gets on
    ``n`` nodes (:data:`FAN_IN_SLOWDOWN_PER_DOUBLING`); 1 on one or two nodes."""
    c = FAN_IN_SLOWDOWN_PER_DOUBLING if slowdown_per_doubling is None else slowdown_per_doubling
    return 1.0 / (1.0 + c * math.log2(max(1, nodes - 1)))


def fan_in_slowdown_from(nodes: int, nic_rate_share: float) -> float:
    """``c`` from one measurement: an all-to-all on ``n > 2`` nodes measured at ``nic_rate_share`` of one
    NIC port: ``c = (1/share - 1) / log2(n - 1)`` (the inverse of :func:`fan_in_efficiency`)."""
    if nodes <= 2:
        raise InputError(f"fan-in needs more than 2 nodes (one partner port per port on 2), got {nodes}")
    return (1.0 / nic_rate_share - 1.0) / math.log2(nodes - 1)


P2P_LL_THRESHOLD_BYTES = 16384
"""NCCL runs a point-to-point transfer (every peer of an all-to-all, a send/recv) with LL when its bytes per
channel are at most ``NCCL_P2P_LL_THRESHOLD`` = 16 KiB, otherwise with Simple, and never with LL128: src/enqueue.cc
``addP2pToPlan``, ``protoLL &= bytes <= nChannels * ncclParamP2pLLThreshold()``,
``protocol = protoLL ? NCCL_PROTO_LL : NCCL_PROTO_SIMPLE``. A peer's transfer gets one channel per
``minPartSize`` = ``p2pChunkSize / 8`` (one node) or ``/ 2`` (across nodes) of its bytes, at least 64 KiB with
NCCL's default chunk sizes, so the rule is: LL when the bytes to one peer (``S / P`` for an all-to-all, ``S`` for
a send/recv) are at most 16 KiB, Simple above. P2P bypasses the tuner: no ranking by modelled time."""


def p2p_uses_ll(peer_bytes):
    """True where NCCL sends ``peer_bytes`` to one peer with LL (:data:`P2P_LL_THRESHOLD_BYTES`); array-safe."""
    return peer_bytes <= P2P_LL_THRESHOLD_BYTES


def parse_collective(text: str | Collective) -> Collective:
    """``"all_reduce"`` (or ``all-reduce``) -> :class:`Collective`; unknown names list the valid ones."""
    try:
        return Collective(str(text).replace("-", "_"))
    except ValueError:
        valid = ", ".join(c.value for c in Collective)
        raise InputError(f"unknown collective {text!r} (valid: {valid})") from None


def parse_algorithm(text: str | Algorithm) -> Algorithm | str:
    """``"ring"`` -> :class:`Algorithm`, ``"auto"`` -> ``"auto"``; unknown names list the valid ones."""
    t = str(text).replace("-", "_")
    if t == AUTO:
        return AUTO
    try:
        return Algorithm(t)
    except ValueError:
        valid = ", ".join([AUTO] + [a.value for a in Algorithm])
        raise InputError(f"unknown algorithm {text!r} (valid: {valid})") from None


_TREE_BYTES: dict[int, float] = {}


def _btree_degree(n: int, r: int) -> int:
    """Tree edges at rank ``r`` of NCCL's binary tree over ``n`` ranks (src/graph/trees.cc ``ncclGetBtree``:
    rank 0 is the root with one child; elsewhere the lowest set bit finds the parent and up to two children)."""
    bit = 1
    while bit < n and not bit & r:
        bit <<= 1
    if r == 0:
        return 1 if n > 1 else 0
    low = bit >> 1
    if low == 0:
        return 1  # a leaf: its parent only
    d1, lb = r + low, low
    while d1 >= n:  # the second child: the next smaller offset that stays in range
        d1 = -1 if lb == 0 else r + lb
        lb >>= 1
    return 1 + 1 + (d1 != -1)  # parent, first child (always in range), second child if any


def tree_network_bytes(n: int) -> float:
    """``E(n) / S``: bytes each node's NICs send (and receive) per byte of a tree all-reduce across ``n`` nodes.

    NCCL's double binary tree (src/graph/trees.cc ``ncclGetDtree``): two binary trees over the nodes, the
    second the first shifted by one rank (odd ``n``) or mirrored (even ``n``), each carrying half the message.
    Every tree edge carries ``S/2`` each way (reduce up, broadcast down), so a node of ``d`` edges in the two
    trees together moves ``d S / 2``, and the pipelined tree runs at the pace of the busiest node:
    ``E(n) = max_node d / 2``: 1 for two nodes, 1.5 for three, 2 from four on (the large-``n`` limit
    of NVIDIA/nccl#457: each node sends ``2S``).
    """
    if n <= 1:
        return 0.0
    if n not in _TREE_BYTES:
        second = [((r - 1) % n) if n % 2 == 1 else (n - 1 - r) for r in range(n)]
        _TREE_BYTES[n] = max(_btree_degree(n, r) + _btree_degree(n, second[r]) for r in range(n)) / 2
    return _TREE_BYTES[n]


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


_is_array = is_array


def _max(a, b):
    """``max(a, b)`` of floats, element-wise when either is a numpy array (the array path, :func:`totals_many`)."""
    return namespace_of(a, b).maximum(a, b)


def _min(a, b):
    """``min(a, b)`` of floats, element-wise when either is a numpy array."""
    return namespace_of(a, b).minimum(a, b)


def _tree_correction(protocol: Protocol, S):
    """:func:`commcost.comm.protocols.tree_correction`, element by element for an array ``S`` (the same
    float arithmetic per size)."""
    if not _is_array(S):
        return tree_correction(protocol, S)
    import numpy as np

    return np.array([tree_correction(protocol, float(x)) for x in S.ravel()]).reshape(S.shape)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def derive(obj, **changes):
    """``dataclasses.replace(obj, **changes)`` without running ``__post_init__`` again: for the views the
    model derives from an already validated :class:`Topology` or :class:`Link` (positive scale factors,
    a group's own GPUs per node), so the check happens once, where the input enters, not per collective."""
    cls = type(obj)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    new = object.__new__(cls)
    for name in names:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(obj, name))
    return new


_MEMOS: list[IdentityMemo] = []


def clear_memos() -> None:
    """Empty every :class:`IdentityMemo` (benchmarks time a first, unmemoised call with it)."""
    for memo in _MEMOS:
        memo.table.clear()


class IdentityMemo:
    """Memoise ``fn(obj, *args)`` on the identity of the frozen ``obj`` and the (small, hashable) ``args``.

    Hashing a :class:`Topology` hashes every field of every link and its protocol model again on each
    call (microseconds, more than the formula it guards); identity is free. The entry holds ``obj``, so its
    ``id`` cannot be reused while cached; the table is emptied past ``maxsize`` entries. Only for
    functions of frozen inputs: equal objects of different identity are computed again, never confused.
    """

    __slots__ = ("fn", "table", "maxsize")

    def __init__(self, fn, maxsize: int = 8192) -> None:
        self.fn, self.table, self.maxsize = fn, {}, maxsize
        _MEMOS.append(self)

    def __call__(self, obj, *args):
        key = (id(obj), *args)
        hit = self.table.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self.fn(obj, *args)
        if len(self.table) >= self.maxsize:
            self.table.clear()
        self.table[key] = (obj, value)
        return value


_placement = IdentityMemo(lambda topo, gpus: place(gpus, topo))


def _place(gpus: int, topo: Topology):
    """:func:`commcost.comm.topology.place`, memoised on the frozen ``(P, topology)`` (placement does not
    depend on the message size, and every price of one group reuses it)."""
    return _placement(topo, gpus)


def _why_not(op: Collective, alg: Algorithm, gpus: int, topo: Topology) -> str | None:
    """Why ``alg`` cannot run ``op`` for this group (None when it can)."""
    if alg not in APPLICABLE[op]:
        names = ", ".join(a.value for a in APPLICABLE[op])
        return f"{alg.value} is not modelled for {op.value} (modelled: {names})"
    if op is Collective.SEND_RECV and gpus != 2:
        return f"send_recv is between 2 GPUs, got gpus={gpus}"
    pl = _place(gpus, topo)
    if alg is Algorithm.HALVING_DOUBLING:
        if not (_pow2(pl.gpus_per_node) and _pow2(pl.nodes) and pl.even):
            return (f"halving_doubling needs a power-of-two number of GPUs per node and of nodes, "
                    f"got {pl.nodes} node(s) x {pl.gpus_per_node} (last node {pl.min_gpus_per_node})")
    if alg is Algorithm.HIERARCHICAL and not pl.even:
        return (f"hierarchical needs the same number of GPUs on every node, got {pl.gpus_per_node} "
                f"on the first and {pl.min_gpus_per_node} on the last")
    if alg is Algorithm.PAT:
        if topo.protocols is None or topo.protocols.gpu_generation is None:
            return ("pat is NCCL's (2.23+), priced with NCCL's protocol model of an NVIDIA GPU generation, which "
                    "this fabric has not (RCCL presets run the ring)")
        if pl.gpus_per_node != 1 or pl.nodes < 2:
            return (f"pat runs with one GPU per node (NCCL: nNodes == nRanks), got {pl.nodes} node(s) x "
                    f"{pl.gpus_per_node}")
    if alg is Algorithm.IN_NETWORK:
        if topo.in_network is None:
            return "in_network needs a switch that reduces (NVLS); this fabric has none"
        if pl.gpus_per_node < 2:
            return "in_network needs at least 2 GPUs per node on the reducing switch"
    return None


def _cost(op: Collective, alg: Algorithm, S: float, P: int, latency_s: float,
          bandwidth_s: float) -> CollectiveCost:
    return CollectiveCost(op=op, algorithm=alg, gpus=P, message_bytes=S,
                          latency_s=latency_s, bandwidth_s=bandwidth_s)


def _table_terms(op: Collective, alg: Algorithm, S: float, P: int, topo: Topology,
                 overlap_loss: float = 0.0, p2p_efficiency: float = 1.0, post_s: float = 0.0,
                 lockstep: bool = False) -> tuple[float, float]:
    """``(latency_s, bandwidth_s)`` of ``alg`` running ``op`` with one alpha-beta pair per tier (module table).
    ``S`` may be a numpy array (``latency_s`` does not depend on it; ``bandwidth_s`` is then an array)."""
    pl = _place(P, topo)
    n, g, g_min = pl.nodes, pl.gpus_per_node, pl.min_gpus_per_node
    a_i, B_i = topo.intra.latency_s, topo.intra.bandwidth_bytes_per_s
    a_e, o = topo.inter.latency_s, network_oversubscription(topo, n)
    B_e_eff = topo.inter.bandwidth_bytes_per_s / o
    W = g_min * topo.inter.bandwidth_bytes_per_s / o
    t0 = topo.base_latency_s
    k = 2 if op is Collective.ALL_REDUCE else 1
    m, a_s = pl.pods, topo.spine_latency_s  # third tier: pods spanned, extra latency per spine crossing
    up = math.ceil(math.log2(m))  # tree levels that cross the spine

    if alg is Algorithm.RING:
        steps_intra, steps_inter = k * (P - n), k * (n - 1)
        if lockstep and n > 1 and op in LOCKSTEP_RING_OPS:  # every step of the ring at the network step's pace
            steps_intra, steps_inter = 0, P - 1
        if op in (Collective.BROADCAST, Collective.REDUCE):
            V = S
        else:
            V = k * (P - 1) / P * S
        if n == 1:
            bw = V / B_i
        else:
            f_i = 1.0 if topo.nic_on_intra_link else (g - 1) / g  # PCIe-only: the NIC's bytes cross it too
            bw = _max(V * f_i / B_i, V / W)
        return t0 + (steps_intra * a_i + steps_inter * a_e + k * (m - 1) * a_s), bw
    if alg is Algorithm.TREE:
        E = tree_network_bytes(n) * S
        chain = 2.0 * S / B_i if g > 1 else 0.0
        net = E / W if n > 1 else 0.0
        return (t0 + 2 * ((g - 1) * a_i + math.ceil(math.log2(n)) * a_e + up * a_s),
                _max(chain, net) + overlap_loss * _min(chain, net))  # overlap_loss: TIER_OVERLAP_LOSS
    if alg is Algorithm.HALVING_DOUBLING:
        lat = k * (round(math.log2(g)) * a_i + round(math.log2(n)) * a_e + up * a_s)
        bw = k * ((g - 1) / g * S / B_i + (n - 1) / (n * g) * S / B_e_eff)
        return t0 + lat, bw
    if alg is Algorithm.HIERARCHICAL:
        lat = 2 * (g - 1) * a_i + 2 * (n - 1) * a_e + 2 * (m - 1) * a_s
        bw = 2 * (g - 1) / g * S / B_i + 2 * (n - 1) / n * (S / g) / B_e_eff
        return t0 + lat, bw
    if alg is Algorithm.IN_NETWORK:
        v = topo.in_network
        assert v is not None
        lat = 2 * v.latency_s
        bw = S / v.bandwidth_bytes_per_s
        if n > 1:  # NVLS tree across nodes (NCCL NVLS_TREE): E(n) as the tree's; SHARP: S, one hop
            lat += 2 * a_e if topo.inter_in_network else 2 * math.ceil(math.log2(n)) * a_e
            lat += (2 * a_s if m > 1 else 0.0) if topo.inter_in_network else 2 * up * a_s
            net_bytes = S if topo.inter_in_network else tree_network_bytes(n) * S
            bw = _max(bw, net_bytes / W) + overlap_loss * _min(bw, net_bytes / W)
        return t0 + lat, bw
    if alg is Algorithm.DIRECT and op is Collective.SEND_RECV:
        link = topo.intra if n == 1 else Link(bandwidth_bytes_per_s=B_e_eff, latency_s=a_e + (a_s if m > 1 else 0.0))
        return t0 + link.latency_s, S / link.bandwidth_bytes_per_s
    if alg is Algorithm.DIRECT:  # all-to-all: every peer's send and receive posted at once
        pod_ranks = P if topo.pod_nodes is None else min(P, g * topo.pod_nodes)
        if topo.protocols is None and p2p_efficiency == 1.0:  # the drill's and a custom topology's sum of steps
            lat = (g - 1) * a_i + (P - g) * a_e + (P - pod_ranks) * a_s
        else:  # concurrent peers: one step per tier, and the proxy posts each remote peer's transfer in turn
            lat = a_i + (a_e + post_s * (P - g) + (a_s if P > pod_ranks else 0.0) if n > 1 else 0.0)
        u = topo.unlinked_peers if g == topo.gpus_per_node else 0  # peers reached through host memory (DGX-1)
        bw = (g - 1 - u) / P * S / (B_i * p2p_efficiency)
        if u:
            bw = _max(bw, u / P * S / topo.unlinked_bandwidth_bytes_per_s)
        if n > 1:
            e_f = fan_in_efficiency(n) if topo.incast_rate_cut and (post_s or p2p_efficiency != 1.0) else 1.0
            bw = _max(bw, (P - g_min) / P * S / (B_e_eff * e_f))
        return t0 + lat, bw
    raise InputError(f"{alg.value} is not modelled for {op.value}")  # pragma: no cover


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


def _replace_links(view: Topology, intra, inter, base_latency_s) -> Topology:
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


def _terms(op: Collective, alg: Algorithm, S: float, P: int, topo: Topology) -> tuple[float, float]:
    """``(latency_s, bandwidth_s)`` of ``alg`` running ``op``: the table, or the protocol NCCL would run
    (:func:`_nccl_order`), with the network's latency floor (:func:`_floored`)."""
    ranking: dict[Protocol, float] = {}
    if topo.protocols is None:
        terms = {Protocol.SIMPLE: _table_terms(op, alg, S, P, topo)}
    else:
        terms = _protocol_terms(op, alg, S, P, topo, ranking)
    terms = _floored(terms, P, topo)
    if not _is_array(S):
        return terms[_nccl_order(terms, ranking)[0]]
    import numpy as np

    # arrays: element by element, the first protocol of the lowest key, as sorted() above takes it
    protocols = list(terms)
    key = {p: ranking[p] if ranking else terms[p][0] + terms[p][1] for p in protocols}
    lat, bw = terms[protocols[0]]
    best = key[protocols[0]]
    for p in protocols[1:]:
        better = key[p] < best
        lat, bw, best = np.where(better, terms[p][0], lat), np.where(better, terms[p][1], bw), np.where(better, key[p], best)
    return lat, bw


def _check(op: Collective, message_bytes: float, gpus: int) -> None:
    if not isinstance(op, Collective):
        raise InputError(f"op must be a Collective, got {op!r}")
    require_finite_positive("message_bytes", message_bytes, allow_zero=True)
    require_count("gpus", gpus)
    require_at_most("message_bytes", message_bytes, MAX_MESSAGE_BYTES)
    require_at_most("gpus", gpus, MAX_GPUS)


def available_algorithms(op: Collective, gpus: int, topo: Topology, algorithms=None) -> tuple[Algorithm, ...]:
    """The algorithms of ``algorithms`` (default :data:`APPLICABLE` order) that can run ``op`` on this group."""
    return tuple(a for a in (APPLICABLE[op] if algorithms is None else algorithms)
                 if a in APPLICABLE[op] and _why_not(op, a, gpus, topo) is None)


def totals_many(op: Collective, sizes_bytes, gpus: int, topo: Topology, algorithms: tuple[Algorithm, ...]):
    """Seconds of ``op`` on each of the numpy array ``sizes_bytes`` over ``gpus`` ranks: the fastest of
    ``algorithms`` (each able to run here, :func:`available_algorithms`), each under its fastest protocol;
    element by element the ``total_s`` :func:`algorithm_costs` and the per-call pick give, from the same
    formulas on arrays. The sizes are validated by the caller (finite, >= 0)."""
    import numpy as np

    S = np.asarray(sizes_bytes, dtype=float)
    if gpus == 1 or not algorithms:
        return np.zeros(S.shape)
    best = None
    for alg in algorithms:
        lat, bw = _terms(op, alg, S, gpus, topo)
        total = lat + bw
        best = total if best is None else np.minimum(best, total)
    return np.broadcast_to(best, S.shape).astype(float)


def unavailable_algorithms(op: Collective, gpus: int, fabric: Link | Topology) -> dict[Algorithm, str]:
    """Modelled algorithms of ``op`` that cannot run this group, with the reason."""
    topo = as_topology(fabric, gpus)
    out = {}
    for alg in APPLICABLE[op]:
        why = _why_not(op, alg, gpus, topo)
        if why is not None:
            out[alg] = why
    return out


def algorithm_costs(op: Collective, message_bytes: float, gpus: int,
                    fabric: Link | Topology) -> dict[Algorithm, CollectiveCost]:
    """The cost of ``op`` under every algorithm that can run it here, in :data:`APPLICABLE` order."""
    _check(op, message_bytes, gpus)
    topo = as_topology(fabric, gpus)
    out: dict[Algorithm, CollectiveCost] = {}
    for alg in APPLICABLE[op]:
        if _why_not(op, alg, gpus, topo) is None:
            if gpus == 1:
                out[alg] = _cost(op, alg, message_bytes, 1, 0.0, 0.0)
            else:
                lat, bw = _terms(op, alg, message_bytes, gpus, topo)
                out[alg] = _cost(op, alg, message_bytes, gpus, lat, bw)
    return out


def protocol_costs(op: Collective | str, message_bytes: float, gpus: int, fabric: Link | Topology,
                   algorithm: Algorithm | str) -> dict[Protocol, CollectiveCost]:
    """The cost of ``algorithm`` under each protocol NCCL could run it with, in the order NCCL's tuner ranks
    them (fastest first, except a lockstep ring across nodes: :func:`_nccl_order`).

    Only for a :class:`Topology` with a protocol model (``protocols`` set, as system
    presets have); elsewhere the one entry is ``Protocol.SIMPLE``, the links' own alpha and beta.
    :func:`collective_cost` returns the first entry's cost.
    """
    op = parse_collective(op)
    alg = parse_algorithm(algorithm)
    if alg == AUTO:
        alg = collective_cost(op, message_bytes, gpus, fabric, AUTO).algorithm
    _check(op, message_bytes, gpus)
    topo = as_topology(fabric, gpus)
    why = _why_not(op, alg, gpus, topo)
    if why is not None:
        raise InputError(why)
    if gpus == 1:
        return {Protocol.SIMPLE: _cost(op, alg, message_bytes, 1, 0.0, 0.0)}
    ranking: dict[Protocol, float] = {}
    if topo.protocols is None:
        terms = {Protocol.SIMPLE: _table_terms(op, alg, message_bytes, gpus, topo)}
    else:
        terms = _protocol_terms(op, alg, message_bytes, gpus, topo, ranking)
    terms = _floored(terms, gpus, topo)
    costs = {p: _cost(op, alg, message_bytes, gpus, lat, bw) for p, (lat, bw) in terms.items()}
    return {p: costs[p] for p in _nccl_order(terms, ranking)}


def collective_cost(op: Collective | str, message_bytes: float, gpus: int,
                    fabric: Link | Topology, algorithm: Algorithm | str = AUTO) -> CollectiveCost:
    """Time of one collective: THE entry point every command uses.

    ``op`` is a :class:`Collective` (or its name), ``message_bytes`` the size ``S``
    as nccl-tests counts it, ``gpus`` the group size ``P``, ``fabric`` a flat
    :class:`Link` (the drill's one-tier model: ring results equal
    :func:`commcost.comm.collectives.ring_all_reduce` and friends exactly) or a
    two-tier :class:`Topology`. ``algorithm`` is one :class:`Algorithm` or
    ``"auto"``: the fastest applicable one at this size (ties go to the earlier one
    in :data:`APPLICABLE`; under a protocol model only :data:`NCCL_ALGORITHMS` compete);
    the result's ``algorithm`` field says which ran, :func:`protocol_costs` which protocol.
    A group of one GPU costs nothing. Formulas: the module docstring.
    """
    op = parse_collective(op)
    alg = parse_algorithm(algorithm)
    _check(op, message_bytes, gpus)
    topo = as_topology(fabric, gpus)
    if alg == AUTO:
        costs = algorithm_costs(op, message_bytes, gpus, topo)
        if topo.protocols is not None and any(a in NCCL_ALGORITHMS for a in costs):
            costs = {a: c for a, c in costs.items() if a in NCCL_ALGORITHMS}
        if not costs:
            reasons = "; ".join(unavailable_algorithms(op, gpus, topo).values())
            raise InputError(f"no algorithm can run {op.value} on {gpus} GPUs here: {reasons}")
        return min(costs.values(), key=lambda c: c.total_s)
    why = _why_not(op, alg, gpus, topo)
    if why is not None:
        raise InputError(why)
    if gpus == 1:
        return _cost(op, alg, message_bytes, 1, 0.0, 0.0)
    lat, bw = _terms(op, alg, message_bytes, gpus, topo)
    return _cost(op, alg, message_bytes, gpus, lat, bw)
