"""``commcost trace --html FILE``: a trace's analysis as one offline page, built from ``trace --json``'s dict.

Shows each rank's steps split into compute, compute under communication, exposed communication and
idle time (ProfilerStep after ProfilerStep; within a step the parts are totals, not the order of the
kernels), each collective instance split into waiting and moving data on every rank (with several
ranks), the advice ranked by its gain, and each collective measured against the model's prediction.
Every number is the dict's (docs/report.md).
"""

from __future__ import annotations

import os

from commcost.report.html._page import (escape, finite, fmt_s, kv_list, legend, nbytes, num, page, pct, seconds,
                                        section, table)
from commcost.report.html._svg import Axis, Chart, label_margin

__all__ = ["trace_html"]

_PARTS = (("compute alone", "#0072B2"), ("compute under communication", "#56B4E9"),
          ("exposed communication", "#D55E00"), ("idle", "#DDDDDD"))

MAX_LANES = 32
"""Ranks drawn in the per-rank chart at most (the slowest first when there are more)."""

MAX_INSTANCE_ROWS = 48
"""Bars in the waiting-against-moving chart at most."""


def _split(b: dict) -> list[float]:
    """A step's (or a rank's) parts that add up to its span (to the other work's overlap): compute not
    under communication ``compute_s - overlap_s``, ``overlap_s``, ``exposed_communication_s``, ``idle_s``."""
    return [b["compute_s"] - b["overlap_s"], b["overlap_s"], b["exposed_communication_s"], b["idle_s"]]


def _tip(name: str, v: float, key: str) -> str:
    formulas = {"compute alone": "compute_s - overlap_s", "compute under communication": "overlap_s (HTA's overlap)",
                "exposed communication": "exposed_communication_s (communication with no compute beside it)",
                "idle": "idle_s (no kernel on the device)"}
    return f"{name}: {fmt_s(v)} = {key}.{formulas[name]}"


def _ranks_chart(d: dict) -> str:
    ranks = d.get("ranks") or []
    if not ranks:
        return "<p>no rank read</p>"
    shown = sorted(ranks, key=lambda r: -r["span_s"])[:MAX_LANES] if len(ranks) > MAX_LANES else ranks
    shown = sorted(shown, key=lambda r: r["rank"])
    lanes = [f"rank {r['rank']}" for r in shown]
    ends = []
    for r in shown:
        steps = r.get("steps") or []
        ends.append(sum(s["span_s"] for s in steps) if steps else r["span_s"])
    xmax = max(ends) * 1.02 or 1.0
    ms = xmax < 2
    x = Axis(0.0, xmax, "time from the first step (ms)" if ms else "time from the first step (s)",
             fmt=(lambda v: f"{v * 1e3:g}") if ms else (lambda v: f"{v:g}"))
    ch = Chart(x, Axis(0.0, float(len(shown)), ""), height=60 + 26 * len(shown), row_labels=lanes,
               left=64, title="per rank: each ProfilerStep's compute, communication and idle time")
    for i, r in enumerate(shown):
        row = len(shown) - 1 - i  # rank 0 on top
        lanes[row] = f"rank {r['rank']}"
        t = 0.0
        steps = r.get("steps") or [dict(r, step="all")]
        for s in steps:
            key = f"ranks[{ranks.index(r)}].steps[step {s['step']}]"
            for (name, colour), v in zip(_PARTS, _split(s)):
                if v > 0:
                    ch.rect(t, t + v, row + 0.15, row + 0.85, colour=colour,
                            tip=f"rank {r['rank']}, step {s['step']}: " + _tip(name, v, key))
                    t += v
            t = max(t, sum(_split(s)))
            ch.rect(t, t + 0.0, row + 0.1, row + 0.9, colour="#222", tip=f"end of step {s['step']}")
    ch.row_labels = lanes
    note = "" if len(shown) == len(ranks) else f" ({len(shown)} of {len(ranks)} ranks, the longest spans)"
    return (f"<figure>{ch.svg()}{legend([(c, escape(n)) for n, c in _PARTS])}</figure>"
            f"<p class=note>Within a step the parts are its totals laid end to end, not the order of the kernels"
            f"{escape(note)}.</p>")


def _ranks_table(d: dict) -> str:
    rows = []
    for i, r in enumerate(d.get("ranks") or []):
        rows.append([num(r["rank"]), escape(r.get("device", "")),
                     seconds(r["compute_s"], key=f"ranks[{i}].compute_s", tip="device time in compute kernels"),
                     seconds(r["communication_s"], key=f"ranks[{i}].communication_s",
                             tip="device time in communication kernels"),
                     seconds(r["exposed_communication_s"], key=f"ranks[{i}].exposed_communication_s",
                             tip="communication with no compute running beside it (HTA's definition)"),
                     seconds(r["overlap_s"], key=f"ranks[{i}].overlap_s", tip="communication under compute"),
                     num(r["overlap_pct"], None if r["overlap_pct"] is None else f"{r['overlap_pct']:.1f}%",
                         tip="overlap_s / communication_s"),
                     seconds(r["idle_s"], key=f"ranks[{i}].idle_s", tip="no kernel running"),
                     seconds(r["span_s"], key=f"ranks[{i}].span_s", tip="first to last kernel"),
                     seconds(r["exposed_waiting_s"]) if finite(r.get("exposed_waiting_s")) else "",
                     seconds(r["exposed_moving_s"]) if finite(r.get("exposed_moving_s")) else "",
                     escape(r.get("window") or "")])
    return table(["rank", "device", "compute", "comm", "exposed comm", "overlap", "overlap %", "idle", "span",
                  "exposed waiting", "exposed moving", "window"], rows, right=set(range(0, 11)) - {1}, wide={11},
                 caption="per rank, over the steps read (docs/trace.md)")


def _wait_transfer(d: dict) -> str:
    cross = d.get("cross_rank")
    if not cross:
        return ("<p>One rank: waiting and moving data cannot be told apart without the other ranks' traces "
                "(give a directory with one trace per rank).</p>")
    inst = cross.get("instances") or []
    nranks = max((len(i["ranks"]) for i in inst), default=0)
    per_rank = nranks <= 8
    rows = []
    for k, it in enumerate(inst):
        if per_rank:
            rows += [(k, it, w) for w in it["ranks"]]
        else:
            rows.append((k, it, max(it["ranks"], key=lambda w: w["wait_s"])))
    rows = rows[:MAX_INSTANCE_ROWS]
    if not rows:
        return "<p>no collective matched across ranks</p>"
    xmax = max(w["wait_s"] + it["transfer_s"] for _, it, w in rows) * 1.04 or 1.0
    ms = xmax < 2
    x = Axis(0.0, xmax, "time in the collective (ms)" if ms else "time in the collective (s)",
             fmt=(lambda v: f"{v * 1e3:g}") if ms else (lambda v: f"{v:g}"))
    labels = [""] * len(rows)
    longest = max(len(f"{it['op']} #{it['index']} r{w['rank']}") for _, it, w in rows)
    ch = Chart(x, Axis(0.0, float(len(rows)), ""), height=56 + 20 * len(rows), row_labels=labels,
               left=label_margin(["x" * longest]),
               title="each collective instance: waiting for the last rank, then moving data"
                     + ("" if per_rank else " (the rank that waited longest)"))
    for j, (k, it, w) in enumerate(rows):
        row = len(rows) - 1 - j
        labels[row] = f"{it['op']} #{it['index']} " + (f"r{w['rank']}" if per_rank else "max")
        ch.rect(0.0, w["wait_s"], row + 0.15, row + 0.85, colour="#BBBBBB",
                tip=f"rank {w['rank']} waits {fmt_s(w['wait_s'])} (cross_rank.instances[{k}].ranks[].wait_s: "
                    "the last rank's arrival minus this rank's, on aligned clocks)")
        ch.rect(w["wait_s"], w["wait_s"] + it["transfer_s"], row + 0.15, row + 0.85, colour="#D55E00",
                tip=f"moving data {fmt_s(it['transfer_s'])} (cross_rank.instances[{k}].transfer_s: from the "
                    f"last arrival to the end); straggler rank {it['straggler_rank']}")
    note = "" if len(rows) == sum(len(i["ranks"]) if per_rank else 1 for i in inst) else \
        f"<p class=note>the first {len(rows)} bars shown</p>"
    per = [[num(p["rank"]), seconds(p["wait_s"], tip="sum of this rank's waits"),
            seconds(p["transfer_s"], tip="sum of the instances' transfers"), num(p["straggler_count"])]
           for p in cross.get("per_rank") or []]
    return (f"<figure>{ch.svg()}{legend([('#BBBBBB', 'waiting'), ('#D55E00', 'moving data')])}</figure>{note}"
            + table(["rank", "waiting", "moving data", "last to arrive (instances)"], per, right={0, 1, 2, 3}))


def _advice(d: dict) -> str:
    adv = sorted(d.get("advice") or [], key=lambda a: -(a.get("gain_s") or 0.0))
    where = {id(a): i for i, a in enumerate(d.get("advice") or [])}
    if not adv:
        return "<p>nothing stands out</p>"
    xmax = max(a["gain_s"] for a in adv) * 1.05 or 1.0
    ms = xmax < 2
    x = Axis(0.0, xmax, "gain per step, at most (ms)" if ms else "gain per step, at most (s)",
             fmt=(lambda v: f"{v * 1e3:g}") if ms else (lambda v: f"{v:g}"))
    labels = [a["kind"].replace("_", " ") for a in adv][::-1]
    ch = Chart(x, Axis(0.0, float(len(adv)), ""), height=56 + 24 * len(adv), row_labels=labels,
               left=label_margin(labels),
               title="advice ranked by the time it could save")
    for j, a in enumerate(adv):
        row = len(adv) - 1 - j
        ch.rect(0.0, a["gain_s"], row + 0.2, row + 0.8, colour="#009E73",
                tip=f"{a['kind']}: up to {fmt_s(a['gain_s'])} per step (advice[].gain_s: {a['why']})")
    items = "".join(f"<li><b>{escape(a['what'])}</b>: up to "
                    f"{seconds(a['gain_s'], key=f'advice[{where[id(a)]}].gain_s', tip='advice[].gain_s')} per step. "
                    f"{escape(a['why'])}</li>" for a in adv)
    return f"<figure>{ch.svg()}</figure><ol>{items}</ol>"


def _predicted(d: dict) -> str:
    rows, pts = [], []
    for i, c in enumerate(d.get("collectives") or []):
        if c.get("size_bytes") is None:
            continue
        meas, pred = c.get("measured_s", c.get("time_s")), c.get("predicted_s")
        rows.append([escape(c["op"]), nbytes(c["size_bytes"]), num(c["group_size"]), num(c["count"]),
                     seconds(c["time_s"], key=f"collectives[{i}].time_s", tip="median kernel time per call"),
                     seconds(c["transfer_s"], tip="moving data, across ranks") if finite(c.get("transfer_s")) else "",
                     seconds(pred, key=f"collectives[{i}].predicted_s",
                             tip=f"the CommModel: {c.get('algorithm')} ({c.get('reason')})") if finite(pred) else "",
                     num(c["error"], f"{c['error']:+.1%}", tip="predicted / measured - 1") if finite(c.get("error")) else "",
                     escape(c.get("measured") or "")])
        if finite(meas) and finite(pred) and meas > 0 and pred > 0:
            pts.append((meas, pred, c))
    out = ""
    if pts:
        vals = [v for m, p, _ in pts for v in (m, p)]
        lo, hi = min(vals) / 2, max(vals) * 2
        ax = dict(log=True, fmt=lambda v: fmt_s(v))
        ch = Chart(Axis(lo, hi, "measured per call (s, log scale)", **ax),
                   Axis(lo, hi, "predicted (s, log scale)", **ax), height=320, left=70,
                   title="each collective: predicted against measured")
        ch.line([(lo, lo), (hi, hi)], colour="#888", dash="4 3", tip="predicted = measured")
        for m, p, c in pts:
            ch.point(m, p, colour="#0072B2", r=4,
                     tip=f"{c['op']} {c['size_bytes']:,} bytes over {c['group_size']}: measured {fmt_s(m)} "
                         f"({c.get('measured')}), predicted {fmt_s(p)}")
        out += f"<figure>{ch.svg()}</figure>"
        if finite(d.get("median_abs_error")):
            out += kv_list([("median |error|", pct(d["median_abs_error"], key="median_abs_error",
                                                   tip="median over the rows of |predicted / measured - 1|"))])
    elif not d.get("model"):
        out += "<p>no model given: pass --system, --profile or --bw/--latency to price each collective</p>"
    out += table(["op", "size", "group", "calls", "measured", "moving", "predicted", "error", "measured as"], rows,
                 right={1, 2, 3, 4, 5, 6, 7})
    return out


def trace_html(d: dict) -> str:
    """The whole page of ``trace --json``'s dict ``d``."""
    ranks = d.get("ranks") or []
    head_rows = [("backend", escape(str(d.get("backend")))), ("world size", num(d.get("world_size") or 0)),
                 ("rank files read", num(len(ranks))),
                 ("collective calls", f"{num(d.get('calls', 0))} ({num(d.get('calls_dropped', 0))} with no size or "
                                      "kernel, not timed)")]
    if ranks:
        worst = max(range(len(ranks)), key=lambda i: ranks[i]["exposed_communication_s"])
        r = ranks[worst]
        head_rows.insert(0, (f"exposed communication (rank {r['rank']}, the most)",
                             seconds(r["exposed_communication_s"], key="exposed_communication_s",
                                     tip=f"ranks[{worst}].exposed_communication_s: communication with no compute "
                                         "beside it")))
    strag = d.get("stragglers") or {}
    if strag.get("slowest_rank") is not None:
        head_rows.append(("slowest rank", num(strag["slowest_rank"])))
    for f in d.get("failed_ranks") or []:
        head_rows.append(("not read", f'<span class="warn">{escape(f["path"])}: {escape(f["message"])}</span>'))
    body = (section("Summary", kv_list(head_rows), ident="summary")
            + section("Per rank", _ranks_chart(d) + _ranks_table(d), ident="ranks")
            + section("Waiting against moving data", _wait_transfer(d), ident="wait")
            + section("Advice", _advice(d), ident="advice")
            + section("Measured against predicted", _predicted(d), ident="predicted"))
    name = os.path.basename(str(d.get("path", "")).rstrip("/")) or str(d.get("path"))
    return page(title=f"commcost trace: {name}", subtitle=str(d.get("path")), body=body, kind="trace")
