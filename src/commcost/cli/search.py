"""``commcost search``: every valid TP/PP/VP/CP/EP/DP/ZeRO/micro-batch/SP/recompute/bucket layout, ranked."""

from __future__ import annotations

import argparse
import sys

from commcost.cli import _args as A
import shlex
from commcost.analyses.plan.search import SearchInputs
from commcost.analyses.plan.search import SearchSpace
from commcost.analyses.plan.search import parse_fix
from commcost.analyses.plan.search import rank_robust
from commcost.analyses.plan.search import robust_candidates
from commcost.analyses.plan.search import search
from commcost.analyses.plan.space import count_upper_bound
from commcost.analyses.uncertainty import plan_band
from commcost.cli.inputs import model_spec_of as _spec
from commcost.cli.inputs import moe_inputs
from commcost.cli.inputs import resolve_hardware
from commcost.cli.plan import add_hardware_arguments
from commcost.cli.plan import add_model_arguments
from commcost.cli.plan import add_moe_arguments
from commcost.report.search import plot_pareto
from commcost.report.search import render_search_json
from commcost.report.search import render_search_text
from commcost.report.search import write_search_csv

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
    s.add_argument("--global-batch", type=A.positive_int, required=True, help="sequences per optimizer step")
    s.add_argument("--fix", action="append", default=[], metavar="DIM=VALUE",
                   help="fix a dimension (tp, pp, vp, cp, ep, etp, dp, zero, micro_batch, sp, recompute, bucket_mb); "
                        "repeat or comma-separate")
    s.add_argument("--even-pipeline-only", action="store_true", help="only layouts whose pp x vp divides the layers")

    add_moe_arguments(p)
    add_hardware_arguments(p)
    c = p.add_argument_group("compute")
    c.add_argument("--precision", default="bf16", help="GEMM precision: bf16, fp16, fp8, mxfp8, nvfp4 (default bf16)")
    c.add_argument("--efficiency", type=A.open_fraction, help="achieved fraction of peak on executed FLOPs")
    c.add_argument("--no-flash-attention", action="store_true", help="attention materialises the s x s scores")
    c.add_argument("--stack", default="auto", choices=("auto", "megatron", "nemo", "deepspeed", "torchtitan", "fsdp"),
                   help="training stack: its kernels, recomputation and ZeRO-3 gathers (default auto: from the layout)")
    c.add_argument("--compile", action="store_true", help="torch.compile fuses the element-wise operators")
    c.add_argument("--fp8-attention", action="store_true", help="fp8 recipes run attention in fp8 too (default bf16)")
    c.add_argument("--tp-comm-overlap", action="store_true",
                   help="TP collectives overlap the neighbouring GEMMs (Transformer Engine userbuffers)")
    o = p.add_argument_group("objective and output")
    o.add_argument("--objective", choices=("step", "tokens-per-gpu", "cost"), default="step",
                   help="rank by step time, tokens/s/GPU, or dollars per million tokens (default step)")
    o.add_argument("--rank", choices=("step", "robust", "cost"),
                   help="rank by the step, by the step at its measured band's upper edge (robust: every collective "
                        "at its class's slowest measured cluster; needs a --system preset), or by dollars per "
                        "million tokens (as --objective cost)")
    o.add_argument("--price-per-gpu-hour", type=A.positive_float,
                   help="dollars per GPU-hour (--objective cost; with --train-tokens, the run's cost)")
    o.add_argument("--train-tokens", type=A.token_count,
                   help="tokens to train on (2e12, 2T, 300B): each result's days and GPU-hours")
    o.add_argument("--top", type=A.positive_int, default=10, help="configurations shown (default 10)")
    o.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    o.add_argument("--csv", metavar="FILE", help="write the top configurations to FILE, plan --json's keys flattened")
    o.add_argument("--plot", metavar="FILE", help="draw the Pareto front (step against memory, and GPU count) to FILE")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


_SHAPE_FLAGS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts", "top_k",
                "expert_ffn_hidden", "moe_layers")
"""``plan``'s shape flags (:func:`commcost.cli.plan.add_model_arguments`)."""


def plan_prefix(args: argparse.Namespace, seq: int) -> tuple[str, ...]:
    """Every ``commcost plan`` flag of this search that is not the layout: the model (``--model`` or its
    shape), ``--seq``, ``--global-batch``, the hardware and the compute flags, shell-quoted; each result's
    ``plan_command`` is ``commcost plan`` + these + its layout flags."""

    out: list[str] = []

    def add(flag: str, value) -> None:
        if value is None or value is False:
            return
        out.append(flag if value is True else f"{flag} {shlex.quote(repr(value) if isinstance(value, float) else str(value))}")

    if args.model is not None:
        add("--model", args.model)
    else:
        for f in _SHAPE_FLAGS:
            add("--" + f.replace("_", "-"), getattr(args, f))
        add("--gated-mlp", args.gated_mlp)
    add("--seq", seq)
    add("--global-batch", args.global_batch)
    for f in ("system", "gpus_per_node", "no_nvls", "gpu", "bw", "latency", "profile", "extrapolate",
              "efficiency", "no_flash_attention", "tp_comm_overlap"):
        add("--" + f.replace("_", "-"), getattr(args, f, None))
    if args.precision != "bf16":
        add("--precision", args.precision)
    if args.stack != "auto":
        add("--stack", args.stack)
    add("--compile", args.compile)
    add("--fp8-attention", args.fp8_attention)
    return tuple(out)


MAX_GPU_COUNTS = 64
"""Most GPU counts one search takes (``--gpus-range``): each is a whole search of its own."""
MAX_GLOBAL_BATCH = 10**7
"""Largest ``--global-batch`` searched, sequences (its divisors are the micro-batch choices)."""
MAX_TOP = 1000
"""Most configurations ``--top`` shows (each is priced again by ``plan``)."""
MAX_CONFIGURATIONS = 20_000_000
"""Most configurations one search enumerates (:func:`commcost.analyses.plan.space.count_upper_bound`, counted
before enumerating): about a minute at ~500,000 a second and ~1 GB of columns. Past it the search is
refused with the count, so it never runs for an hour or exhausts memory."""


def parse_gpus_range(text: str) -> tuple[int, ...]:
    """``"256:2048"`` -> ``(256, 512, 1024, 2048)``; ``"64:256:64"`` -> ``(64, 128, 192, 256)``; each
    count within ``--gpus``'s bounds, and at most :data:`MAX_GPU_COUNTS` of them (counted, not listed)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or any(len(x.strip()) > 20 for x in parts):
        A.fail(f"--gpus-range takes LO:HI or LO:HI:STEP with integers, got {text[:80]!r}")
    try:
        nums = [int(x) for x in parts]
    except ValueError:
        A.fail(f"--gpus-range takes LO:HI or LO:HI:STEP with integers, got {text!r}")
    if min(nums) < 1 or nums[0] > nums[1]:
        A.fail(f"--gpus-range takes LO:HI or LO:HI:STEP with 1 <= LO <= HI, got {text!r}")
    lo, hi = nums[0], nums[1]
    gpus_max = A.FLAG_BOUNDS["--gpus"][1]
    if hi > gpus_max:
        A.fail(f"--gpus-range: HI must be at most {gpus_max:,} GPUs (as --gpus), got {hi:,}")
    if len(nums) == 3:
        counts = (hi - lo) // nums[2] + 1
        if counts > MAX_GPU_COUNTS:
            A.fail(f"--gpus-range {text} is {counts:,} GPU counts; a search takes at most {MAX_GPU_COUNTS} "
                   f"(a larger STEP, or LO:HI for LO, 2 LO, 4 LO ...)")
        return tuple(range(lo, hi + 1, nums[2]))
    out = []
    w = lo
    while w <= hi:
        out.append(w)
        w *= 2
    return tuple(out)


class _Progress:
    """A bar on stderr, drawn once the search has run a second (and only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.drawn = False

    def __call__(self, done: int, total: int, elapsed_s: float) -> None:
        if not self.enabled or elapsed_s < 1.0 or total <= 0:
            return
        frac = min(1.0, done / total)
        bar = "#" * int(30 * frac)
        rate = done / elapsed_s if elapsed_s > 0 else 0.0
        sys.stderr.write(f"\rsearch [{bar:<30}] {frac:5.1%}  {done:,}/{total:,}  {rate:,.0f}/s  (Ctrl-C: best so far)")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")


def run(args: argparse.Namespace) -> int:
    """Parse, search, render."""

    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    if args.global_batch > MAX_GLOBAL_BATCH:
        A.fail(f"--global-batch must be at most {MAX_GLOBAL_BATCH:,} sequences, got {args.global_batch:,}")
    if args.top > MAX_TOP:
        A.fail(f"--top must be at most {MAX_TOP:,} configurations, got {args.top:,}")
    spec, seq = _spec(args)
    if (args.gpus is None) == (args.gpus_range is None):
        A.fail("give --gpus N or --gpus-range LO:HI")
    gpus = (args.gpus,) if args.gpus is not None else parse_gpus_range(args.gpus_range)
    if args.rank is not None:  # --rank step|cost is --objective step|cost; robust ranks steps again
        objective = "cost" if args.rank == "cost" else "step"
        if args.objective not in ("step", objective):
            A.fail(f"--rank {args.rank} ranks by {objective}: drop --objective {args.objective}")
        args.objective = objective
    if args.objective == "cost" and args.price_per_gpu_hour is None:
        A.fail("--objective cost needs --price-per-gpu-hour (dollars per GPU-hour)")
    resolved, G, gpu = resolve_hardware(args, max(gpus))
    model = resolved.comm
    robust = args.rank == "robust"
    if robust and resolved.band_topology is None:
        A.fail("--rank robust ranks by the measured band of a --system preset; it has none with --bw/--latency, "
               "--profile or a custom topology")
    fixed = parse_fix(args.fix)
    space = SearchSpace(spec=spec, seq=seq, global_batch=args.global_batch, gpus=gpus, gpus_per_node=G, fixed=fixed,
                        even_pipeline_only=args.even_pipeline_only)
    estimate = count_upper_bound(space)
    if estimate > MAX_CONFIGURATIONS:
        A.fail(f"the space holds up to {estimate:,} configurations ({len(gpus)} GPU count(s)), more than the "
               f"{MAX_CONFIGURATIONS:,} a search enumerates (about a minute, ~1 GB); fix a dimension "
               "(--fix tp=8,pp=4), or search fewer GPU counts")
    inp = SearchInputs(space=space, gpu=gpu, precision=args.precision, efficiency=args.efficiency,
                       flash_attention=not args.no_flash_attention, tp_comm_overlap=args.tp_comm_overlap,
                       stack=args.stack, compiled=args.compile, fp8_attention=args.fp8_attention,
                       objective=args.objective, price_per_gpu_hour=args.price_per_gpu_hour or 0.0,
                       top=robust_candidates(args.top) if robust else args.top,
                       keep_points=args.plot is not None, train_tokens=args.train_tokens, **moe_inputs(args))
    bar = _Progress(not args.no_progress and not args.json)
    try:
        result = search(inp, model, progress=bar)
    finally:
        bar.close()
    if robust:
        result = rank_robust(result, model, resolved.band_topology, args.top)
    bands = result.bands
    if bands is None and args.json and resolved.band_topology is not None:  # results[] carry plan --json's keys, band included

        bands = tuple(plan_band(p.inputs, p, model, resolved.band_topology) for p in result.plans)
    prefix = plan_prefix(args, seq)
    signum = A.last_interrupt_signal() if result.interrupted else 0
    print(render_search_json(result, bands, plan_prefix=prefix) if args.json
          else render_search_text(result, plan_prefix=prefix, stopped_by="SIGTERM" if signum == 15 else "Ctrl-C"))
    if args.csv:
        write_search_csv(result, args.csv, plan_prefix=prefix)
    if args.plot:
        plot_pareto(result, args.plot)
        if not args.json:
            print(f"plot: {args.plot}")
    return 128 + signum if result.interrupted else 0
