"""The timeline plot, read back from the Figure: sizes as text, the true buckets, every colour in a
legend outside the axes, the tail zoomed when it is a hairline, the bucket curve's numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from commcost.comm.model import FlatLinkModel  # noqa: E402
from commcost.comm.topology import Link  # noqa: E402
from commcost.report.plot_timeline import COLORS, ZOOM_BELOW, bucket_sizes_text, timeline_figure  # noqa: E402
from commcost.step.ddp_buckets import ddp_bucket_caps  # noqa: E402
from commcost.step.sweep import sweep_buckets  # noqa: E402
from commcost.step.timeline import TimelineInputs, simulate_timeline  # noqa: E402
from commcost.core.units import MS, MiB  # noqa: E402
from commcost.workload.shape import model_preset  # noqa: E402

def _flat(bandwidth_bytes_per_s, latency_s):
    return FlatLinkModel(link=Link(bandwidth_bytes_per_s=bandwidth_bytes_per_s, latency_s=latency_s))


DRILL = TimelineInputs(gpus=32, comm=_flat(25e9, 20e-6), step_s=0.4,
                       params=1.3e9)
# llama2-7b layer by layer on a fast link with a 1.2 s step: the tail is ~2 ms of 1.2 s
LLAMA2_7B, LLAMA2_7B_SEQ = model_preset("llama2-7b")
SHAPED = TimelineInputs(gpus=32, comm=_flat(400e9, 5e-6), step_s=1.2,
                        shape=LLAMA2_7B, seq=LLAMA2_7B_SEQ)


@pytest.fixture(scope="module")
def drill():
    tl = simulate_timeline(DRILL)
    fig = timeline_figure(tl)
    fig.canvas.draw()
    yield tl, fig
    import matplotlib.pyplot as plt
    plt.close(fig)


@pytest.fixture(scope="module")
def shaped():
    # the plot's own grid of 4 caps per octave (finer than the advice's), so the best is a cap of its own
    from commcost.step.timeline import bucket_grid, gradient_stream

    sweep = sweep_buckets(SHAPED, bucket_grid(gradient_stream(SHAPED).total_bytes))
    default = simulate_timeline(SHAPED, ddp_bucket_caps(None))
    fig = timeline_figure(sweep.best, sweep, default)
    fig.canvas.draw()
    yield sweep, default, fig
    import matplotlib.pyplot as plt
    plt.close(fig)


def _ax(fig, name):
    (ax,) = [a for a in fig.axes if a.get_label() == name]
    return ax


def _by_gid(ax, gid):
    return [a for a in [*ax.collections, *ax.patches, *ax.lines] if a.get_gid() == gid]


def _bars(collection):
    """(x0, width) of each rectangle of a broken_barh collection."""
    out = []
    for path in collection.get_paths():
        xs = path.vertices[:, 0]
        out.append((xs.min(), xs.max() - xs.min()))
    return sorted(out)


def _per_bucket(stairs):
    """The size of bucket 1, 2, ... read off the steps (edges at k + 0.5)."""
    values, edges, _ = stairs.get_data()
    out = []
    for v, lo, hi in zip(values, edges[:-1], edges[1:]):
        out += [float(v)] * int(round(hi - lo))
    assert edges[0] == 0.5
    return out


def _rgb(artist):
    """The colour an artist is drawn in (face colour for bars and spans, line colour for lines)."""
    from matplotlib.colors import to_rgb
    from matplotlib.lines import Line2D

    if isinstance(artist, Line2D):
        return tuple(np.round(to_rgb(artist.get_color()), 3))
    face = artist.get_facecolor()
    face = face[0] if np.ndim(face) == 2 else face
    return tuple(np.round(face[:3], 3))


def _xspan(rect):
    """(left, right) of an axvspan, in data units."""
    return rect.get_x(), rect.get_x() + rect.get_width()


def _all_text(fig):
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]


def test_bucket_sizes_text_hand_cases():
    # the drill: S = 2.6e9 B = 2,479.55 MiB = 1 + 99 x 25 + 3.55 MiB
    assert bucket_sizes_text([MiB] + [25 * MiB] * 99 + [2.6e9 - 2476 * MiB]) == \
        "101 buckets: 1 MiB, 99 x 25 MiB, 3.55 MiB"
    assert bucket_sizes_text([2.38 * 2**30, 2.39 * 2**30, 2.43 * 2**30, 2.41 * 2**30, 550 * MiB]) == \
        "5 buckets: first 2.38 GiB, 3 of 2.39-2.43 GiB, last 550 MiB"
    assert bucket_sizes_text([500 * MiB, 32 * MiB, 448 * MiB, 128 * MiB, 448 * MiB, 500 * MiB]) == \
        "6 buckets: first 500 MiB, 4 of 32-448 MiB, last 500 MiB"
    assert bucket_sizes_text([4096.0]) == "1 bucket of 4 KiB"


def test_no_scientific_notation_anywhere(drill, shaped):
    for fig in (drill[1], shaped[2]):
        texts = _all_text(fig)
        assert texts and not [t for t in texts if re.search(r"\de[+-]\d", t)]
    from commcost.report._plot_units import size_text

    sweep = shaped[0]
    title = _ax(shaped[2], "gantt").get_title()
    # the recommended cap in binary units with 3 digits (a 2,435 MiB cap read "2.44e+03 MiB")
    assert f"cap {size_text(sweep.best.bucket_cap_bytes)} for every bucket" in title
    assert size_text(2553802834) == "2.38 GiB" and size_text(159612677) == "152 MiB"


def test_title_and_sizes_panel_show_the_true_buckets(drill):
    tl, fig = drill
    sizes = [b.size_bytes for b in tl.buckets]
    assert _ax(fig, "gantt").get_title().startswith("101 buckets: 1 MiB, 99 x 25 MiB, 3.55 MiB")
    (stairs,) = _by_gid(_ax(fig, "sizes"), "bucket-sizes")
    values = _per_bucket(stairs)
    assert values == sizes
    assert values[0] == MiB and values[-1] == pytest.approx(2.6e9 - 2476 * MiB)  # the first and the partial last
    # one step per run of equal sizes: 1 MiB, 99 x 25 MiB, the rest
    assert len(stairs.get_data()[0]) == 3
    (cap,) = _by_gid(_ax(fig, "sizes"), "cap")
    (first_cap,) = _by_gid(_ax(fig, "sizes"), "first-cap")
    assert cap.get_ydata()[0] == 25 * MiB and first_cap.get_ydata()[0] == MiB


def test_shaped_buckets_are_drawn_as_simulated_not_as_the_cap(shaped):
    sweep, _, fig = shaped
    tl = sweep.best
    (stairs,) = _by_gid(_ax(fig, "sizes"), "bucket-sizes")
    values = _per_bucket(stairs)
    assert values == [b.size_bytes for b in tl.buckets]
    # a bucket closes on the tensor that reaches the cap: some exceed it, and they are not all equal
    assert max(values) > tl.bucket_cap_bytes and len(set(values)) > 2


def test_gantt_bars_are_the_simulated_intervals(drill):
    tl, fig = drill
    ax = _ax(fig, "gantt")
    assert "(ms)" in ax.get_xlabel()
    (a,), (b,) = _by_gid(ax, "buckets-a"), _by_gid(ax, "buckets-b")
    want_a = [((x.start_s) / MS, (x.end_s - x.start_s) / MS) for x in tl.buckets[0::2]]
    want_b = [((x.start_s) / MS, (x.end_s - x.start_s) / MS) for x in tl.buckets[1::2]]
    assert np.allclose(_bars(a), sorted(want_a)) and np.allclose(_bars(b), sorted(want_b))
    (exposed,) = _by_gid(ax, "exposed")
    assert _xspan(exposed) == (pytest.approx(400.0), pytest.approx(400.0 + tl.exposed_s / MS))


def test_every_colour_is_in_a_legend(drill, shaped):
    for fig in (drill[1], shaped[2]):
        for name in ("gantt", "sizes", "sweep"):
            if name not in [a.get_label() for a in fig.axes]:
                continue
            ax = _ax(fig, name)
            legend = ax.get_legend()
            labelled = {t.get_text() for t in legend.get_texts()}
            drawn = [a for a in [*ax.collections, *ax.patches, *ax.lines] if a.get_gid()]
            assert drawn and {a.get_label() for a in drawn} <= labelled, name
            # and the legend shows each one in its own colour
            shown = {_rgb(h) for h in legend.legend_handles}
            assert {_rgb(a) for a in drawn} <= shown, name
    # the two bucket shades and the exposed tail have distinct colours, each named
    gantt = _ax(drill[1], "gantt")
    labels = [t.get_text() for t in gantt.get_legend().get_texts()]
    assert any("1st, 3rd" in t for t in labels) and any("2nd, 4th" in t for t in labels)
    assert any(t.startswith("exposed: 61.55 ms") for t in labels)
    assert len({COLORS["buckets-a"], COLORS["buckets-b"], COLORS["exposed"]}) == 3


def test_legends_sit_outside_the_axes(drill, shaped):
    for fig in (drill[1], shaped[2]):
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            assert legend.get_window_extent().x0 >= ax.get_window_extent().x1


def test_a_small_tail_gets_a_zoomed_panel(shaped):
    sweep, _, fig = shaped
    tl = sweep.best
    assert tl.exposed_s < ZOOM_BELOW * tl.step_s
    ax = _ax(fig, "zoom")
    assert "(ms)" in ax.get_xlabel() and "after the end of backward" in ax.get_xlabel()
    lo, hi = ax.get_xlim()
    # time measured from t_e: the exposed span runs from 0 to E and fills a good part of the view
    (exposed,) = _by_gid(ax, "zoom-exposed")
    assert _xspan(exposed) == (pytest.approx(0.0, abs=1e-9), pytest.approx(tl.exposed_s / MS))
    assert lo < 0 < tl.exposed_s / MS < hi and (tl.exposed_s / MS) / (hi - lo) > 0.2
    # the last bucket is labelled with its size
    labels = [t.get_text() for t in ax.texts if t.get_gid() == "zoom-size-label"]
    from commcost.report._plot_units import size_text
    assert size_text(tl.buckets[-1].size_bytes) in labels


def test_a_visible_tail_needs_no_zoom(drill):
    tl, fig = drill
    # the drill exposes 61.55 ms of a 461.55 ms step (13%): no zoom panel
    assert tl.exposed_s / tl.step_s > ZOOM_BELOW
    assert [a.get_label() for a in fig.axes] == ["gantt", "sizes"]


def test_sweep_panel_is_the_curve(shaped):
    sweep, default, fig = shaped
    ax = _ax(fig, "sweep")
    assert "data in ms" in ax.get_ylabel()
    (exposed,) = _by_gid(ax, "sweep-exposed")
    (wire,) = _by_gid(ax, "sweep-wire")
    assert list(exposed.get_xdata()) == [p.bucket_bytes for p in sweep.curve]
    assert np.allclose(exposed.get_ydata(), [p.exposed_s / MS for p in sweep.curve], rtol=1e-12)
    assert np.allclose(wire.get_ydata(), [p.wire_s / MS for p in sweep.curve], rtol=1e-12)
    (best,) = _by_gid(ax, "best")
    assert best.get_xdata()[0] == sweep.best.bucket_cap_bytes
    (dflt,) = _by_gid(ax, "default")
    assert np.allclose(dflt.get_offsets(), [[25 * MiB, default.exposed_s / MS]])
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks and all(re.fullmatch(r"[\d.,]+ (KiB|MiB|GiB|TiB)", t) for t in ticks)
    yticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "10 ms" in yticks and all(re.fullmatch(r"[\d.,]+ (us|ms|s)", t) for t in yticks)


def test_svg_and_png_written(tmp_path):
    from commcost.report.plot_timeline import plot_timeline

    tl = simulate_timeline(DRILL)
    for suffix in ("png", "svg"):
        path = tmp_path / f"t.{suffix}"
        plot_timeline(str(path), tl)
        assert path.stat().st_size > 10_000


def test_no_communication_no_zoom():
    # one GPU: nothing on the wire, nothing to zoom on
    tl = simulate_timeline(TimelineInputs(gpus=1, comm=DRILL.comm, step_s=0.05, params=0.125e9))
    assert tl.wire_s == 0
    fig = timeline_figure(tl)
    assert [a.get_label() for a in fig.axes] == ["gantt", "sizes"]


def test_half_a_million_buckets_draw_as_busy_periods_in_seconds():
    import time

    from commcost.report.plot_timeline import MAX_DRAWN_BARS

    # 70B in 0.25 MiB buckets: over half a million all-reduces back to back
    inp = TimelineInputs(gpus=64, comm=_flat(50e9, 5e-6), step_s=10.0,
                         params=70e9)
    tl = simulate_timeline(inp, ddp_bucket_caps(0.25))
    assert len(tl.buckets) > 100 * MAX_DRAWN_BARS
    t0 = time.perf_counter()
    fig = timeline_figure(tl)
    fig.canvas.draw()
    assert time.perf_counter() - t0 < 20
    ax = _ax(fig, "gantt")
    (merged,) = _by_gid(ax, "buckets-merged")
    bars = _bars(merged)
    # the busy periods cover the stream from the first start to the last end, in the axis' unit (s)
    assert bars[0][0] == pytest.approx(tl.buckets[0].start_s) and \
        bars[-1][0] + bars[-1][1] == pytest.approx(tl.buckets[-1].end_s)
    assert sum(w for _, w in bars) >= tl.wire_s * (1 - 1e-9)
    assert any(f"{len(tl.buckets):,} buckets" in t.get_text() for t in ax.get_legend().get_texts())
    assert _per_bucket(_by_gid(_ax(fig, "sizes"), "bucket-sizes")[0]) == [b.size_bytes for b in tl.buckets]


def test_the_good_range_and_the_recommended_cap_are_the_sweeps(shaped):
    from commcost.report._plot_units import size_text, time_text

    sweep, _, fig = shaped
    ax = _ax(fig, "sweep")
    choice = sweep.choice
    (span,) = _by_gid(ax, "good-caps")
    assert _xspan(span) == (pytest.approx(choice.good_min_cap_bytes), pytest.approx(choice.good_max_cap_bytes))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith(f"good range of the advice, {size_text(choice.good_min_cap_bytes)} to "
                            f"{size_text(choice.good_max_cap_bytes)}") for t in labels)
    assert any(t.startswith(f"caps within max(5%, 50 us) = {time_text(choice.tolerance_s)}") for t in labels)
    # the green points are the caps whose exposed time is within the tolerance, both ends of the range among them
    (good,) = _by_gid(ax, "good-points")
    xs = [x for x, _ in good.get_offsets()]
    assert xs == [p.bucket_bytes for p in sweep.curve if p.exposed_s <= choice.min_exposed_s + choice.tolerance_s]
    assert choice.good_min_cap_bytes == min(xs) and choice.good_max_cap_bytes == max(xs)
    assert any(t.startswith(f"recommended cap {size_text(sweep.best.bucket_cap_bytes)}")
               and choice.rule in t.replace("\n", " ") for t in labels)
    # the recommended cap lies inside the shaded range
    assert choice.good_min_cap_bytes <= sweep.best.bucket_cap_bytes <= choice.good_max_cap_bytes

def test_zoom_labels_each_bucket_in_view_with_its_size():
    from commcost.report._plot_units import size_text

    # llama2-70b layer by layer, 10 s step: the tail is the 128 MiB attention bucket, then the
    # 500 MiB embedding; both get their size above the bar
    spec, seq = model_preset("llama2-70b")
    inp = TimelineInputs(gpus=64, comm=_flat(400e9, 5e-6), step_s=10.0, shape=spec, seq=seq)
    tl = simulate_timeline(inp)
    fig = timeline_figure(tl)
    ax = _ax(fig, "zoom")
    lo, hi = ax.get_xlim()
    in_view = [b for b in tl.buckets if (b.end_s - tl.compute_s) / MS > lo and (b.start_s - tl.compute_s) / MS < hi]
    labels = [t.get_text() for t in ax.texts if t.get_gid() == "zoom-size-label"]
    assert len(in_view) >= 2 and labels == [size_text(b.size_bytes) for b in in_view][-len(labels):]
    assert len(labels) >= 2


def test_zoom_keeps_each_buckets_shade():
    # the zoom draws only the buckets in view, each in the shade it has in the full chart: here the
    # 10th (2nd, 4th ... shade) and the 11th (1st, 3rd ... shade) of 11 buckets are in view
    inp = TimelineInputs(gpus=8, comm=_flat(50e9, 5e-6), step_s=0.05,
                         params=0.125e9, grad_accum=2, optimizer_s=0.003)
    tl = simulate_timeline(inp)
    fig = timeline_figure(tl)
    assert len(tl.buckets) == 11
    zoom = _ax(fig, "zoom")
    assert "(us)" in zoom.get_xlabel()
    from commcost.core.units import US
    for gid, index in (("zoom-buckets-b", 9), ("zoom-buckets-a", 10)):
        (bars,) = _by_gid(zoom, gid)
        b = tl.buckets[index]
        assert _bars(bars)[-1] == (pytest.approx((b.start_s - tl.compute_s) / US),
                                   pytest.approx((b.end_s - b.start_s) / US))


def test_when_the_default_is_recommended_the_legend_says_so():
    from dataclasses import replace

    from commcost.step.sweep import BucketSweep
    from commcost.step.timeline import pick_best

    # a grid whose every cap exposes more than the default: pick_best keeps the default's caps
    sweep = sweep_buckets(DRILL)
    default = simulate_timeline(DRILL)
    worse = tuple(replace(p, exposed_s=default.exposed_s * 2 + p.exposed_s) for p in sweep.curve)
    choice = pick_best([(p.exposed_s, ddp_bucket_caps(p.bucket_bytes / MiB)) for p in worse],
                       default_exposed_s=default.exposed_s, default_caps=ddp_bucket_caps(None))
    assert (choice.best.bucket_cap_bytes, choice.best.first_bucket_cap_bytes) == (25 * MiB, MiB)
    from commcost.step.bucket_advice import recommendation_from_choice
    from commcost.step.timeline import gradient_stream

    advice = recommendation_from_choice(choice, gradient_stream(DRILL))
    fig = timeline_figure(default, BucketSweep(curve=worse, best=default, choice=choice, advice=advice), default)
    ax = _ax(fig, "sweep")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("recommended: PyTorch's default (cap 25 MiB, first 1 MiB)") for t in labels)
    assert not _by_gid(ax, "good-points")
    (best,) = _by_gid(ax, "best")
    assert best.get_xdata()[0] == 25 * MiB
