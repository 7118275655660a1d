"""``commcost trace PATH``: measured compute, communication, overlap and collectives from a profiler trace."""

from __future__ import annotations

import argparse
import os
import sys

from commcost.cli import _args as A
from commcost.cli._fabric import add_profile_argument, add_system_arguments
from commcost.calibrate.data import write_measurement
from commcost.cli._fabric import resolve_trace_model
from commcost.cli._html import add_html_argument, check_html, json_dict
from commcost.cli.inputs_comm import trace_request
from commcost.core.strict_json import dump_json, dumps_json
from commcost.report.html import write_html
from commcost.report.html.trace import trace_html
from commcost.report.trace import STEPS_SHOWN
from commcost.report.trace import render_trace_tail
from commcost.report.trace import trace_extra_dict
from commcost.report.trace import failed_ranks_warning
from commcost.report.trace import render_trace_text
from commcost.report.trace import trace_to_dict
from commcost.trace.pool import worker_count
from commcost.trace.reader import trace_files
from commcost.trace.summary import analyze_trace
from commcost.trace.summary import predict_rows
from commcost.trace.summary import trace_measurement

__all__ = ["HELP", "EXAMPLES", "add_arguments", "run"]

HELP = "read PyTorch profiler (Kineto) traces: overlap, exposed communication, stragglers, collectives vs a model"

EXAMPLES = (
    "rank0.json",
    "traces/ --workers 8 --profile profile.json --json",
    "traces/ --system dgx-h100 --nodes 2 --save-measurement trace.csv",
)
"""Command lines for --help (a file or a directory with one trace per rank)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """PATH, output options and the model flags (all optional)."""
    p.add_argument("path", help="a Kineto trace (.json or .json.gz) or a directory with one per rank")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    add_html_argument(p)
    p.add_argument("--hta-rounding", action="store_true",
                   help="round every event inward to whole microseconds, as HTA 0.5.0 does by default")
    p.add_argument("--verbose", action="store_true", help="the formulas and the dtype/algbw columns in the text")
    p.add_argument("--workers", type=A.positive_int, default=1,
                   help="read the rank files on N local processes (default 1: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="read the rank files on a Dask distributed cluster (tcp://host:8786; needs dask[distributed] "
                        "and the files at the same paths on its workers)")
    p.add_argument("--allow-partial", action="store_true",
                   help="when ranks are lost while running (a worker or the cluster died), report the others "
                        "(default: exit 1)")
    p.add_argument("--progress", action="store_true",
                   help="a line on stderr as each rank file is read (default: only when stderr is a terminal)")
    p.add_argument("--steps", type=A.nonneg_int, default=None,
                   help="per-step rows shown per rank in the text (default 8; JSON lists all)")
    p.add_argument("--save-measurement", metavar="FILE",
                   help="write the measured collectives as a measurement `commcost fit` reads (.csv or .json)")
    m = p.add_argument_group("price each collective with a model (optional): a profile, a system, or a flat link")
    add_profile_argument(m)
    add_system_arguments(m, gpus_per_node_help="with --system: GPUs per node (default: the preset's)")
    m.add_argument("--bw", type=A.rate_gb_per_s, help="flat link: per-rank bandwidth B, GB/s (1e9; or 50GB/s, 400Gbps)")
    m.add_argument("--latency", type=A.latency_us, help="flat link: per ring-step latency a, microseconds (or 20us)")
    m.add_argument("--backend", choices=("nccl", "gloo"),
                   help="whose algorithms auto chooses among (default: the trace's distributedInfo, else nccl)")


def run(args: argparse.Namespace) -> int:
    """Parse (:func:`commcost.cli.inputs_comm.trace_request`), read, measure, optionally price and save, render."""
    html = check_html(args)
    req = trace_request(args)
    if req.workers > 1:
        _, lowered = worker_count(req.workers, len(trace_files(req.path)))
        if lowered:
            A.warn(lowered)
    summary = analyze_trace(req.path, round_us=req.round_us, workers=req.workers, scheduler=req.scheduler,
                            progress=_progress if req.show_progress else None, allow_partial=req.allow_partial)
    max_group = max((r.group_size for r in summary.rows), default=1)
    resolved = resolve_trace_model(req.fabric, backend=summary.backend, max_group=max_group)
    model = resolved.comm if resolved is not None else None
    transfer = summary.cross.row_transfer_s() if summary.cross is not None else None
    preds = (predict_rows(summary.rows, model, algorithm=req.algorithm, transfer_s=transfer)
             if model is not None else None)
    saved = None
    if req.save_measurement is not None:
        m = trace_measurement(summary)
        write_measurement(m, req.save_measurement)
        saved = (req.save_measurement, len(m.rows))
    note = resolved.note if resolved is not None else None
    out = (trace_to_dict(summary, preds, model) | trace_extra_dict(resolved.info if resolved else None, saved)
           if req.json or html else None)
    if html:  # the page of the very dict --json prints (docs/report.md)
        write_html(html, trace_html(json_dict(dumps_json(out))))
    if req.json:
        dump_json(out)
    else:
        print(render_trace_text(summary, preds, model, steps_shown=STEPS_SHOWN if req.steps is None else req.steps,
                                verbose=req.verbose), end="")
        print(render_trace_tail(note, saved))
    if summary.failed:
        _warn_failures(summary)
    return 0


def _progress(done: int, total: int, path: str) -> None:
    """One line on stderr per rank file read."""
    print(f"commcost trace: {done}/{total} rank files read ({os.path.basename(path)})", file=sys.stderr, flush=True)


def _warn_failures(summary) -> None:
    """The rank files that could not be read, in one warning line on stderr: the report of the
    others is printed and the run ends 0 (a job's report is not lost to one truncated file; the
    text and the JSON ``failed_ranks`` say which were left out)."""
    A.warn(failed_ranks_warning(summary))
