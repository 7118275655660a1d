"""Preset data files (JSON) packaged with commcost, and their loader.

Presets are data (STYLE.md, convention 6): each number carries its unit in its
key and a ``source``. Files live beside this module; look-ups are by exact key.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from commcost.core.errors import InputError

__all__ = ["load_preset_file", "lookup"]


def load_preset_file(name: str) -> dict[str, Any]:
    """Parse the packaged preset file ``name`` (e.g. ``"scaling_seed.json"``)."""
    try:
        text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no preset file {name!r} in commcost.hardware") from None
    return json.loads(text)


def lookup(table: dict[str, Any], key: str, what: str) -> Any:
    """``table[key]`` by exact key; an unknown key lists the valid ones."""
    try:
        return table[key]
    except KeyError:
        valid = ", ".join(sorted(table))
        raise InputError(f"unknown {what} {key!r} (valid: {valid})") from None
