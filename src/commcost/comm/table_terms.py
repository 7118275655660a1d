"""The table terms of :mod:`commcost.comm.algorithms`: each algorithm's latency and bandwidth terms on the
two-tier fabric (ring, tree, in-network, halving-doubling, hierarchical, direct, PAT), the fan-in loss of an
all-to-all, the tree's network bytes, and the identity memos the terms share.

Symbols as in :mod:`commcost.comm.algorithms`, whose module docstring states the equations; the choice between
algorithms and NCCL's protocol terms live there and in :mod:`commcost.comm.protocol_terms`.
"""

from __future__ import annotations

import math

from dataclasses import fields

from commcost.comm.collectives import Algorithm, Collective, CollectiveCost
from commcost.core.errors import InputError
from commcost.comm.topology import Link, Topology, network_oversubscription, place
from commcost.core.xp import is_array, namespace_of

from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from commcost.comm.topology import Placement
    from commcost.core.xp import FloatOrArray

D = TypeVar("D", bound="DataclassInstance")
R = TypeVar("R")

__all__ = ["LOCKSTEP_RING_OPS", "FAN_IN_SLOWDOWN_PER_DOUBLING", "fan_in_efficiency", "fan_in_slowdown_from", "tree_network_bytes", "derive", "clear_memos", "IdentityMemo"]

LOCKSTEP_RING_OPS = frozenset({Collective.ALL_GATHER, Collective.REDUCE_SCATTER})
"""Ring collectives whose every step, across nodes, waits for the network hop (module docstring,
"Across nodes"): all-gather and reduce-scatter. All-reduce keeps NCCL's own latency sum, which the
all-reduce tables were tuned on."""


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


def _max(a: FloatOrArray, b: FloatOrArray) -> FloatOrArray:
    """``max(a, b)`` of floats, element-wise when either is a numpy array (the array path, :func:`totals_many`)."""
    return namespace_of(a, b).maximum(a, b)


def _min(a: FloatOrArray, b: FloatOrArray) -> FloatOrArray:
    """``min(a, b)`` of floats, element-wise when either is a numpy array."""
    return namespace_of(a, b).minimum(a, b)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def derive(obj: D, **changes: Any) -> D:
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


_MEMOS: list[IdentityMemo[Any]] = []


def clear_memos() -> None:
    """Empty every :class:`IdentityMemo` (benchmarks time a first, unmemoised call with it)."""
    for memo in _MEMOS:
        memo.table.clear()


class IdentityMemo(Generic[R]):
    """Memoise ``fn(obj, *args)`` on the identity of the frozen ``obj`` and the (small, hashable) ``args``.

    Hashing a :class:`Topology` hashes every field of every link and its protocol model again on each
    call (microseconds, more than the formula it guards); identity is free. The entry holds ``obj``, so its
    ``id`` cannot be reused while cached; the table is emptied past ``maxsize`` entries. Only for
    functions of frozen inputs: equal objects of different identity are computed again, never confused.
    """

    __slots__ = ("fn", "table", "maxsize")

    def __init__(self, fn: Callable[..., R], maxsize: int = 8192) -> None:
        self.fn = fn
        self.table: dict[tuple[Any, ...], tuple[Any, R]] = {}
        self.maxsize = maxsize
        _MEMOS.append(self)

    def __call__(self, obj: Any, *args: Any) -> R:
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


def _place(gpus: int, topo: Topology) -> Placement:
    """:func:`commcost.comm.topology.place`, memoised on the frozen ``(P, topology)`` (placement does not
    depend on the message size, and every price of one group reuses it)."""
    return _placement(topo, gpus)


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
