"""Plots of :mod:`commcost.scaling` curves (matplotlib, imported only when plotting).

Left: speedup against N on log2 axes, the ideal line ``X = N``, one curve per
model and fabric at perfect overlap (the seed's step) and a shaded band down to
no overlap (the overlap bracket). Right: efficiency ``E = X / N`` in percent,
same curves and bands. Every plotted value is a field or property of a
:class:`commcost.scaling.ScalingRow`; nothing is computed here.

Artists carry ids so the data can be read back: line ``gid`` is
``"speedup|MODEL|FABRIC"`` or ``"efficiency|MODEL|FABRIC"`` (``"ideal"`` for the
ideal lines), a band's ``gid`` is ``"band-"`` followed by its line's id.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from commcost.report._optional import pyplot
from commcost.scaling import ScalingCurve

__all__ = ["plot_scaling", "save_figure", "LINESTYLES"]

LINESTYLES = ("-", "--", "-.", ":")
"""Line style per fabric, in order of first appearance."""


def _pow2_ticks(lo: float, hi: float) -> list[float]:
    """Powers of two from the largest one <= ``lo`` to the smallest one >= ``hi``."""
    k = math.floor(math.log2(lo))
    top = math.ceil(math.log2(hi))
    return [2.0 ** e for e in range(k, top + 1)]


def plot_scaling(curves: Sequence[ScalingCurve]) -> Any:
    """Draw ``curves`` on a new Figure and return it (the caller saves or shows it)."""
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if not curves:
        raise ValueError("plot_scaling needs at least one curve")
    fig, (ax_x, ax_e) = plt.subplots(1, 2, figsize=(13.5, 5.4), layout="constrained")
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    models = list(dict.fromkeys(c.inputs.model for c in curves))
    fabrics = list(dict.fromkeys(c.inputs.fabric for c in curves))
    gpus_all = sorted({r.gpus for c in curves for r in c.rows})

    handles: list[Any] = []
    ideal = ax_x.plot(gpus_all, gpus_all, color="black", lw=1.0, ls=(0, (1, 2)),
                      label="ideal X = N", gid="ideal", zorder=4)[0]
    ax_e.plot(gpus_all, [100.0] * len(gpus_all), color="black", lw=1.0, ls=(0, (1, 2)), gid="ideal",
              zorder=4)
    handles.append(ideal)
    for c in curves:
        i = c.inputs
        color = palette[models.index(i.model) % len(palette)]
        style = LINESTYLES[fabrics.index(i.fabric) % len(LINESTYLES)]
        n = [r.gpus for r in c.rows]
        key = f"{i.model}|{i.fabric}"
        label = f"{i.model} / {i.fabric}"
        line = ax_x.plot(n, [r.speedup for r in c.rows], color=color, ls=style, marker="o", ms=3.5,
                         lw=1.6, label=label, gid=f"speedup|{key}")[0]
        ax_x.fill_between(n, [r.speedup_no_overlap for r in c.rows], [r.speedup for r in c.rows],
                          color=color, alpha=0.13, lw=0, gid=f"band-speedup|{key}")
        ax_e.plot(n, [100.0 * r.efficiency for r in c.rows], color=color, ls=style, marker="o", ms=3.5,
                  lw=1.6, label=label, gid=f"efficiency|{key}")
        ax_e.fill_between(n, [100.0 * r.efficiency_no_overlap for r in c.rows],
                          [100.0 * r.efficiency for r in c.rows],
                          color=color, alpha=0.13, lw=0, gid=f"band-efficiency|{key}")
        handles.append(line)
    handles.append(Patch(facecolor="gray", alpha=0.3,
                         label="overlap bracket: no overlap (lower edge)\nto perfect overlap (the line)"))

    limits = sorted({(c.inputs.fabric, c.inputs.flat_ring_max_gpus) for c in curves
                     if c.inputs.flat_ring_max_gpus is not None
                     and any(r.beyond_flat_ring for r in c.rows)})
    for fabric, limit in limits:
        for ax in (ax_x, ax_e):
            ax.axvline(limit, color="gray", lw=0.9, ls="-.", zorder=0)
        handles.append(Line2D([], [], color="gray", lw=0.9, ls="-.",
                              label=f"{fabric} flat-ring limit: {limit} GPUs\n"
                                    f"(beyond it the flat {fabric} rows are idealized)"))

    knees = sorted({next(r.gpus for r in c.rows if r.crosses_nodes) for c in curves
                    if any(r.crosses_nodes for r in c.rows)})
    for knee in knees:
        for ax in (ax_x, ax_e):
            ax.axvline(knee, color="firebrick", lw=0.9, ls=":", zorder=0)
        handles.append(Line2D([], [], color="firebrick", lw=0.9, ls=":",
                              label=f"the knee: from N = {knee} the group\nspans nodes (inter-node fabric)"))

    xticks = FixedLocator(gpus_all)
    xfmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (ax_x, ax_e):
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
    ax_e.set_ylim(0, 105)
    ax_e.set_ylabel("efficiency E = X / N (%)")
    ax_e.set_title("Efficiency vs GPUs")
    ran = sorted({r.comm.algorithm.value for c in curves for r in c.rows if r.gpus > 1})
    algorithms = ran if len(ran) == 1 else sorted({c.inputs.algorithm for c in curves})
    what = ("ring all-reduce" if algorithms == ["ring"] else
            "all-reduce (" + ", ".join("auto: the fastest algorithm per N" if a == "auto" else a
                                       for a in algorithms) + ")")
    fig.suptitle(f"Data-parallel scaling: {what} of the gradients, fixed per-GPU batch; "
                 "line = perfect overlap, shade = overlap bracket", fontsize=11)
    fig.legend(handles=handles, loc="outside right center", fontsize=8.5, frameon=False)
    return fig


def save_figure(fig: Any, path: str) -> None:
    """Write ``fig`` to ``path`` (format from the suffix: .png or .svg) and close it."""
    plt = pyplot()
    try:
        fig.savefig(path, dpi=150)
    finally:
        plt.close(fig)
