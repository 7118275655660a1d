"""Preset data files (JSON) packaged with commcost, and their loader.

Presets are data (STYLE.md, convention 6): each number carries its unit in its
key and a ``source``. Files live beside this module; look-ups are by exact key.
"""

from __future__ import annotations

import json
import os
from typing import Any

from commcost.core.errors import InputError

__all__ = ["load_preset_file", "lookup"]


_HERE = os.path.dirname(os.path.abspath(__file__))
"""The directory the preset files sit in (beside this module)."""


def load_preset_file(name: str) -> dict[str, Any]:
    """Parse the packaged preset file ``name`` (e.g. ``"scaling_seed.json"``): a fresh object on every
    call, which the caller may change. The modules that read a file on a hot path keep the parse in a
    cache of their own (``functools.lru_cache``; e.g. :func:`commcost.hardware.registry.gpus`), cleared
    with :func:`commcost.hardware.registry.clear_preset_caches`.

    The file is read straight from beside this module; only a package that is not a directory on disk
    (a zip) goes through ``importlib.resources``, which is not imported otherwise (it costs about a
    tenth of ``commcost plan``'s start-up)."""
    try:
        with open(os.path.join(_HERE, name), encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        from importlib import resources

        try:
            text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            raise InputError(f"no preset file {name!r} in commcost.hardware") from None
    return json.loads(text)


def lookup(table: dict[str, Any], key: str, what: str) -> Any:
    """``table[key]`` by exact key; an unknown key lists the valid ones."""
    try:
        return table[key]
    except KeyError:
        valid = ", ".join(sorted(table))
        raise InputError(f"unknown {what} {key!r} (valid: {valid})") from None
