"""``commcost collective``: one collective, every algorithm, on a flat or two-tier fabric."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_backend_argument, add_custom_topology_arguments, add_nvls_argument, \
    add_profile_argument
from commcost.cli.inputs_comm import CollectiveLogRequest
from commcost.cli.inputs_comm import collective_request
from commcost.calibrate.data import load_series
from commcost.calibrate.fit import score_against_preset
from commcost.analyses.collective import nodes_used
from commcost.analyses.collective import price_sizes
from commcost.core.strict_json import dump_json
from commcost.report.collective import collective_to_dict
from commcost.report.collective import preset_score_to_dict
from commcost.report.collective import render_preset_score_text
from commcost.report.collective import render_size_text
from commcost.report.collective import render_table_text

__all__ = ["HELP", "add_arguments", "run", "add_fabric_arguments"]

HELP = "time of one collective under each algorithm (ring, tree, NVLS ...), nccl-tests-style tables"

EXAMPLES = (
    '--op all_reduce --size 1GiB --gpus 16 --bw 400Gbps --latency 5us',
    '--op all_reduce --sizes 1MiB:1GiB --system dgx-h100 --nodes 2',
    '--log all_gather_perf.log --system dgx-h100   (is my cluster healthy? measured vs preset per size)',
)
"""Command lines shown at the end of ``--help``."""


def add_fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The fabric flags: ``--system`` preset, or a custom two-tier topology, or a flat link, or a profile."""
    f = p.add_argument_group("fabric: a --system preset, a custom two-tier topology, a flat --bw/--latency link, "
                             "or a calibrated --profile")
    f.add_argument("--system", help="system preset (see `commcost presets`), e.g. dgx-h100")
    f.add_argument("--nodes", type=A.positive_int, help="nodes the group spans (default: as --gpus needs)")
    f.add_argument("--gpus-per-node", type=A.positive_int, help="GPUs per node (default: the preset's)")
    add_nvls_argument(f)
    add_custom_topology_arguments(f)
    f.add_argument("--bw", type=A.rate_gb_per_s, help="flat: per-rank bandwidth, GB/s (the drill's one-tier model)")
    f.add_argument("--latency", type=A.nonneg_latency_us, help="flat: per-step latency, us")
    add_backend_argument(f)
    add_profile_argument(f)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the collective flags to ``p``."""
    p.add_argument("--op",
                   help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv "
                        "(required unless --log names it)")
    s = p.add_mutually_exclusive_group(required=True)
    s.add_argument("--size", type=A.size, help="message size S as nccl-tests counts it, e.g. 1GiB, 25MB, 4096")
    s.add_argument("--sizes", type=A.size_range,
                   help="a table of sizes: MIN:MAX (doubling, like nccl-tests -b -e -f 2), MIN:MAX:FACTOR, or a list")
    s.add_argument("--log", help="score your own nccl-tests/rccl-tests log against --system: per size the measured "
                   "time, the preset's and the error, and how fast this cluster runs against its class")
    p.add_argument("--gpus", type=A.positive_int, help="ranks P in the group (default: nodes x GPUs per node)")
    p.add_argument("--algorithm", type=A.algorithm_name, default="auto",
                   help="auto (the fastest, as NCCL's tuner picks), ring, tree, halving_doubling, "
                        "hierarchical, in_network, direct")
    add_fabric_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs_comm.collective_request`), price every size under every
    algorithm the backend runs, render."""
    req = collective_request(args)
    if isinstance(req, CollectiveLogRequest):
        return _run_log(req)
    op, requested, r = req.op, req.algorithm, req.resolved
    comm, P, topo = r.comm, r.gpus, r.topology
    fabric = topo if topo is not None else comm.flat_link
    nodes = nodes_used(P, topo)
    results = price_sizes(comm, op, req.sizes_bytes, P, requested, fabric=fabric, band_topology=r.band_topology)
    if req.json:
        dump_json(collective_to_dict(results, op=op, gpus=P, requested=requested, fabric=fabric,
                                     nodes_used=nodes, one_size=req.one_size, model=comm.to_dict(),
                                     profile=r.info))
    elif req.one_size:
        print(render_size_text(results[0], fabric, nodes, r.note))
    else:
        print(render_table_text(results, fabric, nodes, r.note))
    return 0


def _run_log(req: CollectiveLogRequest) -> int:
    """``--log FILE --system NAME``: the log's sizes, measured vs the preset, and the verdict."""
    series = load_series(req.log, op=req.op, gpus=req.gpus)
    for warning in series.warnings:
        A.warn(warning)
    nodes = req.nodes if req.nodes is not None else series.listed_nodes  # else the hosts the log lists
    score = score_against_preset(series.samples, op=series.op, gpus=series.gpus, system=req.system,
                                 nodes=nodes, gpus_per_node=req.gpus_per_node)
    if req.json:
        dump_json(preset_score_to_dict(score, req.log))
    else:
        print(render_preset_score_text(score, req.log))
    return 0
