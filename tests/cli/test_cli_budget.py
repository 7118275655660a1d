"""tools/collective_cost.py as a user runs it: no install, a subprocess."""

import json

import pytest

from conftest import run_commcost, run_tool

DRILL = ["--gpus", "32", "--bw", "25", "--latency", "20"]
FULL = DRILL + ["--params", "1.3", "--step-ms", "400"]


def test_drill_command_1_report():
    r = run_tool(*FULL, "--buckets", "1,8,16,25,100")
    # stderr: the one line on a flat --bw wider than a node (25 GB/s x 8 NICs = 200 GB/s), stdout unchanged
    assert r.returncode == 0 and r.stderr.count("\n") == 1 and "8 x one NIC: 200 GB/s" in r.stderr
    out = r.stdout
    # the text is the contract here: each part's key number with its unit
    assert "2,600,000,000 B" in out and "2,479.55 MiB" in out            # (a)
    assert "1.24 ms" in out and "201.50 ms" in out and "202.74 ms" in out  # (b)
    assert "162.5x" in out
    assert "50.7%" in out and "66.4%" in out                              # (c)
    assert "COMMUNICATION-BOUND" in out and "HIDES" in out               # (d)
    assert "12.7%" in out and "4.5%" in out                               # (e)
    assert "16,000,000 B" in out and "3.277 s" in out                     # (f)
    assert "207.19 ms" in out and "10.20 ms" in out                       # (g) P = 256


def test_drill_command_2_scaling_reaches_2048():
    r = run_tool("--gpus", "256", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400")
    assert r.returncode == 0, r.stderr
    assert "<- this run" in r.stdout and "2048" in r.stdout


@pytest.mark.parametrize("k,ratio", [("1", "2.248"), ("4", "0.562")])
def test_drill_commands_3_and_4_layer_ratio(k, ratio):
    r = run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--grad-accum", k)
    assert r.returncode == 0, r.stderr
    # 12*4096^2 params; comm/compute by hand in tests/analyses/drill/test_layer_ratio.py
    assert "201,326,592" in r.stdout and f"comm / compute   = {ratio}" in r.stdout


def test_json_schema_keys_and_values():
    r = run_tool(*FULL, "--buckets", "1,25", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["message"]["bytes"] == pytest.approx(2.6e9)
    assert d["message"]["mib"] == pytest.approx(2.6e9 / 2**20)
    a = d["allreduce"]
    assert (a["latency_s"], a["bandwidth_s"], a["total_s"]) == pytest.approx((1.24e-3, 0.2015, 0.20274))
    assert a["dominant"] == "bandwidth"
    s = d["step"]
    assert s["compute_s"] == pytest.approx(0.4)
    assert s["comm_fraction"] == pytest.approx(0.20274 / 0.4)
    assert s["efficiency_exposed"] == pytest.approx(0.4 / 0.60274)
    assert s["efficiency_overlapped_ceiling"] == pytest.approx(1.0)
    assert s["backward_window_s"] == pytest.approx(0.8 / 3)
    assert s["label"] == "COMMUNICATION-BOUND"
    f = d["fixes"]
    assert f["grad_accum"]["comm_to_compute"] == pytest.approx(0.20274 / 1.6)
    assert f["zero2"]["comm_to_compute"] == pytest.approx(0.20274 / 0.4)
    assert f["intra_node"]["comm_to_compute"] == pytest.approx(0.0180316667 / 0.4)
    b = d["buckets"]
    assert b["crossover_bytes"] == pytest.approx(16e6)
    assert [row["size_bytes"] for row in b["rows"]] == [2**20, 25 * 2**20]
    assert [row["count"] for row in b["rows"]] == [2480, 100]
    assert b["rows"][1]["total_s"] == pytest.approx(100 * 1.24e-3 + 0.2015)
    rows = d["scaling"]["rows"]
    assert [row["gpus"] for row in rows] == [8, 16, 32, 64, 128, 256]
    assert rows[0]["latency_s"] == pytest.approx(2 * 7 * 20e-6)
    assert rows[0]["bandwidth_s"] == pytest.approx(2 * 7 / 8 * 0.104)


def test_json_layer_keys():
    r = run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--json")
    d = json.loads(r.stdout)
    assert set(d) == {"layer"}
    assert d["layer"]["params"] == 12 * 4096**2
    assert d["layer"]["comm_s"] == pytest.approx(1.24e-3 + 1.9375 * 402653184 / 25e9)
    assert d["layer"]["comm_to_compute"] == pytest.approx(d["layer"]["comm_s"] / d["layer"]["compute_s"])


def test_single_gpu_is_valid_and_says_so():
    r = run_tool("--gpus", "1", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400")
    assert r.returncode == 0 and "no gradient all-reduce" in r.stdout


def test_commcost_budget_subcommand_matches_the_tool():
    a = run_tool(*FULL, "--json")
    b = run_commcost("budget", *FULL, "--json")
    assert b.returncode == 0 and json.loads(a.stdout) == json.loads(b.stdout)


def test_help_works():
    r = run_tool("--help")
    assert r.returncode == 0 and "--buckets" in r.stdout


@pytest.mark.parametrize("args,flag", [
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "-4", "--bw", "25", "--latency", "20", "--params", "1", "--step-ms", "1"], "--gpus"),
    (["--gpus", "2.5", "--bw", "25", "--latency", "20", "--params", "1", "--step-ms", "1"], "--gpus"),
    (DRILL[:2] + ["--bw", "0", "--latency", "20", "--params", "1", "--step-ms", "1"], "--bw"),
    (DRILL[:2] + ["--bw", "-25", "--latency", "20", "--params", "1", "--step-ms", "1"], "--bw"),
    (DRILL[:2] + ["--bw", "nan", "--latency", "20", "--params", "1", "--step-ms", "1"], "--bw"),
    (DRILL[:2] + ["--bw", "inf", "--latency", "20", "--params", "1", "--step-ms", "1"], "--bw"),
    (DRILL[:4] + ["--latency", "0", "--params", "1", "--step-ms", "1"], "--latency"),
    (DRILL[:4] + ["--latency", "-1", "--params", "1", "--step-ms", "1"], "--latency"),
    (DRILL + ["--params", "0", "--step-ms", "1"], "--params"),
    (DRILL + ["--params", "NaN", "--step-ms", "1"], "--params"),
    (DRILL + ["--params", "1", "--step-ms", "0"], "--step-ms"),
    (DRILL + ["--params", "1", "--step-ms", "-400"], "--step-ms"),
    (FULL + ["--buckets", "1,,x"], "--buckets"),
    (FULL + ["--buckets=-5"], "--buckets"),
    (FULL + ["--buckets="], "--buckets"),
    (FULL + ["--buckets", "1,x"], "--buckets"),
    (FULL + ["--dtype", "int3"], "dtype"),
    (FULL + ["--grad-accum", "0"], "--grad-accum"),
    (FULL + ["--backward-fraction", "1.5"], "--backward-fraction"),
    (DRILL + ["--layer-ratio"], "--hidden"),
    (DRILL + ["--layer-ratio", "--hidden", "4096"], "--seq"),
    (DRILL + ["--params", "1.3"], "--step-ms"),
    (DRILL, "--params"),
    (["--gpus", "32", "--latency", "20", "--params", "1", "--step-ms", "1"], "--bw"),
    (FULL + ["--no-such-flag"], "--no-such-flag"),
])
def test_bad_input_is_one_line_and_exit_2(args, flag):
    r = run_tool(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and flag in lines[0]
