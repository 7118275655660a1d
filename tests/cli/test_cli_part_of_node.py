"""``commcost collective --system dgx-a100 --gpus 4 --nodes 1``: a group on part of a node (issue 14)."""

from __future__ import annotations

import json

import pytest

from conftest import run_commcost


def test_four_of_eight_gpus_on_one_node_is_accepted_and_priced_on_four():
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--system", "dgx-a100",
                     "--gpus", "4", "--nodes", "1", "--algorithm", "ring", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["gpus"] == 4
    # ring over 4 GPUs of NVLink 3 (240 GB/s), Simple wins at 1 GiB, at its one-node reach e_s = 350/370:
    # 2 (3/4) S / (240e9 x 350/370) = 1,610,612,736 / 227.03e9 = 7.094 ms of bandwidth
    assert d["bandwidth_s"] == pytest.approx(2 * 3 / 4 * 2 ** 30 / (240e9 * 350 / 370))
    assert d["bandwidth_s"] == pytest.approx(7.0944e-3, rel=1e-4)


def test_a_group_that_cannot_span_the_nodes_is_still_refused():
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--system", "dgx-a100",
                     "--gpus", "4", "--nodes", "2")
    assert r.returncode == 2
    assert "packs onto ceil(4/8) = 1 node(s)" in r.stderr and len(r.stderr.strip().splitlines()) == 1
