"""Tick and label text for the plots: sizes and times a reader can read at any scale.

Every plot keeps its data in SI (bytes, seconds) or in one named unit, and turns it
into text here, through the :mod:`commcost.core.units` formatters: "2.38 GiB" and
"550 MiB", never "2.44e+03 MiB". No matplotlib import at module level.
"""

from __future__ import annotations

import math

from commcost.core.units import MS, US, GiB, KiB, MiB, TiB, format_seconds

__all__ = ["size_text", "time_text", "time_unit", "pow2_ticks", "decade_ticks", "linear_size_ticks"]

_BINARY = ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"))


def _binary_unit(n_bytes: float) -> tuple[float, str]:
    """The unit :func:`commcost.core.units.format_bytes` (``binary=True``) picks for ``n_bytes``."""
    return next(((f, name) for f, name in _BINARY if abs(n_bytes) >= f), (1.0, "B"))


def size_text(n_bytes: float) -> str:
    """A byte count in binary units to three significant digits, trailing zeros dropped:
    ``1 MiB``, ``25 MiB``, ``3.55 MiB``, ``2.38 GiB``, ``550 MiB``, ``1,023 MiB``."""
    factor, unit = _binary_unit(n_bytes)
    v = n_bytes / factor
    number = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def linear_size_ticks(hi_bytes: float, *, max_ticks: int = 6) -> list[float]:
    """Ticks ``0, s, 2s, ...`` up to ``hi_bytes`` with ``s`` a round number of the binary unit of
    ``hi_bytes`` (1, 2, 2.5 or 5 times a power of ten), so the labels read ``0, 1 GiB, 2 GiB``."""
    factor, _ = _binary_unit(hi_bytes)
    top = hi_bytes / factor
    for step in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if top / step <= max_ticks - 1:
            break
    return [k * step * factor for k in range(int(top / step + 1e-9) + 1)]


def time_text(t_s: float) -> str:
    """A time with its unit (:func:`commcost.core.units.format_seconds`), trailing zeros dropped: ``10 us``, ``1 ms``."""
    text = format_seconds(t_s)
    number, unit = text.split(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def time_unit(span_s: float) -> tuple[float, str]:
    """``(seconds per unit, name)`` for an axis spanning ``span_s``: s from 5 s, ms from 5 ms, else us."""
    if span_s >= 5.0:
        return 1.0, "s"
    if span_s >= 5 * MS:
        return MS, "ms"
    return US, "us"


def pow2_ticks(lo: float, hi: float, *, max_ticks: int = 9) -> list[float]:
    """Powers of two covering ``[lo, hi]``, every ``k``-th octave so at most ``max_ticks`` remain.

    ``k`` is taken from 1, 2, 5, 10, 20 and the exponents are multiples of it, so with
    ``k = 10`` the ticks fall on 1 KiB, 1 MiB, 1 GiB.
    """
    e_lo, e_hi = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    for k in (1, 2, 5, 10, 20, 40):
        first = math.floor(e_lo / k) * k
        exps = list(range(first, e_hi + k, k))
        inside = [e for e in exps if lo <= 2.0 ** e <= hi]
        if len(inside) <= max_ticks:
            return [2.0 ** e for e in (inside if len(inside) >= 2 else exps)]
    return [2.0 ** e_lo, 2.0 ** e_hi]


def decade_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering ``[lo, hi]`` (one below and one above included)."""
    return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
