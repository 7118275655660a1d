"""``commcost collective``: one collective, every algorithm, on a flat or two-tier fabric."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_profile_argument, apply_profile

__all__ = ["HELP", "add_arguments", "run", "add_fabric_arguments", "fabric_from_args"]

HELP = "time of one collective under each algorithm (ring, tree, NVLS ...), nccl-tests-style tables"


def add_fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The fabric flags: ``--system`` preset, or a custom two-tier topology, or a flat link."""
    f = p.add_argument_group("fabric: a --system preset, a custom two-tier topology, or a flat --bw/--latency link")
    f.add_argument("--system", help="system preset (see `commcost presets`), e.g. dgx-h100")
    f.add_argument("--nodes", type=A.positive_int, help="nodes the group spans (default: as --gpus needs)")
    f.add_argument("--gpus-per-node", type=A.positive_int, help="GPUs per node (default: the preset's)")
    f.add_argument("--intra-bw", type=A.rate_gb_per_s, help="custom: intra-node bandwidth per GPU, GB/s")
    f.add_argument("--intra-latency", type=A.latency_us, help="custom: intra-node per-step latency, us")
    f.add_argument("--inter-bw", type=A.rate_gb_per_s, help="custom: inter-node bandwidth per GPU (its NIC), GB/s")
    f.add_argument("--inter-latency", type=A.latency_us, help="custom: inter-node per-step latency, us")
    f.add_argument("--nvls-bw", type=A.rate_gb_per_s, help="custom: in-switch reduction (NVLS) algbw per GPU, GB/s")
    f.add_argument("--nvls-latency", type=A.latency_us, default=0.0, help="custom: NVLS per-step latency, us")
    f.add_argument("--launch-latency", type=A.latency_us, default=0.0,
                   help="custom: fixed launch latency per collective, us (default 0)")
    f.add_argument("--oversubscription", type=A.positive_float,
                   help="inter-node oversubscription o >= 1 (each NIC gets B/o across nodes)")
    f.add_argument("--bw", type=A.rate_gb_per_s, help="flat: per-rank bandwidth, GB/s (the drill's one-tier model)")
    f.add_argument("--latency", type=A.latency_us, help="flat: per-step latency, us")
    add_profile_argument(f)


def fabric_from_args(args: argparse.Namespace, gpus: int | None):
    """``(fabric, P)`` from the fabric flags; every inconsistency is an InputError."""
    from commcost.errors import InputError
    from commcost.presets import system_group
    from commcost.comm.topology import Link, Topology
    from commcost.units import GB, US

    custom = [n for n in ("intra_bw", "intra_latency", "inter_bw", "inter_latency", "nvls_bw")
              if getattr(args, n) is not None]
    flat = [n for n in ("bw", "latency") if getattr(args, n) is not None]
    flag = lambda n: "--" + n.replace("_", "-")  # noqa: E731
    if args.system is not None:
        if custom or flat:
            raise InputError(f"--system {args.system} takes its links from the preset; drop "
                             + ", ".join(flag(n) for n in custom + flat))
        return system_group(args.system, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                            gpus=gpus, oversubscription=args.oversubscription)
    if flat:
        if custom or args.nodes is not None or args.gpus_per_node is not None:
            raise InputError("--bw/--latency describe a flat one-tier link; for two tiers use "
                             "--intra-bw/--inter-bw (or --system) instead")
        if args.bw is None or args.latency is None:
            raise InputError("a flat link needs both --bw (GB/s) and --latency (us)")
        if gpus is None:
            raise InputError("a flat link needs --gpus")
        return Link(bandwidth_bytes_per_s=args.bw * GB, latency_s=args.latency * US), gpus
    if not custom:
        raise InputError("no fabric: give --system NAME (see `commcost presets`), a custom topology "
                         "(--gpus-per-node, --nodes, --intra-bw, --intra-latency, --inter-bw, --inter-latency) "
                         "or a flat link (--bw, --latency)")
    if args.gpus_per_node is None:
        raise InputError("a custom topology needs --gpus-per-node")
    G = args.gpus_per_node
    nodes = args.nodes
    if nodes is None:
        nodes = 1 if gpus is None else -(-gpus // G)
    P = nodes * G if gpus is None else gpus
    if args.nodes is not None and P != nodes * G:
        raise InputError(f"--gpus {P} does not match --nodes {nodes} x --gpus-per-node {G} = {nodes * G}")
    for need in ("intra_bw", "intra_latency"):
        if getattr(args, need) is None:
            raise InputError(f"a custom topology needs {flag(need)}")
    intra = Link(bandwidth_bytes_per_s=args.intra_bw * GB, latency_s=args.intra_latency * US)
    if nodes > 1:
        for need in ("inter_bw", "inter_latency"):
            if getattr(args, need) is None:
                raise InputError(f"{nodes} nodes need {flag(need)} (per-GPU NIC)")
        inter = Link(bandwidth_bytes_per_s=args.inter_bw * GB, latency_s=args.inter_latency * US)
    else:
        inter = intra
    nvls = None
    if args.nvls_bw is not None:
        nvls = Link(bandwidth_bytes_per_s=args.nvls_bw * GB, latency_s=args.nvls_latency * US)
    topo = Topology(gpus_per_node=G, nodes=nodes, intra=intra, inter=inter, in_network=nvls,
                    oversubscription=1.0 if args.oversubscription is None else args.oversubscription,
                    base_latency_s=args.launch_latency * US)
    return topo, P


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the collective flags to ``p``."""
    p.add_argument("--op", required=True,
                   help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv")
    s = p.add_mutually_exclusive_group(required=True)
    s.add_argument("--size", type=A.size, help="message size S as nccl-tests counts it, e.g. 1GiB, 25MB, 4096")
    s.add_argument("--sizes", type=A.size_range,
                   help="a table of sizes: MIN:MAX (doubling, like nccl-tests -b -e -f 2), MIN:MAX:FACTOR, or a list")
    p.add_argument("--gpus", type=A.positive_int, help="ranks P in the group (default: nodes x GPUs per node)")
    p.add_argument("--algorithm", type=A.algorithm, default="auto",
                   help="auto (the fastest, as NCCL's tuner picks), ring, tree, halving_doubling, "
                        "hierarchical, in_network, direct")
    add_fabric_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")


def run(args: argparse.Namespace) -> int:
    """Validate, compute every algorithm per size, render."""
    from commcost.comm.algorithms import (algorithm_costs, collective_cost, parse_algorithm, parse_collective,
                                     protocol_costs, unavailable_algorithms)
    from commcost.errors import InputError
    from commcost.report.collective import (SizeResult, fabric_to_dict, render_size_text, render_table_text,
                                            size_to_dict)
    from commcost.comm.topology import Topology, place

    op = parse_collective(args.op)
    requested = parse_algorithm(args.algorithm)
    calibrated = apply_profile(args)
    fabric, P = fabric_from_args(args, args.gpus)
    if P < 2:
        raise InputError(f"a collective needs at least 2 GPUs, got {P}")
    nodes_used = place(P, fabric).nodes if isinstance(fabric, Topology) else P
    sizes = (args.size,) if args.size is not None else args.sizes
    results = []
    for S in sizes:
        chosen = collective_cost(op, S, P, fabric, requested)
        protocol = None
        if isinstance(fabric, Topology) and fabric.protocols is not None:
            protocol = next(iter(protocol_costs(op, S, P, fabric, chosen.algorithm))).value
        results.append(SizeResult(chosen=chosen, requested=str(requested),
                                  alternatives=algorithm_costs(op, S, P, fabric),
                                  unavailable=unavailable_algorithms(op, P, fabric), protocol=protocol))
    if args.json:
        if args.size is not None:
            out = size_to_dict(results[0]) | {"fabric": fabric_to_dict(fabric, nodes_used)}
        else:
            out = {"op": op.value, "gpus": P, "requested_algorithm": str(requested),
                   "fabric": fabric_to_dict(fabric, nodes_used), "rows": [size_to_dict(r) for r in results]}
        if calibrated is not None:
            out["profile"] = calibrated[1]
        from commcost.report._json import dump_json

        dump_json(out)
        return 0
    if calibrated is not None:
        print(calibrated[0] + "\n")
    if args.size is not None:
        print(render_size_text(results[0], fabric, nodes_used))
    else:
        print(render_table_text(results, fabric, nodes_used))
    return 0
