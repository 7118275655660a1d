"""Links and two- or three-tier topologies: what the ranks of a group are connected by.

The drill's flat model is one :class:`Link` shared by every rank of the group.
Real clusters have two tiers (:class:`Topology`): an intra-node link (NVLink,
each GPU's share of the NVSwitch fabric) inside a node of ``G`` GPUs, and an
inter-node link (each GPU's own NIC) between ``N`` nodes, optionally
oversubscribed, optionally with in-network reduction (NVLS inside the node,
SHARP across nodes).

A group of ``P`` ranks is placed on nodes by :func:`place`: packed, the way
``torchrun --nproc-per-node G`` fills nodes -- ``n = ceil(P/G)`` nodes, the last
one possibly partly filled. A group inside one node uses the intra-node link
only.

A third tier (``pod_nodes`` set) groups the nodes into *pods*: the scalable unit of a
rail-optimised fat tree, whose nodes reach each other through one leaf switch, while traffic
between pods crosses the spine (two more switch hops, ``spine_latency_s``, and the spine's
share of bandwidth, ``1 / spine_oversubscription``). Multi-rack NVL72 is the case that needs
it: racks (the "nodes") of 72 GPUs, pods of 8 racks (NVIDIA's GB200 SuperPOD scalable unit),
the spine above. A group inside one pod is priced exactly as on the two-tier topology (tested).

A flat :class:`Link` is the one-tier special case: :func:`as_topology` turns it
into ``P`` nodes of one GPU each joined by that link, so every two-tier formula
reduces exactly to the drill's flat formula (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commcost.comm.link import Link
from commcost.core.errors import InputError
from commcost.core.validation import require_count, require_finite_positive
from commcost.comm.protocols import ProtocolModel

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.comm.protocols import ProtocolModel

__all__ = ["Link", "Topology", "Placement", "place", "as_topology", "network_oversubscription", "pods_spanned",
           "nodes_spanned"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """A two-tier fabric: nodes of ``gpus_per_node`` GPUs, joined by per-GPU NICs."""

    gpus_per_node: int
    """GPUs G in one node (one NVLink domain)."""
    nodes: int
    """Nodes available; a group may use fewer (see :func:`place`)."""
    intra: Link
    """Intra-node link per GPU (NVLink): achievable bandwidth B_i and per-step latency a_i."""
    inter: Link
    """Inter-node link per GPU (its NIC): achievable bandwidth B_e and per-step latency a_e."""
    oversubscription: float = 1.0
    """Oversubscription o >= 1 of the inter-node fabric: each NIC gets B_e / o across nodes."""
    in_network: Link | None = None
    """In-switch reduction inside the node (NVLS): its algorithm bandwidth per GPU and
    per-step latency; None when the node's switch cannot reduce."""
    inter_in_network: bool = False
    """True when the inter-node switches reduce too (SHARP): the cross-node part of the
    in-network algorithm then moves S instead of 2(n-1)/n * S per node."""
    base_latency_s: float = 0.0
    """Fixed cost of launching one collective (NCCL's ``baseLat``), added once, seconds."""
    name: str = "custom"
    """Where the numbers come from (a system preset's name, or ``custom``)."""
    full_bandwidth_nodes: int | None = None
    """Largest group (in nodes) that gets the full cross-node bandwidth; beyond it the fabric
    congests (:func:`network_oversubscription`). None: no degradation with node count."""
    slowdown_per_node_doubling: float = 0.0
    """Congestion ``k``: each doubling of the nodes past ``full_bandwidth_nodes`` divides the
    cross-node bandwidth by a further ``1 + k`` step (see :func:`network_oversubscription`)."""
    nic_on_intra_link: bool = False
    """True on PCIe-only nodes: a GPU's NIC traffic (GPUDirect RDMA) crosses the same PCIe link as its
    GPU-to-GPU traffic, so the intra-node tier carries the whole ring volume, not the ``(g-1)/g`` share
    of an NVLink node whose NICs hang off PCIe beside it."""
    pod_nodes: int | None = None
    """Third tier: nodes per pod (the scalable unit whose nodes share their leaf switches); a group
    spanning several pods crosses the spine. None: two tiers (every node one leaf hop away)."""
    spine_oversubscription: float = 1.0
    """``o_s >= 1``: the spine's bandwidth share; traffic of a group spanning several pods gets
    ``B_e / (o(n) o_s)`` per NIC (:func:`network_oversubscription`). 1 with two tiers."""
    spine_latency_s: float = 0.0
    """Extra latency of one network step that crosses the spine (leaf -> spine -> leaf), seconds."""
    nics_per_gpu: int = 1
    """NIC ports each GPU has for the scale-out network (``inter`` is their sum per GPU). NCCL's ring and tree
    channels spread over every port (at most 32 a node); a point-to-point transfer (all-to-all) drives every
    port of its GPU too: its channels to a remote peer (at least one per local NIC, src/graph/paths.cc
    ``ncclTopoGetNchannels``) take the GPU's NICs in turn (src/graph/topo.cc ``ncclTopoGetLocalNetType``:
    ``net += channelId % netsPerGpu``), but never another GPU's NIC ("Alltoall cannot aggregate the bandwidth of
    multiple NICs", NVIDIA/nccl-tests#267, said of one NIC per GPU). 1: one NIC per GPU."""
    incast_rate_cut: bool = False
    """True on a fabric whose congestion control cuts a sender's rate when flows converge on one port (RoCE v2:
    ECN marks and PFC pauses, DCQCN rate cuts; fabrics.json ``congestion_control`` = ``ecn_pfc``): an all-to-all
    across more than two nodes then reaches only the fan-in share of its ports
    (:func:`commcost.comm.algorithms.fan_in_efficiency`). False: InfiniBand's credit-based flow control, EFA's
    SRD, TCP (no all-to-all table), custom topologies."""
    network_floor_s: float = 0.0
    """``t_f``: the least time of any collective whose group spans nodes, on a network with a per-message host
    cost (GPUDirect-TCPX/TCPXO, where the data or its control path crosses the host's TCP stack): the latency
    term of such a collective is ``max(latency, t_f)`` (:func:`commcost.comm.algorithms.collective_cost`). A
    fabric property (fabrics.json ``collective_floor_s``, with its source); 0: no floor (RDMA fabrics)."""
    multi_pod_caution: str | None = None
    """Where the preset's figures for a group across its pods rest on a constant fitted on one table (systems.json
    ``multi_pod_caution``, set by :func:`commcost.comm.systems.system_topology`); None: nothing to caution."""
    caution_spine_oversubscription: float = 1.0
    """The spine share the caution was written for (the preset's own): a topology whose spine someone else gave
    carries no caution (:meth:`commcost.comm.fabric_model.FabricModel.scope_warning`)."""
    unlinked_peers: int = 0
    """``u``: GPUs of a full node a GPU has no direct intra-node link to (DGX-1's hybrid cube-mesh: 3 of the other
    7, all behind the other CPU socket). NCCL sends to them through host memory (its SHM transport: point-to-point
    is off across CPU sockets, src/graph/paths.cc ``p2pLevel = PATH_PXB``), at ``unlinked_bandwidth_bytes_per_s``;
    rings avoid them. Applies to a group that fills its nodes (a part-node group is taken as placed on linked
    GPUs). 0: every GPU of a node is linked to every other (NVSwitch, a full mesh)."""
    unlinked_bandwidth_bytes_per_s: float = 0.0
    """``B_u``: each GPU's share of the path to its unlinked peers, bytes/s per direction (0 when ``u`` is 0)."""
    protocols: ProtocolModel | None = None
    """NCCL's protocol model (LL / LL128 / Simple, :mod:`commcost.comm.protocols`): each algorithm
    runs under the fastest protocol for the size, and ``auto`` chooses among the algorithms
    NCCL has. None (custom topologies, a flat Link): one protocol, the links' own alpha and beta."""

    def __post_init__(self) -> None:
        require_count("gpus_per_node", self.gpus_per_node)
        require_count("nodes", self.nodes)
        if not isinstance(self.intra, Link) or not isinstance(self.inter, Link):
            raise InputError("intra and inter must be Link objects")
        if self.in_network is not None and not isinstance(self.in_network, Link):
            raise InputError("in_network must be a Link or None")
        require_finite_positive("oversubscription", self.oversubscription)
        if self.oversubscription < 1:
            raise InputError(f"oversubscription must be >= 1 (1 = non-blocking), got {self.oversubscription:g}")
        require_finite_positive("base_latency_s", self.base_latency_s, allow_zero=True)
        if self.full_bandwidth_nodes is not None:
            require_count("full_bandwidth_nodes", self.full_bandwidth_nodes)
        require_finite_positive("slowdown_per_node_doubling", self.slowdown_per_node_doubling, allow_zero=True)
        if self.pod_nodes is not None:
            require_count("pod_nodes", self.pod_nodes)
        require_finite_positive("spine_oversubscription", self.spine_oversubscription)
        if self.spine_oversubscription < 1:
            raise InputError(f"spine_oversubscription must be >= 1 (1 = non-blocking spine), "
                             f"got {self.spine_oversubscription:g}")
        require_finite_positive("spine_latency_s", self.spine_latency_s, allow_zero=True)
        require_count("nics_per_gpu", self.nics_per_gpu)
        require_finite_positive("network_floor_s", self.network_floor_s, allow_zero=True)
        if isinstance(self.unlinked_peers, bool) or not isinstance(self.unlinked_peers, int) or not (
                0 <= self.unlinked_peers < self.gpus_per_node):
            raise InputError(f"unlinked_peers must be an integer in [0, gpus_per_node), got {self.unlinked_peers!r}")
        require_finite_positive("unlinked_bandwidth_bytes_per_s", self.unlinked_bandwidth_bytes_per_s,
                                allow_zero=self.unlinked_peers == 0)
        if self.pod_nodes is None and (self.spine_oversubscription != 1 or self.spine_latency_s != 0):
            raise InputError("spine_oversubscription and spine_latency_s describe a third tier: give pod_nodes too")
        if self.protocols is not None:
            # imported here: the drill's flat path never builds a protocol model

            if not isinstance(self.protocols, ProtocolModel):
                raise InputError("protocols must be a ProtocolModel or None")

    @property
    def total_gpus(self) -> int:
        """``G * nodes``: the most ranks a group can have."""
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """A group of ``P`` ranks packed onto the nodes of a :class:`Topology`."""

    gpus: int
    """Ranks P in the group."""
    nodes: int
    """Nodes n the group spans, ``ceil(P / G)``."""
    gpus_per_node: int
    """Ranks g on the fullest node, ``min(P, G)``: sets the intra-node step count."""
    min_gpus_per_node: int
    """Ranks on the emptiest node, ``P - (n-1) G``: its NICs carry a node's share of traffic."""
    pods: int = 1
    """Pods m the group spans, ``ceil(n / pod_nodes)`` (1 on a two-tier topology)."""

    def __post_init__(self) -> None:
        for name in ("gpus", "nodes", "gpus_per_node", "min_gpus_per_node", "pods"):
            require_count(name, getattr(self, name))
        if self.min_gpus_per_node > self.gpus_per_node:
            raise InputError(f"min_gpus_per_node {self.min_gpus_per_node} is above gpus_per_node "
                             f"{self.gpus_per_node}")

    @property
    def even(self) -> bool:
        """True when every node holds the same number of ranks."""
        return self.gpus_per_node == self.min_gpus_per_node


def place(gpus: int, topology: Topology) -> Placement:
    """Pack ``gpus`` ranks onto ``topology``'s nodes (``n = ceil(P/G)``).

    Raises :class:`InputError` if the group needs more nodes than the topology has.
    """
    require_count("gpus", gpus)
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a commcost.Topology, got {type(topology).__name__}")
    G = topology.gpus_per_node
    n = -(-gpus // G)
    if n > topology.nodes:
        raise InputError(
            f"a group of {gpus} GPUs needs ceil({gpus}/{G}) = {n} nodes, "
            f"but the topology has {topology.nodes} (nodes * gpus_per_node = {topology.total_gpus})")
    g = min(gpus, G)
    return Placement(gpus=gpus, nodes=n, gpus_per_node=g, min_gpus_per_node=gpus - (n - 1) * G,
                     pods=pods_spanned(topology, n))


def nodes_spanned(gpus: int, gpus_per_node: int) -> int:
    """``ceil(P / G)``: the nodes a group of ``P`` ranks spans, packed ``G`` to a node (as nccl-tests'
    ``mpirun`` fills nodes)."""
    require_count("gpus", gpus)
    require_count("gpus_per_node", gpus_per_node)
    return -(-gpus // gpus_per_node)


def pods_spanned(topology: Topology, nodes: int) -> int:
    """Pods ``m = ceil(n / pod_nodes)`` a group of ``nodes`` packed nodes spans (1 without a third tier)."""
    if topology.pod_nodes is None:
        return 1
    return math.ceil(nodes / topology.pod_nodes)


def as_topology(fabric: Link | Topology, gpus: int) -> Topology:
    """A :class:`Topology` for ``fabric``: a flat Link becomes ``P`` one-GPU nodes on that link.

    With one GPU per node there is no intra-node step and the inter-node link is the
    flat link, so ring, tree and halving-doubling reduce to their flat formulas.
    """
    if isinstance(fabric, Topology):
        return fabric
    if isinstance(fabric, Link):
        require_count("gpus", gpus)
        return Topology(gpus_per_node=1, nodes=gpus, intra=fabric, inter=fabric, name="flat")
    raise InputError(f"fabric must be a Link or a Topology, got {type(fabric).__name__}")


def network_oversubscription(topology: Topology, nodes: int) -> float:
    """Effective oversubscription ``o(n)`` of the cross-node fabric for a group spanning ``nodes`` nodes.

    ``o(n) = o (1 + k max(0, log2(n / n_0)))`` with ``o`` the preset's oversubscription, ``n_0``
    its ``full_bandwidth_nodes`` and ``k`` its ``slowdown_per_node_doubling``: up to ``n_0`` nodes
    the fabric delivers its (oversubscribed) bandwidth; each doubling past it costs ``k`` more
    (congestion in the spine tier of a fat tree, where flows from more leaves collide). Without
    ``n_0`` it is ``o`` at every size. The rule and its constants for a preset are derived from a
    measured sweep over node count (docs/fabrics.md, "Scale").

    On a three-tier topology a group spanning more than one pod also pays the spine's share:
    ``o(n) = o o_s (1 + k max(0, log2(n / n_0)))``; inside one pod ``o_s`` does not apply.
    """
    o = topology.oversubscription
    if pods_spanned(topology, nodes) > 1:
        o *= topology.spine_oversubscription
    n0 = topology.full_bandwidth_nodes
    if n0 is None or nodes <= n0:
        return o
    return o * (1.0 + topology.slowdown_per_node_doubling * math.log2(nodes / n0))
