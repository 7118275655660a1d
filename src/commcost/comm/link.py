"""A Link: one tier of the fabric as one rank sees it (the drill's flat model is one Link).

A module of its own so the drill's flat path does not build the two-tier classes of
:mod:`commcost.comm.topology` (which re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.validation import require_finite_positive

__all__ = ["Link"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One tier of the fabric, as seen by one rank."""

    bandwidth_bytes_per_s: float
    """Achievable per-rank bandwidth B, bytes per second (one direction)."""
    latency_s: float
    """Per-step latency alpha: the fixed cost of one ring step, seconds."""

    def __post_init__(self) -> None:
        require_finite_positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        require_finite_positive("latency_s", self.latency_s, allow_zero=True)
