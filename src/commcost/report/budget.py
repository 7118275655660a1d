"""Text and JSON renderings of :class:`commcost.analyses.drill.budget.Budget`.

Every number shown is a field of the result; the formula beside it is the one the
field's docstring states.
"""

from __future__ import annotations

import math

from commcost.step.buckets import BucketRow
from commcost.analyses.drill.budget import Budget
from commcost.report.bucket_advice import bucket_advice_to_dict, render_bucket_advice
from commcost.report._width import terminal_width, wrap_lines
from commcost.report.layer import layer_to_dict, render_layer_text
from commcost.core.units import GB, MB, MiB, format_fraction as pct, format_mb_mib, format_seconds as t

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.uncertainty import BudgetBand

__all__ = ["render_budget_text", "budget_to_dict", "render_ddp_memory", "render_budget_report"]



def _mib(n_bytes: float) -> str:
    return f"{n_bytes / MiB:,.4g} MiB"


def _ran(c) -> str:
    """``in_network (simple protocol)``: the algorithm that ran, and NCCL's protocol where modelled."""
    return c.algorithm.value + (f" ({c.protocol} protocol)" if c.protocol else "")


def render_budget_text(b: Budget, band: BudgetBand | None = None, width: int | None = None) -> str:
    """The drill report, parts (a) to (g); with ``band`` (a system preset alone) the measured band of
    T and of the exposed time beside them (:mod:`commcost.analyses.uncertainty`).

    It fits ``width`` (default :func:`commcost.report._width.terminal_width`), the drill's flat link too: prose
    wraps, and the tables of (f) and (g) drop to narrower columns where the full ones do not fit; on the flat
    link every number of the full tables stays (:func:`_buckets_drill`), only the layout of the lines changes."""
    i, T, st, fx = b.inputs, b.allreduce, b.step, b.fixes
    P, link = i.gpus, i.comm.flat_link
    width = width or terminal_width()
    tables: set[str] = set()  # table rows: kept whole when the prose is wrapped
    lines: list[str] = []
    add = lines.append
    model = (f"N = {i.params / 1e9:g} billion params ({i.bytes_per_grad} B per gradient), "
             f"step = {t(i.step_s)} compute-only per micro-batch, k = {i.grad_accum} micro-batch(es)")
    if link is not None:
        add(f"commcost budget: {T.algorithm.value} all-reduce of the data-parallel gradient")
        add(f"  P = {P} GPUs, B = {link.bandwidth_bytes_per_s / GB:g} GB/s per rank, a = {link.latency_s * 1e6:g} us "
            f"per ring step, " + model)
    else:
        add(f"commcost budget: all-reduce of the data-parallel gradient, {_ran(T)} (chosen by the model per size)")
        add(f"  P = {P} GPUs on {i.comm.describe()}, " + model)
    if P == 1:
        add("  P = 1: a single GPU has no gradient all-reduce; every communication term below is 0.")
    add("")
    add(f"(a) message     S = N * {i.bytes_per_grad} B = {b.message_bytes:,.0f} B = {format_mb_mib(b.message_bytes)}")
    add("")
    if link is not None:
        add(f"(b) {T.algorithm.value} all-reduce  T = 2(P-1)a + 2(P-1)/P * S/B")
        add(f"    latency term    2(P-1)a        = {t(T.latency_s):>12}")
        add(f"    bandwidth term  2(P-1)/P * S/B = {t(T.bandwidth_s):>12}")
        add(f"    total           T              = {t(T.total_s):>12}")
    else:
        add(f"(b) all-reduce: {_ran(T)}  T = latency term + bandwidth term  ({T.reason})")
        add(f"    latency term                   = {t(T.latency_s):>12}")
        add(f"    bandwidth term                 = {t(T.bandwidth_s):>12}")
        add(f"    total           T              = {t(T.total_s):>12}")
    if band is not None:
        from commcost.report._band import band_range, band_side

        lo, hi = band.allreduce_s
        add(f"    measured band   T = {band_range(lo, hi)} on measured clusters of this class ({band.band_class}: "
            f"r = {band.ratios[0]:.3f}-{band.ratios[1]:.3f} x T, the 5th-95th percentile of measured/predicted "
            f"on published tables, docs/fabrics.md{band_side(T.total_s, lo, hi)})")
    if T.dominant != "none":
        other = "latency" if T.dominant == "bandwidth" else "bandwidth"
        factor = f"{T.dominance_factor:,.1f}" if T.dominance_factor < 1e6 else f"{T.dominance_factor:.3g}"
        add(f"    {T.dominant}-bound: the {T.dominant} term is {factor}x the {other} term"
            if math.isfinite(T.dominance_factor) else f"    {T.dominant}-bound: the {other} term is 0")
    add("")
    add(f"(c) step fraction   T / (k*step) = {t(T.total_s)} / {t(st.compute_s)} = {pct(st.comm_fraction)}")
    add(f"    fully exposed       k*step / (k*step + T)     = {pct(st.efficiency_exposed)}")
    add(f"    overlapped ceiling  k*step / max(k*step, T)   = {pct(st.efficiency_overlapped_ceiling)}"
        + ("" if st.ceiling_reachable else "  NOT reachable here: T does not fit in the backward window"))
    fits = "fits" if st.backward_margin_s >= 0 else "does NOT fit"
    add(f"      reachable only if T fits in the backward window {i.backward_fraction:.3g} * step = "
        f"{t(st.backward_window_s)} (T {fits}: margin {t(st.backward_margin_s)})")
    if not st.ceiling_reachable:
        add(f"      perfect overlap within the window: k*step / (k*step + T - window) = "
            f"{pct(st.compute_s / st.bounds.perfect_overlap_s)}")
    add(f"      and the last bucket's all-reduce ({_mib(min(i.tail_bucket_bytes, b.message_bytes))}: "
        f"{t(st.tail_s)}) is a tail that starts when backward ends and cannot hide")
    add(f"    best case: exposed >= max(tail, T - window) = {t(st.first_order_exposed_s)} "
        f"-> efficiency {pct(st.efficiency_best_case)}  (first order: a full last bucket)")
    if band is not None:
        add(f"      on measured clusters of this class: {_band_cell(st.first_order_exposed_s, band.first_order_exposed_s)}; "
            "recomputed with every all-reduce at the band's edges (max() does not scale by r)")
    add(f"    lower bound for DDP's default buckets (their last one is {st.default_last_bucket_bytes / MiB:,.2f} MiB): "
        f"exposed >= {t(st.exposed_lower_bound_s)}")
    for line in _simulated_lines(b):
        add(line)
    if band is not None and band.default_exposed_s is not None and band.best_exposed_s is not None \
            and b.overlap is not None:
        add(f"      on measured clusters of this class (every bucket's all-reduce at the band's edges, the same "
            f"buckets, re-simulated): exposed {_band_cell(b.overlap.default.exposed_s, band.default_exposed_s)} "
            f"with the default, {_band_cell(b.overlap.best.exposed_s, band.best_exposed_s)} with "
            f"{_mib_cap(b.overlap.best)} buckets")
    add("")
    add(f"(d) threshold label  {st.label}  (T/(k*step) = {pct(st.comm_fraction)} "
        f"{'>' if st.label == 'COMMUNICATION-BOUND' else '<='} {pct(st.threshold)})")
    ov = b.overlap
    if ov is not None and T.total_s > 0:
        within = "within" if st.overlap_verdict == "HIDES" else "beyond"
        add(f"    overlap verdict  {st.overlap_verdict}  (simulated: the recommended {_mib_cap(ov.best)} buckets "
            f"leave {t(ov.best.exposed_s)} exposed, {within} the {t(b.buckets.advice.tail_budget_s)} tail budget)")
        add(f"    first-order reading  {st.first_order_verdict}  (T = {t(T.total_s)} vs backward window "
            f"{t(st.backward_window_s)}, margin {t(st.backward_margin_s)})")
    else:
        add(f"    overlap verdict  {st.overlap_verdict}  (T = {t(T.total_s)} vs backward window "
            f"{t(st.backward_window_s)}, margin {t(st.backward_margin_s)})")
    add("    " + _verdict_sentence(b))
    if b.overlap is not None and b.allreduce.total_s > 0:
        add("    " + _simulated_verdict(b))
    add("")
    add(f"(e) fixes, comm-to-compute ratio (baseline {pct(fx.baseline_comm_to_compute)})")
    g = fx.grad_accum
    add(f"    1. gradient accumulation x{g.micro_batches}: T / ({g.micro_batches}*step) = "
        f"{t(g.comm_s)} / {t(g.compute_s)} = {pct(g.comm_to_compute)}  "
        f"(one all-reduce per {g.micro_batches} micro-batches; global batch x{g.global_batch_growth:g})"
        + (f"; this run already uses k = {i.grad_accum}: no change (--fix-grad-accum to try another k)"
           if g.micro_batches == i.grad_accum else ""))
    z = fx.zero2
    each = "(P-1)a + (P-1)/P * S/B" if link is not None else f"{_ran(z.reduce_scatter)} on the fabric"
    if z.reduce_scatters_per_step == 1:
        add(f"    2. ZeRO-2: reduce-scatter {t(z.reduce_scatter.total_s)} + all-gather {t(z.all_gather.total_s)} "
            f"(each {each}) = {t(z.comm_s)} -> {pct(z.comm_to_compute)}")
    else:
        k = z.reduce_scatters_per_step
        add(f"    2. ZeRO-2: {k} x reduce-scatter {t(z.reduce_scatter.total_s)} (sharded gradients: one per "
            f"micro-batch) + all-gather {t(z.all_gather.total_s)} (each {each}) = {t(z.comm_s)} -> "
            f"{pct(z.comm_to_compute)}")
        add(f"       stacks that keep full gradients until the last micro-batch (Megatron's distributed optimizer, "
            f"FSDP SHARD_GRAD_OP under no_sync) pay one: {t(z.full_gradient_comm_s)} -> "
            f"{pct(z.full_gradient_comm_s / z.compute_s)}, at the memory of unsharded gradients")
    add(f"       bytes sent per rank {z.bytes_sent_per_rank / GB:,.3f} GB vs all-reduce "
        f"{z.allreduce_bytes_sent_per_rank / GB:,.3f} GB: ZeRO-2 shards gradients and optimizer "
        + ("state (memory), it does not cut communication" if z.reduce_scatters_per_step == 1 else
           f"state (memory); with {z.reduce_scatters_per_step} micro-batches its sharded gradients add communication"))
    n = fx.intra_node
    intra_bw = f"{n.link.bandwidth_bytes_per_s / GB:g} GB/s" if n.link is not None else "intra-node model"
    add(f"    3. DP group inside one node ({intra_bw}): "
        f"T = {t(n.allreduce.total_s)} -> {pct(n.comm_to_compute)}")
    if n.allreduce.total_s >= T.total_s > 0:
        add(f"       no gain here: this all-reduce is not faster than the baseline T = {t(T.total_s)}")
    if n.available:
        add(f"       available: {P} GPUs fit in one node of {i.gpus_per_node}")
    else:
        add(f"       usually not available: {P} ranks span ceil({P}/{i.gpus_per_node}) = "
            f"{n.nodes_spanned} nodes, and the fast intra-node links are taken by tensor parallelism")
    add("")
    add(_buckets_text(b, width, tables))
    add("")
    add(_scaling_text(b, width, tables))
    text = "\n".join(lines)
    return text if width is None else wrap_lines(text, width, keep=tables.__contains__)


def _table(full: list[str], narrow, width: int | None, tables: set[str]) -> list[str]:
    """``full`` (header and rows), or ``narrow()`` where ``width`` is set and a full row is wider; the
    chosen rows are added to ``tables`` (never wrapped)."""
    rows = full if width is None or max(map(len, full)) <= width else narrow()
    tables.update(rows)
    return rows


def _band_cell(point_s: float, edges: tuple[float, float]) -> str:
    """``184.47 us - 581.24 us``, and which side of the point where the range does not contain it."""
    from commcost.report._band import band_range, band_side

    return band_range(*edges) + band_side(point_s, *edges, brief=True)


def _mib_cap(tl) -> str:
    return f"{tl.bucket_cap_bytes / MiB:,.4g} MiB"


def _verdict_sentence(b: Budget) -> str:
    st = b.step
    if st.first_order_verdict == "NO COMMUNICATION":
        return "-> With P = 1 there is nothing to communicate."
    hides = st.first_order_verdict == "HIDES"
    bound = st.label == "COMMUNICATION-BOUND"
    if bound and hides:
        return ("-> They disagree: the label counts T against the whole step, but T fits inside the "
                "backward pass, so with well-sized buckets as little as the last bucket's tail need be "
                "exposed; the label is right only if overlap fails (one giant bucket, too-small buckets "
                "whose latency terms add up, comm serialized).")
    if bound and not hides:
        return ("-> They agree: T exceeds the backward window, so at least T - window is exposed "
                "whatever the bucketing.")
    if hides:
        return "-> They agree: T is a minority of the step and fits in the backward window."
    return ("-> They disagree: T is under the threshold but longer than the backward window, "
            "so part of it is exposed however well it overlaps.")


def _buckets_text(b: Budget, width: int | None = None, tables: set[str] | None = None) -> str:
    i, bt = b.inputs, b.buckets
    adv = bt.advice
    flat = i.comm.flat_link is not None
    out = [f"(f) buckets  crossover S* = P*a*B = {bt.crossover_bytes:,.0f} B = {format_mb_mib(bt.crossover_bytes)}"
           if flat else f"(f) buckets  crossover S* (one bucket's latency term = its bandwidth term) = "
                        f"{bt.crossover_bytes:,.0f} B = {format_mb_mib(bt.crossover_bytes)}",
           "    total = count * 2(P-1)a + 2(P-1)/P * S/B" if flat else
           "    total = (count-1) T(cap) + T(last bucket), each all-reduce from the fabric's model"]
    full = [f"    {'cap':>9} {'count':>7} {'1 bucket: latency':>18} {'bandwidth':>11} {'lat share':>10} "
            f"{'latency total':>14} {'total':>12} {'T/step':>7}" + _exposed_header(b)]
    for r in bt.rows:
        full.append(f"    {_mib(r.cap_bytes):>9} {r.count:>7,} {t(r.one_bucket.latency_s):>18} "
                    f"{t(r.one_bucket.bandwidth_s):>11} {pct(r.latency_share):>10} "
                    f"{t(r.latency_total_s):>14} {t(r.total_s):>12} "
                    f"{pct(r.total_s / b.step.compute_s):>7}" + _exposed_cell(b, r))
    out += _table(full, lambda: _buckets_drill(b) if flat else _buckets_narrow(b), width,
                  set() if tables is None else tables)
    if b.overlap is not None:
        out.append("    exposed: simulated all-reduce time left after backward ends, each cap as an explicit "
                   f"bucket_cap_mb (torch 2.13: first bucket = cap), {_stream_words(b)}")
    if i.gpus == 1:
        out.append("    P = 1: no all-reduce, bucket size does not matter.")
        return "\n".join(out)
    s = adv.max_latency_share
    lat = "2(P-1)a =" if flat else "a latency term of"
    out.append(f"    smallest bucket: latency share <= {pct(s)} needs c >= {'S*(1-s)/s' if flat else 'about S*(1-s)/s'} = "
               f"{format_mb_mib(adv.min_bucket_bytes)}; smaller buckets pay {lat} "
               f"{t(b.allreduce.latency_s)} each for too few bytes")
    out.append(f"    largest bucket: the last bucket cannot overlap; keeping its all-reduce within "
               f"{t(adv.tail_budget_s)} ({pct(i.tail_budget_fraction)} of the step) needs c <= "
               f"{format_mb_mib(adv.max_bucket_bytes)}; larger buckets also leave too few buckets to overlap")
    if not adv.consistent:
        out.append("    no cap meets both ends: the latency term alone is too large for this tail budget")
    d = adv.pytorch_default
    verdict = "within" if adv.min_bucket_bytes <= d.cap_bytes <= adv.max_bucket_bytes else "outside"
    ov = b.overlap
    packed = "" if ov is None or len(ov.default.buckets) == d.count else \
        f" (DDP packs {len(ov.default.buckets):,}, simulated in (c): {_packing_words(b)})"
    recommended = ov is not None and ov.advice.recommended_bytes == d.cap_bytes
    out.append(f"    PyTorch's 25 MiB default: ceil(S/c) = {d.count:,} buckets{packed}, latency share "
               f"{pct(d.latency_share)} each, total {t(d.total_s)} ({pct(d.total_s / b.step.compute_s)} of the step, "
               f"backward window {t(b.step.backward_window_s)}); {verdict} the sensible range of latency share and "
               "tail here" + ("; simulated, it is still the cap recommended below" if recommended and
                              verdict == "outside" else ""))
    if ov is not None:
        out.append("    " + render_bucket_advice(ov.advice))
    if ov is not None and verdict == "outside" and ov.default.exposed_s <= adv.tail_budget_s:
        out.append(f"    but simulated, the default leaves only {t(ov.default.exposed_s)} exposed (within the "
                   f"{t(adv.tail_budget_s)} tail budget; the best cap {t(ov.best.exposed_s)}): the wire time "
                   "hides in the backward window, so here the bucket size barely changes the step; the range "
                   "above is about each bucket's latency share")
    return "\n".join(out)


def _packing_words(b: Budget) -> str:
    """How DDP's own buckets differ from ``ceil(S/c)`` equal ones."""
    if b.overlap is not None and b.overlap.advice.stream == "per-tensor":
        return "tensors whole, a tensor larger than the cap alone in its bucket"
    return "its first bucket is 1 MiB"


def _buckets_drill(b: Budget) -> list[str]:
    """(f)'s table on the drill's flat link in about 80 columns, every column of the full one kept (the drill
    prints the same numbers at any width): cap, count, one bucket's latency and bandwidth terms, its latency
    share, the latency total, the total, T/step, exposed."""
    exposed = f" {'exposed':>9}" if b.overlap is not None else ""
    out = [f"  {'cap':>7} {'count':>6} {'latency':>8} {'bandwidth':>9} {'lat%':>5} {'lat total':>9} {'total':>9} "
           f"{'T/step':>6}" + exposed]
    for k, r in enumerate(b.buckets.rows):
        cell = ""
        if b.overlap is not None:
            e = b.overlap.exposed_by_cap_s[k]
            cell = f" {t(e) if e is not None else 'n/a':>9}"
        out.append(f"  {_mib(r.cap_bytes):>7} {r.count:>6,} {t(r.one_bucket.latency_s):>8} "
                   f"{t(r.one_bucket.bandwidth_s):>9} {pct(r.latency_share):>5} {t(r.latency_total_s):>9} "
                   f"{t(r.total_s):>9} {pct(r.total_s / b.step.compute_s):>6}" + cell)
    return out


def _buckets_narrow(b: Budget) -> list[str]:
    """(f)'s table in about 76 columns: one bucket's latency and bandwidth terms, its latency share,
    the total, T/step, exposed; the latency total is left to ``--json`` (``buckets.rows[].latency_total_s``)."""
    exposed = f" {'exposed':>9}" if b.overlap is not None else ""
    out = [f"    {'cap':>9} {'count':>7} {'latency':>9} {'bandwidth':>9} {'lat %':>6} {'total':>9} "
           f"{'T/step':>7}" + exposed]
    for r in b.buckets.rows:
        cell = ""
        if b.overlap is not None:
            e = b.overlap.exposed_by_cap_s[b.buckets.rows.index(r)]
            cell = f" {t(e) if e is not None else 'n/a':>9}"
        out.append(f"    {_mib(r.cap_bytes):>9} {r.count:>7,} {t(r.one_bucket.latency_s):>9} "
                   f"{t(r.one_bucket.bandwidth_s):>9} {pct(r.latency_share):>6} {t(r.total_s):>9} "
                   f"{pct(r.total_s / b.step.compute_s):>7}" + cell)
    return out


def _scaling_text(b: Budget, width: int | None = None, tables: set[str] | None = None) -> str:
    flat = b.inputs.comm.flat_link is not None
    out = ["(g) scaling on the same fabric (per-GPU batch fixed)"]
    full = [f"    {'P':>6} {'latency 2(P-1)a' if flat else 'latency':>16} {'bandwidth':>11} {'total T':>10} "
            f"{'T/step':>8} {'S* = P*a*B' if flat else 'S*':>12} {'global batch':>13}"]
    for r in b.scaling:
        mark = "  <- this run" if r.gpus == b.inputs.gpus else ""
        full.append(f"    {r.gpus:>6} {t(r.allreduce.latency_s):>16} {t(r.allreduce.bandwidth_s):>11} "
                    f"{t(r.allreduce.total_s):>10} {pct(r.comm_fraction):>8} "
                    f"{r.crossover_bytes / MB:>9,.1f} MB {r.global_batch_growth:>12g}x{mark}")
    if width is not None and flat and max(map(len, full)) > width:
        out.append("    latency 2(P-1)a, S* = P*a*B")      # the full table's headers, which carry the formulas
    out += _table(full, lambda: _scaling_narrow(b), width, set() if tables is None else tables)
    if b.bandwidth_limit_s is not None:
        out.append(f"    bandwidth term -> 2S/B = {t(b.bandwidth_limit_s)} as P grows (it saturates); "
                   "latency term grows linearly in P; S* grows with P, so fixed buckets drift "
                   "into the latency-bound regime; the global batch grows with P and may pass the "
                   "critical batch size long before communication stops the run")
    else:
        out.append("    each row is the model's all-reduce at P (a fabric with the nodes P needs), so the bandwidth "
                   "term steps up where the group leaves "
                   "the NVLink domain instead of tending to 2S/B of the one-link drill; the latency term "
                   "still grows with P; the global batch grows with P and may pass the critical batch size "
                   "long before communication stops the run")
    return "\n".join(out)


def _scaling_narrow(b: Budget) -> list[str]:
    """(g)'s table in at most 80 columns (the same columns, narrower; ``batch`` is the global batch)."""
    out = [f"    {'P':>6} {'latency':>9} {'bandwidth':>10} {'total T':>9} {'T/step':>7} {'S*':>9} {'batch':>6}"]
    for r in b.scaling:
        mark = "  <- this run" if r.gpus == b.inputs.gpus else ""
        out.append(f"    {r.gpus:>6} {t(r.allreduce.latency_s):>9} {t(r.allreduce.bandwidth_s):>10} "
                   f"{t(r.allreduce.total_s):>9} {pct(r.comm_fraction):>7} "
                   f"{r.crossover_bytes / MB:>6,.1f} MB {r.global_batch_growth:>5g}x{mark}")
    return out


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else list(x)


def budget_to_dict(b: Budget, band: BudgetBand | None = None) -> dict[str, object]:
    """The documented JSON schema (docs/budget.md), SI units; the ``*band*`` keys are null without ``band``."""
    i, T, st, fx, bt = b.inputs, b.allreduce, b.step, b.fixes, b.buckets
    simulated = _simulated_dict(b)
    if simulated:
        simulated["default_exposed_band_s"] = _pair(None if band is None else band.default_exposed_s)
        simulated["best_exposed_band_s"] = _pair(None if band is None else band.best_exposed_s)
    return {
        "inputs": {
            "gpus": i.gpus,
            "bandwidth_bytes_per_s": None if i.comm.flat_link is None else i.comm.flat_link.bandwidth_bytes_per_s,
            "latency_s": None if i.comm.flat_link is None else i.comm.flat_link.latency_s,
            "comm": i.comm.to_dict(), "algorithm": i.algorithm, "params": i.params, "bytes_per_grad": i.bytes_per_grad,
            "step_s": i.step_s, "grad_accum": i.grad_accum, "backward_fraction": i.backward_fraction,
            "threshold": i.threshold,
        },
        "message": {"bytes": b.message_bytes, "mb": b.message_bytes / MB, "mib": b.message_bytes / MiB},
        "allreduce": _cost(T) | {"dominant": T.dominant, "dominance_factor": T.dominance_factor,
                                 "algorithm": T.algorithm.value, "protocol": T.protocol, "reason": T.reason,
                                 "band_s": _pair(None if band is None else band.allreduce_s),
                                 "band_class": None if band is None else band.band_class,
                                 "band_ratios": _pair(None if band is None else band.ratios)},
        "step": {
            "compute_s": st.compute_s, "comm_fraction": st.comm_fraction,
            "efficiency_exposed": st.efficiency_exposed,
            "efficiency_overlapped_ceiling": st.efficiency_overlapped_ceiling,
            "ceiling_reachable": st.ceiling_reachable,
            "backward_window_s": st.backward_window_s, "backward_margin_s": st.backward_margin_s,
            "tail_s": st.tail_s, "first_order_exposed_s": st.first_order_exposed_s,
            "efficiency_best_case": st.efficiency_best_case,
            "default_last_bucket_bytes": st.default_last_bucket_bytes,
            "exposed_lower_bound_s": st.exposed_lower_bound_s,
            "bounds": {"no_overlap_s": st.bounds.no_overlap_s, "perfect_overlap_s": st.bounds.perfect_overlap_s,
                       "simulated_s": st.bounds.simulated_s},
            "label": st.label, "overlap_verdict": st.overlap_verdict,
            "first_order_verdict": st.first_order_verdict,
            "first_order_exposed_band_s": _pair(None if band is None else band.first_order_exposed_s),
            "simulated": simulated,
        },
        "bucket_advice": bucket_advice_to_dict(b.bucket_advice),
        "fixes": {
            "baseline_comm_to_compute": fx.baseline_comm_to_compute,
            "grad_accum": {"micro_batches": fx.grad_accum.micro_batches,
                           "comm_s": fx.grad_accum.comm_s, "compute_s": fx.grad_accum.compute_s,
                           "comm_to_compute": fx.grad_accum.comm_to_compute,
                           "global_batch_growth": fx.grad_accum.global_batch_growth},
            "zero2": {"reduce_scatter": _cost(fx.zero2.reduce_scatter),
                      "all_gather": _cost(fx.zero2.all_gather),
                      "comm_s": fx.zero2.comm_s, "comm_to_compute": fx.zero2.comm_to_compute,
                      "reduce_scatters_per_step": fx.zero2.reduce_scatters_per_step,
                      "full_gradient_comm_s": fx.zero2.full_gradient_comm_s,
                      "bytes_sent_per_rank": fx.zero2.bytes_sent_per_rank,
                      "allreduce_bytes_sent_per_rank": fx.zero2.allreduce_bytes_sent_per_rank},
            "intra_node": {"bandwidth_bytes_per_s": fx.intra_node.link.bandwidth_bytes_per_s,
                           "allreduce": _cost(fx.intra_node.allreduce),
                           "comm_to_compute": fx.intra_node.comm_to_compute,
                           "available": fx.intra_node.available,
                           "nodes_spanned": fx.intra_node.nodes_spanned},
        },
        "buckets": {
            "crossover_bytes": bt.crossover_bytes,
            "rows": [{"size_bytes": r.cap_bytes, "count": r.count,
                      "one_bucket": _cost(r.one_bucket), "latency_share": r.latency_share,
                      "latency_total_s": r.latency_total_s, "total_s": r.total_s} for r in bt.rows],
            "exposed_s": list(b.overlap.exposed_by_cap_s) if b.overlap is not None else None,
            "min_bucket_bytes": bt.advice.min_bucket_bytes,
            "max_bucket_bytes": bt.advice.max_bucket_bytes if bt.advice.max_bucket_bytes != float("inf") else None,
            "max_latency_share": bt.advice.max_latency_share,
            "tail_budget_s": bt.advice.tail_budget_s,
        },
        "scaling": {
            "bandwidth_limit_s": b.bandwidth_limit_s,
            "rows": [{"gpus": r.gpus, "latency_s": r.allreduce.latency_s,
                      "bandwidth_s": r.allreduce.bandwidth_s, "total_s": r.allreduce.total_s,
                      "comm_fraction": r.comm_fraction, "crossover_bytes": r.crossover_bytes,
                      "global_batch_growth": r.global_batch_growth} for r in b.scaling],
        },
    }


def _cost(c) -> dict[str, float]:
    return {"latency_s": c.latency_s, "bandwidth_s": c.bandwidth_s, "total_s": c.total_s}


# --- The simulated overlap: exposed time from the DDP bucket timeline -----

def _exposed_header(b: Budget) -> str:
    return f" {'exposed':>10}" if b.overlap is not None else ""


def _exposed_cell(b: Budget, row: BucketRow) -> str:
    if b.overlap is None:
        return ""
    exposed = b.overlap.exposed_by_cap_s[b.buckets.rows.index(row)]
    return f" {t(exposed) if exposed is not None else 'n/a':>10}"


def _share_of_T(b: Budget, exposed_s: float) -> str:
    T = b.allreduce.total_s
    return f"{pct(exposed_s / T)} of T" if T > 0 else "no communication"


def _stream_words(b: Budget) -> str:
    """How the gradients arrive in the simulation: a uniform rate, or the model's tensors."""
    if b.inputs.shape is None:
        return "gradients at a uniform rate"
    return "gradients per tensor, layer by layer in reverse (the model's shape; DDP never splits a tensor)"


def _simulated_lines(b: Budget) -> list[str]:
    ov = b.overlap
    if ov is None or b.allreduce.total_s == 0:
        return []
    d, best = ov.default, ov.best
    return [
        f"    simulated (DDP bucket timeline, {_stream_words(b)}, one comm stream; `commcost timeline`):",
        f"      PyTorch's 25 MiB default (first bucket 1 MiB): {len(d.buckets):,} buckets, {t(d.wire_s)} on the "
        f"wire, exposed {t(d.exposed_s)} = {_share_of_T(b, d.exposed_s)} -> efficiency {pct(d.efficiency)}",
        f"      best bucket {best.bucket_cap_bytes / MiB:,.3g} MiB (the largest cap exposing within max(5%, 50 us) "
        f"of the least, and no more than the default): {len(best.buckets):,} buckets, "
        f"{t(best.wire_s)} on the wire, exposed {t(best.exposed_s)} = {_share_of_T(b, best.exposed_s)} "
        f"-> efficiency {pct(best.efficiency)}",
    ]


def _simulated_verdict(b: Budget) -> str:
    ov = b.overlap
    assert ov is not None
    d, best = ov.default, ov.best
    return (f"-> Simulated: with the 25 MiB default {t(d.exposed_s)} ({_share_of_T(b, d.exposed_s)}) stays exposed, "
            f"{pct(d.exposed_s / d.step_s)} of its {t(d.step_s)} step; with {best.bucket_cap_bytes / MiB:,.3g} MiB "
            f"buckets {t(best.exposed_s)} ({_share_of_T(b, best.exposed_s)}), {pct(best.exposed_s / best.step_s)} "
            f"of its {t(best.step_s)} step. What costs time is the exposed part, not T/step.")


def _simulated_dict(b: Budget) -> dict[str, object]:
    ov = b.overlap
    if ov is None:
        return {}
    return {
        "default_bucket_bytes": ov.default.bucket_cap_bytes,
        "default_first_bucket_bytes": ov.default.first_bucket_cap_bytes,
        "default_wire_s": ov.default.wire_s, "default_exposed_s": ov.default.exposed_s,
        "default_step_s": ov.default.step_s,
        "best_bucket_bytes": ov.best.bucket_cap_bytes, "best_wire_s": ov.best.wire_s,
        "best_exposed_s": ov.best.exposed_s, "best_step_s": ov.best.step_s,
        "good_min_bucket_bytes": ov.choice.good_min_cap_bytes, "good_max_bucket_bytes": ov.choice.good_max_cap_bytes,
        "good_bucket_bytes": list(ov.choice.good_caps_bytes),
        "tolerance_s": ov.choice.tolerance_s, "rule": ov.choice.rule,
    }


def render_ddp_memory(need_bytes: float, have_bytes: float, gpu: str) -> tuple[str, dict]:
    """Whether pure DDP's model states fit on ``gpu``: ``need_bytes`` = 16 N (bf16 weights and gradients,
    fp32 master weights and Adam moments, :func:`commcost.workload.memory.ddp_memory_per_gpu`) against
    its memory ``have_bytes``; the text line and the JSON object."""
    fits = need_bytes <= have_bytes
    text = (f"memory: pure DDP with mixed-precision Adam keeps 16 B per parameter on every GPU = "
            f"{need_bytes / GB:,.1f} GB (before activations) against {have_bytes / GB:,.1f} GB on {gpu}: "
            + ("fits" if fits else "DOES NOT FIT -- shard it (ZeRO/FSDP) or split the model (TP/PP): see `commcost plan`"))
    return text, {"gpu": gpu, "model_states_bytes": need_bytes, "capacity_bytes": have_bytes, "fits": fits}


def render_budget_report(budget: Budget | None, band, layer, layer_inputs, *, topology=None, memory=None,
                         note: str | None = None, info: dict | None = None) -> tuple[dict, str]:
    """The whole ``commcost budget`` report as ``(JSON object, text)``: the fabric's note (a system), the
    drill's parts (a)-(g) (``budget``, with its measured ``band``), the memory line (``memory``: the
    :func:`render_ddp_memory` pair), the layer ratio (``layer`` of ``layer_inputs``) and the profile's
    header ``note``/``info``. Everything fits the terminal, the drill's flat link too (:func:`render_budget_text`:
    the drill's numbers stay, only its lines' layout changes)."""
    out: dict = {}
    texts: list[str] = []
    drill_texts: list[str] = []  # the drill's report (fitted to the terminal by its renderer)
    if budget is not None:
        out.update(budget_to_dict(budget, band))
        if topology is not None:
            from commcost.report.collective import budget_fabric_note, fabric_to_dict

            out["fabric"] = fabric_to_dict(topology, budget.fixes.intra_node.nodes_spanned)
            texts.append(budget_fabric_note(budget, topology))
        texts.append(render_budget_text(budget, band))
        drill_texts.append(texts[-1])
        if memory is not None:
            line, out["memory"] = memory
            texts.insert(0, line)
    if layer is not None:
        i = layer_inputs
        out["layer"] = layer_to_dict(layer)
        texts.append(render_layer_text(layer, gpus=i.gpus, hidden=i.hidden, seq=i.seq,
                                       achieved_flops_per_s=i.achieved_flops_per_s,
                                       backward_fraction=i.backward_fraction, grad_accum=i.grad_accum))
    if note is not None:
        texts.insert(0, note)
    if info is not None:
        out["profile"] = info
    return out, "\n\n".join(text if text in drill_texts else wrap_lines(text) for text in texts)
