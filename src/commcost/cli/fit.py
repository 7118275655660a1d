"""``commcost fit``: fit alpha and beta to a measurement file or raw nccl-tests output."""

from __future__ import annotations

import argparse
import os
import sys

from commcost.cli import _args as A
from commcost.calibrate.data import load_series
from commcost.calibrate.fit import compare
from commcost.calibrate.fit import fit_alpha_beta
from commcost.calibrate.profile import Profile
from commcost.calibrate.profile import save_profile
from commcost.calibrate.profile import stamped_provenance
from commcost.core.files import write_atomic
from commcost.calibrate.tiers import MIN_TIER_SIZE_BYTES
from commcost.calibrate.tiers import fit_tiers
from commcost.calibrate.tiers import log_group_size
from commcost.calibrate.tiers import log_tier_samples
from commcost.calibrate.tiers import split_log_ranks
from commcost.calibrate.tiers import tier_fit_to_dict
from commcost.comm.collectives import Collective
from commcost.core.strict_json import dump_json
from commcost.report.progress import log_progress_text
from commcost.core.strict_json import dumps_json
from commcost.report.calibrate import fit_to_dict
from commcost.report.calibrate import render_fit_text
from commcost.cli.inputs_comm import SeriesRequest
from commcost.cli.inputs_comm import fit_request
from commcost.report.calibrate import render_tier_fit_text

__all__ = ["HELP", "add_arguments", "run", "add_selection_arguments"]

HELP = "fit alpha and beta to a measurement (commcost measure CSV/JSON, or nccl-tests output)"

EXAMPLES = (
    'all_reduce_perf.log -o cluster.profile.json',
    'cluster.csv --op all_gather --max-regimes 2 --json',
    'one_node.log two_nodes.log:16 --tiers dgx-h100 -o cluster.tiers.json   (cross-scale; LOG:RANKS where a log '
    'lists no ranks)',
)
"""Command lines shown at the end of ``--help``."""


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """``--op``, ``--gpus``, ``--placement``: which series of the file to use (shared with validate)."""
    p.add_argument("data", help="commcost measure CSV/JSON, or a nccl-tests *_perf log")
    p.add_argument("--op", type=A.collective, help="collective to use when the file holds several")
    p.add_argument("--gpus", type=A.positive_int, help="group size to use when the file holds several "
                   "(or when a nccl-tests log lists no ranks)")
    p.add_argument("--placement", choices=("best", "out_of_place", "in_place"), default="best",
                   help="nccl-tests column to use: the smaller of the two times (default), or one of them")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``commcost fit``."""
    add_selection_arguments(p)
    p.add_argument("more", nargs="*", help="with --tiers: more logs of the same system at other scales; each log is "
                   "fitted at the group size it lists, or at LOG:RANKS for a log that lists none")
    p.add_argument("--tiers", metavar="SYSTEM", help="cross-scale calibration: fit SYSTEM's intra-node bandwidth, "
                   "NIC bandwidth and network latency to logs from one or more scales, so the profile predicts any "
                   "node count through the topology (commcost.calibrate.tiers)")
    p.add_argument("-o", "--output", help="write the profile (JSON) here")
    p.add_argument("--max-regimes", type=A.positive_int, default=3,
                   help="most size regimes the model may use (default 3; 1 = one straight line)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")
    p.add_argument("--progress", action="store_true",
                   help="a line on stderr at each tenth of the log read (default: on a terminal, for logs of "
                        "16 MiB or more)")


PROGRESS_MIN_BYTES = 16 * 2**20
"""A log this large (about 100,000 rows, several seconds to read) shows its progress on a terminal."""


def _progress_for(args: argparse.Namespace, path: str):
    """The reporter of :func:`commcost.calibrate.data.load_series` for ``path``, or None."""
    try:
        big = os.stat(path).st_size >= PROGRESS_MIN_BYTES
    except OSError:
        big = False  # load_series names the file
    if not (getattr(args, "progress", False) or (big and sys.stderr.isatty())):
        return None

    def say(read: int, total: int) -> None:
        print(f"commcost fit: {log_progress_text(os.path.basename(path), read, total)}", file=sys.stderr, flush=True)
    return say


def run(args: argparse.Namespace) -> int:
    """Parse (:func:`commcost.cli.inputs_comm.fit_request`), read, fit, write the profile, render."""
    req = fit_request(args)
    if req.tiers is not None:
        return _run_tiers(req, args)
    series = load_series(req.data, op=req.op, gpus=req.gpus, placement=req.placement,
                         progress=_progress_for(args, req.data))
    for warning in series.warnings:
        A.warn(warning)
    fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus, max_regimes=req.max_regimes)
    quality = compare(fit, series.samples)
    single_fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus, max_regimes=1)
    single = compare(single_fit, series.samples)
    if req.output:
        save_profile(Profile.from_fit(fit, quality, stamped_provenance(series.provenance)), req.output)
    if req.json:
        dump_json(fit_to_dict(fit, quality, series, single, single_fit, req.output))
    else:
        print(render_fit_text(fit, quality, series, single, single_fit, req.output), end="")
    return 0


def _run_tiers(req: SeriesRequest, args: argparse.Namespace) -> int:
    """``--tiers SYSTEM``: every file's all-reduce rows as samples on the nodes it spans
    (:func:`commcost.calibrate.tiers.log_tier_samples`); fit; write."""
    G = req.tiers_gpus_per_node
    samples, sources = [], []
    specs = [req.data, *req.more]
    for spec in specs:
        path, given = split_log_ranks(spec)
        ranks = log_group_size(path, given, req.gpus, len(specs))  # each log at its own group size
        series = load_series(path, op=req.op or Collective.ALL_REDUCE, gpus=ranks, placement=req.placement,
                             progress=_progress_for(args, path))
        if series.op is not Collective.ALL_REDUCE:
            A.fail(f"{path}: --tiers fits all-reduce tables, this one is {series.op.value}")
        for warning in series.warnings:
            A.warn(warning)
        nodes, rows = log_tier_samples(series.samples, gpus=series.gpus, gpus_per_node=G)
        samples.extend(rows)
        sources.append({"source": str(path), "gpus": series.gpus, "nodes": nodes})
    if not samples:
        A.fail("no all-reduce rows of 1 MiB or more to fit the tiers to")
    fit = fit_tiers(req.tiers, samples)
    out = tier_fit_to_dict(fit, {"sources": sources, "rows_fitted": len(samples),
                                 "min_size_bytes": MIN_TIER_SIZE_BYTES})
    if req.output:
        write_atomic(req.output, dumps_json(out, what="tier profile"))
    if req.json:
        dump_json(out)
    else:
        print(render_tier_fit_text(fit, req.tiers, len(samples), req.output))
    return 0
