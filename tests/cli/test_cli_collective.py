"""``commcost collective`` and ``commcost presets`` run as a user runs them."""

from __future__ import annotations

import json

import pytest

from conftest import run_commcost


def ok_json(*args):
    r = run_commcost(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_issue_example_one_size_text():
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--nodes", "4")
    assert r.returncode == 0, r.stderr
    for word in ("ring", "tree", "in_network", "<- used", "busbw"):
        assert word in r.stdout


def test_json_keys_and_numbers_flat_link():
    # flat link, P = 4, B = 10 GB/s, a = 5 us, S = 1e9, ring: T = 2*3*5 us + 2(3/4) 1e9/1e10 = 30 us + 0.15 s
    d = ok_json("collective", "--op", "all_reduce", "--size", "1GB", "--gpus", "4", "--bw", "10",
                "--latency", "5", "--algorithm", "ring")
    assert d["op"] == "all_reduce" and d["gpus"] == 4 and d["algorithm"] == "ring"
    assert d["size_bytes"] == 1e9
    assert d["time_s"] == pytest.approx(0.15003)
    assert d["algbw_bytes_per_s"] == pytest.approx(1e9 / 0.15003)
    assert d["busbw_bytes_per_s"] == pytest.approx(1e9 / 0.15003 * 1.5)
    # on one flat link NCCL's auto has only the ring to choose (tree and NVLS need tiers)
    assert set(d["algorithms"]) == {"ring"}
    assert d["algorithms"]["ring"]["time_s"] == d["time_s"]
    # a what-if by name is priced beside it: halving-doubling, 2 log2(4) steps = 4 * 5 us + 2(3/4) 1e9/1e10
    h = ok_json("collective", "--op", "all_reduce", "--size", "1GB", "--gpus", "4", "--bw", "10",
                "--latency", "5", "--algorithm", "halving_doubling")
    assert set(h["algorithms"]) == {"halving_doubling", "ring"} and h["algorithm"] == "halving_doubling"
    assert h["time_s"] == pytest.approx(20e-6 + 0.15)
    assert "in_network" in d["unavailable"]
    assert d["fabric"]["kind"] == "flat"


def test_json_auto_picks_the_minimum():
    d = ok_json("collective", "--op", "all_reduce", "--size", "64MiB", "--system", "dgx-h100", "--nodes", "2")
    best = min(v["time_s"] for v in d["algorithms"].values())
    assert d["time_s"] == best and d["algorithms"][d["algorithm"]]["time_s"] == best
    assert d["gpus"] == 16 and d["fabric"]["nodes_used"] == 2 and d["fabric"]["name"] == "dgx-h100"


def test_sizes_table_rows():
    d = ok_json("collective", "--op", "all_gather", "--sizes", "8B:8GiB", "--system", "dgx-h100",
                "--nodes", "2", "--algorithm", "auto")
    sizes = [r["size_bytes"] for r in d["rows"]]
    assert sizes[0] == 8 and sizes[-1] == 8 * 2**30 and len(sizes) == 31   # 2^3 .. 2^33
    times = [r["time_s"] for r in d["rows"]]
    assert times == sorted(times)
    r = run_commcost("collective", "--op", "all_gather", "--sizes", "8B:8GiB", "--system", "dgx-h100", "--nodes", "2")
    assert r.returncode == 0 and "algbw and busbw in GB/s" in r.stdout and "8,589,934,592" in r.stdout


def test_custom_two_tier_topology():
    # G = 4, 2 nodes, B_i = 100 GB/s, a_i = 1 us, B_e = 10 GB/s, a_e = 5 us, ring on S = 1 GB:
    # 2[(8-2)*1 + 1*5] us = 22 us, max(1.75e9*(3/4)/1e11, 1.75e9/4e10) = 0.04375 s
    d = ok_json("collective", "--op", "all_reduce", "--size", "1GB", "--gpus-per-node", "4", "--nodes", "2",
                "--intra-bw", "100", "--intra-latency", "1", "--inter-bw", "10", "--inter-latency", "5",
                "--algorithm", "ring")
    assert d["gpus"] == 8
    assert d["time_s"] == pytest.approx(22e-6 + 0.04375)


def test_presets_lists_with_sources():
    r = run_commcost("presets")
    assert r.returncode == 0, r.stderr
    for name in ("dgx-h100", "gb200-nvl72", "nvlink4", "ib_ndr", "efa_v2", "h100-sxm", "mi300x", "seed_nvlink"):
        assert name in r.stdout
    assert r.stdout.count("source:") >= 20
    d = ok_json("presets", "--kind", "system")
    assert set(d) == {"system"} and d["system"]["dgx-h100"]["gpus_per_node"] == 8


@pytest.mark.parametrize("args, message", [
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h900"), "unknown system 'dgx-h900' (valid:"),
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--nodes", "4", "--gpus", "16"),
     "--gpus 16 does not match --nodes 4 x --gpus-per-node 8 = 32"),
    (("--op", "all_reduce", "--sizes", "8B:8XB", "--system", "dgx-h100"), "item '8XB'"),
    (("--op", "all_reduce", "--sizes", "1MiB,,2MiB", "--system", "dgx-h100"), "no empty items"),
    (("--op", "all_reduce", "--sizes", "8GiB:8B", "--system", "dgx-h100"), "MAX must be >= MIN"),
    (("--op", "allreduce2", "--size", "1GiB", "--system", "dgx-h100"), "unknown collective 'allreduce2'"),
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--algorithm", "magic"),
     "unknown algorithm 'magic'"),
    (("--op", "all_gather", "--size", "1GiB", "--system", "dgx-h100", "--algorithm", "tree"),
     "tree is not modelled for all_gather"),
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-a100", "--algorithm", "in_network"), "NVLS"),
    (("--op", "all_reduce", "--size", "1GiB", "--gpus", "8"), "--bw is required"),
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--intra-bw", "100"), "drop --intra-bw"),
    (("--op", "all_reduce", "--size", "1GiB", "--gpus", "1", "--bw", "25", "--latency", "20"), "at least 2 GPUs"),
    (("--op", "all_reduce", "--size", "1GiB", "--gpus-per-node", "4", "--nodes", "2", "--intra-bw", "100",
      "--intra-latency", "1"), "need --inter-bw"),
    (("--op", "all_reduce", "--size", "-5", "--bw", "25", "--latency", "20", "--gpus", "4"), "--size"),
    (("--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--oversubscription", "0.5"),
     "oversubscription must be >= 1"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    r = run_commcost("collective", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr


def test_protocol_is_named_on_presets_and_null_on_flat_links():
    from commcost.comm.algorithms import protocol_costs
    from commcost.comm.systems import system_topology

    d = ok_json("collective", "--op", "all_reduce", "--size", "16MiB", "--system", "dgx-h100", "--nodes", "2")
    fastest = next(iter(protocol_costs("all_reduce", 16 * 2**20, 16, system_topology("dgx-h100", nodes=2),
                                       d["algorithm"])))
    assert d["protocol"] == fastest.value and d["protocol"] in ("ll", "ll128", "simple")
    flat = ok_json("collective", "--op", "all_reduce", "--size", "16MiB", "--gpus", "8", "--bw", "25", "--latency", "20")
    assert flat["protocol"] is None


# --- a custom third tier (pods under a spine) -------------------------------------------------

THREE_TIER = ("--gpus-per-node", "8", "--nodes", "4", "--intra-bw", "300", "--intra-latency", "1",
              "--inter-bw", "25", "--inter-latency", "5", "--pod-nodes", "2", "--spine-oversubscription", "2",
              "--spine-latency", "1")


def test_custom_three_tier_ring_by_hand():
    # 32 GPUs over 2 pods of 2 nodes: latency 2 [28 x 1 + 3 x 5] + 2 x 1 = 88 us; bandwidth
    # 2 x 31/32 x 2^30 B / (8 x 25e9 / 2) = 20.80 ms (the spine halves each NIC's share)
    r = run_commcost("collective", "--op", "all-reduce", *THREE_TIER, "--size", "1GiB", "--algorithm", "ring", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["latency_s"] == pytest.approx(88e-6)
    assert d["bandwidth_s"] == pytest.approx(2 * 31 / 32 * 2 ** 30 / 100e9)
    assert d["fabric"]["pod_nodes"] == 2 and d["fabric"]["spine_oversubscription"] == 2


def test_spine_flags_without_pods_are_refused():
    r = run_commcost("collective", "--op", "all-reduce", *THREE_TIER[:-6], "--spine-latency", "1", "--size", "1GiB")
    assert r.returncode == 2 and "give --pod-nodes too" in r.stderr and "Traceback" not in r.stderr


def test_no_nvls_on_a_system_takes_the_in_network_algorithm_away():
    # dgx-h100, one node, 1 GiB: NVLS is the fastest with it on; with --no-nvls the JSON lists no in_network
    on = json.loads(run_commcost("collective", "--op", "all-reduce", "--system", "dgx-h100", "--size", "1GiB",
                                 "--json").stdout)
    r = run_commcost("collective", "--op", "all-reduce", "--system", "dgx-h100", "--size", "1GiB", "--no-nvls", "--json")
    assert r.returncode == 0, r.stderr
    off = json.loads(r.stdout)
    assert on["algorithm"] == "in_network" and off["algorithm"] != "in_network"
    assert off["fabric"]["in_network"] is None
    r = run_commcost("collective", "--op", "all-reduce", "--bw", "50", "--latency", "5", "--gpus", "8",
                     "--size", "1GiB", "--no-nvls")
    assert r.returncode == 2 and "--no-nvls applies to a --system preset" in r.stderr


def test_system_pods_and_spine_can_be_overridden():
    # dgx-h100 on 64 nodes, ring, 1 GiB: with pods of 32 nodes and a 2:1 spine the cross-node bandwidth
    # W = 8 NICs x B_e / (o o_s) halves; the CLI prices exactly the library's topology with those fields
    # (the formulas are pinned by hand in tests/comm/test_topology_three_tier.py), and the ring gets slower
    import dataclasses

    from commcost import collective_cost
    from commcost.comm.systems import system_group

    topo, P = system_group("dgx-h100", nodes=64)
    lib = collective_cost("all_reduce", 2 ** 30, P, dataclasses.replace(topo, pod_nodes=32, spine_oversubscription=2.0),
                          "ring")
    base = ("collective", "--op", "all-reduce", "--system", "dgx-h100", "--nodes", "64", "--size", "1GiB",
            "--algorithm", "ring", "--json")
    flat = json.loads(run_commcost(*base).stdout)
    r = run_commcost(*base, "--pod-nodes", "32", "--spine-oversubscription", "2")
    assert r.returncode == 0, r.stderr
    three = json.loads(r.stdout)
    assert three["fabric"]["pod_nodes"] == 32 and three["fabric"]["spine_oversubscription"] == 2
    assert three["bandwidth_s"] == pytest.approx(lib.bandwidth_s, rel=1e-12)
    assert three["latency_s"] == pytest.approx(lib.latency_s, rel=1e-12)
    assert three["bandwidth_s"] > 1.5 * flat["bandwidth_s"]
    assert "fitted on one multi-pod table" not in r.stderr   # the user's spine, not the preset's fitted one
    # a spine without pods on a two-tier preset, and third-tier flags on a flat link, are refused in one line
    r = run_commcost(*base, "--spine-oversubscription", "2")
    assert r.returncode == 2 and "has two tiers: give --pod-nodes" in r.stderr
    r = run_commcost("collective", "--op", "all-reduce", "--bw", "50", "--latency", "5", "--gpus", "8",
                     "--size", "1GiB", "--pod-nodes", "2")
    assert r.returncode == 2 and "describe a third tier" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_refusal_after_a_caution_is_one_line():
    # issue 24 item 14: the across-pods caution was printed, then the error: two lines on a refusal
    from conftest import run_commcost
    from conftest import one_error_line

    line = one_error_line(run_commcost("collective", "--op", "send_recv", "--size", "1MiB", "--gpus", "99999",
                                       "--system", "gb200-nvl72"))
    assert "send_recv is between 2 GPUs" in line
    ok = run_commcost("collective", "--op", "all_reduce", "--size", "1MiB", "--gpus", "99999", "--system", "gb200-nvl72")
    assert ok.returncode == 0 and ok.stderr.startswith("commcost: warning: gb200-nvl72 across 174 pods")  # kept
