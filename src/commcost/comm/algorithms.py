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


from commcost.comm.collectives import Algorithm, Collective, CollectiveCost
from commcost.core.errors import InputError
from commcost.comm.protocols import Protocol
from commcost.comm.topology import Link, Topology, as_topology
from commcost.core.limits import MAX_GPUS, MAX_MESSAGE_BYTES
from commcost.core.validation import require_at_most, require_count, require_finite_positive
from commcost.comm.table_terms import (FAN_IN_SLOWDOWN_PER_DOUBLING, _cost, _is_array, _place, _pow2, _table_terms,
                                       fan_in_efficiency, fan_in_slowdown_from, tree_network_bytes)
from commcost.comm.protocol_terms import (MAX_CROSS_NODE_CHANNELS, P2P_LL_THRESHOLD_BYTES, TIER_OVERLAP_LOSS, _floored,
                                          _nccl_order, _protocol_terms, p2p_uses_ll)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from commcost.core.xp import FloatOrArray

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


def _terms(op: Collective, alg: Algorithm, S: FloatOrArray, P: int,
           topo: Topology) -> tuple[FloatOrArray, FloatOrArray]:
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
    lat: FloatOrArray
    bw: FloatOrArray
    best: FloatOrArray
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


def available_algorithms(op: Collective, gpus: int, topo: Topology,
                         algorithms: tuple[Algorithm, ...] | None = None) -> tuple[Algorithm, ...]:
    """The algorithms of ``algorithms`` (default :data:`APPLICABLE` order) that can run ``op`` on this group."""
    return tuple(a for a in (APPLICABLE[op] if algorithms is None else algorithms)
                 if a in APPLICABLE[op] and _why_not(op, a, gpus, topo) is None)


def totals_many(op: Collective, sizes_bytes: FloatOrArray, gpus: int, topo: Topology,
                algorithms: tuple[Algorithm, ...]) -> FloatOrArray:
    """Seconds of ``op`` on each of the numpy array ``sizes_bytes`` over ``gpus`` ranks: the fastest of
    ``algorithms`` (each able to run here, :func:`available_algorithms`), each under its fastest protocol;
    element by element the ``total_s`` :func:`algorithm_costs` and the per-call pick give, from the same
    formulas on arrays. The sizes are validated by the caller (finite, >= 0)."""
    import numpy as np

    S = np.asarray(sizes_bytes, dtype=float)
    if gpus == 1 or not algorithms:
        return np.zeros(S.shape)
    best: FloatOrArray = None
    for alg in algorithms:
        lat, bw = _terms(op, alg, S, gpus, topo)
        total = lat + bw
        best = total if best is None else np.minimum(best, total)
    return np.broadcast_to(best, S.shape).astype(float)


def unavailable_algorithms(op: Collective, gpus: int, fabric: Link | Topology) -> dict[Algorithm, str]:
    """Modelled algorithms of ``op`` that cannot run this group, with the reason."""
    topo = as_topology(fabric, gpus)
    out: dict[Algorithm, str] = {}
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
    assert isinstance(alg, Algorithm)
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
    assert isinstance(alg, Algorithm)
    why = _why_not(op, alg, gpus, topo)
    if why is not None:
        raise InputError(why)
    if gpus == 1:
        return _cost(op, alg, message_bytes, 1, 0.0, 0.0)
    lat, bw = _terms(op, alg, message_bytes, gpus, topo)
    return _cost(op, alg, message_bytes, gpus, lat, bw)
