"""The two-tier scaling view: NVLink inside a node, the inter-node fabric across; the knee."""

import json

import pytest

from commcost.comm.model import FabricModel
from commcost import ring_all_reduce
from commcost.analyses.scaling import ScalingInputs, data_parallel_comm, scaling_curve, seed_fabrics, seed_two_tier

from conftest import run_commcost


def test_hierarchical_on_the_seed_tiers_by_hand():
    # 7B bf16: S = 14e9 B; N = 16 = 2 nodes x 8; NVLink 600 GB/s, 20 us; IB 25 GB/s, 50 us
    # reduce-scatter in node: 7*20us + 7/8*14e9/600e9 = 0.14 ms + 20.4167 ms; all-gather the same
    # all-reduce across 2 nodes of S/8 = 1.75e9 B: 2*1*50us + 2*1/2*1.75e9/25e9 = 0.1 ms + 70 ms
    c = data_parallel_comm(14e9, 16, FabricModel(topology=seed_two_tier(8, 16)), "hierarchical")
    assert c.latency_s == pytest.approx(0.14e-3 * 2 + 0.1e-3)
    assert c.bandwidth_s == pytest.approx(2 * 7 / 8 * 14e9 / 600e9 + 1.75e9 / 25e9)


def test_inside_one_node_two_tiers_equal_the_flat_nvlink_ring():
    nvlink = seed_fabrics()["nvlink"].link
    for n in (2, 4, 8):
        two = data_parallel_comm(14e9, n, FabricModel(topology=seed_two_tier(8, 8)), "ring")
        flat = ring_all_reduce(14e9, n, nvlink)
        assert two.total_s == pytest.approx(flat.total_s)


def test_knee_is_flagged_where_the_group_leaves_the_node():
    curve = scaling_curve(ScalingInputs(
        model="7B", fabric="two-tier", params=7e9, bytes_per_grad=2, compute_s=0.4, overhead_s=0.0,
        comm=FabricModel(topology=seed_two_tier(8, 64)), gpu_counts=(1, 4, 8, 16, 64), overlap_fraction=0.85, algorithm="auto"))
    assert [r.crosses_nodes for r in curve.rows] == [False, False, False, True, True]
    # leaving the node costs: T(16) > T(8)
    assert curve.rows[3].comm_s > curve.rows[2].comm_s


def test_topology_too_small_for_the_gpu_counts_is_an_error():
    from commcost import InputError
    with pytest.raises(InputError):
        ScalingInputs(model="m", fabric="f", params=1e9, bytes_per_grad=2, compute_s=0.1, overhead_s=0.0,
                      comm=FabricModel(topology=seed_two_tier(8, 8)), gpu_counts=(16,), overlap_fraction=0.5)


def test_cli_gpus_per_node_marks_the_knee_and_json_says_so():
    r = run_commcost("scaling", "--model", "7b", "--gpus-per-node", "8", "--gpus", "4,8,16", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [row["crosses_nodes"] for row in rows] == [False, False, True]
    assert all(row["gpus_per_node"] == 8 for row in rows)
    text = run_commcost("scaling", "--model", "7b", "--gpus-per-node", "8", "--gpus", "4,8,16").stdout
    assert "the knee" in text and "16^" in text


def test_cli_system_preset():
    r = run_commcost("scaling", "--model", "1.3b", "--system", "dgx-h100", "--gpus", "8,16,64")
    assert r.returncode == 0, r.stderr
    # N = 8 is the one point inside a node: nothing says the slope changes there, so no knee is announced
    # (commcost.analyses.scaling.knee needs a doubling inside the node to compare with)
    assert "dgx-h100" in r.stdout and "the knee" not in r.stdout


@pytest.mark.parametrize("args", [
    ["--system", "nope"], ["--gpus-per-node", "0"], ["--gpus-per-node", "8", "--fabric", "nvlink"],
    ["--system", "dgx-h100", "--algorithm", "foo"], ["--system", "dgx-h100", "--gpus-per-node", "16"],
])
def test_cli_two_tier_bad_input(args):
    r = run_commcost("scaling", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
