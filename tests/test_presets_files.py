"""Every preset file loads, every number has a unit in its key and a source."""

from __future__ import annotations

import re

import pytest

from commcost import InputError
from commcost.hardware import load_preset_file
from commcost.presets import fabrics, gpus, preset_entries, system_group, system_topology, systems

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
            assert key.endswith(UNIT_SUFFIXES) or key in ("gpus_per_node", "oversubscription"), \
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
