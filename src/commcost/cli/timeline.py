"""``commcost timeline``: simulate the DDP bucket timeline, or search the bucket size."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_group_arguments, resolve_comm_model
from commcost.cli.inputs import fabric_flags
from dataclasses import replace
from commcost.analyses.uncertainty import timeline_band
from commcost.core.units import BILLION
from commcost.core.units import MS
from commcost.core.units import MiB
from commcost.report._json import dump_json
from commcost.report._width import wrap_lines
from commcost.report.bucket_advice import bucket_advice_to_dict
from commcost.report.bucket_advice import render_bucket_advice
from commcost.report.chrome_trace import write_timeline_trace
from commcost.report.plot_timeline import plot_timeline
from commcost.report.timeline import TimelineContext
from commcost.report.timeline import render_sweep_text
from commcost.report.timeline import render_timeline_text
from commcost.report.timeline import sweep_to_dict
from commcost.report.timeline import timeline_to_dict
from commcost.step.bucket_advice import recommend_buckets
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.sweep import sweep_buckets
from commcost.step.timeline import TimelineInputs
from commcost.step.timeline import gradient_stream
from commcost.step.timeline import simulate_timeline
from commcost.workload.shape import ModelShape
from commcost.workload.shape import bytes_per_element
from commcost.workload.shape import model_params
from commcost.workload.shape import model_preset

__all__ = ["HELP", "add_arguments", "run"]

HELP = "simulate DDP's bucketed all-reduce against the backward pass; --bucket auto finds the best size"

EXAMPLES = (
    '--gpus 32 --bw 25 --latency 20 --params 1.3 --step-ms 400 --plot timeline.png',
    '--system dgx-h100 --nodes 4 --model llama2-7b --step-ms 1200 --bucket auto',
    '--profile cluster.profile.json --model gpt3-1.3b --step-ms 300 --grad-accum 4 --json',
)
"""Command lines shown at the end of ``--help``."""

_PARAMS_TOLERANCE = 0.10
"""--params may differ from a shape's own count by this much (it is then only a cross-check)."""


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
    s.add_argument("--layers", type=A.positive_int, help="transformer layers L")
    s.add_argument("--hidden", type=A.positive_int, help="hidden size h")
    s.add_argument("--seq", type=A.positive_int, help="sequence length s, tokens")
    s.add_argument("--vocab", type=A.positive_int, help="vocabulary size V (default 50257 with --layers)")
    p.add_argument("--plot", metavar="FILE", help="write a Gantt chart of both streams (and the curve with auto), .png or .svg")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    p.add_argument("--trace-out", metavar="FILE", help="write the simulated step as a Chrome trace (.json: Perfetto, "
                   "chrome://tracing, `commcost trace`)")


def _shape(args: argparse.Namespace):
    """The model shape from --model or --layers/--hidden/--seq, and a label; (None, label) if none."""


    explicit = [f for f in ("layers", "hidden", "vocab") if getattr(args, f) is not None]
    if args.model is not None:
        if explicit:
            A.fail(f"--model sets the shape; drop --{explicit[0]} (only --seq may override a preset)")
        shape = model_preset(args.model)
        if args.seq is not None:
            shape = replace(shape, seq=args.seq)
        return shape, f"model {args.model}"
    if args.layers is None and args.hidden is None:
        if args.seq is not None or args.vocab is not None:
            A.fail("--seq/--vocab describe a model shape: give --layers and --hidden too (or --model)")
        return None, None
    for flag in ("layers", "hidden", "seq"):
        if getattr(args, flag) is None:
            A.fail(f"a model shape needs --layers, --hidden and --seq; --{flag} is missing")
    shape = ModelShape(layers=args.layers, hidden=args.hidden, seq=args.seq,
                       vocab=args.vocab if args.vocab is not None else 50257)
    return shape, f"model L = {args.layers}, h = {args.hidden}, s = {args.seq}, V = {shape.vocab}"


def run(args: argparse.Namespace) -> int:
    """Validate the flags, simulate, render."""

    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    shape, label = _shape(args)
    if shape is None and args.params is None:
        A.fail("give --params (billions), or a model shape with --model or --layers/--hidden/--seq")
    if shape is not None:
        n_shape = model_params(shape)
        if args.params is not None and abs(args.params * BILLION - n_shape) > _PARAMS_TOLERANCE * n_shape:
            A.fail(f"--params {args.params:g} (billions) disagrees with the shape's {n_shape / BILLION:.4g} "
                   f"billion parameters by more than {_PARAMS_TOLERANCE:.0%}; drop --params or fix the shape")
        label = (f"{label}: {n_shape:,} params, gradients ready layer by layer in reverse "
                 "(output head first, embedding last), backward time per layer from its FLOPs")
    else:
        label = "no model shape: gradients arrive at a uniform rate S/W during backward"
    resolved = resolve_comm_model(fabric_flags(args))
    gpus = resolved.gpus
    fabric_note = resolved.note
    if resolved.topology is not None:  # name what runs: the algorithm depends on the bucket's size
        ran = []
        for size in (2**20, 25 * 2**20, 256 * 2**20):
            c = resolved.comm.cost("all_reduce", size, gpus, args.algorithm)
            ran.append(f"{size // 2**20} MiB: {c.algorithm.value}" + (f" ({c.protocol})" if c.protocol else ""))
        fabric_note = "; ".join(filter(None, [fabric_note, "bucket all-reduces run " + ", ".join(ran)]))
    cost = None
    inp = TimelineInputs(
        gpus=gpus, comm=resolved.comm, algorithm=args.algorithm,
        step_s=args.step_ms * MS, params=(args.params or 0.0) * BILLION, shape=shape,
        bytes_per_grad=bytes_per_element(args.dtype), backward_fraction=args.backward_fraction,
        grad_accum=args.grad_accum, optimizer_s=args.optimizer_ms * MS,
    )
    S_total = inp.message_bytes
    shape_flag = "--params" if shape is None else "--model" if args.model is not None else "--layers/--hidden"
    A.check_bucket_count(shape_flag, S_total, 25 * MiB)  # the default, always run
    if args.bucket not in (None, "auto"):
        A.check_bucket_count("--bucket", S_total, args.bucket * MiB)
    first_bytes = int(args.first_bucket * MiB) if args.first_bucket is not None else None
    if first_bytes is not None and first_bytes < 1:
        A.fail(f"--first-bucket {args.first_bucket:g} MiB is under one byte")
    stream = gradient_stream(inp)
    default = simulate_timeline(inp, ddp_bucket_caps(None), stream=stream, allreduce_s=cost)

    def band_of(tl):
        """The measured band of the timeline shown: a system preset alone (commcost.analyses.uncertainty)."""
        if resolved.band_topology is None:
            return None

        return timeline_band(inp, tl, resolved.band_topology)

    if args.bucket == "auto":
        sweep = sweep_buckets(inp, first_bucket_bytes=first_bytes, allreduce_s=cost)
        advice = sweep.advice  # the one bucket advice: the sweep's grid is its grid
        note = ("each cap as an explicit bucket_cap_mb (torch 2.13: first bucket = cap)" if first_bytes is None
                else f"first bucket fixed at {args.first_bucket:g} MiB")
        band = band_of(sweep.best)
        ctx = TimelineContext(inputs=inp, model_label=label, caps_note=note, fabric_note=fabric_note, band=band)
        out, text, best = sweep_to_dict(sweep, default, band), render_sweep_text(ctx, sweep, default), sweep.best
    else:
        caps = ddp_bucket_caps(None if args.bucket is None else args.bucket, first_bucket_bytes=first_bytes)
        if args.bucket is None:
            note = "DDP's default: cap 25 MiB, first bucket 1 MiB (bucket_cap_mb=None)"
        else:
            note = f"cap {args.bucket:g} MiB, first bucket {caps.first_bucket_cap_bytes / MiB:g} MiB"
            if first_bytes is None:
                note += " (an explicit bucket_cap_mb drops torch 2.13's 1 MiB first bucket; omit --bucket for the default)"
        note += ("\n  (steady state: DDP runs its first iteration as one bucket, then rebuilds the buckets "
                 "in gradient-ready order)")
        sweep = None
        advice = recommend_buckets(inp, stream=stream, allreduce_s=cost, first_bucket_bytes=first_bytes)
        best = simulate_timeline(inp, caps, stream=stream, allreduce_s=cost)
        band = band_of(best)
        ctx = TimelineContext(inputs=inp, model_label=label, caps_note=note, fabric_note=fabric_note, band=band)
        out, text = timeline_to_dict(best, band), render_timeline_text(ctx, best)
    out["bucket_advice"] = bucket_advice_to_dict(advice)
    if sweep is None:  # --bucket auto prints it beside its curve
        text += "\n  bucket advice: " + render_bucket_advice(advice)
    if args.plot:
        plot_timeline(args.plot, best, sweep, default if sweep is not None else None)
    if args.trace_out:
        write_timeline_trace(args.trace_out, best, inp)
    if resolved.info is not None:
        out["profile"] = resolved.info
    if args.json:

        dump_json(out)
    else:

        print(wrap_lines(text + (f"\n\n  plot written to {args.plot}" if args.plot else "")))
    return 0
