"""The drill's budget with ``--profile``: the calibrated link replaces --bw/--latency, and the report names it."""

from __future__ import annotations

import json

import pytest

from conftest import drill_profile, run_tool


def flat(obj, prefix=""):
    """{"a": {"b": 1.0}} -> {"a.b": 1.0}; strings and booleans kept as they are."""
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in flat(val, f"{prefix}{key}.").items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in flat(val, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): obj}

DRILL = ("--params", "1.3", "--step-ms", "400", "--buckets", "1,8,16,25,100")


def test_profile_prices_every_collective_with_its_own_regime(tmp_path):
    path = drill_profile(tmp_path)
    r = run_tool("--profile", str(path), *DRILL, "--json")  # --gpus comes from the profile
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)
    # S = 2.6e9 B lies in regime 2 (a = 60 us, B = 25 GB/s): T = 2*31*60 us + 2*31/32 * 2.6e9/25e9
    #   = 3.72 ms + 201.50 ms = 205.22 ms (the headline link, a = 20 us, would say 202.74 ms)
    assert b["allreduce"]["latency_s"] == pytest.approx(62 * 60e-6)
    assert b["allreduce"]["total_s"] == pytest.approx(62 * 60e-6 + 1.9375 * 2.6e9 / 25e9)
    # a 1 MiB bucket starts regime 2 (regime 1 is [0, 1 MiB)): 3.72 ms + 1.9375 * 1048576/25e9 = 3.80 ms
    one = b["buckets"]["rows"][0]["one_bucket"]
    assert one["total_s"] == pytest.approx(62 * 60e-6 + 1.9375 * 2**20 / 25e9)
    # ZeRO-2's reduce-scatter is half the ring all-reduce: 31 * 60 us + 31/32 * 2.6e9/25e9 = 1.86 + 100.75 ms
    assert b["fixes"]["zero2"]["reduce_scatter"]["total_s"] == pytest.approx(31 * 60e-6 + 31 / 32 * 2.6e9 / 25e9)
    # part (g) stays within the profile's 32 ranks (no extrapolation asked)
    assert max(row["gpus"] for row in b["scaling"]["rows"]) == 32
    assert b["profile"]["kind"] == "profile" and b["profile"]["gpus"] == 32 and b["profile"]["extrapolated"] is False
    assert b["inputs"]["bandwidth_bytes_per_s"] is None  # no flat-equivalent link is printed


def test_drill_command_with_profile_names_it(tmp_path):
    path = drill_profile(tmp_path)
    r = run_tool("--params", "1.3", "--step-ms", "400", "--profile", str(path), "--buckets", "25")
    assert r.returncode == 0, r.stderr
    first = " ".join(r.stdout.split("\n\n")[0].split())  # the header, wrapped to 80 columns
    assert first.startswith(f"calibrated profile {path}: 2 size regime(s) fitted on all_reduce over 32 ranks")
    # (b) with P = 32, a = 60 us (the regime holding 2.6 GB): latency term 2 * 31 * 60 us = 3.72 ms
    assert "3.72 ms" in r.stdout


def test_other_group_size_is_refused_then_extrapolated_with_a_warning(tmp_path):
    path = drill_profile(tmp_path)
    r = run_tool("--gpus", "256", "--profile", str(path), *DRILL)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "measured on all_reduce over 32 ranks" in r.stderr and "--extrapolate" in r.stderr
    r = run_tool("--gpus", "256", "--profile", str(path), "--extrapolate", *DRILL)
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stderr and "256 ranks (> 32)" in r.stderr and "extrapolated" in r.stderr
    assert "EXTRAPOLATED" in r.stdout.split("\n\n")[0]  # the header (wrapped to 80 columns)


def one_line(r, fragment):
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr


def test_profile_and_numbers_conflict(tmp_path):
    one_line(run_tool("--profile", str(drill_profile(tmp_path)), "--bw", "25", *DRILL),
             "--profile replaces --bw and --latency")


def test_bad_profile_is_one_line(tmp_path):
    path = drill_profile(tmp_path)
    obj = json.loads(path.read_text())
    obj["version"] = 7
    path.write_text(json.dumps(obj))
    one_line(run_tool("--profile", str(path), *DRILL), "profile version 7 is not supported")
    one_line(run_tool("--profile", str(tmp_path / "missing.json"), *DRILL), "missing.json")


def test_gpus_still_required_without_profile():
    one_line(run_tool("--bw", "25", "--latency", "20", *DRILL), "--gpus is required")
