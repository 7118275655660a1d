"""``core/units.format_bytes`` never prints a wall of digits."""

from __future__ import annotations


def test_format_bytes_never_prints_a_wall_of_digits():
    from commcost.core.units import format_bytes

    assert format_bytes(1e180) == "1e+180 B"           # was "1000...000.00 TB" (169 digits)
    assert format_bytes(9.99e17) == "999000.00 TB"     # below 1e18 B: unchanged
    assert format_bytes(2.6e9) == "2.60 GB"
