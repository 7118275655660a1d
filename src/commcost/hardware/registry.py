"""Presets (GPUs, fabrics, systems, models) and the topology a system preset gives.

The one reader of each preset file: ``gpus()``, ``fabrics()``, ``systems()`` and ``models()``
(with the model aliases, :data:`MODEL_ALIASES`, resolved by :func:`model_key`). The one shape class
(:class:`commcost.workload.transformer.TransformerSpec`, which every command, the DDP timeline
included, works on) gets its row from here.

The numbers live in ``commcost/hardware/{gpus,fabrics,systems,models}.json`` (STYLE.md,
conventions 2 and 6): every number has its unit in its key, bandwidths say
whether they are per direction or bidirectional, and every entry names its
source. A system's topology uses each fabric's *achievable* bandwidth (what NCCL
reaches), not its line rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from commcost.core.errors import InputError
from commcost.hardware import load_preset_file, lookup
from commcost.comm.protocols import ProtocolModel
from commcost.comm.topology import Link, Topology
from commcost.core.validation import require_count

__all__ = ["PresetEntry", "gpus", "gpu_row", "kernels", "fabrics", "systems", "system_topology", "system_group",
           "system_names", "preset_entries", "MODEL_ALIASES", "models", "model_key", "model_row"]


def _table(file_name: str) -> dict[str, Any]:
    return {k: v for k, v in load_preset_file(file_name).items() if not k.startswith("_")}


def gpus() -> dict[str, dict[str, Any]]:
    """GPU presets by name (``gpus.json``)."""
    return _table("gpus.json")


@lru_cache(maxsize=64)
def gpu_row(gpu: str) -> tuple[float, float]:
    """``(memory_bytes, memory_bandwidth_bytes_per_s)`` of GPU preset ``gpu`` (gpus.json, parsed once):
    the one reader of a GPU's memory for plan, search, budget and the compute model."""
    row = lookup(gpus(), gpu, "GPU")
    return float(row["memory_bytes"]), float(row["memory_bandwidth_bytes_per_s"])


@lru_cache(maxsize=1)
def kernels() -> dict[str, Any]:
    """``kernels.json`` (per-GPU SMs, GEMM and attention efficiencies, sustained fractions), parsed once.
    Read-only for callers; an accuracy benchmark that overrides a fraction clears this cache after."""
    return load_preset_file("kernels.json")


def fabrics() -> dict[str, dict[str, Any]]:
    """Fabric presets by name (``fabrics.json``)."""
    return _table("fabrics.json")


def system_gpu(name: str) -> str:
    """The GPU preset of system ``name`` (exact key; unknown names list the valid ones)."""
    return lookup(systems(), name, "system")["gpu"]


def systems() -> dict[str, dict[str, Any]]:
    """System presets by name (``systems.json``)."""
    return _table("systems.json")


def system_names() -> list[str]:
    """Sorted names of the system presets."""
    return sorted(systems())


MODEL_ALIASES = {"125m": "gpt2-small", "1.3b": "gpt2-xl", "7b": "llama2-7b"}
"""The scaling-analysis seed's model names, as aliases of the registry's shapes (the seed calls them
"125M (GPT-2 small)", "1.3B (GPT-2 XL equiv)", "7B (Llama-7B equiv)"); every ``--model`` flag takes
them; ``commcost scaling`` keeps the seed's own rounded parameter counts and compute times for them,
to reproduce the seed."""


def models() -> dict[str, dict[str, Any]]:
    """Model presets by name (``models.json``): the one loader of the model registry."""
    return _table("models.json")


def model_key(name: str) -> str:
    """The registry key of model ``name``: an alias of :data:`MODEL_ALIASES` resolved, any other
    name unchanged (it is looked up by exact key later)."""
    return MODEL_ALIASES.get(name, name)


def model_row(name: str, what: str = "model") -> dict[str, Any]:
    """The ``models.json`` row of model ``name`` (exact key or an alias); an unknown name lists the
    valid ones, calling the model ``what`` in the message."""
    return lookup(models(), model_key(name), what)


def _link(fabric: dict[str, Any]) -> Link:
    return Link(bandwidth_bytes_per_s=float(fabric["achievable_bandwidth_bytes_per_s"]),
                latency_s=float(fabric["step_latency_s"]))


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
    table = systems()
    sysp = lookup(table, name, "system")
    require_count("nodes", nodes)
    G = int(sysp["gpus_per_node"])
    if gpus_per_node is not None:
        require_count("gpus_per_node", gpus_per_node)
        if gpus_per_node > G:
            raise InputError(f"system {name!r} has {G} GPUs per node, asked for gpus_per_node={gpus_per_node}")
        G = gpus_per_node
    fab = fabrics()
    intra = lookup(fab, sysp["intra_fabric"], "fabric")
    inter = lookup(fab, sysp["inter_fabric"], "fabric")
    in_network = None
    if sysp["in_network"] and nvls:
        if "in_network_bandwidth_bytes_per_s" not in intra:
            raise InputError(f"system {name!r} says in_network but fabric {sysp['intra_fabric']!r} has no NVLS figures")
        in_network = Link(bandwidth_bytes_per_s=float(intra["in_network_bandwidth_bytes_per_s"]),
                          latency_s=float(intra["in_network_step_latency_s"]))
    protocols = None
    if sysp["nccl_protocols"]:
        protocols = ProtocolModel(ll_max_bus_bandwidth_bytes_per_s=(
            float(sysp["ll_max_bus_bandwidth_one_node_bytes_per_s"]),
            float(sysp["ll_max_bus_bandwidth_two_nodes_bytes_per_s"]),
            float(sysp["ll_max_bus_bandwidth_more_nodes_bytes_per_s"])), source=sysp["protocols_source"],
            gpu_generation=sysp.get("nccl_gpu_generation"), ll128_enabled=bool(sysp.get("nccl_ll128", True)),
            net_overhead_s=2.0e-6 if sysp.get("host_cpu_vendor") == "amd" else 1.0e-6,
            **({"nvls_channels": int(sysp["nvls_channels_one_node"]),
                "nvls_channels_multi_node": int(sysp["nvls_channels_more_nodes"])}
               if "nvls_channels_one_node" in sysp else {}))
    ports = int(sysp.get("nics_per_gpu", 1))  # a GPU's scale-out bandwidth is its ports' sum
    inter_link = _link(inter) if ports == 1 else Link(
        bandwidth_bytes_per_s=ports * float(inter["achievable_bandwidth_bytes_per_s"]),
        latency_s=float(inter["step_latency_s"]))
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
        **({"unlinked_peers": int(intra["unlinked_peers"]),
            "unlinked_bandwidth_bytes_per_s": float(intra["unlinked_bandwidth_bytes_per_s"])}
           if "unlinked_peers" in intra and G == int(sysp["gpus_per_node"]) else {}),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetEntry:
    """One preset as ``commcost presets`` lists it."""

    kind: str
    """``gpu``, ``fabric`` or ``system``."""
    name: str
    """Its exact look-up key."""
    summary: str
    """One line of its main numbers, with units."""
    source: str
    """Where the numbers come from."""


def preset_entries() -> list[PresetEntry]:
    """Every preset, GPUs then fabrics then systems, for listing."""
    out: list[PresetEntry] = []
    for name, g in gpus().items():
        out.append(PresetEntry(kind="gpu", name=name, source=g["source"], summary=(
            f"{g['dense_bf16_flops_per_s'] / 1e12:,.0f} TFLOP/s dense bf16, "
            f"{g['memory_bytes'] / 1e9:g} GB, {g['memory_bandwidth_bytes_per_s'] / 1e12:g} TB/s HBM")))
    for name, f in fabrics().items():
        direction = "per GPU per direction" if f["direction"].startswith("per direction") else f["direction"]
        s = (f"{f['tier']}: {f['achievable_bandwidth_bytes_per_s'] / 1e9:g} GB/s achievable {direction} "
             f"(line {f['line_bandwidth_bytes_per_s'] / 1e9:g} GB/s), {f['step_latency_s'] * 1e6:g} us per step")
        if "in_network_bandwidth_bytes_per_s" in f:
            s += f", NVLS {f['in_network_bandwidth_bytes_per_s'] / 1e9:g} GB/s algbw"
        out.append(PresetEntry(kind="fabric", name=name, summary=s,
                               source=f"{f['source']}; achievable: {f['achievable_source']}"))
    for name, sp in systems().items():
        out.append(PresetEntry(kind="system", name=name, source=sp["source"], summary=(
            f"{sp['gpus_per_node']} x {sp['gpu']} per node, {sp['intra_fabric']} inside, "
            f"one {sp['inter_fabric']} NIC per GPU across nodes"
            f"{', NVLS' if sp['in_network'] else ''}"
            f"{(', NCCL protocols LL/LL128/Simple' if sp.get('nccl_ll128', True) else ', NCCL protocols LL/Simple (LL128 off: no NVLink)') if sp['nccl_protocols'] else ''}"
            f"{', congests past ' + str(sp['full_bandwidth_nodes']) + ' node(s)' if sp.get('full_bandwidth_nodes') else ''}"
            f"{', pods of ' + str(sp['pod_nodes']) + ' nodes under a spine (x' + format(sp.get('spine_oversubscription', 1.0), 'g') + ' across pods)' if sp.get('pod_nodes') else ''}")))
    return out


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
    G = int(lookup(systems(), name, "system")["gpus_per_node"]) if gpus_per_node is None else gpus_per_node
    require_count("gpus_per_node", G)
    if gpus is not None:
        require_count("gpus", gpus)
    if nodes is None:
        P = G if gpus is None else gpus
        nodes = -(-P // G)
    else:
        require_count("nodes", nodes)
        P = nodes * G if gpus is None else gpus
        if P != nodes * G and -(-P // G) != nodes:
            raise InputError(f"--gpus {P} does not match --nodes {nodes} x --gpus-per-node {G} = {nodes * G} "
                             f"(a group of {P} packs onto ceil({P}/{G}) = {-(-P // G)} node(s); "
                             f"to spread it, give --gpus-per-node {P // nodes if P % nodes == 0 else 'P/nodes'})")
    topo = system_topology(name, nodes=nodes, gpus_per_node=gpus_per_node,
                           oversubscription=oversubscription, nvls=nvls)
    return topo, P
