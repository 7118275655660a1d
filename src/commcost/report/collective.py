"""Text and JSON renderings of collective costs (``commcost collective``) and presets.

Every number shown is a field of a :class:`commcost.comm.collectives.CollectiveCost`
or of the :class:`commcost.comm.topology.Topology`; nothing here computes a cost.
Bandwidths print in decimal GB/s, as nccl-tests does.
"""

from __future__ import annotations

import math
from typing import Any

from commcost.report._choice import reason_text
from commcost.analyses.collective import SizeResult
from commcost.comm.collectives import CollectiveCost
from commcost.hardware.registry import PresetEntry
from commcost.comm.topology import Link, Topology
from commcost.core.units import GB, US, format_bytes, format_seconds as t
from commcost.calibrate.fit import MID_SIZE_RANGE_BYTES
from commcost.report._band import band_range
from commcost.report._band import band_side
from commcost.report._width import terminal_width
from commcost.report._width import wrap
from commcost.report._width import wrap_lines

__all__ = ["SizeResult", "collective_to_dict", "render_size_text", "render_table_text", "size_to_dict",
           "fabric_to_dict", "render_presets_text", "budget_fabric_note", "render_preset_score_text",
           "preset_score_to_dict"]


def _gbps(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x / GB:.2f}"


def _fabric_line(fabric: Link | Topology | None, gpus: int, note: str | None = None) -> str:
    if fabric is None:
        return f"  {note}"
    if note:
        return _fabric_line(fabric, gpus) + f"\n  {note}"
    if isinstance(fabric, Link):
        return (f"  flat fabric: {gpus} GPUs on one link, B = {fabric.bandwidth_bytes_per_s / GB:g} GB/s "
                f"per rank, a = {fabric.latency_s / US:g} us per step")
    f = fabric
    s = (f"  {f.name}: {f.gpus_per_node} GPUs per node; intra {f.intra.bandwidth_bytes_per_s / GB:g} GB/s, "
         f"{f.intra.latency_s / US:g} us/step; inter {f.inter.bandwidth_bytes_per_s / GB:g} GB/s per GPU NIC, "
         f"{f.inter.latency_s / US:g} us/step")
    if f.oversubscription != 1:
        s += f", oversubscribed {f.oversubscription:g}:1"
    if f.in_network is not None:
        s += (f"; NVLS {f.in_network.bandwidth_bytes_per_s / GB:g} GB/s, "
              f"{f.in_network.latency_s / US:g} us/step")
    if f.base_latency_s:
        s += f"; launch {f.base_latency_s / US:g} us"
    if f.network_floor_s:
        s += f"; across nodes no collective under {f.network_floor_s / US:g} us (network floor)"
    if f.pod_nodes is not None:
        s += (f"\n  third tier: pods of {f.pod_nodes} nodes; across pods the spine gives each NIC "
              f"1/{f.spine_oversubscription:g} of its bandwidth and adds {f.spine_latency_s / US:g} us per step")
    return s


def _where(fabric: Link | Topology | None, nodes_used: int) -> str:
    if fabric is None:
        return "a calibrated profile"
    return f"{nodes_used} node(s)" if isinstance(fabric, Topology) else "a flat fabric"


def render_size_text(r: SizeResult, fabric: Link | Topology | None, nodes_used: int, note: str | None = None) -> str:
    """One message size: every algorithm's terms, and the one used (``fabric`` None: a profile, ``note``)."""
    c = r.chosen
    lines = [
        f"commcost collective: {c.op.value} of {c.message_bytes:,.0f} B ({format_bytes(c.message_bytes)}, "
        f"{format_bytes(c.message_bytes, binary=True)}) on {c.gpus} GPUs over {_where(fabric, nodes_used)}",
        _fabric_line(fabric, c.gpus, note),
        "",
        f"  {'algorithm':<12} {'latency':>11} {'bandwidth':>11} {'total':>11} {'algbw GB/s':>10} {'busbw GB/s':>10}",
    ]
    for alg, a in r.alternatives.items():
        mark = " <- used" if alg == c.algorithm else ""
        lines.append(f"  {alg.value:<12} {t(a.latency_s):>11} {t(a.bandwidth_s):>11} {t(a.total_s):>11} "
                     f"{_gbps(a.algbw_bytes_per_s):>10} {_gbps(a.busbw_bytes_per_s):>10}{mark}")
    for alg, why in r.unavailable.items():
        lines.append(f"  {alg.value:<17} not available: {why}")
    how = "the fastest here (auto)" if r.requested == "auto" else "as requested"
    proto = f" with NCCL's {r.protocol.upper()} protocol" if r.protocol else ""
    lines += ["", f"  -> {c.algorithm.value}{proto}, {how}: T = {t(c.total_s)} ({c.dominant}-bound); "
                  f"algbw = S/T = {_gbps(c.algbw_bytes_per_s)} GB/s, busbw = algbw x nccl-tests factor = "
                  f"{_gbps(c.busbw_bytes_per_s)} GB/s"]
    if r.band_s is not None:

        lines.append(f"     {t(c.total_s)} ({band_range(*r.band_s)} on measured clusters of this class: "
                     "the 5th-95th percentile of measured/predicted on published tables, docs/fabrics.md"
                     f"{band_side(c.total_s, *r.band_s)})")
    if reason_text(c):
        lines.append(f"     why: {reason_text(c)}")
    return _fit(lines)


def _fit(lines: list[str]) -> str:
    """The lines wrapped to the terminal (:mod:`commcost.report._width`); table rows are already narrow."""

    return wrap_lines("\n".join(lines))


def render_table_text(results: list[SizeResult], fabric: Link | Topology | None, nodes_used: int,
                      note: str | None = None) -> str:
    """A predicted nccl-tests-style table, one row per size, with the runner-up algorithm beside the winner."""

    c0 = results[0].chosen
    banded = results[0].band_s is not None
    rows: list[tuple[str, str]] = []
    for r in results:
        c = r.chosen
        proto = f" ({r.protocol.upper()})" if r.protocol else ""
        others = sorted((a for a in r.alternatives.values() if a.algorithm != c.algorithm), key=lambda a: a.total_s)
        runner = (f"{others[0].algorithm.value} {others[0].total_s / US:.2f}: {others[0].latency_s / US:.2f} + "
                  f"{others[0].bandwidth_s / US:.2f}" if others else "-")
        band = (f" {f'{r.band_s[0] / US:.2f}-{r.band_s[1] / US:.2f}':>17}" if r.band_s is not None
                else f" {'':>17}" if banded else "")
        rows.append((f"  {c.message_bytes:>13,.0f} {c.total_s / US:>9.2f}{band} {_gbps(c.algbw_bytes_per_s):>7} "
                     f"{_gbps(c.busbw_bytes_per_s):>7}  {c.algorithm.value + proto:<19}", runner))
    band_head = f" {'band (us)':>17}" if banded else ""
    head = f"  {'size (B)':>13} {'time us':>9}{band_head} {'algbw':>7} {'busbw':>7}  {'algorithm':<19}"
    width = terminal_width()
    one_line = max(len(a) + 1 + len(b) for a, b in rows) <= width
    lines = [f"commcost collective: predicted {c0.op.value} on {c0.gpus} GPUs over {_where(fabric, nodes_used)} "
             f"(algorithm {results[0].requested})", _fabric_line(fabric, c0.gpus, note), "",
             "  algbw and busbw in GB/s" + ("; the band: measured clusters of this class" if banded else "")
             + ("; " if one_line else "; under each row ") + "the runner-up (time us: latency + bandwidth)",
             head + " runner-up" if one_line else head.rstrip()]
    for row, runner in rows:
        lines += [f"{row} {runner}"] if one_line else [row.rstrip(), f"  {'':>13} runner-up {runner}"]
    return wrap_lines("\n".join(lines), width, keep=lambda line: line in lines[4:])


def _cost_dict(c: CollectiveCost) -> dict[str, Any]:
    return {"time_s": c.total_s, "latency_s": c.latency_s, "bandwidth_s": c.bandwidth_s,
            "algbw_bytes_per_s": c.algbw_bytes_per_s, "busbw_bytes_per_s": c.busbw_bytes_per_s}


def size_to_dict(r: SizeResult) -> dict[str, Any]:
    """One size as the documented JSON object (SI units)."""
    c = r.chosen
    return {"op": c.op.value, "size_bytes": c.message_bytes, "gpus": c.gpus,
            "algorithm": c.algorithm.value, "protocol": r.protocol, "requested_algorithm": r.requested,
            "reason": reason_text(c),
            "band_s": None if r.band_s is None else list(r.band_s),
            **_cost_dict(c),
            "algorithms": {a.value: _cost_dict(x) for a, x in r.alternatives.items()},
            "unavailable": {a.value: why for a, why in r.unavailable.items()}}


def _link_dict(link: Link) -> dict[str, float]:
    return {"bandwidth_bytes_per_s": link.bandwidth_bytes_per_s, "latency_s": link.latency_s}


def fabric_to_dict(fabric: Link | Topology | None, nodes_used: int) -> dict[str, Any] | None:
    """The fabric the numbers assume (SI units); None for a calibrated profile (see ``profile``)."""
    if fabric is None:
        return None
    if isinstance(fabric, Link):
        return {"kind": "flat", **_link_dict(fabric)}
    f = fabric
    return {"kind": "two_tier", "name": f.name, "gpus_per_node": f.gpus_per_node, "nodes": f.nodes,
            "nodes_used": nodes_used, "intra": _link_dict(f.intra), "inter": _link_dict(f.inter),
            "oversubscription": f.oversubscription,
            "in_network": None if f.in_network is None else _link_dict(f.in_network),
            "inter_in_network": f.inter_in_network, "base_latency_s": f.base_latency_s,
            "pod_nodes": f.pod_nodes, "spine_oversubscription": f.spine_oversubscription,
            "spine_latency_s": f.spine_latency_s}


PRESET_NAME_CELLS = 16
"""Width of the name column of ``commcost presets``; a longer name pushes its numbers right."""


def render_presets_text(entries: list[PresetEntry], width: int | None = None) -> str:
    """``commcost presets``: name, numbers, source; grouped by kind. Each entry's numbers and its source
    wrap to ``width`` (default :func:`commcost.report._width.terminal_width`): the numbers under their
    column, the source (often a paragraph) under the name, where it has most of the width."""
    width = width or terminal_width()
    column = " " * (PRESET_NAME_CELLS + 1)  # continuation lines start under the numbers
    lines: list[str] = []
    kind = None
    for e in entries:
        if e.kind != kind:
            if kind is not None:
                lines.append("")
            kind = e.kind
            lines.append(f"{kind}s:")
        name = f"{e.name:<{PRESET_NAME_CELLS}} ".replace(" ", "\xa0")  # its padding is kept, not broken
        lines += wrap(f"  {name}{e.summary}", width, hang=column)
        lines += wrap(f"    source: {e.source}", width)
    return "\n".join(lines)


def budget_fabric_note(b, topology: Topology) -> str:
    """The lines ``budget --system`` prints above the drill report: which fabric and what ran."""
    i, T = b.inputs, b.allreduce
    n = b.fixes.intra_node.nodes_spanned
    return "\n".join([
        f"commcost budget on {topology.name}: {i.gpus} GPUs = {n} node(s) x {topology.gpus_per_node}",
        _fabric_line(topology, i.gpus),
        f"  every collective below is the fabric's own cost at its size (algorithm {i.algorithm}); (b) ran "
        f"{T.algorithm.value}{f' ({T.protocol})' if T.protocol else ''}: {reason_text(T)}; fix (e)3 uses the "
        f"system's NVLink",
    ])


def _verdict_ranges() -> tuple[tuple[str, float, float], ...]:

    lo, hi = MID_SIZE_RANGE_BYTES
    return (("1-64 MiB", lo, hi), ("above 64 MiB", hi + 1, math.inf))


def render_preset_score_text(score: Any, source: str) -> str:
    """``commcost collective --log``: one line per size (measured, preset, error) and the verdict."""
    lines = [f"{source}: {score.op.value} on {score.gpus} ranks, {score.nodes} node(s), against preset {score.system}",
             f"  {'size':>10} {'measured':>11} {'preset':>11} {'error':>7}  {'algorithm':<11} band",
             ]
    for r in score.rows:
        lines.append(f"  {format_bytes(r.message_bytes):>10} {t(r.measured_s):>11} {t(r.predicted_s):>11} "
                     f"{r.error * 100:+6.1f}%  {r.algorithm:<11} {'inside' if r.in_band else 'outside'}")
    lines.append("  error = (preset - measured) / measured: negative where the preset is faster than this cluster")
    for label, lo, hi in _verdict_ranges():
        x = score.speed_in(lo, hi)
        if x is not None:
            lines.append(f"verdict: this cluster runs at {x * 100:.0f}% of its class ({score.system}) at {label} "
                         f"(median of preset time / measured time)")
    outside = sum(not r.in_band for r in score.rows)
    lines.append(f"{outside} of {len(score.rows)} sizes outside the preset's measured band of {score.op.value} "
                 f"{'inside one node' if score.nodes == 1 else 'across nodes'}")
    return wrap_lines("\n".join(lines), keep=set(lines[1:2 + len(score.rows)]).__contains__)


def preset_score_to_dict(score: Any, source: str) -> dict[str, Any]:
    """JSON of :func:`render_preset_score_text` (SI units): rows and the speed per size range."""
    return {"source": source, "system": score.system, "op": score.op.value, "gpus": score.gpus, "nodes": score.nodes,
            "rows": [{"message_bytes": r.message_bytes, "measured_s": r.measured_s, "predicted_s": r.predicted_s,
                      "error": r.error, "algorithm": r.algorithm, "in_band": r.in_band} for r in score.rows],
            "speed_of_class": {label: score.speed_in(lo, hi) for label, lo, hi in _verdict_ranges()}}


def collective_to_dict(results: list[SizeResult], *, op, gpus: int, requested, fabric, nodes_used: int,
                       one_size: bool, model: dict, profile: dict | None = None) -> dict[str, Any]:
    """``commcost collective --json``: one size's object (``one_size``) or the table's (``op``, ``gpus``,
    ``requested_algorithm``, ``rows``), with the ``fabric``, the CommModel's ``model`` and a ``profile``."""
    if one_size:
        out = size_to_dict(results[0]) | {"fabric": fabric_to_dict(fabric, nodes_used)}
    else:
        out = {"op": op.value, "gpus": gpus, "requested_algorithm": str(requested),
               "fabric": fabric_to_dict(fabric, nodes_used), "rows": [size_to_dict(r) for r in results]}
    out["model"] = model
    if profile is not None:
        out["profile"] = profile
    return out
