"""Rates and latencies with units (issue 9) as the flag parsers of ``cli/_args.py`` read them: the bare
number is GB/s or us, bits are bytes x 8, and every form gives the same report byte for byte."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.cli._args import latency_us, nonneg_latency_us, rate_gb_per_s
from commcost.core.units import parse_rate_bytes_per_s, parse_time_s
from conftest import run_tool, one_error_line


def test_rates_with_units_give_the_same_report_byte_for_byte():
    # 400 Gb/s = 400e9 / 8 = 50e9 B/s = 50 GB/s; 20 us = 0.02 ms = 2e-5 s
    plain = run_tool("--gpus", "32", "--bw", "50", "--latency", "20", "--params", "1.3", "--step-ms", "400")
    assert plain.returncode == 0, plain.stderr
    for bw, lat in (("400Gbps", "20us"), ("50GB/s", "0.02ms"), ("400Gb/s", "2e-5s"), ("50 GB/s", "20000ns")):
        r = run_tool("--gpus", "32", "--bw", bw, "--latency", lat, "--params", "1.3", "--step-ms", "400")
        # the same report and the same one stderr note (32 GPUs on one flat --bw: wider than a node)
        assert (r.returncode, r.stdout, r.stderr) == (0, plain.stdout, plain.stderr), (bw, lat)
        assert r.stderr.count("\n") == 1 and "one flat link" in r.stderr


@pytest.mark.parametrize("text, gb_per_s", [
    ("25", 25.0), ("25GB/s", 25.0), ("25GBps", 25.0), ("200Gbps", 25.0), ("1TB/s", 1000.0),
    ("1GiB/s", 1.073741824), ("12.5e9B/s", 12.5), ("800Mb/s", 0.1),
])
def test_rate_units(text, gb_per_s):
    assert rate_gb_per_s(text) == pytest.approx(gb_per_s, rel=1e-12)


@pytest.mark.parametrize("text, us", [("20", 20.0), ("20us", 20.0), ("0.02ms", 20.0), ("500ns", 0.5), ("1s", 1e6)])
def test_latency_units(text, us):
    assert latency_us(text) == pytest.approx(us, rel=1e-12)


@pytest.mark.parametrize("text", ["50GB", "50 mb/s", "5Gib/s", "fast", "inf", "nan", "1e400GB/s", ""])
def test_bad_rates_are_one_line(text):
    line = one_error_line(run_tool("--gpus", "32", "--bw", text, "--latency", "20", "--params", "1.3",
                                   "--step-ms", "400"))
    assert "argument --bw:" in line


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))
def test_rate_forms_agree(gb):
    # bits are bytes x 8; the bare number is GB/s
    assert rate_gb_per_s(f"{gb!r}") == gb
    assert rate_gb_per_s(f"{gb!r}GB/s") == pytest.approx(gb, rel=1e-12)
    assert parse_rate_bytes_per_s(f"{gb * 8!r}Gbps") == pytest.approx(gb * 1e9, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.just(0.0) | st.floats(min_value=1e-6, max_value=1e7, allow_nan=False))
def test_latency_forms_agree(us):
    assert nonneg_latency_us(f"{us!r}") == us
    assert parse_time_s(f"{us / 1000!r}ms") == pytest.approx(us * 1e-6, rel=1e-12, abs=1e-300)
    assert math.isfinite(parse_time_s(f"{us!r}us"))


@pytest.mark.parametrize("text", ["5e-324", "1e-7", "0.0009ns"])
def test_latency_below_a_picosecond_is_one_line(text):
    # 5e-324 us = 5e-330 s underflows to 0 s: the budget printed "the bandwidth term is infx the latency
    # term" before the 1 ps floor (LATENCY_MIN_S = 1e-12 s = 1e-6 us); 0.0009 ns = 9e-7 us < 1e-6 us
    line = one_error_line(run_tool("--gpus", "32", "--bw", "25", "--latency", text, "--params", "1.3",
                                   "--step-ms", "400"))
    assert "argument --latency:" in line and "at least 1e-06 us" in line


def test_latency_of_a_picosecond_prices():
    # 1e-6 us = 1 ps: latency term 2(P-1)a = 62 ps; bandwidth term 201.5 ms (README); ratio ~3.2e9, finite
    r = run_tool("--gpus", "32", "--bw", "25", "--latency", "1e-6", "--params", "1.3", "--step-ms", "400")
    assert r.returncode == 0, r.stderr
    assert "bandwidth-bound: the bandwidth term is 3.25e+09x the latency term" in r.stdout
