"""The scaling plot: files written as real images, and the plotted series are the table's numbers."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, run_commcost
from commcost.cli._fabric import seed_fabric_models
from commcost.report.plot_scaling import plot_scaling, save_figure
from commcost.analyses.scaling import seed_analysis

RESULTS, _ = seed_analysis(seed_fabric_models())


@pytest.fixture(scope="module")
def fig():
    figure = plot_scaling(RESULTS)
    figure.canvas.draw()
    return figure


def _lines(ax, kind):
    return {line.get_gid().split("|", 1)[1]: line for line in ax.get_lines()
            if (line.get_gid() or "").startswith(kind + "|")}


def _bands(ax, kind):
    return {c.get_gid().split("|", 1)[1]: c for c in ax.collections
            if (c.get_gid() or "").startswith("band-" + kind + "|")}


def test_plotted_speedups_and_efficiencies_are_the_tables_numbers(fig):
    ax_x, ax_e, ax_s = fig.axes
    speed, eff = _lines(ax_x, "speedup"), _lines(ax_e, "efficiency")
    assert len(speed) == len(eff) == 6
    table = json.loads(run_commcost("scaling", "--json").stdout)["rows"]
    for key, line in speed.items():
        model, fabric = key.split("|")
        rows = [r for r in table if r["analysis"] == "results" and r["model"] == model and r["fabric"] == fabric]
        assert list(line.get_xdata()) == [r["gpus"] for r in rows]
        assert np.allclose(line.get_ydata(), [r["speedup"] for r in rows], rtol=1e-12)
        assert np.allclose(eff[key].get_ydata(), [100 * r["efficiency"] for r in rows], rtol=1e-12)
    # a hand-computed point: 125M on NVLink at N = 128, X = 128*3.5/6.4068229 = 69.9255
    assert speed["125M (GPT-2 small)|NVLink"].get_ydata()[-1] == pytest.approx(69.9255, abs=1e-4)


def test_ideal_line_is_x_equals_n(fig):
    ideal = next(line for line in fig.axes[0].get_lines() if line.get_gid() == "ideal")
    assert list(ideal.get_xdata()) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert list(ideal.get_ydata()) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_band_spans_no_overlap_to_perfect_overlap(fig):
    ax_x = fig.axes[0]
    bands = _bands(ax_x, "speedup")
    assert len(bands) == 6
    curve = next(c for c in RESULTS if c.inputs.model.startswith("7B") and c.inputs.fabric == "InfiniBand")
    verts = bands["7B (Llama-7B equiv)|InfiniBand"].get_paths()[0].vertices
    assert len(curve.rows) >= 2
    for r in curve.rows:
        ys = verts[np.isclose(verts[:, 0], r.gpus), 1]
        # the band's edges at N are exactly the no-overlap and perfect-overlap speedups
        assert ys.min() == pytest.approx(r.speedup_no_overlap, rel=1e-12)
        assert ys.max() == pytest.approx(r.speedup, rel=1e-12)
    # at N=2: none 801/960.6 = 0.8339, perfect 801/560.6 = 1.4288 (hand computation)
    ys = verts[np.isclose(verts[:, 0], 2), 1]
    assert (ys.min(), ys.max()) == (pytest.approx(0.833854, abs=1e-6), pytest.approx(1.428827, abs=1e-6))


def test_axes_are_labelled_log2_and_legend_is_outside_the_data(fig):
    ax_x, ax_e, ax_s = fig.axes
    assert ax_x.get_xscale() == ax_x.get_yscale() == "log" and ax_e.get_xscale() == "log"
    assert ax_x.xaxis.get_transform().base == 2 and ax_x.yaxis.get_transform().base == 2
    for ax in (ax_x, ax_e):
        assert ax.get_title() and "GPUs N (count" in ax.get_xlabel()
    assert "(x" in ax_x.get_ylabel() and "(%)" in ax_e.get_ylabel()
    assert fig.get_suptitle()
    (legend,) = fig.legends
    right_edge = max(ax.get_window_extent().x1 for ax in fig.axes)
    assert legend.get_window_extent().x0 >= right_edge
    labels = [t.get_text() for t in legend.get_texts()]
    assert "ideal X = N (E = 100%)" in labels and any("overlap bracket" in t for t in labels)
    assert any("NVLink flat-ring limit: 8 GPUs" in t for t in labels)


def test_save_png_and_svg_directly(tmp_path):
    for suffix in ("png", "svg"):
        path = tmp_path / f"s.{suffix}"
        save_figure(plot_scaling(RESULTS[:2]), str(path))
        assert path.stat().st_size > 10_000


def test_cli_writes_a_real_png_of_plausible_size(tmp_path):
    out = tmp_path / "scaling.png"
    r = run_commcost("scaling", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote plot {out}" in r.stdout
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert 1200 <= width <= 4000 and 500 <= height <= 2500
    assert 50_000 < len(data) < 5_000_000


def test_cli_writes_a_real_svg(tmp_path):
    out = tmp_path / "scaling.SVG"
    r = run_commcost("scaling", "--model", "7b", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")
    assert 20_000 < len(text) < 5_000_000


def test_json_with_plot_keeps_stdout_one_object(tmp_path):
    out = tmp_path / "p.png"
    r = run_commcost("scaling", "--json", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)
    assert out.exists()


def test_missing_matplotlib_gives_the_install_hint(tmp_path):
    block = ("import sys\n"
             "class _Block:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
             "            raise ImportError('blocked for the test')\n"
             "sys.meta_path.insert(0, _Block())\n"
             "from commcost.cli import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-c", block, "scaling", "--plot", str(tmp_path / "x.png")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == ("commcost: error: matplotlib is not installed; "
                                "install it with: pip install 'commcost[plot]'")
    assert not (tmp_path / "x.png").exists()


def test_matplotlib_is_imported_only_when_plotting():
    code = ("import sys, io, contextlib\n"
            "from commcost.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['scaling', '--json'])\n"
            "print('matplotlib' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_curves_on_the_ideal_line_stay_visible(fig):
    # NVLink 1.3B and 7B sit at X = N: each is drawn above the ideal band, with its own marker
    # shape and size, so coinciding curves show as nested shapes rather than one hiding the rest
    ax_x = fig.axes[0]
    ideal = next(line for line in ax_x.get_lines() if line.get_gid() == "ideal")
    speed = _lines(ax_x, "speedup")
    on_ideal = [k for k, line in speed.items() if k.endswith("|NVLink")
                and np.allclose(line.get_ydata()[:6], line.get_xdata()[:6], rtol=1e-3)]
    assert len(on_ideal) >= 2
    for key in on_ideal:
        assert speed[key].get_zorder() > ideal.get_zorder()
        assert speed[key].get_markerfacecolor() == "none"      # hollow: what lies under it shows
    looks = {(speed[k].get_marker(), speed[k].get_markersize()) for k in on_ideal}
    assert len(looks) == len(on_ideal)
    assert ideal.get_linewidth() > 2 * max(speed[k].get_linewidth() for k in on_ideal)


def test_efficiency_axis_follows_the_data():
    from commcost.report.plot_scaling import efficiency_ylim

    # seed: the lowest value (125M on InfiniBand, no overlap) is under 10%: the axis starts at 0
    assert fig_ylim(RESULTS)[0] == 0.0
    # lowest 67.8% -> 5 below is 62.8 -> rounded down to 60; top 103 leaves room above 100
    assert efficiency_ylim([100.0, 67.8]) == (60.0, 103.0)
    assert efficiency_ylim([99.0, 100.0]) == (90.0, 103.0)
    assert efficiency_ylim([3.0, 100.0]) == (0.0, 103.0)


def fig_ylim(curves):
    figure = plot_scaling(curves)
    try:
        return figure.axes[1].get_ylim()
    finally:
        import matplotlib.pyplot as plt
        plt.close(figure)


def test_system_curves_near_100_percent_get_a_zoomed_efficiency_axis():
    from commcost.comm.model import FabricModel
    from commcost.analyses.scaling import ScalingInputs, scaling_curve, seed_two_tier

    curve = scaling_curve(ScalingInputs(
        model="7B", fabric="two-tier", params=7e9, bytes_per_grad=2, compute_s=0.4, overhead_s=0.0,
        comm=FabricModel(topology=seed_two_tier(8, 64)), gpu_counts=(1, 4, 8, 16, 64), overlap_fraction=0.85, algorithm="auto"))
    lowest = min(100 * min(r.efficiency, r.efficiency_no_overlap) for r in curve.rows)
    lo, hi = fig_ylim([curve])
    assert lo <= lowest - 5 < lo + 10 and hi == 103.0


def test_legend_explains_every_band_colour(fig):
    # the bracket's legend entry is drawn as one shade per model, in the models' colours
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    bracket = next(h for h, t in zip(legend.legend_handles, texts) if t.startswith("overlap bracket"))
    band_colours = {tuple(np.round(c.get_facecolor()[0][:3], 3)) for c in fig.axes[0].collections
                    if (c.get_gid() or "").startswith("band-")}
    assert bracket is not None and len(band_colours) == 3
    from matplotlib.colors import to_rgb
    shown = {tuple(np.round(to_rgb(a.get_facecolor()), 3)) for a in legend.get_children()[0].findobj()
             if a.__class__.__name__ == "Rectangle" and a.get_width() < 20 and a.get_facecolor()[3] > 0}
    assert band_colours <= shown


def test_physical_bound_is_drawn_beside_the_seeds_line(fig):
    ax_x, ax_e, ax_s = fig.axes
    phys = _lines(ax_x, "physical-speedup")
    phys_e = _lines(ax_e, "physical-efficiency")
    assert len(phys) == len(phys_e) == 6
    table = {(c.inputs.model, c.inputs.fabric): c for c in RESULTS}
    for key, line in phys.items():
        curve = table[tuple(key.split("|"))]
        assert np.allclose(line.get_ydata(), [r.speedup_perfect for r in curve.rows], rtol=1e-12)
        assert np.allclose(phys_e[key].get_ydata(), [100 * r.efficiency_perfect for r in curve.rows], rtol=1e-12)
        # never above the seed's line: backward is only part of the step
        assert all(p <= s * (1 + 1e-12) for p, s in zip(line.get_ydata(), _lines(ax_x, "speedup")[key].get_ydata()))
    # 7B on InfiniBand at N = 2 (hand): T = 560.1 ms > f_b t_c = 266.67 ms, so the bound's step is
    # 400 + 560.1 - 266.67 + 0.5 = 693.93 ms: X = 2 * 400.5 / 693.93 = 1.15429 (the seed's 801/560.6 = 1.42883)
    assert phys["7B (Llama-7B equiv)|InfiniBand"].get_ydata()[1] == pytest.approx(1.154290, abs=1e-6)
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("thin line, same colour: the physical perfect-overlap") for t in texts)
