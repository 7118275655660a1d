"""Direct tests of ``report/_band.py``: the one wording of the measured band."""

from __future__ import annotations

from commcost.report._band import band_range, band_side


def test_range_with_units():
    assert band_range(9.4e-3, 14e-3) == "9.40 ms - 14.00 ms"
    assert band_range(500e-6, 1.5e-3) == "500.00 us - 1.50 ms"


def test_side_is_empty_when_the_band_brackets_the_point():
    assert band_side(10e-3, 9.4e-3, 14e-3) == ""
    assert band_side(9.4e-3, 9.4e-3, 14e-3) == ""  # an edge is inside


def test_side_names_where_the_band_lies():
    assert band_side(8e-3, 9.4e-3, 14e-3) == "; all above the prediction 8.00 ms, which is a lower bound for this class"
    assert band_side(8e-3, 9.4e-3, 14e-3, brief=True) == " (above the prediction 8.00 ms)"
    assert band_side(20e-3, 9.4e-3, 14e-3) == "; all below the prediction 20.00 ms"
    assert band_side(20e-3, 9.4e-3, 14e-3, brief=True) == " (below the prediction 20.00 ms)"
