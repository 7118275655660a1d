"""Plots of :mod:`commcost.analyses.scaling` curves (matplotlib, imported only when plotting).

Left: speedup against N on log2 axes, the ideal line ``X = N``, one curve per
model and fabric at the seed's overlap (T hides behind the whole step), a thin line
of the same colour at the shared physical perfect-overlap bound (T hides behind
backward only, :class:`commcost.step.overlap.OverlapBounds`) and a shaded band down
to no overlap (the overlap bracket). Right: efficiency ``E = X / N`` in percent,
same curves and bands. Every plotted value is a field or property of a
:class:`commcost.analyses.scaling.ScalingRow`; nothing is computed here.

Artists carry ids so the data can be read back: line ``gid`` is
``"speedup|MODEL|FABRIC"`` or ``"efficiency|MODEL|FABRIC"`` (``"ideal"`` for the
ideal lines; ``"physical-"`` in front for the physical bound), a band's ``gid``
is ``"band-"`` followed by its line's id.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from commcost.core.optional import pyplot
from commcost.analyses.scaling import ScalingCurve
from commcost.analyses.scaling import knee as knee_of
from commcost.core.units import MS
from commcost.core.files import save_figure_atomic

__all__ = ["plot_scaling", "save_figure", "LINESTYLES", "MARKERS", "efficiency_ylim"]

LINESTYLES = ("-", "--", "-.", ":")
"""Line style per fabric, in order of first appearance."""
MARKERS = (("o", 9.0), ("s", 6.5), ("^", 4.5), ("D", 3.5), ("v", 3.0))
"""Marker and its size per model, in order of first appearance. Hollow and shrinking, so curves
that coincide (several models at 100% on NVLink, all of them on the ideal line) still show as
nested shapes instead of one line hiding the others."""


class _Shades:
    """Legend handler drawing one patch as the side-by-side shades of every model."""

    def __init__(self, shades: Sequence[Any]) -> None:
        self.shades = shades

    def legend_artist(self, legend: Any, orig_handle: Any, fontsize: float, handlebox: Any) -> Any:
        from matplotlib.patches import Rectangle

        w, h = handlebox.width / len(self.shades), handlebox.height
        artists = [Rectangle((handlebox.xdescent + k * w, handlebox.ydescent), w, h,
                             facecolor=p.get_facecolor(), lw=0, transform=handlebox.get_transform())
                   for k, p in enumerate(self.shades)]
        for a in artists:
            handlebox.add_artist(a)
        return artists[0]


def efficiency_ylim(values_pct: Sequence[float]) -> tuple[float, float]:
    """The efficiency axis, from 5 points below the lowest value (rounded down to 10, at least 0)
    to 103%: the 0-100 range is kept only when the data need it, so curves near 100% separate."""
    lo = max(0.0, math.floor((min(values_pct) - 5.0) / 10.0) * 10.0)
    return lo, 103.0


def _pow2_ticks(lo: float, hi: float) -> list[float]:
    """Powers of two from the largest one <= ``lo`` to the smallest one >= ``hi``."""
    k = math.floor(math.log2(lo))
    top = math.ceil(math.log2(hi))
    return [2.0 ** e for e in range(k, top + 1)]


def _vertical_markers(curves: Sequence[ScalingCurve], axes: tuple) -> list[Any]:
    """Each fabric's flat-ring limit (where a curve passes it) and each knee as a vertical line on every axis;
    their legend handles."""
    from matplotlib.lines import Line2D

    handles: list[Any] = []
    limits = sorted({(c.inputs.fabric, c.inputs.flat_ring_max_gpus) for c in curves
                     if c.inputs.flat_ring_max_gpus is not None
                     and any(r.beyond_flat_ring for r in c.rows)})
    for fabric, limit in limits:
        for ax in axes:
            ax.axvline(limit, color="gray", lw=0.9, ls="-.", zorder=0)
        handles.append(Line2D([], [], color="gray", lw=0.9, ls="-.",
                              label=f"{fabric} flat-ring limit: {limit} GPUs\n"
                                    f"(beyond it the flat {fabric} rows are idealized)"))

    knees = sorted({k.gpus for k in (knee_of(c) for c in curves) if k is not None})
    for knee in knees:
        for ax in axes:
            ax.axvline(knee, color="firebrick", lw=0.9, ls=":", zorder=0)
        handles.append(Line2D([], [], color="firebrick", lw=0.9, ls=":",
                              label=f"the knee: from N = {knee} the group\nspans nodes (inter-node fabric)"))
    return handles


def _draw_curve(c: ScalingCurve, axes: tuple, palette: list, models: list, fabrics: list) -> Any:
    """One curve on the three axes (speedup, efficiency, step time): its line, the overlap bracket shaded to no
    overlap, and the physical perfect-overlap bound as a thin line; returns the speedup line (the legend's)."""
    ax_x, ax_e, ax_s = axes
    i = c.inputs
    color = palette[models.index(i.model) % len(palette)]
    style = LINESTYLES[fabrics.index(i.fabric) % len(LINESTYLES)]
    marker, ms = MARKERS[models.index(i.model) % len(MARKERS)]
    look = {"color": color, "ls": style, "marker": marker, "ms": ms, "mfc": "none", "mew": 1.4,
            "lw": 1.6, "zorder": 3 + models.index(i.model)}
    n = [r.gpus for r in c.rows]
    key = f"{i.model}|{i.fabric}"
    label = f"{i.model} / {i.fabric}"
    line = ax_x.plot(n, [r.speedup for r in c.rows], label=label, gid=f"speedup|{key}", **look)[0]
    ax_x.fill_between(n, [r.speedup_no_overlap for r in c.rows], [r.speedup for r in c.rows],
                      color=color, alpha=0.13, lw=0, gid=f"band-speedup|{key}")
    ax_e.plot(n, [100.0 * r.efficiency for r in c.rows], label=label, gid=f"efficiency|{key}", **look)
    # the shared physical bound (communication hides only behind backward): thin, same colour
    bound = {"color": color, "ls": style, "lw": 0.9, "alpha": 0.8, "zorder": 2}
    ax_x.plot(n, [r.speedup_perfect for r in c.rows], gid=f"physical-speedup|{key}", **bound)
    ax_e.plot(n, [100.0 * r.efficiency_perfect for r in c.rows], gid=f"physical-efficiency|{key}", **bound)
    ax_e.fill_between(n, [100.0 * r.efficiency_no_overlap for r in c.rows],
                      [100.0 * r.efficiency for r in c.rows],
                      color=color, alpha=0.13, lw=0, gid=f"band-efficiency|{key}")
    # the step time itself (step_s of each point), with the same bracket and bound
    ax_s.plot(n, [r.step_s / MS for r in c.rows], label=label, gid=f"step|{key}", **look)
    ax_s.plot(n, [r.step_perfect_s / MS for r in c.rows], gid=f"physical-step|{key}", **bound)
    ax_s.fill_between(n, [r.step_s / MS for r in c.rows], [r.step_no_overlap_s / MS for r in c.rows],
                      color=color, alpha=0.13, lw=0, gid=f"band-step|{key}")
    return line


def _axes_scales_and_labels(curves: Sequence[ScalingCurve], axes: tuple, gpus_all: list) -> None:
    """Log2 GPU axes ticked at the counts, the speedup's log2 axis on powers of two, the efficiency's range,
    and every axis's label and title."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax_x, ax_e, ax_s = axes
    xticks = FixedLocator(gpus_all)
    xfmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (ax_x, ax_e, ax_s):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(xticks)
        ax.xaxis.set_major_formatter(xfmt)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("GPUs N (count, log2 scale)")
        ax.grid(True, which="major", alpha=0.3)
    speedups = [v for c in curves for r in c.rows for v in (r.speedup, r.speedup_no_overlap)]
    lo, hi = min(speedups + gpus_all), max(speedups + gpus_all)
    ax_x.set_yscale("log", base=2)
    yticks = _pow2_ticks(lo, hi)
    ax_x.set_ylim(yticks[0] / 1.15, yticks[-1] * 1.15)
    ax_x.yaxis.set_major_locator(FixedLocator(yticks))
    ax_x.yaxis.set_major_formatter(xfmt)
    ax_x.yaxis.set_minor_locator(NullLocator())
    ax_x.set_ylabel("speedup X = N (t_c + t_o) / step (x, log2 scale)")
    ax_x.set_title("Speedup vs GPUs (relative throughput)")
    ax_e.set_ylim(*efficiency_ylim([100.0 * v for c in curves for r in c.rows
                                    for v in (r.efficiency, r.efficiency_no_overlap)]))
    ax_e.set_ylabel("efficiency E = X / N (%)")
    ax_e.set_title("Efficiency vs GPUs")
    ax_s.set_ylim(bottom=0)
    ax_s.set_ylabel("step time (ms)")
    ax_s.set_title("Step time vs GPUs")


def plot_scaling(curves: Sequence[ScalingCurve]) -> Any:
    """Draw ``curves`` on a new Figure and return it (the caller saves or shows it)."""
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not curves:
        raise ValueError("plot_scaling needs at least one curve")
    fig, (ax_x, ax_e, ax_s) = plt.subplots(1, 3, figsize=(18.5, 5.4), layout="constrained")
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    models = list(dict.fromkeys(c.inputs.model for c in curves))
    fabrics = list(dict.fromkeys(c.inputs.fabric for c in curves))
    gpus_all = sorted({r.gpus for c in curves for r in c.rows})

    handles: list[Any] = []
    # the ideal is a wide pale band under the curves: a curve on it stays visible on top
    ideal = ax_x.plot(gpus_all, gpus_all, color="0.6", lw=6.0, alpha=0.45, solid_capstyle="butt",
                      label="ideal X = N (E = 100%)", gid="ideal", zorder=1)[0]
    ax_e.plot(gpus_all, [100.0] * len(gpus_all), color="0.6", lw=6.0, alpha=0.45, solid_capstyle="butt",
              gid="ideal", zorder=1)
    handles.append(ideal)
    for c in curves:
        handles.append(_draw_curve(c, (ax_x, ax_e, ax_s), palette, models, fabrics))
    handles.append(Line2D([], [], color="0.3", lw=0.9, label="thin line, same colour: the physical perfect-overlap\n"
                                                         "bound (T hides behind backward only, f_b t_c)"))
    # the bracket's entry shows each model's shade (the bands are the curves' colours, see-through)
    shades = tuple(Patch(facecolor=palette[k % len(palette)], alpha=0.25, lw=0) for k in range(len(models)))
    bracket = Patch(label="overlap bracket, shaded in each model's colour:\n"
                          "no overlap (the far edge) to communication hidden\nbehind the whole step (the line)")
    handles.append(bracket)
    handler_map = {bracket: _Shades(shades)}

    handles += _vertical_markers(curves, (ax_x, ax_e, ax_s))

    _axes_scales_and_labels(curves, (ax_x, ax_e, ax_s), gpus_all)
    ran = sorted({r.comm.algorithm.value for c in curves for r in c.rows if r.gpus > 1})
    algorithms = ran if len(ran) == 1 else sorted({c.inputs.algorithm for c in curves})
    what = ("ring all-reduce" if algorithms == ["ring"] else
            "all-reduce (" + ", ".join("auto: the fastest algorithm per N" if a == "auto" else a
                                       for a in algorithms) + ")")
    fig.suptitle(f"Data-parallel scaling: {what} of the gradients, fixed per-GPU batch\n"
                 "line = communication hidden behind the whole step, shade = to no overlap",
                 fontsize=11)
    fig.legend(handles=handles, loc="outside right center", fontsize=8.5, frameon=False, handler_map=handler_map)
    return fig


def save_figure(fig: Any, path: str) -> None:
    """Write ``fig`` to ``path`` (format from the suffix: .png or .svg) and close it."""

    save_figure_atomic(fig, path, dpi=150)
