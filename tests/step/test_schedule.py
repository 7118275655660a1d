"""``step/schedule.py``: the pipeline bubble of 1F1B and of the interleaved schedule, by hand."""

from __future__ import annotations

from commcost.step.schedule import bubble_fraction, pipeline_s


def test_bubble_formulas():
    # 1F1B (p-1)/m = 3/8; interleaved (p-1)/(v m) = 3/16; pipeline = m t + (p-1) t / v
    assert bubble_fraction(4, 8) == 3 / 8 and bubble_fraction(4, 8, 2) == 3 / 16
    assert pipeline_s(4, 8, 2, 1.0) == 8 + 1.5
