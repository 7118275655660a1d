"""The step-time commands' flags -> frozen inputs in SI units: ``commcost timeline`` (one step's DDP
bucket schedule, :class:`~commcost.step.timeline.TimelineInputs`) and ``commcost scaling`` (step time
against the GPU count, one :class:`~commcost.analyses.scaling.ScalingInputs` per model and fabric).

Part of the input builder (:mod:`commcost.cli.inputs` and its ``inputs_*`` siblings), the one reader of
the argparse Namespace; not on the drill's start-up path, so its imports sit at the top.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from commcost.analyses.scaling import ScalingInputs, seed_defaults, seed_fabrics, seed_models, seed_two_tier
from commcost.cli import _args as A
from commcost.cli._fabric import bucket_algorithms_note, resolve_comm_model, seed_fabric_models, topology_model
from commcost.formats.hf_config import spec_from_hf_config
from commcost.cli.inputs import _si, fabric_flags
from commcost.comm.topology import nodes_spanned
from commcost.core.dtypes import bytes_per_element
from commcost.core.units import BILLION, MS, MiB
from commcost.hardware import lookup
from commcost.hardware.registry import MODEL_ALIASES, system_gpu
from commcost.comm.systems import system_topology
from commcost.report.timeline import timeline_model_label
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.timeline import TimelineInputs
from commcost.workload.shape import check_timeline_shape, model_params, model_preset, model_preset_names
from commcost.workload.transformer import TransformerSpec
from commcost.analyses.scaling_compute import plan_compute

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    
    from commcost.cli._fabric import Resolved
    from commcost.comm.model import CommModel
    from commcost.step.ddp_buckets import DdpBucketCaps

__all__ = ["TimelineRequest", "timeline_request", "ScalingRequest", "scaling_request"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineRequest:
    """``commcost timeline``: ``inputs`` the :class:`~commcost.step.timeline.TimelineInputs`; ``resolved`` the
    one CommModel; ``model_label`` how gradients arrive; ``fabric_note`` what prices the bucket all-reduces
    (None for a flat link); ``bucket_auto`` search the caps (``--bucket auto``), else ``caps`` the
    :class:`~commcost.step.ddp_buckets.DdpBucketCaps` simulated, from ``bucket_cap_bytes`` (``--bucket``;
    None: DDP's default); ``first_bucket_bytes`` DDP's first cap as an integer (``--first-bucket``, None:
    DDP's) and ``first_bucket_cap_bytes`` the same before rounding (for the notes); ``plot``, ``trace_out``
    files to write; ``json`` print JSON."""

    inputs: TimelineInputs
    resolved: Resolved
    model_label: str
    fabric_note: str | None
    bucket_auto: bool
    caps: DdpBucketCaps | None
    bucket_cap_bytes: float | None
    first_bucket_bytes: int | None
    first_bucket_cap_bytes: float | None
    plot: str | None
    trace_out: str | None
    json: bool


_PARAMS_TOLERANCE = 0.10
"""timeline's --params may differ from a shape's own count by this much (it is then only a cross-check)."""


def _timeline_shape(args: argparse.Namespace):
    """``(spec, seq, label)``: the :class:`~commcost.workload.transformer.TransformerSpec` of --model (its
    training length unless --seq) or of --layers/--hidden/--seq[/--vocab] (one head: only the ratio
    n_kv/n_q matters to the timeline), checked as the timeline checks it; (None, 0, None) if none."""
    explicit = [f for f in ("layers", "hidden", "vocab") if getattr(args, f) is not None]
    if getattr(args, "hf_config", None) is not None:
        if args.model is not None or explicit:
            A.fail(f"--hf-config sets the shape; drop --{'model' if args.model is not None else explicit[0]}")
        if args.seq is None:
            A.fail("--hf-config needs --seq (a config.json holds the longest context, not the training length)")
        spec = spec_from_hf_config(args.hf_config)
        check_timeline_shape(spec, args.seq)
        return spec, args.seq, f"model {spec.name} (--hf-config)"
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
    shape_flag = "--params" if shape is None else "--model" if args.model is not None else \
        "--hf-config" if getattr(args, "hf_config", None) is not None else "--layers/--hidden"
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingRequest:
    """``commcost scaling``: ``curves`` one :class:`~commcost.analyses.scaling.ScalingInputs` per model and
    fabric (None: no analysis flag given, the seed's whole analysis); ``calibrated`` the resolver's answer
    for a ``--profile`` (its header and JSON), else None; ``seed_comms`` with ``curves`` None, the seed's
    fabrics as the resolver prices them (:func:`commcost.cli._fabric.seed_fabric_models`); ``json``, ``csv``,
    ``plot`` how to render."""

    curves: Sequence[ScalingInputs] | None
    calibrated: Resolved | None
    seed_comms: Mapping[str, CommModel] | None = None
    json: bool
    csv: str | None
    plot: str | None


DEFAULT_SEQ = 4096
"""Tokens per sequence plan prices a registry model's ``t_c`` at when ``--seq`` is not given (Llama 2's context)."""

_SCALING_ANALYSIS_FLAGS = ("model", "fabric", "params", "compute_ms", "bw", "latency", "gpus", "seq",
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


def _registry_models(args: argparse.Namespace) -> list:
    """The ``--model`` names that are registry models (not the seed table's), checked: known, with ``--system`` or
    ``--compute-ms``; ``--seq`` only for them."""
    registry = [k for k in (args.model or ()) if k not in seed_models()]
    if registry:
        names = set(model_preset_names()) | set(MODEL_ALIASES)
        unknown = [k for k in registry if k not in names]
        if unknown:
            A.fail(f"unknown model {unknown[0]!r} (valid: {', '.join(sorted(seed_models()))}; or a registry model "
                   f"with --compute-ms: {', '.join(sorted(model_preset_names()))})")
    if registry and args.compute_ms is None and args.system is None:
        A.fail(f"--model {registry[0]} is a registry model: give --system NAME (plan prices its compute on that "
               "system's GPU) or its --compute-ms")
    if args.seq is not None and not (registry and args.compute_ms is None):
        A.fail("--seq sets the tokens plan prices a registry model's compute at: it needs a registry --model "
               "without --compute-ms")
    return registry


def _plan_computed(args: argparse.Namespace, models: list, fabrics: list, gpu) -> tuple[list, dict]:
    """``(models, sources)``: a registry model without ``--compute-ms`` gets plan's compute on the first fabric
    (``sources``: its plan compute by name)."""
    sources = {}
    if any(c_s is None for _, _, c_s in models):   # a registry model without --compute-ms: plan's compute
        comm = fabrics[0][1]
        for name, _, c_s in models:
            if c_s is None:
                pc = plan_compute(name, gpu, comm.topology.gpus_per_node, args.seq or DEFAULT_SEQ, comm)
                sources[name] = pc
        models = [(n, params, sources[n].compute_s if c_s is None else c_s) for n, params, c_s in models]
    return models, sources


def scaling_request(args: argparse.Namespace) -> ScalingRequest:
    """The scaling flags checked; every model x fabric as ScalingInputs in SI units."""
    if args.plot is not None:
        A.check_output_path("--plot", args.plot, (".png", ".svg"))
    if args.csv is not None:
        A.check_output_path("--csv", args.csv)
    if args.profile is not None and args.fabric is not None:
        A.fail("--profile and --fabric both describe the fabric; give one")
    registry = _registry_models(args)
    custom_model = bool(args.params is not None or (args.compute_ms is not None and not registry)) and \
        _custom_pair(args, "--model", ("--params", "--compute-ms"))
    custom_fabric = args.profile is not None or _custom_pair(args, "--fabric", ("--bw", "--latency"))
    render = dict(json=args.json, csv=args.csv, plot=args.plot)
    if all(getattr(args, name) is None for name in _SCALING_ANALYSIS_FLAGS):
        return ScalingRequest(curves=None, calibrated=None, seed_comms=seed_fabric_models(backend=args.backend),
                              **render)
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
        comms = seed_fabric_models(args.fabric, backend=args.backend)
        fabrics = [(p.name, comms[k], p.flat_ring_max_gpus, p.flat_ring_note)
                   for k, p in ((k, lookup(table_f, k, "fabric")) for k in comms)]
    common = dict(bytes_per_grad=bytes_per_grad, gpu_counts=gpu_counts, algorithm=args.algorithm or "auto",
                  overhead_s=d.overhead_s if args.overhead_ms is None else args.overhead_ms * MS,
                  overlap_fraction=d.overlap_fraction if args.overlap is None else args.overlap,
                  backward_fraction=2.0 / 3.0 if args.backward_fraction is None else args.backward_fraction)
    gpu = None if args.system is None else system_gpu(args.system)
    models, sources = _plan_computed(args, models, fabrics, gpu)
    curves = tuple(ScalingInputs(model=m_name, fabric=f_name, params=params, compute_s=c_s, comm=comm,
                                 flat_ring_max_gpus=flat_max, flat_ring_note=flat_note, gpu=gpu,
                                 compute_source=sources[m_name].source if m_name in sources else "", **common)
                   for m_name, params, c_s in models for f_name, comm, flat_max, flat_note in fabrics)
    return ScalingRequest(curves=curves, calibrated=calibrated, **render)


def _scaling_two_tier(args: argparse.Namespace, max_gpus: int) -> tuple:
    """``(name, FabricModel, None, None)`` for ``--system`` (the one resolver's, on the nodes the largest
    count spans) or the seed's NVLink + InfiniBand."""
    if args.system is not None:
        probe = system_topology(args.system, gpus_per_node=args.gpus_per_node)
        nodes = nodes_spanned(max(1, max_gpus), probe.gpus_per_node)
        resolved = resolve_comm_model(fabric_flags(args, nodes=nodes), set_gpus=False)
        return (args.system, resolved.comm, None, None)
    topo = seed_two_tier(args.gpus_per_node, max_gpus)
    return (topo.name, topology_model(topo, backend=args.backend), None, None)

