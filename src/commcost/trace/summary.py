"""One call from a trace path to everything ``commcost trace`` reports.

:func:`analyze_trace` reads each rank's file (a file, or a directory with one file per
rank), measures it (:mod:`commcost.trace.analysis`), lists its collectives
(:mod:`commcost.trace.collectives`) and, given a CommModel, prices each collective row:

* prediction ``T_pred = model.cost(op, S, P, algorithm).total_s`` (the CommModel; nothing here prices
  a collective itself);
* relative error ``e = (T_pred - t) / t`` with ``t`` the row's measured median;
* the median error: ``median_r |e_r|`` over the rows the model could price (rows the
  model refuses -- a profile outside its scope, one rank -- are listed with the reason).

With two or more ranks the measured ``t`` a model is compared with is the row's transfer time
(:mod:`commcost.trace.cross_rank`: kernel time less the wait for the last rank), when the row's
calls were matched across ranks; otherwise the kernel time ``t`` of the row.

Ranks are read as independent tasks (:mod:`commcost.trace.parallel`: serially, on local
processes or on a Dask cluster) and combined here in file order, so the summary does not depend
on how they ran. Calls whose arguments record no size are pooled by (op, P) into
:class:`UnsizedRow` (``count``, total and median kernel time).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from commcost.core.errors import InputError
from commcost.comm.collectives import Collective, CollectiveCost
from commcost.trace.analysis import RankSummary, Stragglers, stragglers
from commcost.trace.collectives import CollectiveCall, CollectiveRow, collective_rows, rows_to_measurement, sized_calls
from commcost.trace.cross_rank import CrossRank, cross_rank
from commcost.trace.parallel import RankFailure, run_ranks
from commcost.trace.reader import trace_files
from commcost.trace.advice import trace_advice

__all__ = ["Prediction", "UnsizedRow", "RankDetail", "TraceSummary", "analyze_trace", "predict_rows",
           "median_abs_error", "trace_measurement"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """One collective row priced by the CommModel."""

    row: CollectiveRow
    """The measured row."""
    predicted_s: float | None
    """``T_pred``, seconds; None when the model refused (``reason`` says why)."""
    algorithm: str | None
    """The algorithm the model chose."""
    reason: str
    """Why the model could not price the row ("" where it priced it: ``choice`` says why that algorithm)."""
    measured_s: float
    """``t`` the prediction is compared with: the row's transfer time when its calls were matched
    across ranks, else its kernel time ``row.time_s``, seconds."""
    measured: str
    """``transfer`` or ``kernel``: which of the two ``measured_s`` is."""
    cost: CollectiveCost | None = None
    """The CommModel's price of the row, with its :class:`~commcost.comm.collectives.AlgorithmChoice`
    (worded by :func:`commcost.report._choice.reason_text`); None where it refused."""

    @property
    def error(self) -> float | None:
        """``e = (T_pred - t) / t``; None without a prediction or with ``t = 0``."""
        if self.predicted_s is None or self.measured_s <= 0:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsizedRow:
    """Calls of one (op, P) whose arguments record no size: listed, not priced."""

    op: Collective
    """The collective."""
    group_size: int | None
    """``P`` (None when neither the calls nor the trace name it)."""
    count: int
    """Calls (all ranks)."""
    ranks: int
    """Ranks that recorded one."""
    time_total_s: float
    """Sum of the calls' kernel times (all ranks), seconds."""
    time_s: float
    """Median of the calls' kernel times (all ranks, arrival waits included), seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankDetail:
    """Per-rank figures the advice uses (:class:`commcost.trace.parallel.RankResult`)."""

    rank: int
    """The rank."""
    exposed_by_op_s: dict[str, float]
    """Exposed communication per collective, seconds."""
    launch_gaps_s: float
    """Idle in short gaps (:data:`commcost.trace.parallel.SHORT_GAP_S`), seconds."""
    host_gaps_s: float
    """Idle in longer gaps, seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSummary:
    """Everything measured in one trace (one or several ranks)."""

    path: str
    """What was given (file or directory)."""
    ranks: tuple[RankSummary, ...]
    """Each rank, sorted by rank."""
    stragglers: Stragglers
    """Step-time spread across ranks."""
    calls: tuple[CollectiveCall, ...]
    """Every recorded collective call (all ranks, each in issue order: :mod:`commcost.trace.collectives`)."""
    rows: tuple[CollectiveRow, ...]
    """The calls pooled by (op, size, group size, dtype)."""
    calls_dropped: int
    """Recorded calls left out: no size in their arguments, or no kernel found for them."""
    backend: str | None
    """The backend the traces name (distributedInfo), if any."""
    world_size: int | None
    """The world size the traces name, if any."""
    rounded_us: bool
    """True when times were rounded to whole microseconds as HTA does by default."""
    unsized: tuple[UnsizedRow, ...] = ()
    """Timed calls without a recorded size, pooled by (op, P)."""
    cross: CrossRank | None = None
    """Clock offsets and wait vs transfer across ranks (None with one rank)."""
    details: tuple[RankDetail, ...] = ()
    """Per-rank figures for the advice, by rank."""
    failed: tuple[RankFailure, ...] = ()
    """Ranks whose file could not be read (the rest are reported)."""
    advice: tuple = ()
    """What would help most (:func:`commcost.trace.advice.trace_advice`), largest gain first."""


def _unsized_rows(results) -> list[UnsizedRow]:
    by: dict[tuple, list] = {}
    for res in results:
        for c in res.timed:
            if c.size_bytes is None or c.group_size is None:
                by.setdefault((c.op, c.group_size), []).append((res.summary.rank, c.time_s))
    return [UnsizedRow(op=op, group_size=P, count=len(v), ranks=len({r for r, _ in v}),
                       time_total_s=sum(t for _, t in v), time_s=statistics.median(t for _, t in v))
            for (op, P), v in sorted(by.items(), key=lambda kv: (kv[0][0].value, kv[0][1] or 0))]


def analyze_trace(path, *, round_us: bool = False, workers: int = 1, scheduler: str | None = None,
                  progress=None, allow_partial: bool = False) -> TraceSummary:
    """Read and measure the trace(s) at ``path`` (streamed; see :mod:`commcost.trace.reader`), one
    task per rank file (:func:`commcost.trace.parallel.run_ranks`: ``workers`` local processes, or
    the Dask ``scheduler`` at that address). Ranks that fail are in ``failed``; when every rank
    fails, the first one's reason is raised (:class:`InputError` for a bad file, else OSError). A rank
    lost while running (its worker or the cluster died: not the file's fault) fails the whole run with
    OSError unless ``allow_partial``: a report of part of a job only when asked for."""

    files = trace_files(path)
    out = run_ranks(files, round_us=round_us, workers=workers, scheduler=scheduler, progress=progress)
    failed = tuple(r for r in out if isinstance(r, RankFailure))
    results = [r for r in out if not isinstance(r, RankFailure)]
    lost = [r for r in failed if not r.bad_input]
    if lost and results and not allow_partial:
        raise OSError(f"{len(lost)} of {len(out)} ranks lost while running ({lost[0].message}); "
                      "--allow-partial reports the others")
    if not results:
        if failed[0].bad_input:
            raise InputError(failed[0].message)
        raise OSError(failed[0].message)  # a failure while running (exit 1), not the input's fault
    seen: dict[int, str] = {}
    for res in results:
        rank, f = res.summary.rank, res.summary.path
        if rank in seen:
            raise InputError(f"{f}: rank {rank} again (also in {seen[rank]}); a directory holds one file per rank")
        seen[rank] = f
    calls: list[CollectiveCall] = []
    dropped = 0
    for res in results:
        sized, left_out = sized_calls(list(res.timed), res.untimed)
        calls += sized
        dropped += left_out
    backends = {res.backend for res in results if res.backend}
    worlds = {res.world_size for res in results if res.world_size}
    results.sort(key=lambda res: res.summary.rank)
    ranks = [res.summary for res in results]
    summary = TraceSummary(
        path=str(path), ranks=tuple(ranks), stragglers=stragglers(ranks), calls=tuple(calls),
        rows=tuple(collective_rows(calls)), calls_dropped=dropped,
        backend=backends.pop() if len(backends) == 1 else None,
        world_size=worlds.pop() if len(worlds) == 1 else None, rounded_us=round_us,
        unsized=tuple(_unsized_rows(results)), cross=cross_rank(results),
        details=tuple(RankDetail(rank=res.summary.rank, exposed_by_op_s=res.exposed_by_op_s,
                                 launch_gaps_s=res.launch_gaps_s, host_gaps_s=res.host_gaps_s)
                      for res in results),
        failed=failed)
    return replace(summary, advice=trace_advice(summary))


def predict_rows(rows, model, *, algorithm: str = "auto", transfer_s: dict | None = None) -> list[Prediction]:
    """Price each row with ``model`` (a :class:`commcost.comm.model.CommModel`), ``algorithm`` as asked of it;
    ``transfer_s`` (:meth:`commcost.trace.cross_rank.CrossRank.row_transfer_s`) gives the measured time
    compared with, where a row has one (module docstring)."""
    out = []
    transfer_s = transfer_s or {}
    for r in rows:
        t_x = transfer_s.get((r.op, r.size_bytes, r.group_size, r.dtype))
        measured = dict(measured_s=t_x, measured="transfer") if t_x is not None else dict(measured_s=r.time_s,
                                                                                            measured="kernel")
        if r.group_size < 2:
            out.append(Prediction(row=r, predicted_s=None, algorithm=None, reason="one rank: no communication",
                                  **measured))
            continue
        try:
            c = model.cost(r.op, float(r.size_bytes), r.group_size, algorithm)
        except InputError as exc:
            out.append(Prediction(row=r, predicted_s=None, algorithm=None, reason=str(exc), **measured))
            continue
        out.append(Prediction(row=r, predicted_s=c.total_s, algorithm=c.algorithm.value, reason="", cost=c,
                              **measured))
    return out


def median_abs_error(predictions: list[Prediction]) -> float | None:
    """``median |e|`` over the priced rows; None when none was priced."""
    errs = [abs(p.error) for p in predictions if p.error is not None]
    return statistics.median(errs) if errs else None


def trace_measurement(summary: TraceSummary):
    """The trace's collectives as a :class:`commcost.calibrate.data.Measurement` that ``commcost fit``
    reads (``trace --save-measurement``): each (op, size, group) row's median time over its calls,
    with the trace's provenance. Raises :class:`InputError` where no collective on 2 or more ranks has
    a size and a time."""
    m = rows_to_measurement(list(summary.rows), {
        "source": summary.path, "source_kind": "kineto-trace", "backend": summary.backend,
        "world_size": summary.world_size, "ranks": len(summary.ranks),
        "note": "time_s is the median over the trace's calls of that op and size (all ranks)"})
    if not m.rows:
        raise InputError(f"{summary.path}: no collective on 2 or more ranks with a size and a time to save")
    return m
