"""``commcost presets``: the GPUs, fabrics, systems and models commcost knows, with sources."""

from __future__ import annotations

import argparse
from commcost.cli.inputs_comm import presets_request
from commcost.hardware.registry import preset_entries
from commcost.core.strict_json import dump_json
from commcost.report.collective import render_presets_text
from commcost.report.presets import model_entries
from commcost.report.presets import presets_to_dict

__all__ = ["HELP", "add_arguments", "run"]

HELP = "list the known GPUs, fabrics, systems and models, with their numbers and sources"

EXAMPLES = (
    '',
    '--kind model',
    '--json',
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the presets flags to ``p``."""
    p.add_argument("--kind", choices=("gpu", "fabric", "system", "model"), help="list only this kind")
    p.add_argument("--json", action="store_true", help="print the preset tables as one JSON object (SI units)")


def run(args: argparse.Namespace) -> int:
    """List the presets (:func:`commcost.cli.inputs_comm.presets_request`)."""
    req = presets_request(args)
    if req.json:
        dump_json(presets_to_dict(req.kind))
        return 0
    entries = [e for e in [*preset_entries(), *model_entries()] if req.kind in (None, e.kind)]
    print(render_presets_text(entries))
    return 0
