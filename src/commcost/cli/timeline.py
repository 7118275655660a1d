"""``commcost timeline``: simulate the DDP bucket timeline, or search the bucket size."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_group_arguments
from commcost.cli._html import add_html_argument, check_html, json_dict
from commcost.cli.inputs_step import timeline_request
from commcost.analyses.uncertainty import timeline_band
from commcost.core.strict_json import dump_json, dumps_json
from commcost.report.html import write_html
from commcost.report.html.timeline import timeline_html
from commcost.report.chrome_trace import write_timeline_trace
from commcost.report.plot_timeline import plot_timeline
from commcost.report.timeline import TimelineContext
from commcost.report.timeline import caps_note
from commcost.report.timeline import render_timeline_report
from commcost.step.bucket_advice import recommend_buckets
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.sweep import sweep_buckets
from commcost.step.timeline import gradient_stream
from commcost.step.timeline import simulate_timeline

__all__ = ["HELP", "add_arguments", "run"]

HELP = "simulate DDP's bucketed all-reduce against the backward pass; --bucket auto finds the best size"

EXAMPLES = (
    '--gpus 32 --bw 25 --latency 20 --params 1.3 --step-ms 400 --plot timeline.png',
    '--system dgx-h100 --nodes 4 --model llama2-7b --step-ms 1200 --bucket auto',
    '--profile cluster.profile.json --model gpt3-1.3b --step-ms 300 --grad-accum 4 --json',
)
"""Command lines shown at the end of ``--help``."""

def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``budget`` flags that apply, plus buckets, optimizer time, model shape and plot."""
    add_group_arguments(p)
    m = p.add_argument_group("the step")
    m.add_argument("--step-ms", type=A.positive_float, required=True,
                   help="measured compute-only step time, ms (one micro-batch)")
    m.add_argument("--params", type=A.params_billions,
                   help="parameters N, billions (1e9); without a model shape gradients arrive at a uniform rate")
    m.add_argument("--dtype", default="bf16", help="gradient dtype: fp32, tf32, bf16, fp16, fp8 (default bf16)")
    m.add_argument("--backward-fraction", type=A.open_fraction, default=2.0 / 3.0,
                   help="share of the step spent in backward (default 2/3)")
    m.add_argument("--grad-accum", type=A.positive_int, default=1,
                   help="micro-batches per optimizer step, k (no_sync on all but the last; default 1)")
    m.add_argument("--optimizer-ms", type=A.nonneg_float, default=0.0,
                   help="optimizer time after the last all-reduce, ms (default 0)")
    b = p.add_argument_group("buckets")
    b.add_argument("--bucket", type=A.mib_or_auto, default=None,
                   help="bucket cap in MiB as DDP's bucket_cap_mb, or 'auto' to search a log grid "
                        "(default: DDP's default, 25 MiB with a 1 MiB first bucket)")
    b.add_argument("--first-bucket", type=A.positive_float, default=None,
                   help="first bucket cap, MiB (default: 1 MiB with DDP's default cap, else the cap, as torch 2.13)")
    s = p.add_argument_group("model shape (per-layer gradients and backward compute)")
    s.add_argument("--model", help="a model preset from hardware/models.json (e.g. gpt3-1.3b, llama2-7b)")
    s.add_argument("--hf-config", metavar="PATH",
                   help="a Hugging Face config.json (or its directory) of a dense model: the shape (needs --seq)")
    s.add_argument("--layers", type=A.positive_int, help="transformer layers L")
    s.add_argument("--hidden", type=A.positive_int, help="hidden size h")
    s.add_argument("--seq", type=A.positive_int, help="sequence length s, tokens")
    s.add_argument("--vocab", type=A.positive_int, help="vocabulary size V (default 50257 with --layers)")
    p.add_argument("--plot", metavar="FILE", help="write a Gantt chart of both streams (and the curve with auto), .png or .svg")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    add_html_argument(p)
    p.add_argument("--trace-out", metavar="FILE", help="write the simulated step as a Chrome trace (.json: Perfetto, "
                   "chrome://tracing, `commcost trace`)")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs_step.timeline_request`), simulate, render."""
    html = check_html(args)
    req = timeline_request(args)
    inp, r = req.inputs, req.resolved
    stream = gradient_stream(inp)
    default = simulate_timeline(inp, ddp_bucket_caps(None), stream=stream)
    if req.bucket_auto:
        sweep = sweep_buckets(inp, first_bucket_bytes=req.first_bucket_bytes)
        advice, best = sweep.advice, sweep.best  # the one bucket advice: the sweep's grid is its grid
    else:
        sweep = None
        advice = recommend_buckets(inp, stream=stream, first_bucket_bytes=req.first_bucket_bytes)
        best = simulate_timeline(inp, req.caps, stream=stream)
    # the measured band of the timeline shown: a system preset alone (commcost.analyses.uncertainty)
    band = None if r.band_topology is None else timeline_band(inp, best, r.band_topology)
    note = caps_note(auto=req.bucket_auto, caps=req.caps, bucket_cap_bytes=req.bucket_cap_bytes,
                     first_bucket_cap_bytes=req.first_bucket_cap_bytes)
    ctx = TimelineContext(inputs=inp, model_label=req.model_label, caps_note=note, fabric_note=req.fabric_note,
                          band=band)
    out, text = render_timeline_report(ctx, best, default, sweep, advice, plot=req.plot, info=r.info)
    if html:  # the page of the very dict --json prints (docs/report.md)
        write_html(html, timeline_html(json_dict(dumps_json(out))))
    if req.plot:
        plot_timeline(req.plot, best, sweep, default if sweep is not None else None)
    if req.trace_out:
        write_timeline_trace(req.trace_out, best, inp)
    if req.json:
        dump_json(out)
    else:
        print(text)
    return 0
