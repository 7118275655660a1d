"""``commcost search --html FILE``: the search as one offline page, built from ``search --json``'s dict.

Shows step against memory for the layouts that fit (a sample of the search's arrays where many, and
the Pareto front over all of them), the ranked results, the winner and the fastest, the published
recipe priced beside them, the top results as a table with each ``commcost plan`` command ready to
copy, and the winner's step and memory as ``plan --html`` draws them. Every number of a result is
the dict's (docs/report.md); the cloud and the front are the search's arrays (``SearchResult.points``),
which ``--json`` does not carry, and are labelled so.
"""

from __future__ import annotations

from commcost.report.html._page import (escape, finite, fmt_bytes, fmt_s, kv_list, legend, nbytes, num, page,
                                        pct, seconds, section, table, copy_code)
from commcost.report.html._svg import Axis, Chart
from commcost.report.html.plan import plan_body
from commcost.report.search import pareto_front

__all__ = ["search_html", "feasible_sample", "SAMPLE_POINTS"]

SAMPLE_POINTS = 2000
"""Feasible layouts drawn in the cloud at most (evenly spaced in the search's order); the front is drawn whole."""


def feasible_sample(points: dict | None, n: int = SAMPLE_POINTS) -> dict | None:
    """From the search's arrays (``SearchResult.points``: ``step_s``, ``memory_high_bytes`` of every
    feasible layout): ``n`` of them evenly spaced, and the Pareto front of all of them
    (:func:`commcost.report.search.pareto_front`), as lists; None without points."""
    if not points:
        return None
    import numpy as np

    step, mem = np.asarray(points.get("step_s", [])), np.asarray(points.get("memory_high_bytes", []))
    if not len(step):
        return None
    take = np.unique(np.linspace(0, len(step) - 1, min(len(step), n)).astype(int))
    front = pareto_front(mem, step)
    return {"total": int(len(step)), "memory_high_bytes": mem[take].tolist(), "step_s": step[take].tolist(),
            "front_memory_high_bytes": mem[front].tolist(), "front_step_s": step[front].tolist()}


def _scatter_extent(d: dict, sample: dict | None) -> tuple[list, list]:
    """Every memory (x) and every finite positive step (y) the scatter draws: the sample and its front, the
    results (and their band's upper edge), the published and the fastest layouts, the card's capacity."""
    res = d.get("results") or []
    xs, ys = [], []
    if sample:
        xs += sample["memory_high_bytes"] + sample["front_memory_high_bytes"]
        ys += sample["step_s"] + sample["front_step_s"]
    for r in res:
        xs.append(r["memory_high_bytes"])
        ys.append(r["step_s"])
        if finite(r.get("robust_step_s")):
            ys.append(r["robust_step_s"])
    cap = res[0]["memory"]["capacity_bytes"] if res else None
    pub, fast = d.get("published"), d.get("fastest")
    for o in (pub, fast):
        if o:
            xs.append(o["memory_high_bytes"])
            ys.append(o["step_s"])
    if cap:
        xs.append(cap)
    ys = [y for y in ys if finite(y) and y > 0]
    return xs, ys


def _scatter(d: dict, sample: dict | None) -> str:
    res = d.get("results") or []
    cap = res[0]["memory"]["capacity_bytes"] if res else None
    pub, fast = d.get("published"), d.get("fastest")
    xs, ys = _scatter_extent(d, sample)
    if not xs or not ys:
        return "<p>no layout fits: nothing to draw</p>"
    ylo, yhi = min(ys), max(ys)
    log = yhi / ylo > 3
    pad = (yhi - ylo) * 0.06 or ylo * 0.05
    y = Axis(ylo / 1.15 if log else max(ylo - pad, 0), yhi * 1.15 if log else yhi + pad,
             "step time (s" + (", log scale)" if log else ")"), log=log, fmt=lambda v: f"{v:g}")
    x = Axis(0.0, max(xs) * 1.05, "memory per GPU, upper estimate (GB = 1e9 bytes)",
             fmt=lambda v: f"{v / 1e9:g}")
    ch = Chart(x, y, height=330, title=f"{d['model']}: step against memory per GPU")
    items = []
    if sample:
        for m, s in zip(sample["memory_high_bytes"], sample["step_s"]):
            ch.point(m, s, colour="#999999", r=1.6, opacity=0.35)
        ch.line(list(zip(sample["front_memory_high_bytes"], sample["front_step_s"])), colour="#0072B2",
                markers=True, tip="Pareto front: no other layout that fits has both a shorter step and less memory")
        items.append(("#999999", f"fits: {len(sample['step_s']):,} of {sample['total']:,} layouts "
                                 "(evenly spaced sample of the search's arrays)"))
        items.append(("#0072B2", f"Pareto front over all {sample['total']:,} ({len(sample['front_step_s'])} layouts)"))
    if cap:
        ch.vline(cap, tip=f"GPU memory {fmt_bytes(cap)} (memory.capacity_bytes)", label=f"card {fmt_bytes(cap)}")
    for r in res[1:]:
        ch.point(r["memory_high_bytes"], r["step_s"], colour="#E69F00", r=3.4,
                 tip=f"#{r['rank']}: step {fmt_s(r['step_s'])}, memory {fmt_bytes(r['memory_high_bytes'])}")
    if res:
        items.append(("#E69F00", f"results 2-{len(res)} (ranked)"))
    if fast and not fast.get("is_first"):
        ch.point(fast["memory_high_bytes"], fast["step_s"], colour="#CC79A7", r=4.5, shape="square",
                 tip=f"fastest nominal step {fmt_s(fast['step_s'])}"
                     + (" (fragile: short of the memory headroom)" if fast.get("memory_fragile") else ""))
        items.append(("#CC79A7", "fastest nominal step (not ranked first)"))
    if pub:
        ch.point(pub["memory_high_bytes"], pub["step_s"], colour="#009E73", r=4.5, shape="square",
                 tip=f"published layout {pub['id']}: step priced {fmt_s(pub['step_s'])}")
        items.append(("#009E73", f"published layout ({escape(pub['id'])}), as priced here"))
    if res:
        w = res[0]
        if finite(w.get("robust_step_s")):
            ch.point(w["memory_high_bytes"], w["robust_step_s"], colour="#D55E00", r=3.0, shape="square",
                     tip=f"winner at its band's upper edge {fmt_s(w['robust_step_s'])} (the ranked quantity)")
            items.append(("#D55E00", "winner at its measured band's upper edge (ranked by)"))
        ch.point(w["memory_high_bytes"], w["step_s"], colour="#C00000", r=8, shape="star",
                 tip=f"winner: step {fmt_s(w['step_s'])}, memory {fmt_bytes(w['memory_high_bytes'])}")
        items.append(("#C00000", "winner (rank 1)"))
    return f"<figure>{ch.svg()}{legend(items)}</figure>"


def _winner(d: dict) -> str:
    res = d["results"]
    w = res[0]
    rows = [("step", seconds(w["step_s"], key="winner.step_s", tip="results[0].step_s: the plan of the winner")),
            ("tokens/s/GPU", num(w["tokens_per_s_per_gpu"], f"{w['tokens_per_s_per_gpu']:,.0f}",
                                 tip="results[0].tokens_per_s_per_gpu")),
            ("MFU", pct(w["mfu"], tip="results[0].mfu")),
            ("memory (upper end on the card)", nbytes(w["memory_high_bytes"], tip="results[0].memory_high_bytes")
             + f" of {nbytes(w['memory']['capacity_bytes'])}")]
    iv = w.get("step_interval_s")
    if isinstance(iv, list) and len(iv) == 2 and all(finite(v) for v in iv):
        cov = w.get("step_interval_coverage")
        rows.insert(1, ("prediction interval" + (f" ({cov:.0%} of runs)" if finite(cov) else ""),
                        f"{seconds(iv[0], key='winner.step_interval_s[0]')} - "
                        f"{seconds(iv[1], key='winner.step_interval_s[1]')}"))
    if finite(w.get("robust_step_s")):
        rows.insert(1, ("step at the band's upper edge", seconds(w["robust_step_s"], key="winner.robust_step_s",
                                                                  tip="results[0].robust_step_s: every collective at "
                                                                      "its class's slowest measured cluster")))
    if w.get("usd_per_million_tokens") is not None:
        rows.append(("$ per million tokens", num(w["usd_per_million_tokens"], f"${w['usd_per_million_tokens']:.3f}")))
    out = kv_list(rows) + copy_code(w["plan_command"], "cmd-winner")
    for key, label in (("why_best", "why it wins"), ("why_not_fastest", "why not the fastest")):
        if d.get(key):
            out += f"<p><b>{label}:</b> {escape(d[key])}</p>"
    return out


def _published(d: dict) -> str:
    p = d.get("published")
    if not p:
        return ""
    rows = [("run", escape(f"{p['id']} ({p['stack']} on {p['system']})")),
            ("measured (the source)", escape(p["source"])),
            ("predicted step", seconds(p["step_s"], key="published.step_s", tip="published.step_s: its layout "
                                       "priced with this search's inputs")),
            ("memory", nbytes(p["memory_high_bytes"], tip="published.memory_high_bytes")
             + (" (does not fit)" if not p["memory_fits"] else " (fragile)" if p["memory_fragile"] else ""))]
    if finite(p.get("robust_step_s")):
        rows.append(("predicted at the band's upper edge", seconds(p["robust_step_s"])))
    if finite(p.get("gap")):
        rows.append(("against the winner", num(p["gap"], f"{p['gap']:+.1%}", tip="published.step_s / winner's step - 1")))
    if p.get("why"):
        rows.append(("why", escape(p["why"])))
    return section("The published recipe", kv_list(rows) + copy_code(p["plan_command"], "cmd-published"),
                   ident="published")


def _top_table(d: dict) -> str:
    rows = []
    for r in d["results"]:
        flags = []
        if r.get("memory_fragile"):
            flags.append("fragile memory")
        if r.get("pareto") is False:
            flags.append("off the front")
        i = r["rank"] - 1
        iv = r.get("step_interval_s")
        rows.append([num(r["rank"]), seconds(r["step_s"], key=f"results[{i}].step_s"),
                     seconds(r["robust_step_s"]) if finite(r.get("robust_step_s")) else "",
                     f"{seconds(iv[0], key=f'results[{i}].step_interval_s[0]')} - "
                     f"{seconds(iv[1], key=f'results[{i}].step_interval_s[1]')}"
                     if isinstance(iv, list) and len(iv) == 2 and all(finite(v) for v in iv) else "",
                     num(r["tokens_per_s_per_gpu"], f"{r['tokens_per_s_per_gpu']:,.0f}"), pct(r["mfu"]),
                     nbytes(r["memory_high_bytes"]), escape(", ".join(flags)),
                     copy_code(r["plan_command"], f"cmd-{r['rank']}")])
    return table(["#", "step", "upper edge", "prediction interval", "tok/s/GPU", "MFU", "memory", "",
                  "commcost plan command"], rows, right={0, 1, 2, 3, 4, 5, 6}, wide={8})


def search_html(d: dict, sample: dict | None = None) -> str:
    """The whole page of ``search --json``'s dict ``d`` (``sample``: :func:`feasible_sample` of the search's
    arrays, for the cloud and the front; without it the chart shows the ranked results alone)."""
    inf = d["infeasible"]
    counts = kv_list([
        ("evaluated", num(d["evaluated"], f"{d['evaluated']:,}", key="evaluated")),
        ("fit in memory", num(d["feasible"], f"{d['feasible']:,}", key="feasible")),
        ("do not fit", f"{num(inf['model_states_exceed_memory'], format(inf['model_states_exceed_memory'], ','))} "
                       f"model states alone, {num(inf['activations_exceed_memory'], format(inf['activations_exceed_memory'], ','))}"
                       " with activations and buffers"),
        ("searched in", num(d["elapsed_s"], f"{d['elapsed_s']:.2f} s", tip="wall time")),
        ("ranking", escape(d["ranking"]))])
    if d.get("interrupted"):
        counts += '<p class="warn">interrupted: the best of the configurations priced so far</p>'
    body = section("The space", counts, ident="space")
    if not d.get("results"):
        body += section("Result", "<p>no configuration fits in memory</p>")
    else:
        body += section("Step against memory", _scatter(d, sample), ident="scatter")
        body += section("The winner", _winner(d), ident="winner")
        body += _published(d)
        body += section("Top results", _top_table(d), ident="top")
        detail = plan_body(d["results"][0]).replace('data-key="', 'data-key="results[0].')
        body += (f'<section id="winner-detail"><h2>The winner in detail</h2><details open><summary>step, memory, '
                 f"collectives and advice of rank 1, as <code>commcost plan</code> prints them</summary>{detail}"
                 "</details></section>")
    gpus = d["gpus"]
    g = f"{gpus[0]}" if len(gpus) == 1 else f"{gpus[0]}-{gpus[-1]}"
    sub = (f"{g} GPUs, seq {d['seq']}, global batch {d['global_batch']}, objective {d['objective']}, "
           f"stack {d['stack']}" + (f"; fixed {d['fixed']}" if d.get("fixed") else ""))
    return page(title=f"commcost search: {d['model']}", subtitle=sub, body=body, kind="search")
