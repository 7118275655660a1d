"""The one resolver: every subcommand's fabric flags -> one CommModel (:mod:`commcost.comm.model`).

Flags (each command adds those that apply): the drill's flat link ``--bw``/``--latency``; a
system preset ``--system``/``--nodes``/``--gpus-per-node``; a custom two-tier topology
(``collective``: ``--intra-bw`` ... ``--oversubscription``); a calibrated ``--profile`` (with
``--extrapolate`` to use it beyond the op, ranks or nodes it was measured on); ``--backend``
(whose algorithms ``auto`` chooses among) and ``--algorithm``. :func:`resolve_comm_model` checks
the combination, builds the model once and says what it is (a header line, a JSON object, and
a warning on stderr when a figure is extrapolated or is a documented lower bound).
"""

from __future__ import annotations

import argparse
from collections import namedtuple

from commcost.cli import _args as A
from commcost.cli._args import warn as one_warning
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError

__all__ = ["add_group_arguments", "add_system_arguments", "add_profile_argument", "add_backend_argument",
           "add_nvls_argument",
           "add_custom_topology_arguments", "FabricFlags", "Resolved", "resolve_comm_model", "intra_node_model", "warn",
           "bucket_algorithms_note", "resolve_trace_model", "topology_model", "seed_fabric_models"]


def add_group_arguments(p: argparse.ArgumentParser, *, gpus_per_node_help: str | None = None,
                        extra=None) -> argparse._ArgumentGroup:
    """The data-parallel group: ``--gpus``, the flat link ``--bw``/``--latency`` (the drill's),
    ``extra(group)`` if given, then ``--system``/``--nodes``/``--gpus-per-node``/``--algorithm``,
    ``--backend`` and ``--profile``/``--extrapolate``. Returns the group."""
    g = p.add_argument_group("the data-parallel group")
    g.add_argument("--gpus", type=A.positive_int,
                   help="ranks P in the data-parallel group (with --system: default nodes x GPUs per node)")
    g.add_argument("--bw", type=A.rate_gb_per_s, help="achievable per-rank bandwidth B, GB/s (1e9; or with a "
                   "unit: 400Gbps, 50GB/s)")
    g.add_argument("--latency", type=A.latency_us, help="per ring-step latency a, microseconds (or 20us, 0.02ms)")
    if extra is not None:
        extra(g)
    add_system_arguments(g, gpus_per_node_help=gpus_per_node_help)
    add_backend_argument(g)
    add_profile_argument(g)
    return g


def add_system_arguments(g: argparse._ArgumentGroup, *, gpus_per_node_help: str | None = None) -> None:
    """Add ``--system``, ``--nodes``, ``--algorithm`` and ``--gpus-per-node`` to ``g``."""
    g.add_argument("--system", help="two-tier system preset (see `commcost presets`), e.g. dgx-h100: "
                   "replaces --bw/--latency; collectives use its tiers and the fastest algorithm")
    g.add_argument("--nodes", type=A.positive_int, help="with --system: nodes in the group")
    g.add_argument("--gpus-per-node", type=A.positive_int,
                   help=gpus_per_node_help or "with --system: GPUs used per node (default: the preset's)")
    g.add_argument("--algorithm", type=A.algorithm_name, default="auto",
                   help="auto (default: the fastest the backend runs), ring, tree, in_network, "
                        "halving_doubling, hierarchical, direct")
    add_nvls_argument(g)


def add_nvls_argument(g) -> None:
    """Add ``--no-nvls``: the system preset as run with ``NCCL_NVLS_ENABLE=0``."""
    g.add_argument("--no-nvls", action="store_true",
                   help="with --system: as run with NCCL_NVLS_ENABLE=0 (no in-switch reduction; ring and tree only)")


def add_backend_argument(g) -> None:
    """Add ``--backend`` (nccl, gloo): whose algorithms ``auto`` chooses among."""
    g.add_argument("--backend", default="nccl", choices=("nccl", "gloo"),
                   help="communication backend whose algorithms auto chooses among (default nccl: ring, "
                        "tree, NVLS for all-reduce)")


def add_profile_argument(g) -> None:
    """Add ``--profile FILE`` (a calibrated profile from ``commcost fit -o FILE``) and ``--extrapolate``."""
    g.add_argument("--profile", help="calibrated profile (commcost fit -o FILE): replaces --bw and --latency; "
                   "every fitted size regime is used")
    g.add_argument("--extrapolate", action="store_true",
                   help="use --profile beyond the op, ranks or nodes it was measured on (a warning says what "
                        "is extrapolated)")


def add_custom_topology_arguments(f) -> None:
    """A custom two-tier topology (``collective``)."""
    f.add_argument("--intra-bw", type=A.rate_gb_per_s, help="custom: intra-node bandwidth per GPU, GB/s")
    f.add_argument("--intra-latency", type=A.nonneg_latency_us, help="custom: intra-node per-step latency, us")
    f.add_argument("--inter-bw", type=A.rate_gb_per_s, help="custom: inter-node bandwidth per GPU (its NIC), GB/s")
    f.add_argument("--inter-latency", type=A.nonneg_latency_us, help="custom: inter-node per-step latency, us")
    f.add_argument("--nvls-bw", type=A.rate_gb_per_s, help="custom: in-switch reduction (NVLS) algbw per GPU, GB/s")
    f.add_argument("--nvls-latency", type=A.nonneg_latency_us, default=0.0, help="custom: NVLS per-step latency, us")
    f.add_argument("--launch-latency", type=A.nonneg_latency_us, default=0.0,
                   help="custom: fixed launch latency per collective, us (default 0)")
    f.add_argument("--oversubscription", type=A.positive_float,
                   help="inter-node oversubscription o >= 1 (each NIC gets B/o across nodes)")
    f.add_argument("--pod-nodes", type=A.positive_int,
                   help="third tier: nodes per pod (under one leaf layer); groups spanning pods cross the spine "
                        "(custom topology, or with --system: overrides the preset's)")
    f.add_argument("--spine-oversubscription", type=A.positive_float,
                   help="third tier: the spine's oversubscription o_s >= 1 (each NIC gets B/(o o_s) across pods)")
    f.add_argument("--spine-latency", type=A.nonneg_latency_us,
                   help="third tier: extra latency of a network step that crosses the spine, us")


class FabricFlags(namedtuple("FabricFlags", (
        "backend", "profile", "extrapolate", "system", "nodes", "gpus_per_node", "gpus", "no_nvls",
        "bandwidth_bytes_per_s", "latency_s", "custom_flags", "intra_bandwidth_bytes_per_s", "intra_latency_s",
        "inter_bandwidth_bytes_per_s", "inter_latency_s", "nvls_bandwidth_bytes_per_s", "nvls_latency_s",
        "launch_latency_s", "oversubscription", "third_tier_flags", "pod_nodes", "spine_oversubscription",
        "spine_latency_s", "given"),
        defaults=("nccl", None, False, None, None, None, None, False, None, None, False, None, None, None, None,
                  None, 0.0, 0.0, None, False, None, None, None, ()))):
    """The fabric flags of one command in SI units, built once from the Namespace by
    :func:`commcost.cli.inputs.fabric_flags` (the input builder, ``cli/inputs*.py``, is the one reader of
    the flags). ``backend``, ``profile`` (a path), ``extrapolate``, ``system``, ``nodes``, ``gpus_per_node``,
    ``gpus`` (None: not given), ``no_nvls``;
    the flat link ``bandwidth_bytes_per_s``/``latency_s`` (``--bw``/``--latency``); ``custom_flags``: the
    command has the custom two-tier flags (``collective``), then ``intra_*``, ``inter_*``, ``nvls_*``,
    ``launch_latency_s`` and ``oversubscription``; ``third_tier_flags``: it has ``--pod-nodes``,
    ``--spine-oversubscription`` and ``--spine-latency`` (``pod_nodes``, ``spine_oversubscription``,
    ``spine_latency_s``); ``given``: the flags given, as typed (``--bw``), in the order their errors name
    them. A named tuple, as :class:`Resolved`: the drill's start-up pays for every dataclass it creates."""

    __slots__ = ()


class Resolved(namedtuple("Resolved", ("comm", "gpus", "note", "info", "topology", "band_topology"),
                          defaults=(None, None))):
    """What :func:`resolve_comm_model` built: ``comm`` the CommModel; ``gpus`` the group's ranks P (None
    where the command takes a list); ``note`` a header line naming a profile or a documented lower bound
    (None for the drill's flat link); ``info`` the JSON of a profile (key ``profile``); ``topology`` the
    fabric's Topology for reports that describe it; ``band_topology`` the same Topology when a system
    preset is the only source of the link numbers (``--system`` without ``--profile``), the case the
    measured band of :mod:`commcost.comm.band` describes, and None otherwise (a flat link, a custom
    topology, a calibrated or tier profile: no band). A named tuple, not a frozen dataclass: it never leaves
    the CLI, and the drill's start-up pays for every dataclass it creates (benchmarks/cli_startup.py)."""

    __slots__ = ()


def intra_node_model(resolved: Resolved, *, bandwidth_bytes_per_s: float, latency_s: float | None) -> FlatLinkModel:
    """The CommModel of the drill's fix (e)3, one node's link: the system's own NVLink where a fabric was resolved,
    else ``--intra-bw`` at ``--intra-latency`` (``latency_s`` None: the flat link's latency, 0 without one)."""
    if resolved.topology is not None:
        return FlatLinkModel(link=resolved.topology.intra)
    flat = resolved.comm.flat_link
    if latency_s is None:
        latency_s = flat.latency_s if flat is not None else 0.0
    return FlatLinkModel(link=Link(bandwidth_bytes_per_s=bandwidth_bytes_per_s, latency_s=latency_s))


def topology_model(topology, *, backend: str = "nccl"):
    """The CommModel of a topology a command built from its own data (``scaling --gpus-per-node``: the
    analysis's NVLink inside nodes, InfiniBand across): a FabricModel on it, as every topology here is priced."""
    from commcost.comm.model import FabricModel

    return FabricModel(topology=topology, backend=backend)


def seed_fabric_models(keys: tuple[str, ...] | None = None, *, backend: str = "nccl") -> dict:
    """``{key: FlatLinkModel}`` for the scaling analysis's flat fabrics (``keys``, default all, in the file's
    order): each preset's one link, priced as the drill prices ``--bw``/``--latency``."""
    from commcost.analyses.scaling_seed import seed_fabrics
    from commcost.hardware import lookup

    table = seed_fabrics()
    presets = [lookup(table, k, "fabric") for k in (tuple(table) if keys is None else keys)]
    return {p.key: FlatLinkModel(link=p.link, backend=backend) for p in presets}


def warn(text: str) -> None:
    """One warning line on stderr (held until the run succeeds: :func:`commcost.cli._args.warn`)."""

    one_warning(text)


_CUSTOM = ("--intra-bw", "--intra-latency", "--inter-bw", "--inter-latency", "--nvls-bw")
_THIRD_TIER = ("--pod-nodes", "--spine-oversubscription", "--spine-latency")
"""Third-tier flags: part of a custom topology, or overrides of a system preset's pods and spine."""


def _resolve_system(f: FabricFlags, *, op: str, set_gpus: bool) -> Resolved:
    """The CommModel of ``--system`` (its third tier overridden by the flags): :func:`resolve_comm_model`'s
    system branch, with the scope warning when the command has one ``--gpus``."""
    from commcost.comm.model import FabricModel
    from commcost.comm.systems import system_group

    topo, P = system_group(f.system, nodes=f.nodes, gpus_per_node=f.gpus_per_node,
                           gpus=f.gpus if set_gpus else None, oversubscription=f.oversubscription,
                           nvls=not f.no_nvls)
    topo = _third_tier_override(f, topo)
    comm = FabricModel(topology=topo, backend=f.backend)
    w = None
    if set_gpus:
        w = comm.scope_warning(op, P)
        if w:
            warn(w)
    return Resolved(comm=comm, gpus=P if set_gpus else None, note=None if w is None else f"CAUTION: {w}",
                    info=None, topology=topo, band_topology=topo)


def resolve_comm_model(f: FabricFlags, *, op: str = "all_reduce", set_gpus: bool = True,
                       gpus_list: tuple[int, ...] | None = None) -> Resolved:
    """The CommModel of the flags (module docstring). ``set_gpus``: the command has one ``--gpus``
    (filled from the system or profile when absent: :attr:`Resolved.gpus`); ``gpus_list``: the GPU counts
    a scaling command will ask for (scope-checked against a profile)."""
    custom = [n for n in _CUSTOM if n in f.given] if f.custom_flags else []
    tier3 = [n for n in _THIRD_TIER if n in f.given] if f.third_tier_flags else []
    flat = [n for n in ("--bw", "--latency") if n in f.given]
    if f.no_nvls and f.system is None:
        A.fail("--no-nvls applies to a --system preset (a custom topology has NVLS only with --nvls-bw)")
    if f.extrapolate and f.profile is None:
        A.fail("--extrapolate applies to --profile; there is no profile here")
    if f.profile is not None:
        if flat:
            A.fail("--profile replaces --bw and --latency; give either the profile or both numbers")
        if f.system is not None or custom or tier3:
            A.fail("--profile and --system (or a custom topology) both describe the fabric; give one")
        return _resolve_profile(f, op=op, set_gpus=set_gpus, gpus_list=gpus_list)
    if f.system is not None:
        if flat or custom:
            A.fail(f"--system {f.system} takes its links from the preset; drop " + ", ".join(flat + custom))
        return _resolve_system(f, op=op, set_gpus=set_gpus)
    if tier3 and not custom:
        A.fail(f"{', '.join(tier3)} describe a third tier: they need --system (to override its "
               "pods and spine) or a custom topology (--intra-bw ...)")
    if f.nodes is not None and not custom:
        A.fail("--nodes needs --system (a preset to take nodes of) or a custom topology; without it give --gpus")
    if custom:
        if flat:
            A.fail("--bw/--latency describe a flat one-tier link; for two tiers use --intra-bw/--inter-bw "
                   "(or --system) instead")
        from commcost.comm.model import FabricModel

        topo, P = _custom_topology(f)
        return Resolved(comm=FabricModel(topology=topo, backend=f.backend), gpus=P, note=None, info=None,
                        topology=topo)
    if f.gpus_per_node is not None and f.custom_flags:
        A.fail("--gpus-per-node describes a two-tier topology: give --intra-bw/--intra-latency too (or --system)")
    for name, value in (("bw", f.bandwidth_bytes_per_s), ("latency", f.latency_s)):
        if value is None:
            A.fail(f"--{name} is required (or --system NAME with --nodes, or --profile FILE)")
    if set_gpus and f.gpus is None:
        A.fail("--gpus is required (or --system NAME with --nodes, or --profile FILE)")

    link = Link(bandwidth_bytes_per_s=f.bandwidth_bytes_per_s, latency_s=f.latency_s)
    note = flat_link_note(f.bandwidth_bytes_per_s, f.gpus if set_gpus else None, f.gpus_per_node)
    if note is not None:
        warn(note)
    return Resolved(comm=FlatLinkModel(link=link, backend=f.backend), gpus=f.gpus if set_gpus else None,
                    note=None, info=None)


NODE_GPUS = 8
"""GPUs (and NICs) of the usual training node: DGX/HGX A100 and H100 carry 8 GPUs and 8 compute NICs, one per
GPU (NVIDIA DGX A100 user guide: 8x ConnectX-6 HDR 200 Gb/s; DGX H100: 8x ConnectX-7 NDR 400 Gb/s)."""


def flat_link_note(bandwidth_bytes_per_s: float, gpus: int | None, gpus_per_node: int | None) -> str | None:
    """The one stderr line for a flat ``--bw`` link priced over a group wider than one node (``gpus_per_node``,
    else :data:`NODE_GPUS`), or None. A ring across nodes runs one channel per NIC, every NIC of a node at once:
    NCCL's bus bandwidth across nodes is about ``G x`` one NIC's (nccl-tests PERFORMANCE.md: busbw is what the
    slowest link carries; a node's inter-node links are its G NICs), so ``--bw`` of one NIC prices that ring
    ``G`` times too slow. Where it goes to stderr, the drill's stdout keeps its lines."""
    G = gpus_per_node or NODE_GPUS
    if gpus is None or gpus <= G:
        return None
    bw, node = bandwidth_bytes_per_s / 1e9, G * bandwidth_bytes_per_s / 1e9
    return (f"--bw {bw:g} GB/s prices {gpus} GPUs as one flat link; a ring across nodes runs on all "
            f"{G} NICs of a node at once (bus bandwidth about {G} x one NIC: {node:g} GB/s if {bw:g} GB/s is one "
            f"NIC's): give the node instead with --system NAME --nodes N, or --bw as the node's NICs together")


def _resolve_profile(f: FabricFlags, *, op: str, set_gpus: bool, gpus_list: tuple[int, ...] | None) -> Resolved:
    from commcost.calibrate.profile import load_any_profile, profile_model

    profile = load_any_profile(f.profile)
    if not hasattr(profile, "fit"):  # a tier profile: the system's topology with the fitted tiers
        return _resolve_tier_profile(f, profile, set_gpus=set_gpus, gpus_list=gpus_list)
    comm = profile_model(profile, extrapolate=bool(f.extrapolate))
    fit = profile.fit
    gpus = (fit.gpus if f.gpus is None else f.gpus) if set_gpus else None
    asked = (gpus,) if set_gpus else (gpus_list or (fit.gpus,))
    extrapolated = []
    for g in asked:
        w = comm.scope_warning(op, g)
        if w is None:
            continue
        if not comm.extrapolate:
            why = w.split(": extrapolated")[0]
            A.fail(f"{why}; pass --extrapolate to apply it anyway")
        extrapolated.append(w)
    if extrapolated:
        warn(extrapolated[-1])
    regimes = len(fit.regimes)
    note = (f"calibrated profile {f.profile}: {regimes} size regime(s) fitted on {comm.scope.describe()}, "
            f"R^2 {profile.r2:.4f}; each collective uses the regime holding its size")
    if extrapolated:
        note += "; EXTRAPOLATED beyond its scope (see the warning)"
    info = comm.to_dict() | {"r2": profile.r2, "source": profile.provenance.get("source"),
                             "extrapolated": bool(extrapolated)}
    return Resolved(comm=comm, gpus=gpus, note=note, info=info)


def _resolve_tier_profile(f: FabricFlags, fit, *, set_gpus: bool, gpus_list: tuple[int, ...] | None) -> Resolved:
    """A tier profile (``commcost fit --tiers``): :meth:`TierFit.topology` on the nodes asked for (default
    the largest fitted), as a FabricModel; a warning names the parameters used beyond the fitted scales."""
    from commcost.comm.model import FabricModel
    from commcost.comm.topology import nodes_spanned
    from commcost.hardware import lookup
    from commcost.hardware.registry import systems

    G = f.gpus_per_node or int(lookup(systems(), fit.system, "system")["gpus_per_node"])
    gpus = f.gpus if set_gpus else None
    nodes = f.nodes or (nodes_spanned(gpus, G) if gpus else None)
    if nodes is None:
        nodes = nodes_spanned(max(gpus_list), G) if gpus_list else max(fit.fitted_nodes)
    topo = fit.topology(nodes)
    if set_gpus:
        gpus = gpus or nodes * G
    used = fit.extrapolated(nodes)
    where = f"{', '.join(str(n) for n in fit.fitted_nodes)} node(s)"
    note = (f"tier profile {f.profile}: {fit.system} with intra x {fit.intra_bandwidth_scale:.3f}, NIC x "
            f"{fit.inter_bandwidth_scale:.3f}, network latency x {fit.inter_latency_scale:.3f}"
            + (f", spine oversubscription x {fit.spine_oversubscription_scale:.3f}"
               if fit.spine_oversubscription_scale != 1.0 else "")
            + f", fitted on {where}; used on {nodes} node(s)")
    if used:
        warning = f"tier profile {f.profile} was fitted on {where}; on {nodes} nodes it extrapolates {', '.join(used)}"
        warn(warning)
        note += f"; EXTRAPOLATES {', '.join(used)}"
    info = {"kind": "tier-profile", "path": f.profile, "system": fit.system,
            "intra_bandwidth_scale": fit.intra_bandwidth_scale, "inter_bandwidth_scale": fit.inter_bandwidth_scale,
            "inter_latency_scale": fit.inter_latency_scale,
            "spine_oversubscription_scale": fit.spine_oversubscription_scale, "fitted_nodes": list(fit.fitted_nodes),
            "nodes": nodes, "extrapolates": list(used)}
    return Resolved(comm=FabricModel(topology=topo, backend=f.backend), gpus=gpus, note=note, info=info,
                    topology=topo)


def _third_tier_override(f: FabricFlags, topo):
    """``topo`` with ``--pod-nodes``/``--spine-oversubscription``/``--spine-latency`` in place of its own pods and
    spine: a system preset's (a two-tier preset gets a third tier) or a custom topology's (two tiers until these
    flags); the spine flags need pods to apply to. Flags not given keep ``topo``'s values."""
    from dataclasses import replace

    pod_nodes = topo.pod_nodes if f.pod_nodes is None else f.pod_nodes
    spine_o, spine_lat_s = f.spine_oversubscription, f.spine_latency_s
    if spine_o is None and spine_lat_s is None and pod_nodes == topo.pod_nodes:
        return topo
    if pod_nodes is None:
        where = f"--system {topo.name}" if f.system else "this custom topology"
        A.fail(f"{where} has two tiers: give --pod-nodes too for --spine-oversubscription or --spine-latency "
               "to apply to")
    return replace(topo, pod_nodes=pod_nodes,
                   spine_oversubscription=topo.spine_oversubscription if spine_o is None else spine_o,
                   spine_latency_s=topo.spine_latency_s if spine_lat_s is None else spine_lat_s)


def _custom_topology(f: FabricFlags):
    """``(Topology, P)`` from ``--gpus-per-node``, ``--nodes``, ``--intra-*``/``--inter-*``/``--nvls-*``."""
    from commcost.comm.topology import Link, Topology, nodes_spanned

    gpus = f.gpus
    if f.gpus_per_node is None:
        raise InputError("a custom topology needs --gpus-per-node")
    G = f.gpus_per_node
    nodes = f.nodes
    if nodes is None:
        nodes = 1 if gpus is None else nodes_spanned(gpus, G)
    P = nodes * G if gpus is None else gpus
    if f.nodes is not None and P > nodes * G:
        raise InputError(f"--gpus {P} does not fit --nodes {nodes} x --gpus-per-node {G} = {nodes * G}")
    for flag, value in (("--intra-bw", f.intra_bandwidth_bytes_per_s), ("--intra-latency", f.intra_latency_s)):
        if value is None:
            raise InputError(f"a custom topology needs {flag}")
    intra = Link(bandwidth_bytes_per_s=f.intra_bandwidth_bytes_per_s, latency_s=f.intra_latency_s)
    if nodes > 1:
        for flag, value in (("--inter-bw", f.inter_bandwidth_bytes_per_s), ("--inter-latency", f.inter_latency_s)):
            if value is None:
                raise InputError(f"{nodes} nodes need {flag} (per-GPU NIC)")
        inter = Link(bandwidth_bytes_per_s=f.inter_bandwidth_bytes_per_s, latency_s=f.inter_latency_s)
    else:
        inter = intra
    nvls = None
    if f.nvls_bandwidth_bytes_per_s is not None:
        nvls = Link(bandwidth_bytes_per_s=f.nvls_bandwidth_bytes_per_s, latency_s=f.nvls_latency_s)
    topo = Topology(gpus_per_node=G, nodes=nodes, intra=intra, inter=inter, in_network=nvls,
                    oversubscription=1.0 if f.oversubscription is None else f.oversubscription,
                    base_latency_s=f.launch_latency_s)
    return _third_tier_override(f, topo), P


def bucket_algorithms_note(resolved: Resolved, gpus: int, algorithm: str) -> str | None:
    """The resolver's header line (:attr:`Resolved.note`) and, on a topology, which algorithm runs a bucket's
    all-reduce of 1, 25 and 256 MiB (it depends on the size): what ``timeline`` prints about its fabric."""
    if resolved.topology is None:
        return resolved.note
    ran = []
    for size in (2**20, 25 * 2**20, 256 * 2**20):
        c = resolved.comm.cost("all_reduce", size, gpus, algorithm)
        ran.append(f"{size // 2**20} MiB: {c.algorithm.value}" + (f" ({c.protocol})" if c.protocol else ""))
    return "; ".join(filter(None, [resolved.note, "bucket all-reduces run " + ", ".join(ran)]))


def resolve_trace_model(f: FabricFlags | None, *, backend: str | None, max_group: int) -> Resolved | None:
    """The one resolver's model for ``commcost trace``, or None without model flags (``f`` None). The trace
    fills what a trace knows: the backend from its distributedInfo (where ``--backend`` is not given), and
    ``--nodes`` for ``--system`` from its largest group (``ceil(P_max / G)``)."""
    from commcost.comm.model import BACKENDS

    if f is None:
        return None
    override = {}
    if f.backend is None:
        override["backend"] = backend if backend in BACKENDS else "nccl"
    if f.system is not None and f.nodes is None:
        from commcost.comm.topology import nodes_spanned
        from commcost.comm.systems import system_group

        probe, _ = system_group(f.system, gpus_per_node=f.gpus_per_node)
        override["nodes"] = nodes_spanned(max(1, max_group), probe.gpus_per_node)
    return resolve_comm_model(f._replace(**override), set_gpus=False)
