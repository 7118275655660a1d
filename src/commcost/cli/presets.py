"""``commcost presets``: the GPUs, fabrics, systems and models commcost knows, with sources."""

from __future__ import annotations

import argparse
from commcost.cli.inputs import presets_request
from commcost.hardware import load_preset_file
from commcost.hardware.registry import PresetEntry
from commcost.hardware.registry import fabrics
from commcost.hardware.registry import gpus
from commcost.hardware.registry import preset_entries
from commcost.hardware.registry import systems
from commcost.report._json import dump_json
from commcost.report.collective import render_presets_text
from commcost.workload.shape import MODEL_ALIASES
from commcost.workload.transformer import model_spec
from commcost.workload.transformer import model_spec_names

__all__ = ["HELP", "add_arguments", "run", "model_entries"]

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


def _aliases() -> dict[str, list[str]]:
    """Registry name -> the other names ``--model`` accepts for it (:data:`commcost.workload.shape.MODEL_ALIASES`)."""

    out: dict[str, list[str]] = {}
    for alias, name in MODEL_ALIASES.items():
        out.setdefault(name, []).append(alias)
    return out


def model_entries() -> list:
    """Every model of ``hardware/models.json`` as a :class:`commcost.hardware.registry.PresetEntry` (kind ``model``):
    parameters, shape, training sequence, aliases, and whether ``budget``/``timeline`` can lay it out."""

    table, aliases = load_preset_file("models.json"), _aliases()
    out = []
    for name in model_spec_names():
        spec, row = model_spec(name), table[name]
        size = (f"{spec.params / 1e9:,.4g}B params ({spec.active_params / 1e9:,.3g}B active, {row['experts']} experts)"
                if spec.is_moe else f"{spec.params / 1e9:,.4g}B params")
        also = aliases.get(name)
        where = "plan, search, budget, timeline" if row.get("timeline", True) else "plan, search"
        out.append(PresetEntry(kind="model", name=name, source=row["source"], summary=(
            f"{size}, {row['layers']} layers, hidden {row['hidden']}, {row['heads']} heads, seq {row['seq_tokens']}"
            f"; --model in {where}" + (f"; budget/timeline/scaling also take {', '.join(also)}" if also else ""))))
    return out


def run(args: argparse.Namespace) -> int:
    """List the presets (:func:`commcost.cli.inputs.presets_request`)."""
    req = presets_request(args)
    if req.json:
        aliases = _aliases()
        models = {k: {**v, "aliases": aliases.get(k, [])} for k, v in load_preset_file("models.json").items()
                  if not k.startswith("_")}
        tables = {"gpu": gpus(), "fabric": fabrics(), "system": systems(), "model": models}
        dump_json({k: v for k, v in tables.items() if req.kind in (None, k)})
        return 0
    entries = [e for e in [*preset_entries(), *model_entries()] if req.kind in (None, e.kind)]
    print(render_presets_text(entries))
    return 0
