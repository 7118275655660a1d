"""``commcost budget`` (and ``tools/collective_cost.py``): the Drill 3 report."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_group_arguments
from commcost.cli.inputs import budget_request
from commcost.analyses.drill.budget import communication_budget
from commcost.report.budget import render_budget_report
from commcost.report.budget import render_ddp_memory

__all__ = ["add_arguments", "run"]

HELP = "communication budget of a data-parallel step (Drill 3, parts a-g)"

EXAMPLES = (
    '--gpus 32 --bw 25 --latency 20 --params 1.3 --step-ms 400 --buckets 1,8,16,25,100',
    '--system dgx-h100 --nodes 4 --model llama2-7b --step-ms 1200',
    '--gpus 32 --bw 25 --latency 20 --layer-ratio --hidden 4096 --seq 4096 --grad-accum 4',
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the budget flags (units as in the README) to ``p``."""
    def intra(g: argparse._ArgumentGroup) -> None:
        g.add_argument("--intra-bw", type=A.rate_gb_per_s, default=300.0,
                       help="intra-node bandwidth for fix (e)3, GB/s (default 300)")
        g.add_argument("--intra-latency", type=A.latency_us,
                       help="intra-node per-step latency for fix (e)3, us (default: --latency)")

    add_group_arguments(p, gpus_per_node_help="GPUs per node (default 8, or the system's)", extra=intra)
    m = p.add_argument_group("the model and the step")
    m.add_argument("--params", type=A.params_billions, help="parameters N, billions (1e9)")
    m.add_argument("--model", help="a model from the registry (`commcost presets`), e.g. llama2-7b: sets --params")
    m.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (or its directory): sets --params")
    m.add_argument("--gpu", type=A.preset_name, help="GPU preset (`commcost presets`) whose memory pure DDP must fit in "
                   "(default: the --system's GPU)")
    m.add_argument("--dtype", default="bf16", help="gradient dtype: fp32, tf32, bf16, fp16, fp8 (default bf16)")
    m.add_argument("--step-ms", type=A.positive_float, help="measured compute-only step time, ms (one micro-batch)")
    m.add_argument("--grad-accum", type=A.positive_int, default=1,
                   help="micro-batches per optimizer step, k (default 1)")
    m.add_argument("--backward-fraction", type=A.open_fraction, default=2.0 / 3.0,
                   help="share of the step spent in backward (default 2/3)")
    m.add_argument("--threshold", type=A.open_fraction, default=0.5,
                   help="T/step above which the label says COMMUNICATION-BOUND (default 0.5)")
    m.add_argument("--fix-grad-accum", type=A.positive_int, default=4,
                   help="micro-batches for the gradient-accumulation fix (default 4)")
    b = p.add_argument_group("buckets")
    b.add_argument("--buckets", type=A.bucket_mib_list, default=(2.0**20, 25 * 2.0**20),
                   help="bucket caps, MiB, comma-separated (as bucket_cap_mb; default 1,25)")
    b.add_argument("--max-latency-share", type=A.open_fraction, default=0.2,
                   help="largest latency share of one bucket when advising a size (default 0.2)")
    b.add_argument("--tail-budget", type=A.open_fraction, default=0.05,
                   help="largest exposed last-bucket all-reduce, fraction of the step (default 0.05)")
    L = p.add_argument_group("layer ratio")
    L.add_argument("--layer-ratio", action="store_true", help="report one transformer layer's comm/compute")
    L.add_argument("--hidden", type=A.positive_int, help="hidden size h")
    L.add_argument("--seq", type=A.positive_int, help="sequence length s, tokens")
    L.add_argument("--micro-batch", type=A.positive_int, default=1, help="sequences per micro-batch (default 1)")
    L.add_argument("--tflops", type=A.positive_float, default=400.0,
                   help="achieved TFLOP/s per GPU (default 400: ~40%% MFU of an H100's 989 dense bf16)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs.budget_request`), compute, render."""
    req = budget_request(args)
    r = req.resolved
    budget = band = memory = layer = None
    if req.budget is not None:
        budget = communication_budget(req.budget)
        if r.band_topology is not None:  # a system preset alone: the measured band of its class
            from commcost.analyses.uncertainty import budget_band

            band = budget_band(budget, r.band_topology)
        if req.memory_gpu is not None:
            from commcost.workload.memory import ddp_memory_per_gpu, gpu_capacity_bytes

            memory = render_ddp_memory(ddp_memory_per_gpu(req.budget.params), gpu_capacity_bytes(req.memory_gpu),
                                       req.memory_gpu)
    if req.layer is not None:
        from commcost.analyses.drill.layer import layer_ratio  # only with --layer-ratio (start-up)

        layer = layer_ratio(req.layer)
    out, text = render_budget_report(budget, band, layer, req.layer, topology=r.topology, memory=memory,
                                     note=r.note, info=r.info)
    if req.json:
        from commcost.core.strict_json import dump_json

        dump_json(out)
    else:
        print(text)
    return 0
