"""The words every report uses for the measured band (:mod:`commcost.comm.band`).

One wording, so ``collective``, ``budget``, ``timeline`` and ``plan`` say the same thing: the
range, "on measured clusters of this class", and, where the range does not contain the
prediction (a class whose ratios are both above or both below 1, as the two-tier model's
multi-rack NVL72 class was), which side it lies on, so no line reads as if the band brackets the point.
"""

from __future__ import annotations

from commcost.core.units import format_seconds as t

__all__ = ["band_range", "band_side"]


def band_range(low_s: float, high_s: float) -> str:
    """``9.40 ms - 14.00 ms``."""
    return f"{t(low_s)} - {t(high_s)}"


def band_side(point_s: float, low_s: float, high_s: float, *, brief: bool = False) -> str:
    """``""`` when ``low <= point <= high``; else which side of the prediction the band lies on
    (``brief``: a short parenthesis for a quantity whose headline line already said why)."""
    if low_s > point_s:
        return (f" (above the prediction {t(point_s)})" if brief else
                f"; all above the prediction {t(point_s)}, which is a lower bound for this class")
    if high_s < point_s:
        return f" (below the prediction {t(point_s)})" if brief else f"; all below the prediction {t(point_s)}"
    return ""
