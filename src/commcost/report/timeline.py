"""Text and JSON renderings of :class:`commcost.step.timeline.Timeline` and :class:`BucketSweep`.

Every number is a field of the result; the formula shown beside it is the one
the field's docstring states (:mod:`commcost.step.timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commcost.report.bucket_advice import bucket_advice_to_dict, render_bucket_advice
from commcost.report._width import wrap_lines
from commcost.step.sweep import BucketSweep
from commcost.step.timeline import Timeline, TimelineInputs
from commcost.core.units import GB, MS, MiB, format_fraction as pct, format_seconds as t
from commcost.report._band import band_range
from commcost.report._band import band_side

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.analyses.uncertainty import TimelineBand

__all__ = ["TimelineContext", "render_timeline_text", "render_sweep_text", "timeline_to_dict", "sweep_to_dict",
           "timeline_model_label", "caps_note", "render_timeline_report"]

_ROWS_HEAD = 5
_ROWS_TAIL = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineContext:
    """What the text needs besides the result: the inputs and how the caps were chosen."""

    inputs: TimelineInputs
    """The simulated step's inputs."""
    model_label: str
    """How gradients arrive (uniform rate, or which model shape)."""
    caps_note: str
    """How the bucket caps were chosen (DDP default, explicit, search)."""
    fabric_note: str | None = None
    """A profile or a system: what prices the bucket all-reduces (a header line)."""
    band: TimelineBand | None = None
    """The measured band of the shown timeline (a system preset alone, :mod:`commcost.analyses.uncertainty`)."""


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / MiB:,.2f} MiB"


def _ms(t_s: float) -> str:
    return f"{t_s / MS:,.2f}"


def _header(ctx: TimelineContext, tl: Timeline) -> list[str]:
    i = ctx.inputs
    link = i.comm.flat_link
    if link is not None:
        group = (f"  P = {i.gpus} GPUs, B = {link.bandwidth_bytes_per_s / GB:g} GB/s per rank, "
                 f"a = {link.latency_s * 1e6:g} us per ring step; bucket all-reduce T(c) = 2(P-1)a + 2(P-1)/P * c/B")
    else:
        group = (f"  P = {i.gpus} GPUs on {i.comm.describe()}; each bucket's all-reduce T(c) is the model's at its "
                 f"own size (algorithm {i.algorithm})")
    return [
        "commcost timeline: DDP gradient buckets on one communication stream",
        group,
        *([f"  {ctx.fabric_note}"] if ctx.fabric_note else []),
        f"  gradient S = {tl.message_bytes:,.0f} B = {_mib(tl.message_bytes)} ({i.bytes_per_grad} B per element); "
        f"{ctx.model_label}",
        f"  compute t_c = {t(i.step_s)} per micro-batch x k = {i.grad_accum}"
        + (" (no_sync on the first k-1: only the last backward overlaps)" if i.grad_accum > 1 else "")
        + f"; backward window W = {i.backward_fraction:.3g} * t_c = {t(tl.backward_window_s)}"
        f" ({_ms(tl.backward_start_s)} to {_ms(tl.compute_s)} ms); optimizer {t(tl.optimizer_s)}",
    ]


def _bucket_rows(tl: Timeline) -> list[str]:
    out = ["  (ready, start and end: ms from the step's start)",
           f"  {'bucket':>7} {'size':>14} {'ready':>10} {'start':>10} {'end':>10} {'all-reduce':>11}"]
    n = len(tl.buckets)
    shown = list(range(n)) if n <= _ROWS_HEAD + _ROWS_TAIL + 2 else \
        list(range(_ROWS_HEAD)) + [-1] + list(range(n - _ROWS_TAIL, n))
    for j in shown:
        if j < 0:
            out.append(f"  {'...':>7} ({n - _ROWS_HEAD - _ROWS_TAIL:,} more)")
            continue
        b = tl.buckets[j]
        out.append(f"  {j + 1:>7,} {_mib(b.size_bytes):>14} {_ms(b.ready_s):>10} {_ms(b.start_s):>10} "
                   f"{_ms(b.end_s):>10} {t(b.end_s - b.start_s):>11}")
    return out


def _band_line(tl: Timeline, band: TimelineBand) -> str:
    """``T_w``, ``E`` and the step at the band's edges, the same buckets re-simulated."""

    def cell(point_s: float, edges: tuple[float, float]) -> str:
        return band_range(*edges) + band_side(point_s, *edges, brief=True)

    side = band_side(tl.wire_s, *band.wire_s)
    return (f"  measured band  T_w = {band_range(*band.wire_s)}, E = {cell(tl.exposed_s, band.exposed_s)}, "
            f"step = {cell(tl.step_s, band.step_s)}\n"
            f"    on measured clusters of this class ({band.band_class}: every all-reduce x r = "
            f"{band.ratios[0]:.3f}-{band.ratios[1]:.3f}, the same buckets re-simulated, compute unchanged; "
            f"docs/fabrics.md{side})")


def _summary(tl: Timeline, band: TimelineBand | None = None) -> list[str]:
    n = len(tl.buckets)
    out = [
        f"  on the wire  T_w = sum of {n:,} all-reduces       = {t(tl.wire_s):>11}",
        f"  exposed      E = end of last all-reduce - t_e    = {t(tl.exposed_s):>11}"
        f"  ({pct(tl.exposed_s / tl.wire_s) if tl.wire_s > 0 else '0.0%'} of T_w)",
        f"  overlap      (T_w - E) / T_w                     = {pct(tl.overlap_fraction):>11}",
        f"  step         k t_c + E + t_opt                   = {t(tl.step_s):>11}",
        f"  efficiency   (k t_c + t_opt) / step              = {pct(tl.efficiency):>11}",
        f"  bounds       perfect overlap k t_c + max(0, T_w - W) + t_opt = {t(tl.perfect_overlap_s)}",
        f"           <=  simulated {t(tl.step_s)}",
        f"           <=  no overlap k t_c + T_w + t_opt = {t(tl.no_overlap_s)}",
    ]
    if band is not None:
        out.append(_band_line(tl, band))
    if tl.wire_s == 0:
        out.append("  -> P = 1: nothing to communicate; the step is compute plus optimizer.")
        return out
    j = tl.busy_from
    last = tl.buckets[-1]
    if j == n - 1:
        out.append(f"  -> communication keeps up with the backward pass: each all-reduce is done before the "
                   f"next bucket fills, so only the last bucket's all-reduce ({t(last.end_s - last.start_s)}) "
                   "is exposed; smaller buckets shrink it until their latency terms stop the stream keeping up")
    else:
        b = tl.buckets[j]
        out.append(f"  -> communication falls behind: from bucket {j + 1:,} (ready at {_ms(b.ready_s)} ms) the stream "
                   f"never idles, so E = ready + remaining all-reduces - t_e")
        over = tl.wire_s - tl.unbucketed_s
        if tl.unbucketed_s > tl.backward_window_s:
            out.append(f"     even one all-reduce of S ({t(tl.unbucketed_s)}) exceeds the backward window "
                       f"({t(tl.backward_window_s)}): no bucket size hides it all")
        else:
            out.append(f"     one all-reduce of S ({t(tl.unbucketed_s)}) would fit in the backward window "
                       f"({t(tl.backward_window_s)}); bucketing adds {t(over)} of latency terms: larger buckets "
                       "cut them, but the last bucket's tail grows (--bucket auto finds the balance)")
    return out


def render_timeline_text(ctx: TimelineContext, tl: Timeline) -> str:
    """One bucket size: header, the bucket table, the step summary with both bounds."""
    lines = _header(ctx, tl)
    lines.append(f"  buckets: {len(tl.buckets):,}; {ctx.caps_note}")
    lines.append("")
    lines += _bucket_rows(tl)
    lines.append("")
    lines += _summary(tl, ctx.band)
    return "\n".join(lines)


def render_sweep_text(ctx: TimelineContext, sw: BucketSweep, default: Timeline) -> str:
    """``--bucket auto``: the curve, the best cap's timeline, and DDP's default beside it."""
    best = sw.best
    lines = _header(ctx, best)
    lines.append(f"  bucket search: {len(sw.curve)} caps on a log grid; {ctx.caps_note}")
    lines.append("")
    lines.append(f"  {'cap':>14} {'buckets':>8} {'on the wire':>12} {'exposed':>11} {'step':>11}")
    for p in sw.curve:
        mark = "  <- best" if p.bucket_bytes == best.bucket_cap_bytes else ""
        lines.append(f"  {_mib(p.bucket_bytes):>14} {p.buckets:>8,} {t(p.wire_s):>12} {t(p.exposed_s):>11} "
                     f"{t(p.step_s):>11}{mark}")
    lines.append("  left of the best: every bucket pays 2(P-1)a, T_w grows and the stream falls behind; "
                 "right of it: the last bucket fills only when backward ends and its all-reduce is the tail")
    lines.append("")
    lines.append("  bucket advice: " + render_bucket_advice(sw.advice))
    lines.append("  (fewer buckets pay fewer latency terms; the same advice as `commcost budget` and `plan`)")
    lines.append(f"  best cap {_mib(best.bucket_cap_bytes)}: step {t(best.step_s)}, exposed {t(best.exposed_s)} "
                 f"({pct(best.exposed_s / best.wire_s) if best.wire_s > 0 else '0.0%'} of its T_w = {t(best.wire_s)})")
    lines.append(f"  PyTorch default (25 MiB, first bucket 1 MiB): step {t(default.step_s)}, exposed "
                 f"{t(default.exposed_s)} ({pct(default.exposed_s / default.wire_s) if default.wire_s > 0 else '0.0%'}"
                 f" of its T_w = {t(default.wire_s)})")
    lines.append("")
    lines += _bucket_rows(best)
    lines.append("")
    lines += _summary(best, ctx.band)
    return "\n".join(lines)


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return None if x is None else list(x)


def timeline_to_dict(tl: Timeline, band: TimelineBand | None = None) -> dict[str, Any]:
    """The documented JSON keys (docs/timeline.md), SI units; the ``*band*`` keys are null without ``band``."""
    return {
        "bucket_bytes": tl.bucket_cap_bytes,
        "first_bucket_bytes": tl.first_bucket_cap_bytes,
        "message_bytes": tl.message_bytes,
        "compute_s": tl.compute_s,
        "backward_start_s": tl.backward_start_s,
        "backward_window_s": tl.backward_window_s,
        "optimizer_s": tl.optimizer_s,
        "wire_s": tl.wire_s,
        "exposed_s": tl.exposed_s,
        "overlap_fraction": tl.overlap_fraction,
        "step_s": tl.step_s,
        "efficiency": tl.efficiency,
        "bounds": {"no_overlap_s": tl.no_overlap_s, "perfect_overlap_s": tl.perfect_overlap_s},
        "band_class": None if band is None else band.band_class,
        "band_ratios": _pair(None if band is None else band.ratios),
        "wire_band_s": _pair(None if band is None else band.wire_s),
        "exposed_band_s": _pair(None if band is None else band.exposed_s),
        "step_band_s": _pair(None if band is None else band.step_s),
        "buckets": [{"size_bytes": b.size_bytes, "ready_s": b.ready_s, "start_s": b.start_s, "end_s": b.end_s}
                    for b in tl.buckets],
    }


def sweep_to_dict(sw: BucketSweep, default: Timeline, band: TimelineBand | None = None) -> dict[str, Any]:
    """The best timeline's keys (``band``: the best cap's), plus ``best``, ``curve`` and ``pytorch_default``."""
    out = timeline_to_dict(sw.best, band)
    out["best"] = {"bucket_bytes": sw.best.bucket_cap_bytes, "step_s": sw.best.step_s,
                   "exposed_s": sw.best.exposed_s, "rule": sw.choice.rule,
                   "good_min_bucket_bytes": sw.choice.good_min_cap_bytes,
                   "good_max_bucket_bytes": sw.choice.good_max_cap_bytes,
                   "good_bucket_bytes": list(sw.choice.good_caps_bytes),
                   "min_exposed_s": sw.choice.min_exposed_s, "tolerance_s": sw.choice.tolerance_s}
    out["curve"] = [{"bucket_bytes": p.bucket_bytes, "buckets": p.buckets, "wire_s": p.wire_s,
                     "exposed_s": p.exposed_s, "step_s": p.step_s} for p in sw.curve]
    out["pytorch_default"] = {"bucket_bytes": default.bucket_cap_bytes,
                              "first_bucket_bytes": default.first_bucket_cap_bytes,
                              "step_s": default.step_s, "exposed_s": default.exposed_s, "wire_s": default.wire_s}
    return out


def timeline_model_label(label: str | None, params: int | None) -> str:
    """How gradients arrive: layer by layer in reverse for a model shape (``label``, with its ``params``
    count), else at a uniform rate."""
    if label is None:
        return "no model shape: gradients arrive at a uniform rate S/W during backward"
    return (f"{label}: {params:,} params, gradients ready layer by layer in reverse "
            "(output head first, embedding last), backward time per layer from its FLOPs")


def caps_note(*, auto: bool, caps=None, bucket_cap_bytes: float | None = None,
              first_bucket_cap_bytes: float | None = None) -> str:
    """How the bucket caps were chosen: searched (``auto``), DDP's default (no ``bucket_cap_bytes``), or
    explicit (``caps``, the :class:`~commcost.step.ddp_buckets.DdpBucketCaps` simulated)."""
    if auto:
        return ("each cap as an explicit bucket_cap_mb (torch 2.13: first bucket = cap)"
                if first_bucket_cap_bytes is None else f"first bucket fixed at {first_bucket_cap_bytes / MiB:g} MiB")
    if bucket_cap_bytes is None:
        note = "DDP's default: cap 25 MiB, first bucket 1 MiB (bucket_cap_mb=None)"
    else:
        note = f"cap {bucket_cap_bytes / MiB:g} MiB, first bucket {caps.first_bucket_cap_bytes / MiB:g} MiB"
        if first_bucket_cap_bytes is None:
            note += " (an explicit bucket_cap_mb drops torch 2.13's 1 MiB first bucket; omit --bucket for the default)"
    return note + ("\n  (steady state: DDP runs its first iteration as one bucket, then rebuilds the buckets "
                   "in gradient-ready order)")


def render_timeline_report(ctx: TimelineContext, best: Timeline, default: Timeline, sweep: BucketSweep | None,
                           advice, *, plot: str | None = None, info: dict | None = None) -> tuple[dict, str]:
    """The whole ``commcost timeline`` report as ``(JSON object, text)``: the sweep (``sweep``, with
    ``--bucket auto``) or the one timeline ``best``, the bucket ``advice``, where the plot went, and the
    profile's JSON ``info``."""
    if sweep is not None:
        out, text = sweep_to_dict(sweep, default, ctx.band), render_sweep_text(ctx, sweep, default)
    else:
        out, text = timeline_to_dict(best, ctx.band), render_timeline_text(ctx, best)
    out["bucket_advice"] = bucket_advice_to_dict(advice)
    if sweep is None:  # --bucket auto prints it beside its curve
        text += "\n  bucket advice: " + render_bucket_advice(advice)
    if info is not None:
        out["profile"] = info
    return out, wrap_lines(text + (f"\n\n  plot written to {plot}" if plot else ""))
