"""Charts for ``commcost timeline --plot``: the two streams, the tail, the buckets, the bucket curve.

Panels, top to bottom (every number is a field of the :class:`~commcost.step.timeline.Timeline`
or :class:`~commcost.step.sweep.BucketSweep`; nothing is computed here but the unit of an axis):

1. ``gantt``: compute stream (forward, last backward, optimizer) and the communication
   stream (every simulated bucket's all-reduce, two alternating shades), the exposed
   tail shaded, the end of backward ``t_e`` dashed.
2. ``zoom`` (only when the tail is under :data:`ZOOM_BELOW` of the step, so it would be a
   hairline above): the same streams around ``t_e``, time measured from ``t_e``, the
   buckets in view labelled with their sizes.
3. ``sizes``: the true size of every bucket in reduction order, as simulated (DDP closes
   a bucket on the tensor that reaches the cap, so sizes differ from the cap; the first
   bucket has its own cap; the last holds the remainder), with the caps as lines.
4. ``sweep`` (with ``--bucket auto``): exposed and wire time against the cap, the good range
   of caps shaded, the recommended cap and PyTorch's default marked.

Every legend sits outside its axes, to the right. Axes carry their panel name as
label (``ax.get_label()``) and artists a ``gid`` so tests can read the data back.
matplotlib is imported lazily through :func:`commcost.core.optional.pyplot`.
"""

from __future__ import annotations

import textwrap
from typing import Any, Sequence

from commcost.report._plot_units import decade_ticks, linear_size_ticks, pow2_ticks, size_text, time_text, \
    time_unit
from commcost.step.sweep import BucketSweep
from commcost.step.timeline import Timeline
from commcost.core.optional import pyplot
from commcost.core.files import save_figure_atomic

__all__ = ["plot_timeline", "timeline_figure", "bucket_sizes_text", "ZOOM_BELOW", "MAX_DRAWN_BARS", "COLORS"]

ZOOM_BELOW = 0.04
"""The zoomed panel is drawn when there is communication and the tail (exposed time, or the last bucket's all-reduce when
nothing is exposed) is under this share of the whole step: at 4% of a 10-inch axis it is
under 4 mm, and a 2.5 ms tail of a 1.2 s step is under a pixel."""

COLORS = {
    "forward": "#c7d7ea", "backward": "#4c72b0", "optimizer": "#8172b2",
    "buckets-a": "#dd8452", "buckets-b": "#937860", "exposed": "#c44e52",
}
"""One colour per kind of bar; each has its legend entry."""

MAX_DRAWN_BARS = 4000
"""Above this many buckets the Gantt chart draws the stream's busy periods instead of every bar
(a 70B model in 0.25 MiB buckets has 534,000: a minute to draw, all under a pixel wide)."""

_COMPUTE_Y, _COMM_Y, _H = 10.0, 0.0, 8.0
_LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": 8,
           "frameon": False}


def bucket_sizes_text(sizes: Sequence[float]) -> str:
    """The true bucket sizes in a few words: ``101 buckets: 1 MiB, 99 x 25 MiB, 5.97 MiB``, or
    ``6 buckets: first 2.38 GiB, 4 of 2.39-2.43 GiB, last 550 MiB`` when they vary."""
    n = len(sizes)
    if n == 0:
        return "no buckets"
    if n == 1:
        return f"1 bucket of {size_text(sizes[0])}"
    runs: list[list[Any]] = []
    for size, k in _runs(sizes):                 # equal sizes first (cheap), then equal texts
        t = size_text(size)
        if runs and runs[-1][0] == t:
            runs[-1][1] += k
        else:
            runs.append([t, k])
    texts = [runs[0][0], runs[-1][0]]
    if len(runs) <= 4:
        return f"{n:,} buckets: " + ", ".join(t if k == 1 else f"{k:,} x {t}" for t, k in runs)
    middle = sizes[1:-1]
    lo, hi = size_text(min(middle)), size_text(max(middle))
    span = lo if lo == hi else (f"{lo.split(' ')[0]}-{hi}" if lo.split(" ")[1] == hi.split(" ")[1]
                                else f"{lo} to {hi}")
    return f"{n:,} buckets: first {texts[0]}, {n - 2:,} of {span}, last {texts[-1]}"


def _runs(values: Sequence[float]) -> list[tuple[float, int]]:
    """``(value, count)`` for each run of equal consecutive values."""
    out: list[list[Any]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return [(v, k) for v, k in out]


def _caps_text(tl: Timeline) -> str:
    if tl.first_bucket_cap_bytes == tl.bucket_cap_bytes:
        return f"cap {size_text(tl.bucket_cap_bytes)} for every bucket"
    return f"caps: first bucket {size_text(tl.first_bucket_cap_bytes)}, the rest {size_text(tl.bucket_cap_bytes)}"


def _comm_end_s(tl: Timeline) -> float:
    return max((b.end_s for b in tl.buckets), default=tl.compute_s)


def _tail_s(tl: Timeline) -> float:
    """What the zoom is for: the exposed time, or the last all-reduce when nothing is exposed."""
    last = tl.buckets[-1].end_s - tl.buckets[-1].start_s if tl.buckets else 0.0
    return max(tl.exposed_s, last)


def _streams(ax: Any, tl: Timeline, origin_s: float, per_unit_s: float, prefix: str,
             window_s: tuple[float, float] | None = None) -> list[Any]:
    """Both streams on ``ax``, x = (t - origin) / unit, only the buckets inside ``window_s``
    (absolute times) when given; returns the legend handles."""
    def x(t_s: float) -> float:
        return (t_s - origin_s) / per_unit_s

    handles = []
    handles.append(ax.broken_barh([(x(0.0), tl.backward_start_s / per_unit_s)], (_COMPUTE_Y, _H),
                                  facecolors=COLORS["forward"], gid=prefix + "forward",
                                  label="forward (and any earlier no_sync micro-batches)"))
    handles.append(ax.broken_barh([(x(tl.backward_start_s), tl.backward_window_s / per_unit_s)],
                                  (_COMPUTE_Y, _H), facecolors=COLORS["backward"], gid=prefix + "backward",
                                  label="backward (last micro-batch)"))
    if tl.optimizer_s > 0:
        opt_start = max(tl.compute_s, _comm_end_s(tl))
        handles.append(ax.broken_barh([(x(opt_start), tl.optimizer_s / per_unit_s)], (_COMPUTE_Y, _H),
                                      facecolors=COLORS["optimizer"], gid=prefix + "optimizer",
                                      label="optimizer (after the last all-reduce)"))
    buckets = tl.buckets
    first = 0                                     # global index of buckets[0]: keeps the shades' parity
    if window_s is not None:
        seen = [i for i, b in enumerate(tl.buckets) if b.end_s > window_s[0] and b.start_s < window_s[1]]
        first = seen[0] if seen else 0
        buckets = tuple(tl.buckets[i] for i in seen)
    if len(buckets) > MAX_DRAWN_BARS:
        # more bars than pixels: draw the busy periods of the stream, one bar per run of
        # all-reduces closer than a pixel (~1/4000 of the axis) to each other
        gap_s = (buckets[-1].end_s - buckets[0].start_s) / 4000
        runs: list[list[float]] = []
        for b in buckets:
            if runs and b.start_s - runs[-1][1] <= gap_s:
                runs[-1][1] = b.end_s
            else:
                runs.append([b.start_s, b.end_s])
        handles.append(ax.broken_barh([(x(a), (e - a) / per_unit_s) for a, e in runs], (_COMM_Y, _H),
                                      facecolors=COLORS["buckets-a"], gid=prefix + "buckets-merged",
                                      label=f"bucket all-reduces ({len(buckets):,} buckets,\n"
                                            "drawn as busy periods: each is under a pixel)"))
    else:
        for shade, start, words in (("buckets-a", 0, "1st, 3rd, 5th ..."), ("buckets-b", 1, "2nd, 4th, 6th ...")):
            bars = [(x(b.start_s), (b.end_s - b.start_s) / per_unit_s) for b in buckets[(start + first) % 2::2]]
            if bars:
                handles.append(ax.broken_barh(bars, (_COMM_Y, _H), facecolors=COLORS[shade],
                                              gid=prefix + shade, label=f"bucket all-reduce ({words} bucket)"))
    if tl.exposed_s > 0:
        handles.append(ax.axvspan(x(tl.compute_s), x(tl.compute_s + tl.exposed_s), color=COLORS["exposed"],
                                  alpha=0.2, lw=0, zorder=0, gid=prefix + "exposed",
                                  label=f"exposed: {time_text(tl.exposed_s)} of communication after backward"))
    handles.append(ax.axvline(x(tl.compute_s), color="black", lw=0.9, ls="--", gid=prefix + "end-of-backward",
                              label="end of backward, t_e"))
    ax.set_yticks([_COMM_Y + _H / 2, _COMPUTE_Y + _H / 2], ["comm", "compute"])
    ax.set_ylim(-1.5, _COMPUTE_Y + _H + 1.5)
    return handles


def _gantt(ax: Any, tl: Timeline) -> None:
    end_s = max(tl.step_s, _comm_end_s(tl))
    per_unit_s, unit = time_unit(end_s)
    handles = _streams(ax, tl, 0.0, per_unit_s, "")
    ax.set_xlim(-0.01 * end_s / per_unit_s, 1.01 * end_s / per_unit_s)
    ax.set_xlabel(f"time from step start ({unit})")
    ax.set_title(f"{bucket_sizes_text([b.size_bytes for b in tl.buckets])} ({_caps_text(tl)})\n"
                 f"step {time_text(tl.step_s)} = compute {time_text(tl.compute_s)}"
                 + (f" + optimizer {time_text(tl.optimizer_s)}" if tl.optimizer_s > 0 else "")
                 + f" + exposed {time_text(tl.exposed_s)}; {time_text(tl.wire_s)} on the wire", fontsize=10)
    ax.legend(handles=handles, **_LEGEND)


def _zoom(ax: Any, tl: Timeline) -> None:
    """The streams around t_e, time from t_e; the buckets in view labelled with their sizes."""
    tail_s = max(_tail_s(tl), 1e-9)
    last_start = tl.buckets[-1].start_s if tl.buckets else tl.compute_s
    left_s = min(last_start - tl.compute_s, 0.0) - 1.5 * tail_s
    right_s = tl.exposed_s + 1.0 * tail_s
    per_unit_s, unit = time_unit(right_s - left_s)
    _streams(ax, tl, tl.compute_s, per_unit_s, "zoom-",
             window_s=(tl.compute_s + left_s, tl.compute_s + right_s))
    ax.set_xlim(left_s / per_unit_s, right_s / per_unit_s)
    in_view = [b for b in tl.buckets if b.end_s - tl.compute_s > left_s and b.start_s - tl.compute_s < right_s]
    for b in in_view[-6:]:
        shown_from_s, shown_to_s = max(b.start_s - tl.compute_s, left_s), min(b.end_s - tl.compute_s, right_s)
        if shown_to_s - shown_from_s < 0.04 * (right_s - left_s):
            continue  # a sliver at the edge of the view: its label would sit outside the axes
        mid_s = (shown_from_s + shown_to_s) / 2
        ax.text(mid_s / per_unit_s, _COMM_Y + _H + 0.3, size_text(b.size_bytes), ha="center", va="bottom",
                fontsize=8, gid="zoom-size-label")
    ax.set_xlabel(f"time after the end of backward t_e ({unit}); bucket sizes above their all-reduce")
    ax.set_title(f"zoom on the tail: the last {time_text(right_s - left_s)} around t_e = "
                 f"{time_text(tl.compute_s)} (same colours as above)", fontsize=10)


def _sizes(ax: Any, tl: Timeline) -> None:
    """Every bucket's true size, in reduction order, with the caps."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    sizes = [b.size_bytes for b in tl.buckets]
    n = len(sizes)
    values = sizes + [tl.bucket_cap_bytes, tl.first_bucket_cap_bytes]
    lo, hi = min(values), max(values)
    log = hi > 8 * lo
    if log:
        ticks = pow2_ticks(lo, hi, max_ticks=6)
        bottom, top = min(ticks[0], lo) / 1.5, max(ticks[-1], hi) * 2.5
    else:
        ticks = linear_size_ticks(hi * 1.1)
        bottom, top = 0.0, hi * 1.3
    # one step per run of equal sizes (the same picture as one per bucket; 534,000 steps take a minute)
    runs = _runs(sizes)
    edges = [0.5]
    for _, k in runs:
        edges.append(edges[-1] + k)
    handles = [ax.stairs([v for v, _ in runs], edges, baseline=bottom, fill=True,
                         color=COLORS["buckets-a"], alpha=0.85, gid="bucket-sizes",
                         label="bucket size, as simulated")]
    handles.append(ax.axhline(tl.bucket_cap_bytes, color="black", lw=0.9, ls="--", gid="cap",
                              label=f"cap c = {size_text(tl.bucket_cap_bytes)}"))
    if tl.first_bucket_cap_bytes != tl.bucket_cap_bytes:
        handles.append(ax.axhline(tl.first_bucket_cap_bytes, color="black", lw=0.9, ls=":", gid="first-cap",
                                  label=f"first-bucket cap c_1 = {size_text(tl.first_bucket_cap_bytes)}"))
    for i in sorted({0, n - 1}):
        ax.annotate(f"{'first' if i == 0 else 'last'}: {size_text(sizes[i])}", (i + 1, sizes[i]),
                    xytext=(0, 3), textcoords="offset points", ha="left" if i == 0 else "right",
                    va="bottom", fontsize=8)
    ax.set_xlim(0.5, n + 0.5)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    if log:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylim(bottom, top)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_text(v) if v > 0 else "0"))
    ax.set_xlabel("bucket, in reduction order (1 = the first gradients ready)")
    ax.set_ylabel("size")
    ax.set_title("bucket sizes as simulated (a bucket closes on the tensor that reaches its cap; "
                 "the last holds the rest)", fontsize=10)
    ax.legend(handles=handles, **_LEGEND)


def _sweep(ax: Any, sweep: BucketSweep, default: Timeline | None) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    best = sweep.best
    times = [v for p in sweep.curve for v in (p.exposed_s, p.wire_s)]
    if default is not None:
        times.append(default.exposed_s)
    per_unit_s, unit = time_unit(max(times))
    x = [p.bucket_bytes for p in sweep.curve]
    handles = [
        ax.plot(x, [p.exposed_s / per_unit_s for p in sweep.curve], marker=".", color=COLORS["exposed"],
                gid="sweep-exposed", label="exposed (step = compute + optimizer + exposed)")[0],
        ax.plot(x, [p.wire_s / per_unit_s for p in sweep.curve], ls=":", color="#4c72b0",
                gid="sweep-wire", label="on the wire (every bucket's latency counted)")[0],
        ax.axvline(best.bucket_cap_bytes, color="green", lw=0.9, gid="best",
                   label=(f"recommended cap {size_text(best.bucket_cap_bytes)}: exposes {time_text(best.exposed_s)}\n"
                          + textwrap.fill(f"({sweep.choice.rule})", 52))
                   if best.first_bucket_cap_bytes == best.bucket_cap_bytes else
                   (f"recommended: PyTorch's default (cap {size_text(best.bucket_cap_bytes)}, first "
                    f"{size_text(best.first_bucket_cap_bytes)}):\nno cap of the grid exposes less than its "
                    f"{time_text(best.exposed_s)}")),
    ]
    if default is not None:
        handles.append(ax.scatter([default.bucket_cap_bytes], [default.exposed_s / per_unit_s], color="black",
                                  zorder=3, gid="default",
                                  label=f"PyTorch default (cap {size_text(default.bucket_cap_bytes)}, first "
                                        f"{size_text(default.first_bucket_cap_bytes)}): exposes "
                                        f"{time_text(default.exposed_s)}"))
    choice = sweep.choice
    lo, hi = choice.good_min_cap_bytes, choice.good_max_cap_bytes
    handles.append(ax.axvspan(lo, hi, color="green", alpha=0.12, lw=0, zorder=0, gid="good-caps",
                              label=f"good range of the advice, {size_text(lo)} to {size_text(hi)}:\n"
                                    "its smallest and largest cap within the tolerance"))
    # which caps are within it: the range's ends are, a cap between them need not be
    limit_s = choice.min_exposed_s + choice.tolerance_s
    good = [p for p in sweep.curve if p.exposed_s <= limit_s]
    if good:  # none when no cap of the grid comes near PyTorch's default (then the default is recommended)
        handles.append(ax.scatter([p.bucket_bytes for p in good], [p.exposed_s / per_unit_s for p in good],
                                  s=28, color="green", zorder=4, gid="good-points",
                                  label=f"caps within max(5%, 50 us) = {time_text(choice.tolerance_s)}\n"
                                        f"of the smallest exposed time ({time_text(choice.min_exposed_s)})"))
    ax.set_xscale("log", base=2)
    ticks = pow2_ticks(min(x), max(x))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: size_text(v)))
    ax.xaxis.set_minor_locator(NullLocator())
    if min(times) > 0:
        ax.set_yscale("log")
        lo_t, hi_t = min(times) / per_unit_s, max(times) / per_unit_s
        ax.yaxis.set_major_locator(FixedLocator(decade_ticks(lo_t, hi_t)))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylim(lo_t / 1.5, hi_t * 1.5)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: time_text(v * per_unit_s)))
    ax.set_xlabel("bucket cap c (each cap as an explicit bucket_cap_mb: first bucket = c)")
    ax.set_ylabel(f"time ({'log scale; ' if min(times) > 0 else ''}data in {unit})")
    ax.set_title("exposed and wire time against the bucket cap: latency side (left), tail side (right)",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(handles=handles, **_LEGEND)


def timeline_figure(tl: Timeline, sweep: BucketSweep | None = None, default: Timeline | None = None) -> Any:
    """The Figure of ``tl`` (with ``sweep``, also the bucket curve, its good range and ``default`` on it)."""

    plt = pyplot()
    panels = ["gantt"]
    end_s = max(tl.step_s, _comm_end_s(tl))
    if tl.wire_s > 0 and _tail_s(tl) < ZOOM_BELOW * end_s:
        panels.append("zoom")
    panels.append("sizes")
    if sweep is not None:
        panels.append("sweep")
    heights = {"gantt": 3.0, "zoom": 2.4, "sizes": 2.4, "sweep": 3.2}
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, sum(heights[p] for p in panels)),
                             height_ratios=[heights[p] for p in panels], layout="constrained", squeeze=False)
    for name, ax in zip(panels, axes[:, 0]):
        ax.set_label(name)
    by_name = dict(zip(panels, axes[:, 0]))
    _gantt(by_name["gantt"], tl)
    if "zoom" in by_name:
        _zoom(by_name["zoom"], tl)
    _sizes(by_name["sizes"], tl)
    if sweep is not None:
        _sweep(by_name["sweep"], sweep, default)
    return fig


def plot_timeline(path: str, tl: Timeline, sweep: BucketSweep | None = None,
                  default: Timeline | None = None) -> None:
    """Write :func:`timeline_figure` to ``path`` (.png or .svg)."""

    save_figure_atomic(timeline_figure(tl, sweep, default), path, dpi=120)
