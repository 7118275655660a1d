"""Direct tests of ``report/trace.py``: a hand-made two-rank trace summarized and rendered in-process; the
breakdown by hand in the text (ms) and in strict JSON whose numbers name their unit; 80 columns."""

from __future__ import annotations

import importlib.util

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.units import US
from commcost.report.trace import render_trace_text, trace_to_dict
from commcost.trace.summary import analyze_trace, predict_rows
from conftest import ROOT, numbers_without_a_unit, strict_round_trip, wide_lines

# the hand-made Kineto traces of tests/trace/_kineto.py ("trace" alone would be the standard library's module)
_spec = importlib.util.spec_from_file_location("_kineto", ROOT / "tests" / "trace" / "_kineto.py")
_kineto = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_kineto)


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    for rank in (0, 1):
        b = _kineto.TraceBuilder(rank=rank)
        b.step(1, 0, 200)
        b.compute(0, 150)                        # compute [0, 150) us
        b.param_comms(100, 1, nelems_in=262_144)  # an all-reduce of 262,144 float32 = 1 MiB on 2 ranks
        b.nccl(100, 100)                         # communication [100, 200) us
        b.write(d / f"rank{rank}.json")
    return analyze_trace(d)


def test_breakdown_by_hand_in_json(summary):
    d = strict_round_trip(trace_to_dict(summary))
    assert numbers_without_a_unit(d) == []
    assert [r["rank"] for r in d["ranks"]] == [0, 1]
    r0 = d["ranks"][0]
    # compute 150 us, communication 100 us, overlap [100, 150) = 50 us, exposed 100 - 50 = 50 us, span 200 us
    assert r0["compute_s"] == pytest.approx(150 * US) and r0["communication_s"] == pytest.approx(100 * US)
    assert r0["overlap_s"] == pytest.approx(50 * US) and r0["exposed_communication_s"] == pytest.approx(50 * US)
    assert r0["overlap_pct"] == pytest.approx(50.0) and r0["span_s"] == pytest.approx(200 * US)
    (row,) = d["collectives"]
    assert (row["op"], row["size_bytes"], row["group_size"]) == ("all_reduce", 262_144 * 4, 2)
    # algbw = S / t = 1,048,576 B / 100 us = 10.49 GB/s; busbw = 2(P-1)/P algbw = algbw on 2 ranks
    assert row["time_s"] == pytest.approx(100 * US)
    assert row["algbw_bytes_per_s"] == pytest.approx(1_048_576 / 100e-6)
    assert row["busbw_bytes_per_s"] == pytest.approx(1_048_576 / 100e-6)


def test_text_in_ms_within_80_columns(summary):
    text = render_trace_text(summary, width=80)
    assert wide_lines(text) == []
    flat = " ".join(text.split())
    assert "); times in ms" in flat
    assert "0.150" in flat and "0.100" in flat and "0.050" in flat  # 150, 100, 50 us in ms


def test_with_a_model_the_prediction_is_strict_json(summary):
    # ring on B = 10 GB/s, a = 5 us, P = 2: 2 * 1 * 5 us + 1 * 1,048,576 / 10e9 s = 10 + 104.86 us = 114.86 us
    model = FlatLinkModel(link=Link(bandwidth_bytes_per_s=10e9, latency_s=5e-6))
    preds = predict_rows(summary.rows, model, algorithm="ring")
    d = strict_round_trip(trace_to_dict(summary, preds, model))
    (row,) = d["collectives"]
    assert row["predicted_s"] == pytest.approx(2 * 5e-6 + 1_048_576 / 10e9)
    # error = (predicted - measured) / measured = (114.86 - 100) / 100 = 14.9%
    assert row["error"] == pytest.approx((2 * 5e-6 + 1_048_576 / 10e9 - 100e-6) / 100e-6)
    assert wide_lines(render_trace_text(summary, preds, model, width=80)) == []


def test_failed_ranks_warning_counts_the_files():
    from types import SimpleNamespace

    from commcost.report.trace import failed_ranks_warning

    s = SimpleNamespace(failed=[SimpleNamespace(message="rank3.json: truncated")], ranks=[0, 1, 2])
    # 1 failed + 3 read = 4 files
    assert failed_ranks_warning(s) == "1 of 4 rank files not read (rank3.json: truncated); the report covers the other 3"
