"""Text and JSON renderings of :class:`commcost.trace.summary.TraceSummary`.

Every number is a field of the summary; its formula is the field's docstring
(:mod:`commcost.trace.analysis`, :mod:`commcost.trace.collectives`, :mod:`commcost.trace.summary`).
JSON keys are SI (seconds, bytes, bytes per second); ``overlap_pct`` is a percentage.
"""

from __future__ import annotations

from typing import Any

from commcost.trace.analysis import Breakdown
from commcost.trace.summary import Prediction, TraceSummary, median_abs_error
from commcost.units import MS, format_bytes, format_rate, format_seconds

__all__ = ["trace_to_dict", "render_trace_text", "STEPS_SHOWN"]

STEPS_SHOWN = 8
"""Per-step rows shown per rank in the text (JSON has all)."""


def _breakdown_dict(b: Breakdown) -> dict[str, Any]:
    return {"compute_s": b.compute_s, "communication_s": b.communication_s,
            "communication_by_op_s": dict(b.communication_by_op_s),
            "exposed_communication_s": b.exposed_communication_s, "overlap_s": b.overlap_s,
            "overlap_pct": b.overlap_pct, "idle_s": b.idle_s, "span_s": b.span_s, "other_s": b.other_s,
            "events": b.events}


def _row_dict(r, p: Prediction | None) -> dict[str, Any]:
    d = {"op": r.op.value, "size_bytes": r.size_bytes, "group_size": r.group_size, "dtype": r.dtype,
         "count": r.count, "ranks": r.ranks, "time_s": r.time_s,
         "time_all_calls_median_s": r.time_all_calls_median_s, "time_min_s": r.time_min_s, "time_max_s": r.time_max_s,
         "algbw_bytes_per_s": r.algbw_bytes_per_s, "busbw_bytes_per_s": r.busbw_bytes_per_s}
    if p is not None:
        d.update(predicted_s=p.predicted_s, error=p.error, algorithm=p.algorithm, reason=p.reason)
    return d


def trace_to_dict(s: TraceSummary, predictions: list[Prediction] | None = None, model=None) -> dict[str, Any]:
    """One JSON-ready object (keys in docs/trace.md)."""
    preds = predictions or [None] * len(s.rows)
    out: dict[str, Any] = {
        "path": s.path, "backend": s.backend, "world_size": s.world_size, "rounded_us": s.rounded_us,
        "ranks": [{"rank": r.rank, "path": r.path, "device": r.device, **_breakdown_dict(r.total),
                   "window": r.window,
                   "steps": [{"step": st.step, "duration_s": st.duration_s, **_breakdown_dict(st.breakdown)}
                             for st in r.steps]}
                  for r in s.ranks],
        "stragglers": {"steps": [{"step": x.step, "min_s": x.min_s, "max_s": x.max_s, "spread_s": x.spread_s,
                                  "slowest_rank": x.slowest_rank} for x in s.stragglers.steps],
                       "mean_step_s": {str(k): v for k, v in s.stragglers.mean_step_s.items()},
                       "slowest_rank": s.stragglers.slowest_rank},
        "collectives": [_row_dict(r, p) for r, p in zip(s.rows, preds)],
        "calls": len(s.calls), "calls_dropped": s.calls_dropped,
    }
    if model is not None:
        out["model"] = model.to_dict()
        out["median_abs_error"] = median_abs_error(predictions or [])
    return out


def _ms(t_s: float) -> str:
    return f"{t_s / MS:,.3f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}%"


def _by_op(b: Breakdown) -> str:
    return ", ".join(f"{k} {_ms(v)}" for k, v in b.communication_by_op_s.items()) or "-"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(cells))  # noqa: E731
    return [fmt(head)] + [fmt(r) for r in rows]


def render_trace_text(s: TraceSummary, predictions: list[Prediction] | None = None, model=None,
                      *, steps_shown: int = STEPS_SHOWN) -> str:
    """The plain-text report."""
    n = len(s.ranks)
    lines = [f"commcost trace: {s.path} ({n} rank{'s' if n != 1 else ''}"
             + (f", {s.backend}" if s.backend else "") + (f", world size {s.world_size}" if s.world_size else "")
             + ")",
             "  T_comp = |U(compute)|, T_comm = |U(communication)| (each moment once, across streams and nesting);",
             "  exposed E = T_comm - |U(comm) & U(compute)|; overlap = |U(comm) & U(compute)| / T_comm (HTA's);",
             "  idle I = span - |U(all device events)| (HTA's temporal breakdown); times in ms",
             "  times " + ("rounded to whole microseconds (HTA's default)" if s.rounded_us
                           else "as recorded (HTA rounds each event inward to whole us unless "
                                "HTA_DISABLE_NS_ROUNDING=1; --hta-rounding does the same here)")]
    if any(r.device == "cpu" for r in s.ranks):
        lines.append("  CPU-only trace: communication = gloo:* annotations, compute = cpu ops off the gloo threads")
    lines.append("")
    rows = [[str(r.rank), r.device, _ms(r.total.span_s), _ms(r.total.compute_s), _ms(r.total.communication_s),
             _ms(r.total.exposed_communication_s), _pct(r.total.overlap_pct), _ms(r.total.idle_s), _by_op(r.total)]
            for r in s.ranks]
    lines += _table(["rank", "device", "span", "compute", "comm", "exposed", "overlap", "idle", "comm by op"], rows)
    if len({r.window for r in s.ranks}) == 1:
        lines.append(f"  counted: {s.ranks[0].window}")
    else:
        lines += [f"  counted on rank {r.rank}: {r.window}" for r in s.ranks[:8]]
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
    lines.append("")
    if not s.rows:
        lines.append("collectives: none with sizes recorded (record_param_comms or gloo annotations with "
                     "Input Dims)" + (f"; {s.calls_dropped} call(s) without a size or a kernel" if s.calls_dropped
                                      else ""))
        return "\n".join(lines)
    lines.append("collectives (S as nccl-tests counts it; t = median over the calls of the fastest traced rank's "
                 "kernel time; algbw = S/t; busbw = algbw * f(op, P))")
    head = ["op", "P", "dtype", "S", "calls", "t", "algbw", "busbw"]
    preds = predictions or []
    if model is not None:
        head += ["predicted", "error"]
    body = []
    for i, r in enumerate(s.rows):
        cells = [r.op.value, str(r.group_size), r.dtype, format_bytes(r.size_bytes), str(r.count),
                 format_seconds(r.time_s),
                 format_rate(r.algbw_bytes_per_s) if r.algbw_bytes_per_s is not None else "-",
                 format_rate(r.busbw_bytes_per_s) if r.busbw_bytes_per_s is not None else "-"]
        if model is not None:
            p = preds[i]
            cells += [format_seconds(p.predicted_s) if p.predicted_s is not None else "-",
                      f"{100 * p.error:+.1f}%" if p.error is not None else "-"]
        body.append(cells)
    lines += _table(head, body)
    if len(s.ranks) == 1:
        lines.append("  one rank traced: a kernel's time includes waiting for the other ranks to arrive "
                     "(trace every rank of the group to take the fastest)")
    if any(c.group_size_source == "world_size" for c in s.calls):
        lines.append("  P from the trace's world size where a call records no group size")
    if s.calls_dropped:
        lines.append(f"  {s.calls_dropped} recorded call(s) left out: no size in their arguments, an impossible size or "
                     "group size (negative, past 1 EiB, not 1 to 10**6 ranks), or no kernel found")
    if model is not None:
        lines.append("")
        lines.append(f"model: {model.describe()}")
        refused = [p for p in preds if p.predicted_s is None]
        for p in refused[:3]:
            lines.append(f"  not priced: {p.row.op.value} {format_bytes(p.row.size_bytes)} on {p.row.group_size}: "
                         f"{p.reason}")
        m = median_abs_error(preds)
        priced = sum(1 for p in preds if p.error is not None)
        lines.append("median |error| = median over rows of |predicted - t| / t: "
                     + (f"{100 * m:.1f}% over {priced} row(s)" if m is not None else "no row priced"))
    return "\n".join(lines)
