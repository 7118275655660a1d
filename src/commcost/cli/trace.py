"""``commcost trace PATH``: measured compute, communication, overlap and collectives from a profiler trace."""

from __future__ import annotations

import argparse
import json
import sys

from commcost.cli import _args as A
from commcost.cli._fabric import add_profile_argument

__all__ = ["HELP", "add_arguments", "run", "comm_model_from_args"]

HELP = "read PyTorch profiler (Kineto) traces: overlap, exposed communication, stragglers, collectives vs a model"

EXAMPLES = """examples:
  commcost trace rank0.pt.trace.json.gz
  commcost trace traces/ --json                      (a directory: one file per rank)
  commcost trace traces/ --system dgx-h100 --nodes 2 --save-measurement trace.csv"""


class _ExamplesFormatter(A._HelpFormatter):
    """The shared formatter, keeping the examples' line breaks (as argparse.RawDescriptionHelpFormatter)."""

    def _fill_text(self, text, width, indent):
        return "".join(indent + line for line in text.splitlines(keepends=True))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """PATH, output options and the model flags (all optional)."""
    p.epilog = EXAMPLES
    p.formatter_class = _ExamplesFormatter
    p.add_argument("path", help="a Kineto trace (.json or .json.gz) or a directory with one per rank")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    p.add_argument("--hta-rounding", action="store_true",
                   help="round every event inward to whole microseconds, as HTA 0.5.0 does by default")
    p.add_argument("--steps", type=A.nonneg_int, default=None,
                   help="per-step rows shown per rank in the text (default 8; JSON lists all)")
    p.add_argument("--save-measurement", metavar="FILE",
                   help="write the measured collectives as a measurement `commcost fit` reads (.csv or .json)")
    m = p.add_argument_group("price each collective with a model (optional): a profile, a system, or a flat link")
    add_profile_argument(m)
    m.add_argument("--extrapolate", action="store_true", help="with --profile: price collectives outside its scope")
    m.add_argument("--system", help="system preset (see `commcost presets`), e.g. dgx-h100")
    m.add_argument("--nodes", type=A.positive_int, help="with --system: nodes (default: as the largest group needs)")
    m.add_argument("--gpus-per-node", type=A.positive_int, help="with --system: GPUs per node (default: the preset's)")
    m.add_argument("--bw", type=A.positive_float, help="flat link: per-rank bandwidth B, GB/s (1e9)")
    m.add_argument("--latency", type=A.nonneg_float, help="flat link: per ring-step latency a, microseconds")


def comm_model_from_args(args: argparse.Namespace, *, backend: str | None, max_group: int):
    """The one CommModel the flags describe, or None without model flags.

    A stand-in for the shared resolver (``cli/_fabric.py``): --profile, --system or --bw/--latency.
    """
    from commcost.comm.model import BACKENDS, FabricModel, FlatLinkModel
    from commcost.errors import InputError

    backend = backend if backend in BACKENDS else "nccl"
    given = [f for f, v in (("--profile", args.profile), ("--system", args.system),
                            ("--bw/--latency", args.bw if args.bw is not None else args.latency)) if v is not None]
    if len(given) > 1:
        raise InputError(f"give one model: {' and '.join(given)} both describe the fabric")
    if args.system is None and (args.nodes is not None or args.gpus_per_node is not None):
        raise InputError("--nodes/--gpus-per-node need --system")
    if args.extrapolate and args.profile is None:
        raise InputError("--extrapolate applies to --profile only")
    if args.profile is not None:
        from commcost.calibrate.profile import load_profile, profile_model

        return profile_model(load_profile(args.profile), extrapolate=args.extrapolate)
    if args.system is not None:
        from commcost.presets import system_group

        if args.nodes is None:
            probe, _ = system_group(args.system, gpus_per_node=args.gpus_per_node)
            nodes = max(1, -(-max_group // probe.gpus_per_node))
        else:
            nodes = args.nodes
        topo, _ = system_group(args.system, nodes=nodes, gpus_per_node=args.gpus_per_node)
        return FabricModel(topology=topo, backend=backend)
    if args.bw is not None or args.latency is not None:
        if args.bw is None or args.latency is None:
            raise InputError("a flat link needs both --bw (GB/s) and --latency (us)")
        from commcost.comm.topology import Link
        from commcost.units import GB, US

        return FlatLinkModel(link=Link(bandwidth_bytes_per_s=args.bw * GB, latency_s=args.latency * US),
                             backend=backend)
    return None


def run(args: argparse.Namespace) -> int:
    """Read, measure, optionally price and save, render."""
    from commcost.report.trace import STEPS_SHOWN, render_trace_text, trace_to_dict
    from commcost.trace.summary import analyze_trace, predict_rows

    if args.save_measurement is not None:
        A.check_output_path("--save-measurement", args.save_measurement, (".csv", ".json"))
    summary = analyze_trace(args.path, round_us=args.hta_rounding)
    max_group = max((r.group_size for r in summary.rows), default=1)
    model = comm_model_from_args(args, backend=summary.backend, max_group=max_group)
    preds = predict_rows(summary.rows, model) if model is not None else None
    saved = None
    if args.save_measurement is not None:
        from commcost.calibrate.data import write_measurement
        from commcost.errors import InputError
        from commcost.trace.collectives import rows_to_measurement

        m = rows_to_measurement(list(summary.rows), {
            "source": summary.path, "source_kind": "kineto-trace", "backend": summary.backend,
            "world_size": summary.world_size, "ranks": len(summary.ranks),
            "note": "time_s is the median over the trace's calls of that op and size (all ranks)"})
        if not m.rows:
            raise InputError(f"{summary.path}: no collective on 2 or more ranks with a size and a time to save")
        write_measurement(m, args.save_measurement)
        saved = (args.save_measurement, len(m.rows))
    if args.json:
        out = trace_to_dict(summary, preds, model)
        if saved:
            out["saved_measurement"] = {"path": saved[0], "rows": saved[1]}
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        text = render_trace_text(summary, preds, model, steps_shown=STEPS_SHOWN if args.steps is None else args.steps)
        if saved:
            text += f"\n\nmeasurement written to {saved[0]} ({saved[1]} rows; `commcost fit {saved[0]}` fits it)"
        print(text)
    return 0
