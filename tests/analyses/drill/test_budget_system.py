"""``tools/collective_cost.py --system ... --nodes ...``: the budget on a two-tier preset."""

from __future__ import annotations

import json

import pytest

from conftest import run_tool

ISSUE = ["--params", "1.3", "--step-ms", "400", "--system", "dgx-h100", "--nodes", "4", "--buckets", "25,100"]


def test_issue_command_runs_and_names_the_fabric_and_algorithm():
    r = run_tool(*ISSUE)
    assert r.returncode == 0, r.stderr
    assert "commcost budget on dgx-h100: 32 GPUs = 4 node(s) x 8" in r.stdout
    assert "(b) ran ring" in r.stdout
    for part in ("(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)"):
        assert part in r.stdout


def test_issue_command_json_uses_the_two_tier_model():
    r = run_tool(*ISSUE, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    # S = 1.3e9 * 2 B = 2.6e9 B, P = 32 = 4 x 8, auto -> ring Simple under NCCL's protocol model
    # (issue 14: across more than 2 nodes the NVLS tree moves 2S per node, 2 x 2.6e9 / 376e9 = 13.83 ms of
    # bandwidth, slower than the ring's 13.40 ms):
    # latency  = 1.4 (ring Simple plateau) x (8.4 launch + 2 (32 - 4) x 3.4 (NVLink Simple steps)
    #            + 2 (4 - 1) x 14 (network Simple steps)) us = 1.4 x 282.8 = 395.92 us
    # bandwidth = 2(31/32) S x max((7/8) / 370e9, 1 / (8 x 47e9)) = 5.0375e9 / 376e9 = 13.398 ms
    assert d["inputs"]["gpus"] == 32
    assert d["allreduce"]["algorithm"] == "ring"
    assert d["allreduce"]["latency_s"] == pytest.approx(395.92e-6)
    assert d["allreduce"]["bandwidth_s"] == pytest.approx(2 * 31 / 32 * 2.6e9 / 376e9)
    assert d["fabric"]["name"] == "dgx-h100" and d["fabric"]["nodes"] == 4
    # no flat-equivalent link: a "B" of 2(P-1)/P S / bandwidth term would be 485 GB/s, above any physical link
    assert d["inputs"]["bandwidth_bytes_per_s"] is None and d["inputs"]["latency_s"] is None
    assert d["inputs"]["comm"]["kind"] == "fabric" and d["inputs"]["comm"]["system"] == "dgx-h100"
    S = 2.6e9
    # (g) keeps the system and adds nodes: 256 GPUs = 32 nodes, still faster than the flat 47 GB/s ring
    row = [x for x in d["scaling"]["rows"] if x["gpus"] == 256][0]
    assert row["total_s"] < 2 * 255 / 256 * S / 47e9


def test_gpus_default_to_nodes_times_gpus_per_node():
    r = run_tool("--params", "1.3", "--step-ms", "400", "--system", "dgx-a100", "--nodes", "2",
                 "--gpus-per-node", "4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"]["gpus"] == 8


def test_without_system_the_drill_numbers_are_unchanged():
    # the drill: 2(P-1)a = 2*31*20 us = 1.24 ms; 2(P-1)/P S/B = 2*31/32*2.6e9/25e9 = 201.5 ms
    r = run_tool("--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400", "--json")
    d = json.loads(r.stdout)
    assert d["allreduce"]["latency_s"] == pytest.approx(1.24e-3)
    assert d["allreduce"]["bandwidth_s"] == pytest.approx(0.2015)
    assert "fabric" not in d and d["allreduce"]["algorithm"] == "ring" and d["allreduce"]["protocol"] is None


@pytest.mark.parametrize("args, message", [
    (ISSUE[:-2] + ["--gpus", "16"], "--gpus 16 does not match --nodes 4 x --gpus-per-node 8 = 32"),
    (["--params", "1", "--step-ms", "1", "--system", "dgx-h900"], "unknown system 'dgx-h900' (valid:"),
    (["--params", "1", "--step-ms", "1", "--system", "dgx-h100", "--bw", "25"], "drop --bw"),
    (["--params", "1", "--step-ms", "1", "--nodes", "2", "--bw", "25", "--latency", "20"], "--nodes needs --system"),
    (["--params", "1", "--step-ms", "1", "--bw", "25", "--latency", "20"], "--gpus is required"),
    (["--params", "1", "--step-ms", "1", "--system", "dgx-h100", "--algorithm", "magic"], "unknown algorithm"),
    (["--params", "1", "--step-ms", "1", "--system", "dgx-a100", "--nodes", "2", "--algorithm", "in_network"],
     "NVLS"),
])
def test_bad_system_input_is_one_line_exit_2(args, message):
    r = run_tool(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
