"""The drill's budget with ``--profile``: the calibrated link replaces --bw/--latency, and the report names it."""

from __future__ import annotations

import json
import math

from commcost.calibrate.fit import AlphaBetaFit, Regime
from commcost.calibrate.profile import Profile, save_profile
from commcost.comm.collectives import Algorithm, Collective
import pytest

from conftest import run_tool


def flat(obj, prefix=""):
    """{"a": {"b": 1.0}} -> {"a.b": 1.0}; strings and booleans kept as they are."""
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in flat(val, f"{prefix}{key}.").items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in flat(val, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): obj}

DRILL = ("--params", "1.3", "--step-ms", "400", "--buckets", "1,8,16,25,100")


def drill_profile(tmp_path, gpus=32):
    """A profile whose headline link is the drill's: alpha = 20 us per step, B = 25 GB/s, P = 32."""
    fit = AlphaBetaFit(op=Collective.ALL_REDUCE, algorithm=Algorithm.RING, gpus=gpus, regimes=(
        Regime(min_size_bytes=0, max_size_bytes=2**20, alpha_s=20e-6, bandwidth_bytes_per_s=5e9),
        Regime(min_size_bytes=2**20, max_size_bytes=math.inf, alpha_s=60e-6, bandwidth_bytes_per_s=25e9)))
    path = tmp_path / "drill.profile.json"
    save_profile(Profile(fit=fit, r2=0.999, median_abs_rel_error=0.01, max_abs_rel_error=0.05, points=20,
                         provenance={"source": "made-up.csv"}), path)
    return path


def test_profile_gives_the_same_budget_as_the_numbers_it_holds(tmp_path):
    path = drill_profile(tmp_path)
    by_hand = run_tool("--gpus", "32", "--bw", "25", "--latency", "20", *DRILL, "--json")
    by_profile = run_tool("--profile", str(path), *DRILL, "--json")  # --gpus comes from the profile
    assert by_hand.returncode == 0 and by_profile.returncode == 0, by_profile.stderr
    a, b = json.loads(by_hand.stdout), json.loads(by_profile.stdout)
    named = b.pop("profile")
    fa, fb = flat(a), flat(b)  # the same report, up to the last bit of 20 * 1e-6
    assert fa.keys() == fb.keys()
    for key in fa:
        if isinstance(fa[key], float):
            assert fa[key] == pytest.approx(fb[key], rel=1e-12), key
        else:
            assert fa[key] == fb[key], key
    # alpha of the first regime (20 us), B of the last (25 GB/s): the headline link
    assert named == {"path": str(path), "bandwidth_bytes_per_s": 25e9, "latency_s": 20e-6, "op": "all_reduce",
                     "gpus": 32, "r2": 0.999, "source": "made-up.csv"}


def test_drill_command_with_profile_names_it(tmp_path):
    path = drill_profile(tmp_path)
    r = run_tool("--params", "1.3", "--step-ms", "400", "--profile", str(path), "--buckets", "25")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"link from profile {path}: B = 25.00 GB/s")
    assert "20.00 us per ring step" in first and "all_reduce over 32 ranks" in first
    # (b) with P = 32, a = 20 us: latency term 2 * 31 * 20 us = 1240 us = 1.24 ms
    assert "1.24 ms" in r.stdout


def test_other_group_size_is_said(tmp_path):
    path = drill_profile(tmp_path)
    r = run_tool("--gpus", "256", "--profile", str(path), *DRILL)
    assert r.returncode == 0, r.stderr
    assert "applied here to P = 256 through the ring formula" in r.stdout.splitlines()[0]


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
