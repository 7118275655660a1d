"""The topology a system preset gives: :mod:`commcost.hardware.registry` reads the rows (systems,
fabrics), this module builds :class:`commcost.comm.topology.Topology` from them. Rows live below
``comm`` in the layer order (docs/architecture.md, "Layout"); the types built from them live here.

A system's topology uses each fabric's *achievable* bandwidth (what NCCL reaches), not its line rate.
"""

from __future__ import annotations

from typing import Any

from commcost.comm.protocols import ProtocolModel
from commcost.comm.topology import Link, Topology
from commcost.core.errors import InputError
from commcost.core.limits import MAX_GPUS, MAX_NODES
from commcost.core.validation import require_at_most, require_count
from commcost.hardware import lookup
from commcost.hardware import registry  # read through the module: a benchmark swaps registry.fabrics

__all__ = ["system_topology", "system_group"]


def _link(fabric: dict[str, Any]) -> Link:
    return Link(bandwidth_bytes_per_s=float(fabric["achievable_bandwidth_bytes_per_s"]),
                latency_s=float(fabric["step_latency_s"]))


def _unlinked(intra: dict[str, Any]) -> dict[str, Any]:
    """A full node's peers that no NVLink reaches (DGX-1's hybrid cube mesh), where the fabric names them."""
    if "unlinked_peers" not in intra:
        return {}
    return {"unlinked_peers": int(intra["unlinked_peers"]),
            "unlinked_bandwidth_bytes_per_s": float(intra["unlinked_bandwidth_bytes_per_s"])}


def _caution(sysp: dict[str, Any]) -> dict[str, Any]:
    """The preset's caution for groups across its pods and the spine it was written for (systems.json)."""
    return {"multi_pod_caution": sysp.get("multi_pod_caution"),
            "caution_spine_oversubscription": float(sysp.get("spine_oversubscription", 1.0))}


def _protocols(sysp: dict[str, Any]) -> ProtocolModel | None:
    """NCCL's protocol model of a system preset with ``nccl_protocols`` (its ``llMaxBw`` caps); None without."""
    if not sysp["nccl_protocols"]:
        return None
    return ProtocolModel(ll_max_bus_bandwidth_bytes_per_s=(
        float(sysp["ll_max_bus_bandwidth_one_node_bytes_per_s"]),
        float(sysp["ll_max_bus_bandwidth_two_nodes_bytes_per_s"]),
        float(sysp["ll_max_bus_bandwidth_more_nodes_bytes_per_s"])), source=sysp["protocols_source"],
        gpu_generation=sysp.get("nccl_gpu_generation"), ll128_enabled=bool(sysp.get("nccl_ll128", True)),
        net_overhead_s=2.0e-6 if sysp.get("host_cpu_vendor") == "amd" else 1.0e-6,
        **({"nvls_channels": int(sysp["nvls_channels_one_node"]),
            "nvls_channels_multi_node": int(sysp["nvls_channels_more_nodes"])}
           if "nvls_channels_one_node" in sysp else {}))


def system_topology(name: str, *, nodes: int = 1, gpus_per_node: int | None = None,
                    oversubscription: float | None = None, nvls: bool = True) -> Topology:
    """The two- or three-tier :class:`Topology` of ``nodes`` nodes of system preset ``name``.

    ``gpus_per_node`` may be lowered (a job using 4 of 8 GPUs per node) but not raised
    past the preset's NVLink domain; ``oversubscription`` overrides the preset's.
    ``nvls=False`` is a run with ``NCCL_NVLS_ENABLE=0``: no in-switch reduction, so the
    in-network algorithm (NVLS, NVLS tree) is not available.
    A preset with ``nccl_protocols`` gets NCCL's protocol model (:mod:`commcost.comm.protocols`)
    with its ``llMaxBw`` caps.
    """
    table = registry.systems()
    sysp = lookup(table, name, "system")
    require_count("nodes", nodes)
    require_at_most("nodes", nodes, MAX_NODES)
    G = int(sysp["gpus_per_node"])
    if gpus_per_node is not None:
        require_count("gpus_per_node", gpus_per_node)
        if gpus_per_node > G:
            raise InputError(f"system {name!r} has {G} GPUs per node, asked for gpus_per_node={gpus_per_node}")
        G = gpus_per_node
    fab = registry.fabrics()
    intra = lookup(fab, sysp["intra_fabric"], "fabric")
    inter = lookup(fab, sysp["inter_fabric"], "fabric")
    in_network = None
    if sysp["in_network"] and nvls:
        if "in_network_bandwidth_bytes_per_s" not in intra:
            raise InputError(f"system {name!r} says in_network but fabric {sysp['intra_fabric']!r} has no NVLS figures")
        in_network = Link(bandwidth_bytes_per_s=float(intra["in_network_bandwidth_bytes_per_s"]),
                          latency_s=float(intra["in_network_step_latency_s"]))
    protocols = _protocols(sysp)
    ports = int(sysp.get("nics_per_gpu", 1))  # a GPU's scale-out bandwidth is its ports' sum
    inter_link = _link(inter) if ports == 1 else Link(
        bandwidth_bytes_per_s=ports * float(inter["achievable_bandwidth_bytes_per_s"]),
        latency_s=float(inter["step_latency_s"]))
    unlinked = _unlinked(intra) if G == int(sysp["gpus_per_node"]) else {}
    return Topology(
        gpus_per_node=G, nodes=nodes, intra=_link(intra), inter=inter_link, nics_per_gpu=ports,
        oversubscription=float(sysp["oversubscription"] if oversubscription is None else oversubscription),
        in_network=in_network, inter_in_network=bool(sysp["inter_in_network"]),
        base_latency_s=float(sysp["base_latency_s"]), name=name, protocols=protocols,
        full_bandwidth_nodes=sysp.get("full_bandwidth_nodes"),
        slowdown_per_node_doubling=float(sysp.get("slowdown_per_node_doubling", 0.0)),
        nic_on_intra_link=bool(sysp.get("nic_on_intra_link", False)),
        pod_nodes=sysp.get("pod_nodes"),
        spine_oversubscription=float(sysp.get("spine_oversubscription", 1.0)),
        spine_latency_s=float(sysp.get("spine_latency_s", 0.0)),
        network_floor_s=float(inter.get("collective_floor_s", 0.0)),
        incast_rate_cut=inter.get("congestion_control") == "ecn_pfc",
        **unlinked, **_caution(sysp),
    )


def system_group(name: str, *, nodes: int | None = None, gpus_per_node: int | None = None,
                 gpus: int | None = None, oversubscription: float | None = None,
                 nvls: bool = True) -> tuple[Topology, int]:
    """``(topology, P)`` for a group on system ``name``, as the ``--system`` flags mean it.

    Without ``nodes``: ``P = gpus`` (default one full node) packed on ``ceil(P/G)`` nodes.
    With ``nodes``: ``P`` defaults to ``nodes * G``; a smaller ``gpus`` is accepted when it packs
    onto exactly those nodes (``ceil(P/G) = nodes``: part of a node, as nccl-tests on 4 of a
    DGX's 8 GPUs, or a last node partly used), and is priced on the ``P`` GPUs it uses; any
    other ``gpus`` is an error showing the arithmetic.
    """
    G = int(lookup(registry.systems(), name, "system")["gpus_per_node"]) if gpus_per_node is None else gpus_per_node
    require_count("gpus_per_node", G)
    if gpus is not None:
        require_count("gpus", gpus)
        require_at_most("gpus", gpus, MAX_GPUS)
    if nodes is None:
        P = G if gpus is None else gpus
        nodes = -(-P // G)
    else:
        require_count("nodes", nodes)
        require_at_most("nodes", nodes, MAX_NODES)
        P = nodes * G if gpus is None else gpus
        if P != nodes * G and -(-P // G) != nodes:
            raise InputError(f"--gpus {P} does not match --nodes {nodes} x --gpus-per-node {G} = {nodes * G} "
                             f"(a group of {P} packs onto ceil({P}/{G}) = {-(-P // G)} node(s); "
                             f"to spread it, give --gpus-per-node {P // nodes if P % nodes == 0 else 'P/nodes'})")
    topo = system_topology(name, nodes=nodes, gpus_per_node=gpus_per_node,
                           oversubscription=oversubscription, nvls=nvls)
    return topo, P
