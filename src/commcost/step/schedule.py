"""Pipeline schedules: the bubble, and the step of a pipeline of micro-batches.

Symbols: ``p`` stages, ``v`` virtual stages (model chunks) per rank, ``m`` micro-batches per step,
``t_mb`` the time of one micro-batch's forward and backward on one stage (compute and the
communication on its critical path).

* 1F1B (PipeDream-Flush; Narayanan et al. 2021 section 2.2.1): the bubble is ``(p-1) t_mb``,
  a fraction ``(p-1)/m`` of the ideal ``m t_mb``;
* interleaved 1F1B (Narayanan et al. 2021 section 2.2.2): each rank runs ``v`` chunks of
  ``1/v`` the layers, so the fill and drain shrink to ``(p-1) t_mb / v``, a fraction ``(p-1)/(v m)``;
* the pipelined part of the step is ``m t_mb (1 + bubble_fraction)``.

Plain functions of floats (array-safe) so that ``search`` can evaluate them over a grid.
"""

from __future__ import annotations

__all__ = ["bubble_fraction", "bubble_s", "pipeline_s"]


def bubble_fraction(p: float, m: float, v: float = 1.0) -> float:
    """``(p-1)/(v m)``: idle time over ideal time (1F1B when v = 1)."""
    return (p - 1) / (v * m)


def bubble_s(p: float, v: float, t_mb_s: float) -> float:
    """``(p-1) t_mb / v``: the pipeline bubble, seconds."""
    return (p - 1) * t_mb_s / v


def pipeline_s(p: float, m: float, v: float, t_mb_s: float) -> float:
    """``m t_mb (1 + (p-1)/(v m)) = m t_mb + (p-1) t_mb / v``, seconds."""
    return m * t_mb_s + bubble_s(p, v, t_mb_s)
