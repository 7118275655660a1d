"""The scaling plot (``report/plot_scaling.py``) names the algorithm that ran and marks the knee where
the group leaves one node."""

from __future__ import annotations

import pytest

from commcost.comm.model import FabricModel


def test_two_tier_scaling_plot_names_its_algorithm_and_marks_the_knee():
    # the title said "ring all-reduce" although auto ran tree/halving-doubling; no knee was drawn
    pytest.importorskip("matplotlib")
    from commcost.report.plot_scaling import plot_scaling
    from commcost.analyses.scaling import ScalingInputs, scaling_curve, seed_analysis, seed_two_tier
    from commcost.cli._fabric import seed_fabric_models

    curve = scaling_curve(ScalingInputs(
        model="7B", fabric="two-tier", params=7e9, bytes_per_grad=2, compute_s=0.4, overhead_s=0.0,
        comm=FabricModel(topology=seed_two_tier(8, 64)), gpu_counts=(1, 4, 8, 16, 64), overlap_fraction=0.85, algorithm="auto"))
    fig = plot_scaling([curve])
    title = fig._suptitle.get_text()
    assert "ring all-reduce" not in title and "auto" in title
    # the knee: rows cross nodes from N = 16 (8 GPUs per node)
    knee_x = [line.get_xdata()[0] for line in fig.axes[0].get_lines() if line.get_color() == "firebrick"]
    assert knee_x == [16]
    flat = plot_scaling(seed_analysis(seed_fabric_models())[0])
    assert "ring all-reduce" in flat._suptitle.get_text()
    assert not [ln for ln in flat.axes[0].get_lines() if ln.get_color() == "firebrick"]
