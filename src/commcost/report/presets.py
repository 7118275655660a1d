"""The registry as ``commcost presets`` lists it: every model's line (with its aliases) and the JSON tables."""

from __future__ import annotations

from commcost.hardware.registry import PresetEntry
from commcost.hardware.registry import fabrics
from commcost.hardware.registry import gpus
from commcost.hardware.registry import systems
from commcost.hardware.registry import MODEL_ALIASES
from commcost.hardware.registry import models as model_rows
from commcost.workload.transformer import model_spec
from commcost.workload.transformer import model_spec_names

__all__ = ["model_entries", "presets_to_dict"]


def _aliases() -> dict[str, list[str]]:
    """Registry name -> the other names ``--model`` accepts for it (:data:`commcost.hardware.registry.MODEL_ALIASES`)."""

    out: dict[str, list[str]] = {}
    for alias, name in MODEL_ALIASES.items():
        out.setdefault(name, []).append(alias)
    return out


def model_entries() -> list:
    """Every model of ``hardware/models.json`` as a :class:`commcost.hardware.registry.PresetEntry` (kind ``model``):
    parameters, shape, training sequence, aliases, and whether ``budget``/``timeline`` can lay it out."""

    table, aliases = model_rows(), _aliases()
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


def presets_to_dict(kind: str | None = None) -> dict:
    """``commcost presets --json``: the GPU, fabric, system and model tables (each model with its aliases),
    or only ``kind``'s."""
    aliases = _aliases()
    models = {k: {**v, "aliases": aliases.get(k, [])} for k, v in model_rows().items()}
    tables = {"gpu": gpus(), "fabric": fabrics(), "system": systems(), "model": models}
    return {k: v for k, v in tables.items() if kind in (None, k)}
