"""Issue 14's accuracy targets on real tables, tuning vs held-out (tests/data/nccl_tests/split.json).

The full table is ``python benchmarks/accuracy_nccl_tests.py``; this runs the same scoring
(benchmarks/accuracy_nccl_tests.score, without torch) and holds the pooled figures under bounds.
"""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from conftest import DATA, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy_nccl_tests import (MID_MAX_BYTES, band_leave_one_system_out, derive_issue20_constants, score,  # noqa: E402
                                 score_leave_one_system_out)

SPLIT = json.loads((DATA / "nccl_tests" / "split.json").read_text(encoding="utf-8"))
MATCHES = json.loads((DATA / "nccl_tests" / "preset_matches.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows():
    return score(with_inductor=False)


def test_every_matched_table_is_on_exactly_one_side_with_a_reason():
    sides = {side: [t for e in SPLIT[side].values() for t in e["tables"]] for side in ("tuning", "heldout")}
    every = (set(MATCHES["matched"]) | set(MATCHES["busbw_tables"]) | set(MATCHES["scaling_tables"])
             | set(MATCHES["busbw_grid_tables"]) | set(MATCHES["scaling_grid_tables"]))
    assert sorted(sides["tuning"] + sides["heldout"]) == sorted(every)
    assert all(e["reason"] for side in ("tuning", "heldout") for e in SPLIT[side].values())
    # about a third of the systems held out, a little more since new systems join the held-out side when no
    # constant is chosen on them: 15 of 30 (Voltage Park H100 4x8 and GCP A3 Ultra joined it after issue 20, then
    # the H100 10x8 cluster01, AWS p6-b300 and Together B200 systems with all-gather/reduce-scatter/all-to-all)
    n_tune, n_held = len(SPLIT["tuning"]), len(SPLIT["heldout"])
    assert 0.3 <= n_held / (n_tune + n_held) <= 0.5


def _pooled(rows, side, op="all_reduce"):
    sub = [r for r in rows if r["split"] == side and r["op"] == op]
    return (statistics.median(abs(r["err"]) for r in sub),
            statistics.median(abs(r["err"]) for r in sub if r["S"] <= MID_MAX_BYTES),
            sum(r["err"] < 0 for r in sub) / len(sub),
            sum(r["in_band"] for r in sub) / len(sub), len(sub))


def test_held_out_meets_the_issue_targets(rows):
    # all-reduce rows; measured at this commit: 6.4% over 123 rows (74 before issue 20, less the A3 Mega table's
    # 14 that moved to tuning, plus the held-out MI355X AINIC system's 2-node 15 and 1-node 11, OCI GB200's 8,
    # the Vultr B200 2-node table's 15 and Voltage Park's 4-node 14), 8.0% over 1-64 MiB, 55% too fast, band 85%
    median, mid, fast, band, n = _pooled(rows, "heldout")
    assert n == 123
    assert median <= 0.15
    assert mid <= 0.25
    assert 0.35 <= fast <= 0.65   # no systematic sign (issue 14 found 153 of 163 = 94% too fast)
    assert band >= 0.80


def test_tuning_set_figures(rows):
    # all-reduce rows; measured at this commit: 6.3% over 216 rows (188 + issue 20's 14 rows of OCI MI355X
    # and GB300 + the A3 Mega table's 14), 17.1% over 1-64 MiB, 64% too fast, band 87%
    median, mid, fast, band, n = _pooled(rows, "tuning")
    assert n == 216
    assert median <= 0.10
    assert mid <= 0.20
    assert fast <= 0.65
    assert band >= 0.85


@pytest.fixture(scope="module")
def loso_rows():
    return score_leave_one_system_out()


def _median_fast(rows, op, scope):
    sub = [r for r in rows if r["op"] == op and r["scope"] == scope]
    return statistics.median(abs(r["err"]) for r in sub), sum(r["err"] < 0 for r in sub) / len(sub), len(sub)


# the all-to-all tables issue 20's target was set on (MI355X on OCI and on AINIC, OCI GB200 and GB300 racks)
ISSUE20_A2A = ("alltoall_mi355x_", "alltoall_gb300_oci_", "alltoall_gb200_oci_")


def test_all_to_all_leave_one_system_out_meets_issue_20(loso_rows):
    # measured at this commit on issue 20's tables: across nodes 2.7% over 25 rows, 60% too fast (the held-out OCI
    # GB200 racks, on RoCE: 2 racks -4%, 3 racks -1%, with the fan-in counted in partner ports per NIC, n - 1; the
    # tuning OCI GB300 2 racks -75% now that an all-to-all drives both of its GPU's ports (-49% on one),
    # unexplained: docs/fabrics.md); inside one node 6.4% over 22 (the held-out MI355X AINIC
    # 1-node table's 8 rows of 1-128 MiB: 16.1%, all too fast), 64% too fast
    mine = [r for r in loso_rows if r["table"].startswith(ISSUE20_A2A)]
    median, fast, n = _median_fast(mine, "all_to_all", "multi_node")
    assert n == 25 and median <= 0.10 and 0.35 <= fast <= 0.65
    median, fast, n = _median_fast(mine, "all_to_all", "one_node")
    assert n == 22 and median <= 0.10


def test_all_to_all_tables_found_after_issue_20_are_held_out_and_too_fast_across_nodes(loso_rows):
    # Held-out all-to-all tables added after issue 20 (no constant chosen on them): Vultr B200 1x8 and 2x8, the
    # H100 cluster01's 1x8, 2x8 and 10 nodes x 1, 4, 8 GPUs, AWS p6-b300 2x8. Inside one node they stay close: 8.4%
    # over 25 rows. Across nodes 7.5% over 53 rows (8.4% with efa_v4 at its assumed 40 GB/s a port; 36% before the
    # fan-in became RoCE's only and an all-to-all drove both ports of a GPU), but 91% too fast: H100 10x8 -2%, 10x4
    # -4%, 10x1 -5% median (each GPU's NIC at 45-46 GB/s against ib_ndr's 47 from 256 MiB; 32-64 MiB 8-28% fast),
    # 2x8 +4%; p6-b300 2x8 -1% (-31..+8%; +17% at the assumed 40 GB/s, efa_v4's 47 now read off an 8-node p6-b300
    # run with one GPU a node); Vultr B200 2x8 -52% (22.6 GB/s a GPU across nodes, half a NIC, where the H100 pair
    # of the same shape reaches 49 GB/s)
    new = [r for r in loso_rows if r["op"] == "all_to_all" and not r["table"].startswith(ISSUE20_A2A)]
    assert {r["split"] for r in new} == {"heldout"}
    median, _, n = _median_fast(new, "all_to_all", "one_node")
    assert n == 25 and median <= 0.10
    median, fast, n = _median_fast(new, "all_to_all", "multi_node")
    assert n == 53 and median <= 0.10
    assert fast > 0.65  # the sign gap is recorded, not hidden: a model change that closes it updates this


def test_all_gather_across_nodes(rows, loso_rows):
    # ten tables (A3 High TCPX, two A3 Mega TCPXO runs, three GCP A4 B200 runs: tuning; A4X Max, Vultr B200 2x8
    # on InfiniBand, Voltage Park H100 4x8, GCP A3 Ultra H200 2x8: held out). With the shipped presets: 8.4% over
    # 136 rows, 51% too fast (the Vultr table alone: 17.4%, every row fast; Voltage Park 11.3%, its 1-8 GiB rows
    # 7-12% fast as its all-reduce's are; the GKE A3 Mega run 32-58% fast at 1-64 MiB, where the dstack run the
    # tcpxo step was read off is 1-9% slow; A3 Ultra 2-41% slow at 1-64 MiB). Leaving a system out also takes back
    # the fabric numbers read off its own table (tcpx/tcpxo bandwidth and step): 12.7%, 49% too fast (the TCPX(O)
    # systems scored with the old assumptions)
    # Added after: the held-out H100 cluster01 10x8 (7.8%, 1-8 GiB 2-12% fast), AWS p6-b300 2x8 (-5..+75%, median
    # +30%: +21..+143% with efa_v4's assumed 40 GB/s a port and 23 us step; at 47 GB/s and 16 us its 256 MiB and
    # 8 GiB rows are within 8%, its 1 GiB row +50% and 1-16 MiB +30..+75%, the table's flat 150-160 us) and
    # Together's B200 cluster at 32 GiB on 2-64 nodes (-1..+9%, commcost's ring latency growing with 511 steps
    # where the measured busbw stays flat), and the cluster01 runs with 1 and 4 GPUs on each of 10 nodes (+1% and
    # +11%): 7.6% over 177 rows, 45% too fast; leaving each system out 11.2%, 44% (efa_v4 at 40 GB/s and 23 us:
    # 8.0%, 45%; 11.6%, 43%).
    sub = [r for r in rows if r["op"] == "all_gather" and r["scope"] == "multi_node"]
    assert len(sub) == 177
    assert statistics.median(abs(r["err"]) for r in sub) <= 0.10
    assert 0.35 <= sum(r["err"] < 0 for r in sub) / len(sub) <= 0.65
    median, fast, n = _median_fast(loso_rows, "all_gather", "multi_node")
    assert n == 177 and median <= 0.20


def test_busbw_grid_rows_by_hand():
    # AWS p6-b300 2x8 all-to-all at 8 GiB: busbw 179.5 GB/s, bus factor (n-1)/n = 15/16:
    # t = 15/16 x 8589934592 / 179.5e9 = 44.864 ms; at 64 KiB (1.4 GB/s): 15/16 x 65536 / 1.4e9 = 43.89 us
    from real_tables import _grid_rows

    op, rows = _grid_rows(DATA / "nccl_tests" / "busbw_alltoall_b300_aws_p6_2x8.md", 2, 16)
    assert op == "all_to_all" and [r.size_bytes for r in rows] == [2**16, 2**20, 2**24, 2**28, 2**30, 2**33]
    assert rows[-1].time_s == pytest.approx(44.864e-3, rel=1e-4)
    assert rows[0].time_s == pytest.approx(43.89e-6, rel=1e-3)


def test_scaling_grid_rows_by_hand():
    # Together B200 all-gather at 32 GiB, Ring column: 64n (512) 380.15 GB/s busbw, bus factor 511/512:
    # t = 511/512 x 34359738368 / 380.15e9 = 90.208 ms; 1n (8) 676.54: 7/8 x 2**35 / 676.54e9 = 44.439 ms
    from real_tables import _scaling_grid_rows

    rows = _scaling_grid_rows(DATA / "nccl_tests" / "busbw_allgather_b200_together_scaling_32GiB.md", 2 ** 35,
                              "all_gather", "Ring")
    assert [(r.nodes, r.gpus) for r in rows] == [(1, 8), (2, 16), (4, 32), (8, 64), (16, 128), (32, 256), (64, 512)]
    assert rows[-1].time_s == pytest.approx(90.208e-3, rel=1e-4)
    assert rows[0].time_s == pytest.approx(44.439e-3, rel=1e-4)


def test_leaving_a_system_out_changes_only_the_constants_it_gave():
    from real_tables import load_tables

    tables = [t for t in load_tables() if t.split == "tuning"]
    every = derive_issue20_constants(tables)
    # by hand, 16 GiB rows, busbw (P-1)/P S / t over B_i: MI355X 1x8 7/8 * 2**34 / 41.626e-3 / 408e9 = 0.8851,
    # GB300 1x4 3/4 * 2**34 / 20.527e-3 / 720e9 = 0.8718, 2x4 (7/8) / 21.943e-3 ... = 0.9515,
    # 16x4 (63/64) / 25.357e-3 ... = 0.9263; median (0.8851 + 0.9263)/2 = 0.9057
    assert every["P2P_EFFICIENCY"] == pytest.approx(0.9057, rel=1e-3)
    # c, NIC rate over the GPU's ports (one of 47 GB/s on MI355X), tables on more than 2 nodes of a RoCE fabric
    # only (Topology.incast_rate_cut): OCI MI355X 4 x 8,
    # 0.75 * 2**34 / 328.749e-3 / 47e9 = 0.8339, c = (1/0.8339 - 1) / log2(3) = 0.19918 / 1.58496 = 0.1257
    # (OCI GB300 across 2 racks has one partner port per port: no fan-in to read off it)
    assert every["FAN_IN_SLOWDOWN_PER_DOUBLING"] == pytest.approx(0.1257, rel=2e-3)
    without_mi355x = derive_issue20_constants([t for t in tables if t.system != "OCI MI355X Pollara"])
    assert without_mi355x["FAN_IN_SLOWDOWN_PER_DOUBLING"] == 0.0  # no other tuning table on more than 2 nodes


def test_multi_node_band_is_kept_because_rederiving_it_buys_no_held_out_coverage(rows):
    """Issue 20, item 4: the multi_node all-reduce band re-derived from every tuning row (0.906-2.789 at this
    commit; 3.214 before the TCPX/TCPXO floor) covers no more held-out rows than the shipped 0.902-2.060
    (86% of 44 both), and re-deriving it leaving each system out covers 85% of 172 rows against the shipped
    band's 87%: the wider high end only widens the band, so bands.json keeps 2.060."""
    b = band_leave_one_system_out(rows)
    assert b["shipped"] == (0.902, 2.06)
    assert b["heldout_coverage_rederived"] <= b["heldout_coverage_shipped"]
    assert b["shipped_coverage"] >= b["loso_coverage"]
    assert b["rederived"][1] > b["shipped"][1]  # the re-derived band is wider, not better
