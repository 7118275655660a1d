"""The shared validators: every library check of a number goes through one of these.

Each raises :class:`commcost.core.errors.InputError` with a message that names the quantity and
shows the value, so the CLI can print it as the one line of a bad-input error (exit 2).
"""

from __future__ import annotations

import math

from commcost.core.errors import InputError

__all__ = ["require_finite_positive", "require_count", "require_fraction", "require_efficiency", "require_at_most",
           "EFFICIENCY_MIN"]

EFFICIENCY_MIN = 1e-3
"""Lowest compute efficiency (fraction of peak) accepted: 0.1% of peak is far below any real run (published
MFUs are 20-60%); below it a step overflows to no meaningful number."""


def require_finite_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise :class:`InputError` unless ``value`` is finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name} must be a number, got {value!r}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        finite = False
    if not finite:
        raise InputError(f"{name} must be finite, got {value if isinstance(value, float) else 'a huge integer'}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(f"{name} must be {bound}, got {value:g}")


def require_count(name: str, value: int, *, minimum: int = 1) -> None:
    """Raise :class:`InputError` unless ``value`` is an integer >= ``minimum`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")


def require_fraction(name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise :class:`InputError` unless ``value`` is in (0, 1] (or [0, 1] with ``allow_zero``)."""
    require_finite_positive(name, value, allow_zero=allow_zero)
    if value > 1:
        raise InputError(f"{name} must be in {'[0' if allow_zero else '(0'}, 1], got {value:g}")


def require_efficiency(value: float) -> None:
    """Raise :class:`InputError` unless the compute efficiency ``value`` is in [:data:`EFFICIENCY_MIN`, 1]."""
    require_finite_positive("efficiency", value)
    if not EFFICIENCY_MIN <= value <= 1:
        raise InputError(f"efficiency is a fraction of peak, between {EFFICIENCY_MIN:g} and 1, got {value:g}")


def require_at_most(name: str, value: float, maximum: float, unit: str = "") -> None:
    """Raise :class:`InputError` if ``value`` (already checked as a number) exceeds ``maximum``
    (:mod:`commcost.core.limits`), naming both."""
    if value > maximum:
        shown = f"{value:,}" if isinstance(value, int) and value < 10**30 else (
            f"{value:.4g}" if isinstance(value, float) else f"an integer of {len(str(value))} digits")
        bound = f"{maximum:,}" if isinstance(maximum, int) else f"{maximum:g}"
        raise InputError(f"{name} must be at most {bound}{' ' + unit if unit else ''}, got {shown}")
