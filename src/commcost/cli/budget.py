"""``commcost budget`` (and ``tools/collective_cost.py``): the Drill 3 report."""

from __future__ import annotations

import argparse
import json
import sys

from commcost.cli import _args as A

__all__ = ["add_arguments", "run"]

HELP = "communication budget of a data-parallel step (Drill 3, parts a-g)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the budget flags (units as in the README) to ``p``."""
    g = p.add_argument_group("the data-parallel group")
    g.add_argument("--gpus", type=A.positive_int, help="ranks P in the data-parallel group (required, "
                   "unless --profile gives it)")
    g.add_argument("--bw", type=A.positive_float, help="achievable per-rank bandwidth B, GB/s (1e9)")
    g.add_argument("--latency", type=A.positive_float, help="per ring-step latency a, microseconds")
    g.add_argument("--profile", help="calibrated profile (commcost fit -o FILE): replaces --bw and --latency")
    g.add_argument("--intra-bw", type=A.positive_float, default=300.0,
                   help="intra-node bandwidth for fix (e)3, GB/s (default 300)")
    g.add_argument("--intra-latency", type=A.positive_float,
                   help="intra-node per-step latency for fix (e)3, us (default: --latency)")
    g.add_argument("--gpus-per-node", type=A.positive_int, default=8, help="GPUs per node (default 8)")
    m = p.add_argument_group("the model and the step")
    m.add_argument("--params", type=A.positive_float, help="parameters N, billions (1e9)")
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
    b.add_argument("--buckets", type=A.mib_list, default=(2.0**20, 25 * 2.0**20),
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
    """Validate the combination of flags, compute, render."""
    from commcost.budget import BudgetInputs, communication_budget
    from commcost.layer_ratio import LayerInputs, layer_ratio
    from commcost.report.budget import budget_to_dict, layer_to_dict, render_budget_text, render_layer_text
    from commcost.topology import Link
    from commcost.units import BILLION, GB, MS, TERA, US
    from commcost.workload import bytes_per_element

    calibrated = _apply_profile(args)
    if args.gpus is None:
        A.fail("--gpus is required (ranks P in the data-parallel group)")
    if args.bw is None:
        A.fail("--bw is required (achievable per-rank bandwidth, GB/s)")
    if args.latency is None:
        A.fail("--latency is required (per ring-step latency, microseconds)")
    want_budget = args.params is not None or args.step_ms is not None
    if not want_budget and not args.layer_ratio:
        A.fail("nothing to report: give --params and --step-ms, or --layer-ratio with --hidden and --seq")
    if want_budget and (args.params is None or args.step_ms is None):
        missing = "--params" if args.params is None else "--step-ms"
        A.fail(f"{missing} is required for the budget report (or use --layer-ratio alone)")
    if args.layer_ratio and (args.hidden is None or args.seq is None):
        missing = "--hidden" if args.hidden is None else "--seq"
        A.fail(f"--layer-ratio needs {missing}")
    if not args.layer_ratio and (args.hidden is not None or args.seq is not None):
        A.fail("--hidden/--seq are only used with --layer-ratio")
    bytes_per_grad = bytes_per_element(args.dtype)
    link = Link(bandwidth_bytes_per_s=args.bw * GB, latency_s=args.latency * US)
    intra = Link(bandwidth_bytes_per_s=args.intra_bw * GB,
                 latency_s=(args.intra_latency if args.intra_latency is not None else args.latency) * US)

    out: dict = {}
    texts: list[str] = []
    if want_budget:
        budget = communication_budget(BudgetInputs(
            gpus=args.gpus, link=link, params=args.params * BILLION, step_s=args.step_ms * MS,
            bytes_per_grad=bytes_per_grad, grad_accum=args.grad_accum,
            backward_fraction=args.backward_fraction, threshold=args.threshold,
            fix_grad_accum=args.fix_grad_accum, intra_node_link=intra,
            gpus_per_node=args.gpus_per_node, bucket_caps_bytes=tuple(args.buckets),
            max_latency_share=args.max_latency_share, tail_budget_fraction=args.tail_budget,
        ))
        out.update(budget_to_dict(budget))
        texts.append(render_budget_text(budget))
    if args.layer_ratio:
        layer = layer_ratio(LayerInputs(
            gpus=args.gpus, link=link, hidden=args.hidden, seq=args.seq,
            micro_batch=args.micro_batch, grad_accum=args.grad_accum,
            achieved_flops_per_s=args.tflops * TERA, bytes_per_grad=bytes_per_grad,
            backward_fraction=args.backward_fraction,
        ))
        out["layer"] = layer_to_dict(layer)
        texts.append(render_layer_text(layer, gpus=args.gpus, hidden=args.hidden, seq=args.seq,
                                       achieved_flops_per_s=args.tflops * TERA,
                                       backward_fraction=args.backward_fraction))
    if calibrated is not None:
        texts.insert(0, calibrated[0])
        out["profile"] = calibrated[1]
    if args.json:
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(texts))
    return 0


def _apply_profile(args: argparse.Namespace) -> tuple[str, dict] | None:
    """Put a profile's calibrated link into ``args.bw``/``args.latency``; (text line, JSON) naming it."""
    if getattr(args, "profile", None) is None:
        return None
    from commcost.calibrate.profile import load_profile
    from commcost.units import GB, US, format_rate, format_seconds

    if args.bw is not None or args.latency is not None:
        A.fail("--profile replaces --bw and --latency; give either the profile or both numbers")
    profile = load_profile(args.profile)
    link = profile.link
    args.bw, args.latency = link.bandwidth_bytes_per_s / GB, link.latency_s / US
    if args.gpus is None:
        args.gpus = profile.fit.gpus
    fit = profile.fit
    text = (f"link from profile {args.profile}: B = {format_rate(link.bandwidth_bytes_per_s)} (bus bandwidth, "
            f"large messages), a = {format_seconds(link.latency_s)} per ring step (small messages); "
            f"fitted on {fit.op} over {fit.gpus} ranks, R^2 {profile.r2:.4f}")
    if args.gpus != fit.gpus:
        text += f"; applied here to P = {args.gpus} through the ring formula"
    return text, {"path": args.profile, "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                  "latency_s": link.latency_s, "op": fit.op.value, "gpus": fit.gpus, "r2": profile.r2,
                  "source": profile.provenance.get("source")}
