"""Direct tests of ``report/_plot_units.py``: axis labels with units, ticks that read as round numbers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.report._plot_units import decade_ticks, linear_size_ticks, pow2_ticks, size_text, time_text, time_unit


@pytest.mark.parametrize("n_bytes, text", [
    (2**20, "1 MiB"), (25 * 2**20, "25 MiB"), (3.55 * 2**20, "3.55 MiB"), (550 * 2**20, "550 MiB"),
    (1023 * 2**20, "1,023 MiB"), (2.38 * 2**30, "2.38 GiB"), (512, "512 B"), (1536, "1.5 KiB"),
])
def test_size_text(n_bytes, text):
    assert size_text(n_bytes) == text


@pytest.mark.parametrize("t_s, text", [(10e-6, "10 us"), (1e-3, "1 ms"), (1.5, "1.5 s"), (2.25e-3, "2.25 ms")])
def test_time_text(t_s, text):
    assert time_text(t_s) == text


@pytest.mark.parametrize("span_s, unit", [(10.0, (1.0, "s")), (5.0, (1.0, "s")), (0.005, (1e-3, "ms")),
                                          (0.004, (1e-6, "us"))])
def test_time_unit(span_s, unit):
    assert time_unit(span_s) == unit


def test_linear_ticks_are_round_in_the_unit():
    # up to 2.5 GiB with at most 6 ticks: steps of 0.5 GiB -> 0, 0.5, 1, 1.5, 2, 2.5 GiB
    assert linear_size_ticks(2.5 * 2**30) == [k * 0.5 * 2**30 for k in range(6)]


def test_pow2_ticks_fall_on_kib_mib_gib():
    # 1 KiB .. 1 GiB is 21 octaves: every octave gives 21 > 9 ticks, every 2nd 11, every 5th 5:
    # 2^10, 2^15, 2^20, 2^25, 2^30 (1 KiB, 32 KiB, 1 MiB, 32 MiB, 1 GiB)
    assert pow2_ticks(2**10, 2**30) == [2.0**10, 2.0**15, 2.0**20, 2.0**25, 2.0**30]
    # 1 KiB .. 1 TiB is 31 octaves: every 5th gives 7 ticks, 2^10 .. 2^40
    assert pow2_ticks(2**10, 2**40) == [2.0**e for e in range(10, 41, 5)]
    assert pow2_ticks(2**20, 2**23) == [2.0**20, 2.0**21, 2.0**22, 2.0**23]


def test_decade_ticks_cover_the_range():
    assert decade_ticks(3e-6, 2e-3) == pytest.approx([1e-6, 1e-5, 1e-4, 1e-3, 1e-2])


@given(st.floats(min_value=1.0, max_value=2.0**50), st.floats(min_value=2.0, max_value=2.0**40))
def test_pow2_ticks_are_few_powers_of_two(lo, span):
    hi = lo * span
    ticks = pow2_ticks(lo, hi)
    assert len(ticks) >= 2 and len([t for t in ticks if lo <= t <= hi]) <= 9
    assert all(t == 2.0 ** round(math.log2(t)) for t in ticks)
