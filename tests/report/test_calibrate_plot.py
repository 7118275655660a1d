"""The validate plot, read back from the Figure: the points are validate's numbers, sizes and times
in readable units, the regime boundaries explained, legends outside the data."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from conftest import DATA, run_commcost  # noqa: E402

IB = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    from commcost.calibrate.data import load_series
    from commcost.calibrate.fit import AlphaBetaFit, compare
    from commcost.calibrate.profile import load_profile
    from commcost.report.calibrate import validate_figure

    profile_path = tmp_path_factory.mktemp("p") / "ib.json"
    assert run_commcost("fit", str(IB), "-o", str(profile_path)).returncode == 0
    profile = load_profile(str(profile_path))
    series = load_series(str(IB), op=profile.fit.op, gpus=None, placement=None)
    model = AlphaBetaFit(op=series.op, algorithm=profile.fit.algorithm, gpus=series.gpus,
                         regimes=profile.fit.regimes)
    c = compare(model, series.samples)
    fig = validate_figure(model, c, "title")
    fig.canvas.draw()
    yield model, c, fig
    import matplotlib.pyplot as plt
    plt.close(fig)


def _one(ax, gid):
    (artist,) = [a for a in [*ax.lines, *ax.patches, *ax.collections] if a.get_gid() == gid]
    return artist


def test_points_line_and_errors_are_validates_numbers(validated):
    model, c, fig = validated
    ax, ax_err = fig.axes
    measured = _one(ax, "measured")
    assert list(measured.get_xdata()) == [p.size_bytes for p in c.points]
    assert list(measured.get_ydata()) == [p.measured_s for p in c.points]
    line = _one(ax, "model")
    assert np.allclose(line.get_ydata(), [model.predict_s(s) for s in line.get_xdata()], rtol=1e-12)
    err = _one(ax_err, "error")
    assert np.allclose(err.get_ydata(), [100 * p.rel_error for p in c.points], rtol=1e-12)
    band = _one(ax_err, "median-error")
    assert band.get_y() == pytest.approx(-100 * c.median_abs_rel_error)
    assert band.get_y() + band.get_height() == pytest.approx(100 * c.median_abs_rel_error)


def test_regime_boundaries_are_drawn_and_named(validated):
    model, _, fig = validated
    ax = fig.axes[0]
    xs = sorted(line.get_xdata()[0] for line in ax.lines if line.get_gid() == "regime-boundary")
    assert len(model.regimes) >= 2 and xs == [r.min_size_bytes for r in model.regimes[1:]]
    from commcost.report._plot_units import size_text
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for k, r in enumerate(model.regimes[1:], start=2):
        assert f"regime {k} starts at {size_text(r.min_size_bytes)}" in labels


def test_every_drawn_thing_is_in_a_legend_outside_the_axes(validated):
    _, _, fig = validated
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
        labels = {t.get_text() for t in legend.get_texts()}
        drawn = {a.get_label() for a in [*ax.lines, *ax.patches] if a.get_gid()}
        drawn = {d for d in drawn if not d.startswith("_")}
        assert drawn <= labels


def test_sizes_and_times_are_readable(validated):
    _, _, fig = validated
    ax, ax_err = fig.axes
    xticks = [t.get_text() for t in ax_err.get_xticklabels()]
    assert "1 KiB" in xticks and "1 MiB" in xticks and "1 GiB" in xticks
    assert all(re.fullmatch(r"[\d.,]+ (B|KiB|MiB|GiB)", t) for t in xticks)
    yticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "100 us" in yticks and "1 ms" in yticks
    assert not [t for t in xticks + yticks if "e+" in t or "^" in t]
