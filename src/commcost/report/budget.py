"""Text and JSON renderings of :class:`commcost.analyses.drill.budget.Budget`.

Every number shown is a field of the result; the formula beside it is the one the
field's docstring states.
"""

from __future__ import annotations

import math

from commcost.report._choice import reason_text
from commcost.analyses.drill.budget import Budget
from commcost.report.bucket_advice import bucket_advice_to_dict
from commcost.report._width import terminal_width, wrap_lines
from commcost.report.layer import layer_to_dict, render_layer_text
from commcost.core.units import GB, MB, MiB, format_fraction as pct, format_mb_mib, format_seconds as t

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.uncertainty import BudgetBand

from commcost.report.budget_parts import (_band_cell, _buckets_text, _mib, _mib_cap, _ran, _scaling_text,
                                          _simulated_dict, _simulated_lines, _simulated_verdict)

__all__ = ["render_budget_text", "budget_to_dict", "render_ddp_memory", "render_budget_report"]


def render_budget_text(b: Budget, band: BudgetBand | None = None, width: int | None = None) -> str:
    """The drill report, parts (a) to (g); with ``band`` (a system preset alone) the measured band of
    T and of the exposed time beside them (:mod:`commcost.analyses.uncertainty`).

    It fits ``width`` (default :func:`commcost.report._width.terminal_width`), the drill's flat link too: prose
    wraps, and the tables of (f) and (g) drop to narrower columns where the full ones do not fit; on the flat
    link every number of the full tables stays (:func:`_buckets_drill`), only the layout of the lines changes."""
    width = width or terminal_width()
    tables: set[str] = set()  # table rows: kept whole when the prose is wrapped
    lines = _header_lines(b)
    lines.append("")
    lines.append(f"(a) message     S = N * {b.inputs.bytes_per_grad} B = {b.message_bytes:,.0f} B = "
                 f"{format_mb_mib(b.message_bytes)}")
    for part in (_allreduce_lines(b, band), _step_lines(b, band), _label_lines(b), _fixes_lines(b),
                 [_buckets_text(b, width, tables)], [_scaling_text(b, width, tables)]):
        lines.append("")
        lines += part
    text = "\n".join(lines)
    return text if width is None else wrap_lines(text, width, keep=tables.__contains__)


def _header_lines(b: Budget) -> list[str]:
    """The title and the group's line: the flat link's ``B`` and ``a``, or the model that priced it."""
    i, T = b.inputs, b.allreduce
    P, link = i.gpus, i.comm.flat_link
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
    return lines


def _allreduce_lines(b: Budget, band: BudgetBand | None) -> list[str]:
    """Part (b): the all-reduce's latency and bandwidth terms, the measured band, which term dominates."""
    T, link = b.allreduce, b.inputs.comm.flat_link
    lines: list[str] = []
    add = lines.append
    if link is not None:
        add(f"(b) {T.algorithm.value} all-reduce  T = 2(P-1)a + 2(P-1)/P * S/B")
        add(f"    latency term    2(P-1)a        = {t(T.latency_s):>12}")
        add(f"    bandwidth term  2(P-1)/P * S/B = {t(T.bandwidth_s):>12}")
        add(f"    total           T              = {t(T.total_s):>12}")
    else:
        add(f"(b) all-reduce: {_ran(T)}  T = latency term + bandwidth term  ({reason_text(T)})")
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
    return lines


def _step_lines(b: Budget, band: BudgetBand | None) -> list[str]:
    """Part (c): the step fraction, the efficiencies and the exposed time's bounds and simulation."""
    i, T, st = b.inputs, b.allreduce, b.step
    lines: list[str] = []
    add = lines.append
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
    return lines


def _label_lines(b: Budget) -> list[str]:
    """Part (d): the threshold label and the overlap verdict, and whether they agree."""
    T, st = b.allreduce, b.step
    lines: list[str] = []
    add = lines.append
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
    return lines


def _fixes_lines(b: Budget) -> list[str]:
    """Part (e): the three fixes' comm-to-compute ratios."""
    i, T, fx = b.inputs, b.allreduce, b.fixes
    P, link = i.gpus, i.comm.flat_link
    lines: list[str] = []
    add = lines.append
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
    return lines


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


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else list(x)


def budget_to_dict(b: Budget, band: BudgetBand | None = None) -> dict[str, object]:
    """The documented JSON schema (docs/budget.md), SI units; the ``*band*`` keys are null without ``band``."""
    i, T, bt = b.inputs, b.allreduce, b.buckets
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
                                 "algorithm": T.algorithm.value, "protocol": T.protocol, "reason": reason_text(T),
                                 "band_s": _pair(None if band is None else band.allreduce_s),
                                 "band_class": None if band is None else band.band_class,
                                 "band_ratios": _pair(None if band is None else band.ratios)},
        "step": _step_dict(b, band),
        "bucket_advice": bucket_advice_to_dict(b.bucket_advice),
        "fixes": _fixes_dict(b),
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


def _step_dict(b: Budget, band: BudgetBand | None) -> dict[str, object]:
    """``step``: parts (c) and (d), the bounds and the simulated buckets (with their band)."""
    st = b.step
    simulated = _simulated_dict(b)
    if simulated:
        simulated["default_exposed_band_s"] = _pair(None if band is None else band.default_exposed_s)
        simulated["best_exposed_band_s"] = _pair(None if band is None else band.best_exposed_s)
    return {
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
    }


def _fixes_dict(b: Budget) -> dict[str, object]:
    """``fixes``: part (e), each fix's collectives and ratio."""
    fx = b.fixes
    return {
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
    }


def _cost(c) -> dict[str, float]:
    return {"latency_s": c.latency_s, "bandwidth_s": c.bandwidth_s, "total_s": c.total_s}


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
