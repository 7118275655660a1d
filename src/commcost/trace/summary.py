"""One call from a trace path to everything ``commcost trace`` reports.

:func:`analyze_trace` reads each rank's file (a file, or a directory with one file per
rank), measures it (:mod:`commcost.trace.analysis`), lists its collectives
(:mod:`commcost.trace.collectives`) and, given a CommModel, prices each collective row:

* prediction ``T_pred = model.cost(op, S, P, algorithm).total_s`` (the CommModel; nothing here prices
  a collective itself);
* relative error ``e = (T_pred - t) / t`` with ``t`` the row's measured median;
* the median error: ``median_r |e_r|`` over the rows the model could price (rows the
  model refuses -- a profile outside its scope, one rank -- are listed with the reason).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from commcost.errors import InputError
from commcost.trace.analysis import RankSummary, Stragglers, analyze_rank, stragglers
from commcost.trace.collectives import CollectiveCall, CollectiveRow, collective_calls, collective_rows
from commcost.trace.load import load_rank
from commcost.trace.reader import trace_files

__all__ = ["Prediction", "TraceSummary", "analyze_trace", "predict_rows", "median_abs_error"]


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
    """The model's reason, or why it could not price the row."""

    @property
    def error(self) -> float | None:
        """``e = (T_pred - t) / t``; None without a prediction or with ``t = 0``."""
        if self.predicted_s is None or self.row.time_s <= 0:
            return None
        return (self.predicted_s - self.row.time_s) / self.row.time_s


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


def analyze_trace(path, *, round_us: bool = False) -> TraceSummary:
    """Read and measure the trace(s) at ``path`` (streamed; see :mod:`commcost.trace.reader`)."""
    files = trace_files(path)
    ranks: list[RankSummary] = []
    calls: list[CollectiveCall] = []
    dropped = 0
    backends, worlds = set(), set()
    seen: dict[int, str] = {}
    for i, f in enumerate(files):
        rt = load_rank(f, default_rank=i, round_us=round_us)
        if rt.rank in seen:
            raise InputError(f"{f}: rank {rt.rank} again (also in {seen[rt.rank]}); a directory holds one file "
                             "per rank")
        seen[rt.rank] = f
        ranks.append(analyze_rank(rt))
        c, d = collective_calls(rt)
        calls.extend(c)
        dropped += d
        if rt.backend:
            backends.add(rt.backend)
        if rt.world_size:
            worlds.add(rt.world_size)
    ranks.sort(key=lambda r: r.rank)
    return TraceSummary(path=str(path), ranks=tuple(ranks), stragglers=stragglers(ranks), calls=tuple(calls),
                        rows=tuple(collective_rows(calls)), calls_dropped=dropped,
                        backend=backends.pop() if len(backends) == 1 else None,
                        world_size=worlds.pop() if len(worlds) == 1 else None, rounded_us=round_us)


def predict_rows(rows, model, *, algorithm: str = "auto") -> list[Prediction]:
    """Price each row with ``model`` (a :class:`commcost.comm.model.CommModel`), ``algorithm`` as asked of it."""
    out = []
    for r in rows:
        if r.group_size < 2:
            out.append(Prediction(row=r, predicted_s=None, algorithm=None, reason="one rank: no communication"))
            continue
        try:
            c = model.cost(r.op, float(r.size_bytes), r.group_size, algorithm)
        except InputError as exc:
            out.append(Prediction(row=r, predicted_s=None, algorithm=None, reason=str(exc)))
            continue
        out.append(Prediction(row=r, predicted_s=c.total_s, algorithm=c.algorithm.value, reason=c.reason))
    return out


def median_abs_error(predictions: list[Prediction]) -> float | None:
    """``median |e|`` over the priced rows; None when none was priced."""
    errs = [abs(p.error) for p in predictions if p.error is not None]
    return statistics.median(errs) if errs else None
