"""OverlapBounds: the one definition of how much communication can hide behind compute.

Symbols: ``C`` compute of one optimizer step (``k t_c``), ``T`` communication on the wire,
``W`` the window that can actually hide communication, ``t_o`` time after the last collective
that nothing overlaps (optimizer step, serial overhead).

* **no overlap**       ``t_none    = C + T + t_o``
* **perfect overlap**  ``t_perfect = C + max(0, T - W) + t_o``: communication hides only inside
  ``W``; no schedule does better. For data parallelism ``W = f_b t_c``, the last micro-batch's
  backward (under ``no_sync`` the earlier micro-batches issue nothing; gradients exist only once
  backward has produced them).
* **simulated**        a schedule's step (the DDP bucket timeline, :mod:`commcost.step.timeline`),
  between the two: ``t_perfect <= t_sim <= t_none``.

The scaling-analysis seed assumes communication hides behind the *whole* step
(``max(C, T) + t_o``, ``W = C``); :mod:`commcost.analyses.scaling` reproduces that as the seed's
assumption and shows this physical bound beside it. Source of the bracketing:
scaling-book, "roofline" (``max(T_math, T_comms)`` to ``T_math + T_comms``).
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.core.validation import require_finite_positive

__all__ = ["OverlapBounds", "overlap_bounds", "exposed_lower_bound_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlapBounds:
    """One step's time under no overlap, perfect overlap within the window, and a simulation."""

    compute_s: float
    """C: compute of one optimizer step, seconds."""
    comm_s: float
    """T: communication on the wire, seconds."""
    window_s: float
    """W: the part of C that communication can hide behind, seconds (W <= C)."""
    after_s: float = 0.0
    """t_o: time after the last collective that nothing overlaps, seconds."""
    simulated_s: float | None = None
    """A simulated schedule's step, seconds (None: not simulated)."""

    def __post_init__(self) -> None:
        for name in ("compute_s", "comm_s", "window_s", "after_s"):
            require_finite_positive(name, getattr(self, name), allow_zero=True)
        if self.window_s > self.compute_s * (1 + 1e-12):
            raise InputError(f"window_s ({self.window_s:g} s) cannot exceed compute_s ({self.compute_s:g} s)")

    @property
    def no_overlap_s(self) -> float:
        """``C + T + t_o``."""
        return self.compute_s + self.comm_s + self.after_s

    @property
    def perfect_overlap_s(self) -> float:
        """``C + max(0, T - W) + t_o``."""
        return self.compute_s + exposed_lower_bound_s(self.comm_s, self.window_s) + self.after_s

    @property
    def fits(self) -> bool:
        """``T <= W``: perfect overlap hides all of it."""
        return self.comm_s <= self.window_s

    @property
    def simulated_exposed_s(self) -> float | None:
        """``t_sim - C - t_o``: communication the simulated schedule leaves exposed."""
        if self.simulated_s is None:
            return None
        return max(0.0, self.simulated_s - self.compute_s - self.after_s)


def exposed_lower_bound_s(comm_s: float, window_s: float) -> float:
    """``max(0, T - W)``: exposed communication no schedule can avoid, seconds."""
    return max(0.0, comm_s - window_s)


def overlap_bounds(*, compute_s: float, comm_s: float, window_s: float, after_s: float = 0.0,
                   simulated_s: float | None = None) -> OverlapBounds:
    """:class:`OverlapBounds` from its parts (keyword-only, SI)."""
    return OverlapBounds(compute_s=compute_s, comm_s=comm_s, window_s=window_s, after_s=after_s,
                         simulated_s=simulated_s)
