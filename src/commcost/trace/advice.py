"""What to change, from a trace: each item with the time per step it could win at most.

Three kinds, each from figures the summary already holds (nothing measured twice). With ``n_r``
the steps rank ``r``'s totals cover (:func:`commcost.trace.analysis.steps_in_window`; 1 without
ProfilerSteps: then "per step" is per traced window) and ``mean_r`` the mean over the traced ranks:

* **idle** -- the device runs nothing: ``gain_s = mean_r I_r / n_r``. What it points at, from
  the gaps between busy intervals (:data:`commcost.trace.parallel.SHORT_GAP_S`): mostly short gaps
  means the GPU waits for kernel launches (fewer, larger kernels: CUDA graphs, torch.compile,
  a larger micro-batch); mostly long gaps means it waits on the host (data loading, CPU work
  between steps, a synchronisation such as ``.item()``).
* **exposed communication** -- communication with no compute to hide behind, the part that moves
  data: ``gain_s = mean_r M_r / n_r`` with ``M_r`` the rank's ``exposed_moving_s``
  (:mod:`commcost.trace.cross_rank`; all of its exposed communication with one rank traced). The
  collective named is the one with the largest ``mean_r |U(M_op) \\ U(K)|``; overlapping it
  or shrinking it, by the means that op allows (:data:`HOW_BY_OP`: bucketing for all-reduce and
  reduce-scatter, prefetch for all-gather, dispatch overlap for all-to-all), wins at most this.
* **stragglers** -- exposed time spent waiting for a late rank: ``gain_s = mean_r W_r / n_r`` with
  ``W_r`` the rank's ``exposed_waiting_s``; the rank named is the one that arrived last at the most
  collective instances (ties: the larger sum of those instances' skews), and the step-time spread
  says how much slower the slowest rank's steps are.

Items are sorted by ``gain_s``, largest first; an item whose gain is under :data:`MIN_GAIN_S` is
left out. The gains are
upper bounds and overlap one another (removing the wait may expose compute), so they do not add.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from commcost.trace.analysis import steps_in_window
from commcost.core.units import MS

__all__ = ["Advice", "trace_advice", "MIN_GAIN_S"]

MIN_GAIN_S = 1e-6
"""Gains under this (1 us per step, the timestamps' resolution) are not advice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Advice:
    """One change the trace points at."""

    what: str
    """The change, in a few words."""
    why: str
    """The measurement behind it."""
    gain_s: float
    """The time per step it could win at most (module docstring), seconds."""
    kind: str
    """``idle``, ``exposed_communication`` or ``stragglers``."""


HOW_BY_OP = {
    "all_reduce": "gradient buckets sized to hide behind backward, fewer bytes, a faster fabric",
    "reduce_scatter": "gradient buckets sized to hide behind backward, fewer bytes, a faster fabric",
    "all_gather": "prefetch the next gather during compute, fewer bytes, a faster fabric",
    "all_to_all": "overlap the expert dispatch with compute, keep the expert group inside a node, fewer bytes "
                  "(fp8 dispatch, a lower capacity factor)",
    "send_recv": "an interleaved pipeline schedule that hides the stage sends, fewer bytes",
    "broadcast": "fewer or smaller broadcasts, overlapped with compute",
}
"""How each op's exposed time is won back: bucketing only for the ops a DDP/FSDP bucket carries (all-reduce,
reduce-scatter); prefetch for gathers; the dispatch overlap and placement of expert parallelism for all-to-all
(Megatron-Core's MoE all-to-all overlap); the schedule for pipeline sends."""
HOW_OTHER = "overlap it with compute, fewer bytes, a faster fabric"


def _ms(t_s: float) -> str:
    return f"{t_s / MS:,.2f} ms"


def trace_advice(s) -> tuple[Advice, ...]:
    """The advice for a :class:`commcost.trace.summary.TraceSummary` (module docstring)."""
    if not s.ranks or not s.details:
        return ()
    n = {r.rank: steps_in_window(r) for r in s.ranks}
    out: list[Advice] = []

    idle = statistics.fmean(r.total.idle_s / n[r.rank] for r in s.ranks)
    span = statistics.fmean(r.total.span_s / n[r.rank] for r in s.ranks)
    if idle >= MIN_GAIN_S:
        short = sum(d.launch_gaps_s for d in s.details)
        long = sum(d.host_gaps_s for d in s.details)
        share = 100 * idle / span if span > 0 else 0.0
        if short > long:
            what = "launch fewer, larger kernels (CUDA graphs, torch.compile, a larger micro-batch)"
            points = f"{100 * short / (short + long):.0f}% of it in gaps under 100 us: the GPU waits for launches"
        else:
            what = "find what the host does between kernels (data loading, CPU work, a synchronisation)"
            points = (f"{100 * long / (short + long):.0f}% of it in gaps of 100 us or more: the GPU waits on the "
                      "host")
        out.append(Advice(kind="idle", what=what, gain_s=idle,
                          why=f"the device is idle {_ms(idle)} per step ({share:.0f}% of the span); {points}"))

    cross = {w.rank: w for w in s.cross.per_rank} if s.cross is not None else {}
    moving = statistics.fmean((cross[r.rank].exposed_moving_s if r.rank in cross
                               else r.total.exposed_communication_s) / n[r.rank] for r in s.ranks)
    if moving >= MIN_GAIN_S:
        ops: dict[str, float] = {}
        for d in s.details:
            for op, t in d.exposed_by_op_s.items():
                ops[op] = ops.get(op, 0.0) + t / n[d.rank] / len(s.details)
        top = max(sorted(ops), key=lambda k: ops[k]) if ops else "unknown"
        out.append(Advice(kind="exposed_communication", gain_s=moving,
                          what=f"overlap or shrink {top} ({HOW_BY_OP.get(top, HOW_OTHER)})",
                          why=(f"{_ms(moving)} per step of communication moves data with no compute beside it; "
                               f"{top} is the most exposed collective ({_ms(ops.get(top, 0.0))} per step, "
                               "waits included)")))

    if s.cross is not None:
        waiting = statistics.fmean(cross[r.rank].exposed_waiting_s / n[r.rank] for r in s.ranks)
        if waiting >= MIN_GAIN_S and any(w.straggler_count for w in s.cross.per_rank):
            caused: dict[int, float] = {}
            for inst in s.cross.instances:
                if inst.straggler_rank is not None:
                    caused[inst.straggler_rank] = caused.get(inst.straggler_rank, 0.0) + inst.skew_s
            late = max(s.cross.per_rank, key=lambda w: (w.straggler_count, caused.get(w.rank, 0.0), -w.rank))
            total = len(s.cross.instances)
            spread = ""
            st = s.stragglers
            if st.slowest_rank is not None and st.mean_step_s:
                fast = min(st.mean_step_s.values())
                spread = (f"; rank {st.slowest_rank}'s mean step is {_ms(st.mean_step_s[st.slowest_rank] - fast)} "
                          "longer than the fastest rank's")
            out.append(Advice(kind="stragglers", gain_s=waiting,
                              what=f"find why rank {late.rank} arrives late (its data, its host, its GPU)",
                              why=(f"ranks wait {_ms(waiting)} per step, exposed, for the last rank to arrive; "
                                   f"rank {late.rank} arrived last at {late.straggler_count} of {total} "
                                   f"collectives{spread}")))
    return tuple(sorted(out, key=lambda a: -a.gain_s))
