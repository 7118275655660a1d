"""``commcost validate``: a profile's predictions against measurements, per size."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.cli.fit import add_selection_arguments
from commcost.cli.inputs_comm import validate_request
from pathlib import Path
from commcost.calibrate.data import load_series
from commcost.calibrate.fit import AlphaBetaFit
from commcost.calibrate.fit import compare
from commcost.calibrate.profile import load_profile
from commcost.core.strict_json import dump_json
from commcost.report.calibrate import plot_validate
from commcost.report.calibrate import render_validate_text
from commcost.report.calibrate import validate_to_dict

__all__ = ["HELP", "add_arguments", "run"]

HELP = "compare a calibrated profile's predictions with measured times, per size (optionally plot)"

EXAMPLES = (
    'cluster.csv --profile cluster.profile.json',
    'all_reduce_perf.log --profile cluster.profile.json --plot fit.png',
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``commcost validate``."""
    add_selection_arguments(p)
    p.add_argument("--profile", required=True, help="profile file written by commcost fit")
    p.add_argument("--plot", metavar="FILE", help="save measured points and the model line (log-log) to FILE (.png or .svg)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")


def run(args: argparse.Namespace) -> int:
    """Parse (:func:`commcost.cli.inputs_comm.validate_request`), load, predict, compare, render."""
    req = validate_request(args)
    profile = load_profile(req.profile)
    series = load_series(req.data, op=req.op or profile.fit.op, gpus=req.gpus, placement=req.placement)
    for warning in series.warnings:
        A.warn(warning)
    model = AlphaBetaFit(op=series.op, algorithm=profile.fit.algorithm, gpus=series.gpus,
                         regimes=profile.fit.regimes)
    comparison = compare(model, series.samples)
    if req.plot:
        plot_validate(model, comparison, req.plot,
                      f"{series.op}, {series.gpus} ranks: {Path(req.data).name} vs {Path(req.profile).name}")
    if req.json:
        dump_json(validate_to_dict(profile, model, comparison, series, req.plot))
    else:
        print(render_validate_text(profile, model, comparison, series, req.plot), end="")
    return 0
