"""Ring collectives: hand-computed values and the invariants the brief names."""

import math

import pytest
from hypothesis import given, strategies as st

from commcost import InputError, Link, bus_bandwidth_factor, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from commcost.comm.collectives import Collective

DRILL = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)


def test_drill_allreduce_terms():
    T = ring_all_reduce(2.6e9, 32, DRILL)
    # latency 2(P-1)a = 2*31*20us = 1240 us
    assert T.latency_s == pytest.approx(1.24e-3)
    # bandwidth 2(P-1)/P * S/B = 62/32 * 2.6e9/25e9 = 1.9375 * 0.104 s = 0.2015 s
    assert T.bandwidth_s == pytest.approx(0.2015)
    assert T.total_s == pytest.approx(0.20274)
    assert T.dominant == "bandwidth"
    # 0.2015 / 0.00124 = 162.5
    assert T.dominance_factor == pytest.approx(162.5)


def test_small_message_is_latency_bound():
    # P=4, S=1 kB on the drill link: latency 2*3*20us = 120us; bandwidth 1.5*1e3/25e9 = 60 ns
    T = ring_all_reduce(1e3, 4, DRILL)
    assert T.latency_s == pytest.approx(120e-6)
    assert T.bandwidth_s == pytest.approx(60e-9)
    assert T.dominant == "latency"


def test_reduce_scatter_and_all_gather_terms():
    # P=8, S=8e9 B, B=100 GB/s, a=10 us: (P-1)a = 70 us; (P-1)/P S/B = 7/8*80 ms = 70 ms
    link = Link(bandwidth_bytes_per_s=100e9, latency_s=10e-6)
    for fn in (ring_reduce_scatter, ring_all_gather):
        c = fn(8e9, 8, link)
        assert c.latency_s == pytest.approx(70e-6)
        assert c.bandwidth_s == pytest.approx(0.07)


def test_single_rank_costs_nothing():
    T = ring_all_reduce(1e9, 1, DRILL)
    assert T.total_s == 0 and T.dominant == "none" and T.dominance_factor == 1.0


@pytest.mark.parametrize("op,n,factor", [
    (Collective.ALL_REDUCE, 8, 2 * 7 / 8),      # 1.75
    (Collective.REDUCE_SCATTER, 8, 7 / 8),
    (Collective.ALL_GATHER, 4, 3 / 4),
    (Collective.ALL_TO_ALL, 2, 1 / 2),
    (Collective.BROADCAST, 16, 1.0),
    (Collective.REDUCE, 16, 1.0),
])
def test_bus_bandwidth_factors_match_nccl_tests(op, n, factor):
    assert bus_bandwidth_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_gpus_rejected(bad):
    with pytest.raises(InputError):
        ring_all_reduce(1e6, bad, DRILL)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_link_rejected(bad):
    with pytest.raises(InputError):
        Link(bandwidth_bytes_per_s=bad, latency_s=1e-6)


# ---- properties ---------------------------------------------------------------------------

sizes = st.floats(min_value=1.0, max_value=1e12, allow_nan=False)
ranks = st.integers(min_value=2, max_value=100_000)
bandwidths = st.floats(min_value=1e6, max_value=1e13)
latencies = st.floats(min_value=0.0, max_value=1e-3)


@given(sizes, sizes, ranks, bandwidths, latencies)
def test_monotone_in_bytes(s1, s2, p, b, a):
    link = Link(bandwidth_bytes_per_s=b, latency_s=a)
    lo, hi = sorted((s1, s2))
    assert ring_all_reduce(lo, p, link).total_s <= ring_all_reduce(hi, p, link).total_s


@given(sizes, ranks, bandwidths, bandwidths, latencies)
def test_falls_with_bandwidth(s, p, b1, b2, a):
    lo, hi = sorted((b1, b2))
    slow = ring_all_reduce(s, p, Link(bandwidth_bytes_per_s=lo, latency_s=a))
    fast = ring_all_reduce(s, p, Link(bandwidth_bytes_per_s=hi, latency_s=a))
    assert fast.total_s <= slow.total_s


@given(sizes, ranks, ranks, bandwidths, latencies)
def test_grows_with_ranks(s, p1, p2, b, a):
    link = Link(bandwidth_bytes_per_s=b, latency_s=a)
    lo, hi = sorted((p1, p2))
    assert ring_all_reduce(s, lo, link).total_s <= ring_all_reduce(s, hi, link).total_s * (1 + 1e-12)


@given(sizes, ranks, bandwidths, latencies)
def test_reduce_scatter_plus_all_gather_is_all_reduce(s, p, b, a):
    link = Link(bandwidth_bytes_per_s=b, latency_s=a)
    ar = ring_all_reduce(s, p, link)
    rs, ag = ring_reduce_scatter(s, p, link), ring_all_gather(s, p, link)
    assert rs.latency_s + ag.latency_s == pytest.approx(ar.latency_s)
    assert rs.bandwidth_s + ag.bandwidth_s == pytest.approx(ar.bandwidth_s)


@given(sizes, bandwidths)
def test_bandwidth_term_tends_to_2S_over_B(s, b):
    link = Link(bandwidth_bytes_per_s=b, latency_s=0.0)
    limit = 2 * s / b
    # 2(P-1)/P -> 2: at P = 1e6 the term is within 1e-6 of 2S/B, and always below it
    big = ring_all_reduce(s, 1_000_000, link).bandwidth_s
    assert big < limit and big == pytest.approx(limit, rel=1.01e-6)
