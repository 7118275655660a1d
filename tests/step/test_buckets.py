"""Direct tests of ``step/buckets.py`` on the drill's link (P = 32, a = 20 us, B = 25 GB/s, S = 2.6e9 B):
the crossover, the last bucket, the cost of bucketing and the sensible range, by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError
from commcost.step.buckets import (PYTORCH_DEFAULT_BUCKET_BYTES, bucket_advice, bucket_row, crossover_bytes,
                                   last_bucket_bytes)

DRILL = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))
S = 2.6e9
CAP = 25 * 2**20  # 26,214,400 B


def test_crossover_is_p_a_b():
    # S* = P a B = 32 * 20e-6 s * 25e9 B/s = 16,000,000 B
    assert crossover_bytes(DRILL, 32, near_bytes=S, algorithm="ring") == pytest.approx(16e6)
    assert crossover_bytes(DRILL, 1, near_bytes=S) == 0


def test_last_bucket_by_hand():
    assert last_bucket_bytes(100, 30) == 10            # 30 + 30 + 30 + 10
    assert last_bucket_bytes(100, 30, 1) == 9          # 1 + 30 + 30 + 30 + 9
    assert last_bucket_bytes(90, 30) == 30             # the remainder is a full bucket, never 0
    assert last_bucket_bytes(20, 30) == 20             # one bucket holds S


def test_the_default_buckets_by_hand():
    row = bucket_row(S, CAP, 32, DRILL, "ring")
    # ceil(2.6e9 / 26,214,400) = ceil(99.18) = 100 buckets; each pays 2(P-1)a = 62 * 20 us = 1.24 ms
    assert row.count == 100 and row.cap_bytes == PYTORCH_DEFAULT_BUCKET_BYTES == CAP
    assert row.latency_total_s == pytest.approx(100 * 1.24e-3)
    # total = n 2(P-1)a + 2(P-1)/P S/B = 124 ms + 1.9375 * 0.104 s = 124 + 201.5 = 325.5 ms
    assert row.total_s == pytest.approx(0.124 + 0.2015)
    # one full bucket: latency share 1 / (1 + c/S*) = 1 / (1 + 26,214,400 / 16e6) = 0.379
    assert row.latency_share == pytest.approx(1 / (1 + CAP / 16e6))


def test_sensible_range_by_hand():
    a = bucket_advice(S, 32, DRILL, max_latency_share=0.2, tail_budget_s=0.02, algorithm="ring")
    # smallest: S* (1 - s) / s = 16e6 * 0.8 / 0.2 = 64,000,000 B
    assert a.min_bucket_bytes == pytest.approx(64e6)
    # largest: (t - 2(P-1)a) B P / (2(P-1)) = (20 - 1.24) ms * 25e9 * 32 / 62 = 242,064,516 B
    assert a.max_bucket_bytes == pytest.approx((0.02 - 1.24e-3) * 25e9 * 32 / 62)
    assert a.pytorch_default.count == 100


def test_bad_advice_inputs_are_refused():
    with pytest.raises(InputError, match=r"max latency share must be in \(0, 1\), got 1"):
        bucket_advice(S, 32, DRILL, max_latency_share=1.0, tail_budget_s=0.02)
    with pytest.raises(InputError, match="bucket cap"):
        bucket_row(S, 0.0, 32, DRILL)


@given(st.integers(1, 10**12), st.integers(1, 10**10))
def test_buckets_cover_the_gradient(s, c):
    # (n - 1) full buckets plus the last one add up to S
    n = max(1, -(-s // c))
    assert (n - 1) * c + last_bucket_bytes(s, c) == pytest.approx(s)
    assert 0 < last_bucket_bytes(s, c) <= c
