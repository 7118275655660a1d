"""``commcost plan``: price one TP/PP/DP/CP/EP/ZeRO configuration end to end, with memory per GPU."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli.inputs import fabric_flags
from dataclasses import replace
from commcost.analyses.plan.plan import PlanInputs
from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.sensitivity import sensitivity
from commcost.analyses.plan.training_cost import training_cost
from commcost.analyses.uncertainty import plan_band
from commcost.calibrate.efficiency import calibration_note
from commcost.calibrate.efficiency import fit_efficiency
from commcost.calibrate.efficiency import load_calibration
from commcost.calibrate.efficiency import save_calibration
from commcost.cli._fabric import add_nvls_argument
from commcost.cli._fabric import resolve_comm_model
from commcost.core.units import MiB
from commcost.hardware import load_preset_file
from commcost.hardware.registry import system_gpu
from commcost.parallel.layout import Layout
from commcost.report.chrome_trace import plan_chrome_trace
from commcost.report.chrome_trace import write_trace
from commcost.report.plan import render_plan_json
from commcost.report.plan import render_plan_text
from commcost.report.training import render_training
from commcost.report.training import training_to_dict
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.transformer import TransformerSpec
from commcost.workload.transformer import model_spec

__all__ = ["HELP", "EXAMPLES", "add_arguments", "add_model_arguments", "add_hardware_arguments", "run",
           "resolve_hardware"]

HELP = "one parallel training configuration: step time, breakdown, TFLOP/s, MFU, memory per GPU, advice"

EXAMPLES = (
    "--model llama3-70b --system dgx-h100 --gpus 1024 --seq 8192 --global-batch 1024 --tp 8 --pp 4 --vp 5 "
    "--zero 1 --sequence-parallel --recompute selective",
    "--model llama2-7b --system dgx-h100 --gpus 32 --global-batch 256 --zero 3 --json",
    "--model mixtral-8x7b --system dgx-h100 --gpus 64 --global-batch 256 --ep 8 --micro-batch 2",
)
"""Command lines shown at the end of ``--help``."""


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--model`` or the explicit shape (``--layers --hidden --heads`` ...), and ``--seq``: shared by
    ``plan`` and ``search``."""
    m = p.add_argument_group("model (a registry name, or the shape)")
    m.add_argument("--model", help="registry name (hardware/models.json), e.g. llama3-70b, gpt3-175b, mixtral-8x7b, deepseek-v3")
    for flag, what in (("--layers", "layers L"), ("--hidden", "hidden size h"), ("--heads", "attention heads"),
                       ("--kv-heads", "key/value heads (GQA; default heads)"), ("--head-dim", "head width (default h/heads)"),
                       ("--ffn-hidden", "MLP width (default 4h)"), ("--vocab", "vocabulary (default 50257)"),
                       ("--experts", "routed experts (MoE)"), ("--top-k", "experts per token"),
                       ("--expert-ffn-hidden", "expert MLP width (default --ffn-hidden)"),
                       ("--moe-layers", "MoE layers, the last ones (default all)")):
        m.add_argument(flag, type=A.positive_int, help=what)
    m.add_argument("--gated-mlp", action="store_true", help="SwiGLU MLP (three matrices)")
    m.add_argument("--seq", type=A.positive_int, help="sequence length (default: the model's training length)")


def add_hardware_arguments(p: argparse.ArgumentParser) -> None:
    """``--system``/``--gpus-per-node``/``--gpu``, a flat ``--bw``/``--latency`` link, or ``--profile``:
    shared by ``plan`` and ``search`` (the resolver, :func:`commcost.cli._fabric.resolve_comm_model`,
    builds the CommModel from them)."""

    hw = p.add_argument_group("hardware (a --system preset, a flat --bw/--latency link with --gpu, or --profile)")
    hw.add_argument("--system", help="system preset (commcost presets), e.g. dgx-h100, gb200-nvl72")
    hw.add_argument("--gpus-per-node", type=A.positive_int, help="GPUs per node (default: the preset's; flat: 8)")
    add_nvls_argument(hw)
    hw.add_argument("--gpu", help="GPU preset (default: the system's), e.g. h100-sxm")
    hw.add_argument("--bw", type=A.rate_gb_per_s, help="flat link: per-rank bandwidth, GB/s (or 50GB/s, 400Gbps)")
    hw.add_argument("--latency", type=A.nonneg_latency_us, help="flat link: per-step latency, us (or 20us)")
    hw.add_argument("--profile", help="calibrated communication profile (commcost fit -o FILE)")
    hw.add_argument("--extrapolate", action="store_true", help="apply --profile outside its measured scope")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Model, layout, hardware, compute and output flags."""
    add_model_arguments(p)
    lay = p.add_argument_group("layout")
    lay.add_argument("--gpus", type=A.positive_int, help="GPUs W (default dp x tp x pp x cp, or the system's nodes)")
    for flag, what in (("--tp", "tensor parallel"), ("--pp", "pipeline parallel"), ("--vp", "virtual stages per pipeline rank"),
                       ("--cp", "context parallel"), ("--ep", "expert parallel (carved out of dp x cp)")):
        lay.add_argument(flag, type=A.positive_int, default=1, help=f"{what} (default 1)")
    lay.add_argument("--dp", type=A.positive_int, help="data parallel (default gpus / (tp pp cp))")
    lay.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage over dp x cp (default 0)")
    lay.add_argument("--fsdp", action="store_true", help="same as --zero 3")
    lay.add_argument("--hsdp", type=A.positive_int, metavar="N",
                     help="with --fsdp/--zero 3: hybrid sharding, shards over groups of N of the dp x cp ranks")
    lay.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (needs tp > 1)")
    lay.add_argument("--recompute", choices=("none", "selective", "full"), default="none", help="activation recomputation")
    lay.add_argument("--micro-batch", type=A.positive_int, default=1, help="sequences per micro-batch (default 1)")
    lay.add_argument("--global-batch", type=A.positive_int, required=True, help="sequences per optimizer step")
    lay.add_argument("--uneven-pipeline", action="store_true",
                     help="layers need not divide by pp x vp (the heaviest stage takes ceil(L/(pp vp)) per chunk)")
    lay.add_argument("--order", default="tp-cp-ep-dp-pp", help="rank order, innermost first (Megatron's default)")
    add_moe_arguments(p, lay)
    add_hardware_arguments(p)
    c = p.add_argument_group("compute")
    c.add_argument("--precision", default="bf16", help="bf16, fp16, fp8, mxfp8, nvfp4 (default bf16)")
    c.add_argument("--efficiency", type=A.open_fraction, help="achieved fraction of peak on executed FLOPs")
    c.add_argument("--mfu", type=A.open_fraction, help="assume this MFU: fits the efficiency that gives it")
    c.add_argument("--measured-step-s", type=A.positive_float, help="calibrate: a measured step time, seconds")
    c.add_argument("--measured-tflops", type=A.positive_float, help="calibrate: measured model TFLOP/s per GPU")
    c.add_argument("--save-calibration", metavar="FILE", help="write the fitted efficiency to FILE")
    c.add_argument("--calibration", metavar="FILE", help="use the efficiency of a saved calibration")
    c.add_argument("--no-flash-attention", action="store_true", help="attention materialises the s x s scores")
    c.add_argument("--stack", default="auto", choices=("auto", "megatron", "nemo", "deepspeed", "torchtitan", "fsdp"),
                   help="training stack: its kernels, recomputation and ZeRO-3 gathers (default auto: from the layout)")
    c.add_argument("--compile", action="store_true", help="torch.compile fuses the element-wise operators")
    c.add_argument("--fp8-attention", action="store_true", help="fp8 recipes run attention in fp8 too (default bf16)")
    c.add_argument("--tp-comm-overlap", action="store_true",
                   help="TP collectives overlap the neighbouring GEMMs (Transformer Engine userbuffers)")
    c.add_argument("--bucket-mb", type=A.positive_float, help="data-parallel bucket cap, MiB (default DDP's 25)")
    t = p.add_argument_group("training cost")
    t.add_argument("--train-tokens", type=A.token_count, help="tokens to train on (2e12, 2T, 300B): days and GPU-hours")
    t.add_argument("--price-per-gpu-hour", type=A.positive_float, help="dollars per GPU-hour: the run's cost")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    p.add_argument("--trace-out", metavar="FILE", help="write the step's accounting as a Chrome trace (.json: Perfetto, "
                   "chrome://tracing; `commcost trace` reads it back)")


def add_moe_arguments(p: argparse.ArgumentParser, lay=None) -> None:
    """``--etp``, ``--a2a``, ``--fp8-dispatch``, ``--moe-overlap``, ``--capacity-factor``/``--moe-imbalance``:
    shared by ``plan`` and ``search``."""
    moe = p.add_argument_group("mixture of experts")
    if lay is not None:
        lay.add_argument("--etp", type=A.positive_int,
                         help="expert tensor parallel (default tp, or 1 where ep x tp does not divide tp x dp x cp); "
                              "expert data parallel follows")
    moe.add_argument("--a2a", choices=("nccl", "deepep"), default="nccl",
                     help="token dispatch: NCCL all-to-all, or node-aware DeepEP (default nccl)")
    moe.add_argument("--fp8-dispatch", action="store_true", help="DeepEP's fp8 dispatch (with --a2a deepep)")
    moe.add_argument("--moe-overlap", choices=("none", "1f1b", "dualpipe"), default="none",
                     help="expert all-to-all behind another micro-batch's compute (default none)")
    moe.add_argument("--capacity-factor", type=A.positive_float,
                     help="tokens padded to this capacity factor: the expert GEMMs and all-to-all of the busiest rank")
    moe.add_argument("--moe-imbalance", type=A.positive_float,
                     help="measured load imbalance, busiest expert's tokens over the mean (default 1: balanced)")


def moe_inputs(args: argparse.Namespace) -> dict:
    """The PlanInputs / SearchInputs MoE fields of the parsed flags."""
    if args.capacity_factor is not None and args.moe_imbalance is not None:
        A.fail("give --capacity-factor or --moe-imbalance, not both")
    load = args.capacity_factor or args.moe_imbalance or 1.0
    if load < 1:
        A.fail(f"the load imbalance (busiest over mean) is at least 1, got {load:g}")
    return dict(a2a=args.a2a, fp8_dispatch=args.fp8_dispatch, moe_overlap=args.moe_overlap, expert_load=load)


def _spec(args: argparse.Namespace):

    shape_flags = [f for f in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts",
                               "top_k", "expert_ffn_hidden", "moe_layers") if getattr(args, f) is not None]
    if args.model is not None:
        if shape_flags or args.gated_mlp:
            A.fail(f"--model {args.model} fixes the shape; drop --{shape_flags[0].replace('_', '-') if shape_flags else 'gated-mlp'}")
        spec = model_spec(args.model)
        return spec, args.seq or int(load_preset_file("models.json")[spec.name]["seq_tokens"])
    for need in ("layers", "hidden", "heads", "seq"):
        if getattr(args, need) is None:
            A.fail(f"--{need} is required without --model")
    kw = {f: getattr(args, f) for f in shape_flags}
    return TransformerSpec(gated_mlp=args.gated_mlp, **kw), args.seq


def resolve_hardware(args: argparse.Namespace, gpus: int):
    """``(Resolved, gpus_per_node, gpu preset)``: the one resolver's answer
    (:func:`commcost.cli._fabric.resolve_comm_model`: the CommModel, and the preset topology of the
    measured band where a system preset alone gives the links), the node size, and the GPU that computes."""

    if args.system is None and args.gpu is None:
        A.fail("--gpu NAME is needed with --bw/--latency or --profile (which GPU computes)")
    # a profile is scope-checked per group when it prices one (the groups are smaller than the job)
    resolved = resolve_comm_model(fabric_flags(args, gpus=gpus), set_gpus=args.profile is None)
    G = resolved.topology.gpus_per_node if resolved.topology is not None else (args.gpus_per_node or 8)
    gpu = args.gpu or system_gpu(args.system)
    return resolved, G, gpu


MEASURED_TFLOPS_MIN, MEASURED_TFLOPS_MAX = 1e-6, 1e6
"""Bounds of ``--measured-tflops`` (TFLOP/s per GPU), as ``--tflops``: past them the measured step
``model FLOPs / (TFLOP/s * 1e12 * W)`` underflows to 0 or is below any step a GPU can take."""


def run(args: argparse.Namespace) -> int:
    """Parse, plan, (calibrate), render."""

    spec, seq = _spec(args)
    cp, tp, pp = args.cp, args.tp, args.pp
    gpus = args.gpus
    if gpus is None:
        if args.dp is None:
            A.fail("give --gpus (or --dp, with --gpus then dp x tp x pp x cp)")
        gpus = args.dp * tp * pp * cp
    dp = args.dp
    if dp is None:
        if gpus % (tp * pp * cp):
            A.fail(f"gpus {gpus} not divisible by tp x pp x cp = {tp} x {pp} x {cp} = {tp * pp * cp}")
        dp = gpus // (tp * pp * cp)
    zero = 3 if args.fsdp else args.zero
    layout = Layout(dp=dp, tp=tp, pp=pp, vp=args.vp, cp=cp, ep=args.ep, zero=zero, sequence_parallel=args.sequence_parallel,
                    recompute=args.recompute, micro_batch=args.micro_batch, global_batch=args.global_batch, order=args.order,
                    shard_group=args.hsdp or 0, etp=args.etp or 0,
                    uneven_pipeline=args.uneven_pipeline)
    if layout.world != gpus:
        A.fail(f"dp x tp x pp x cp = {dp} x {tp} x {pp} x {cp} = {layout.world} != --gpus {gpus}")
    resolved, G, gpu = resolve_hardware(args, gpus)
    model = resolved.comm
    if args.calibration is not None and not args.calibration.strip():
        A.fail(f"--calibration {args.calibration!r}: expected a file name, got an empty one")
    if args.measured_tflops is not None and not MEASURED_TFLOPS_MIN <= args.measured_tflops <= MEASURED_TFLOPS_MAX:
        A.fail(f"--measured-tflops must be between {MEASURED_TFLOPS_MIN:g} and {MEASURED_TFLOPS_MAX:g} TFLOP/s per GPU, "
               f"got {args.measured_tflops:.4g}")
    if args.bucket_mb is not None and args.bucket_mb * MiB < 1:
        A.fail(f"--bucket-mb must be at least 1 byte (1/1048576 MiB; DDP's int(bucket_cap_mb * 2**20) is otherwise 0), "
               f"got {args.bucket_mb:.4g} MiB")
    sources = [f for f in ("efficiency", "mfu", "measured_step_s", "measured_tflops", "calibration")
               if getattr(args, f) is not None]
    if len(sources) > 1:
        A.fail(f"give one of --efficiency, --mfu, --measured-step-s, --measured-tflops, --calibration (got "
               f"{', '.join('--' + s.replace('_', '-') for s in sources)})")
    bucket = None if args.bucket_mb is None else int(args.bucket_mb * MiB)
    inp = PlanInputs(spec=spec, layout=layout, seq=seq, gpu=gpu, gpus_per_node=G, precision=args.precision,
                     efficiency=args.efficiency, flash_attention=not args.no_flash_attention, bucket_cap_bytes=bucket,
                     tp_comm_overlap=args.tp_comm_overlap, stack=args.stack, compiled=args.compile,
                     fp8_attention=args.fp8_attention, **moe_inputs(args))
    notes: list[str] = []
    extra: dict = {}
    measured = args.measured_step_s
    if args.measured_tflops or args.mfu:
        tflops = args.measured_tflops or args.mfu * peak_flops_per_s(gpu, args.precision) / 1e12
        base = plan(inp, model)
        measured = base.model_flops_per_step / (tflops * 1e12 * layout.world)
    if measured is not None:
        eta = fit_efficiency(inp, model, measured)
        inp = replace(inp, efficiency=eta)
        notes.append(f"calibration: efficiency {eta:.4f} reproduces the step of {measured:.6g} s")
        extra["calibration"] = {"efficiency": eta, "measured_step_s": measured}
        if args.save_calibration:
            save_calibration(args.save_calibration, inp, eta, measured)
            notes.append(f"saved to {args.save_calibration}")
    elif args.save_calibration:
        A.fail("--save-calibration needs --measured-step-s, --measured-tflops or --mfu")
    if args.calibration is not None:
        doc = load_calibration(args.calibration)
        inp = replace(inp, efficiency=float(doc["efficiency"]))
        notes.append(calibration_note(doc, inp))
        extra["calibration"] = {"path": args.calibration, "efficiency": doc["efficiency"], "note": notes[-1]}
    if args.trace_out:
        A.check_output_path("--trace-out", args.trace_out, (".json",))
    result = plan(inp, model)
    band = None
    if resolved.band_topology is not None:  # a system preset alone: the measured band of each class

        band = plan_band(inp, result, model, resolved.band_topology)
    if args.trace_out:

        write_trace(args.trace_out, plan_chrome_trace(result))
        notes.append(f"Chrome trace of the step's accounting written to {args.trace_out}")
    if args.train_tokens is not None:  # days, GPU-hours and dollars (commcost.analyses.plan.training_cost)
        run_cost = training_cost(tokens=args.train_tokens, tokens_per_s_per_gpu=result.tokens_per_s_per_gpu,
                                 gpus=layout.world, price_per_gpu_hour=args.price_per_gpu_hour)
        extra["training"] = training_to_dict(run_cost)
        notes.append(render_training(run_cost))
    elif args.price_per_gpu_hour is not None:
        A.fail("--price-per-gpu-hour prices a training run: give --train-tokens too")

    sens = sensitivity(inp, model)
    print(render_plan_json(result, extra, band, sens) if args.json else render_plan_text(result, notes, band, sens))
    return 0
