"""``--profile`` is accepted by budget, timeline, scaling and collective, and every one of them
prices each collective with the fitted regime that holds its size (the profile's regimes:
[0, 1 MiB) a = 20 us, B = 5 GB/s; [1 MiB, inf) a = 60 us, B = 25 GB/s; P = 32)."""

from __future__ import annotations

import json

import pytest

from conftest import run_commcost
from conftest import drill_profile

def _json(*args):
    r = run_commcost(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


REGIME2 = ("--bw", "25", "--latency", "60")  # the flat link equal to the profile's second regime


def test_timeline_with_profile_uses_the_regime_of_each_bucket(tmp_path):
    path = str(drill_profile(tmp_path))
    step = ("timeline", "--gpus", "32", "--params", "1.3", "--step-ms", "400")
    # DDP's buckets are 1 MiB, 25 MiB ... and 3.55 MiB: all >= 1 MiB, all in regime 2
    a, b = _json(*step, *REGIME2), _json(*step, "--profile", path)
    assert b.pop("profile")["path"] == path
    assert a["exposed_s"] == pytest.approx(b["exposed_s"]) and a["step_s"] == pytest.approx(b["step_s"])
    # --gpus comes from the profile (32) when not given
    c = _json("timeline", "--params", "1.3", "--step-ms", "400", "--profile", path)
    assert c["step_s"] == pytest.approx(a["step_s"])


def test_scaling_with_profile_uses_its_regimes(tmp_path):
    path = str(drill_profile(tmp_path))
    common = ("scaling", "--model", "7b", "--gpus", "1,8,32")
    a, b = _json(*common, *REGIME2), _json(*common, "--profile", path)
    assert b["profile"]["gpus"] == 32
    # 7B at N = 32: S = 14e9 B in regime 2: T = 62*60us + 62/32 * 14e9/25e9 = 3.72 ms + 1085 ms
    assert b["rows"][-1]["comm_s"] == pytest.approx(3.72e-3 + 62 / 32 * 14e9 / 25e9)
    assert [r["comm_s"] for r in a["rows"]] == pytest.approx([r["comm_s"] for r in b["rows"]])
    r = run_commcost(*common[:-1], "1,64", "--profile", path)  # 64 ranks: beyond the profile's 32
    assert r.returncode == 2 and "--extrapolate" in r.stderr


def test_collective_with_profile(tmp_path):
    path = str(drill_profile(tmp_path))
    d = _json("collective", "--op", "all_reduce", "--size", "1GB", "--profile", path)
    # P = 32 from the profile; 1 GB in regime 2: 62*60us + 62/32 * 1e9/25e9 = 3.72 ms + 77.5 ms
    assert d["gpus"] == 32 and d["time_s"] == pytest.approx(3.72e-3 + 0.0775)
    # 100 kB in regime 1: 62*20us + 62/32 * 1e5/5e9 = 1.24 ms + 38.75 us
    small = _json("collective", "--op", "all_reduce", "--size", "100kB", "--profile", path)
    assert small["time_s"] == pytest.approx(1.24e-3 + 62 / 32 * 1e5 / 5e9)
    assert d["profile"]["regimes"][1]["alpha_s"] == pytest.approx(60e-6)


@pytest.mark.parametrize("args", [
    ("budget", "--params", "1.3", "--step-ms", "400", "--system", "dgx-h100"),
    ("timeline", "--params", "1.3", "--step-ms", "400", "--bw", "25"),
    ("scaling", "--model", "7b", "--fabric", "nvlink"),
    ("collective", "--op", "all_reduce", "--size", "1GB", "--latency", "3"),
])
def test_profile_conflicts_are_one_line(tmp_path, args):
    r = run_commcost(*args, "--profile", str(drill_profile(tmp_path)))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", [("budget", "--gpus", "8", "--params", "1", "--step-ms", "1"),
                                 ("timeline", "--gpus", "8", "--params", "1", "--step-ms", "1"),
                                 ("scaling", "--model", "7b"),
                                 ("collective", "--op", "all_reduce", "--size", "1MB")])
def test_missing_profile_file_is_one_line(tmp_path, cmd):
    r = run_commcost(*cmd, "--profile", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "missing.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
