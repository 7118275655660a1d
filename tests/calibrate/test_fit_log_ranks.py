"""Issue 20: ``fit --tiers`` fits each log at its own group size (the ranks it lists, or ``LOG:RANKS``), and
refuses in one line what would be ambiguous; ``collective --log --system`` scores a log against a preset."""

from __future__ import annotations

import json

import pytest

from commcost.calibrate.fit import Sample, score_against_preset
from commcost.calibrate.tiers import log_group_size, split_log_ranks
from commcost.comm.algorithms import collective_cost
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.comm.systems import system_group
from conftest import DATA, run_commcost

NT = DATA / "nccl_tests"
ONE = NT / "h100_nvlink_1node_8gpu_all_reduce.log"      # lists 8 ranks on 1 host
TWO = NT / "h100_ib_2node_16gpu_all_reduce.log"         # lists 16 ranks on 2 hosts
RACK1 = NT / "allreduce_gb200_nvl72_coreweave_1rack.txt"  # lists no ranks (only the last rank's line)
RACK2 = NT / "allreduce_gb200_nvl72_coreweave_2racks.txt"


def test_split_log_ranks():
    assert split_log_ranks("run.log:16") == ("run.log", 16)
    assert split_log_ranks("run.log") == ("run.log", None)
    assert split_log_ranks("dir:with:colons/run.log") == ("dir:with:colons/run.log", None)


def test_two_logs_of_different_group_sizes_are_each_fitted_at_their_own_size():
    r = run_commcost("fit", str(ONE), str(TWO), "--tiers", "dgx-h100", "--json")
    assert r.returncode == 0, r.stderr
    sources = json.loads(r.stdout)["provenance"]["sources"]
    assert [(s["gpus"], s["nodes"]) for s in sources] == [(8, 1), (16, 2)]


def test_one_gpus_flag_for_several_logs_is_refused_in_one_line():
    # the case: --gpus 16 would fit the one-node 8-rank log as 2 nodes
    r = run_commcost("fit", str(ONE), str(TWO), "--tiers", "dgx-h100", "--gpus", "16")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "lists 8 ranks but --gpus says 16" in r.stderr
    r = run_commcost("fit", str(RACK1), str(RACK2), "--tiers", "gb200-nvl72", "--gpus", "72")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "lists no ranks" in r.stderr and "RANKS" in r.stderr


def test_logs_that_list_no_ranks_take_log_colon_ranks():
    r = run_commcost("fit", f"{RACK1}:72", f"{RACK2}:128", "--tiers", "gb200-nvl72", "--json")
    assert r.returncode == 0, r.stderr
    assert [(s["gpus"], s["nodes"]) for s in json.loads(r.stdout)["provenance"]["sources"]] == [(72, 1), (128, 2)]


def test_log_colon_ranks_must_agree_with_the_ranks_listed():
    with pytest.raises(InputError, match="lists 8 ranks"):
        log_group_size(str(ONE), 16, None, 2)
    assert log_group_size(str(ONE), 8, None, 2) == 8
    assert log_group_size(str(ONE), None, None, 2) == 8
    assert log_group_size(str(RACK1), None, 72, 1) == 72  # one log: --gpus is unambiguous


def test_score_against_preset_by_hand():
    # a cluster 1.25x slower than the preset on every size runs at 1/1.25 = 80% of its class
    topo, P = system_group("dgx-h100", nodes=2)
    sizes = [2 ** k for k in range(20, 31)]
    samples = [Sample(size_bytes=S, time_s=1.25 * collective_cost("all_gather", S, P, topo).total_s) for S in sizes]
    score = score_against_preset(samples, op=Collective.ALL_GATHER, gpus=16, system="dgx-h100", nodes=2)
    assert score.nodes == 2 and score.gpus == 16
    assert score.speed_in(2 ** 20, 64 * 2 ** 20) == pytest.approx(0.8)
    assert all(r.error == pytest.approx(1 / 1.25 - 1) for r in score.rows)  # (T - 1.25T) / 1.25T = -0.2
    assert score.speed_in(2 ** 40, 2 ** 41) is None


def test_collective_log_prints_per_size_and_the_verdict():
    log = NT / "alltoall_mi355x_ainic_2x8.txt"
    r = run_commcost("collective", "--log", str(log), "--system", "mi355x-roce")
    assert r.returncode == 0, r.stderr
    assert "all_to_all on 16 ranks, 2 node(s), against preset mi355x-roce" in r.stdout
    assert "verdict: this cluster runs at" in r.stdout and "of its class (mi355x-roce) at 1-64 MiB" in r.stdout
    d = json.loads(run_commcost("collective", "--log", str(log), "--system", "mi355x-roce", "--json").stdout)
    assert len(d["rows"]) == 27 and d["nodes"] == 2
    first = d["rows"][0]  # 256 B, the smaller of out-of-place 38.61 us and in-place 37.29 us
    assert first["message_bytes"] == 256 and first["measured_s"] == pytest.approx(37.29e-6)
    assert first["error"] == pytest.approx((first["predicted_s"] - first["measured_s"]) / first["measured_s"])


def test_collective_log_needs_a_system():
    r = run_commcost("collective", "--log", str(ONE))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--system" in r.stderr
