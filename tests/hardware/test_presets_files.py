"""Every preset file loads, every number has a unit in its key and a source."""

from __future__ import annotations

import re

import pytest

from commcost import InputError
from commcost.hardware import load_preset_file
from commcost import collective_cost
from commcost.comm.collectives import Algorithm, Collective
from commcost.hardware.registry import fabrics, gpus, preset_entries, systems
from commcost.comm.systems import system_group, system_topology

UNIT_SUFFIXES = ("_bytes", "_bytes_per_s", "_flops_per_s", "_s")


def numbers(entry: dict):
    return {k: v for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


@pytest.mark.parametrize("file_name", ["gpus.json", "fabrics.json", "systems.json"])
def test_every_number_has_a_unit_in_its_key_and_every_entry_a_source(file_name):
    table = load_preset_file(file_name)
    assert "_about" in table
    for name, entry in table.items():
        if name.startswith("_"):
            continue
        assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name), name
        assert entry.get("source"), f"{file_name}:{name} has no source"
        for key in numbers(entry):
            assert key.endswith(UNIT_SUFFIXES) or key in ("gpus_per_node", "oversubscription", "full_bandwidth_nodes", "slowdown_per_node_doubling",
                                              "nvls_channels_one_node", "nvls_channels_more_nodes", "pod_nodes",
                                              "spine_oversubscription", "nics_per_gpu", "unlinked_peers"), \
                f"{file_name}:{name}.{key} has no unit in its key"


def test_fabrics_say_direction_and_where_achievable_comes_from():
    for name, f in fabrics().items():
        assert f["tier"] in ("intra", "inter")
        assert "direction" in f["direction"] or "per direction" in f["direction"], name
        assert f["achievable_source"] and f["latency_source"]
        assert 0 < f["achievable_bandwidth_bytes_per_s"] <= f["line_bandwidth_bytes_per_s"], name
        if "in_network_bandwidth_bytes_per_s" in f:
            assert f["in_network_source"] and f["in_network_step_latency_s"] >= 0


def test_gpus_are_dense_flops():
    # the datasheet's sparse figure is twice the dense one; the H100 SXM dense bf16 is 989.4 TFLOP/s
    assert gpus()["h100-sxm"]["dense_bf16_flops_per_s"] == 989.4e12
    assert set(gpus()) >= {"a100-sxm4-80gb", "h100-sxm", "h200-sxm", "b200", "mi300x"}


def test_systems_refer_to_known_gpus_and_fabrics():
    for name, s in systems().items():
        assert s["gpu"] in gpus(), name
        assert fabrics()[s["intra_fabric"]]["tier"] == "intra"
        assert fabrics()[s["inter_fabric"]]["tier"] == "inter"
        system_topology(name, nodes=2)  # builds


def test_dgx_h100_topology_numbers():
    t = system_topology("dgx-h100", nodes=4)
    # nvlink4 achievable 370 GB/s (NCCL topo.h), NDR 47 GB/s per NIC (nccl-tests#290), NVLS 272 GB/s
    assert (t.gpus_per_node, t.nodes) == (8, 4)
    assert t.intra.bandwidth_bytes_per_s == 370e9 and t.inter.bandwidth_bytes_per_s == 47e9
    assert t.in_network is not None and t.in_network.bandwidth_bytes_per_s == 272e9
    assert system_topology("dgx-a100").in_network is None


def test_seed_system_is_the_seed():
    t = system_topology("seed-scaling", nodes=2)
    assert (t.intra.bandwidth_bytes_per_s, t.intra.latency_s) == (600e9, 20e-6)
    assert (t.inter.bandwidth_bytes_per_s, t.inter.latency_s) == (25e9, 50e-6)
    assert t.base_latency_s == 0


def test_system_group_defaults_and_mismatch():
    assert system_group("dgx-h100", nodes=4)[1] == 32          # 4 x 8
    assert system_group("dgx-h100", gpus=12)[0].nodes == 2     # ceil(12/8)
    assert system_group("dgx-h100")[1] == 8                    # one node
    assert system_group("dgx-h100", nodes=2, gpus_per_node=4)[1] == 8
    with pytest.raises(InputError, match=r"--gpus 16 does not match --nodes 4 x --gpus-per-node 8 = 32"):
        system_group("dgx-h100", nodes=4, gpus=16)
    with pytest.raises(InputError, match=r"unknown system 'dgx-h900' \(valid: .*dgx-h100"):
        system_group("dgx-h900")
    with pytest.raises(InputError, match="has 8 GPUs per node"):
        system_topology("dgx-h100", gpus_per_node=16)


def test_listing_has_every_preset_with_a_source():
    entries = preset_entries()
    assert {e.kind for e in entries} == {"gpu", "fabric", "system"}
    assert len(entries) == len(gpus()) + len(fabrics()) + len(systems())
    assert all(e.source for e in entries)


NEW_SYSTEMS = ("mi300x-roce", "mi325x-roce", "aws-p4d", "aws-p5e", "aws-p5en", "aws-p6-b200", "gcp-a3-mega",
               "gcp-a3-high", "azure-nd-h100-v5", "pcie-l40s", "pcie-a40")


def test_issue_14_presets_exist_and_say_where_numbers_come_from():
    assert set(NEW_SYSTEMS) <= set(systems())
    for name in NEW_SYSTEMS:
        s = systems()[name]
        assert s["source"] and s["protocols_source"], name
        inter = fabrics()[s["inter_fabric"]]
        # a number not taken from a measurement or a vendor figure says so
        assert inter["achievable_source"] and inter["latency_source"], name


def test_new_fabric_numbers_by_hand():
    # p4d: 400 Gbps EFA / 8 GPUs = 50 Gb/s = 6.25 GB/s per GPU per direction
    assert fabrics()["efa_v1"]["line_bandwidth_bytes_per_s"] == 6.25e9
    # A3 Mega: 8 x 200 Gb/s for 8 GPUs = 25 GB/s per GPU; A3 High: 4 x 200 Gb/s = 12.5 GB/s per GPU
    assert fabrics()["tcpxo"]["line_bandwidth_bytes_per_s"] == 25e9
    assert fabrics()["tcpx"]["line_bandwidth_bytes_per_s"] == 12.5e9
    # MI300X: 7 links x 64 GB/s each way = 448 GB/s per direction
    assert fabrics()["infinity_fabric_mi300"]["line_bandwidth_bytes_per_s"] == 448e9
    # PCIe Gen4 x16: NCCL's Gen3 x16 12 GB/s, x2
    assert fabrics()["pcie_gen4"]["achievable_bandwidth_bytes_per_s"] == 2 * 12e9
    # PCIe-only and AMD nodes have no in-switch reduction
    for name in ("pcie-l40s", "pcie-a40", "mi300x-roce"):
        assert system_topology(name).in_network is None


def test_part_of_a_node_is_priced_on_the_gpus_used():
    # nccl-tests on 4 of a DGX A100's 8 GPUs: one node, 4 ranks, the ring over 4 GPUs, Simple at its one-node
    # reach e_s = 350/370 (RING_SIMPLE_ONE_NODE_EFFICIENCY): bandwidth term 2 (3/4) S / (240e9 x 350/370)
    # = 1,610,612,736 / 227.03e9 = 7,094.4 us
    topo, P = system_group("dgx-a100", nodes=1, gpus=4)
    assert (P, topo.nodes) == (4, 1)
    from commcost import collective_cost

    c = collective_cost("all_reduce", 2 ** 30, P, topo, "ring")
    assert c.bandwidth_s == pytest.approx(2 * 3 / 4 * 2 ** 30 / (240e9 * 350 / 370))
    assert c.bandwidth_s == pytest.approx(7_094.4e-6, rel=1e-4)
    # 12 GPUs on 2 nodes packs 8 + 4: accepted
    assert system_group("dgx-a100", nodes=2, gpus=12)[1] == 12
    # 16 GPUs cannot span 4 nodes when packed (they fill 2): refused, with the arithmetic and the way out
    with pytest.raises(InputError, match=r"packs onto ceil\(16/8\) = 2 node\(s\); to spread it, give --gpus-per-node 4"):
        system_group("dgx-h100", nodes=4, gpus=16)


def test_pcie_nodes_run_without_ll128():
    # NCCL enables LL128 only over NVLink: a PCIe-only node prices ring with LL and Simple only
    from commcost.comm.algorithms import protocol_costs
    from commcost.comm.protocols import Protocol

    pcie = protocol_costs("all_reduce", 2 ** 24, 16, system_topology("pcie-l40s", nodes=2), "ring")
    assert set(pcie) == {Protocol.LL, Protocol.SIMPLE}
    nvl = protocol_costs("all_reduce", 2 ** 24, 16, system_topology("dgx-a100", nodes=2), "ring")
    assert Protocol.LL128 in nvl


def test_export_variants_are_their_chip_with_nvlink_cut():
    # A800 = A100 SXM4 80GB and H800 = H100 SXM5 with 8 NVLinks instead of 12 / 18 (400 GB/s bidirectional)
    g = gpus()
    for variant, chip in (("a800-sxm4-80gb", "a100-sxm4-80gb"), ("h800-sxm", "h100-sxm")):
        for key in ("dense_bf16_flops_per_s", "memory_bytes", "memory_bandwidth_bytes_per_s", "host_link_bytes_per_s"):
            assert g[variant][key] == g[chip][key], (variant, key)
    # 400 GB/s bidirectional = 200 GB/s per direction = 8 links x 25 GB/s
    assert fabrics()["nvlink3_a800"]["line_bandwidth_bytes_per_s"] == 8 * 25e9
    assert fabrics()["nvlink4_h800"]["line_bandwidth_bytes_per_s"] == 8 * 25e9


def test_dgx_a800_and_hgx_h800_topology_numbers():
    a = system_topology("dgx-a800", nodes=2)
    # NCCL topo.h: SM80 20.0 GB/s x 8 links = 160; HDR 200 Gb/s port: 23.5 GB/s (as dgx-a100); no NVLS on NVSwitch gen2
    assert (a.gpus_per_node, a.intra.bandwidth_bytes_per_s, a.inter.bandwidth_bytes_per_s) == (8, 160e9, 23.5e9)
    assert a.in_network is None
    h = system_topology("hgx-h800", nodes=2)
    # SM90 20.6 GB/s x 8 links = 164.8; NVLS algbw 215 / (2 x 7/8) = 122.857 -> 122.9 GB/s (NVIDIA/nccl#1374)
    assert h.intra.bandwidth_bytes_per_s == pytest.approx(8 * 20.6e9)
    assert h.in_network is not None and h.in_network.bandwidth_bytes_per_s == pytest.approx(215e9 / 1.75, rel=1e-3)
    assert h.inter.bandwidth_bytes_per_s == 23.5e9


def test_dgx_a800_one_node_ring_all_reduce_by_hand():
    # P = 8, S = 1 GiB, ring Simple: t_0 8.4 + 14 steps x 3.4 us = 56.0 us (NCCL ring Simple on NVLink);
    # 2(P-1)/P S / (B e_s) = 1.75 x 1,073,741,824 / (160e9 x 350/370) = 11,744.0 x 370/350 = 12,415.1 us;
    # bus bandwidth 1.75 S / t_bw = 151.4 GB/s (the public 1 GiB A800 run in fabrics.json: 152), 2/3 of
    # dgx-a100's (12 links)
    S = 2**30
    c = collective_cost(Collective.ALL_REDUCE, S, 8, system_topology("dgx-a800"), "ring")
    assert c.latency_s == pytest.approx(56.0e-6)
    assert c.bandwidth_s == pytest.approx(12_415.1e-6, rel=1e-4)
    assert c.bandwidth_s == pytest.approx(1.75 * 2**30 / (160e9 * 350 / 370))  # the hand value exactly
    ref = collective_cost(Collective.ALL_REDUCE, S, 8, system_topology("dgx-a100"), "ring")
    assert c.bandwidth_s / ref.bandwidth_s == pytest.approx(1.5)


def test_hgx_h800_one_node_all_reduce_takes_nvls_by_hand():
    # ring Simple: 56.0 us + 1.75 x 2**30 / (164.8e9 x 350/370) = 56.0 + 11,401.99 x 370/350 = 56.0 + 12,053.5
    # = 12,109.5 us
    # NVLS: 2 x 11.5 = 23 us + (S + L) / 122.9e9, fill L = 16 channels x 128 KiB x 8 = 16 MiB:
    #       (1,073,741,824 + 16,777,216) / 122.9e9 = 8,873.2 us -> 8,896.2 us: NVLS wins (as on H800 NCCL's default)
    S, topo = 2**30, system_topology("hgx-h800")
    ring = collective_cost(Collective.ALL_REDUCE, S, 8, topo, "ring")
    assert ring.total_s == pytest.approx(12_109.5e-6, rel=1e-4)
    best = collective_cost(Collective.ALL_REDUCE, S, 8, topo)
    assert best.algorithm is Algorithm.IN_NETWORK
    assert best.total_s == pytest.approx(8_896.2e-6, rel=1e-4)
    # NVLS off (NCCL_NVLS_ENABLE=0): the ring
    off = collective_cost(Collective.ALL_REDUCE, S, 8, system_topology("hgx-h800", nvls=False))
    assert off.algorithm is not Algorithm.IN_NETWORK


def test_cloud_presets_for_the_collective_tables_by_hand():
    # Azure ND MI300X v5: MI300X's Infinity Fabric (315 GB/s achievable), one NDR port per GPU (47 GB/s), no NVLS
    t = system_topology("azure-nd-mi300x-v5", nodes=2)
    assert (t.intra.bandwidth_bytes_per_s, t.inter.bandwidth_bytes_per_s, t.nics_per_gpu) == (315e9, 47e9, 1)
    assert t.in_network is None
    # AWS p6-b300: 16 x 400 Gb/s EFA for 8 GPUs = 2 ports per GPU; efa_v4 reaches 47 GB/s a port: 2 x 47 = 94 GB/s
    t = system_topology("aws-p6-b300", nodes=2)
    assert (t.nics_per_gpu, t.inter.bandwidth_bytes_per_s) == (2, 94e9)
    assert systems()["aws-p6-b300"]["gpu"] == "b300" and systems()["aws-p6-b300"]["nics_per_gpu_source"]


def test_more_cloud_presets_by_hand():
    # Azure ND H200 v5: ND H100 v5's fabric (8 x NDR, 47 GB/s a port) and scale rule with the H200
    t = system_topology("azure-nd-h200-v5", nodes=2)
    assert systems()["azure-nd-h200-v5"]["gpu"] == "h200-sxm" and t.inter.bandwidth_bytes_per_s == 47e9
    assert systems()["azure-nd-h200-v5"]["slowdown_per_node_doubling"] == systems()["azure-nd-h100-v5"]["slowdown_per_node_doubling"]
    # OCI BM.GPU.H100.8: 16 x 200 Gb/s RoCE for 8 GPUs = 2 ports of 23.5 GB/s achievable = 47 GB/s a GPU
    t = system_topology("oci-bm-gpu-h100", nodes=2)
    assert (t.nics_per_gpu, t.inter.bandwidth_bytes_per_s) == (2, 47e9)
    # AWS p6e-gb200: 28.8 Tbps EFAv4 / 72 GPUs = 400 Gb/s, one efa_v4 port (47 GB/s), 72 GPUs in one NVLink domain
    t = system_topology("aws-p6e-gb200", nodes=2)
    assert (t.gpus_per_node, t.nics_per_gpu, t.inter.bandwidth_bytes_per_s) == (72, 1, 47e9)


def test_efa_v4_numbers_by_hand():
    # achievable: one GPU per node on 8 p6-b300 nodes, all-to-all bus bandwidth (n-1)/n S / t = what each GPU
    # sends over the network = 94 GB/s ('flat ~94 GB/s'), through two 400 Gb/s ports: 94 / 2 = 47 GB/s a port,
    # 47 / 50 = 94% of line
    efa = fabrics()["efa_v4"]
    assert efa["achievable_bandwidth_bytes_per_s"] == 94e9 / 2
    assert efa["achievable_bandwidth_bytes_per_s"] / efa["line_bandwidth_bytes_per_s"] == pytest.approx(0.94)
    # the preset then gives that run back: 8 ranks, 1 GPU a node, 8 GiB; the network term
    # (P - 1)/P S / (2 x 47e9) = 7/8 x 8,589,934,592 / 94e9 = 79,958 us; bus bandwidth 7/8 S / t = 94 GB/s
    topo, P = system_group("aws-p6-b300", nodes=8, gpus=8, gpus_per_node=1)
    S = 8 * 2 ** 30
    c = collective_cost("all_to_all", S, P, topo)
    assert c.bandwidth_s == pytest.approx(7 / 8 * S / 94e9)
    assert 7 / 8 * S / c.total_s / 1e9 == pytest.approx(94, rel=0.005)
    # step latency: 2x p6-b200, all-reduce of 8 B on 16 ranks takes 50.6-57.1 us for 8-256 B (median 55.1 us,
    # dstack#3961). The preset prices it as a tree under LL (NCCL's Tree LL terms over the ring-LL128 anchors):
    #   base 8.4 x 6.8/8.4 = 6.8 us; NVLink step 1.9 x 0.6/1.9 = 0.6 us; EFA step 16 x 5.0/4.0 = 20 us
    #   6.8 + 2 x ((8 - 1) x 0.6 + log2(2) x 20) = 6.8 + 2 x (4.2 + 20) = 55.2 us (+ 8 B of bandwidth, nothing)
    assert efa["step_latency_s"] == 16e-6
    topo, P = system_group("aws-p6-b200", nodes=2, gpus=16)
    c = collective_cost("all_reduce", 8, P, topo)
    assert c.algorithm is Algorithm.TREE
    assert c.latency_s == pytest.approx(55.2e-6)


UNIT_WORDS = ("bytes", "flops_per_s", "_s", "tokens", "params", "accesses", "copies", "gathers")
"""A number's key (or the key of the table holding it) names its unit: bytes, FLOP/s, seconds, tokens, parameters,
HBM element accesses, copies of a tensor, collectives issued."""

DIMENSIONLESS = frozenset({
    "sustained", "auto_sustained", "gemm_efficiency", "frontier_mfu", "attention", "triton_slowdown_vs_fa2",
    "sms", "tile_m", "tile_n", "k_overhead", "head_dim_half", "vp_min_pp",
    "gpus_per_node", "oversubscription", "full_bandwidth_nodes", "slowdown_per_node_doubling", "nvls_channels_one_node",
    "nvls_channels_more_nodes", "pod_nodes", "spine_oversubscription", "nics_per_gpu", "unlinked_peers",
    "layouts",   # a stack's ZeRO stages (0-3) are names of stages, not quantities
})
"""Keys whose numbers are fractions, ratios or counts of a named thing (SMs, elements of a tile, pipeline stages)."""


def unitless_numbers(node, path: tuple[str, ...] = ()) -> list[str]:
    """The paths of numbers in ``node`` whose key and every enclosing key name no unit (:data:`UNIT_WORDS`) and
    are not :data:`DIMENSIONLESS`."""
    if isinstance(node, dict):
        return [p for k, v in node.items() if not k.startswith("_") for p in unitless_numbers(v, (*path, k))]
    if isinstance(node, list):
        return [p for v in node for p in unitless_numbers(v, path)]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return []
    named = any(w in k for k in path for w in UNIT_WORDS) or DIMENSIONLESS.intersection(path)
    return [] if named else [".".join(path)]


def unsourced_numbers(node, path: tuple[str, ...] = (), sourced: bool = False) -> list[str]:
    """The paths of numbers in ``node`` with no ``source`` in their own table or any enclosing one."""
    if isinstance(node, dict):
        sourced = sourced or bool(node.get("source"))
        return [p for k, v in node.items() if not k.startswith("_") for p in unsourced_numbers(v, (*path, k), sourced)]
    if isinstance(node, list):
        return [p for v in node for p in unsourced_numbers(v, path, sourced)]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or sourced:
        return []
    return [".".join(path)]


@pytest.mark.parametrize("file_name", ["gpus.json", "fabrics.json", "systems.json", "kernels.json", "compute.json",
                                       "stacks.json"])
def test_every_number_names_its_unit_and_has_a_source(file_name):
    table = load_preset_file(file_name)
    assert not unitless_numbers(table), unitless_numbers(table)
    if file_name != "stacks.json":   # a past release sources each key it changes (tests/workload/test_stacks.py)
        assert not unsourced_numbers(table), unsourced_numbers(table)


def test_the_unit_and_source_checks_fail_on_a_made_up_table():
    table = {"peak": {"h100": {"bf16": 1e15}}, "fast_s": {"a": 2.0}, "ok_bytes": 3, "sms": 132,
             "rows": {"x": {"source": "somewhere", "k_bytes": 1}}}
    assert unitless_numbers(table) == ["peak.h100.bf16"]
    assert unsourced_numbers(table) == ["peak.h100.bf16", "fast_s.a", "ok_bytes", "sms"]
