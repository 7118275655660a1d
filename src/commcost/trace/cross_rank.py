"""Across ranks: clock offsets, and each collective's time split into waiting and transfer.

A collective's kernel starts on a rank when that rank arrives and ends when the data has
moved, which needs every rank of the group: a rank that arrives early waits inside its kernel
for the last one. So one rank's kernel time is ``wait + transfer``, and only the transfer is
what a communication model prices.

**Instances.** Every rank of a communicator issues its collectives in the same order (NCCL
requires it), so the ``k``-th call of collective ``op`` on communicator ``c`` is one instance
on every rank that recorded it (:attr:`commcost.trace.collectives.TimedCall.comm`); an
instance recorded on fewer than two of the traced ranks is not compared.

**Clocks.** Each rank's times are seconds after its own origin ``o_r`` (whole microseconds of
its clock); ranks on different hosts have clocks that disagree. Rank ``r``'s clock reads
``delta_r`` ahead of the reference rank's (the lowest traced rank, ``delta = 0``). All ranks leave a
blocking collective (all_reduce, all_gather, reduce_scatter, all_to_all: every output needs
every input) together, within microseconds, so for such an instance ``i`` holding ranks ``r``
and already-aligned ranks ``q``, with ``e`` a kernel's end in the rank's own seconds,
``x_{r,i} = (o_r - o_ref) + e_{r,i} - median_q ((o_q - o_ref) + e_{q,i} - delta_q)``, and

    ``delta_r = median_i x_{r,i}``

(the median over the instances, robust to a few that do not end together). Ranks that share an
instance with the reference rank are aligned first, then ranks that share one with those, and
so on; a rank that shares none keeps ``delta = 0`` and is reported as not aligned. Without any
blocking collective, every collective is used.

**Per instance**, on the reference clock (``t' = (o_r - o_ref) + t - delta_r``), with ``a_r``
each rank's arrival (first kernel start) and ``e_r`` its end:

* ``skew_s = max_r a_r - min_r a_r`` (last arrival - first);
* ``transfer_s = max(0, max_r e_r - max_r a_r)`` (end - last arrival: the time the data moved);
* ``wait_s`` of rank ``r`` ``= max_q a_q - a_r`` (time inside its kernel before the last rank came;
  0 under :data:`ROUNDING_S`);
* ``straggler_rank``: the last to arrive, None when ``skew_s`` is under :data:`SKEW_MIN_S`
  (every rank arrived together, to the timestamps' resolution).

**Per rank**: ``wait_s`` and ``transfer_s`` summed over its instances, ``straggler_count`` the
instances where it arrived last. Its exposed communication ``E`` (communication with no compute
running, :mod:`commcost.trace.analysis`) is split into ``exposed_waiting_s = |X ∩ U(W_r)|`` with
``X`` the exposed intervals and ``W_r`` the rank's waiting intervals ``[a_r, a_r + wait_r)``
(own clock), and ``exposed_moving_s = E - exposed_waiting_s`` (transfer, and collectives not
matched on another rank).

**Rows.** A sized collective row (op, S, P, dtype) gets ``transfer_s``, the median of the
transfer of its instances; a model is compared with that, not with the kernel time.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from commcost.comm.collectives import Collective
from commcost.trace.intervals import intersect, measure, union

__all__ = ["SKEW_MIN_S", "ROUNDING_S", "BLOCKING", "ClockOffset", "Instance", "RankWait", "CrossRank", "cross_rank"]

SKEW_MIN_S = 1e-6
"""Skews under this (1 us, Kineto's timestamp resolution) name no straggler."""

ROUNDING_S = 1e-9
"""Waits under this (1 ns, far below any profiler's resolution) are the float rounding of the
alignment, and are 0."""

BLOCKING = frozenset((Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
                      Collective.ALL_TO_ALL))
"""Collectives whose every output needs every rank's input: all ranks leave them together."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockOffset:
    """One rank's clock against the reference rank's."""

    rank: int
    """The rank."""
    clock_offset_s: float
    """``delta_r``: how far its clock reads ahead of the reference rank's, seconds."""
    instances: int
    """Instances the median was taken over (0 for the reference rank and for a rank not aligned)."""
    aligned: bool
    """False when the rank shares no collective with an aligned rank (``delta`` left at 0)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One collective instance matched across ranks (module docstring, **Per instance**)."""

    op: Collective
    """The collective."""
    comm: str
    """The communicator."""
    index: int
    """``k``: its place among that op's calls on that communicator, from 0."""
    skew_s: float
    """Last arrival - first arrival, seconds."""
    transfer_s: float
    """End - last arrival, seconds."""
    straggler_rank: int | None
    """The last rank to arrive (None when the skew is under :data:`SKEW_MIN_S`)."""
    ranks: tuple[tuple[int, float], ...]
    """``(rank, wait_s)`` of each rank that recorded it, by rank."""
    row: tuple | None
    """``(op, S, P, dtype)`` of the row its calls pool into (the lowest rank's call), None without a size."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankWait:
    """One rank's share of the instances (module docstring, **Per rank**)."""

    rank: int
    """The rank."""
    wait_s: float
    """Sum of its waits, seconds."""
    transfer_s: float
    """Sum of the transfers of its instances, seconds."""
    straggler_count: int
    """Instances where it arrived last."""
    exposed_waiting_s: float
    """Exposed communication spent waiting for a later rank, seconds."""
    exposed_moving_s: float
    """The rest of its exposed communication, seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossRank:
    """Everything :func:`cross_rank` finds."""

    reference_rank: int
    """The rank whose clock the others are aligned to."""
    clock_offsets: tuple[ClockOffset, ...]
    """Each rank's offset, by rank."""
    instances: tuple[Instance, ...]
    """Each instance on two or more ranks, in the reference clock's order of last arrival."""
    per_rank: tuple[RankWait, ...]
    """Each rank's waits, by rank."""
    unmatched_calls: int
    """Timed calls recorded on one traced rank only (not compared)."""

    def row_transfer_s(self) -> dict[tuple, float]:
        """``(op, S, P, dtype)`` -> median transfer of that row's instances, seconds (module docstring, **Rows**)."""
        by: dict[tuple, list[float]] = {}
        for inst in self.instances:
            if inst.row is not None:
                by.setdefault(inst.row, []).append(inst.transfer_s)
        return {k: statistics.median(v) for k, v in by.items()}


def _offsets(ranks, members, shift, reference) -> dict[int, tuple[float, int]]:
    """``rank -> (delta_r, instances used)`` (module docstring, **Clocks**)."""
    use = [m for m in members if m[0] in BLOCKING] or list(members)
    aligned = {reference: (0.0, 0)}
    pending = set(ranks) - {reference}
    while pending:
        samples: dict[int, list[float]] = {}
        for key in use:
            calls = members[key]
            ref_ends = [shift[q] + c.end_s - aligned[q][0] for q, c in calls.items() if q in aligned]
            if not ref_ends:
                continue
            t_ref = statistics.median(ref_ends)
            for r, c in calls.items():
                if r in pending:
                    samples.setdefault(r, []).append(shift[r] + c.end_s - t_ref)
        if not samples:
            break
        for r, xs in samples.items():
            aligned[r] = (statistics.median(xs), len(xs))
            pending.discard(r)
    return aligned


def cross_rank(results) -> CrossRank | None:
    """Clock offsets, instances and per-rank waits of ``results``
    (:class:`commcost.trace.parallel.RankResult`, one per rank); None with fewer than two ranks."""
    results = sorted(results, key=lambda r: r.summary.rank)
    if len(results) < 2:
        return None
    reference = results[0].summary.rank
    o_ref = results[0].origin_us
    shift = {r.summary.rank: (r.origin_us - o_ref) * 1e-6 for r in results}
    members: dict[tuple, dict[int, object]] = {}
    for res in results:
        seen: dict[tuple, int] = {}
        for c in sorted(res.timed, key=lambda c: c.issue_s):
            k = seen.get((c.comm, c.op), 0)
            seen[(c.comm, c.op)] = k + 1
            members.setdefault((c.op, c.comm, k), {})[res.summary.rank] = c
    matched = {key: calls for key, calls in members.items() if len(calls) >= 2}
    unmatched = sum(len(calls) for calls in members.values() if len(calls) < 2)
    ranks = [r.summary.rank for r in results]
    delta = _offsets(ranks, matched, shift, reference)
    offsets = tuple(ClockOffset(rank=r, clock_offset_s=delta.get(r, (0.0, 0))[0], instances=delta.get(r, (0.0, 0))[1],
                                aligned=r in delta) for r in ranks)
    d = {r: delta.get(r, (0.0, 0))[0] for r in ranks}

    instances: list[tuple[float, Instance]] = []
    wait = dict.fromkeys(ranks, 0.0)
    transfer = dict.fromkeys(ranks, 0.0)
    strag = dict.fromkeys(ranks, 0)
    waiting: dict[int, list[tuple[float, float]]] = {r: [] for r in ranks}
    for (op, comm, k), calls in matched.items():
        arrive = {r: shift[r] + c.start_s - d[r] for r, c in calls.items()}
        end = max(shift[r] + c.end_s - d[r] for r, c in calls.items())
        last = max(arrive.values())
        skew = last - min(arrive.values())
        t_x = max(0.0, end - last)
        straggler = max(sorted(arrive), key=lambda r: arrive[r]) if skew >= SKEW_MIN_S else None
        per = tuple((r, w if w >= ROUNDING_S else 0.0) for r in sorted(calls) for w in (last - arrive[r],))
        for r, w in per:
            wait[r] += w
            transfer[r] += t_x
            if w > 0:
                waiting[r].append((calls[r].start_s, calls[r].start_s + w))
        if straggler is not None:
            strag[straggler] += 1
        first = calls[min(calls)]
        row = ((first.op, first.size_bytes, first.group_size, first.dtype)
               if first.size_bytes is not None and first.group_size is not None else None)
        instances.append((last, Instance(op=op, comm=comm, index=k, skew_s=skew, transfer_s=t_x,
                                         straggler_rank=straggler, ranks=per, row=row)))
    instances.sort(key=lambda x: (x[0], x[1].comm, x[1].op.value, x[1].index))
    per_rank = []
    for res in results:
        r = res.summary.rank
        exposed = list(res.exposed)
        e_wait = float(measure(intersect(exposed, union(waiting[r]))))
        e_total = res.summary.total.exposed_communication_s
        per_rank.append(RankWait(rank=r, wait_s=wait[r], transfer_s=transfer[r], straggler_count=strag[r],
                                 exposed_waiting_s=e_wait, exposed_moving_s=max(0.0, e_total - e_wait)))
    return CrossRank(reference_rank=reference, clock_offsets=offsets, instances=tuple(i for _, i in instances),
                     per_rank=tuple(per_rank), unmatched_calls=unmatched)
