"""``commcost plan``'s and ``commcost search``'s flags -> frozen inputs in SI units: the model shape
(:func:`model_spec_of`), the MoE fields (:func:`moe_inputs`) and the hardware (:func:`resolve_hardware`)
both commands share, then :class:`~commcost.analyses.plan.plan.PlanInputs` with its calibrated efficiency
and :class:`~commcost.analyses.plan.search_inputs.SearchInputs` with its space bounded before it is
enumerated.

Part of the input builder (:mod:`commcost.cli.inputs` and its ``inputs_*`` siblings), the one reader of
the argparse Namespace. ``commcost plan`` starts through it, so what only ``search`` (the search space)
needs is imported inside the function that uses it.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, replace

from commcost.analyses.plan.plan import PlanInputs
from commcost.calibrate.efficiency import load_calibration
from commcost.cli import _args as A
from commcost.cli._fabric import Resolved, resolve_comm_model
from commcost.cli.inputs_from import apply_from
from commcost.cli.inputs import _si, fabric_flags
from commcost.core.units import TERA, MiB
from commcost.hardware.registry import model_row, system_gpu
from commcost.parallel.layout import Layout
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.memory import GRAD_BYTES
from commcost.workload.recipes import (assumed_line, dense_items, dense_recipe_defaults, moe_items, moe_recipe_defaults,
                                      search_tp_overlap_items)
from commcost.workload.stacks import layout_refusal, resolve_stack
from commcost.workload.transformer import TransformerSpec, model_spec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.search import SearchInputs

__all__ = ["moe_inputs", "model_spec_of", "resolve_hardware", "PlanRequest", "plan_request", "parse_gpus_range",
           "plan_prefix", "SearchRequest", "search_request", "MAX_GPU_COUNTS", "MAX_GLOBAL_BATCH", "MAX_TOP",
           "MAX_CONFIGURATIONS"]


def moe_inputs(args: argparse.Namespace) -> dict:
    """The PlanInputs / SearchInputs MoE fields of the parsed flags (``plan`` and ``search``)."""
    if args.capacity_factor is not None and args.moe_imbalance is not None:
        A.fail("give --capacity-factor or --moe-imbalance, not both")
    load = args.capacity_factor or args.moe_imbalance or 1.0
    if load < 1:
        A.fail(f"the load imbalance (busiest over mean) is at least 1, got {load:g}")
    return dict(a2a=args.a2a or "nccl", fp8_dispatch=args.fp8_dispatch, moe_overlap=args.moe_overlap or "none",
                expert_load=load)


def search_moe_inputs(args: argparse.Namespace, spec) -> dict:
    """:func:`moe_inputs` for ``search``; a MoE search with no stack or recipe flag takes what Megatron-Core's MoE
    recipes run (:mod:`commcost.workload.recipes`): the 1F1B all-to-all overlap, so layouts that cannot run it
    (a pipeline without virtual stages) are not enumerated; expert TP 1 and t are both tried, as always."""
    from commcost.analyses.plan.space import parse_fix

    moe, items, stack = moe_inputs(args), [], "Megatron-Core"
    fixed = dict(parse_fix(args.fix))
    if args.stack == "auto" and not args.tp_comm_overlap and fixed.get("tp", 2) > 1:
        running, tp_items = search_tp_overlap_items(fixed)   # what search prices the implied stacks' layouts with
        if tp_items:
            stack, items = running, tp_items
    if spec.is_moe and not recipe_flags_given(args):
        moe.update(a2a="nccl", moe_overlap="1f1b")
        items += ["expert TP 1 or t", "nccl all-to-all", "MoE overlap 1f1b (no pipeline without virtual stages)"]
    moe["defaults_note"] = assumed_line(stack, items)
    return moe


def recipe_flags_given(args: argparse.Namespace) -> bool:
    """Whether the user named a stack or any MoE recipe flag (``--stack``, ``--etp``, ``--a2a``,
    ``--moe-overlap``, ``--fp8-dispatch``): if not, MoE runs take the recipes' defaults
    (:mod:`commcost.workload.recipes`)."""
    return (args.stack != "auto" or getattr(args, "etp", None) is not None or args.a2a is not None
            or args.moe_overlap is not None or args.fp8_dispatch)


_SHAPE_FLAGS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts", "top_k",
                "expert_ffn_hidden", "moe_layers")
"""``plan``'s and ``search``'s shape flags (:func:`commcost.cli.plan.add_model_arguments`)."""


def model_spec_of(args: argparse.Namespace):
    """``(TransformerSpec, seq)`` of ``--model`` (and ``--seq``, default the model's training length) or of
    the explicit shape (``plan`` and ``search``)."""
    shape_flags = [f for f in _SHAPE_FLAGS if getattr(args, f) is not None]
    if getattr(args, "hf_config", None) is not None:
        if args.model is not None or shape_flags or args.gated_mlp:
            A.fail(f"--hf-config fixes the shape; drop --{'model' if args.model is not None else shape_flags[0].replace('_', '-') if shape_flags else 'gated-mlp'}")
        if args.seq is None:
            A.fail("--hf-config needs --seq (a config.json holds the longest context, not the training length)")
        from commcost.formats.hf_config import spec_from_hf_config   # only with --hf-config

        return spec_from_hf_config(args.hf_config), args.seq
    if args.model is not None:
        if shape_flags or args.gated_mlp:
            A.fail(f"--model {args.model} fixes the shape; drop --{shape_flags[0].replace('_', '-') if shape_flags else 'gated-mlp'}")
        spec = model_spec(args.model)
        return spec, args.seq or int(model_row(spec.name)["seq_tokens"])
    for need in ("layers", "hidden", "heads", "seq"):
        if getattr(args, need) is None:
            A.fail(f"--{need} is required without --model")
    kw = {f: getattr(args, f) for f in shape_flags}
    return TransformerSpec(gated_mlp=args.gated_mlp, **kw), args.seq


def resolve_hardware(args: argparse.Namespace, gpus: int) -> tuple[Resolved, int, str]:
    """``(Resolved, gpus_per_node, gpu preset)`` of ``plan``'s and ``search``'s hardware flags for ``gpus``
    GPUs: the one resolver's answer (the CommModel, and the preset topology of the measured band where a
    system preset alone gives the links), the node size, and the GPU that computes."""
    if args.system is None and args.gpu is None:
        A.fail("--gpu NAME is needed with --bw/--latency or --profile (which GPU computes)")
    # a profile is scope-checked per group when it prices one (the groups are smaller than the job)
    resolved = resolve_comm_model(fabric_flags(args, gpus=gpus), set_gpus=args.profile is None)
    G = resolved.topology.gpus_per_node if resolved.topology is not None else (args.gpus_per_node or 8)
    return resolved, G, args.gpu or system_gpu(args.system)


MEASURED_TFLOPS_MIN, MEASURED_TFLOPS_MAX = 1e-6, 1e6
"""Bounds of ``--measured-tflops`` (TFLOP/s per GPU), as ``--tflops``: past them the measured step
``model FLOPs / (TFLOP/s * 1e12 * W)`` underflows to 0 or is below any step a GPU can take."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """``commcost plan``: ``inputs`` the :class:`~commcost.analyses.plan.plan.PlanInputs` (its efficiency
    as given or read from ``calibration``, the document at ``calibration_path``); ``measured_step_s`` and
    ``measured_flops_per_s`` a measurement ``run`` fits the efficiency to
    (:func:`commcost.calibrate.efficiency.efficiency_from`); ``resolved`` the one CommModel; ``save_calibration`` a file to write the fitted
    efficiency to; ``trace_out`` a Chrome trace to write; ``train_tokens`` and ``price_per_gpu_hour`` the
    training run to cost (None: none); ``json`` print JSON."""

    inputs: PlanInputs
    resolved: Resolved
    measured_step_s: float | None
    measured_flops_per_s: float | None
    save_calibration: str | None
    calibration: dict[str, Any] | None
    calibration_path: str | None
    trace_out: str | None
    train_tokens: float | None
    price_per_gpu_hour: float | None
    json: bool
    from_summary: str | None = None
    """What ``--from`` read (None: no ``--from``)."""


def _plan_layout(args: argparse.Namespace) -> tuple[Layout, int, int]:
    """``(layout, gpus, dp)`` of the plan flags: the GPU count or the DP degree from the other, checked."""
    cp, tp, pp = args.cp, args.tp, args.pp
    gpus, dp = args.gpus, args.dp
    if gpus is None:
        if dp is None:
            A.fail("give --gpus (or --dp, with --gpus then dp x tp x pp x cp)")
        gpus = dp * tp * pp * cp
    if dp is None:
        if gpus % (tp * pp * cp):
            A.fail(f"gpus {gpus} not divisible by tp x pp x cp = {tp} x {pp} x {cp} = {tp * pp * cp}")
        dp = gpus // (tp * pp * cp)
    layout = Layout(dp=dp, tp=tp, pp=pp, vp=args.vp, cp=cp, ep=args.ep, zero=3 if args.fsdp else args.zero,
                    sequence_parallel=args.sequence_parallel, recompute=args.recompute, micro_batch=args.micro_batch,
                    global_batch=args.global_batch, order=args.order, shard_group=args.hsdp or 0, etp=args.etp or 0,
                    uneven_pipeline=args.uneven_pipeline, split_counts_ends=args.split_counts_ends)
    if layout.world != gpus:
        A.fail(f"dp x tp x pp x cp = {dp} x {tp} x {pp} x {cp} = {layout.world} != --gpus {gpus}")
    return layout, gpus, dp


def plan_recipe_flags(args: argparse.Namespace, implied: str, layout: Layout, items: list[str]) -> tuple[bool, int | None]:
    """``(tp_comm_overlap, recipe bucket bytes or None)`` of ``plan``: the overlap as given, or with no ``--stack`` what
    the implied stack's recipes run where the flag is not given (:func:`commcost.workload.recipes.dense_recipe_defaults`),
    each default's words appended to ``items`` (the ``assumed:`` line)."""
    if args.tp_comm_overlap and args.no_tp_comm_overlap:
        A.fail("give --tp-comm-overlap or --no-tp-comm-overlap, not both")
    overlap = args.tp_comm_overlap
    if args.stack != "auto":
        return overlap, None
    d = dense_recipe_defaults(stack=implied, tp=layout.tp, dp=layout.dp, cp=layout.cp, zero=layout.zero,
                              grad_bytes=GRAD_BYTES)
    if overlap or args.no_tp_comm_overlap:
        d["tp_comm_overlap"] = False
    if args.bucket_mb is not None:
        d["bucket_cap_bytes"] = None
    items += dense_items(d, grad_bytes=GRAD_BYTES)
    return overlap or d["tp_comm_overlap"], d["bucket_cap_bytes"]


def plan_request(args: argparse.Namespace) -> PlanRequest:
    """The plan flags checked; the layout, the PlanInputs in SI units and the measurement to fit its efficiency to."""
    args, from_summary = apply_from(args)
    if args.global_batch is None:
        A.fail("the following arguments are required: --global-batch")
    spec, seq = model_spec_of(args)
    cp, tp, pp = args.cp, args.tp, args.pp
    layout, gpus, dp = _plan_layout(args)
    moe, items = moe_inputs(args), []
    implied = resolve_stack("auto", layout)[0]
    if spec.is_moe and not recipe_flags_given(args):   # what the implied stack's MoE recipes run
        d = moe_recipe_defaults(stack=implied, tp=tp, dp=dp, cp=cp, ep=args.ep, pp=pp, vp=args.vp)
        layout = replace(layout, etp=d["etp"])
        moe.update(a2a=d["a2a"], moe_overlap=d["moe_overlap"])
        items += moe_items(d)
    tp_overlap, recipe_bucket = plan_recipe_flags(args, implied, layout, items)
    resolved, G, gpu = resolve_hardware(args, gpus)
    if args.calibration is not None and not args.calibration.strip():
        A.fail(f"--calibration {args.calibration!r}: expected a file name, got an empty one")
    if args.measured_tflops is not None and not MEASURED_TFLOPS_MIN <= args.measured_tflops <= MEASURED_TFLOPS_MAX:
        A.fail(f"--measured-tflops must be between {MEASURED_TFLOPS_MIN:g} and {MEASURED_TFLOPS_MAX:g} TFLOP/s per GPU, "
               f"got {args.measured_tflops:.4g}")
    bucket = recipe_bucket if args.bucket_mb is None else _si(args.bucket_mb, MiB)
    if bucket is not None and bucket < 1:
        A.fail(f"--bucket-mb must be at least 1 byte (1/1048576 MiB; DDP's int(bucket_cap_mb * 2**20) is otherwise 0), "
               f"got {args.bucket_mb:.4g} MiB")
    sources = [f for f in ("efficiency", "mfu", "measured_step_s", "measured_tflops", "calibration")
               if getattr(args, f) is not None]
    if len(sources) > 1:
        A.fail(f"give one of --efficiency, --mfu, --measured-step-s, --measured-tflops, --calibration (got "
               f"{', '.join('--' + s.replace('_', '-') for s in sources)})")
    inp = PlanInputs(spec=spec, layout=layout, seq=seq, gpu=gpu, gpus_per_node=G, precision=args.precision,
                     efficiency=args.efficiency, flash_attention=not args.no_flash_attention,
                     bucket_cap_bytes=None if bucket is None else int(bucket),
                     tp_comm_overlap=tp_overlap, stack=args.stack, compiled=args.compile,
                     fp8_attention=args.fp8_attention, cpu_offload_layers=args.cpu_offload_layers,
                     defaults_note=assumed_line(implied, items), **moe)
    refusal = layout_refusal(args.stack, layout)   # a named stack's user cannot run what it does not run
    if refusal:
        A.fail(refusal)
    flops_per_s = None   # a measured (or assumed) model FLOP rate per GPU, FLOP/s (--mfu: of the dense peak)
    if args.measured_tflops or args.mfu:
        flops_per_s = _si(args.measured_tflops, TERA) or args.mfu * peak_flops_per_s(gpu, args.precision)
    measured = args.measured_step_s is not None or flops_per_s is not None
    if not measured and args.save_calibration:
        A.fail("--save-calibration needs --measured-step-s, --measured-tflops or --mfu")
    doc = None
    if args.calibration is not None:
        doc = load_calibration(args.calibration)
        inp = replace(inp, efficiency=float(doc["efficiency"]))
    if args.trace_out:
        A.check_output_path("--trace-out", args.trace_out, (".json",))
    if args.train_tokens is None and args.price_per_gpu_hour is not None:
        A.fail("--price-per-gpu-hour prices a training run: give --train-tokens too")
    return PlanRequest(inputs=inp, resolved=resolved, measured_step_s=args.measured_step_s,
                       measured_flops_per_s=flops_per_s,
                       save_calibration=args.save_calibration if measured else None, calibration=doc,
                       calibration_path=args.calibration, trace_out=args.trace_out, train_tokens=args.train_tokens,
                       price_per_gpu_hour=args.price_per_gpu_hour, json=args.json, from_summary=from_summary)

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


def plan_prefix(args: argparse.Namespace, seq: int) -> tuple[str, ...]:
    """Every ``commcost plan`` flag of this search that is not the layout: the model (``--model`` or its
    shape), ``--seq``, ``--global-batch``, the hardware and the compute flags, shell-quoted; each result's
    ``plan_command`` is ``commcost plan`` + these + its layout flags."""
    out: list[str] = []

    def add(flag: str, value) -> None:
        if value is None or value is False:
            return
        out.append(flag if value is True else f"{flag} {shlex.quote(repr(value) if isinstance(value, float) else str(value))}")

    if getattr(args, "hf_config", None) is not None:
        add("--hf-config", args.hf_config)
    elif args.model is not None:
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
    if args.cpu_offload_layers:
        add("--cpu-offload-layers", args.cpu_offload_layers)
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """``commcost search``: ``inputs`` the :class:`~commcost.analyses.plan.search_inputs.SearchInputs`;
    ``resolved`` the one CommModel; ``robust`` rank again by the measured band's upper edge (``--rank
    robust``) and show ``top``; ``plan_prefix`` the ``commcost plan`` flags each result's command starts
    with (:func:`plan_prefix`); ``progress`` draw a bar; ``json``, ``csv``, ``plot`` how to render."""

    inputs: SearchInputs
    resolved: Resolved
    robust: bool
    top: int
    plan_prefix: str
    progress: bool
    json: bool
    csv: str | None
    plot: str | None
    emit: list[str] | None = None
    """``--emit KIND FILE``: write the winner as KIND's config file (None: no ``--emit``)."""


def search_request(args: argparse.Namespace) -> SearchRequest:
    """The search flags checked, the space bounded before it is enumerated, the CommModel resolved."""
    from commcost.analyses.plan.search import SearchInputs, SearchSpace, parse_fix, robust_candidates
    from commcost.analyses.plan.space import count_upper_bound, fixes_admitting_nothing

    args, _ = apply_from(args, search=True)
    if args.emit is not None:
        from commcost.formats.emit import EMIT_KINDS

        if args.emit[0] not in EMIT_KINDS:
            A.fail(f"--emit {args.emit[0]!r}: valid kinds are {', '.join(EMIT_KINDS)}")
        A.check_output_path("--emit", args.emit[1])
    if args.global_batch is None:
        A.fail("the following arguments are required: --global-batch")
    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    if args.global_batch > MAX_GLOBAL_BATCH:
        A.fail(f"--global-batch must be at most {MAX_GLOBAL_BATCH:,} sequences, got {args.global_batch:,}")
    if args.top > MAX_TOP:
        A.fail(f"--top must be at most {MAX_TOP:,} configurations, got {args.top:,}")
    spec, seq = model_spec_of(args)
    if (args.gpus is None) == (args.gpus_range is None):
        A.fail("give --gpus N or --gpus-range LO:HI")
    gpus = (args.gpus,) if args.gpus is not None else parse_gpus_range(args.gpus_range)
    objective = args.objective
    if args.rank is not None:  # --rank step|cost is --objective step|cost; robust ranks steps again
        objective = "cost" if args.rank == "cost" else "step"
        if args.objective not in ("step", objective):
            A.fail(f"--rank {args.rank} ranks by {objective}: drop --objective {args.objective}")
    if objective == "cost" and args.price_per_gpu_hour is None:
        A.fail("--objective cost needs --price-per-gpu-hour (dollars per GPU-hour)")
    resolved, G, gpu = resolve_hardware(args, max(gpus))
    robust = args.rank == "robust" or (args.rank is None and args.objective == "step")
    if args.rank == "robust" and resolved.band_topology is None:
        A.fail("--rank robust ranks by the measured band of a --system preset; it has none with --bw/--latency, "
               "--profile or a custom topology")
    space = SearchSpace(spec=spec, seq=seq, global_batch=args.global_batch, gpus=gpus, gpus_per_node=G,
                        fixed=parse_fix(args.fix), even_pipeline_only=args.even_pipeline_only)
    estimate = count_upper_bound(space)
    blamed = fixes_admitting_nothing(space) if estimate == 0 else ()
    if blamed:
        fixes = ",".join(f"{k}={v}" for k, v in blamed)
        A.fail(f"--fix {fixes} admits no layout of {spec.name} on {', '.join(map(str, gpus))} GPUs (global batch "
               f"{args.global_batch}, {spec.heads} heads, {spec.layers} layers): tp must divide the GPUs and the "
               "heads, dp the global batch, etp x ep the expert ranks; drop it or pick a value that divides")
    if estimate > MAX_CONFIGURATIONS:
        A.fail(f"the space holds up to {estimate:,} configurations ({len(gpus)} GPU count(s)), more than the "
               f"{MAX_CONFIGURATIONS:,} a search enumerates (about a minute, ~1 GB); fix a dimension "
               "(--fix tp=8,pp=4), or search fewer GPU counts")
    inp = SearchInputs(space=space, gpu=gpu, precision=args.precision, efficiency=args.efficiency,
                       flash_attention=not args.no_flash_attention, tp_comm_overlap=args.tp_comm_overlap,
                       order=args.order, stack=args.stack, compiled=args.compile, fp8_attention=args.fp8_attention,
                       objective=objective, price_per_gpu_hour=args.price_per_gpu_hour or 0.0,
                       top=robust_candidates(args.top) if robust else args.top,
                       keep_points=args.plot is not None, train_tokens=args.train_tokens,
                       headroom=args.memory_headroom, fragile_last=args.rank not in ("step", "cost"),
                       cpu_offload_layers=args.cpu_offload_layers, **search_moe_inputs(args, spec))
    return SearchRequest(inputs=inp, resolved=resolved, robust=robust, top=args.top,
                         plan_prefix=plan_prefix(args, seq), progress=not args.no_progress and not args.json,
                         json=args.json, csv=args.csv, plot=args.plot, emit=args.emit)
