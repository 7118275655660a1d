"""``commcost presets``: the GPUs, fabrics and systems commcost knows, with sources."""

from __future__ import annotations

import argparse

__all__ = ["HELP", "add_arguments", "run"]

HELP = "list the known GPUs, fabrics and systems, with their numbers and sources"

EXAMPLES = (
    '',
    '--json',
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the presets flags to ``p``."""
    p.add_argument("--kind", choices=("gpu", "fabric", "system"), help="list only this kind")
    p.add_argument("--json", action="store_true", help="print the preset tables as one JSON object (SI units)")


def run(args: argparse.Namespace) -> int:
    """List the presets."""
    from commcost.presets import fabrics, gpus, preset_entries, systems
    from commcost.report.collective import render_presets_text

    if args.json:
        tables = {"gpu": gpus(), "fabric": fabrics(), "system": systems()}
        out = {k: v for k, v in tables.items() if args.kind in (None, k)}
        from commcost.report._json import dump_json

        dump_json(out)
        return 0
    entries = [e for e in preset_entries() if args.kind in (None, e.kind)]
    print(render_presets_text(entries))
    return 0
