"""Rendering of measurements, fits and validations (text in nccl-tests' shape, JSON, plot).

No cost is computed here: every number comes from commcost.calibrate.
"""

from __future__ import annotations

import math
from typing import Any

from commcost.calibrate.data import Measurement, Series
from commcost.calibrate.fit import AlphaBetaFit, Comparison, ring_latency_steps
from commcost.calibrate.profile import MODEL_TEXT, Profile
from commcost.comm.collectives import bus_bandwidth_factor
from commcost.core.units import GB, US, format_bytes, format_fraction, format_rate, format_seconds
from commcost.core.optional import pyplot
from commcost.core.files import save_figure_atomic
from commcost.report._plot_units import decade_ticks
from commcost.report._plot_units import pow2_ticks
from commcost.report._plot_units import size_text
from commcost.report._plot_units import time_text
from commcost.report._width import wrap_lines

__all__ = [
    "render_measurement_text", "render_fit_text", "fit_to_dict", "render_validate_text",
    "validate_to_dict", "plot_validate", "validate_figure", "points_to_list",
]


def render_measurement_text(m: Measurement) -> str:
    """The measured rows as nccl-tests prints them (size, count, type, time us, algbw, busbw GB/s)."""
    p = m.provenance
    lines = [f"# commcost measure: backend {p.get('backend')}, {p.get('world_size')} ranks on "
             f"{p.get('nodes')} node(s) {', '.join(p.get('hosts') or [])}, device {p.get('device')}, "
             f"torch {p.get('torch_version')}, {p.get('iters')} timed iterations ({p.get('statistic', 'median')}"
             f" of each rank, slowest rank kept)"]
    op = None
    for row in m.rows:
        if row.op != op:
            op = row.op
            lines += ["#", f"# {op}",
                      f"#{'size':>12} {'count':>12} {'type':>9} {'time':>10} {'algbw':>8} {'busbw':>8}",
                      f"#{'(B)':>12} {'(elements)':>12} {'':>9} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8}"]
        lines.append(f" {row.size_bytes:>12} {row.count:>12} {row.dtype:>9} {row.time_s / US:>10.2f} "
                     f"{row.algbw_bytes_per_s / GB:>8.2f} {row.busbw_bytes_per_s / GB:>8.2f}")
    return "\n".join(lines) + "\n"


def points_to_list(c: Comparison) -> list[dict[str, float]]:
    """``points[]`` of the JSON outputs."""
    return [{"size_bytes": p.size_bytes, "measured_s": p.measured_s, "predicted_s": p.predicted_s,
             "rel_error": p.rel_error} for p in c.points]


def _regimes_dict(fit: AlphaBetaFit) -> list[dict[str, Any]]:
    return [{"min_size_bytes": r.min_size_bytes,
             "max_size_bytes": None if math.isinf(r.max_size_bytes) else r.max_size_bytes,
             "alpha_s": r.alpha_s, "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s} for r in fit.regimes]


def _points_table(c: Comparison, fit: AlphaBetaFit) -> list[str]:
    lines = [f"  {'size':>12} {'measured':>11} {'predicted':>11} {'error':>8}  {'busbw meas.':>11}  regime"]
    f = bus_bandwidth_factor(fit.op, fit.gpus)
    for p in c.points:
        idx = fit.regimes.index(fit.regime_for(p.size_bytes)) + 1
        busbw = f * p.size_bytes / p.measured_s
        lines.append(f"  {format_bytes(p.size_bytes, binary=True):>12} {format_seconds(p.measured_s):>11} "
                     f"{format_seconds(p.predicted_s):>11} {100 * p.rel_error:>+7.1f}%  "
                     f"{busbw / GB:>7.2f} GB/s  {idx}")
    return lines


def _model_lines(fit: AlphaBetaFit) -> list[str]:
    k = ring_latency_steps(fit.op, fit.gpus)
    f = bus_bandwidth_factor(fit.op, fit.gpus)
    lines = [f"model: T(S) = k*alpha_i + f*S/B_i   ({fit.algorithm} {fit.op}, P = {fit.gpus}: "
             f"k = {k} ring steps, f = {f:.4g} bus-bandwidth factor)",
             f"  {'regime':<6} {'sizes':<28} {'alpha_i (per step)':>18} {'B_i (bus bw)':>14}"]
    for i, r in enumerate(fit.regimes, start=1):
        lines.append(f"  {i:<6} {r.describe():<28} {format_seconds(r.alpha_s):>18} "
                     f"{format_rate(r.bandwidth_bytes_per_s):>14}")
    return lines


def _pooled(series) -> str:
    """`` (from N rows: median per size)`` when sizes were measured in several rows, else nothing."""
    rows = getattr(series, "rows", 0)
    return f" (from {rows:,} rows: the median time per size)" if rows > len(series.samples) else ""


def render_fit_text(fit: AlphaBetaFit, quality: Comparison, series: Series, single_line: Comparison,
                    single_fit: AlphaBetaFit, profile_path: str | None) -> str:
    """``commcost fit`` text: source, model, headline alpha and B, quality, per-size errors."""
    prov = series.provenance
    lines = [f"source: {prov.get('source')} ({series.source_kind}), {series.op} on {series.gpus} ranks, "
             f"{len(series.samples)} points{_pooled(series)}"]
    if series.note:
        lines.append(f"note: {series.note}")
    lines += [""] + _model_lines(fit) + [
        "",
        f"alpha (per ring step, small messages): {format_seconds(fit.alpha_s)}",
        f"B (per-rank bus bandwidth, large messages): {format_rate(fit.bandwidth_bytes_per_s)}",
        f"crossover S* = k*alpha*B/f (latency term = bandwidth term): {format_bytes(fit.crossover_bytes)}",
        f"quality: R^2 (on ln T) = {quality.r2:.4f}, |error| median {format_fraction(quality.median_abs_rel_error)}"
        f", worst {format_fraction(quality.max_abs_rel_error)}",
        f"one straight line instead (alpha {format_seconds(single_fit.alpha_s)}, B "
        f"{format_rate(single_fit.bandwidth_bytes_per_s)}): |error| median "
        f"{format_fraction(single_line.median_abs_rel_error)}, worst {format_fraction(single_line.max_abs_rel_error)}",
        "",
    ]
    table = _points_table(quality, fit)
    lines += table
    if profile_path:
        lines += ["", f"profile written: {profile_path} (use it with --profile)"]
    return wrap_lines("\n".join(lines), keep=set(table).__contains__) + "\n"


def fit_to_dict(fit: AlphaBetaFit, quality: Comparison, series: Series, single_line: Comparison,
                single_fit: AlphaBetaFit, profile_path: str | None) -> dict[str, Any]:
    """``commcost fit --json`` (SI units)."""
    return {
        "op": fit.op.value, "algorithm": fit.algorithm.value, "gpus": fit.gpus,
        "alpha_s": fit.alpha_s, "bandwidth_bytes_per_s": fit.bandwidth_bytes_per_s,
        "crossover_bytes": fit.crossover_bytes, "r2": quality.r2,
        "median_abs_rel_error": quality.median_abs_rel_error, "max_abs_rel_error": quality.max_abs_rel_error,
        "model": MODEL_TEXT, "regimes": _regimes_dict(fit),
        "single_line": {"alpha_s": single_fit.alpha_s, "bandwidth_bytes_per_s": single_fit.bandwidth_bytes_per_s,
                        "median_abs_rel_error": single_line.median_abs_rel_error,
                        "max_abs_rel_error": single_line.max_abs_rel_error},
        "points": points_to_list(quality), "source": series.provenance.get("source"),
        "source_kind": series.source_kind, "note": series.note or None, "profile": profile_path,
    }


def render_validate_text(profile: Profile, model: AlphaBetaFit, c: Comparison, series: Series,
                         plot_path: str | None) -> str:
    """``commcost validate`` text: predicted against measured per size."""
    fitted = profile.fit
    lines = [f"profile: {profile.path} ({fitted.op} on {fitted.gpus} ranks, from "
             f"{profile.provenance.get('source', 'unknown source')})",
             f"data: {series.provenance.get('source')} ({series.source_kind}), {series.op} on {series.gpus} ranks, "
             f"{len(series.samples)} points{_pooled(series)}"]
    if series.note:
        lines.append(f"note: {series.note}")
    if (fitted.op, fitted.gpus) != (model.op, model.gpus):
        lines.append(f"note: the profile's per-step alpha and bus bandwidth are applied to {model.op} on "
                     f"{model.gpus} ranks through the ring formula")
    table = _points_table(c, model)
    lines += [""] + _model_lines(model) + ["", *table, "",
              f"|error| median {format_fraction(c.median_abs_rel_error)}, worst "
              f"{format_fraction(c.max_abs_rel_error)}, R^2 (on ln T) {c.r2:.4f}"]
    if plot_path:
        lines.append(f"plot written: {plot_path}")
    return wrap_lines("\n".join(lines), keep=set(table).__contains__) + "\n"


def validate_to_dict(profile: Profile, model: AlphaBetaFit, c: Comparison, series: Series,
                     plot_path: str | None) -> dict[str, Any]:
    """``commcost validate --json`` (SI units)."""
    return {"median_abs_rel_error": c.median_abs_rel_error, "max_abs_rel_error": c.max_abs_rel_error,
            "r2": c.r2, "op": model.op.value, "gpus": model.gpus, "profile": profile.path,
            "source": series.provenance.get("source"), "source_kind": series.source_kind,
            "points": points_to_list(c), "plot": plot_path}


def validate_figure(model: AlphaBetaFit, c: Comparison, title: str) -> Any:
    """The validate picture as a Figure: measured points and the model line (both axes log), and
    below them the error of each prediction; sizes and times in readable units, the regime
    boundaries marked, every legend outside the axes.

    Artists carry ids for tests: ``measured``, ``model``, ``regime-boundary`` (one per boundary),
    ``error`` and ``median-error``; the axes are labelled ``times`` and ``errors``.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    plt = pyplot()
    lo, hi = c.points[0].size_bytes, c.points[-1].size_bytes
    n = 200
    sizes = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)] if hi > lo else [lo]
    fig, (ax, ax_err) = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True, height_ratios=[2.2, 1],
                                     layout="constrained")
    ax.set_label("times")
    ax_err.set_label("errors")
    xs = [p.size_bytes for p in c.points]
    ax.plot(xs, [p.measured_s for p in c.points], "o", color="#1f77b4", ms=5, zorder=3, gid="measured",
            label="measured")
    ax.plot(sizes, [model.predict_s(s) for s in sizes], "-", color="#ff7f0e", gid="model",
            label=f"model T(S) = k alpha_i + f S / B_i ({len(model.regimes)} regime"
                  f"{'s' if len(model.regimes) != 1 else ''})")
    for k, r in enumerate(model.regimes[1:], start=2):
        for a in (ax, ax_err):
            a.axvline(r.min_size_bytes, color="grey", lw=0.8, ls=":", gid="regime-boundary",
                      label=f"regime {k} starts at {size_text(r.min_size_bytes)}" if a is ax else None)
    errors = [100.0 * p.rel_error for p in c.points]
    ax_err.axhline(0.0, color="black", lw=0.6)
    ax_err.plot(xs, errors, "o-", color="#d62728", ms=4, lw=0.8, gid="error",
                label="error (predicted - measured) / measured")
    med = 100.0 * c.median_abs_rel_error
    ax_err.axhspan(-med, med, color="#d62728", alpha=0.1, lw=0, gid="median-error",
                   label=f"median |error| {med:.1f}% (worst {100.0 * c.max_abs_rel_error:.1f}%)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(pow2_ticks(lo, hi)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_text(v)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yscale("log")
    times = [p.measured_s for p in c.points] + [model.predict_s(s) for s in sizes]
    ax.yaxis.set_major_locator(FixedLocator(decade_ticks(min(times), max(times))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: time_text(v)))
    ax.set_ylim(min(times) / 1.4, max(times) * 1.4)
    ax_err.set_xlabel("message size S (binary units, log2 scale)")
    ax.set_ylabel("time per collective")
    ax_err.set_ylabel("error (%)")
    bound = max(5.0, max(abs(e) for e in errors) * 1.15)
    ax_err.set_ylim(-bound, bound)
    ax.set_title(title, fontsize=10)
    for a in (ax, ax_err):
        a.grid(True, which="major", lw=0.3)
        a.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, frameon=False)
    return fig


def plot_validate(model: AlphaBetaFit, c: Comparison, path: str, title: str) -> None:
    """:func:`validate_figure` saved to ``path`` (.png or .svg)."""

    save_figure_atomic(validate_figure(model, c, title), path, dpi=120)


def render_tier_fit_text(fit, system: str, rows: int, output: str | None = None) -> str:
    """``commcost fit --tiers SYSTEM``: the fitted scales of :class:`commcost.calibrate.tiers.TierFit` over the
    preset's, the ``rows`` fitted, the median error, and where the profile was written (``output``); wrapped to the
    terminal's width."""
    return wrap_lines(f"commcost fit --tiers {system}: {rows} all-reduce rows >= 1 MiB on "
            f"{', '.join(str(n) for n in fit.fitted_nodes)} node(s)\n"
            f"  intra-node (and NVLS) bandwidth x {fit.intra_bandwidth_scale:.3f}, NIC bandwidth x "
            f"{fit.inter_bandwidth_scale:.3f}, network step latency x {fit.inter_latency_scale:.3f}"
            + (f", spine oversubscription x {fit.spine_oversubscription_scale:.3f}"
               if "spine_oversubscription_scale" not in fit.not_fitted and fit.spine_oversubscription_scale != 1.0
               else "")
            + " of the preset's\n"
            + (f"  not fitted (no row depends on them): {', '.join(fit.not_fitted)}\n" if fit.not_fitted else "")
            + f"  median |error| on the rows fitted: {100 * fit.median_abs_error:.1f}%"
            + (f"\n  profile written to {output}: --profile predicts any node count through {system}'s "
               "topology and names what it extrapolates" if output else ""))
