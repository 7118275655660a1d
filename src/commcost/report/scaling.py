"""Text, JSON and CSV renderings of :mod:`commcost.analyses.scaling` results.

Every number shown is a field (or a property) of a :class:`ScalingRow`; the
formulas in the headers are the ones its docstrings state. JSON and CSV carry the
same flat rows, SI units, with the keys listed in :data:`ROW_KEYS`.
"""

from __future__ import annotations

import csv
import io
import textwrap
from typing import Any, Sequence

from commcost.analyses.scaling import ScalingCurve, ScalingInputs, ScalingRow, knee
from commcost.core.units import BILLION, GB, MS, US, format_bytes
from commcost.analyses.scaling_compute import states_memory

__all__ = [
    "ROW_KEYS", "FORMULAS", "render_scaling_text", "render_overlap_analysis_text",
    "scaling_to_dict", "scaling_to_csv", "row_to_dict", "notes",
]

ROW_KEYS: tuple[str, ...] = (
    "analysis", "model", "fabric", "gpus", "params", "bytes_per_grad", "message_bytes",
    "compute_s", "overhead_s", "bandwidth_bytes_per_s", "latency_s", "overlap_fraction",
    "comm_s", "comm_latency_s", "comm_bandwidth_s",
    "step_s", "speedup", "efficiency",
    "step_perfect_s", "speedup_perfect", "efficiency_perfect",
    "step_partial_s", "speedup_partial", "efficiency_partial",
    "step_no_overlap_s", "speedup_no_overlap", "efficiency_no_overlap",
    "step_partial_bounded_s", "speedup_partial_bounded",
    "partial_exceeds_perfect", "beyond_flat_ring",
    "gpus_per_node", "algorithm", "crosses_nodes",
    "gpu", "memory_states_bytes", "memory_capacity_bytes", "memory_fits",
)
"""Keys of one JSON row and columns of the CSV, in order (README documents each)."""

FORMULAS: dict[str, str] = {
    "comm_s": "T = 2(N-1)a + 2(N-1)/N * S/B, S = params * bytes_per_grad (ring all-reduce)",
    "step_s": "max(t_c, T) + t_o (the scaling analysis's own assumption: T hides behind the whole step)",
    "step_perfect_s": "t_c + max(0, T - f_b t_c) + t_o (perfect overlap within the backward window: the physical "
                      "bound every command shares)",
    "step_partial_s": "t_c + (1 - f) T + t_o (overlap fraction f, as the scaling analysis computes it)",
    "step_no_overlap_s": "t_c + T + t_o",
    "step_partial_bounded_s": "t_c + max((1 - f) T, T - t_c) + t_o (f capped by the compute to hide behind)",
    "speedup": "N (t_c + t_o) / step (relative throughput; the analysis's 'eff ... x' when t_o = 0)",
    "efficiency": "speedup / N (fraction)",
}
"""The equations behind the row keys, as printed in JSON."""

ANALYSIS_RESULTS = "results"
ANALYSIS_OVERLAP = "overlap_analysis"


def _wrap(text: str, indent: str = "  ") -> str:
    # keep a number with its unit and short formulas on one line (textwrap splits only at ASCII spaces)
    glued = text
    for phrase in (" ms", " x ", " - t_c", "(1-f) T", "(1 - f) T", " + t_o", " GB/s", " GB", " MB"):
        glued = glued.replace(phrase, phrase.replace(" ", "\xa0"))
    wrapped = textwrap.fill(glued, width=80, initial_indent=indent, subsequent_indent=indent + "  ")
    return wrapped.replace("\xa0", " ")


def _ms(t_s: float, width: int, digits: int = 2) -> str:
    return f"{t_s / MS:>{width},.{digits}f}"


def _flat_note(curve: ScalingCurve) -> str | None:
    i = curve.inputs
    if not any(r.beyond_flat_ring for r in curve.rows):
        return None
    why = f": {i.flat_ring_note}" if i.flat_ring_note else ""
    return (f"* N > {i.flat_ring_max_gpus}: a flat {i.comm.flat_link.bandwidth_bytes_per_s / GB:g} GB/s {i.fabric} "
            f"ring over N GPUs does not exist on most systems{why}. These rows are the scaling analysis's model "
            "as it defines it, not a prediction.")


def _fabric_text(i: ScalingInputs) -> str:
    link = i.comm.flat_link
    if link is not None:
        return f"B = {link.bandwidth_bytes_per_s / GB:g} GB/s, a = {link.latency_s / US:g} us per ring step"
    f = getattr(i.comm, "topology", None)
    if f is None:
        return i.comm.describe()
    return (f"two tiers: {f.gpus_per_node} GPUs per node at {f.intra.bandwidth_bytes_per_s / GB:g} GB/s, "
            f"{f.intra.latency_s / US:g} us per step; across nodes {f.inter.bandwidth_bytes_per_s / GB:g} GB/s "
            f"per GPU NIC, {f.inter.latency_s / US:g} us per step; algorithm {i.algorithm}")


def _knee_note(curve: ScalingCurve) -> str | None:
    first = knee(curve)
    if first is None:
        return None
    inside = [r for r in curve.rows if not r.crosses_nodes and r.gpus > 1]
    before = (f" (at N = {inside[-1].gpus}: T = {inside[-1].comm_s / MS:,.2f} ms, efficiency "
              f"{100 * inside[-1].efficiency:.1f}%)") if inside else ""
    return (f"^ the knee: from N = {first.gpus} the group spans more than one node of "
            f"{curve.inputs.comm.topology.gpus_per_node} GPUs and the all-reduce crosses the inter-node fabric: "
            f"T = {first.comm_s / MS:,.2f} ms ({first.comm.algorithm.value}), efficiency "
            f"{100 * first.efficiency:.1f}%{before}.")


def _partial_note(curve: ScalingCurve) -> str | None:
    flagged = [r for r in curve.rows if r.partial_exceeds_perfect]
    if not flagged:
        return None
    f = curve.inputs.overlap_fraction
    first = flagged[0]
    return (f"! f T > t_c: hiding {f:g} x T needs more compute than t_c = {curve.inputs.compute_s / MS:g} ms "
            f"(at N = {first.gpus}: {f:g} x {first.comm_s / MS:,.1f} ms = "
            f"{first.overlapped_comm_s / MS:,.1f} ms), "
            f"so the analysis's t_c + (1-f) T beats perfect overlap; physically "
            f"step >= t_c + max((1-f) T, T - t_c) + t_o (at N = {first.gpus}: "
            f"{first.speedup_partial_bounded:.2f}x, not {first.speedup_partial:.2f}x; "
            "speedup_partial_bounded in JSON/CSV).")


def notes(curves: Sequence[ScalingCurve]) -> list[str]:
    """Every flat-ring and overlap note that applies to ``curves``, in order."""
    out: list[str] = []
    for c in curves:
        for note in (_flat_note(c), _knee_note(c), _partial_note(c)):
            if note is not None:
                out.append(f"{c.inputs.model} on {c.inputs.fabric}: {note}")
    return out


def _curve_text(c: ScalingCurve) -> str:
    """One model on one fabric in 80 columns: the step table (T, its terms, the step, the memory verdict where the
    GPU is known), then speedup and efficiency under each overlap assumption."""
    i = c.inputs
    f = f"f={i.overlap_fraction:g}"
    flat = i.comm.flat_link is not None and all(r.comm.algorithm.value == "ring" for r in c.rows)
    lat_head, bw_head, bw_unit = ("2(N-1)a", "2(N-1)/N", "*S/B (ms)") if flat else ("latency", "bandwidth", "(ms)")
    mem = _memory_keys(i)
    lines = [
        f"{i.model} on {i.fabric}",
        _wrap(f"S = {i.params / BILLION:g} billion params x {i.bytes_per_grad} B = {format_bytes(c.message_bytes)}; "
              f"t_c = {i.compute_s / MS:g} ms, t_o = {i.overhead_s / MS:g} ms; {_fabric_text(i)}"),
    ]
    if i.compute_source:
        lines.append(_wrap(i.compute_source))
    if mem["gpu"] is not None:
        lines.append(_wrap(f"memory: pure data parallelism holds every model state on every GPU, 16 N = "
                           f"{format_bytes(mem['memory_states_bytes'])} a GPU at every N (activations on top) "
                           f"against the {mem['gpu']}'s {format_bytes(mem['memory_capacity_bytes'])}"))
    lines += [
        f"  {'':>5} {'comm T':>10} {lat_head:>9} {bw_head:>10} {'step':>10}" + ("  memory" if mem["gpu"] else ""),
        f"  {'N':>4}  {'(ms)':>10} {'(ms)':>9} {bw_unit:>10} {'(ms)':>10}",
    ]
    verdict = "" if mem["gpu"] is None else ("  fits" if mem["memory_fits"] else "  does not fit")
    for r in c.rows:
        star = "*" if r.beyond_flat_ring else ("^" if r is _first_crossing(c) else " ")
        lines.append(f"  {r.gpus:>4}{star} {_ms(r.comm_s, 10)} {_ms(r.comm.latency_s, 9)} "
                     f"{_ms(r.comm.bandwidth_s, 10)} {_ms(r.step_s, 10)}{verdict}")
    lines += [
        f"  {'':>5} |{'speedup X (x)':^36}|{'efficiency E (%)':^29}".rstrip(),
        f"  {'N':>4}  | {'hidden':>8} {'bound':>8} {f:>8} {'none':>8} | {'hidden':>6} {'bound':>6} {f:>6} {'none':>6}",
    ]
    for r in c.rows:
        star = "*" if r.beyond_flat_ring else ("^" if r is _first_crossing(c) else " ")
        bang = "!" if r.partial_exceeds_perfect else " "
        lines.append(
            f"  {r.gpus:>4}{star} | {r.speedup:>8.2f} {r.speedup_perfect:>8.2f} {r.speedup_partial:>7.2f}{bang} "
            f"{r.speedup_no_overlap:>8.2f} | {100 * r.efficiency:>6.1f} {100 * r.efficiency_perfect:>6.1f} "
            f"{100 * r.efficiency_partial:>5.1f}{bang} {100 * r.efficiency_no_overlap:>6.1f}")
    for note in (_flat_note(c), _knee_note(c), _partial_note(c)):
        if note is not None:
            lines.append(_wrap(note))
    return "\n".join(lines)


def _first_crossing(c: ScalingCurve) -> ScalingRow | None:
    return knee(c)


def render_scaling_text(curves: Sequence[ScalingCurve]) -> str:
    """The results tables: one block per model and fabric, notes under each."""
    head = [
        "commcost scaling: data-parallel speedup over GPU counts (fixed per-GPU batch)",
        "  comm     T = 2(N-1)a + 2(N-1)/N * S/B   (ring all-reduce of the gradients S)"
        if all(c.inputs.comm.flat_link is not None and all(r.comm.algorithm.value == "ring" for r in c.rows)
               for c in curves) else
        "  comm     T = latency + bandwidth terms of the all-reduce of the gradients S on the fabric below "
        "(ring on a flat link: 2(N-1)a + 2(N-1)/N * S/B)",
        "  step     hidden: max(t_c, T) + t_o  |  bound: t_c + max(0, T - f_b t_c) + t_o  |  "
        "overlap f: t_c + (1-f) T + t_o  |  none: t_c + T + t_o",
        "  speedup  X = N (t_c + t_o) / step  (relative throughput, x);  efficiency E = X / N  (%)",
        "  'hidden' is this analysis's own assumption (communication hides behind the whole step; the step "
        "column); 'bound' is the physical perfect-overlap bound every commcost command uses (it hides only "
        "behind backward, f_b of the step); a real run lies between 'bound' and 'none'",
    ]
    head = [h if len(h) <= 80 else _wrap_formula(h) if h.startswith(("  comm", "  step", "  speedup"))
            else _wrap(h.strip(), "  ") for h in head]
    return "\n\n".join(["\n".join(head), *(_curve_text(c) for c in curves)])


def _wrap_formula(line: str) -> str:
    """A head line of formulas, broken at its ``|`` or ``;`` separators under its label (80 columns)."""
    label, rest = line[:11], line[11:]
    parts = [p.strip() for p in rest.replace(";  ", "  |  ").split("  |  ")]
    if len(parts) == 1:
        return textwrap.fill(rest, width=80, initial_indent=label, subsequent_indent=" " * len(label))
    out, cur = [], label
    for p in parts:
        piece = p if cur.strip() == label.strip() else " | " + p
        if len(cur) + len(piece) > 80 and cur.strip() != label.strip():
            out.append(cur)
            cur = " " * len(label) + p
        else:
            cur += piece
    out.append(cur)
    return "\n".join(out)


def render_overlap_analysis_text(curves: Sequence[ScalingCurve]) -> str:
    """The analysis's printed partial-overlap study (one model, one column group per fabric), its column groups
    two by two so that each table fits 80 columns."""
    first = curves[0].inputs
    f = first.overlap_fraction
    names = [c.inputs.fabric for c in curves]
    w = max(11, *(len(n) + 1 for n in names))
    group = w * len(names)
    groups = ("comm T (ms)", "rel. throughput X (x)", "efficiency E (%)", "X capped (x)")
    lines = [
        f"Analysis for {first.model}: partial overlap f = {f:g}",
        "  " + ("no serial overhead (as the analysis computes it)" if first.overhead_s == 0
                else f"serial overhead t_o = {first.overhead_s / MS:g} ms"),
        _wrap(f"compute time per step t_c = {first.compute_s / MS:.1f} ms; step = t_c + (1 - f) T + t_o; "
              "relative throughput X = N (t_c + t_o) / step (the analysis's 'eff ... x'); "
              "efficiency E = X / N; X capped: overlap hides at most t_c of T, "
              "X = N (t_c + t_o) / (t_c + max((1-f) T, T - t_c) + t_o)"),
    ]
    cells_by_row = []
    for k, n in enumerate(curves[0].rows):
        rows = [c.rows[k] for c in curves]
        cells_by_row.append((n.gpus, [
            "".join(f"{r.comm_s / MS:>{w}.1f}" for r in rows),
            "".join(f"{r.speedup_partial:>{w - 1}.1f}{'!' if r.partial_exceeds_perfect else ' '}" for r in rows),
            "".join(f"{100 * r.efficiency_partial:>{w - 1}.1f}{'!' if r.partial_exceeds_perfect else ' '}"
                    for r in rows),
            "".join(f"{r.speedup_partial_bounded:>{w}.1f}" for r in rows),
        ]))
    per_table = max(1, (80 - 9) // (group + 2))     # column groups that fit 80 columns side by side
    for lo in range(0, len(groups), per_table):
        part = range(lo, min(lo + per_table, len(groups)))
        lines += [
            f"  {'':>5} |" + " |".join(f"{groups[j]:>{group}}" for j in part),
            f"  {'N':>5} |" + " |".join("".join(f"{n:>{w}}" for n in names) for _ in part),
        ]
        lines += [f"  {gpus:>5} |" + " |".join(cells[j] for j in part) for gpus, cells in cells_by_row]
    for c in curves:
        note = _partial_note(c)
        if note is not None:
            lines.append(_wrap(f"{c.inputs.fabric}: {note}"))
    return "\n".join(lines)


def row_to_dict(curve: ScalingCurve, r: ScalingRow, analysis: str = ANALYSIS_RESULTS) -> dict[str, Any]:
    """One flat row with the keys of :data:`ROW_KEYS`, SI units, efficiencies as fractions."""
    i = curve.inputs
    return {
        "analysis": analysis, "model": i.model, "fabric": i.fabric, "gpus": r.gpus,
        "params": i.params, "bytes_per_grad": i.bytes_per_grad, "message_bytes": curve.message_bytes,
        "compute_s": r.compute_s, "overhead_s": r.overhead_s,
        "bandwidth_bytes_per_s": None if i.comm.flat_link is None else i.comm.flat_link.bandwidth_bytes_per_s,
        "latency_s": None if i.comm.flat_link is None else i.comm.flat_link.latency_s,
        "overlap_fraction": r.overlap_fraction,
        "comm_s": r.comm_s, "comm_latency_s": r.comm.latency_s, "comm_bandwidth_s": r.comm.bandwidth_s,
        "step_s": r.step_s, "speedup": r.speedup, "efficiency": r.efficiency,
        "step_perfect_s": r.step_perfect_s, "speedup_perfect": r.speedup_perfect,
        "efficiency_perfect": r.efficiency_perfect,
        "step_partial_s": r.step_partial_s, "speedup_partial": r.speedup_partial,
        "efficiency_partial": r.efficiency_partial,
        "step_no_overlap_s": r.step_no_overlap_s, "speedup_no_overlap": r.speedup_no_overlap,
        "efficiency_no_overlap": r.efficiency_no_overlap,
        "step_partial_bounded_s": r.step_partial_bounded_s,
        "speedup_partial_bounded": r.speedup_partial_bounded,
        "partial_exceeds_perfect": r.partial_exceeds_perfect, "beyond_flat_ring": r.beyond_flat_ring,
        "gpus_per_node": None if getattr(i.comm, "topology", None) is None else i.comm.topology.gpus_per_node,
        "algorithm": r.comm.algorithm.value, "crosses_nodes": r.crosses_nodes,
        **_memory_keys(i),
    }


def _memory_keys(i: ScalingInputs) -> dict[str, Any]:
    """The memory verdict of a point (:func:`commcost.analyses.scaling_compute.states_memory`); null without a GPU."""
    if i.gpu is None:
        return {"gpu": None, "memory_states_bytes": None, "memory_capacity_bytes": None, "memory_fits": None}
    m = states_memory(i.params, i.gpu)
    return {"gpu": i.gpu, "memory_states_bytes": m.states_bytes, "memory_capacity_bytes": m.capacity_bytes,
            "memory_fits": m.fits}


def _rows(results: Sequence[ScalingCurve], overlap: Sequence[ScalingCurve]) -> list[dict[str, Any]]:
    return ([row_to_dict(c, r, ANALYSIS_RESULTS) for c in results for r in c.rows]
            + [row_to_dict(c, r, ANALYSIS_OVERLAP) for c in overlap for r in c.rows])


def scaling_to_dict(results: Sequence[ScalingCurve],
                    overlap: Sequence[ScalingCurve] = ()) -> dict[str, Any]:
    """``{"formulas", "rows", "notes"}``: rows of both analyses, told apart by ``analysis``."""
    return {"formulas": dict(FORMULAS), "rows": _rows(results, overlap),
            "notes": notes(results) + notes(overlap)}


def scaling_to_csv(results: Sequence[ScalingCurve], overlap: Sequence[ScalingCurve] = ()) -> str:
    """The same rows as JSON, one per line, header :data:`ROW_KEYS`; booleans as true/false."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(ROW_KEYS), lineterminator="\n")
    w.writeheader()
    for row in _rows(results, overlap):
        w.writerow({k: (str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else v)
                    for k, v in row.items()})
    return buf.getvalue()
