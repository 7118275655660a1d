"""A Link: one tier of the fabric as one rank sees it (the drill's flat model is one Link).

A module of its own so the drill's flat path does not build the two-tier classes of
:mod:`commcost.comm.topology` (which re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError

from commcost.core.units import LATENCY_MAX_S, RATE_MAX_BYTES_PER_S, RATE_MIN_BYTES_PER_S
from commcost.core.validation import require_at_most, require_finite_positive

__all__ = ["Link"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One tier of the fabric, as seen by one rank."""

    bandwidth_bytes_per_s: float
    """Achievable per-rank bandwidth B, bytes per second (one direction)."""
    latency_s: float
    """Per-step latency alpha: the fixed cost of one ring step, seconds."""

    def __post_init__(self) -> None:
        # the CLI's bounds (--bw 1e-6 to 1e6 GB/s, --latency 0 to 10 s): below 1 kB/s a cost overflows
        require_finite_positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        if self.bandwidth_bytes_per_s < RATE_MIN_BYTES_PER_S:
            raise InputError(f"bandwidth_bytes_per_s must be at least {RATE_MIN_BYTES_PER_S:g} (1 kB/s), "
                             f"got {self.bandwidth_bytes_per_s:g}")
        require_at_most("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s, RATE_MAX_BYTES_PER_S, "(1 PB/s)")
        require_finite_positive("latency_s", self.latency_s, allow_zero=True)
        require_at_most("latency_s", self.latency_s, LATENCY_MAX_S)
