"""The one reader of the argparse Namespace: each subcommand's flags -> frozen inputs in SI units.

A ``run`` (parse, resolve, call, render) calls its builder here and reads nothing else of the flags:
the builder checks the combination of flags (each refusal one line, exit 2: :func:`commcost.cli._args.fail`),
converts every unit once (GB/s -> bytes/s, us -> s, ms -> s, billions -> parameters, MiB -> bytes),
resolves the one CommModel (:func:`commcost.cli._fabric.resolve_comm_model`) and returns the library's own
frozen inputs (:class:`~commcost.analyses.drill.budget.BudgetInputs`,
:class:`~commcost.step.timeline.TimelineInputs`, :class:`~commcost.analyses.scaling.ScalingInputs`,
:class:`~commcost.analyses.plan.plan.PlanInputs`, :class:`~commcost.analyses.plan.search_inputs.SearchInputs`
...) with the few options that only say how to render (``json``, output files). Nothing is written back
into the Namespace.

The request types are named tuples, as :class:`commcost.cli._fabric.Resolved`: immutable, and cheap to
define (this module is on the drill's start-up path, which pays for every dataclass it creates:
benchmarks/cli_startup.py). For the same reason the library modules a builder needs are imported
inside that builder, except the drill's own.
"""

from __future__ import annotations

import argparse
from collections import namedtuple

from commcost.analyses.drill.budget import BudgetInputs
from commcost.cli import _args as A
from commcost.cli._fabric import FabricFlags, Resolved, bucket_algorithms_note, resolve_comm_model
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.dtypes import bytes_per_element, gradient_bytes
from commcost.core.units import BILLION, GB, MS, TERA, US

__all__ = ["fabric_flags", "BudgetRequest", "budget_request", "TimelineRequest", "timeline_request",
           "ScalingRequest", "scaling_request", "PlanRequest", "plan_request", "moe_inputs", "model_spec_of",
           "resolve_hardware", "MeasureRequest", "measure_request", "CollectiveRequest", "CollectiveLogRequest",
           "collective_request", "SeriesRequest", "fit_request", "validate_request", "TraceRequest", "trace_request",
           "ListRequest", "presets_request", "SearchRequest", "search_request", "parse_gpus_range", "plan_prefix",
           "MAX_GPU_COUNTS", "MAX_GLOBAL_BATCH", "MAX_TOP", "MAX_CONFIGURATIONS"]


def _si(value, unit: float):
    """``value * unit``, or None where the flag was not given."""
    return None if value is None else value * unit


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


_FLAT = ("bw", "latency")
_CUSTOM = ("intra_bw", "intra_latency", "inter_bw", "inter_latency", "nvls_bw")
_THIRD_TIER = ("pod_nodes", "spine_oversubscription", "spine_latency")


def fabric_flags(args: argparse.Namespace, **override) -> FabricFlags:
    """The fabric flags a command has, in SI units (``override``: values the command fills in itself,
    such as ``plan``'s GPU count or ``trace``'s backend)."""
    ns = vars(args)
    custom, tier3 = "inter_bw" in ns, "pod_nodes" in ns
    names = _FLAT + (_CUSTOM if custom else ()) + (_THIRD_TIER if tier3 else ())
    kw = dict(backend=ns.get("backend", "nccl"), profile=ns.get("profile"), extrapolate=ns.get("extrapolate", False),
              system=ns.get("system"), nodes=ns.get("nodes"), gpus_per_node=ns.get("gpus_per_node"),
              gpus=ns.get("gpus"), no_nvls=ns.get("no_nvls", False),
              bandwidth_bytes_per_s=_si(ns.get("bw"), GB), latency_s=_si(ns.get("latency"), US),
              oversubscription=ns.get("oversubscription"),
              given=tuple(_flag(n) for n in names if ns.get(n) is not None))
    if custom:
        kw.update(custom_flags=True, intra_bandwidth_bytes_per_s=_si(ns["intra_bw"], GB),
                  intra_latency_s=_si(ns["intra_latency"], US), inter_bandwidth_bytes_per_s=_si(ns["inter_bw"], GB),
                  inter_latency_s=_si(ns["inter_latency"], US), nvls_bandwidth_bytes_per_s=_si(ns["nvls_bw"], GB),
                  nvls_latency_s=ns["nvls_latency"] * US, launch_latency_s=ns["launch_latency"] * US)
    if tier3:
        kw.update(third_tier_flags=True, pod_nodes=ns["pod_nodes"], spine_oversubscription=ns["spine_oversubscription"],
                  spine_latency_s=_si(ns["spine_latency"], US))
    kw.update(override)
    return FabricFlags(**kw)


class BudgetRequest(namedtuple("BudgetRequest", ("budget", "layer", "resolved", "memory_gpu", "json"))):
    """``commcost budget``: ``budget`` the drill's :class:`BudgetInputs` (None with ``--layer-ratio``
    alone), ``layer`` the :class:`LayerInputs` of ``--layer-ratio`` (or None), ``resolved`` the one
    CommModel (:class:`commcost.cli._fabric.Resolved`), ``memory_gpu`` the GPU preset whose memory pure
    DDP must fit in (``--gpu``, or the ``--system``'s; None: no memory line), ``json`` print JSON."""

    __slots__ = ()


def budget_request(args: argparse.Namespace) -> BudgetRequest:
    """The budget flags checked in the order the drill reports them, converted once."""
    shape, seq, params = None, 0, args.params
    params_n = None if params is None else params * BILLION
    if args.model is not None:
        from commcost.workload.shape import model_params, model_preset

        if params is not None:
            A.fail("--model sets the parameter count; drop --params")
        shape, seq = model_preset(args.model)  # its tensors: the per-tensor gradient stream (bucket advice)
        params = params_n = float(model_params(shape))
    want_budget = params is not None or args.step_ms is not None
    if not want_budget and not args.layer_ratio:
        A.fail("nothing to report: give --params (or --model) and --step-ms, or --layer-ratio with --hidden and --seq")
    if want_budget and (params is None or args.step_ms is None):
        missing = "--params" if params is None else "--step-ms"
        A.fail(f"{missing} is required for the budget report (or use --layer-ratio alone)")
    if args.layer_ratio and (args.hidden is None or args.seq is None):
        missing = "--hidden" if args.hidden is None else "--seq"
        A.fail(f"--layer-ratio needs {missing}")
    if not args.layer_ratio and (args.hidden is not None or args.seq is not None):
        A.fail("--hidden/--seq are only used with --layer-ratio")
    resolved = resolve_comm_model(fabric_flags(args))
    comm, topo, gpus = resolved.comm, resolved.topology, resolved.gpus
    bytes_per_grad = bytes_per_element(args.dtype)
    if want_budget:
        # part (c) simulates PyTorch's default buckets (25 MiB): keep that simulation bounded
        A.check_bucket_count("--params", gradient_bytes(params_n, bytes_per_grad), 25 * 2.0**20)
    budget = layer = memory_gpu = None
    if want_budget:
        budget = BudgetInputs(
            gpus=gpus, comm=comm, params=params_n, step_s=args.step_ms * MS,
            bytes_per_grad=bytes_per_grad, grad_accum=args.grad_accum,
            backward_fraction=args.backward_fraction, threshold=args.threshold,
            fix_grad_accum=args.fix_grad_accum, intra_node_comm=FlatLinkModel(link=_intra_link(args, resolved)),
            gpus_per_node=topo.gpus_per_node if topo is not None else args.gpus_per_node or 8,
            bucket_caps_bytes=tuple(args.buckets), max_latency_share=args.max_latency_share,
            tail_budget_fraction=args.tail_budget, algorithm=args.algorithm, shape=shape, seq=seq,
        )
        memory_gpu = args.gpu
        if memory_gpu is None and args.system is not None:  # presets load only with a system (drill start-up)
            from commcost.hardware.registry import system_gpu

            memory_gpu = system_gpu(args.system)
    if args.layer_ratio:
        from commcost.analyses.drill.layer import LayerInputs  # only with --layer-ratio (start-up)

        layer = LayerInputs(
            gpus=gpus, comm=comm, hidden=args.hidden, seq=args.seq,
            micro_batch=args.micro_batch, grad_accum=args.grad_accum,
            achieved_flops_per_s=args.tflops * TERA, bytes_per_grad=bytes_per_grad,
            backward_fraction=args.backward_fraction,
        )
    return BudgetRequest(budget=budget, layer=layer, resolved=resolved, memory_gpu=memory_gpu, json=args.json)


def _intra_link(args: argparse.Namespace, resolved: Resolved) -> Link:
    """The intra-node link of fix (e)3: the system's own NVLink, else ``--intra-bw``/``--intra-latency``
    (default: the flat link's latency)."""
    if resolved.topology is not None:
        return resolved.topology.intra
    flat = resolved.comm.flat_link
    latency_s = (args.intra_latency * US if args.intra_latency is not None
                 else flat.latency_s if flat is not None else 0.0)
    return Link(bandwidth_bytes_per_s=args.intra_bw * GB, latency_s=latency_s)


class TimelineRequest(namedtuple("TimelineRequest", (
        "inputs", "resolved", "model_label", "fabric_note", "bucket_auto", "caps", "bucket_cap_bytes",
        "first_bucket_bytes", "first_bucket_cap_bytes", "plot", "trace_out", "json"))):
    """``commcost timeline``: ``inputs`` the :class:`~commcost.step.timeline.TimelineInputs`; ``resolved`` the
    one CommModel; ``model_label`` how gradients arrive; ``fabric_note`` what prices the bucket all-reduces
    (None for a flat link); ``bucket_auto`` search the caps (``--bucket auto``), else ``caps`` the
    :class:`~commcost.step.ddp_buckets.DdpBucketCaps` simulated, from ``bucket_cap_bytes`` (``--bucket``;
    None: DDP's default); ``first_bucket_bytes`` DDP's first cap as an integer (``--first-bucket``, None:
    DDP's) and ``first_bucket_cap_bytes`` the same before rounding (for the notes); ``plot``, ``trace_out``
    files to write; ``json`` print JSON."""

    __slots__ = ()


_PARAMS_TOLERANCE = 0.10
"""timeline's --params may differ from a shape's own count by this much (it is then only a cross-check)."""


def _timeline_shape(args: argparse.Namespace):
    """``(spec, seq, label)``: the :class:`~commcost.workload.transformer.TransformerSpec` of --model (its
    training length unless --seq) or of --layers/--hidden/--seq[/--vocab] (one head: only the ratio
    n_kv/n_q matters to the timeline), checked as the timeline checks it; (None, 0, None) if none."""
    from commcost.workload.shape import check_timeline_shape, model_preset
    from commcost.workload.transformer import TransformerSpec

    explicit = [f for f in ("layers", "hidden", "vocab") if getattr(args, f) is not None]
    if args.model is not None:
        if explicit:
            A.fail(f"--model sets the shape; drop --{explicit[0]} (only --seq may override a preset)")
        spec, seq = model_preset(args.model)
        return spec, args.seq if args.seq is not None else seq, f"model {args.model}"
    if args.layers is None and args.hidden is None:
        if args.seq is not None or args.vocab is not None:
            A.fail("--seq/--vocab describe a model shape: give --layers and --hidden too (or --model)")
        return None, 0, None
    for flag in ("layers", "hidden", "seq"):
        if getattr(args, flag) is None:
            A.fail(f"a model shape needs --layers, --hidden and --seq; --{flag} is missing")
    spec = TransformerSpec(layers=args.layers, hidden=args.hidden, heads=1,
                           vocab=args.vocab if args.vocab is not None else 50257)
    check_timeline_shape(spec, args.seq)  # before the other flags, as the shape flags come first
    return spec, args.seq, f"model L = {args.layers}, h = {args.hidden}, s = {args.seq}, V = {spec.vocab}"


def timeline_request(args: argparse.Namespace) -> TimelineRequest:
    """The timeline flags checked and converted once, the CommModel resolved."""
    from commcost.core.units import MiB
    from commcost.report.timeline import timeline_model_label
    from commcost.step.ddp_buckets import ddp_bucket_caps
    from commcost.step.timeline import TimelineInputs
    from commcost.workload.shape import model_params

    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    shape, seq, label = _timeline_shape(args)
    params = None if args.params is None else args.params * BILLION
    if shape is None and params is None:
        A.fail("give --params (billions), or a model shape with --model or --layers/--hidden/--seq")
    n_shape = None
    if shape is not None:
        n_shape = model_params(shape)
        if params is not None and abs(params - n_shape) > _PARAMS_TOLERANCE * n_shape:
            A.fail(f"--params {args.params:g} (billions) disagrees with the shape's {n_shape / BILLION:.4g} "
                   f"billion parameters by more than {_PARAMS_TOLERANCE:.0%}; drop --params or fix the shape")
    resolved = resolve_comm_model(fabric_flags(args))
    inp = TimelineInputs(
        gpus=resolved.gpus, comm=resolved.comm, algorithm=args.algorithm,
        step_s=args.step_ms * MS, params=params or 0.0, shape=shape, seq=seq,
        bytes_per_grad=bytes_per_element(args.dtype), backward_fraction=args.backward_fraction,
        grad_accum=args.grad_accum, optimizer_s=args.optimizer_ms * MS,
    )
    shape_flag = "--params" if shape is None else "--model" if args.model is not None else "--layers/--hidden"
    A.check_bucket_count(shape_flag, inp.message_bytes, 25 * MiB)  # the default, always run
    auto = args.bucket == "auto"
    cap_bytes = None if args.bucket is None or auto else args.bucket * MiB
    if cap_bytes is not None:
        A.check_bucket_count("--bucket", inp.message_bytes, cap_bytes)
    first_cap_bytes = _si(args.first_bucket, MiB)
    first_bytes = None if first_cap_bytes is None else int(first_cap_bytes)
    if first_bytes is not None and first_bytes < 1:
        A.fail(f"--first-bucket {args.first_bucket:g} MiB is under one byte")
    caps = None if auto else ddp_bucket_caps(None if cap_bytes is None else cap_bytes / MiB,
                                             first_bucket_bytes=first_bytes)
    return TimelineRequest(
        inputs=inp, resolved=resolved, model_label=timeline_model_label(label, n_shape),
        fabric_note=bucket_algorithms_note(resolved, resolved.gpus, args.algorithm), bucket_auto=auto, caps=caps,
        bucket_cap_bytes=cap_bytes, first_bucket_bytes=first_bytes, first_bucket_cap_bytes=first_cap_bytes,
        plot=args.plot, trace_out=args.trace_out, json=args.json)


class ScalingRequest(namedtuple("ScalingRequest", ("curves", "calibrated", "json", "csv", "plot"))):
    """``commcost scaling``: ``curves`` one :class:`~commcost.analyses.scaling.ScalingInputs` per model and
    fabric (None: no analysis flag given, the seed's whole analysis); ``calibrated`` the resolver's answer
    for a ``--profile`` (its header and JSON), else None; ``json``, ``csv``, ``plot`` how to render."""

    __slots__ = ()


_SCALING_ANALYSIS_FLAGS = ("model", "fabric", "params", "compute_ms", "bw", "latency", "gpus",
                           "overlap", "overhead_ms", "dtype", "gpus_per_node", "system", "algorithm", "profile",
                           "backward_fraction")


def _custom_pair(args: argparse.Namespace, preset_flag: str, flags: tuple[str, str]) -> bool:
    """True if the custom flags are given; both or neither, and not with the preset flag."""
    given = [getattr(args, f.lstrip("-").replace("-", "_")) is not None for f in flags]
    if not any(given):
        return False
    if getattr(args, preset_flag.lstrip("-")) is not None:
        A.fail(f"{preset_flag} and {'/'.join(flags)} are exclusive: a preset carries its own values")
    if not all(given):
        missing = flags[given.index(False)]
        A.fail(f"{missing} is required with {flags[given.index(True)]}")
    return True


def scaling_request(args: argparse.Namespace) -> ScalingRequest:
    """The scaling flags checked; every model x fabric as ScalingInputs in SI units."""
    from commcost.analyses.scaling import ScalingInputs, seed_defaults, seed_fabrics, seed_models
    from commcost.hardware import lookup
    from commcost.hardware.registry import MODEL_ALIASES
    from commcost.workload.shape import model_params, model_preset, model_preset_names

    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    if args.csv is not None:
        A.check_output_path("--csv", args.csv)
    if args.profile is not None and args.fabric is not None:
        A.fail("--profile and --fabric both describe the fabric; give one")
    registry = [k for k in (args.model or ()) if k not in seed_models()]
    if registry:
        names = set(model_preset_names()) | set(MODEL_ALIASES)
        unknown = [k for k in registry if k not in names]
        if unknown:
            A.fail(f"unknown model {unknown[0]!r} (valid: {', '.join(sorted(seed_models()))}; or a registry model "
                   f"with --compute-ms: {', '.join(sorted(model_preset_names()))})")
    if registry and args.compute_ms is None:
        A.fail(f"--model {registry[0]} is a registry model: give its --compute-ms (the seed's models carry their own)")
    custom_model = bool(args.params is not None or (args.compute_ms is not None and not registry)) and \
        _custom_pair(args, "--model", ("--params", "--compute-ms"))
    custom_fabric = args.profile is not None or _custom_pair(args, "--fabric", ("--bw", "--latency"))
    render = dict(json=args.json, csv=args.csv, plot=args.plot)
    if all(getattr(args, name) is None for name in _SCALING_ANALYSIS_FLAGS):
        return ScalingRequest(curves=None, calibrated=None, **render)
    d = seed_defaults()
    bytes_per_grad = d.bytes_per_grad if args.dtype is None else bytes_per_element(args.dtype)
    compute_s = _si(args.compute_ms, MS)
    if custom_model:
        models = [(f"{args.params:g} billion params", args.params * BILLION, compute_s)]
    else:
        table = seed_models()
        keys = args.model if args.model is not None else tuple(table)
        models = [(table[k].name, table[k].params, table[k].compute_s) if k in table
                  else (k, float(model_params(model_preset(k)[0])), compute_s) for k in keys]
    gpu_counts = d.gpu_counts if args.gpus is None else tuple(sorted(set(args.gpus)))
    two_tier = args.system is not None or args.gpus_per_node is not None
    if two_tier and (custom_fabric or args.fabric is not None):
        A.fail("--system/--gpus-per-node build the two-tier fabric; drop --fabric/--bw/--latency")
    calibrated = None
    if two_tier:
        fabrics = [_scaling_two_tier(args, max(gpu_counts))]
    elif custom_fabric:
        resolved = resolve_comm_model(fabric_flags(args), set_gpus=False, gpus_list=gpu_counts)
        calibrated = resolved if resolved.info is not None else None
        fabrics = [(f"profile {args.profile}" if calibrated is not None else
                    f"{args.bw:g} GB/s, {args.latency:g} us per ring step", resolved.comm, None, None)]
    else:
        table_f = seed_fabrics()
        keys = args.fabric if args.fabric is not None else tuple(table_f)
        fabrics = [(p.name, FlatLinkModel(link=p.link, backend=args.backend), p.flat_ring_max_gpus,
                    p.flat_ring_note) for p in (lookup(table_f, k, "fabric") for k in keys)]
    common = dict(bytes_per_grad=bytes_per_grad, gpu_counts=gpu_counts, algorithm=args.algorithm or "auto",
                  overhead_s=d.overhead_s if args.overhead_ms is None else args.overhead_ms * MS,
                  overlap_fraction=d.overlap_fraction if args.overlap is None else args.overlap,
                  backward_fraction=2.0 / 3.0 if args.backward_fraction is None else args.backward_fraction)
    curves = tuple(ScalingInputs(model=m_name, fabric=f_name, params=params, compute_s=c_s, comm=comm,
                                 flat_ring_max_gpus=flat_max, flat_ring_note=flat_note, **common)
                   for m_name, params, c_s in models for f_name, comm, flat_max, flat_note in fabrics)
    return ScalingRequest(curves=curves, calibrated=calibrated, **render)


def _scaling_two_tier(args: argparse.Namespace, max_gpus: int) -> tuple:
    """``(name, FabricModel, None, None)`` for ``--system`` or the seed's NVLink + InfiniBand."""
    from commcost.analyses.scaling import seed_two_tier
    from commcost.comm.model import FabricModel
    from commcost.hardware.registry import system_topology

    if args.system is not None:
        G = args.gpus_per_node
        probe = system_topology(args.system, gpus_per_node=G)
        nodes = max(1, -(-max_gpus // probe.gpus_per_node))
        topo = system_topology(args.system, nodes=nodes, gpus_per_node=G)
        return (args.system, FabricModel(topology=topo, backend=args.backend), None, None)
    topo = seed_two_tier(args.gpus_per_node, max_gpus)
    return (topo.name, FabricModel(topology=topo, backend=args.backend), None, None)


def moe_inputs(args: argparse.Namespace) -> dict:
    """The PlanInputs / SearchInputs MoE fields of the parsed flags (``plan`` and ``search``)."""
    if args.capacity_factor is not None and args.moe_imbalance is not None:
        A.fail("give --capacity-factor or --moe-imbalance, not both")
    load = args.capacity_factor or args.moe_imbalance or 1.0
    if load < 1:
        A.fail(f"the load imbalance (busiest over mean) is at least 1, got {load:g}")
    return dict(a2a=args.a2a, fp8_dispatch=args.fp8_dispatch, moe_overlap=args.moe_overlap, expert_load=load)


_SHAPE_FLAGS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts", "top_k",
                "expert_ffn_hidden", "moe_layers")
"""``plan``'s and ``search``'s shape flags (:func:`commcost.cli.plan.add_model_arguments`)."""


def model_spec_of(args: argparse.Namespace):
    """``(TransformerSpec, seq)`` of ``--model`` (and ``--seq``, default the model's training length) or of
    the explicit shape (``plan`` and ``search``)."""
    from commcost.hardware.registry import model_row
    from commcost.workload.transformer import TransformerSpec, model_spec

    shape_flags = [f for f in _SHAPE_FLAGS if getattr(args, f) is not None]
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
    from commcost.hardware.registry import system_gpu

    if args.system is None and args.gpu is None:
        A.fail("--gpu NAME is needed with --bw/--latency or --profile (which GPU computes)")
    # a profile is scope-checked per group when it prices one (the groups are smaller than the job)
    resolved = resolve_comm_model(fabric_flags(args, gpus=gpus), set_gpus=args.profile is None)
    G = resolved.topology.gpus_per_node if resolved.topology is not None else (args.gpus_per_node or 8)
    return resolved, G, args.gpu or system_gpu(args.system)


MEASURED_TFLOPS_MIN, MEASURED_TFLOPS_MAX = 1e-6, 1e6
"""Bounds of ``--measured-tflops`` (TFLOP/s per GPU), as ``--tflops``: past them the measured step
``model FLOPs / (TFLOP/s * 1e12 * W)`` underflows to 0 or is below any step a GPU can take."""


class PlanRequest(namedtuple("PlanRequest", (
        "inputs", "resolved", "measured_step_s", "save_calibration", "calibration", "calibration_path",
        "trace_out", "train_tokens", "price_per_gpu_hour", "json"))):
    """``commcost plan``: ``inputs`` the :class:`~commcost.analyses.plan.plan.PlanInputs` (its efficiency
    fitted to ``measured_step_s`` where a measurement was given, or read from ``calibration``, the document
    at ``calibration_path``); ``resolved`` the one CommModel; ``save_calibration`` a file to write the fitted
    efficiency to; ``trace_out`` a Chrome trace to write; ``train_tokens`` and ``price_per_gpu_hour`` the
    training run to cost (None: none); ``json`` print JSON."""

    __slots__ = ()


def plan_request(args: argparse.Namespace) -> PlanRequest:
    """The plan flags checked; the layout, the PlanInputs in SI units and its calibrated efficiency."""
    from dataclasses import replace

    from commcost.analyses.plan.plan import PlanInputs, plan
    from commcost.calibrate.efficiency import fit_efficiency, load_calibration
    from commcost.core.units import MiB
    from commcost.parallel.layout import Layout
    from commcost.workload.compute import peak_flops_per_s

    spec, seq = model_spec_of(args)
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
                    uneven_pipeline=args.uneven_pipeline)
    if layout.world != gpus:
        A.fail(f"dp x tp x pp x cp = {dp} x {tp} x {pp} x {cp} = {layout.world} != --gpus {gpus}")
    resolved, G, gpu = resolve_hardware(args, gpus)
    if args.calibration is not None and not args.calibration.strip():
        A.fail(f"--calibration {args.calibration!r}: expected a file name, got an empty one")
    if args.measured_tflops is not None and not MEASURED_TFLOPS_MIN <= args.measured_tflops <= MEASURED_TFLOPS_MAX:
        A.fail(f"--measured-tflops must be between {MEASURED_TFLOPS_MIN:g} and {MEASURED_TFLOPS_MAX:g} TFLOP/s per GPU, "
               f"got {args.measured_tflops:.4g}")
    bucket = _si(args.bucket_mb, MiB)
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
                     tp_comm_overlap=args.tp_comm_overlap, stack=args.stack, compiled=args.compile,
                     fp8_attention=args.fp8_attention, cpu_offload_layers=args.cpu_offload_layers,
                     **moe_inputs(args))
    model = resolved.comm
    measured = args.measured_step_s
    if args.measured_tflops or args.mfu:  # the step a measured (or assumed) model FLOP rate gives
        flops_per_s = _si(args.measured_tflops, TERA) or args.mfu * peak_flops_per_s(gpu, args.precision)
        measured = plan(inp, model).model_flops_per_step / (flops_per_s * layout.world)
    if measured is not None:
        inp = replace(inp, efficiency=fit_efficiency(inp, model, measured))
    elif args.save_calibration:
        A.fail("--save-calibration needs --measured-step-s, --measured-tflops or --mfu")
    doc = None
    if args.calibration is not None:
        doc = load_calibration(args.calibration)
        inp = replace(inp, efficiency=float(doc["efficiency"]))
    if args.trace_out:
        A.check_output_path("--trace-out", args.trace_out, (".json",))
    if args.train_tokens is None and args.price_per_gpu_hour is not None:
        A.fail("--price-per-gpu-hour prices a training run: give --train-tokens too")
    return PlanRequest(inputs=inp, resolved=resolved, measured_step_s=measured,
                       save_calibration=args.save_calibration if measured is not None else None, calibration=doc,
                       calibration_path=args.calibration, trace_out=args.trace_out, train_tokens=args.train_tokens,
                       price_per_gpu_hour=args.price_per_gpu_hour, json=args.json)


class MeasureRequest(namedtuple("MeasureRequest", ("config", "output", "json", "is_rank0"))):
    """``commcost measure``: ``config`` the :class:`~commcost.calibrate.measure.MeasureConfig` (sizes in
    bytes on their grid, the backend chosen); ``output`` the file rows are kept in (or None); ``json`` print
    JSON; ``is_rank0`` this process reports (not one rank of a torchrun job other than rank 0)."""

    __slots__ = ()


def measure_request(args: argparse.Namespace) -> MeasureRequest:
    """The measure flags checked, the size grid built (before torch is imported: a bad range is refused at
    once), the backend chosen."""
    import os

    from commcost.calibrate.measure import MeasureConfig, launched_by_torchrun, size_grid, size_quantum_bytes
    from commcost.comm.collectives import Collective
    from commcost.core.errors import InputError
    from commcost.core.optional import require
    from commcost.core.units import format_bytes

    if args.output:
        A.check_output_path("-o", args.output)
    ops = args.ops or (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    lo, hi = args.sizes
    ranks = args.nproc
    if launched_by_torchrun():
        try:
            ranks = int(os.environ["WORLD_SIZE"])
        except ValueError:
            A.fail(f"WORLD_SIZE={os.environ['WORLD_SIZE'][:40]!r} is not an integer (set by torchrun)")
    try:
        sizes = size_grid(lo, hi, args.factor, quantum_bytes=size_quantum_bytes(tuple(ops), args.dtype, ranks))
    except InputError as exc:
        shown = f"{format_bytes(lo, binary=True)}:{format_bytes(hi, binary=True)}".replace(" ", "")
        A.fail(f"--sizes {shown} --factor {args.factor:.10g}: {exc}")
    torch = require("torch", "measure")
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    elif backend == "nccl" and not torch.cuda.is_available():
        A.fail("--backend nccl needs CUDA devices, and torch sees none (torch.cuda.is_available() is False); "
               "use --backend gloo to measure on CPUs")
    cfg = MeasureConfig(backend=backend, ops=tuple(ops), sizes_bytes=sizes,
                        dtype=args.dtype, warmup=args.warmup, iters=args.iters, statistic=args.stat,
                        timeout_s=args.timeout, nproc=args.nproc)
    return MeasureRequest(config=cfg, output=args.output, json=args.json,
                          is_rank0=not launched_by_torchrun() or os.environ.get("RANK") == "0")


class CollectiveRequest(namedtuple("CollectiveRequest", ("op", "algorithm", "sizes_bytes", "one_size", "resolved",
                                                         "json"))):
    """``commcost collective``: ``op`` the :class:`~commcost.comm.collectives.Collective`, ``algorithm`` the
    one asked for (``auto``: the fastest), ``sizes_bytes`` the message sizes, ``one_size`` whether ``--size``
    (one size, its own report) rather than ``--sizes``; ``resolved`` the one CommModel; ``json`` print JSON."""

    __slots__ = ()


class CollectiveLogRequest(namedtuple("CollectiveLogRequest", ("log", "op", "gpus", "system", "nodes",
                                                               "gpus_per_node", "json"))):
    """``commcost collective --log``: the nccl-tests ``log`` scored against the preset ``system`` (``op``,
    ``gpus`` select its table; ``nodes``, ``gpus_per_node`` place it, None: from the log and the preset)."""

    __slots__ = ()


def collective_request(args: argparse.Namespace):
    """A :class:`CollectiveLogRequest` with ``--log``, else a :class:`CollectiveRequest`."""
    from commcost.comm.algorithms import parse_algorithm, parse_collective
    from commcost.core.errors import InputError

    if args.log is not None:
        if args.system is None:
            raise InputError("--log needs --system NAME: the preset to score the log against (see `commcost presets`)")
        for flag in ("bw", "latency", "profile"):
            if getattr(args, flag, None) is not None:
                raise InputError(f"--log scores against a --system preset; --{flag} does not apply")
        return CollectiveLogRequest(log=args.log, op=parse_collective(args.op) if args.op else None, gpus=args.gpus,
                                    system=args.system, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                                    json=args.json)
    if args.op is None:
        raise InputError("--op is required (or give --log, whose collective is read from the log)")
    op = parse_collective(args.op)
    requested = parse_algorithm(args.algorithm)
    resolved = resolve_comm_model(fabric_flags(args), op=op.value)
    if resolved.gpus < 2:
        raise InputError(f"a collective needs at least 2 GPUs, got {resolved.gpus}")
    return CollectiveRequest(op=op, algorithm=requested, sizes_bytes=(args.size,) if args.size is not None
                             else args.sizes, one_size=args.size is not None, resolved=resolved, json=args.json)


class SeriesRequest(namedtuple("SeriesRequest", (
        "data", "op", "gpus", "placement", "more", "tiers", "tiers_gpus_per_node", "output", "max_regimes", "profile",
        "plot", "json"), defaults=((), None, None, None, 3, None, None, False))):
    """``commcost fit`` and ``validate``: the measurement file ``data`` and the series to use of it (``op``,
    ``gpus``, ``placement``); fit's ``more`` files and ``tiers`` system (cross-scale) with its
    ``tiers_gpus_per_node``, ``output`` profile and ``max_regimes``; validate's ``profile`` and ``plot``;
    ``json`` print JSON."""

    __slots__ = ()


def fit_request(args: argparse.Namespace) -> SeriesRequest:
    """The fit flags checked."""
    if args.output:
        A.check_output_path("-o", args.output)
    if args.tiers is None and args.more:
        A.fail(f"several files ({1 + len(args.more)}) are fitted together only with --tiers SYSTEM (cross-scale)")
    G = None
    if args.tiers is not None:
        from commcost.hardware import lookup
        from commcost.hardware.registry import systems

        G = int(lookup(systems(), args.tiers, "system")["gpus_per_node"])
    return SeriesRequest(data=args.data, op=args.op, gpus=args.gpus, placement=args.placement, more=tuple(args.more),
                         tiers=args.tiers, tiers_gpus_per_node=G, output=args.output, max_regimes=args.max_regimes,
                         json=args.json)


def validate_request(args: argparse.Namespace) -> SeriesRequest:
    """The validate flags checked."""
    if args.plot:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    return SeriesRequest(data=args.data, op=args.op, gpus=args.gpus, placement=args.placement, profile=args.profile,
                         plot=args.plot, json=args.json)


class TraceRequest(namedtuple("TraceRequest", (
        "path", "round_us", "workers", "scheduler", "show_progress", "fabric", "algorithm", "save_measurement",
        "steps", "verbose", "json"))):
    """``commcost trace``: the trace file or directory ``path``, read with ``round_us`` (HTA's rounding) on
    ``workers`` processes or a Dask ``scheduler``, a line per file read where ``show_progress``; ``fabric``
    the model flags (None: no model flag given; its backend None: the trace's), ``algorithm`` asked of the
    model; ``save_measurement`` a file for the measured collectives; ``steps`` per-step rows shown (None:
    the report's default), ``verbose``, ``json``."""

    __slots__ = ()


_TRACE_MODEL_FLAGS = ("profile", "system", "bw", "latency", "nodes", "gpus_per_node")


def trace_request(args: argparse.Namespace) -> TraceRequest:
    """The trace flags checked."""
    import sys

    if args.save_measurement is not None:
        A.check_output_path("--save-measurement", args.save_measurement, (".csv", ".json"))
    if args.scheduler is not None and args.workers != 1:
        A.fail("--workers and --scheduler: give one (the cluster's workers read the files)")
    fabric = None
    if any(getattr(args, f) is not None for f in _TRACE_MODEL_FLAGS):
        fabric = fabric_flags(args)
    elif args.extrapolate:
        A.fail("--extrapolate applies to --profile; there is no profile here")
    return TraceRequest(path=args.path, round_us=args.hta_rounding, workers=args.workers, scheduler=args.scheduler,
                        show_progress=args.progress or sys.stderr.isatty(), fabric=fabric, algorithm=args.algorithm,
                        save_measurement=args.save_measurement, steps=args.steps, verbose=args.verbose,
                        json=args.json)


class ListRequest(namedtuple("ListRequest", ("kind", "json"))):
    """``commcost presets``: ``kind`` the one kind to list (None: all), ``json`` print JSON."""

    __slots__ = ()


def presets_request(args: argparse.Namespace) -> ListRequest:
    """The presets flags."""
    return ListRequest(kind=args.kind, json=args.json)


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
    import shlex

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
    if args.cpu_offload_layers:
        add("--cpu-offload-layers", args.cpu_offload_layers)
    return tuple(out)


class SearchRequest(namedtuple("SearchRequest", ("inputs", "resolved", "robust", "top", "plan_prefix", "progress",
                                                 "json", "csv", "plot"))):
    """``commcost search``: ``inputs`` the :class:`~commcost.analyses.plan.search_inputs.SearchInputs`;
    ``resolved`` the one CommModel; ``robust`` rank again by the measured band's upper edge (``--rank
    robust``) and show ``top``; ``plan_prefix`` the ``commcost plan`` flags each result's command starts
    with (:func:`plan_prefix`); ``progress`` draw a bar; ``json``, ``csv``, ``plot`` how to render."""

    __slots__ = ()


def search_request(args: argparse.Namespace) -> SearchRequest:
    """The search flags checked, the space bounded before it is enumerated, the CommModel resolved."""
    from commcost.analyses.plan.search import SearchInputs, SearchSpace, parse_fix, robust_candidates
    from commcost.analyses.plan.space import count_upper_bound

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
    if estimate > MAX_CONFIGURATIONS:
        A.fail(f"the space holds up to {estimate:,} configurations ({len(gpus)} GPU count(s)), more than the "
               f"{MAX_CONFIGURATIONS:,} a search enumerates (about a minute, ~1 GB); fix a dimension "
               "(--fix tp=8,pp=4), or search fewer GPU counts")
    inp = SearchInputs(space=space, gpu=gpu, precision=args.precision, efficiency=args.efficiency,
                       flash_attention=not args.no_flash_attention, tp_comm_overlap=args.tp_comm_overlap,
                       stack=args.stack, compiled=args.compile, fp8_attention=args.fp8_attention,
                       objective=objective, price_per_gpu_hour=args.price_per_gpu_hour or 0.0,
                       top=robust_candidates(args.top) if robust else args.top,
                       keep_points=args.plot is not None, train_tokens=args.train_tokens,
                       headroom=args.memory_headroom, fragile_last=args.rank not in ("step", "cost"),
                       cpu_offload_layers=args.cpu_offload_layers, **moe_inputs(args))
    return SearchRequest(inputs=inp, resolved=resolved, robust=robust, top=args.top,
                         plan_prefix=plan_prefix(args, seq), progress=not args.no_progress and not args.json,
                         json=args.json, csv=args.csv, plot=args.plot)
