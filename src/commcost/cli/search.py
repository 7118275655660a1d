"""``commcost search``: every valid TP/PP/VP/CP/EP/DP/ZeRO/micro-batch/SP/recompute/bucket layout, ranked."""

from __future__ import annotations

import argparse
from dataclasses import replace

from commcost.cli import _args as A
from commcost.parallel.layout import DEFAULT_ORDER
from commcost.workload.stacks import KNOWN_STACKS
from commcost.analyses.plan.search import rank_robust
from commcost.analyses.plan.search import search
from commcost.analyses.plan.search_inputs import MEMORY_HEADROOM
from commcost.analyses.plan.search_published import published_comparison
from commcost.analyses.uncertainty import plan_band
from commcost.cli.inputs_plan import MAX_CONFIGURATIONS, MAX_GLOBAL_BATCH, MAX_GPU_COUNTS, MAX_TOP  # noqa: F401 (re-exported)
from commcost.cli._html import add_html_argument, check_html, json_dict
from commcost.cli.inputs_plan import parse_gpus_range
from commcost.cli.inputs_plan import search_request
from commcost.cli.plan import add_hardware_arguments
from commcost.cli.plan import add_model_arguments
from commcost.formats.emit import emit
from commcost.core.files import write_atomic
from commcost.cli.plan import add_moe_arguments
from commcost.report.html import write_html
from commcost.report.html.search import feasible_sample, search_html
from commcost.report.search import plot_pareto
from commcost.report.search import render_search_json
from commcost.report.search import render_search_text
from commcost.report.search import write_search_csv
from commcost.report.progress import SearchBar

__all__ = ["HELP", "add_arguments", "run", "parse_gpus_range"]

HELP = "the best parallel configurations of a model on a cluster: every valid layout priced, filtered by memory, ranked"

EXAMPLES = (
    "--model llama3-70b --system dgx-h100 --gpus 512 --seq 8192 --global-batch 1024",
    "--model gpt3-175b --system dgx-a100 --gpus 1024 --global-batch 1536 --fix tp=8 --top 5 --json",
    "--model llama3-70b --system dgx-h100 --gpus-range 256:2048 --global-batch 1024 --objective cost "
    "--price-per-gpu-hour 2.5 --plot pareto.png",
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Model, batch, GPUs, hardware, objective and output flags."""

    add_model_arguments(p)
    s = p.add_argument_group("space")
    s.add_argument("--gpus", type=A.positive_int, help="GPUs W")
    s.add_argument("--gpus-range", metavar="LO:HI[:STEP]",
                   help="search several GPU counts: LO, 2 LO, 4 LO ... up to HI, or LO, LO+STEP ... with STEP")
    s.add_argument("--global-batch", type=A.positive_int, help="sequences per optimizer step (required, or --from)")
    s.add_argument("--emit", nargs=2, metavar=("KIND", "FILE"),
                   help="write the winner as a framework config: torchtitan (.toml), megatron (arguments) or "
                        "deepspeed (.json); `plan --from FILE` reads it back")
    s.add_argument("--fix", action="append", default=[], metavar="DIM=VALUE",
                   help="fix a dimension (tp, pp, vp, cp, ep, etp, dp, zero, micro_batch, sp, recompute, bucket_mb); "
                        "repeat or comma-separate")
    s.add_argument("--order", default=DEFAULT_ORDER,
                   help=f"rank order of every layout, innermost first (default {DEFAULT_ORDER}, Megatron's)")
    s.add_argument("--even-pipeline-only", action="store_true", help="only layouts whose pp x vp divides the layers")

    add_moe_arguments(p)
    add_hardware_arguments(p)
    c = p.add_argument_group("compute")
    c.add_argument("--precision", default="bf16", help="GEMM precision: bf16, fp16, fp8, mxfp8, nvfp4 (default bf16)")
    c.add_argument("--efficiency", type=A.efficiency, help="achieved fraction of peak on executed FLOPs")
    c.add_argument("--no-flash-attention", action="store_true", help="attention materialises the s x s scores")
    c.add_argument("--stack", default="auto", choices=KNOWN_STACKS,
                   help="training stack: its kernels, recomputation and ZeRO-3 gathers (default auto: from the layout)")
    c.add_argument("--compile", action="store_true", help="torch.compile fuses the element-wise operators")
    c.add_argument("--fp8-attention", action="store_true", help="fp8 recipes run attention in fp8 too (default bf16)")
    c.add_argument("--tp-comm-overlap", action="store_true",
                   help="TP collectives overlap the neighbouring GEMMs (Transformer Engine userbuffers)")
    c.add_argument("--cpu-offload-layers", type=int, default=0, metavar="N",
                   help="offload N layers' activations to host memory (with --fix pp=1,recompute=none)")
    o = p.add_argument_group("objective and output")
    o.add_argument("--objective", choices=("step", "tokens-per-gpu", "cost"), default="step",
                   help="rank by step time, tokens/s/GPU, or dollars per million tokens (default step)")
    o.add_argument("--rank", choices=("step", "robust", "cost"),
                   help="rank by the step, by the step at its measured band's upper edge (robust: every collective "
                        "at its class's slowest measured cluster; needs a --system preset), or by dollars per "
                        "million tokens (as --objective cost). Default: robust on a --system preset (else the "
                        "step), layouts short of the memory headroom last, the step/memory Pareto front first")
    o.add_argument("--memory-headroom", type=A.fraction, default=MEMORY_HEADROOM, metavar="SHARE",
                   help="share of the card a layout leaves free at the upper end of its memory estimate, or it is "
                        f"fragile and ranked last (default {MEMORY_HEADROOM:g})")
    o.add_argument("--price-per-gpu-hour", type=A.positive_float,
                   help="dollars per GPU-hour (--objective cost; with --train-tokens, the run's cost)")
    o.add_argument("--train-tokens", type=A.token_count,
                   help="tokens to train on (2e12, 2T, 300B): each result's days and GPU-hours")
    o.add_argument("--top", type=A.positive_int, default=10, help="configurations shown (default 10)")
    o.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    o.add_argument("--csv", metavar="FILE", help="write the top configurations to FILE, plan --json's keys flattened")
    add_html_argument(o)
    o.add_argument("--plot", metavar="FILE", help="draw the Pareto front (step against memory, and GPU count) to FILE")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs_plan.search_request`), search, render."""
    html = check_html(args)
    req = search_request(args)
    model, band_topology = req.resolved.comm, req.resolved.band_topology
    # the page draws every feasible layout (sampled): the arrays --plot keeps
    inputs = replace(req.inputs, keep_points=True) if html else req.inputs
    bar = SearchBar(req.progress)
    try:
        result = search(inputs, model, progress=bar)
    finally:
        bar.close()
    if req.robust:
        result = rank_robust(result, model, band_topology, req.top)
    bands = result.bands
    if bands is None and band_topology is not None:  # results[] carry plan's keys, band and interval included
        bands = tuple(plan_band(p.inputs, p, model, band_topology) for p in result.plans)
    prefix = req.plan_prefix
    signum = A.last_interrupt_signal() if result.interrupted else 0
    published = published_comparison(result, model, band_topology) if result.plans else None
    text = render_search_json(result, bands, plan_prefix=prefix, published=published) if req.json or html else None
    if html:  # the page of the very dict --json prints, and a sample of the arrays behind it (docs/report.md)
        write_html(html, search_html(json_dict(text), feasible_sample(result.points)))
    print(text if req.json
          else render_search_text(result, plan_prefix=prefix, stopped_by="SIGTERM" if signum == 15 else "Ctrl-C",
                                  published=published, bands=bands))
    if req.emit and result.plans:
        kind, path = req.emit
        write_atomic(path, emit(kind, result.plans[0].inputs))
        A.warn(f"the winner written as a {kind} config to {path} (commcost plan --from {path} reads it back)")
    if req.csv:
        write_search_csv(result, req.csv, plan_prefix=prefix)
    if req.plot:
        plot_pareto(result, req.plot)
        if not req.json:
            print(f"plot: {req.plot}")
    return A.signal_exit_status(signum) if result.interrupted else 0
