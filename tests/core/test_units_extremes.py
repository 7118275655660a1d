"""The formatters of ``core/units.py`` at extreme magnitudes: scientific notation past six digits, never a
wall of digits or a zero that hides a value."""

from __future__ import annotations

from commcost.core.units import format_fraction, format_seconds


def test_format_seconds_extremes_are_scientific():
    # 5.0375e300 s used to print as a 300-digit fixed-point number
    assert format_seconds(5.0375e300) == "5.04e+300 s"
    assert format_seconds(1e-303) == "1e-303 s"       # was "0.00 us"
    assert format_seconds(999_999.0) == "999999.0 s"  # below 1e6 s: unchanged
    assert format_seconds(81.26e-6) == "81.26 us"


def test_format_fraction_extremes_are_scientific():
    assert format_fraction(1.259e300) == "1.26e+302%"
    assert format_fraction(8.192) == "819.2%"          # the drill's 1 MiB row: unchanged
