"""Interval arithmetic on half-open time intervals ``[start_s, end_s)``, seconds.

A trace's kernels overlap in three ways that a plain sum of durations gets wrong:
kernels on two streams running at once, kernels nested inside a kernel-like
annotation, and a communication kernel running beside a compute kernel. Every
quantity :mod:`commcost.trace.analysis` reports is a measure ``|.|`` of one of
these sets:

* union ``U(A) = \\bigcup_i [s_i, e_i)``, measured once however many intervals
  cover a moment (so two streams busy at once count once, a nested kernel adds nothing);
* intersection ``A \\cap B`` of two unions;
* difference ``A \\setminus B`` (``|A \\setminus B| = |A| - |A \\cap B|``);
* clipping to a window ``[w_0, w_1)`` (one ProfilerStep).

Intervals are plain ``(start_s, end_s)`` tuples of floats; a *union* is a sorted
list of disjoint, non-touching intervals, which every function here returns and
the two-set functions take.
"""

from __future__ import annotations

__all__ = ["union", "measure", "intersect", "subtract", "clip"]

Interval = tuple[float, float]


def union(intervals) -> list[Interval]:
    """``U(A)``: the sorted disjoint intervals covering exactly the moments some interval covers.

    Empty intervals (``end <= start``) cover nothing and are dropped; touching intervals merge.
    Sweep over the intervals sorted by start: O(n log n).
    """
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def measure(u: list[Interval]) -> float:
    """``|U| = sum_i (e_i - s_i)`` of a union (disjoint intervals), seconds."""
    return sum(e - s for s, e in u)


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """``A \\cap B`` of two unions, by a two-pointer merge: O(|A| + |B|)."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """``A \\setminus B`` of two unions: the moments of ``A`` that ``B`` does not cover."""
    out: list[Interval] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def clip(u: list[Interval], start_s: float, end_s: float) -> list[Interval]:
    """``U \\cap [start_s, end_s)`` of a union."""
    return intersect(u, [(start_s, end_s)] if end_s > start_s else [])
