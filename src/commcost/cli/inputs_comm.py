"""The collective commands' flags -> requests: ``commcost collective`` (price, or score a log against a
preset), ``measure`` (the size grid and the backend), ``fit`` and ``validate`` (the series of a
measurement file), ``trace`` (a profiler trace and the model to price it with), and ``presets``.

Part of the input builder (:mod:`commcost.cli.inputs` and its ``inputs_*`` siblings), the one reader of
the argparse Namespace; not on the drill's start-up path, so its imports sit at the top.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import os
import sys

from commcost.calibrate.measure import MeasureConfig, launched_by_torchrun, size_grid, size_quantum_bytes
from commcost.cli import _args as A
from commcost.cli._fabric import resolve_comm_model
from commcost.cli.inputs import fabric_flags
from commcost.comm.algorithms import parse_algorithm, parse_collective
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.optional import require
from commcost.core.units import format_bytes
from commcost.hardware import lookup
from commcost.hardware.registry import systems

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from commcost.cli._fabric import FabricFlags, Resolved

__all__ = ["MeasureRequest", "measure_request", "CollectiveRequest", "CollectiveLogRequest", "collective_request",
           "SeriesRequest", "fit_request", "validate_request", "TraceRequest", "trace_request", "ListRequest",
           "presets_request"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureRequest:
    """``commcost measure``: ``config`` the :class:`~commcost.calibrate.measure.MeasureConfig` (sizes in
    bytes on their grid, the backend chosen); ``output`` the file rows are kept in (or None); ``json`` print
    JSON; ``is_rank0`` this process reports (not one rank of a torchrun job other than rank 0)."""

    config: MeasureConfig
    output: str | None
    json: bool
    is_rank0: bool


def measure_request(args: argparse.Namespace) -> MeasureRequest:
    """The measure flags checked, the size grid built (before torch is imported: a bad range is refused at
    once), the backend chosen."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRequest:
    """``commcost collective``: ``op`` the :class:`~commcost.comm.collectives.Collective`, ``algorithm`` the
    one asked for (``auto``: the fastest), ``sizes_bytes`` the message sizes, ``one_size`` whether ``--size``
    (one size, its own report) rather than ``--sizes``; ``resolved`` the one CommModel; ``json`` print JSON."""

    op: Collective
    algorithm: str
    sizes_bytes: tuple[float, ...]
    one_size: bool
    resolved: Resolved
    json: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveLogRequest:
    """``commcost collective --log``: the nccl-tests ``log`` scored against the preset ``system`` (``op``,
    ``gpus`` select its table; ``nodes``, ``gpus_per_node`` place it, None: from the log and the preset)."""

    log: str
    op: Collective | None
    gpus: int | None
    system: str
    nodes: int | None
    gpus_per_node: int | None
    json: bool


def collective_request(args: argparse.Namespace):
    """A :class:`CollectiveLogRequest` with ``--log``, else a :class:`CollectiveRequest`."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesRequest:
    """``commcost fit`` and ``validate``: the measurement file ``data`` and the series to use of it (``op``,
    ``gpus``, ``placement``); fit's ``more`` files and ``tiers`` system (cross-scale) with its
    ``tiers_gpus_per_node``, ``output`` profile and ``max_regimes``; validate's ``profile`` and ``plot``;
    ``json`` print JSON."""

    data: str
    op: Collective | None
    gpus: int | None
    placement: str
    more: tuple[str, ...] = ()
    tiers: str | None = None
    tiers_gpus_per_node: int | None = None
    output: str | None = None
    max_regimes: int = 3
    profile: str | None = None
    plot: str | None = None
    json: bool = False


def fit_request(args: argparse.Namespace) -> SeriesRequest:
    """The fit flags checked."""
    if args.output:
        A.check_output_path("-o", args.output)
    if args.tiers is None and args.more:
        A.fail(f"several files ({1 + len(args.more)}) are fitted together only with --tiers SYSTEM (cross-scale)")
    G = None
    if args.tiers is not None:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceRequest:
    """``commcost trace``: the trace file or directory ``path``, read with ``round_us`` (HTA's rounding) on
    ``workers`` processes or a Dask ``scheduler``, a line per file read where ``show_progress``; ``fabric``
    the model flags (None: no model flag given; its backend None: the trace's), ``algorithm`` asked of the
    model; ``save_measurement`` a file for the measured collectives; ``steps`` per-step rows shown (None:
    the report's default), ``verbose``, ``json``; ``allow_partial`` report the ranks that were read when
    others were lost while running (a worker or the cluster died) instead of failing."""

    path: str
    round_us: bool
    workers: int
    scheduler: str | None
    show_progress: bool
    fabric: FabricFlags | None
    algorithm: str
    save_measurement: str | None
    steps: int | None
    verbose: bool
    json: bool
    allow_partial: bool = False


_TRACE_MODEL_FLAGS = ("profile", "system", "bw", "latency", "nodes", "gpus_per_node")


def trace_request(args: argparse.Namespace) -> TraceRequest:
    """The trace flags checked."""
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
                        json=args.json, allow_partial=args.allow_partial)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListRequest:
    """``commcost presets``: ``kind`` the one kind to list (None: all), ``json`` print JSON."""

    kind: str | None
    json: bool


def presets_request(args: argparse.Namespace) -> ListRequest:
    """The presets flags."""
    return ListRequest(kind=args.kind, json=args.json)

