"""trace names each collective by the op the program called, in every section; advice fits the op; the
fabric share states the error column as the speed the op got."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from commcost.cli import main

SAMPLE = str(DATA / "traces" / "trace_filter__sampled_rank-0.json.gz")


def test_one_op_name_per_collective_and_advice_fitted_to_it(capsys):
    assert main(["trace", SAMPLE, "--system", "dgx-h100", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    by_op = set(d["ranks"][0]["communication_by_op_s"])
    table = {c["op"] for c in d["collectives"]}
    # the sample's all-to-all runs as NCCL SendRecv kernels: named all_to_all everywhere, never send_recv
    assert "all_to_all" in by_op and "all_to_all" in table
    assert "send_recv" not in by_op | table
    exposed = [a for a in d["advice"] if a["kind"] == "exposed_communication"]
    assert exposed and "all_to_all" in exposed[0]["what"]
    assert "bucket" not in exposed[0]["what"]            # no DDP bucket carries an all-to-all
    assert main(["trace", SAMPLE, "--system", "dgx-h100"]) == 0
    assert "send_recv" not in capsys.readouterr().out


def test_fabric_share_is_the_time_weighted_speed_against_the_model(capsys):
    assert main(["trace", SAMPLE, "--system", "dgx-h100", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = [c for c in d["collectives"] if c["op"] == "all_to_all" and c.get("predicted_s") is not None]
    # share = sum calls * T_pred / sum calls * t (trace/fabric_share.py)
    measured = sum(c["count"] * c["measured_s"] for c in rows)
    fabric = sum(c["count"] * c["predicted_s"] for c in rows)
    got = d["fabric_share"]["all_to_all"]
    assert got["share"] == pytest.approx(fabric / measured, rel=1e-12)
    assert got["calls"] == sum(c["count"] for c in rows)
    assert got["share"] < 0.2           # the sample's all-to-all runs far below the fabric
    assert main(["trace", SAMPLE, "--system", "dgx-h100"]) == 0
    assert f"all_to_all runs at {100 * got['share']:.0f}% of the fabric" in capsys.readouterr().out
