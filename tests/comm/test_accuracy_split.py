"""Issue 14's accuracy targets on real tables, tuning vs held-out (tests/data/nccl_tests/split.json).

The full table is ``python benchmarks/accuracy_nccl_tests.py``; this runs the same scoring
(benchmarks/accuracy_nccl_tests.score, without torch) and holds the pooled figures under bounds.
"""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from conftest import DATA, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy_nccl_tests import MID_MAX_BYTES, score  # noqa: E402

SPLIT = json.loads((DATA / "nccl_tests" / "split.json").read_text(encoding="utf-8"))
MATCHES = json.loads((DATA / "nccl_tests" / "preset_matches.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows():
    return score(with_inductor=False)


def test_every_matched_table_is_on_exactly_one_side_with_a_reason():
    sides = {side: [t for e in SPLIT[side].values() for t in e["tables"]] for side in ("tuning", "heldout")}
    every = set(MATCHES["matched"]) | set(MATCHES["busbw_tables"]) | set(MATCHES["scaling_tables"])
    assert sorted(sides["tuning"] + sides["heldout"]) == sorted(every)
    assert all(e["reason"] for side in ("tuning", "heldout") for e in SPLIT[side].values())
    # a third of the systems held out: 6 of 17
    n_tune, n_held = len(SPLIT["tuning"]), len(SPLIT["heldout"])
    assert 0.3 <= n_held / (n_tune + n_held) <= 0.4


def _pooled(rows, side):
    sub = [r for r in rows if r["split"] == side]
    return (statistics.median(abs(r["err"]) for r in sub),
            statistics.median(abs(r["err"]) for r in sub if r["S"] <= MID_MAX_BYTES),
            sum(r["err"] < 0 for r in sub) / len(sub),
            sum(r["in_band"] for r in sub) / len(sub), len(sub))


def test_held_out_meets_the_issue_targets(rows):
    # measured at this commit: 5.9% over 74 rows, 13.6% over 1-64 MiB, 58% too fast, band covers 85%
    median, mid, fast, band, n = _pooled(rows, "heldout")
    assert n == 74
    assert median <= 0.15
    assert mid <= 0.25
    assert 0.35 <= fast <= 0.65   # no systematic sign (issue 14 found 153 of 163 = 94% too fast)
    assert band >= 0.80


def test_tuning_set_figures(rows):
    # measured at this commit: 6.3% over 188 rows (the 2-rack NVL72 table joined), 15.0% over 1-64 MiB,
    # 64% too fast, band 88%
    median, mid, fast, band, n = _pooled(rows, "tuning")
    assert n == 188
    assert median <= 0.10
    assert mid <= 0.20
    assert fast <= 0.65
    assert band >= 0.85
