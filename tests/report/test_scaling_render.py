"""Direct tests of ``report/scaling.py``: a two-row flat curve rendered in-process, every number by hand;
JSON strict with units, CSV the same rows. (The seed's table is wider than 80 columns and is kept as the
seed prints it: ``commcost scaling`` must print what it always printed.)"""

from __future__ import annotations

import csv
import io

import pytest

from commcost.cli._fabric import seed_fabric_models
from commcost.analyses.scaling import ScalingInputs, scaling_curve, seed_analysis
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.report.scaling import (FORMULAS, ROW_KEYS, render_overlap_analysis_text, render_scaling_text,
                                     scaling_to_csv, scaling_to_dict)
from conftest import numbers_without_a_unit, strict_round_trip

# N = 8 on B = 50 GB/s, a = 5 us; 1e9 bf16 gradients: S = 2e9 B; t_c = 100 ms, t_o = 0, f = 0.85, f_b = 2/3
# T = 2(N-1)a + 2(N-1)/N S/B = 14 * 5 us + 1.75 * 2e9 / 50e9 s = 0.07 ms + 70 ms = 70.07 ms
T = 14 * 5e-6 + 1.75 * 2e9 / 50e9
CURVE = scaling_curve(ScalingInputs(
    model="1B", fabric="flat", params=1e9, bytes_per_grad=2, compute_s=0.1, overhead_s=0.0,
    comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9, latency_s=5e-6)), gpu_counts=(1, 8),
    overlap_fraction=0.85, algorithm="ring"))


def test_rows_by_hand():
    d = strict_round_trip(scaling_to_dict([CURVE]))
    one, eight = d["rows"]
    assert one["gpus"] == 1 and one["comm_s"] == 0 and one["speedup"] == 1
    assert eight["message_bytes"] == 2e9 and eight["comm_s"] == pytest.approx(T)
    assert eight["comm_latency_s"] == pytest.approx(70e-6) and eight["comm_bandwidth_s"] == pytest.approx(0.07)
    # the seed: max(t_c, T) + t_o = max(100, 70.07) ms = 100 ms; speedup N t_c / step = 8
    assert eight["step_s"] == pytest.approx(0.1) and eight["speedup"] == pytest.approx(8)
    # perfect overlap within f_b t_c = 66.67 ms: 100 + (70.07 - 66.67) = 103.40 ms
    assert eight["step_perfect_s"] == pytest.approx(0.1 + T - 0.2 / 3)
    # partial: t_c + (1 - f) T = 100 + 0.15 * 70.07 = 110.51 ms; none: 100 + 70.07 = 170.07 ms
    assert eight["step_partial_s"] == pytest.approx(0.1 + 0.15 * T)
    assert eight["step_no_overlap_s"] == pytest.approx(0.1 + T)
    assert eight["efficiency_no_overlap"] == pytest.approx(0.1 / (0.1 + T))
    assert set(d["formulas"]) == set(FORMULAS) and list(one) == list(ROW_KEYS)


def test_every_number_names_its_unit():
    results, overlap = seed_analysis(seed_fabric_models())
    assert numbers_without_a_unit(scaling_to_dict(results, overlap)) == []
    assert numbers_without_a_unit(scaling_to_dict([CURVE])) == []


def test_csv_holds_the_json_rows():
    rows = list(csv.DictReader(io.StringIO(scaling_to_csv([CURVE]))))
    d = scaling_to_dict([CURVE])["rows"]
    assert [r["gpus"] for r in rows] == ["1", "8"]
    assert float(rows[1]["comm_s"]) == d[1]["comm_s"] and float(rows[1]["step_perfect_s"]) == d[1]["step_perfect_s"]
    assert rows[1]["crosses_nodes"] in ("true", "false")


def test_text_carries_the_units_in_its_headers():
    text = render_scaling_text([CURVE])
    assert "B = 50 GB/s, a = 5 us per ring step" in " ".join(text.split())      # wrapped to 80 columns
    assert "(ms)" in text
    row8 = next(line for line in text.splitlines() if line.split()[:1] == ["8"])
    # T = 70.07 ms printed in milliseconds under an "(ms)" header
    assert "70.07" in row8
    results, overlap = seed_analysis(seed_fabric_models())
    assert "partial overlap f = 0.85" in render_overlap_analysis_text(overlap)
