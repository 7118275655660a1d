"""Text and JSON for ``commcost plan`` (the only code that formats a plan)."""

from __future__ import annotations


from commcost.core.units import format_bytes, format_seconds
from commcost.analyses.plan.compose import ep_paired_share
from commcost.analyses.plan.advice import MEMORY_HEADROOM, MemoryOption, memory_options, step_hint
from commcost.core.xp import SCALAR
from commcost.parallel.dispatch import comm_sm_share
from commcost.parallel.layout import group_placement
from commcost.parallel.layout import layout_group
from commcost.parallel.layout import leaves_node
from commcost.analyses.interval import plan_interval
from commcost.report._band import band_range
from commcost.report._band import band_side
from commcost.report._interval import interval_line, interval_to_dict
from commcost.core.strict_json import dumps_json
from commcost.report._width import wrap_lines
from commcost.report.bucket_advice import bucket_advice_to_dict
from commcost.report.bucket_advice import render_bucket_advice
from commcost.workload.stacks import stacks_running

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan
    from commcost.analyses.uncertainty import PlanBand

__all__ = ["plan_to_dict", "render_plan_json", "render_plan_text", "advice", "plan_run_notes"]

MFU_CONVENTION = ("model FLOPs = 3 x forward: 2 per multiply-accumulate of every weight matrix a token passes "
                  "(active experts, logits), attention scores over the full s x s square, no recomputation "
                  "(Megatron-LM / PaLM convention); MFU = model FLOP/s per GPU / dense peak at the plan's precision")


def advice(p: Plan) -> list[str]:
    """The one or two changes that would help most, each with the number that motivates it; when memory
    does not fit, every ZeRO stage and recomputation that would fit comes first
    (:func:`commcost.analyses.plan.advice.memory_options`, :func:`~commcost.analyses.plan.advice.step_hint`)."""
    out: list[str] = []
    mem = p.memory
    if not mem.fits:
        fitting = memory_options(p)
        if fitting:
            out.append(f"does not fit by {format_bytes(-mem.margin_bytes)} ({format_bytes(mem.total_bytes)} of "
                       f"{format_bytes(mem.capacity_bytes)}); these fit, with {MEMORY_HEADROOM:.0%} of the card "
                       "to spare as search requires, without touching tp or pp: "
                       + "; ".join(f"{_option_label(o)} {format_bytes(o.total_bytes)}" for o in fitting))
        else:
            out.append(f"does not fit by {format_bytes(-mem.margin_bytes)}: no ZeRO stage or recomputation "
                       "(alone or together) fits: raise tp or pp (weights and activations split by both)")
    h = step_hint(p)
    if h is not None:
        name = "pipeline bubble" if h.term == "bubble" else f"exposed {h.term.upper()} communication"
        hint = _HINTS.get(h.change, "") if h.change != "more_virtual_stages" else (
            f"more virtual stages (--vp {h.next_vp} halves it if layers allow) or more micro-batches")
        if h.change == "lower_tp" and not h.tp_comm_overlap:
            hint += ", or overlap it with the GEMMs (--tp-comm-overlap)"
        out.append(f"{name} is {h.share:.0%} of the step" + (f": {hint}" if hint else ""))
    return out[:2]


_HINTS = {
    "tp_inside_domain": "keep tp inside one NVLink domain, or trade tp for pp",
    "lower_tp": "lower tp (trade it for pp or dp) if memory allows",
    "dp_buckets": "larger buckets, fewer data-parallel ranks across nodes, or more micro-batches to hide it behind",
    "ep_inside_domain": "keep the expert group inside one NVLink domain or lower ep",
    "fewer_ranks_across_nodes": "fewer ranks in this dimension across nodes",
}
"""The words of each :class:`commcost.analyses.plan.advice.Hint` change."""


def _option_label(o: MemoryOption) -> str:
    """``ZeRO-3 / FSDP``, ``--recompute full``, ``ZeRO-2 + --recompute selective``."""
    if o.recompute is None:
        return f"ZeRO-{o.zero}" + (" / FSDP" if o.zero == 3 else "")
    return f"--recompute {o.recompute}" if o.zero is None else f"ZeRO-{o.zero} + --recompute {o.recompute}"


LOSS_LABELS = {"straggler_s": "slowest of W ranks", "contention_s": "comm beside compute",
               "sync_s": "gradient-norm sync", "host_sync_s": "host-synced gathers"}
"""The text report's name of each loss (:data:`commcost.step.losses.LOSS_NAMES`)."""


def _loss_lines(p: Plan) -> list[str]:
    """One line per loss that grows with the job (:mod:`commcost.step.losses`), zero ones left out."""
    d = p.losses.to_dict()
    return [f"  {LOSS_LABELS[k]:<21}{format_seconds(d[k]):>12}  {d[k] / p.step_s:6.1%}"
            for k in LOSS_LABELS if d[k] > 0]


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else list(x)


def _comm_rows(p: Plan, band: PlanBand | None) -> list[dict]:
    rows = [line.to_dict() for line in p.comm]
    for j, row in enumerate(rows):
        row["band_class"] = None if band is None else band.classes[j]
        row["time_band_s"] = None if band is None or band.classes[j] is None else list(band.line_time_s[j])
        row["exposed_band_s"] = None if band is None or band.classes[j] is None else list(band.line_exposed_s[j])
    return rows


def plan_to_dict(p: Plan, band: PlanBand | None = None, interval=None) -> dict:
    """The stable JSON keys (docs/plan.md); the ``*band*`` keys are null without ``band`` (a system preset alone);
    the ``*interval*`` keys (:func:`commcost.report._interval.interval_to_dict`) of ``interval``, by default
    :func:`commcost.analyses.interval.plan_interval` of ``p`` and ``band``."""
    inp = p.inputs
    iv = interval if interval is not None else plan_interval(p, band)
    return {
        "model": inp.spec.name, "params": inp.spec.params, "active_params": inp.spec.active_params,
        "gpu": inp.gpu, "gpus": inp.layout.world, "seq": inp.seq, "precision": inp.precision,
        "step_s": p.step_s, "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "tflops_per_gpu": p.tflops_per_gpu,
        "mfu": p.mfu, "mfu_convention": MFU_CONVENTION, "model_flops_per_step": p.model_flops_per_step,
        "efficiency": p.efficiency, "efficiency_source": p.efficiency_source, "peak_flops_per_s": p.peak_flops_per_s,
        "breakdown": {"compute_s": p.compute_s, "pipeline_bubble_s": p.pipeline_bubble_s,
                      "exposed_comm_s": p.exposed_comm_s, "optimizer_s": p.optimizer_s,
                      "micro_batch_s": p.micro_batch_s, "losses": p.losses.to_dict()},
        "bounds": {"all_hidden_s": p.overlap.perfect_overlap_s, "modelled_s": p.step_s,
                   "no_overlap_s": p.overlap.no_overlap_s, "wire_s": p.overlap.comm_s},
        "band_ratios": None if band is None else {c: list(r) for c, r in band.ratios.items()},
        "wire_band_s": _pair(None if band is None else band.wire_s),
        "exposed_comm_band_s": _pair(None if band is None else band.exposed_comm_s),
        "step_band_s": _pair(None if band is None else band.step_s),
        **interval_to_dict(p, iv),
        "comm": _comm_rows(p, band),
        "memory": p.memory.to_dict(),
        "layout": inp.layout.to_dict(),
        "expert_groups": expert_placement(p),
        "defaults_note": inp.defaults_note,
        "moe": {"a2a": inp.a2a, "fp8_dispatch": inp.fp8_dispatch, "overlap": inp.moe_overlap,
                "expert_load": inp.expert_load} if inp.spec.is_moe else None,
        "comm_model": p.comm_model, "warnings": list(p.warnings), "advice": advice(p),
        "stack": p.stack, "stack_source": p.stack_source, "stacks_that_run": list(stacks_running(inp.layout)),
        "compute_by_operator": dict(p.compute_by_operator),
        "bucket_advice": _bucket_advice_dict(p),
    }


def _bucket_advice_dict(p: Plan) -> dict | None:
    """``bucket_advice`` with ``timeline``: the data-parallel step it judged (``micro_batch_s``, ``backward_fraction``,
    ``grad_accum``, ``bytes_per_grad``, ``gpus``), what ``budget`` and ``timeline`` take as ``--step-ms``,
    ``--backward-fraction``, ``--grad-accum``, ``--dtype`` and ``--gpus`` to give the same advice."""
    d = bucket_advice_to_dict(p.bucket_advice)
    if d is not None and p.dp_timeline is not None:
        tl = p.dp_timeline[0]
        d["timeline"] = {"micro_batch_s": tl.step_s, "backward_fraction": tl.backward_fraction,
                         "grad_accum": tl.grad_accum, "bytes_per_grad": tl.bytes_per_grad, "gpus": tl.gpus}
    return d


def render_plan_json(p: Plan, extra: dict | None = None, band: PlanBand | None = None,
                     sensitivity: tuple = (), interval=None) -> str:
    """Strict JSON (no NaN or infinity); ``sensitivity`` (:func:`commcost.analyses.plan.sensitivity.sensitivity`) under its key."""
    d = plan_to_dict(p, band, interval)
    d["sensitivity"] = [row.to_dict() for row in sensitivity]
    if extra:
        d.update(extra)

    return dumps_json(d).rstrip("\n")  # refuses a non-finite number, naming its JSON path


def _band_lines(p: Plan, band: PlanBand) -> list[str]:
    """The step's measured band: which class each dimension's groups are, and the re-priced totals."""

    dims: dict[str, list[str]] = {}
    for line, cls in zip(p.comm, band.classes):
        if cls is not None and line.comm.dimension not in dims.setdefault(cls, []):
            dims[cls].append(line.comm.dimension)
    classes = "; ".join(f"{cls} ({', '.join(d.upper() for d in dims[cls])}) r = {lo:.3f}-{hi:.3f}"
                        for cls, (lo, hi) in band.ratios.items())

    def cell(point_s: float, edges: tuple[float, float]) -> str:
        return band_range(*edges) + band_side(point_s, *edges, brief=True)

    return [f"  measured band: on measured clusters of these classes, every collective x its group's r ({classes}; "
            "docs/plan.md): compute unchanged, exposure and bubble re-priced",
            f"    step {cell(p.step_s, band.step_s)}, exposed comm {cell(p.exposed_comm_s, band.exposed_comm_s)}, "
            f"on the wire {cell(p.wire_s, band.wire_s)}"]


_OPERATOR_NAMES = {"gemm_s": "GEMMs (projections, MLP)", "attention_s": "attention core",
                   "elementwise_s": "element-wise (HBM-bound)", "head_s": "output head and loss",
                   "casts_s": "fp8 casts", "recompute_s": "recomputation",
                   "offload_s": "waiting for host copies"}


def _operator_lines(p: Plan) -> list[str]:
    """Compute by operator (seconds per step on the slowest stage), when the operator model priced it."""
    if not p.compute_by_operator:
        return []
    out = ["  compute by operator (docs/plan.md, operator model):"]
    for key, s in p.compute_by_operator.items():
        if s > 0:
            out.append(f"    {_OPERATOR_NAMES[key]:<26}{format_seconds(s):>12}  {s / p.compute_s:6.1%}")
    return out


def _sensitivity_lines(rows: tuple) -> list[str]:
    """One line per unstated input: the step at each value the layout admits."""
    if not rows:
        return []
    out = ["", "sensitivity (inputs sources often leave out; the step at each value):"]
    for r in rows:
        cells = " / ".join(f"{v}{'*' if v == r.current else ''} {format_seconds(st)}{'' if ok else ' (OOM)'}"
                           for v, st, ok in zip(r.values, r.step_s, r.fits))
        out.append(f"  {r.input} (spread {r.spread:.0%}): {cells}")
    out.append("  (* the plan's value; OOM: does not fit)")
    return out


def expert_placement(p: Plan) -> list[dict]:
    """Where the expert layers' groups land (``expert_groups`` JSON key): for ep, etp and edp, the size,
    rank stride, ranks per node, nodes (NVLink domains) spanned, and the other groups that cross nodes
    at the same time and share the node's NICs with it (tp, cp, ep; :func:`commcost.analyses.plan.compose.nic_share`)."""

    inp, L = p.inputs, p.inputs.layout
    if not inp.spec.is_moe:
        return []
    G = inp.gpus_per_node
    crossing = [d for d in ("tp", "cp", "ep") if leaves_node(*layout_group(L, d, G))]
    out = []
    for dim in ("ep", "etp", "edp"):
        size, rpn, nodes = group_placement(L, dim, G)
        out.append({"group": dim, "size": size, "stride": L.expert_stride(dim), "ranks_per_node": rpn,
                    "nodes": nodes, "nics_per_node": rpn if nodes > 1 else 0,
                    "shares_nics_with": [d for d in crossing if d != dim] if nodes > 1 else []})
    return out


def _expert_lines(p: Plan) -> list[str]:
    """``experts:`` lines: each expert group's placement, the dispatcher and the overlap."""
    inp = p.inputs
    rows = expert_placement(p)
    if not rows:
        return []
    names = {"ep": "EP", "etp": "expert TP", "edp": "expert DP"}
    parts = []
    for r in rows:
        where = ("inside one node (NVLink domain)" if r["nodes"] == 1 else
                 f"across {r['nodes']} nodes, {r['ranks_per_node']} per node on their {r['nics_per_node']} NIC(s)"
                 + (f" shared with {', '.join(r['shares_nics_with'])}" if r["shares_nics_with"] else ""))
        parts.append(f"{names[r['group']]} {r['size']} (stride {r['stride']}) {where}")
    out = [f"experts: {'; '.join(parts)}",
           f"  dispatch {inp.a2a}{' fp8' if inp.fp8_dispatch else ''}, overlap {inp.moe_overlap}, "
           f"load imbalance {inp.expert_load:g} (busiest over mean)"]
    if inp.moe_overlap != "none":

        L = inp.layout
        f = ep_paired_share(SCALAR, overlap=inp.moe_overlap, pp=L.pp, vp=L.vp, micro_batches=L.micro_batches)
        out.append(f"  overlap bound: {f:.0%} of the chunks run beside another micro-batch's, their all-to-all "
                   f"hidden up to that layer's compute, less the {comm_sm_share(inp.gpu):.0%} of SMs its kernels "
                   f"take; the other {1 - f:.0%} (warm-up and cool-down) run alone, exposed")
    return out


def _comm_text_rows(p: Plan) -> list[str]:
    """The rows of the text report's communication table, then the DP bucket advice."""
    lines = []
    for line in p.comm:
        c = line.comm
        lines.append(f"  {c.dimension:<4}{c.op.value:<14}{format_bytes(c.size_bytes):>10}{c.group_size:>6}"
                     f"{c.ranks_per_node:>6}{c.count_per_step:>8,.0f}{format_seconds(line.one_s):>10}"
                     f"{format_seconds(line.time_s):>10}{format_seconds(line.exposed_s):>10}")
    if not p.comm:
        lines.append("  (none: one GPU)")
    if p.bucket_advice is not None:  # the one bucket advice (budget, timeline and plan print it alike)
        stream = "tensor by tensor" if p.bucket_advice.stream == "per-tensor" else "at a uniform rate"
        lines.append(f"  DP bucket advice (gradients {stream}): " + render_bucket_advice(p.bucket_advice))
    return lines


def _memory_lines(p: Plan) -> list[str]:
    """The memory per GPU: each part, the peak allocated and reserved, what is on the card, and the verdict."""
    inp, mem = p.inputs, p.memory
    return [
        f"memory per GPU ({mem.stage} stage; GB = 1e9 bytes):",
        f"  weights {format_bytes(mem.weights_bytes)}, gradients {format_bytes(mem.gradients_bytes)}, "
        f"optimizer {format_bytes(mem.optimizer_bytes)}, activations {format_bytes(mem.activations_bytes)} "
        f"({mem.in_flight_layers:g} layers in flight), buffers {format_bytes(mem.buffers_bytes)}",
        *([f"  {inp.cpu_offload_layers} layers' activations offloaded: {format_bytes(mem.offloaded_bytes)} per "
           "micro-batch to host memory and back"] if inp.cpu_offload_layers else []),
        "  peak allocated " + (f"{format_bytes(mem.allocated_bytes[0])}-{format_bytes(mem.total_bytes)} ("
                               + ", ".join(w for w, x in (("recompute working set 1-2 layers", mem.working_spread_bytes),
                                                          ("leanest known kernels to this stack's",
                                                           mem.kernel_spread_bytes)) if x) + ")\n "
                               if mem.working_spread_bytes or mem.kernel_spread_bytes
                               else f"{format_bytes(mem.total_bytes)};")
        + " reserved "
        f"{format_bytes(mem.reserved_bytes[0])}-{format_bytes(mem.reserved_bytes[1])} (allocator slack)",
        f"  on the card {format_bytes(mem.device_bytes[0])}-{format_bytes(mem.device_bytes[1])} "
        f"(+ CUDA context, NCCL) of {format_bytes(mem.capacity_bytes)}",
        "  verdict: " + {"fits": f"fits, {format_bytes(mem.capacity_bytes - mem.device_bytes[1])} spare",
           "may not fit": f"MAY NOT FIT: the card's {format_bytes(mem.capacity_bytes)} lies inside the range",
           "does not fit": f"DOES NOT FIT, {format_bytes(-mem.margin_bytes)} over"}[mem.verdict],
    ]


def render_plan_text(p: Plan, extra_lines: list[str] | None = None, band: PlanBand | None = None,
                     sensitivity: tuple = (), interval=None) -> str:
    """The human report; with ``band`` (a system preset alone) the step's measured band under the bounds; the
    step's prediction interval (``interval``, default :func:`commcost.analyses.interval.plan_interval`) under it."""
    inp, L = p.inputs, p.inputs.layout
    iv = interval if interval is not None else plan_interval(p, band)
    spec = inp.spec
    lines = [
        f"{spec.name}: {spec.params / 1e9:.1f}B parameters" + (f" ({spec.active_params / 1e9:.1f}B active)" if spec.is_moe else "")
        + f", seq {inp.seq}, global batch {L.global_batch} x micro-batch {L.micro_batch} ({L.micro_batches} per pipeline)",
        f"layout: {L.world} x {inp.gpu} = dp {L.dp} x tp {L.tp} x pp {L.pp} (vp {L.vp}) x cp {L.cp}, ep {L.ep}, ZeRO-{L.zero}"
        f"{', sequence parallel' if L.sequence_parallel else ''}, recompute {L.recompute}, {inp.precision}, order {L.order}",
        *_expert_lines(p),
        *([f"assumed: {inp.defaults_note}"] if inp.defaults_note else []),
        f"fabric: {p.comm_model}",
        f"stack: {p.stack} ({p.stack_source})",
        "  stacks that run this layout (hardware/stacks.json): " + (", ".join(stacks_running(L)) or "none of them"),
        f"compute efficiency {p.efficiency:.3f} of {p.peak_flops_per_s / 1e12:,.0f} TFLOP/s ({p.efficiency_source})",
        "",
        f"step {format_seconds(p.step_s)}   {p.tokens_per_s_per_gpu:,.0f} tokens/s/GPU   "
        f"{p.tflops_per_gpu:,.0f} model TFLOP/s/GPU   MFU {p.mfu:.1%}",
        interval_line(p, iv),
        f"  compute              {format_seconds(p.compute_s):>12}  {p.compute_s / p.step_s:6.1%}",
        f"  pipeline bubble      {format_seconds(p.pipeline_bubble_s):>12}  {p.pipeline_bubble_s / p.step_s:6.1%}",
        f"  exposed comm         {format_seconds(p.exposed_comm_s):>12}  {p.exposed_comm_s / p.step_s:6.1%}",
        f"  optimizer            {format_seconds(p.optimizer_s):>12}  {p.optimizer_s / p.step_s:6.1%}",
        *_loss_lines(p),
        f"  bounds: {format_seconds(p.overlap.perfect_overlap_s)} if every collective hid, "
        f"{format_seconds(p.overlap.no_overlap_s)} if none did ({format_seconds(p.overlap.comm_s)} on the wire)",
        *(_band_lines(p, band) if band is not None else []),
        *_operator_lines(p),
        "",
        "communication per step (one GPU):",
        f"  {'dim':<4}{'op':<14}{'size':>10}{'group':>6}{'/node':>6}{'count':>8}{'one':>10}{'wire':>10}{'exposed':>10}",
    ]
    lines += _comm_text_rows(p)
    lines += ["", *_memory_lines(p)]
    lines += [
        "",
        f"MFU convention: {MFU_CONVENTION}",
    ]
    for w in p.warnings:
        lines.append(f"warning: {w}")
    tips = advice(p)
    if tips:
        lines.append("")
        lines += [f"advice: {t}" for t in tips]
    lines += _sensitivity_lines(sensitivity)
    if extra_lines:
        lines += ["", *extra_lines]

    return wrap_lines("\n".join(lines))


def plan_run_notes(*, inputs, measured_step_s: float | None = None, saved_to: str | None = None,
                   calibration: dict | None = None, calibration_path: str | None = None,
                   trace_out: str | None = None, run_cost=None, interval=None) -> tuple[list[str], dict]:
    """The lines ``commcost plan`` prints under its report and the JSON objects beside it: the efficiency
    fitted to ``measured_step_s`` (and the file it was ``saved_to``), or the saved ``calibration`` read from
    ``calibration_path``; the Chrome trace written to ``trace_out``; the training run's cost ``run_cost``."""
    notes: list[str] = []
    extra: dict = {}
    if measured_step_s is not None:
        eta = inputs.efficiency
        notes.append(f"calibration: efficiency {eta:.4f} reproduces the step of {measured_step_s:.6g} s")
        extra["calibration"] = {"efficiency": eta, "measured_step_s": measured_step_s}
        if saved_to:
            notes.append(f"saved to {saved_to}")
    if calibration is not None:
        from commcost.calibrate.efficiency import calibration_note  # imported only when a calibration is read

        notes.append(calibration_note(calibration, inputs))
        extra["calibration"] = {"path": calibration_path, "efficiency": calibration["efficiency"], "note": notes[-1]}
    if trace_out:
        notes.append(f"Chrome trace of the step's accounting written to {trace_out}")
    if run_cost is not None:
        from commcost.report.training import render_training, training_to_dict

        extra["training"] = training_to_dict(run_cost, interval)
        notes.append(render_training(run_cost, interval))
    return notes, extra
