"""Interval arithmetic: hand cases and properties against a brute-force count on integer grids."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from commcost.trace.intervals import clip, intersect, measure, subtract, union


def test_union_merges_overlapping_nested_and_touching():
    # [0,4) and [2,6) overlap -> [0,6); [1,2) nests inside; [6,7) touches -> [0,7); [9,10) apart
    assert union([(2, 6), (0, 4), (1, 2), (6, 7), (9, 10)]) == [(0, 7), (9, 10)]
    assert measure(union([(2, 6), (0, 4), (1, 2), (6, 7), (9, 10)])) == 8  # 7 + 1


def test_union_drops_empty_intervals():
    assert union([(3, 3), (5, 4)]) == []
    assert measure([]) == 0


def test_intersect_subtract_clip_by_hand():
    a = union([(0, 10), (20, 30)])
    b = union([(5, 25)])
    assert intersect(a, b) == [(5, 10), (20, 25)]          # 5 + 5 = 10
    assert subtract(a, b) == [(0, 5), (25, 30)]            # |A| - |A&B| = 20 - 10 = 10
    assert subtract(b, a) == [(10, 20)]
    assert clip(a, 8, 22) == [(8, 10), (20, 22)]
    assert clip(a, 5, 5) == []


def _cells(intervals):
    """Integer cells [t, t+1) covered: the brute-force measure."""
    return {t for s, e in intervals for t in range(s, e)}


_iv = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)).map(lambda p: (p[0], p[0] + p[1])), max_size=12)


@settings(max_examples=200, deadline=None)
@given(_iv, _iv)
def test_measures_match_brute_force(a_raw, b_raw):
    a, b = union(a_raw), union(b_raw)
    ca, cb = _cells(a_raw), _cells(b_raw)
    assert measure(a) == len(ca)
    assert measure(intersect(a, b)) == len(ca & cb)
    assert measure(subtract(a, b)) == len(ca - cb)
    assert intersect(a, b) == intersect(b, a)
    # every result is a union: sorted, disjoint, not touching, non-empty pieces
    for u in (a, intersect(a, b), subtract(a, b)):
        assert all(s < e for s, e in u)
        assert all(u[i][1] < u[i + 1][0] for i in range(len(u) - 1))
