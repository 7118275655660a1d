"""``commcost timeline --html FILE``: the DDP bucket timeline as one offline page, built from ``timeline --json``'s dict.

Shows the bucket schedule on the communication stream against the forward and backward pass on the
compute stream, the exposed time against the bucket cap (with ``--bucket auto``: the sweep's curve,
PyTorch's default and the range within tolerance), and the recommendation. Every number is the
dict's (docs/report.md).
"""

from __future__ import annotations

from commcost.report.html._page import (escape, finite, fmt_bytes, fmt_s, kv_list, legend, nbytes, num, page, pct,
                                        range_text, seconds, section)
from commcost.report.html._svg import Axis, Chart

__all__ = ["timeline_html"]

MiB = 2**20


def _schedule(d: dict) -> str:
    bk = d.get("buckets") or []
    end = max([d["step_s"], d["compute_s"] + d["optimizer_s"], *(b["end_s"] for b in bk)])
    ms = end < 2
    x = Axis(0.0, end * 1.02, "time in the step (ms)" if ms else "time in the step (s)",
             fmt=(lambda v: f"{v * 1e3:g}") if ms else (lambda v: f"{v:g}"))
    ch = Chart(x, Axis(0.0, 3.0, ""), height=180, row_labels=["ready", "communication", "compute"], left=96, top=36,
               title=f"{len(bk)} buckets on one communication stream against the backward pass")
    bw0, c = d["backward_start_s"], d["compute_s"]
    ch.rect(0.0, bw0, 2.15, 2.85, colour="#9CC5E3",
            tip=f"before the last backward pass: 0 - {fmt_s(bw0)} (backward_start_s: the forward, and the earlier "
                "micro-batches under no_sync with gradient accumulation)")
    ch.rect(bw0, c, 2.15, 2.85, colour="#0072B2",
            tip=f"backward: {fmt_s(bw0)} - {fmt_s(c)} (backward_window_s = {fmt_s(d['backward_window_s'])})")
    last = max([c, *(b["end_s"] for b in bk)])
    if d["optimizer_s"] > 0:
        ch.rect(last, last + d["optimizer_s"], 2.15, 2.85, colour="#009E73",
                tip=f"optimizer {fmt_s(d['optimizer_s'])} after the last all-reduce (optimizer_s)")
    for i, b in enumerate(bk):
        colour = "#D55E00" if b["end_s"] > c else "#E69F00"
        ch.rect(b["start_s"], b["end_s"], 1.15, 1.85, colour=colour,
                tip=f"bucket {i}: {fmt_bytes(b['size_bytes'])}, ready {fmt_s(b['ready_s'])}, on the wire "
                    f"{fmt_s(b['start_s'])} - {fmt_s(b['end_s'])} (buckets[{i}])"
                    + (f"; {fmt_s(b['end_s'] - max(b['start_s'], c))} after the backward pass" if b["end_s"] > c else ""))
        ch.rect(b["ready_s"], b["ready_s"], 0.25, 0.75, colour="#555", tip=f"bucket {i} ready at {fmt_s(b['ready_s'])}")
    ch.vline(c, tip=f"end of backward: {fmt_s(c)} (compute_s)", label="backward ends")
    ch.vline(d["step_s"], colour="#C00000", tip=f"step {fmt_s(d['step_s'])} (step_s = compute + exposed + optimizer)",
             label="")
    leg = legend([("#9CC5E3", "forward (and earlier micro-batches)"), ("#0072B2", "last backward pass"),
                  ("#E69F00", "bucket hidden behind backward"),
                  ("#D55E00", "bucket running past backward (exposed)"), ("#009E73", "optimizer"),
                  ("#555", "bucket ready (its gradients complete)")])
    return f"<figure>{ch.svg()}{leg}</figure>"


def _curve(d: dict) -> str:
    curve = d.get("curve") or []
    if not curve:
        return ("<p class=note>One bucket cap simulated; <code>--bucket auto</code> draws the exposed time "
                "against every cap of the sweep.</p>")
    caps = [c["bucket_bytes"] for c in curve]
    ys = [c["exposed_s"] for c in curve]
    default = d.get("pytorch_default") or {}
    best = d.get("best") or {}
    yhi = max(ys + [default.get("exposed_s", 0.0)]) * 1.1 or 1e-3
    ms = yhi < 2
    x = Axis(min(caps) / 1.3, max(caps) * 1.3, "bucket cap (MiB, log scale)", log=True, base=2.0,
             fmt=lambda v: f"{v / MiB:g}")
    x.ticks = [2.0 ** k for k in range(0, 40) if x.lo <= 2.0 ** k <= x.hi][::2]
    y = Axis(0.0, yhi, "exposed communication (ms)" if ms else "exposed communication (s)",
             fmt=(lambda v: f"{v * 1e3:g}") if ms else (lambda v: f"{v:g}"))
    ch = Chart(x, y, height=300, left=64, title="exposed time against the bucket cap")
    if finite(best.get("good_min_bucket_bytes")) and finite(best.get("good_max_bucket_bytes")):
        ch.rect(best["good_min_bucket_bytes"], best["good_max_bucket_bytes"], 0.0, yhi, colour="#009E7326",
                tip=f"caps within the tolerance {fmt_s(best.get('tolerance_s', 0.0))} of the least exposed time "
                    f"(best.good_min_bucket_bytes - best.good_max_bucket_bytes)")
    ch.line(list(zip(caps, ys)), colour="#0072B2", markers=True, tip="curve[].exposed_s: the simulated timeline per cap")
    if finite(default.get("exposed_s")):
        ch.line([(x.lo, default["exposed_s"]), (x.hi, default["exposed_s"])], colour="#888", dash="5 3",
                tip=f"PyTorch's default (25 MiB, first bucket 1 MiB): {fmt_s(default['exposed_s'])} "
                    "(pytorch_default.exposed_s)")
    if finite(best.get("bucket_bytes")):
        ch.point(best["bucket_bytes"], best["exposed_s"], colour="#C00000", r=8, shape="star",
                 tip=f"recommended {fmt_bytes(best['bucket_bytes'])}: exposed {fmt_s(best['exposed_s'])} (best)")
    leg = legend([("#0072B2", "exposed time at each cap"), ("#888", "PyTorch's default"),
                  ("#009E7340", "within tolerance of the least"), ("#C00000", "recommended")])
    return f"<figure>{ch.svg()}{leg}</figure>"


def _recommendation(d: dict) -> str:
    best, adv = d.get("best"), d.get("bucket_advice")
    rows = []
    if best:
        rows += [("recommended cap", num(best["bucket_bytes"], f"{best['bucket_bytes'] / MiB:g} MiB",
                                         key="best.bucket_bytes", tip=best.get("rule", ""))),
                 ("its exposed time", seconds(best["exposed_s"], key="best.exposed_s")),
                 ("its step", seconds(best["step_s"], key="best.step_s"))]
        if best.get("good_bucket_bytes"):
            rows.append(("caps as good", escape(", ".join(f"{b / MiB:.3g} MiB" for b in best["good_bucket_bytes"]))))
        rows.append(("rule", escape(best.get("rule", ""))))
    elif adv:
        rows += [("recommended cap", num(adv["recommended_bytes"], f"{adv['recommended_bytes'] / MiB:g} MiB",
                                         key="bucket_advice.recommended_bytes", tip=adv.get("rule", ""))),
                 ("its exposed time", seconds(adv["exposed_s"], key="bucket_advice.exposed_s")),
                 ("with DDP's default", seconds(adv["default_exposed_s"])),
                 ("rule", escape(adv.get("rule", "")))]
    default = d.get("pytorch_default")
    if default:
        rows.append(("PyTorch's default (25 MiB)", f"exposes {seconds(default['exposed_s'])}, step "
                                                   f"{seconds(default['step_s'])}"))
    return kv_list(rows) if rows else "<p>no recommendation</p>"


def timeline_html(d: dict) -> str:
    """The whole page of ``timeline --json``'s dict ``d``."""
    head = [("message (all gradients)", nbytes(d["message_bytes"], key="message_bytes", tip="N x bytes per gradient")),
            ("bucket cap shown", num(d["bucket_bytes"], f"{d['bucket_bytes'] / MiB:g} MiB", key="bucket_bytes")),
            ("compute", seconds(d["compute_s"], key="compute_s", tip="--step-ms x micro-batches")),
            ("backward window", seconds(d["backward_window_s"], key="backward_window_s",
                                        tip="the backward share of the last micro-batch")),
            ("on the wire", seconds(d["wire_s"], key="wire_s", tip="sum of the buckets' all-reduce times")),
            ("exposed", seconds(d["exposed_s"], key="exposed_s", tip="step - compute - optimizer: not hidden")),
            ("overlap", pct(d["overlap_fraction"], key="overlap_fraction", tip="1 - exposed / wire")),
            ("step", seconds(d["step_s"], key="step_s", tip="compute + exposed + optimizer")),
            ("efficiency", pct(d["efficiency"], key="efficiency", tip="compute / step")),
            ("bounds", f"{seconds(d['bounds']['perfect_overlap_s'], tip='bounds.perfect_overlap_s: every bucket hidden')}"
                       f" - {seconds(d['bounds']['no_overlap_s'], tip='bounds.no_overlap_s: compute + wire')}")]
    if d.get("step_band_s"):
        head.append(("measured band (step)", escape(range_text(d["step_band_s"], "s") or "")
                     + f" <span class=note>({escape(str(d.get('band_class')))} r = "
                       f"{escape(' - '.join(f'{r:g}' for r in d.get('band_ratios') or []))})</span>"))
    for k, v in d.items():
        if "interval" in k:
            head.append((f"prediction interval ({k})", escape(range_text(v, "s" if k.endswith("_s") else "") or str(v))))
    body = (section("The step", kv_list(head), ident="step")
            + section("Bucket schedule", _schedule(d), ident="schedule")
            + section("Exposed time against the bucket cap", _curve(d), ident="curve")
            + section("Recommendation", _recommendation(d), ident="recommendation"))
    return page(title="commcost timeline: DDP buckets against the backward pass",
                subtitle=f"{fmt_bytes(d['message_bytes'])} of gradients, {fmt_s(d['compute_s'])} of compute",
                body=body, kind="timeline")
