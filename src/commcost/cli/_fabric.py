"""``--system`` / ``--nodes`` / ``--gpus-per-node`` / ``--algorithm``: the two-tier fabric flags
shared by the subcommands that simulate a data-parallel step (budget, timeline).

The drill's flat flags ``--bw``/``--latency`` describe one link; a system preset
describes a two-tier :class:`commcost.comm.topology.Topology`. Commands that report the
drill's flat symbols show the *flat ring equivalent* of the fabric for one message
size (nccl-tests' bus-bandwidth idea): with ``T`` the :func:`collective_cost`
all-reduce of ``S`` on ``P`` GPUs, ``a = T.latency / 2(P-1)`` and
``B = 2(P-1)/P * S / T.bandwidth``, so the drill's formula with them gives ``T``.
"""

from __future__ import annotations

import argparse

from commcost.cli import _args as A

__all__ = ["add_group_arguments", "add_system_arguments", "add_profile_argument", "apply_profile", "resolve_system",
           "flat_equivalent", "allreduce_cost_on"]


def add_group_arguments(p: argparse.ArgumentParser, *, gpus_per_node_help: str | None = None,
                        extra=None) -> argparse._ArgumentGroup:
    """The data-parallel group: ``--gpus``, the flat link ``--bw``/``--latency`` (the drill's),
    ``extra(group)`` if given, then ``--system``/``--nodes``/``--gpus-per-node``/``--algorithm`` and
    ``--profile``. Returns the group."""
    g = p.add_argument_group("the data-parallel group")
    g.add_argument("--gpus", type=A.positive_int,
                   help="ranks P in the data-parallel group (with --system: default nodes x GPUs per node)")
    g.add_argument("--bw", type=A.rate_gb_per_s, help="achievable per-rank bandwidth B, GB/s (1e9)")
    g.add_argument("--latency", type=A.positive_latency_us, help="per ring-step latency a, microseconds")
    if extra is not None:
        extra(g)
    add_system_arguments(g, gpus_per_node_help=gpus_per_node_help)
    add_profile_argument(g)
    return g


def add_system_arguments(g: argparse._ArgumentGroup, *, gpus_per_node_help: str | None = None) -> None:
    """Add ``--system``, ``--nodes``, ``--algorithm`` and ``--gpus-per-node`` to ``g``."""
    g.add_argument("--system", help="two-tier system preset (see `commcost presets`), e.g. dgx-h100: "
                   "replaces --bw/--latency; all-reduces use its tiers and the fastest algorithm")
    g.add_argument("--nodes", type=A.positive_int, help="with --system: nodes in the group")
    g.add_argument("--gpus-per-node", type=A.positive_int,
                   help=gpus_per_node_help or "with --system: GPUs used per node (default: the preset's)")
    g.add_argument("--algorithm", type=A.algorithm, default="auto", help="with --system: auto (default), ring, tree, "
                   "halving_doubling, hierarchical, in_network")


def add_profile_argument(g: argparse._ArgumentGroup) -> None:
    """Add ``--profile FILE`` (a calibrated profile from ``commcost fit -o FILE``)."""
    g.add_argument("--profile", help="calibrated profile (commcost fit -o FILE): replaces --bw and --latency")


def apply_profile(args: argparse.Namespace, *, set_gpus: bool = True) -> tuple[str, dict] | None:
    """Put a profile's calibrated link into ``args.bw``/``args.latency`` (and, with ``set_gpus``,
    ``args.gpus`` if unset); return (a text line naming the profile, its JSON), or None
    without ``--profile``."""
    if getattr(args, "profile", None) is None:
        return None
    from commcost.calibrate.profile import load_profile
    from commcost.units import GB, US, format_rate, format_seconds

    if args.bw is not None or args.latency is not None:
        A.fail("--profile replaces --bw and --latency; give either the profile or both numbers")
    if getattr(args, "system", None) is not None:
        A.fail("--profile and --system both describe the fabric; give one")
    profile = load_profile(args.profile)
    link, fit = profile.link, profile.fit
    args.bw, args.latency = link.bandwidth_bytes_per_s / GB, link.latency_s / US
    if set_gpus and getattr(args, "gpus", None) is None:
        args.gpus = fit.gpus
    text = (f"link from profile {args.profile}: B = {format_rate(link.bandwidth_bytes_per_s)} (bus bandwidth, "
            f"large messages), a = {format_seconds(link.latency_s)} per ring step (small messages); "
            f"fitted on {fit.op} over {fit.gpus} ranks, R^2 {profile.r2:.4f}")
    if set_gpus and args.gpus != fit.gpus:
        text += f"; applied here to P = {args.gpus} through the ring formula"
    return text, {"path": args.profile, "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                  "latency_s": link.latency_s, "op": fit.op.value, "gpus": fit.gpus, "r2": profile.r2,
                  "source": profile.provenance.get("source")}


def resolve_system(args: argparse.Namespace):
    """The :class:`Topology` of ``--system`` (filling ``args.gpus``), or None without it.

    Without ``--system``, ``--nodes`` is an error and ``--gpus``, ``--bw``, ``--latency``
    are required.
    """
    if args.system is None:
        if args.nodes is not None:
            A.fail("--nodes needs --system (a preset to take nodes of); without it give --gpus")
        for flag in ("gpus", "bw", "latency"):
            if getattr(args, flag) is None:
                A.fail(f"--{flag} is required (or --system NAME with --nodes)")
        return None
    from commcost.comm.algorithms import parse_algorithm
    from commcost.presets import system_group

    if args.bw is not None or args.latency is not None:
        A.fail(f"--system {args.system} takes its links from the preset; drop --bw/--latency")
    parse_algorithm(args.algorithm)
    fabric, P = system_group(args.system, nodes=args.nodes, gpus_per_node=args.gpus_per_node, gpus=args.gpus)
    args.gpus = P
    return fabric


def flat_equivalent(fabric, gpus: int, message_bytes: float, algorithm: str):
    """The flat :class:`Link` whose ring all-reduce of ``message_bytes`` takes what ``fabric`` does."""
    from commcost.comm.algorithms import collective_cost
    from commcost.comm.topology import Link

    if gpus == 1:
        return fabric.intra
    T = collective_cost("all_reduce", message_bytes, gpus, fabric, algorithm)
    return Link(bandwidth_bytes_per_s=2 * (gpus - 1) / gpus * message_bytes / T.bandwidth_s,
                latency_s=T.latency_s / (2 * (gpus - 1)))


def allreduce_cost_on(fabric, gpus: int, algorithm: str):
    """``c -> seconds``: the all-reduce of a ``c``-byte bucket on ``fabric`` (memoised per size)."""
    from commcost.comm.algorithms import collective_cost

    memo: dict[float, float] = {}

    def cost(message_bytes: float) -> float:
        if message_bytes not in memo:
            memo[message_bytes] = collective_cost("all_reduce", message_bytes, gpus, fabric, algorithm).total_s
        return memo[message_bytes]

    return cost
