"""Measured compute, communication, overlap and idle time per rank and per step.

Symbols, for one rank (sets of moments, measured once however many streams or nested
events cover them: :mod:`commcost.trace.intervals`):

* ``K`` compute intervals, ``M`` communication intervals, ``A`` all device intervals
  (compute, communication, memory, other); ``U(.)`` their unions, ``|.|`` the measure.
* compute ``T_comp = |U(K)|``; communication ``T_comm = |U(M)|`` (per collective
  ``|U(M_op)|``, which may sum to more than ``T_comm`` when two run at once);
* overlap ``T_ov = |U(M) \\cap U(K)|``; exposed communication ``E = T_comm - T_ov``
  (communication with no compute running); overlap percentage ``100 T_ov / T_comm``
  (HTA ``get_comm_comp_overlap``: "the share of communication kernel time during which a
  compute kernel also runs"; None when ``T_comm = 0``);
* span ``W = max(end) - min(start)`` over ``A``; idle ``I = W - |U(A)|`` (HTA
  ``get_temporal_breakdown``: ``kernel_time`` and ``idle_time``); HTA's
  ``non_compute_time`` is ``W - T_comp - I``.

**Which events count** (HTA's rule, ``Trace._filter_irrelevant_gpu_kernels``): with two
or more ProfilerStep numbers the rank totals count the events *launched* (CUDA runtime
event with the same correlation; in a CPU trace, the event itself) before the last
ProfilerStep starts -- the profiler usually stops inside the last step -- and a GPU event
whose launch is not in the trace is left out (when the trace records no launch at all, each
event's own start stands in for it); with fewer steps every event counts.
Per step, an event belongs to the ProfilerStep whose CPU window holds its launch (its
own start when the launch is missing); the step's duration is the CPU annotation's.

**Across ranks**: for each step number every rank recorded, spread ``max_r d_r - min_r d_r``
of the step durations; the slowest rank has the largest mean duration over those steps.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass

from commcost.trace import classify as C
from commcost.trace.intervals import intersect, measure, union
from commcost.trace.load import RankTrace
from commcost.trace.collectives import timed_calls

__all__ = ["Breakdown", "StepSummary", "RankSummary", "StepSpread", "Stragglers", "breakdown", "analyze_rank",
           "stragglers", "activities", "counted_activities", "steps_in_window"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakdown:
    """The measures of one set of events (module docstring for the symbols)."""

    compute_s: float
    """``T_comp = |U(K)|``, seconds."""
    communication_s: float
    """``T_comm = |U(M)|``, seconds."""
    communication_by_op_s: dict[str, float]
    """``|U(M_op)|`` per collective (``unknown`` for kernels whose name names none), seconds."""
    overlap_s: float
    """``T_ov = |U(M) ∩ U(K)|``, seconds."""
    exposed_communication_s: float
    """``E = T_comm - T_ov``, seconds."""
    overlap_pct: float | None
    """``100 T_ov / T_comm``; None without communication."""
    span_s: float
    """``W``: first start to last end of all device events, seconds (0 when there are none)."""
    idle_s: float
    """``I = W - |U(A)|``, seconds."""
    other_s: float
    """``W - T_comp - I`` (HTA's non_compute_time: communication, memory and other not under compute), seconds."""
    events: int
    """Events counted."""


def split_by_kind(acts) -> tuple[list, list, list, dict[str, list]]:
    """``(compute, communication, every, communication by op)`` intervals of ``acts``: iterable of
    ``(start_s, end_s, kind, op)``."""
    comp, comm, every = [], [], []
    by_op: dict[str, list] = {}
    for s, e, kind, op in acts:
        every.append((s, e))
        if kind == C.COMPUTE:
            comp.append((s, e))
        elif kind == C.COMMUNICATION:
            comm.append((s, e))
            by_op.setdefault(op.value if op is not None else "unknown", []).append((s, e))
    return comp, comm, every, by_op


def breakdown(acts) -> Breakdown:
    """The :class:`Breakdown` of ``acts``: iterable of ``(start_s, end_s, kind, op)``."""
    comp, comm, every, by_op = split_by_kind(acts)
    n = len(every)
    u_comp, u_comm, u_all = union(comp), union(comm), union(every)
    t_comp, t_comm = measure(u_comp), measure(u_comm)
    t_ov = measure(intersect(u_comm, u_comp))
    span = (u_all[-1][1] - u_all[0][0]) if u_all else 0.0
    idle = max(0.0, span - measure(u_all))
    return Breakdown(compute_s=t_comp, communication_s=t_comm,
                     communication_by_op_s={k: measure(union(v)) for k, v in sorted(by_op.items())},
                     overlap_s=t_ov, exposed_communication_s=max(0.0, t_comm - t_ov),
                     overlap_pct=100.0 * t_ov / t_comm if t_comm > 0 else None,
                     span_s=span, idle_s=idle, other_s=max(0.0, span - t_comp - idle), events=n)


def activities(rt: RankTrace, kernel_ops: dict | None = None) -> list[tuple[float, float, str, object, float | None]]:
    """``(start_s, end_s, kind, op, launch_s)`` of every device event of ``rt`` (CPU-only rules
    when it has no GPU event); ``launch_s`` None when the launch is not in the trace. A communication kernel's
    ``op`` is the op of the call that launched it (``kernel_ops``, :func:`commcost.trace.collectives.timed_calls`;
    computed here when not given), else what its kernel name says: one name per collective in every section."""
    if rt.on_gpu:
        if kernel_ops is None:
            kernel_ops = {}
            timed_calls(rt, kernel_ops=kernel_ops)
        out = []
        for g in rt.gpu_events:
            launch = rt.launches.get(g.correlation)
            out.append((g.start_s, g.end_s, g.kind, kernel_ops.get(g.correlation, g.op),
                        launch[0] if launch is not None else None))
        return out
    out = [(s, e, C.COMPUTE, None, s) for s, e, _ in rt.cpu_ops]
    for c in rt.comm_calls:
        if C.is_cpu_comm(c.name):
            out.append((c.start_s, c.end_s, C.COMMUNICATION, C.collective_from_trace_name(c.name.split(":", 1)[1]),
                        c.start_s))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSummary:
    """One ProfilerStep of one rank."""

    step: int
    """N of ProfilerStep#N."""
    duration_s: float
    """The CPU annotation's duration, seconds."""
    breakdown: Breakdown
    """The events launched inside the step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankSummary:
    """One rank's trace, measured."""

    rank: int
    """The rank (distributedInfo.rank)."""
    path: str
    """Its trace file."""
    device: str
    """``gpu`` (kernels) or ``cpu`` (a CPU-only trace: cpu ops and gloo annotations)."""
    total: Breakdown
    """The events counted by HTA's rule (module docstring)."""
    window: str
    """Which events ``total`` counts, in words."""
    steps: tuple[StepSummary, ...]
    """Each ProfilerStep, in order (empty when the trace has none)."""


def _attribute(acts, steps) -> dict[int, list]:
    starts = [s.start_s for s in steps]
    per: dict[int, list] = {i: [] for i in range(len(steps))}
    for a in acts:
        t = a[4] if a[4] is not None else a[0]
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t < steps[i].end_s:
            per[i].append(a)
    return per


def counted_activities(rt: RankTrace, kernel_ops: dict | None = None) -> tuple[list, list, str]:
    """``(acts, counted, window)``: every device event of ``rt`` (:func:`activities`, with ``kernel_ops``), the ones
    the rank's totals count by HTA's rule (module docstring, **Which events count**) as
    ``(start_s, end_s, kind, op)``, and that rule in words."""
    acts = activities(rt, kernel_ops)
    numbers = {s.number for s in rt.steps}
    if len(numbers) >= 2:
        last = max(s.start_s for s in rt.steps)
        if acts and all(a[4] is None for a in acts):
            # no launch recorded at all (a trace exported without runtime events): by start instead
            acts = [(*a[:4], a[0]) for a in acts]
        counted = [a[:4] for a in acts if a[4] is not None and a[4] < last]
        window = (f"events launched before the last ProfilerStep (#{max(rt.steps, key=lambda s: s.start_s).number}) "
                  f"starts ({len(counted)} of {len(acts)})")
    else:
        counted = [a[:4] for a in acts]
        window = ("every event (one ProfilerStep)" if numbers else "every event (no ProfilerStep annotations)")
    return acts, counted, window


def steps_in_window(r: RankSummary) -> float:
    """``n``: how many steps the rank's totals cover. With two or more ProfilerStep numbers the
    totals count what was launched before the last step starts: ``n = N_steps - 1``. With one, they
    count every event, over the span ``W``: ``n = max(1, W / d)`` with ``d`` that step's duration
    (a trace that annotates one step of several). With none, 1 (the traced window)."""
    numbers = {s.step for s in r.steps}
    if len(numbers) >= 2:
        return float(len(r.steps) - 1)
    if r.steps and r.steps[0].duration_s > 0:
        return max(1.0, r.total.span_s / statistics.fmean(s.duration_s for s in r.steps))
    return 1.0


def analyze_rank(rt: RankTrace, *, counted: tuple[list, list, str] | None = None) -> RankSummary:
    """Measure one rank: totals by HTA's rule and each ProfilerStep (``counted``: what
    :func:`counted_activities` returned for ``rt``, when the caller has it already)."""
    acts, counted_acts, window = counted if counted is not None else counted_activities(rt)
    per = _attribute(acts, rt.steps)
    steps = tuple(StepSummary(step=s.number, duration_s=s.end_s - s.start_s,
                              breakdown=breakdown(a[:4] for a in per[i])) for i, s in enumerate(rt.steps))
    return RankSummary(rank=rt.rank, path=rt.path, device="gpu" if rt.on_gpu else "cpu",
                       total=breakdown(counted_acts), window=window, steps=steps)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpread:
    """One step number across the ranks that recorded it."""

    step: int
    """N of ProfilerStep#N."""
    min_s: float
    """Fastest rank's duration, seconds."""
    max_s: float
    """Slowest rank's duration, seconds."""
    slowest_rank: int
    """The rank with ``max_s``."""

    @property
    def spread_s(self) -> float:
        """``max_s - min_s``."""
        return self.max_s - self.min_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Stragglers:
    """Step-time spread across ranks (module docstring)."""

    steps: tuple[StepSpread, ...]
    """Each step number every rank recorded."""
    mean_step_s: dict[int, float]
    """Rank -> mean duration over those steps, seconds."""
    slowest_rank: int | None
    """The rank with the largest mean (None without a common step)."""


def stragglers(ranks: list[RankSummary]) -> Stragglers:
    """Spread of the step durations over the step numbers all ``ranks`` recorded."""
    per_rank = [{s.step: s.duration_s for s in r.steps} for r in ranks]
    common = sorted(set.intersection(*(set(d) for d in per_rank))) if per_rank else []
    spreads = []
    for n in common:
        d = [(pr[n], r.rank) for pr, r in zip(per_rank, ranks)]
        spreads.append(StepSpread(step=n, min_s=min(d)[0], max_s=max(d)[0], slowest_rank=max(d)[1]))
    means = {r.rank: statistics.fmean(pr[n] for n in common) for pr, r in zip(per_rank, ranks)} if common else {}
    slowest = max(means, key=lambda k: means[k]) if means else None
    return Stragglers(steps=tuple(spreads), mean_step_s=means, slowest_rank=slowest)
