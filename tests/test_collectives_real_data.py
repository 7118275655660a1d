"""Preset-only predictions against real published nccl-tests all-reduce tables.

Each table under tests/data/nccl_tests/ names its source on its first line (and in
tests/data/SOURCES.md). The full error table is benchmarks/accuracy_nccl_tests.py;
here, the bandwidth-bound end (>= 1 GiB, where per-step latencies no longer matter)
must be within 25% of the measured time for every table whose system matches a preset.
"""

from __future__ import annotations

import json

import pytest

from commcost import collective_cost, system_topology
from commcost.calibrate.nccl_tests import read_nccl_tests
from conftest import DATA

# table -> (preset, nodes, ranks), shared with benchmarks/accuracy_nccl_tests.py
MATCHES = {name: tuple(v) for name, v in
           json.loads((DATA / "nccl_tests" / "preset_matches.json").read_text(encoding="utf-8"))["matched"].items()}


@pytest.mark.parametrize("name", sorted(MATCHES))
def test_large_all_reduce_within_25_percent_of_measured(name):
    preset, nodes, P = MATCHES[name]
    topo = system_topology(preset, nodes=nodes)
    rows = [r for r in read_nccl_tests(DATA / "nccl_tests" / name)[0].rows if r.size_bytes >= 2**30]
    assert rows, f"{name} has no row >= 1 GiB"
    for row in rows:
        predicted = collective_cost("all_reduce", row.size_bytes, P, topo).total_s
        measured = row.out_of_place.time_s
        assert abs(predicted - measured) / measured <= 0.25, (name, row.size_bytes, predicted, measured)


def test_two_nodes_beat_the_network_bottleneck_like_nccl():
    # 2x DGX A100 measured busbw 188-238 GB/s while 8 HDR NICs give 8 * 23.5 = 188 GB/s to a ring:
    # a 2-node tree moves S (not 2(P-1)/P S) over the network, so auto must not pick the ring
    topo = system_topology("dgx-a100", nodes=2)
    c = collective_cost("all_reduce", 8 * 2**30, 16, topo)
    assert c.algorithm.value == "tree"
    assert c.busbw_bytes_per_s > 188e9


@pytest.mark.torch
def test_the_peer_estimator_is_far_off_on_the_same_tables():
    """The issue's claim, checked: torch inductor's estimator, given commcost's own hardware numbers,
    misses these tables by more than 100% (median, rows >= 1 MiB); commcost stays within 35%."""
    pytest.importorskip("torch")
    import statistics
    import sys

    sys.path.insert(0, str(DATA.parent.parent / "benchmarks"))
    from vs_inductor import inductor_estimator

    ours, theirs = [], []
    for name, (preset, nodes, P) in MATCHES.items():
        topo, est = system_topology(preset, nodes=nodes), inductor_estimator(preset)
        for row in read_nccl_tests(DATA / "nccl_tests" / name)[0].rows:
            if row.size_bytes >= 2**20:
                m = row.out_of_place.time_s
                ours.append(abs(collective_cost("all_reduce", row.size_bytes, P, topo).total_s - m) / m)
                theirs.append(abs(est(row.size_bytes, P) - m) / m)
    assert statistics.median(ours) <= 0.35
    assert statistics.median(theirs) > 1.0
