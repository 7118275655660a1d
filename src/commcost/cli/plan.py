"""``commcost plan``: price one TP/PP/DP/CP/EP/ZeRO configuration end to end, with memory per GPU."""

from __future__ import annotations

import argparse
from dataclasses import replace

from commcost.cli import _args as A
from commcost.workload.stacks import KNOWN_STACKS
from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.sensitivity import sensitivity
from commcost.analyses.uncertainty import plan_band
from commcost.analyses.interval import plan_interval
from commcost.calibrate.efficiency import efficiency_from, save_calibration
from commcost.cli._fabric import add_nvls_argument
from commcost.cli._html import add_html_argument, check_html, json_dict
from commcost.cli.inputs_from import add_from_argument
from commcost.cli.inputs_plan import plan_request
from commcost.report.plan import plan_run_notes
from commcost.report.plan import render_plan_json
from commcost.report.plan import render_plan_text

__all__ = ["HELP", "EXAMPLES", "add_arguments", "add_model_arguments", "add_hardware_arguments",
           "add_moe_arguments", "run"]

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
    m.add_argument("--hf-config", metavar="PATH",
                   help="a Hugging Face config.json (or a directory holding one): the model's shape (needs --seq)")
    for flag, what in (("--layers", "layers L"), ("--hidden", "hidden size h"), ("--heads", "attention heads"),
                       ("--kv-heads", "key/value heads (GQA; default heads)"), ("--head-dim", "head width (default h/heads)"),
                       ("--ffn-hidden", "MLP width (default 4h)"), ("--vocab", "vocabulary (default 50257)"),
                       ("--experts", "routed experts (MoE)"), ("--top-k", "experts per token"),
                       ("--expert-ffn-hidden", "expert MLP width (default --ffn-hidden)"),
                       ("--moe-layers", "MoE layers, the last ones (default all)")):
        m.add_argument(flag, type=A.positive_int, help=what)
    m.add_argument("--gated-mlp", action="store_true", help="SwiGLU MLP (three matrices)")
    m.add_argument("--seq", type=A.positive_int, help="sequence length (default: the model's training length)")
    add_from_argument(p)


def add_hardware_arguments(p: argparse.ArgumentParser) -> None:
    """``--system``/``--gpus-per-node``/``--gpu``, a flat ``--bw``/``--latency`` link, or ``--profile``:
    shared by ``plan`` and ``search`` (the resolver, :func:`commcost.cli._fabric.resolve_comm_model`,
    builds the CommModel from them)."""

    hw = p.add_argument_group("hardware (a --system preset, a flat --bw/--latency link with --gpu, or --profile)")
    hw.add_argument("--system", help="system preset (commcost presets), e.g. dgx-h100, gb200-nvl72")
    hw.add_argument("--gpus-per-node", type=A.positive_int, help="GPUs per node (default: the preset's; flat: 8)")
    add_nvls_argument(hw)
    hw.add_argument("--gpu", type=A.preset_name, help="GPU preset (default: the system's), e.g. h100-sxm")
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
    lay.add_argument("--global-batch", type=A.positive_int, help="sequences per optimizer step (required, or --from)")
    lay.add_argument("--uneven-pipeline", action="store_true",
                     help="layers need not divide by pp x vp (the heaviest stage takes ceil(L/(pp vp)) per chunk)")
    lay.add_argument("--split-counts-ends", action="store_true",
                     help="the pipeline split counts the embedding and the head as a layer each: the first "
                          "and last stages hold one layer fewer (Megatron's --account-for-embedding-in-pipeline-"
                          "split and --account-for-loss-in-pipeline-split)")
    lay.add_argument("--order", default="tp-cp-ep-dp-pp", help="rank order, innermost first (Megatron's default)")
    add_moe_arguments(p, lay)
    add_hardware_arguments(p)
    c = p.add_argument_group("compute")
    c.add_argument("--precision", default="bf16", help="bf16, fp16, fp8, mxfp8, nvfp4 (default bf16)")
    c.add_argument("--efficiency", type=A.efficiency, help="achieved fraction of peak on executed FLOPs")
    c.add_argument("--mfu", type=A.open_fraction, help="assume this MFU: fits the efficiency that gives it")
    c.add_argument("--measured-step-s", type=A.positive_float, help="calibrate: a measured step time, seconds")
    c.add_argument("--measured-tflops", type=A.positive_float, help="calibrate: measured model TFLOP/s per GPU")
    c.add_argument("--save-calibration", metavar="FILE", help="write the fitted efficiency to FILE")
    c.add_argument("--calibration", metavar="FILE", help="use the efficiency of a saved calibration")
    c.add_argument("--no-flash-attention", action="store_true", help="attention materialises the s x s scores")
    c.add_argument("--stack", default="auto", choices=KNOWN_STACKS,
                   help="training stack: its kernels, recomputation and ZeRO-3 gathers (default auto: from the layout)")
    c.add_argument("--compile", action="store_true", help="torch.compile fuses the element-wise operators")
    c.add_argument("--fp8-attention", action="store_true", help="fp8 recipes run attention in fp8 too (default bf16)")
    c.add_argument("--tp-comm-overlap", action="store_true",
                   help="TP collectives overlap the neighbouring GEMMs (Transformer Engine userbuffers)")
    c.add_argument("--no-tp-comm-overlap", action="store_true",
                   help="no TP overlap (with no --stack, Megatron-Core layouts assume its recipes' overlap)")
    c.add_argument("--cpu-offload-layers", type=int, default=0, metavar="N",
                   help="offload N layers' activations to host memory (Megatron-Core cpu_offloading_num_layers; "
                        "pp 1, no recompute)")
    c.add_argument("--bucket-mb", type=A.positive_float, help="data-parallel bucket cap, MiB (default DDP's 25)")
    t = p.add_argument_group("training cost")
    t.add_argument("--train-tokens", type=A.token_count, help="tokens to train on (2e12, 2T, 300B): days and GPU-hours")
    t.add_argument("--price-per-gpu-hour", type=A.positive_float, help="dollars per GPU-hour: the run's cost")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    add_html_argument(p)
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
    moe.add_argument("--a2a", choices=("nccl", "deepep"),
                     help="token dispatch: NCCL all-to-all, or node-aware DeepEP (default nccl)")
    moe.add_argument("--fp8-dispatch", action="store_true", help="DeepEP's fp8 dispatch (with --a2a deepep)")
    moe.add_argument("--moe-overlap", choices=("none", "1f1b", "dualpipe"),
                     help="expert all-to-all behind another micro-batch's compute (default none; with no --stack "
                          "and no MoE flag, what Megatron-Core's MoE recipes run: 1f1b where the schedule allows)")
    moe.add_argument("--capacity-factor", type=A.positive_float,
                     help="tokens padded to this capacity factor: the expert GEMMs and all-to-all of the busiest rank")
    moe.add_argument("--moe-imbalance", type=A.positive_float,
                     help="measured load imbalance, busiest expert's tokens over the mean (default 1: balanced)")


def run(args: argparse.Namespace) -> int:
    """Parse and resolve (:func:`commcost.cli.inputs_plan.plan_request`), fit the efficiency to a measurement
    (:func:`commcost.calibrate.efficiency.efficiency_from`), plan, render."""
    html = check_html(args)
    req = plan_request(args)
    inp, model, band_topology = req.inputs, req.resolved.comm, req.resolved.band_topology
    eta, measured_step_s = efficiency_from(inp, model, measured_step_s=req.measured_step_s,
                                           measured_flops_per_s=req.measured_flops_per_s)
    if eta is not None:
        inp = replace(inp, efficiency=eta)
    if req.save_calibration:
        save_calibration(req.save_calibration, inp, inp.efficiency, measured_step_s)
    result = plan(inp, model)
    # a system preset alone: the measured band of each class
    band = None if band_topology is None else plan_band(inp, result, model, band_topology)
    interval = plan_interval(result, band)   # the step's prediction interval (commcost.analyses.interval)
    if req.trace_out:
        from commcost.report.chrome_trace import plan_chrome_trace, write_trace

        write_trace(req.trace_out, plan_chrome_trace(result))
    run_cost = None
    if req.train_tokens is not None:  # days, GPU-hours and dollars (commcost.analyses.plan.training_cost)
        from commcost.analyses.plan.training_cost import training_cost

        run_cost = training_cost(tokens=req.train_tokens, tokens_per_s_per_gpu=result.tokens_per_s_per_gpu,
                                 gpus=inp.layout.world, price_per_gpu_hour=req.price_per_gpu_hour)
    notes, extra = plan_run_notes(inputs=inp, measured_step_s=measured_step_s, saved_to=req.save_calibration,
                                  calibration=req.calibration, calibration_path=req.calibration_path,
                                  trace_out=req.trace_out, run_cost=run_cost, interval=interval)
    if req.from_summary:
        extra["from"] = req.from_summary
    sens = sensitivity(inp, model, result)   # the plan itself is not priced again
    text = render_plan_json(result, extra, band, sens, interval) if req.json or html else None
    if html:  # the page of the very dict --json prints (docs/report.md)
        from commcost.report.html import write_html   # only with --html: plan imports what it uses
        from commcost.report.html.plan import plan_html

        write_html(html, plan_html(json_dict(text)))
    print(text if req.json else render_plan_text(result, notes, band, sens, interval))
    return 0
