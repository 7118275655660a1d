"""Direct tests of ``report/calibrate.py``: a fit of exact alpha-beta data rendered in-process (every
number by hand), the validate text and JSON, and a measurement printed as nccl-tests prints it."""

from __future__ import annotations

import json

import pytest

from commcost.calibrate.data import load_series, read_measurement
from commcost.calibrate.fit import compare, fit_alpha_beta
from commcost.calibrate.profile import Profile
from commcost.report.calibrate import (fit_to_dict, render_fit_text, render_measurement_text, render_validate_text,
                                       validate_to_dict)
from conftest import numbers_without_a_unit, strict_round_trip

# all_reduce on P = 4 ranks: k = 2(P-1) = 6 ring steps, f = 2(P-1)/P = 1.5; alpha = 5 us, B = 10 GB/s:
# T(S) = 6 * 5 us + 1.5 S / 10e9 s, exactly, for S = 1 KiB .. 16 MiB
SIZES = [2**k for k in range(10, 25)]


def _t(size):
    return 6 * 5e-6 + 1.5 * size / 10e9


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rows = [{"op": "all_reduce", "gpus": 4, "size_bytes": s, "count": s // 4, "dtype": "float32", "time_s": _t(s),
             "time_min_s": _t(s), "time_max_s": _t(s), "algbw_bytes_per_s": s / _t(s),
             "busbw_bytes_per_s": 1.5 * s / _t(s), "iters": 20} for s in SIZES]
    path = tmp_path_factory.mktemp("fit") / "m.json"
    path.write_text(json.dumps({"version": 1, "kind": "commcost-measurement",
                                "provenance": {"source": "hand-made", "backend": "nccl", "world_size": 4},
                                "rows": rows}))
    series = load_series(path)
    fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus, max_regimes=1)
    return path, series, fit, compare(fit, series.samples)


def test_fit_of_exact_data_by_hand(data):
    _, series, fit, quality = data
    d = strict_round_trip(fit_to_dict(fit, quality, series, quality, fit, None))
    assert numbers_without_a_unit(d) == []
    assert d["alpha_s"] == pytest.approx(5e-6, rel=1e-6)
    assert d["bandwidth_bytes_per_s"] == pytest.approx(10e9, rel=1e-6)
    # S* = k alpha B / f = 6 * 5e-6 * 10e9 / 1.5 = 200,000 B
    assert d["crossover_bytes"] == pytest.approx(200_000, rel=1e-6)
    assert d["r2"] == pytest.approx(1.0) and d["max_abs_rel_error"] == pytest.approx(0.0, abs=1e-9)
    assert [p["size_bytes"] for p in d["points"]] == SIZES


def test_fit_text_by_hand(data):
    _, series, fit, quality = data
    text = render_fit_text(fit, quality, series, quality, fit, "p.json")
    prose = " ".join(text.split())      # the prose is wrapped to 80 columns (the table rows are not)
    assert "model: T(S) = k*alpha_i + f*S/B_i (ring all_reduce, P = 4: k = 6 ring steps, f = 1.5 " in prose
    assert "alpha (per ring step, small messages): 5.00 us" in prose
    assert "B (per-rank bus bandwidth, large messages): 10.00 GB/s" in prose
    assert "crossover S* = k*alpha*B/f (latency term = bandwidth term): 200.00 kB" in prose
    # 1 MiB: T = 30 us + 1.5 * 1,048,576 / 1e10 s = 30 + 157.29 us = 187.29 us; busbw 1.5 S / T = 8.40 GB/s
    row = next(line for line in text.splitlines() if line.strip().startswith("1.00 MiB"))
    assert "187.29 us" in row and "8.40 GB/s" in row and "+0.0%" in row
    assert text.rstrip().endswith("profile written: p.json (use it with --profile)")


def test_validate_text_and_json(data):
    path, series, fit, quality = data
    profile = Profile(fit=fit, r2=quality.r2, median_abs_rel_error=quality.median_abs_rel_error,
                      max_abs_rel_error=quality.max_abs_rel_error, points=len(SIZES),
                      provenance={"source": "hand-made"}, path="p.json")
    d = strict_round_trip(validate_to_dict(profile, fit, quality, series, None))
    assert numbers_without_a_unit(d) == [] and d["gpus"] == 4 and d["op"] == "all_reduce"
    text = render_validate_text(profile, fit, quality, series, None)
    assert text.startswith("profile: p.json (all_reduce on 4 ranks, from hand-made)")
    assert "|error| median 0.0%, worst 0.0%" in text


def test_measurement_printed_as_nccl_tests_prints_it(data):
    path, *_ = data
    text = render_measurement_text(read_measurement(path))
    # the units line under the header: size in B, count in elements, time in us, both bandwidths in GB/s
    units = next(line for line in text.splitlines() if "(elements)" in line)
    assert units.split() == ["#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)"]
    # 1 MiB row: count 262,144 float32, 187.29 us, algbw S/T = 1,048,576 / 187.29 us = 5.60 GB/s, busbw 8.40 GB/s
    row = next(line for line in text.splitlines() if line.split()[:1] == ["1048576"])
    assert row.split() == ["1048576", "262144", "float32", "187.29", "5.60", "8.40"]
