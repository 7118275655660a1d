"""Held-out check inside NVL72 racks: three NVL partitions joined by InfiniBand only (NVIDIA/nccl#1801).

Each partition of 4 or 8 GPUs acts as a node of the gb200-nvl72 preset (NVLink 5 inside, one
400 Gb/s NIC per GPU between), with NVLS off, so the ring and the tree are priced by name. No
commcost constant was chosen on these rows (tests/data/SOURCES.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commcost import collective_cost
from commcost.presets import system_group

TABLE = Path(__file__).resolve().parent.parent / "data" / "nccl_tests" / "busbw_gb200_nvl_partitions_3x4_3x8.md"


def _rows():
    out = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[1].isdigit():
            out.append((int(cells[1]), cells[2], int(cells[3]), float(cells[5]) * 1e9))
    return out


def _predicted_busbw(gpus: int, algorithm: str, size_bytes: int) -> float:
    topo, P = system_group("gb200-nvl72", nodes=3, gpus_per_node=gpus // 3)
    assert P == gpus
    t = collective_cost("all_reduce", size_bytes, P, topo, algorithm).total_s
    return size_bytes / t * 2 * (P - 1) / P  # nccl-tests' all-reduce bus factor 2(P-1)/P


def test_the_table_holds_four_rows():
    assert [(g, a) for g, a, _, _ in _rows()] == [(12, "ring"), (12, "tree"), (24, "ring"), (24, "tree")]


@pytest.mark.parametrize("gpus", [12, 24])
def test_the_ring_across_partitions_is_within_seven_percent(gpus):
    # measured 196.72 / 393.66 GB/s: network-bound at 4 / 8 NICs x ~49 GB/s; predicted 187.8 / 374.8
    (_, _, S, measured), = [r for r in _rows() if r[0] == gpus and r[1] == "ring"]
    assert abs(_predicted_busbw(gpus, "ring", S) / measured - 1) < 0.07


@pytest.mark.parametrize("gpus", [12, 24])
def test_the_tree_on_three_nodes_is_the_known_gap(gpus):
    # a documented miss (docs/fabrics.md 1.4.1): the tree's E(n) = 2S for n > 2 is the large-n limit;
    # at 3 nodes the measured 234.4 / 485.7 GB/s imply about 1.5 S, so the prediction is 36-38% low.
    # Pinned both ways so a change to the tree's bytes shows up here.
    (_, _, S, measured), = [r for r in _rows() if r[0] == gpus and r[1] == "tree"]
    ratio = _predicted_busbw(gpus, "tree", S) / measured
    assert 0.55 < ratio < 0.70
