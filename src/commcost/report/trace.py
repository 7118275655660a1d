"""Text and JSON renderings of :class:`commcost.trace.summary.TraceSummary`.

Every number is a field of the summary; its formula is the field's docstring
(:mod:`commcost.trace.analysis`, :mod:`commcost.trace.collectives`, :mod:`commcost.trace.summary`).
JSON keys are SI (seconds, bytes, bytes per second); ``overlap_pct`` is a percentage.
"""

from __future__ import annotations

from typing import Any

from commcost.report._choice import reason_text
from commcost.report._width import terminal_width, wrap
from commcost.trace.analysis import Breakdown
from commcost.trace.summary import Prediction, TraceSummary, median_abs_error
from commcost.core.units import MS, format_bytes, format_rate, format_seconds
from commcost.trace.fabric_share import fabric_shares

__all__ = ["trace_to_dict", "render_trace_text", "STEPS_SHOWN", "terminal_width", "fit_lines", "render_trace_tail",
           "trace_extra_dict", "failed_ranks_warning"]

STEPS_SHOWN = 8
"""Per-step rows shown per rank in the text (JSON has all)."""
CROSS_RANKS_SHOWN = 16
"""Ranks shown in the text's across-ranks table (those with the most exposed waiting; JSON has all)."""


def _breakdown_dict(b: Breakdown) -> dict[str, Any]:
    return {"compute_s": b.compute_s, "communication_s": b.communication_s,
            "communication_by_op_s": dict(b.communication_by_op_s),
            "exposed_communication_s": b.exposed_communication_s, "overlap_s": b.overlap_s,
            "overlap_pct": b.overlap_pct, "idle_s": b.idle_s, "span_s": b.span_s, "other_s": b.other_s,
            "events": b.events}


def _why(p: Prediction) -> str:
    """Why the model priced the row as it did, or why it could not."""
    return p.reason if p.cost is None else reason_text(p.cost)


def _row_dict(r, p: Prediction | None, transfer_s: float | None) -> dict[str, Any]:
    d = {"op": r.op.value, "size_bytes": r.size_bytes, "group_size": r.group_size, "dtype": r.dtype,
         "count": r.count, "ranks": r.ranks, "time_s": r.time_s,
         "time_all_calls_median_s": r.time_all_calls_median_s, "time_min_s": r.time_min_s, "time_max_s": r.time_max_s,
         "algbw_bytes_per_s": r.algbw_bytes_per_s, "busbw_bytes_per_s": r.busbw_bytes_per_s,
         "transfer_s": transfer_s}
    if p is not None:
        d.update(predicted_s=p.predicted_s, error=p.error, algorithm=p.algorithm, reason=_why(p),
                 measured_s=p.measured_s, measured=p.measured)
    return d


def _unsized_dict(u, model) -> dict[str, Any]:
    d = {"op": u.op.value, "size_bytes": None, "group_size": u.group_size, "dtype": None, "count": u.count,
         "ranks": u.ranks, "time_s": u.time_s, "time_total_s": u.time_total_s, "time_all_calls_median_s": u.time_s,
         "time_min_s": None, "time_max_s": None, "algbw_bytes_per_s": None, "busbw_bytes_per_s": None,
         "transfer_s": None}
    if model is not None:
        d.update(predicted_s=None, error=None, algorithm=None, reason="no size recorded", measured_s=None,
                 measured=None)
    return d


def _cross_dict(c) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "reference_rank": c.reference_rank,
        "clock_offsets": [{"rank": o.rank, "clock_offset_s": o.clock_offset_s, "instances": o.instances,
                           "aligned": o.aligned} for o in c.clock_offsets],
        "instances": [{"op": i.op.value, "comm": i.comm, "index": i.index, "skew_s": i.skew_s,
                       "transfer_s": i.transfer_s, "straggler_rank": i.straggler_rank,
                       "ranks": [{"rank": r, "wait_s": w} for r, w in i.ranks]} for i in c.instances],
        "per_rank": [{"rank": w.rank, "wait_s": w.wait_s, "transfer_s": w.transfer_s,
                      "straggler_count": w.straggler_count} for w in c.per_rank],
        "unmatched_calls": c.unmatched_calls,
    }


def trace_to_dict(s: TraceSummary, predictions: list[Prediction] | None = None, model=None) -> dict[str, Any]:
    """One JSON-ready object (keys in docs/trace.md)."""
    preds = predictions or [None] * len(s.rows)
    transfer = s.cross.row_transfer_s() if s.cross is not None else {}
    cross = {w.rank: w for w in s.cross.per_rank} if s.cross is not None else {}
    out: dict[str, Any] = {
        "path": s.path, "backend": s.backend, "world_size": s.world_size, "rounded_us": s.rounded_us,
        "ranks": [{"rank": r.rank, "path": r.path, "device": r.device, **_breakdown_dict(r.total),
                   "exposed_waiting_s": cross[r.rank].exposed_waiting_s if r.rank in cross else None,
                   "exposed_moving_s": cross[r.rank].exposed_moving_s if r.rank in cross else None,
                   "window": r.window,
                   "steps": [{"step": st.step, "duration_s": st.duration_s, **_breakdown_dict(st.breakdown)}
                             for st in r.steps]}
                  for r in s.ranks],
        "stragglers": {"steps": [{"step": x.step, "min_s": x.min_s, "max_s": x.max_s, "spread_s": x.spread_s,
                                  "slowest_rank": x.slowest_rank} for x in s.stragglers.steps],
                       "mean_step_s": {str(k): v for k, v in s.stragglers.mean_step_s.items()},
                       "slowest_rank": s.stragglers.slowest_rank},
        "collectives": [_row_dict(r, p, transfer.get((r.op, r.size_bytes, r.group_size, r.dtype)))
                        for r, p in zip(s.rows, preds)] + [_unsized_dict(u, model) for u in s.unsized],
        "calls": len(s.calls), "calls_dropped": s.calls_dropped,
        "cross_rank": _cross_dict(s.cross),
        "failed_ranks": [{"path": f.path, "message": f.message} for f in s.failed],
        "advice": [{"what": a.what, "why": a.why, "gain_s": a.gain_s, "kind": a.kind} for a in s.advice],
    }
    if model is not None:
        out["model"] = model.to_dict()
        out["median_abs_error"] = median_abs_error(predictions or [])
        out["fabric_share"] = fabric_shares(predictions or [])
    return out


def _ms(t_s: float) -> str:
    return f"{t_s / MS:,.3f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}%"


def _by_op(b: Breakdown) -> str:
    return ", ".join(f"{k} {_ms(v)}" for k, v in b.communication_by_op_s.items()) or "-"


def _table_width(cols) -> int:
    """Width of :func:`_table` over ``[(head, cells)]``: two of indent, two between columns."""
    return 2 + sum(max(len(h), *(len(c) for c in v)) if v else len(h) for h, v in cols) + 2 * (len(cols) - 1)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(cells))  # noqa: E731
    return [fmt(head)] + [fmt(r) for r in rows]


def fit_lines(lines: list[str], width: int | None = None) -> list[str]:
    """Every line wrapped to ``width`` (default the terminal's: :func:`commcost.report._width.wrap`)."""
    return [piece for line in lines for piece in wrap(line, width)]


def render_trace_text(s: TraceSummary, predictions: list[Prediction] | None = None, model=None,
                      *, steps_shown: int = STEPS_SHOWN, verbose: bool = False, width: int | None = None) -> str:
    """The plain-text report, wrapped to ``width`` (default :func:`terminal_width`); the formulas
    and the wider columns (dtype, algbw) with ``verbose``."""
    width = terminal_width() if width is None else width
    n = len(s.ranks)
    lines = [f"commcost trace: {s.path} ({n} rank{'s' if n != 1 else ''}"
             + (f", {s.backend}" if s.backend else "") + (f", world size {s.world_size}" if s.world_size else "")
             + "); times in ms"]
    if verbose:
        lines += ["  T_comp = |U(compute)|, T_comm = |U(communication)| (each moment once, across streams and nesting);",
                  "  exposed E = T_comm - |U(comm) & U(compute)|; overlap = |U(comm) & U(compute)| / T_comm (HTA's);",
                  "  idle I = span - |U(all device events)| (HTA's temporal breakdown)"]
    lines.append("  times " + ("rounded to whole microseconds (HTA's default)" if s.rounded_us
                               else "as recorded" + (" (HTA rounds each event inward to whole us unless "
                                                     "HTA_DISABLE_NS_ROUNDING=1; --hta-rounding does the same here)"
                                                     if verbose else "; formulas: --verbose")))
    if any(r.device == "cpu" for r in s.ranks):
        lines.append("  CPU-only trace: communication = gloo:* annotations, compute = cpu ops off the gloo threads")
    lines.append("")
    rows = [[str(r.rank), r.device, _ms(r.total.span_s), _ms(r.total.compute_s), _ms(r.total.communication_s),
             _ms(r.total.exposed_communication_s), _pct(r.total.overlap_pct), _ms(r.total.idle_s)]
            for r in s.ranks]
    lines += _table(["rank", "device", "span", "compute", "comm", "exposed", "overlap", "idle"], rows)
    by_op = {_by_op(r.total) for r in s.ranks}
    if len(by_op) == 1:
        lines.append(f"  comm by op: {by_op.pop()}")
    else:
        lines += [f"  comm by op, rank {r.rank}: {_by_op(r.total)}" for r in s.ranks[:8]]
    if len({r.window for r in s.ranks}) == 1:
        lines.append(f"  counted: {s.ranks[0].window}")
    else:
        lines += [f"  counted on rank {r.rank}: {r.window}" for r in s.ranks[:8]]
    lines += _steps_text(s, steps_shown)
    lines += _stragglers_text(s)
    if s.cross is not None:
        lines += _cross_text(s, verbose)
    lines.append("")
    lines += _collectives_text(s, predictions, model, verbose, width)
    if s.advice:
        lines += ["", "advice (largest gain first; gains are per step, upper bounds, and do not add):"]
        for i, a in enumerate(s.advice, 1):
            lines.append(f"  {i}. {a.what}: up to {_ms(a.gain_s)} ms per step")
            lines.append(f"     {a.why}")
    if s.failed:
        lines += ["", f"not read ({len(s.failed)} of {len(s.failed) + n} rank files):"]
        lines += [f"  {f.message}" for f in s.failed]
    return "\n".join(fit_lines(lines, width))


def _steps_text(s: TraceSummary, steps_shown: int) -> list[str]:
    """Each rank's per-ProfilerStep table (the first ``steps_shown`` steps; with more than 4 ranks, the first rank's)."""
    n = len(s.ranks)
    lines: list[str] = []
    for r in s.ranks:
        if not r.steps or steps_shown == 0:
            continue
        lines += ["", f"per ProfilerStep, rank {r.rank} (kernels by the step that launched them; duration = the "
                      "CPU annotation)"]
        shown = r.steps[:steps_shown]
        lines += _table(["step", "duration", "compute", "comm", "exposed", "overlap", "idle"],
                        [[f"#{st.step}", _ms(st.duration_s), _ms(st.breakdown.compute_s),
                          _ms(st.breakdown.communication_s), _ms(st.breakdown.exposed_communication_s),
                          _pct(st.breakdown.overlap_pct), _ms(st.breakdown.idle_s)] for st in shown])
        if len(r.steps) > steps_shown:
            lines.append(f"  ... {len(r.steps) - steps_shown} more steps (--json lists all)")
        if n > 4:
            lines.append("  (per-step tables of the other ranks: --json)")
            break
    return lines


def _stragglers_text(s: TraceSummary) -> list[str]:
    """The widest step-time spread across ranks and the slowest rank on average (several ranks only)."""
    n = len(s.ranks)
    lines: list[str] = []
    st = s.stragglers
    if n > 1:
        lines.append("")
        if st.steps:
            worst = max(st.steps, key=lambda x: x.spread_s)
            lines.append(f"stragglers: over {len(st.steps)} common step(s), the widest spread is step #{worst.step}: "
                         f"{_ms(worst.min_s)} to {_ms(worst.max_s)} ms (max - min = {_ms(worst.spread_s)} ms, "
                         f"slowest rank {worst.slowest_rank}); slowest rank on average: {st.slowest_rank} "
                         f"({_ms(st.mean_step_s[st.slowest_rank])} ms per step)")
        else:
            lines.append("stragglers: the ranks share no ProfilerStep number; no step-time spread")
    return lines


def _cross_text(s: TraceSummary, verbose: bool) -> list[str]:
    c = s.cross
    lines = ["", f"across ranks ({len(c.instances)} collective instance(s) matched by communicator and order of "
                 f"issue; clocks aligned to rank {c.reference_rank} on the ends of blocking collectives)"]
    if verbose:
        lines.append("  wait = last arrival - own arrival; transfer = end - last arrival; exposed communication "
                     "= waiting (exposed and inside a wait) + moving (the rest)")
    cross = {w.rank: w for w in c.per_rank}
    offsets = {o.rank: o for o in c.clock_offsets}
    rows = []
    shown = s.ranks
    if len(shown) > CROSS_RANKS_SHOWN:
        shown = sorted(sorted(s.ranks, key=lambda r: (-cross[r.rank].exposed_waiting_s, -cross[r.rank].wait_s))[:CROSS_RANKS_SHOWN],
                       key=lambda r: r.rank)
    for r in shown:
        w, o = cross[r.rank], offsets[r.rank]
        rows.append([str(r.rank), f"{o.clock_offset_s / MS:+,.3f}" + ("" if o.aligned else "?"), _ms(w.wait_s),
                     _ms(w.transfer_s), str(w.straggler_count), _ms(w.exposed_waiting_s), _ms(w.exposed_moving_s)])
    lines += _table(["rank", "clock", "wait", "transfer", "last", "exp.wait", "exp.move"], rows)
    if len(shown) < len(s.ranks):
        lines.append(f"  (the {len(shown)} of {len(s.ranks)} ranks with the most exposed waiting; --json lists all)")
    lines.append("  clock: offset from the reference rank's clock; last: instances it arrived last at; exp.wait / "
                 "exp.move: exposed communication waiting for a later rank / moving data")
    if any(not o.aligned for o in c.clock_offsets):
        lines.append("  ? shares no collective with an aligned rank: its clock is taken as the reference's")
    worst = max(c.instances, key=lambda i: i.skew_s, default=None)
    if worst is not None and worst.straggler_rank is None:
        lines.append("  no instance has a skew of 1 us or more: the ranks arrive together")
    elif worst is not None:
        lines.append(f"  widest skew: {worst.op.value} #{worst.index} on {worst.comm}: {_ms(worst.skew_s)} ms "
                     f"(last to arrive: rank {worst.straggler_rank}), transfer {_ms(worst.transfer_s)} ms")
    if c.unmatched_calls:
        lines.append(f"  {c.unmatched_calls} call(s) recorded on one traced rank only: not compared")
    return lines


def _model_lines(predictions, model) -> list[str]:
    """The collectives' section under a model: the model, rows it refused, the median error, each op's share of
    the fabric."""
    lines: list[str] = []
    preds = predictions or []
    lines.append("")
    lines.append(f"model: {model.describe()}")
    refused = [p for p in preds if p.predicted_s is None]
    for p in refused[:3]:
        lines.append(f"  not priced: {p.row.op.value} {format_bytes(p.row.size_bytes)} on {p.row.group_size}: "
                     f"{p.reason}")
    m = median_abs_error(preds)
    priced = sum(1 for p in preds if p.error is not None)
    against = ("transfer where matched across ranks, else t" if any(p.measured == "transfer" for p in preds)
               else "t")
    lines.append(f"median |error| = median over rows of |predicted - measured| / measured (measured: {against}): "
                 + (f"{100 * m:.1f}% over {priced} row(s)" if m is not None else "no row priced"))
    for op, f in fabric_shares(preds).items():   # the error column as the speed the op got from the fabric
        lines.append(f"{op} runs at {100 * f['share']:.0f}% of the fabric: its {f['calls']} call(s) took "
                     f"{format_seconds(f['measured_s'])} where the model of the fabric needs "
                     f"{format_seconds(f['fabric_s'])} (achieved bus bandwidth / the fabric's)")
    return lines


def _collectives_text(s: TraceSummary, predictions, model, verbose: bool, width: int) -> list[str]:
    lines: list[str] = []
    if not s.rows and not s.unsized:
        lines.append("collectives: none with sizes recorded (record_param_comms or gloo annotations with "
                     "Input Dims)" + (f"; {s.calls_dropped} call(s) without a size or a kernel" if s.calls_dropped
                                      else ""))
        return lines
    transfer = s.cross.row_transfer_s() if s.cross is not None else {}
    if s.rows:
        lines.append("collectives (S as nccl-tests counts it; t = median over the calls of the fastest traced rank's "
                     "kernel time" + ("; algbw = S/t" if verbose else "") + "; busbw = S/t * f(op, P)"
                     + ("; transfer = median of end - last arrival" if transfer else "") + ")")
        preds = predictions or []
        t_x = [transfer.get((r.op, r.size_bytes, r.group_size, r.dtype)) for r in s.rows]
        cols = [("op", [r.op.value for r in s.rows]), ("P", [str(r.group_size) for r in s.rows])]
        if verbose:
            cols.append(("dtype", [r.dtype for r in s.rows]))
        cols += [("S", [format_bytes(r.size_bytes) for r in s.rows]), ("calls", [str(r.count) for r in s.rows]),
                 ("t", [format_seconds(r.time_s) for r in s.rows])]
        if transfer:
            cols.append(("transfer", [format_seconds(x) if x is not None else "-" for x in t_x]))
        if verbose:
            cols.append(("algbw", [format_rate(r.algbw_bytes_per_s) if r.algbw_bytes_per_s is not None else "-"
                                   for r in s.rows]))
        cols.append(("busbw", [format_rate(r.busbw_bytes_per_s) if r.busbw_bytes_per_s is not None else "-"
                               for r in s.rows]))
        if model is not None:
            cols += [("predicted", [format_seconds(p.predicted_s) if p.predicted_s is not None else "-" for p in preds]),
                     ("error", [f"{100 * p.error:+.1f}%" if p.error is not None else "-" for p in preds])]
        dropped = []
        while _table_width(cols) > width and not verbose:
            name = next((c for c in ("busbw", "calls") if c in dict(cols)), None)
            if name is None:
                break
            cols = [c for c in cols if c[0] != name]
            dropped.append(name)
        lines += _table([h for h, _ in cols], [list(cells) for cells in zip(*(v for _, v in cols))])
        if dropped:
            lines.append(f"  ({', '.join(dropped)}: --json, or --verbose for the wide table)")
        if len(s.ranks) == 1:
            lines.append("  one rank traced: a kernel's time includes waiting for the other ranks to arrive "
                         "(trace every rank of the group to take the fastest)")
        if any(c.group_size_source == "world_size" for c in s.calls):
            lines.append("  P from the trace's world size where a call records no group size")
    if s.unsized:
        lines += ([""] if s.rows else []) + ["collectives without a recorded size (not priced; t = median kernel "
                                             "time, waits included)"]
        lines += _table(["op", "P", "calls", "ranks", "total", "t"],
                        [[u.op.value, str(u.group_size) if u.group_size is not None else "-", str(u.count),
                          str(u.ranks), format_seconds(u.time_total_s), format_seconds(u.time_s)] for u in s.unsized])
    unsized_calls = sum(u.count for u in s.unsized)
    if s.calls_dropped - unsized_calls > 0:
        lines.append(f"  {s.calls_dropped - unsized_calls} recorded call(s) left out: an impossible size or group size "
                     "(negative, past 1 EiB, not 1 to 10**6 ranks), or no kernel found to time them")
    if model is not None:
        lines += _model_lines(predictions, model)
    return lines


def render_trace_tail(note: str | None, saved: tuple[str, int] | None) -> str:
    """The lines under the trace's report: the model's header ``note`` and the measurement ``saved``
    (path, rows); empty when neither."""
    tail = []
    if note:
        tail.append(f"  {note}")
    if saved:
        tail += ["", f"measurement written to {saved[0]} ({saved[1]} rows; `commcost fit {saved[0]}` fits it)"]
    return "\n" + "\n".join(fit_lines(tail)) if tail else ""


def failed_ranks_warning(summary) -> str:
    """The warning for the rank files ``summary`` could not read (``summary.failed``), naming each
    and how many of the job's files the report covers."""
    f = summary.failed
    n = len(f) + len(summary.ranks)
    return (f"{len(f)} of {n} rank files not read ({'; '.join(x.message for x in f)}); the report covers the "
            f"other {len(summary.ranks)}")


def trace_extra_dict(profile: dict | None, saved: tuple[str, int] | None) -> dict:
    """The JSON keys beside the trace's: the profile's (``profile``) and the measurement ``saved``."""
    out: dict = {}
    if profile is not None:
        out["profile"] = profile
    if saved:
        out["saved_measurement"] = {"path": saved[0], "rows": saved[1]}
    return out
