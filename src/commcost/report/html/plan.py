"""``commcost plan --html FILE``: the plan as one offline page, built from ``plan --json``'s dict.

Shows the step as a stacked bar (compute by operator, bubble, exposed communication per dimension,
optimizer) with its bounds, the prediction interval and the measured band where the dict has them,
memory per GPU against the card, the collectives table, the advice, the sensitivity, and the training
cost with its range. Every number is the dict's (docs/report.md); nothing here prices anything.
"""

from __future__ import annotations

from commcost.report.html._svg import PALETTE
from commcost.report.html._page import (escape, finite, fmt_bytes, fmt_s, kv_list, legend, nbytes, num,
                                        page, pct, range_text, seconds, section, stacked_bar, table)

__all__ = ["plan_html", "plan_body", "step_parts"]

_OPERATORS = {"gemm_s": "GEMMs (projections, MLP)", "attention_s": "attention core",
              "elementwise_s": "element-wise (HBM-bound)", "head_s": "output head and loss", "casts_s": "fp8 casts",
              "recompute_s": "recomputation", "offload_s": "waiting for host copies"}
"""The operator names the text report prints (commcost.report.plan)."""

_DIM_COLOURS = {"tp": "#D55E00", "cp": "#CC79A7", "ep": "#882255", "pp": "#E69F00", "dp": "#44AA99",
                "edp": "#117733", "etp": "#332288"}
"""One colour per dimension's exposed communication, apart from the blues of compute."""


def step_parts(d: dict) -> list[tuple[str, float, str, str]]:
    """The step's additive terms from the dict, ``(label, seconds, colour, formula)``: compute by operator
    (when the operators add up to ``breakdown.compute_s``), the bubble, the exposed communication of each
    dimension (``comm[].exposed_s`` summed by dimension, as the text report's ``exposed_by_dimension``), the
    optimizer."""
    b = d["breakdown"]
    ops = {k: v for k, v in (d.get("compute_by_operator") or {}).items() if finite(v) and v > 0}
    parts: list[tuple[str, float, str, str]] = []
    compute = b["compute_s"]
    if ops and abs(sum(ops.values()) - compute) <= 1e-9 * max(compute, 1e-30) + 1e-12:
        for i, (k, v) in enumerate(ops.items()):
            parts.append((f"compute: {_OPERATORS.get(k, k)}", v, ("#0072B2", "#3B8FC8", "#6FAAD6", "#9CC5E3",
                                                                  "#1F4E79", "#2E6A9E", "#5A7FA0")[i % 7],
                          f"{fmt_s(v)} = compute_by_operator.{k} (roofline of each operator at its shape, "
                          "on the slowest stage)"))
    else:
        parts.append(("compute", compute, PALETTE[0], f"{fmt_s(compute)} = breakdown.compute_s"))
    parts.append(("pipeline bubble", b["pipeline_bubble_s"], "#F0E442",
                  f"{fmt_s(b['pipeline_bubble_s'])} = breakdown.pipeline_bubble_s (1F1B (p-1)/m, interleaved "
                  "(p-1)/(v m) of the micro-batches' time)"))
    for dim, s in _exposed_by_dimension(d).items():
        parts.append((f"exposed {dim.upper()} communication", s, _DIM_COLOURS.get(dim, "#999999"),
                      f"{fmt_s(s)} = sum of comm[].exposed_s with dimension {dim}"))
    parts.append(("optimizer", b["optimizer_s"], "#999933", f"{fmt_s(b['optimizer_s'])} = breakdown.optimizer_s"))
    losses = (b.get("losses") or {}).get("total_s", 0.0)
    if losses > 0:   # the losses that grow with the job (commcost.step.losses)
        parts.append(("losses that grow with the job", losses, "#AA4499",
                      f"{fmt_s(losses)} = breakdown.losses.total_s (slowest of W ranks, communication beside "
                      "compute, the gradient norm's all-reduce, ZeRO-3 gathers after a host sync)"))
    return parts


def _exposed_by_dimension(d: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in d.get("comm") or []:
        out[row["dimension"]] = out.get(row["dimension"], 0.0) + row["exposed_s"]
    return out


_KNOWN_INTERVAL_KEYS = frozenset({"step_interval_s", "step_interval_coverage", "step_interval_ratios",
                                  "step_interval_frontier_s", "tokens_per_s_per_gpu_interval",
                                  "tflops_per_gpu_interval", "mfu_interval"})
"""The step's prediction interval as ``commcost.analyses.interval`` writes it (docs/plan.md, "Prediction
interval"); any other key with ``interval`` in its name is shown as written (:func:`_intervals`)."""


def _pair_is(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2 and all(finite(x) for x in v)


def _step_interval(d: dict) -> list[tuple[str, str]]:
    """The step's prediction interval and the rates it carries to, each end marked with its JSON key."""
    iv = d.get("step_interval_s")
    if not _pair_is(iv):
        return []
    cov = d.get("step_interval_coverage")
    ratios = d.get("step_interval_ratios")
    how = (f"the step x the held-out ratios r = {ratios[0]:g}-{ratios[1]:g} (step_interval_ratios: measured / "
           "predicted on published runs, each project predicted without its own runs); docs/plan.md"
           if _pair_is(ratios) else "docs/plan.md, prediction interval")
    label = "prediction interval" + (f" ({cov:.0%} of runs)" if finite(cov) else "")
    rows = [(label, f"{seconds(iv[0], key='step_interval_s[0]', tip=how)} - "
                    f"{seconds(iv[1], key='step_interval_s[1]', tip=how)}")]
    tok, mfu = d.get("tokens_per_s_per_gpu_interval"), d.get("mfu_interval")
    if _pair_is(tok):
        rows.append(("  tokens/s/GPU", f"{num(tok[0], f'{tok[0]:,.0f}', key='tokens_per_s_per_gpu_interval[0]')} - "
                                        f"{num(tok[1], f'{tok[1]:,.0f}', key='tokens_per_s_per_gpu_interval[1]')}"))
    if _pair_is(mfu):
        rows.append(("  MFU", f"{pct(mfu[0], key='mfu_interval[0]')} - {pct(mfu[1], key='mfu_interval[1]')}"))
    front = d.get("step_interval_frontier_s")
    if finite(front):
        rows.append(("  above the best published MFU",
                     f"the interval starts at {seconds(front, key='step_interval_frontier_s')}, the step at that "
                     "MFU: no public run has been this fast, so budget on the interval, not on the point"))
    return rows


def _intervals(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Every other prediction interval the dict carries (keys with ``interval`` in their name, beside
    :data:`_KNOWN_INTERVAL_KEYS`; shown as written), as ``(key, text)``."""
    out = []
    for k, v in d.items():
        if "interval" not in k or k in _KNOWN_INTERVAL_KEYS:
            continue
        unit = "s" if k.endswith("_s") else ("bytes" if k.endswith("_bytes") else "")
        text = range_text(v, unit)
        if text is None and isinstance(v, dict):
            inner = _intervals({f"{k}.{kk}": vv for kk, vv in v.items()}, "")
            out += [(prefix + kk, t) for kk, t in inner]
            text = ", ".join(f"{kk} {vv}" for kk, vv in v.items() if isinstance(vv, (int, float, str)))
        out.append((prefix + k, escape(text if text is not None else str(v))))
    return out


def _headline(d: dict) -> str:
    b = d["bounds"]
    cells = [
        ("step", seconds(d["step_s"], key="step_s",
                         tip="step_s = compute + pipeline bubble + exposed communication + optimizer")),
        ("tokens/s/GPU", num(d["tokens_per_s_per_gpu"], f"{d['tokens_per_s_per_gpu']:,.0f}",
                              key="tokens_per_s_per_gpu", tip="global batch x seq / (step x GPUs)")),
        ("model TFLOP/s/GPU", num(d["tflops_per_gpu"], f"{d['tflops_per_gpu']:,.0f}", key="tflops_per_gpu",
                                  tip="model_flops_per_step / (step x GPUs) / 1e12")),
        ("MFU", pct(d["mfu"], key="mfu", tip=d.get("mfu_convention", ""))),
    ]
    head = '<div class="head">' + "".join(f"<div>{escape(k)}<b>{v}</b></div>" for k, v in cells) + "</div>"
    rows = [("if every collective hid", seconds(b["all_hidden_s"], key="bounds.all_hidden_s",
                                                 tip="compute + bubble + optimizer (perfect overlap)")),
            ("if none did", seconds(b["no_overlap_s"], key="bounds.no_overlap_s",
                                    tip="every collective's wire time added to the step (no overlap)")),
            ("on the wire", seconds(b["wire_s"], key="bounds.wire_s", tip="sum of comm[].time_s"))]
    if d.get("step_band_s"):
        lo, hi = d["step_band_s"]
        rows.append(("measured band", f"{seconds(lo, key='step_band_s[0]')} - {seconds(hi, key='step_band_s[1]')}"
                     f" <span class=note>(every collective x its class's ratio r on measured clusters: "
                     f"{escape(', '.join(f'{c} {a:g}-{z:g}' for c, (a, z) in (d.get('band_ratios') or {}).items()))})"
                     "</span>"))
    rows = _step_interval(d) + rows
    rows += [(f"prediction interval ({k})", v) for k, v in _intervals(d)]
    return head + kv_list(rows)


def _step_chart(d: dict) -> str:
    parts = step_parts(d)
    b = d["bounds"]
    marks = [(b["all_hidden_s"], "all hidden", f"{fmt_s(b['all_hidden_s'])}: bounds.all_hidden_s"),
             (b["no_overlap_s"], "no overlap", f"{fmt_s(b['no_overlap_s'])}: bounds.no_overlap_s")]
    unit = "s" if max(d["step_s"], b["no_overlap_s"], *(d.get("step_interval_s") or [])) >= 1 else "ms"
    iv = d.get("step_interval_s")
    span = (iv[0], iv[1], f"prediction interval {fmt_s(iv[0])} - {fmt_s(iv[1])} (step_interval_s)") \
        if _pair_is(iv) else None
    svg = stacked_bar(parts, axis_label=f"time per step ({unit})", unit="s", markers=marks, interval=span,
                      title=f"step {fmt_s(d['step_s'])}, by term" + (", and its prediction interval" if span else ""))
    leg = legend([(c, f"{escape(lbl)} {seconds(v, tip=tip)} ({v / d['step_s']:.1%})")
                  for lbl, v, c, tip in parts if v > 0]
                 + ([("#222", "prediction interval (the bracket under the bar)")] if span else []))
    return f"<figure>{svg}{leg}</figure>"


def _memory_parts(m: dict) -> list[tuple[str, float, str, str]]:
    """Memory per GPU at the upper end of the estimate: the allocated terms, then the allocator's slack,
    NCCL's buffers and the CUDA context (``device_bytes[1] = reserved[1] + context + nccl[1]``)."""
    parts = [("weights (parameters)", m["weights_bytes"], "#0072B2", "memory.weights_bytes"),
             ("gradients", m["gradients_bytes"], "#56B4E9", "memory.gradients_bytes"),
             ("optimizer states", m["optimizer_bytes"], "#009E73", "memory.optimizer_bytes"),
             ("activations", m["activations_bytes"], "#E69F00",
              f"memory.activations_bytes ({m.get('in_flight_layers', 0):g} layers in flight; Korthikanti et al. 2022)"),
             ("buffers", m["buffers_bytes"], "#CC79A7", "memory.buffers_bytes")]
    allocated = sum(p[1] for p in parts)
    spread = m["total_bytes"] - allocated
    if spread > 1e-6 * m["total_bytes"]:
        parts.append(("recompute working set", spread, "#F0E442", "memory.total_bytes - the terms above"))
    reserved_hi = m["peak_reserved_bytes"][1]
    nccl_hi = m["nccl_bytes"][1]
    parts.append(("allocator slack (reserved)", reserved_hi - m["total_bytes"], "#999999",
                  "memory.peak_reserved_bytes[1] - memory.total_bytes (caching allocator, 0-15%)"))
    parts.append(("NCCL buffers", nccl_hi, "#D55E00", "memory.nccl_bytes[1]"))
    parts.append(("CUDA context", m["device_bytes"][1] - reserved_hi - nccl_hi, "#882255",
                  "memory.device_bytes[1] - peak_reserved_bytes[1] - nccl_bytes[1] (0.5-1 GiB)"))
    return [(lbl, v, c, f"{fmt_bytes(v)} = {tip}") for lbl, v, c, tip in parts]


def _memory(d: dict) -> str:
    m = d["memory"]
    parts = _memory_parts(m)
    marks = [(m["capacity_bytes"], f"card {fmt_bytes(m['capacity_bytes'])}",
              f"memory.capacity_bytes: {fmt_bytes(m['capacity_bytes'])}"),
             (m["device_bytes"][0], "low end", f"memory.device_bytes[0]: {fmt_bytes(m['device_bytes'][0])}")]
    svg = stacked_bar(parts, axis_label="memory per GPU (GB = 1e9 bytes)", unit="bytes", markers=marks,
                      title=f"memory per GPU at the upper end: {fmt_bytes(m['device_bytes'][1])} "
                            f"of {fmt_bytes(m['capacity_bytes'])}")
    leg = legend([(c, f"{escape(lbl)} {nbytes(v, tip=tip)}") for lbl, v, c, tip in parts if v > 0])
    verdict = {"fits": "fits", "may not fit": "MAY NOT FIT (the card's capacity lies inside the range)",
               "does not fit": "DOES NOT FIT"}.get(m["verdict"], m["verdict"])
    rows = [("verdict", f"<b data-key=\"memory.verdict\">{escape(verdict)}</b>"),
            ("peak allocated", nbytes(m["total_bytes"], key="memory.total_bytes", tip="the allocated terms summed")),
            ("reserved", f"{nbytes(m['peak_reserved_bytes'][0])} - {nbytes(m['peak_reserved_bytes'][1])}"),
            ("on the card", f"{nbytes(m['device_bytes'][0], key='memory.device_bytes[0]')} - "
                            f"{nbytes(m['device_bytes'][1], key='memory.device_bytes[1]')} "
                            "<span class=note>(reserved + CUDA context + NCCL buffers)</span>"),
            ("capacity", nbytes(m["capacity_bytes"], key="memory.capacity_bytes", tip="the GPU preset's memory"))]
    if m.get("offloaded_bytes"):
        rows.append(("offloaded to host", nbytes(m["offloaded_bytes"], tip="memory.offloaded_bytes per micro-batch")))
    return f"<figure>{svg}{leg}</figure>" + kv_list(rows)


def _collectives(d: dict) -> str:
    rows = []
    for i, c in enumerate(d.get("comm") or []):
        band = range_text(c.get("exposed_band_s"), "s")
        rows.append([escape(c["dimension"]), escape(c["op"]),
                     nbytes(c["size_bytes"], key=f"comm[{i}].size_bytes", tip="message per call"),
                     num(c["group_size"], key=f"comm[{i}].group_size"),
                     num(c["ranks_per_node"], key=f"comm[{i}].ranks_per_node"),
                     num(c["count_per_step"], f"{c['count_per_step']:,.0f}", key=f"comm[{i}].count_per_step"),
                     escape(c.get("algorithm") or ""),
                     seconds(c["one_s"], key=f"comm[{i}].one_s", tip="one call, priced by the CommModel"),
                     seconds(c["time_s"], key=f"comm[{i}].time_s", tip="one_s x count_per_step: on the wire per step"),
                     seconds(c["exposed_s"], key=f"comm[{i}].exposed_s",
                             tip="the part not hidden behind compute (critical path, or the overlap timeline)"),
                     escape(band or ""), escape(c.get("what") or "")])
    if not rows:
        return "<p>none: one GPU</p>"
    out = table(["dim", "op", "size", "group", "/node", "count", "algorithm", "one", "wire", "exposed",
                 "exposed, measured band", "what"], rows, right={2, 3, 4, 5, 7, 8, 9, 10}, wide={11})
    ba = d.get("bucket_advice")
    if ba:
        out += (f"<p>DP bucket advice: {nbytes(ba['recommended_bytes'], tip=ba.get('rule', ''))} buckets expose "
                f"{seconds(ba['exposed_s'])} against {seconds(ba['default_exposed_s'], tip='PyTorch DDP default 25 MiB')}"
                f" with DDP's default <span class=note>({escape(ba.get('rule', ''))})</span></p>")
    return out


def _advice(d: dict) -> str:
    items = [f"<li>{escape(t)}</li>" for t in d.get("advice") or []]
    warn = [f'<li class="warn">warning: {escape(w)}</li>' for w in d.get("warnings") or []]
    body = f"<ul>{''.join(items + warn)}</ul>" if items or warn else "<p>nothing stands out: no term above 5% of the step</p>"
    sens = d.get("sensitivity") or []
    if sens:
        rows = []
        for r in sens:
            cells = []
            for v in r["values"]:
                mark = "*" if v["value"] == r["current"] else ""
                cells.append(f"{escape(v['value'])}{mark} {seconds(v['step_s'])}{'' if v['fits'] else ' (OOM)'}")
            rows.append([escape(r["input"]), pct(r["spread"], digits=0, tip="largest step / smallest - 1"),
                         " / ".join(cells)])
        body += table(["input", "spread", "the step at each value (* the plan's)"], rows, right={1}, wide={2},
                      caption="sensitivity: inputs sources often leave out")
    return body


def _training(d: dict) -> str:
    t = d.get("training")
    if not t:
        return ""
    rows = [("tokens", num(t["tokens"], f"{t['tokens']:.3g}", key="training.tokens")),
            ("days", num(t["days"], f"{t['days']:,.1f}", key="training.days",
                         tip="tokens / (tokens/s/GPU x GPUs) / 86400")),
            ("GPU-hours", num(t["gpu_hours"], f"{t['gpu_hours']:,.0f}", key="training.gpu_hours",
                              tip="days x 24 x GPUs"))]
    if t.get("cost_usd") is not None:
        rows.append(("cost", num(t["cost_usd"], f"${t['cost_usd']:,.0f}", key="training.cost_usd",
                                 tip=f"GPU-hours x ${t.get('price_usd_per_gpu_hour', 0):g} per GPU-hour")))
    names = {"days_interval": ("days", "{:,.1f}"), "gpu_hours_interval": ("GPU-hours", "{:,.0f}"),
             "cost_usd_interval": ("cost", "${:,.0f}")}
    for k, v in t.items():
        if k in names and _pair_is(v):
            what, f = names[k]
            rows.append((f"{what}, prediction interval", f"{num(v[0], f.format(v[0]), key=f'training.{k}[0]')} - "
                                                         f"{num(v[1], f.format(v[1]), key=f'training.{k}[1]')}"))
        elif ("interval" in k or k.endswith("_range")) and v is not None and k not in names:
            text = range_text(v, "")
            rows.append((f"range ({k})", escape(text if text is not None else str(v))))
    return section("Training cost", kv_list(rows), ident="training")


def plan_body(d: dict) -> str:
    """The sections of a plan (also one search result's detail)."""
    return (section("Step", _headline(d) + _step_chart(d), ident="step")
            + section("Memory per GPU", _memory(d), ident="memory")
            + section("Communication per step (one GPU)", _collectives(d), ident="comm")
            + section("Advice", _advice(d), ident="advice")
            + _training(d))


def plan_html(d: dict) -> str:
    """The whole page of ``plan --json``'s dict ``d``."""
    L = d["layout"]
    layout = " x ".join(f"{k} {L[k]}" for k in ("dp", "tp", "pp", "cp") if k in L)
    sub = (f"{d['gpus']} x {d['gpu']}, {layout}, vp {L.get('vp', 1)}, ZeRO-{L.get('zero', 0)}, seq {d['seq']}, "
           f"{d['precision']}; stack {d.get('stack')}; fabric: {d.get('comm_model')}; compute efficiency "
           f"{d['efficiency']:.3f} ({d.get('efficiency_source')})")
    return page(title=f"commcost plan: {d['model']}", subtitle=sub, body=plan_body(d), kind="plan")
