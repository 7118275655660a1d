"""``commcost fit --tiers SYSTEM`` on logs of several scales, and ``--profile`` of the tier profile it writes:
the profile predicts any node count through the system's topology and names what it extrapolates."""

from __future__ import annotations

import json

import pytest

from commcost.calibrate.profile import load_any_profile
from commcost.comm.algorithms import collective_cost
from conftest import DATA, run_commcost, run_tool

ONE = DATA / "nccl_tests" / "h100_nvlink_1node_8gpu_all_reduce.log"
TWO = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


@pytest.fixture(scope="module")
def tiers(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiers") / "h100.tiers.json"
    r = run_commcost("fit", str(ONE), str(TWO), "--tiers", "dgx-h100", "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


def test_tier_profile_records_the_fit_and_its_scales(tiers):
    obj = json.loads(tiers.read_text())
    assert obj["kind"] == "commcost-tier-profile" and obj["system"] == "dgx-h100"
    assert obj["fitted_nodes"] == [1, 2]  # 8 ranks = 1 node of 8, 16 ranks = 2 nodes
    assert obj["median_abs_error"] < 0.10


def test_collective_on_the_tier_profile_is_the_fitted_topology(tiers):
    fit = load_any_profile(tiers)
    d = json.loads(run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--profile", str(tiers),
                                "--nodes", "2", "--json").stdout)
    # one truth: the CLI prices exactly what the library's fitted topology on 2 nodes of 8 gives
    assert d["gpus"] == 16 and d["time_s"] == pytest.approx(
        collective_cost("all_reduce", 2**30, 16, fit.topology(2)).total_s, rel=1e-12)
    assert d["profile"]["extrapolates"] == []


def test_beyond_the_fitted_scales_the_extrapolated_parameters_are_named(tiers):
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--profile", str(tiers), "--nodes", "8")
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stderr and "fitted on 1, 2 node(s); on 8 nodes it extrapolates" in r.stderr
    assert "EXTRAPOLATES" in r.stdout
    b = run_tool("--profile", str(tiers), "--nodes", "4", "--params", "1.3", "--step-ms", "400", "--json")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["inputs"]["gpus"] == 32


def test_several_files_need_tiers():
    r = run_commcost("fit", str(ONE), str(TWO))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--tiers" in r.stderr
