"""The one reader of the argparse Namespace: each subcommand's flags -> frozen inputs in SI units.

A ``run`` (parse, resolve, call, render) calls its builder and reads nothing else of the flags:
the builder checks the combination of flags (each refusal one line, exit 2: :func:`commcost.cli._args.fail`),
converts every unit once (GB/s -> bytes/s, us -> s, ms -> s, billions -> parameters, MiB -> bytes),
resolves the one CommModel (:func:`commcost.cli._fabric.resolve_comm_model`) and returns the library's own
frozen inputs (:class:`~commcost.analyses.drill.budget.BudgetInputs`,
:class:`~commcost.step.timeline.TimelineInputs`, :class:`~commcost.analyses.scaling.ScalingInputs`,
:class:`~commcost.analyses.plan.plan.PlanInputs`, :class:`~commcost.analyses.plan.search_inputs.SearchInputs`
...) with the few options that only say how to render (``json``, output files). Nothing is written back
into the Namespace.

The builder is this module and its ``inputs_*`` siblings, one concern each: here what they share
(:func:`fabric_flags`, the unit conversion) and ``budget``'s builder, the drill's; ``inputs_step``
(``timeline``, ``scaling``); ``inputs_plan`` (``plan``, ``search``); ``inputs_comm`` (``collective``,
``measure``, ``fit``, ``validate``, ``trace``, ``presets``). Each subcommand module imports the sibling it
needs; this module imports none of them.

The request types are named tuples, as :class:`commcost.cli._fabric.Resolved`: immutable, and cheap to
define (this module is on the drill's start-up path, which pays for every dataclass it creates:
benchmarks/cli_startup.py). For the same reason the library modules a builder needs are imported
inside that builder, except the drill's own.
"""

from __future__ import annotations

import argparse
from collections import namedtuple

from commcost.cli import _args as A
from commcost.cli._fabric import FabricFlags, intra_node_model, resolve_comm_model
from commcost.core.dtypes import bytes_per_element, gradient_bytes
from commcost.core.units import BILLION, GB, MS, TERA, US

__all__ = ["fabric_flags", "BudgetRequest", "budget_request"]


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


def _budget_params(args: argparse.Namespace):
    """``(shape, seq, params, params_n)``: the model's shape and sequence (``--model``: its tensors give the
    per-tensor gradient stream of the bucket advice), the parameter count as given (billions with ``--params``;
    None: not given) and in parameters, from ``--params``, ``--model`` or ``--hf-config`` (one of them)."""
    shape, seq, params = None, 0, args.params
    params_n = None if params is None else params * BILLION
    if args.model is not None:
        from commcost.workload.shape import model_params, model_preset

        if params is not None:
            A.fail("--model sets the parameter count; drop --params")
        shape, seq = model_preset(args.model)  # its tensors: the per-tensor gradient stream (bucket advice)
        params = params_n = float(model_params(shape))
    if getattr(args, "hf_config", None) is not None:
        from commcost.formats.hf_config import spec_from_hf_config  # lazy: not on the drill's path

        if params is not None or args.model is not None:
            A.fail(f"--hf-config sets the parameter count; drop --{'params' if params is not None else 'model'}")
        params = params_n = float(spec_from_hf_config(args.hf_config).params)
    return shape, seq, params, params_n


def budget_request(args: argparse.Namespace) -> BudgetRequest:
    """The budget flags checked in the order the drill reports them, converted once."""
    shape, seq, params, params_n = _budget_params(args)
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
        from commcost.analyses.drill.budget import BudgetInputs    # here: plan and search share this module

        budget = BudgetInputs(
            gpus=gpus, comm=comm, params=params_n, step_s=args.step_ms * MS,
            bytes_per_grad=bytes_per_grad, grad_accum=args.grad_accum,
            backward_fraction=args.backward_fraction, threshold=args.threshold,
            fix_grad_accum=args.fix_grad_accum, intra_node_comm=intra_node_model(
                resolved, bandwidth_bytes_per_s=args.intra_bw * GB,
                latency_s=None if args.intra_latency is None else args.intra_latency * US),
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
