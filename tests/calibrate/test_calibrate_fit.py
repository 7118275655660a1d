"""The alpha-beta fit: exact recovery, regimes, quality numbers, and fits of real nccl-tests logs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.calibrate.data import load_series
from commcost.calibrate.fit import (
    AlphaBetaFit, Regime, Sample, compare, fit_alpha_beta, ring_latency_steps,
)
from commcost.comm.collectives import Algorithm, Collective
from commcost.core.errors import InputError
from conftest import DATA

LOGS = sorted((DATA / "nccl_tests").glob("*.log"))
MiB = 2**20


def line(op, gpus, alpha_s, bw, sizes):
    k = ring_latency_steps(op, gpus)
    f = {Collective.ALL_REDUCE: 2 * (gpus - 1) / gpus}.get(op, (gpus - 1) / gpus)
    return [Sample(size_bytes=s, time_s=k * alpha_s + f * s / bw) for s in sizes]


def test_ring_latency_steps():
    assert ring_latency_steps(Collective.ALL_REDUCE, 8) == 14  # 2(P-1)
    assert ring_latency_steps(Collective.ALL_GATHER, 8) == 7  # P-1
    assert ring_latency_steps(Collective.REDUCE_SCATTER, 32) == 31
    assert ring_latency_steps(Collective.SEND_RECV, 8) == 1


def test_exact_recovery_hand_computed():
    # all-reduce, P = 8, alpha = 5 us, B = 100 GB/s: T(S) = 14 * 5 us + 1.75 * S / 1e11
    sizes = [2**i for i in range(10, 31)]
    fit = fit_alpha_beta(line(Collective.ALL_REDUCE, 8, 5e-6, 100e9, sizes), op=Collective.ALL_REDUCE, gpus=8)
    assert len(fit.regimes) == 1
    assert fit.alpha_s == pytest.approx(5e-6, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(100e9, rel=1e-9)
    # T(1 MiB) = 70 us + 1.75 * 1048576 / 1e11 s = 70 us + 18.35 us = 88.35 us
    assert fit.predict_s(MiB) == pytest.approx(88.35e-6, rel=1e-3)
    # S* = P * alpha * B = 8 * 5e-6 * 1e11 = 4e6 bytes
    assert fit.crossover_bytes == pytest.approx(4e6, rel=1e-9)
    q = compare(fit, line(Collective.ALL_REDUCE, 8, 5e-6, 100e9, sizes))
    assert q.r2 == pytest.approx(1.0) and q.max_abs_rel_error < 1e-9
    assert fit.link.latency_s == pytest.approx(5e-6) and fit.link.bandwidth_bytes_per_s == pytest.approx(100e9)


@settings(max_examples=40, deadline=None)
@given(alpha_us=st.floats(0.1, 100), bw_gbs=st.floats(0.5, 2000), gpus=st.integers(2, 512),
       op=st.sampled_from([Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER]))
def test_exact_recovery_property(alpha_us, bw_gbs, gpus, op):
    sizes = [2**i for i in range(6, 34, 2)]
    fit = fit_alpha_beta(line(op, gpus, alpha_us * 1e-6, bw_gbs * 1e9, sizes), op=op, gpus=gpus)
    assert len(fit.regimes) == 1
    assert fit.alpha_s == pytest.approx(alpha_us * 1e-6, rel=1e-6)
    assert fit.bandwidth_bytes_per_s == pytest.approx(bw_gbs * 1e9, rel=1e-6)


def test_two_regimes_are_found_and_recovered():
    # LL-like regime up to 1 MiB (alpha 2 us, B 20 GB/s), Simple-like above (alpha 10 us, B 400 GB/s).
    small = line(Collective.ALL_REDUCE, 16, 2e-6, 20e9, [2**i for i in range(3, 21)])
    large = line(Collective.ALL_REDUCE, 16, 10e-6, 400e9, [2**i for i in range(21, 35)])
    fit = fit_alpha_beta(small + large, op=Collective.ALL_REDUCE, gpus=16)
    assert len(fit.regimes) == 2
    assert fit.regimes[0].alpha_s == pytest.approx(2e-6, rel=1e-6)
    assert fit.regimes[0].bandwidth_bytes_per_s == pytest.approx(20e9, rel=1e-6)
    assert fit.alpha_s == pytest.approx(2e-6, rel=1e-6)  # headline alpha: first regime
    assert fit.bandwidth_bytes_per_s == pytest.approx(400e9, rel=1e-6)  # headline B: last regime
    # the edge sits at the geometric mean of 1 MiB and 2 MiB
    assert fit.regimes[1].min_size_bytes == pytest.approx(math.sqrt(2**20 * 2**21))
    assert compare(fit, small + large).max_abs_rel_error < 1e-6


def test_r2_on_log_times_by_hand():
    only = Regime(min_size_bytes=0, max_size_bytes=math.inf, alpha_s=0.0, bandwidth_bytes_per_s=1.0)
    fit = AlphaBetaFit(op=Collective.SEND_RECV, algorithm=Algorithm.RING, gpus=2, regimes=(only,))
    # send/recv with alpha 0, B = 1 B/s: T(S) = S. Measured 1 s and 4 s at S = 1, 2 (predicted 1, 2):
    # ln T = 0, ln 4; mean = ln 2; SS_tot = 2 (ln 2)^2; SS_res = (ln 2 - ln 4)^2 = (ln 2)^2 -> R^2 = 0.5
    c = compare(fit, [Sample(size_bytes=1, time_s=1.0), Sample(size_bytes=2, time_s=4.0)])
    assert c.r2 == pytest.approx(0.5)
    assert c.median_abs_rel_error == pytest.approx(0.25)  # errors 0 and |2-4|/4 = 0.5 -> median 0.25
    assert c.max_abs_rel_error == pytest.approx(0.5)


def test_one_size_cannot_fit_two_parameters():
    with pytest.raises(InputError, match="at least two distinct message sizes"):
        fit_alpha_beta([Sample(size_bytes=1024, time_s=1e-5)] * 3, op=Collective.ALL_REDUCE, gpus=8)


def test_times_that_do_not_grow_are_refused():
    pts = [Sample(size_bytes=2**i, time_s=1e-3 / i) for i in range(1, 8)]
    with pytest.raises(InputError, match="do not grow with message size"):
        fit_alpha_beta(pts, op=Collective.ALL_REDUCE, gpus=8)


def test_one_gpu_is_refused():
    with pytest.raises(InputError, match="gpus must be an integer >= 2"):
        fit_alpha_beta(line(Collective.ALL_REDUCE, 2, 1e-6, 1e9, [1, 2, 4]), op=Collective.ALL_REDUCE, gpus=1)


# Plausible ranges for a real fabric (why): alpha per ring step between 0.1 us (an NVLink hop) and 20 us
# (a TCP/RoCE hop with software overhead); the headline bus bandwidth within 10% of the largest busbw the
# log itself reports at its top sizes (the plateau nccl-tests measured), and between 10 GB/s and 1 TB/s.
@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_real_logs_give_plausible_alpha_and_beta(path):
    from commcost.calibrate.nccl_tests import read_nccl_tests

    series = load_series(path)
    fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus)
    (run,) = read_nccl_tests(path)
    peak_busbw = max(max(r.out_of_place.busbw_bytes_per_s, r.in_place.busbw_bytes_per_s) for r in run.rows)
    assert 0.1e-6 <= fit.alpha_s <= 20e-6
    assert 10e9 <= fit.bandwidth_bytes_per_s <= 1000e9
    assert fit.bandwidth_bytes_per_s == pytest.approx(peak_busbw, rel=0.10)
    assert compare(fit, series.samples).r2 > 0.99
    assert len(fit.regimes) in (1, 2, 3)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_real_logs_held_out_sizes(path):
    """Fit on every other size, predict the rest: median |error| for sizes >= 1 MiB.

    The benchmark (benchmarks/fit_accuracy.py) prints the figures (0.5-4.5% on these logs) against a
    target of 10%; the test asserts a looser 15% so that it guards the method, not the last digit.
    """
    series = load_series(path)
    pts = sorted(series.samples, key=lambda s: s.size_bytes)
    fit = fit_alpha_beta(pts[0::2], op=series.op, gpus=series.gpus)
    held = compare(fit, [p for p in pts[1::2] if p.size_bytes >= MiB])
    assert held.median_abs_rel_error <= 0.15
    # and the regimes beat a single straight line on the same held-out sizes
    straight = fit_alpha_beta(pts[0::2], op=series.op, gpus=series.gpus, max_regimes=1)
    straight_held = compare(straight, [p for p in pts[1::2] if p.size_bytes >= MiB])
    assert held.median_abs_rel_error < straight_held.median_abs_rel_error


def test_regime_validation():
    with pytest.raises(InputError, match="bandwidth_bytes_per_s must be > 0"):
        Regime(min_size_bytes=0, max_size_bytes=math.inf, alpha_s=1e-6, bandwidth_bytes_per_s=0)
    with pytest.raises(InputError, match="contiguous"):
        AlphaBetaFit(op=Collective.ALL_REDUCE, algorithm=Algorithm.RING, gpus=2, regimes=(
            Regime(min_size_bytes=0, max_size_bytes=10, alpha_s=0, bandwidth_bytes_per_s=1),
            Regime(min_size_bytes=20, max_size_bytes=math.inf, alpha_s=0, bandwidth_bytes_per_s=1)))
