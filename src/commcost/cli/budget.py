"""``commcost budget`` (and ``tools/collective_cost.py``): the Drill 3 report."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli._fabric import add_group_arguments, resolve_comm_model

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
    m.add_argument("--gpu", help="GPU preset (`commcost presets`) whose memory pure DDP must fit in "
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
    """Validate the combination of flags, resolve the one CommModel, compute, render."""
    from commcost.analyses.drill.budget import BudgetInputs, communication_budget
    from commcost.comm.model import FlatLinkModel
    from commcost.comm.link import Link
    from commcost.core.units import BILLION, GB, MS, TERA, US
    from commcost.core.dtypes import bytes_per_element, gradient_bytes

    shape = None
    if args.model is not None:
        from commcost.workload.shape import model_params, model_preset

        if args.params is not None:
            A.fail("--model sets the parameter count; drop --params")
        shape = model_preset(args.model)  # its tensors: the per-tensor gradient stream (bucket advice)
        args.params = model_params(shape) / BILLION
    want_budget = args.params is not None or args.step_ms is not None
    if not want_budget and not args.layer_ratio:
        A.fail("nothing to report: give --params (or --model) and --step-ms, or --layer-ratio with --hidden and --seq")
    if want_budget and (args.params is None or args.step_ms is None):
        missing = "--params" if args.params is None else "--step-ms"
        A.fail(f"{missing} is required for the budget report (or use --layer-ratio alone)")
    if args.layer_ratio and (args.hidden is None or args.seq is None):
        missing = "--hidden" if args.hidden is None else "--seq"
        A.fail(f"--layer-ratio needs {missing}")
    if not args.layer_ratio and (args.hidden is not None or args.seq is not None):
        A.fail("--hidden/--seq are only used with --layer-ratio")
    resolved = resolve_comm_model(args)
    comm, topo = resolved.comm, resolved.topology
    bytes_per_grad = bytes_per_element(args.dtype)
    if want_budget:
        # part (c) simulates PyTorch's default buckets (25 MiB): keep that simulation bounded
        A.check_bucket_count("--params", gradient_bytes(args.params * BILLION, bytes_per_grad), 25 * 2.0**20)
    if topo is not None:  # fix (e)3 on the system's own NVLink
        intra = topo.intra
        args.gpus_per_node = topo.gpus_per_node
    else:
        if args.gpus_per_node is None:
            args.gpus_per_node = 8
        latency_s = (args.intra_latency * US if args.intra_latency is not None
                     else comm.flat_link.latency_s if comm.flat_link is not None else 0.0)
        intra = Link(bandwidth_bytes_per_s=args.intra_bw * GB, latency_s=latency_s)

    out: dict = {}
    texts: list[str] = []
    drill_texts: list[str] = []  # the drill's report: printed as it always was
    if want_budget:
        from commcost.report.budget import budget_to_dict, render_budget_text

        budget = communication_budget(BudgetInputs(
            gpus=args.gpus, comm=comm, params=args.params * BILLION, step_s=args.step_ms * MS,
            bytes_per_grad=bytes_per_grad, grad_accum=args.grad_accum,
            backward_fraction=args.backward_fraction, threshold=args.threshold,
            fix_grad_accum=args.fix_grad_accum, intra_node_comm=FlatLinkModel(link=intra),
            gpus_per_node=args.gpus_per_node, bucket_caps_bytes=tuple(args.buckets),
            max_latency_share=args.max_latency_share, tail_budget_fraction=args.tail_budget,
            algorithm=args.algorithm, shape=shape,
        ))
        band = None
        if resolved.band_topology is not None:  # a system preset alone: the measured band of its class
            from commcost.analyses.uncertainty import budget_band

            band = budget_band(budget, resolved.band_topology)
        out.update(budget_to_dict(budget, band))
        if topo is not None:
            from commcost.report.collective import budget_fabric_note, fabric_to_dict

            out["fabric"] = fabric_to_dict(topo, budget.fixes.intra_node.nodes_spanned)
            texts.append(budget_fabric_note(budget, topo))
        texts.append(render_budget_text(budget, band))
        drill_texts.append(texts[-1])
        gpu = args.gpu
        if gpu is None and args.system is not None:  # presets load only with a system (drill start-up)
            from commcost.hardware.registry import system_gpu

            gpu = system_gpu(args.system)
        if gpu is not None:
            note, out["memory"] = _ddp_memory(args.params * BILLION, gpu)
            texts.insert(0, note)
    if args.layer_ratio:
        from commcost.analyses.drill.layer import LayerInputs, layer_ratio
        from commcost.report.layer import layer_to_dict, render_layer_text

        layer = layer_ratio(LayerInputs(
            gpus=args.gpus, comm=comm, hidden=args.hidden, seq=args.seq,
            micro_batch=args.micro_batch, grad_accum=args.grad_accum,
            achieved_flops_per_s=args.tflops * TERA, bytes_per_grad=bytes_per_grad,
            backward_fraction=args.backward_fraction,
        ))
        out["layer"] = layer_to_dict(layer)
        texts.append(render_layer_text(layer, gpus=args.gpus, hidden=args.hidden, seq=args.seq,
                                       achieved_flops_per_s=args.tflops * TERA,
                                       backward_fraction=args.backward_fraction,
                                       grad_accum=args.grad_accum))
        drill_texts.append(texts[-1])
    if resolved.note is not None:
        texts.insert(0, resolved.note)
        drill_texts.append(resolved.note)  # the profile's header, as the drill command prints it
    if resolved.info is not None:
        out["profile"] = resolved.info
    if args.json:
        from commcost.report._json import dump_json

        dump_json(out)
    else:  # the drill's parts (a)-(g) and the layer ratio keep their format; the notes around them wrap
        from commcost.report._width import wrap_lines

        print("\n\n".join(text if text in drill_texts else wrap_lines(text) for text in texts))
    return 0



def _ddp_memory(params: float, gpu: str) -> tuple[str, dict]:
    """Whether pure DDP's model states fit on ``gpu``: 16 N bytes (bf16 weights and gradients, fp32
    master weights and Adam moments, :func:`commcost.workload.memory.ddp_memory_per_gpu`) against its memory."""
    from commcost.workload.memory import ddp_memory_per_gpu, gpu_capacity_bytes
    from commcost.core.units import GB

    need, have = ddp_memory_per_gpu(params), gpu_capacity_bytes(gpu)
    fits = need <= have
    text = (f"memory: pure DDP with mixed-precision Adam keeps 16 B per parameter on every GPU = {need / GB:,.1f} GB "
            f"(before activations) against {have / GB:,.1f} GB on {gpu}: "
            + ("fits" if fits else "DOES NOT FIT -- shard it (ZeRO/FSDP) or split the model (TP/PP): see `commcost plan`"))
    return text, {"gpu": gpu, "model_states_bytes": need, "capacity_bytes": have, "fits": fits}

