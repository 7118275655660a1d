"""The input builder's shared part (:mod:`commcost.cli.inputs`: fabric flags, budget): flags in the drill's
units become SI once, the Namespace is never written, and refusals keep their messages. Its siblings are
tested in test_inputs_step.py, test_inputs_plan.py and test_inputs_comm.py."""

from __future__ import annotations

import copy

import pytest

from commcost.cli import budget, collective
from commcost.cli.inputs import budget_request, fabric_flags
from conftest import parse_flags as _ns


def test_fabric_flags_convert_once_to_si():
    ns = _ns(collective, "--op", "all_reduce", "--size", "1GiB", "--gpus-per-node", "8", "--nodes", "2",
             "--intra-bw", "300", "--intra-latency", "2", "--inter-bw", "400Gbps", "--inter-latency", "5us",
             "--spine-latency", "3")
    f = fabric_flags(ns)
    assert f.intra_bandwidth_bytes_per_s == 300e9  # 300 GB/s * 1e9
    assert f.inter_bandwidth_bytes_per_s == 50e9  # 400 Gbit/s / 8 = 50 GB/s
    assert f.intra_latency_s == pytest.approx(2e-6) and f.inter_latency_s == pytest.approx(5e-6)
    assert f.spine_latency_s == pytest.approx(3e-6)
    assert f.launch_latency_s == 0.0 and f.nvls_latency_s == 0.0  # the defaults, 0 us
    assert f.custom_flags and f.third_tier_flags
    assert f.given == ("--intra-bw", "--intra-latency", "--inter-bw", "--inter-latency", "--spine-latency")


def test_budget_request_is_the_drills_inputs_in_si_and_leaves_the_namespace_alone():
    ns = _ns(budget, "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400",
             "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--tflops", "400")
    before = copy.deepcopy(vars(ns))
    req = budget_request(ns)
    assert vars(ns) == before  # nothing written back (gpus_per_node and params were, before)
    b = req.budget
    assert b.gpus == 32 and b.params == pytest.approx(1.3e9) and b.step_s == pytest.approx(0.4)  # 400 ms
    assert b.gpus_per_node == 8  # the drill's default node
    assert b.comm.flat_link.bandwidth_bytes_per_s == 25e9 and b.comm.flat_link.latency_s == pytest.approx(20e-6)
    # fix (e)3's NVLink: --intra-bw 300 GB/s (default) at the flat link's 20 us
    assert b.intra_node_comm.flat_link.bandwidth_bytes_per_s == 300e9
    assert b.intra_node_comm.flat_link.latency_s == pytest.approx(20e-6)
    assert req.layer.achieved_flops_per_s == 400e12 and req.layer.hidden == 4096
    assert req.memory_gpu is None and req.json is False


def test_budget_request_with_a_system_fills_the_gpus_without_writing_them():
    ns = _ns(budget, "--system", "dgx-h100", "--nodes", "4", "--params", "7", "--step-ms", "1200")
    req = budget_request(ns)
    assert ns.gpus is None and ns.gpus_per_node is None
    assert req.budget.gpus == 32 and req.budget.gpus_per_node == 8  # 4 nodes x 8 GPUs of a DGX H100
    assert req.memory_gpu == "h100-sxm"


def test_budget_refusals_keep_their_messages(capsys):
    with pytest.raises(SystemExit) as e:
        budget_request(_ns(budget, "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1"))
    assert e.value.code == 2
    assert "--step-ms is required for the budget report (or use --layer-ratio alone)" in capsys.readouterr().err
