"""``commcost scaling``: speedup and efficiency over GPU counts (the scaling-analysis seed).

With no flags it is the seed's whole analysis: every model on every fabric at
N = 1..128, then the seed's printed 7B partial-overlap analysis.
"""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_backend_argument, add_nvls_argument, add_profile_argument, resolve_comm_model
from commcost.cli.inputs import fabric_flags
from commcost.analyses.scaling import ScalingInputs
from commcost.analyses.scaling import scaling_curve
from commcost.analyses.scaling import seed_analysis
from commcost.analyses.scaling import seed_defaults
from commcost.analyses.scaling import seed_fabrics
from commcost.analyses.scaling import seed_models
from commcost.analyses.scaling import seed_two_tier
from commcost.comm.model import FabricModel
from commcost.comm.model import FlatLinkModel
from commcost.core.units import BILLION
from commcost.core.units import MS
from commcost.hardware import lookup
from commcost.hardware.registry import system_topology
from commcost.report._files import write_atomic
from commcost.report._json import dump_json
from commcost.report.plot_scaling import plot_scaling
from commcost.report.plot_scaling import save_figure
from commcost.report.scaling import render_overlap_analysis_text
from commcost.report.scaling import render_scaling_text
from commcost.report.scaling import scaling_to_csv
from commcost.report.scaling import scaling_to_dict
from commcost.workload.shape import MODEL_ALIASES
from commcost.workload.shape import bytes_per_element
from commcost.workload.shape import model_params
from commcost.workload.shape import model_preset
from commcost.workload.shape import model_preset_names

__all__ = ["add_arguments", "run"]

HELP = "data-parallel speedup and efficiency over GPU counts, with overlap bounds and plots"

EXAMPLES = (
    '',
    '--model 7b --fabric infiniband --plot scaling.png',
    '--params 70 --compute-ms 2500 --system dgx-h100 --gpus 8,64,512 --csv rows.csv',
)
"""Command lines shown at the end of ``--help``."""

PLOT_SUFFIXES = (".png", ".svg")

_ANALYSIS_FLAGS = ("model", "fabric", "params", "compute_ms", "bw", "latency", "gpus",
                   "overlap", "overhead_ms", "dtype", "gpus_per_node", "system", "algorithm", "profile",
                   "backward_fraction")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the scaling flags (units as in ``budget``) to ``p``."""
    m = p.add_argument_group("the model (a preset, or --params with --compute-ms)")
    m.add_argument("--model", type=A.name_list,
                   help="model key(s), comma-separated: the seed's 125m, 1.3b, 7b (default: all), or a registry "
                        "model such as llama2-7b with --compute-ms")
    m.add_argument("--params", type=A.params_billions, help="custom model: parameters, billions (1e9)")
    m.add_argument("--compute-ms", type=A.positive_float,
                   help="compute time of one step on one GPU t_c, ms (with --params, or a registry --model)")
    m.add_argument("--dtype", help="gradient dtype: fp32, tf32, bf16, fp16, fp8 (default bf16, the seed's)")
    f = p.add_argument_group("the fabric (a preset, or --bw with --latency)")
    f.add_argument("--fabric", type=A.name_list,
                   help="preset fabric key(s), comma-separated: nvlink, infiniband (default: both)")
    f.add_argument("--bw", type=A.rate_gb_per_s, help="custom fabric: per-rank bandwidth B, GB/s (1e9; or 400Gbps)")
    f.add_argument("--latency", type=A.nonneg_latency_us, help="custom fabric: per ring-step latency a, microseconds")
    add_profile_argument(f)
    add_backend_argument(f)
    f.add_argument("--gpus-per-node", type=A.positive_int,
                   help="two-tier view: the seed's NVLink inside nodes of this many GPUs, its "
                        "InfiniBand across them (or, with --system, fewer GPUs per node than the preset)")
    f.add_argument("--system", help="two-tier system preset (see `commcost presets`), e.g. dgx-h100")
    add_nvls_argument(f)
    f.add_argument("--algorithm", type=A.algorithm_name,
                   help="all-reduce algorithm: auto (default: the backend's fastest; the ring on a flat fabric, "
                        "the seed's), ring, tree, halving_doubling, hierarchical, in_network")
    s = p.add_argument_group("the step")
    s.add_argument("--gpus", type=A.int_list,
                   help="GPU counts N, comma-separated (default 1,2,4,...,128)")
    s.add_argument("--overlap", type=A.fraction,
                   help="overlap fraction f in [0, 1] of the partial-overlap estimate (default 0.85)")
    s.add_argument("--overhead-ms", type=A.nonneg_float,
                   help="serial overhead per step t_o, ms (default 0.5, the seed's)")
    s.add_argument("--backward-fraction", type=A.open_fraction,
                   help="share of the step in backward: the window of the physical perfect-overlap bound "
                        "(default 2/3, as budget and timeline)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    o.add_argument("--csv", metavar="FILE", help="also write the rows as CSV (same keys as --json)")
    o.add_argument("--plot", metavar="FILE", help="also draw the curves to FILE (.png or .svg; needs matplotlib)")


def _custom_pair(args: argparse.Namespace, preset_flag: str, flags: tuple[str, str]) -> bool:
    """True if the custom flags are given; both or neither, and not with the preset flag."""
    given = [getattr(args, f.lstrip("-").replace("-", "_")) is not None for f in flags]
    if not any(given):
        return False
    if getattr(args, preset_flag.lstrip("-")) is not None:
        A.fail(f"{preset_flag} and {'/'.join(flags)} are exclusive: a preset carries its own values")
    if not all(given):
        missing = flags[given.index(False)]
        A.fail(f"{missing} is required with {flags[given.index(True)]}")
    return True


def run(args: argparse.Namespace) -> int:
    """Validate the flags, compute every curve, render."""

    if args.plot is not None:
        A.check_output_path("--plot", args.plot, PLOT_SUFFIXES)
    if args.csv is not None:
        A.check_output_path("--csv", args.csv)
    if args.profile is not None and args.fabric is not None:
        A.fail("--profile and --fabric both describe the fabric; give one")
    registry = [k for k in (args.model or ()) if k not in seed_models()]
    if registry:

        names = set(model_preset_names()) | set(MODEL_ALIASES)
        unknown = [k for k in registry if k not in names]
        if unknown:
            A.fail(f"unknown model {unknown[0]!r} (valid: {', '.join(sorted(seed_models()))}; or a registry model "
                   f"with --compute-ms: {', '.join(sorted(model_preset_names()))})")
    if registry and args.compute_ms is None:
        A.fail(f"--model {registry[0]} is a registry model: give its --compute-ms (the seed's models carry their own)")
    custom_model = bool(args.params is not None or (args.compute_ms is not None and not registry)) and \
        _custom_pair(args, "--model", ("--params", "--compute-ms"))
    custom_fabric = args.profile is not None or _custom_pair(args, "--fabric", ("--bw", "--latency"))
    default_run = all(getattr(args, name) is None for name in _ANALYSIS_FLAGS)
    calibrated = None

    if default_run:
        results, overlap = seed_analysis()
    else:
        d = seed_defaults()
        bytes_per_grad = d.bytes_per_grad if args.dtype is None else bytes_per_element(args.dtype)
        if custom_model:
            models = [(f"{args.params:g} billion params",
                       args.params * BILLION, args.compute_ms * MS)]
        else:
            table = seed_models()
            keys = args.model if args.model is not None else tuple(table)
            models = [(table[k].name, table[k].params, table[k].compute_s) if k in table
                      else (k, float(model_params(model_preset(k))), args.compute_ms * MS) for k in keys]
        gpu_counts = d.gpu_counts if args.gpus is None else tuple(sorted(set(args.gpus)))
        two_tier = args.system is not None or args.gpus_per_node is not None
        if two_tier and (custom_fabric or args.fabric is not None):
            A.fail("--system/--gpus-per-node build the two-tier fabric; drop --fabric/--bw/--latency")
        algorithm = args.algorithm or "auto"
        if two_tier:
            fabrics = [_two_tier(args, max(gpu_counts))]
        elif custom_fabric:
            resolved = resolve_comm_model(fabric_flags(args), set_gpus=False, gpus_list=gpu_counts)
            calibrated = resolved if resolved.info is not None else None
            fabrics = [(f"profile {args.profile}" if calibrated is not None else
                        f"{args.bw:g} GB/s, {args.latency:g} us per ring step", resolved.comm, None, None)]
        else:
            table_f = seed_fabrics()
            keys = args.fabric if args.fabric is not None else tuple(table_f)
            fabrics = [(p.name, FlatLinkModel(link=p.link, backend=args.backend), p.flat_ring_max_gpus,
                        p.flat_ring_note) for p in (lookup(table_f, k, "fabric") for k in keys)]
        results = tuple(
            scaling_curve(ScalingInputs(
                model=m_name, fabric=f_name, params=params, bytes_per_grad=bytes_per_grad,
                compute_s=compute_s,
                overhead_s=d.overhead_s if args.overhead_ms is None else args.overhead_ms * MS,
                comm=comm, gpu_counts=gpu_counts,
                overlap_fraction=d.overlap_fraction if args.overlap is None else args.overlap,
                flat_ring_max_gpus=flat_max, flat_ring_note=flat_note, algorithm=algorithm,
                backward_fraction=2.0 / 3.0 if args.backward_fraction is None else args.backward_fraction))
            for m_name, params, compute_s in models
            for f_name, comm, flat_max, flat_note in fabrics)
        overlap = ()

    written: list[str] = []
    if args.plot is not None:
        save_figure(plot_scaling(results), args.plot)
        written.append(f"wrote plot {args.plot}")
    if args.csv is not None:

        write_atomic(args.csv, scaling_to_csv(results, overlap))
        written.append(f"wrote CSV {args.csv}")

    if args.json:
        out = scaling_to_dict(results, overlap)
        if calibrated is not None:
            out["profile"] = calibrated.info

        dump_json(out)
        return 0
    parts = ([calibrated.note] if calibrated is not None else []) + [render_scaling_text(results)]
    if overlap:
        parts.append(render_overlap_analysis_text(overlap))
    if written:
        parts.append("\n".join(written))
    print("\n\n".join(parts))
    return 0


def _two_tier(args: argparse.Namespace, max_gpus: int) -> tuple:
    """``(name, FabricModel, None, None)`` for ``--system`` or the seed's NVLink + InfiniBand."""

    if args.system is not None:

        G = args.gpus_per_node
        probe = system_topology(args.system, gpus_per_node=G)
        nodes = max(1, -(-max_gpus // probe.gpus_per_node))
        topo = system_topology(args.system, nodes=nodes, gpus_per_node=G)
        return (args.system, FabricModel(topology=topo, backend=args.backend), None, None)

    topo = seed_two_tier(args.gpus_per_node, max_gpus)
    return (topo.name, FabricModel(topology=topo, backend=args.backend), None, None)
