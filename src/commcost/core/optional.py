"""Lazy imports of optional extras (numpy, matplotlib, torch), with a one-line install hint when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from commcost.core.errors import InputError

__all__ = ["require", "pyplot"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`InputError` naming ``pip install 'commcost[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise InputError(f"{top} is not installed; install it with: pip install 'commcost[{extra}]'") from None


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the non-interactive Agg backend."""
    mpl = require("matplotlib", "plot")
    mpl.use("Agg")
    return require("matplotlib.pyplot", "plot")
