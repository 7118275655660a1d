"""``commcost scaling``: speedup and efficiency over GPU counts (the scaling-analysis seed).

With no flags it is the seed's whole analysis: every model on every fabric at
N = 1..128, then the seed's printed 7B partial-overlap analysis.
"""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_backend_argument, add_nvls_argument, add_profile_argument
from commcost.cli.inputs_step import scaling_request
from commcost.analyses.scaling import scaling_curve
from commcost.analyses.scaling import seed_analysis
from commcost.core.files import write_atomic
from commcost.core.strict_json import dump_json
from commcost.report.plot_scaling import plot_scaling
from commcost.report.plot_scaling import save_figure
from commcost.report.scaling import render_overlap_analysis_text
from commcost.report.scaling import render_scaling_text
from commcost.report.scaling import scaling_to_csv
from commcost.report.scaling import scaling_to_dict

__all__ = ["add_arguments", "run"]

HELP = "data-parallel speedup and efficiency over GPU counts, with overlap bounds and plots"

EXAMPLES = (
    '',
    '--model 7b --fabric infiniband --plot scaling.png',
    '--params 70 --compute-ms 2500 --system dgx-h100 --gpus 8,64,512 --csv rows.csv',
)
"""Command lines shown at the end of ``--help``."""



def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the scaling flags (units as in ``budget``) to ``p``."""
    m = p.add_argument_group("the model (a preset, or --params with --compute-ms)")
    m.add_argument("--model", type=A.name_list,
                   help="model key(s), comma-separated: the scaling analysis's 125m, 1.3b, 7b (default: all), or a registry "
                        "model such as llama2-7b (its t_c from plan on the --system GPU, or --compute-ms)")
    m.add_argument("--params", type=A.params_billions, help="custom model: parameters, billions (1e9)")
    m.add_argument("--compute-ms", type=A.positive_float,
                   help="compute time of one step on one GPU t_c, ms (with --params, or a registry --model)")
    m.add_argument("--seq", type=A.positive_int,
                   help="registry --model without --compute-ms: tokens per sequence plan prices t_c at "
                        "(default 4096)")
    m.add_argument("--dtype", help="gradient dtype: fp32, tf32, bf16, fp16, fp8 (default bf16, the analysis's)")
    f = p.add_argument_group("the fabric (a preset, or --bw with --latency)")
    f.add_argument("--fabric", type=A.name_list,
                   help="preset fabric key(s), comma-separated: nvlink, infiniband (default: both)")
    f.add_argument("--bw", type=A.rate_gb_per_s, help="custom fabric: per-rank bandwidth B, GB/s (1e9; or 400Gbps)")
    f.add_argument("--latency", type=A.nonneg_latency_us, help="custom fabric: per ring-step latency a, microseconds")
    add_profile_argument(f)
    add_backend_argument(f)
    f.add_argument("--gpus-per-node", type=A.positive_int,
                   help="two-tier view: the analysis's NVLink inside nodes of this many GPUs, its "
                        "InfiniBand across them (or, with --system, fewer GPUs per node than the preset)")
    f.add_argument("--system", help="two-tier system preset (see `commcost presets`), e.g. dgx-h100")
    add_nvls_argument(f)
    f.add_argument("--algorithm", type=A.algorithm_name,
                   help="all-reduce algorithm: auto (default: the backend's fastest; the ring on a flat fabric, "
                        "the analysis's), ring, tree, halving_doubling, hierarchical, in_network")
    s = p.add_argument_group("the step")
    s.add_argument("--gpus", type=A.int_list,
                   help="GPU counts N, comma-separated (default 1,2,4,...,128)")
    s.add_argument("--overlap", type=A.fraction,
                   help="overlap fraction f in [0, 1] of the partial-overlap estimate (default 0.85)")
    s.add_argument("--overhead-ms", type=A.nonneg_float,
                   help="serial overhead per step t_o, ms (default 0.5, the analysis's)")
    s.add_argument("--backward-fraction", type=A.open_fraction,
                   help="share of the step in backward: the window of the physical perfect-overlap bound "
                        "(default 2/3, as budget and timeline)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    o.add_argument("--csv", metavar="FILE", help="also write the rows as CSV (same keys as --json)")
    o.add_argument("--plot", metavar="FILE", help="also draw the curves to FILE (.png or .svg; needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs_step.scaling_request`), compute every curve, render."""
    req = scaling_request(args)
    if req.curves is None:
        results, overlap = seed_analysis(req.seed_comms)
    else:
        results, overlap = tuple(scaling_curve(i) for i in req.curves), ()
    written: list[str] = []
    if req.plot is not None:
        save_figure(plot_scaling(results), req.plot)
        written.append(f"wrote plot {req.plot}")
    if req.csv is not None:
        write_atomic(req.csv, scaling_to_csv(results, overlap))
        written.append(f"wrote CSV {req.csv}")
    calibrated = req.calibrated
    if req.json:
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
