"""``commcost fit``: fit alpha and beta to a measurement file or raw nccl-tests output."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A

__all__ = ["HELP", "add_arguments", "run", "add_selection_arguments"]

HELP = "fit alpha and beta to a measurement (commcost measure CSV/JSON, or nccl-tests output)"

EXAMPLES = (
    'all_reduce_perf.log -o cluster.profile.json',
    'cluster.csv --op all_gather --max-regimes 2 --json',
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
    p.add_argument("-o", "--output", help="write the profile (JSON) here")
    p.add_argument("--max-regimes", type=A.positive_int, default=3,
                   help="most size regimes the model may use (default 3; 1 = one straight line)")
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units) instead of text")


def run(args: argparse.Namespace) -> int:
    """Read, fit, write the profile, render."""
    from commcost.calibrate.data import load_series
    from commcost.calibrate.fit import compare, fit_alpha_beta
    from commcost.calibrate.profile import Profile, save_profile
    from commcost.report.calibrate import fit_to_dict, render_fit_text

    if args.output:
        A.check_output_path("-o", args.output)
    series = load_series(args.data, op=args.op, gpus=args.gpus, placement=args.placement)
    for warning in series.warnings:
        A.warn(warning)
    fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus, max_regimes=args.max_regimes)
    quality = compare(fit, series.samples)
    single_fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus, max_regimes=1)
    single = compare(single_fit, series.samples)
    if args.output:
        provenance = dict(series.provenance)
        import datetime as dt

        import commcost
        provenance.setdefault("created", dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        provenance["commcost_version"] = commcost.__version__
        save_profile(Profile.from_fit(fit, quality, provenance), args.output)
    if args.json:
        from commcost.report._json import dump_json

        dump_json(fit_to_dict(fit, quality, series, single, single_fit, args.output))
    else:
        print(render_fit_text(fit, quality, series, single, single_fit, args.output), end="")
    return 0
