"""Direct tests of ``step/overlap.py``: the one definition of the overlap bounds (no overlap, perfect
overlap within the window, a simulation between them), by hand and as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.core.errors import InputError
from commcost.step.overlap import OverlapBounds, exposed_lower_bound_s, overlap_bounds


def test_the_drill_at_k_1_by_hand():
    # C = 400 ms, T = 202.74 ms, W = 2/3 C = 266.67 ms (backward), t_o = 0
    b = overlap_bounds(compute_s=0.4, comm_s=0.20274, window_s=0.4 * 2 / 3)
    assert b.no_overlap_s == pytest.approx(0.60274)      # 400 + 202.74 ms
    assert b.perfect_overlap_s == pytest.approx(0.4)      # T < W: all of T hides, 400 + 0 ms
    assert b.fits and b.simulated_exposed_s is None


def test_communication_longer_than_the_window_by_hand():
    # C = 1 s, T = 0.5 s, W = 0.2 s, t_o = 0.05 s:
    # no overlap 1 + 0.5 + 0.05 = 1.55 s; perfect 1 + (0.5 - 0.2) + 0.05 = 1.35 s
    b = OverlapBounds(compute_s=1.0, comm_s=0.5, window_s=0.2, after_s=0.05, simulated_s=1.45)
    assert b.no_overlap_s == pytest.approx(1.55)
    assert b.perfect_overlap_s == pytest.approx(1.35)
    assert not b.fits
    # the simulated schedule leaves 1.45 - 1 - 0.05 = 0.4 s exposed
    assert b.simulated_exposed_s == pytest.approx(0.4)


def test_exposed_lower_bound_by_hand():
    assert exposed_lower_bound_s(0.3, 0.1) == pytest.approx(0.2)   # 0.3 - 0.1
    assert exposed_lower_bound_s(0.1, 0.3) == 0.0                  # hides entirely
    assert exposed_lower_bound_s(0.0, 0.0) == 0.0


def test_a_simulation_faster_than_compute_exposes_nothing():
    # 0.9 s < C + t_o = 1 s: exposed clamps at 0, never negative
    assert OverlapBounds(compute_s=1.0, comm_s=0.2, window_s=0.5, simulated_s=0.9).simulated_exposed_s == 0.0


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(compute_s=1.0, comm_s=0.1, window_s=1.5), "window_s (1.5 s) cannot exceed compute_s (1 s)"),
    (dict(compute_s=-1.0, comm_s=0.1, window_s=0.0), "compute_s"),
    (dict(compute_s=1.0, comm_s=float("nan"), window_s=0.5), "comm_s"),
    (dict(compute_s=1.0, comm_s=0.1, window_s=0.5, after_s=float("inf")), "after_s"),
])
def test_bad_parts_are_refused_with_their_numbers(kwargs, fragment):
    with pytest.raises(InputError) as exc:
        OverlapBounds(**kwargs)
    assert fragment in str(exc.value)


SECONDS = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)


@given(SECONDS, SECONDS, st.floats(min_value=0.0, max_value=1.0), SECONDS)
def test_perfect_overlap_never_beats_compute_nor_loses_to_no_overlap(compute_s, comm_s, share, after_s):
    b = OverlapBounds(compute_s=compute_s, comm_s=comm_s, window_s=share * compute_s, after_s=after_s)
    # C + t_o <= C + max(0, T - W) + t_o <= C + T + t_o; and max(C, T) + t_o is below both only when W = C
    assert compute_s + after_s <= b.perfect_overlap_s <= b.no_overlap_s * (1 + 1e-12)
    assert b.no_overlap_s - b.perfect_overlap_s == pytest.approx(min(comm_s, share * compute_s), abs=1e-9)
    assert b.fits == (comm_s <= share * compute_s)
